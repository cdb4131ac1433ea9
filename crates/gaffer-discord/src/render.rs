//! What the adapter shows, as Discord message bodies: pure functions of the
//! app's wire types, so every message can be recomputed from the journal at any
//! time and compared with what was last sent (see [`digest`]).

use crate::rest::Attachment;
use gaffer_protocol::api;
use gaffer_protocol::receipts::{short_sha, CiReceipt, PullRequestReceipt};
use serde_json::{json, Value};

/// Discord's limit for a message's content, in characters.
pub const MAX_CONTENT: usize = 2000;
/// Text longer than this goes into an attached file instead.
const INLINE_LIMIT: usize = 1500;

/// `custom_id` prefix of an approval's Allow button.
pub const ALLOW: &str = "gaffer:allow:";
/// `custom_id` prefix of an approval's Deny button.
pub const DENY: &str = "gaffer:deny:";
/// `custom_id` prefix of a tool approval's "Allow for this task" button.
pub const ALLOW_TASK: &str = "gaffer:allow-task:";

/// The `custom_id`s of approval `id`'s buttons: how its message is recognised.
pub fn button_ids(id: &str) -> Vec<String> {
    [ALLOW, ALLOW_TASK, DENY]
        .iter()
        .map(|p| format!("{p}{id}"))
        .collect()
}

/// At most `max` characters of `s`, with `…` when cut.
pub fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// A short digest of a message body: equal bodies, equal digests.
pub fn digest(body: &Value) -> String {
    use sha2::Digest;
    hex::encode(&sha2::Sha256::digest(body.to_string().as_bytes())[..12])
}

fn stage_mark(stage: &str) -> &'static str {
    match stage {
        "done" => "✅",
        "failed" | "blocked" => "❌",
        "cancelled" => "⏹️",
        "queued" => "🕓",
        _ => "⏳",
    }
}

/// Body with nobody pinged, whatever the text holds (`@everyone` in a request).
fn body(content: String) -> Value {
    json!({ "content": clip(&content, MAX_CONTENT), "allowed_mentions": { "parse": [] } })
}

/// The thread's name: id and request, within Discord's 100 characters.
pub fn thread_name(task: &api::Task) -> String {
    let first = task.request.lines().next().unwrap_or("").trim();
    clip(&format!("{} {first}", task.id), 100)
}

/// The message in the room that the task's thread hangs from; edited as the stage moves.
pub fn header(task: &api::Task) -> Value {
    body(format!(
        "{} **{}** · `{}` in **{}** · {}\n> {}\nasked by {}",
        stage_mark(&task.stage),
        task.stage,
        task.id,
        task.project,
        cost(task),
        clip(&task.request.replace('\n', "\n> "), 800),
        task.created_by,
    ))
}

fn cost(task: &api::Task) -> String {
    format!(
        "{} tokens, {}",
        task.tokens,
        gaffer_core::format_cost(task.cost_usd)
    )
}

fn step_mark(state: &str) -> &'static str {
    match state {
        "completed" => "✅",
        "failed" | "manual_required" | "effect_unknown" => "❌",
        "started" | "reconciling" => "⏳",
        _ => "▫️",
    }
}

/// The pull request shipping opened (or found), once it has: from the finished
/// task's summary, or the `pr` step's receipt while CI runs.
pub fn pull_request(detail: &api::TaskDetail) -> Option<PullRequestReceipt> {
    let step = || {
        detail
            .steps
            .iter()
            .find(|s| s.id == PullRequestReceipt::STEP && s.state == "completed")
            .and_then(|s| s.receipt.as_ref())
            .and_then(PullRequestReceipt::from_receipt)
    };
    detail
        .task
        .outcome
        .as_ref()
        .and_then(PullRequestReceipt::from_summary)
        .or_else(step)
}

/// The status message at the top of the thread, edited in place: stage, steps,
/// cost, pull request, outcome.
pub fn status(detail: &api::TaskDetail) -> Value {
    let t = &detail.task;
    let mut out = format!("{} **{}** · {}\n", stage_mark(&t.stage), t.stage, cost(t));
    // The newest steps when there are many: the message must stay one message.
    let skip = detail.steps.len().saturating_sub(20);
    if skip > 0 {
        out.push_str(&format!("… {skip} earlier steps\n"));
    }
    for s in &detail.steps[skip..] {
        out.push_str(&format!("{} `{}` {}\n", step_mark(&s.state), s.id, s.name));
    }
    if let Some(pr) = pull_request(detail) {
        out.push_str(&format!("🔗 Pull request: {}\n", pr.url));
    }
    if let Some(o) = &t.outcome {
        if let Some(branch) = o["branch"].as_str() {
            out.push_str(&format!("🌿 Branch `{branch}`\n"));
        }
        if let Some(reason) = o["reason"].as_str().or_else(|| o.as_str()) {
            out.push_str(&format!("Reason: {}\n", clip(reason, 500)));
        }
    }
    body(out)
}

/// A message posted once into the thread for something worth reading there.
#[derive(Debug, Clone, PartialEq)]
pub struct Note {
    /// Unique within the task (the step id and attempt, or `final`).
    pub key: String,
    /// The message.
    pub body: Value,
    /// Long output, attached as a file.
    pub attachment: Option<(String, String)>,
    /// When it happened (orders notes and approvals in the thread).
    pub at: i64,
}

impl Note {
    /// The attachment as the REST client sends it.
    pub fn files(&self) -> Vec<Attachment> {
        self.attachment
            .iter()
            .map(|(name, text)| Attachment {
                filename: name.clone(),
                bytes: text.as_bytes().to_vec(),
            })
            .collect()
    }
}

/// `text` inline when short; otherwise its head inline and the whole as a file.
fn with_output(title: String, text: &str, filename: &str, key: String, at: i64) -> Note {
    let text = text.trim_end();
    if text.is_empty() {
        return Note {
            key,
            body: body(title),
            attachment: None,
            at,
        };
    }
    if text.chars().count() <= INLINE_LIMIT {
        return Note {
            key,
            body: body(format!(
                "{title}\n```\n{}\n```",
                text.replace("```", "`\u{200b}``")
            )),
            attachment: None,
            at,
        };
    }
    Note {
        key,
        body: body(format!("{title}\n(full output attached: `{filename}`)")),
        attachment: Some((filename.to_owned(), text.to_owned())),
        at,
    }
}

/// The notes a task has earned so far: plan, review verdicts, check results, owner
/// fixes, the pull request and each CI result (or, without a forge, the branch
/// kept), and how it ended. Each is keyed so it is posted once, when what it says
/// has happened.
pub fn notes(detail: &api::TaskDetail) -> Vec<Note> {
    let mut out = Vec::new();
    for s in &detail.steps {
        let key = format!("{}#{}", s.id, s.attempt);
        let at = s.updated_at;
        let Some(r) = s.receipt.as_ref().filter(|_| s.state == "completed") else {
            if s.state == "failed" {
                let err = s.error.clone().unwrap_or_default();
                out.push(with_output(
                    format!("❌ `{}` failed", s.id),
                    &err,
                    "error.txt",
                    key,
                    at,
                ));
            }
            continue;
        };
        if s.id == "plan" {
            let mut text = String::new();
            for (n, st) in r["plan"]["subtasks"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
            {
                text.push_str(&format!(
                    "{}. {} — {}\n",
                    n + 1,
                    st["title"].as_str().unwrap_or(""),
                    st["description"].as_str().unwrap_or("")
                ));
            }
            out.push(with_output(
                "📝 **Plan**".into(),
                &text,
                "plan.txt",
                key,
                at,
            ));
        } else if s.id.starts_with("review/") {
            let v = &r["verdict"];
            let verdict = v["verdict"].as_str().unwrap_or("?");
            // `feedback` for changes requested, `reason` for blocked (the verdict contract).
            let text = v["feedback"]
                .as_str()
                .or_else(|| v["reason"].as_str())
                .unwrap_or("");
            out.push(with_output(
                format!("🔍 Review: **{verdict}**"),
                text,
                "review.txt",
                key,
                at,
            ));
        } else if s.id.starts_with("arbiter/") {
            let (title, text) = ruling_note(r);
            out.push(with_output(title, &text, "ruling.txt", key, at));
        } else if s.id.starts_with("check/") {
            let passed = r["passed"].as_bool() == Some(true);
            let cmd = r["command"].as_str().unwrap_or("(none)");
            let title = format!(
                "{} Check `{}` {}",
                if passed { "✅" } else { "❌" },
                clip(cmd, 200),
                if passed { "passed" } else { "failed" }
            );
            let output = if passed {
                ""
            } else {
                r["output_tail"].as_str().unwrap_or("")
            };
            out.push(with_output(title, output, "check-output.txt", key, at));
        } else if s.id == "ship" && r["forge"].is_null() {
            // With a forge, shipping is told by the pull request and CI notes.
            let text = format!(
                "🚀 Shipped on branch `{}`: it stays in the repository (no forge configured)",
                r["branch"].as_str().unwrap_or("?")
            );
            out.push(Note {
                key,
                body: body(text),
                attachment: None,
                at,
            });
        } else if s.id == PullRequestReceipt::STEP {
            if let Some(pr) = PullRequestReceipt::from_receipt(r) {
                out.push(pull_request_note(&pr, key, at));
            }
        } else if s.id.starts_with(CiReceipt::STEP_PREFIX) {
            if let Some(ci) = CiReceipt::from_receipt(r) {
                out.push(ci_note(&ci, key, at));
            }
        } else if let Some(note) = follow_up_step_note(&s.id, r, &key, at) {
            out.push(note);
        } else if let Some(n) = s.id.strip_prefix("fix/") {
            let title = format!("🔧 Fix {n} {}", fix_reason(r["reason"].as_str()))
                .trim_end()
                .to_owned();
            let summary = r["summary"].as_str().unwrap_or_default();
            out.push(with_output(title, summary, "fix.txt", key, at));
        }
    }
    out.extend(detail.follow_ups.iter().map(follow_up_note));
    if let Some(reason) = &detail.following_ended {
        out.push(Note {
            key: "following-ended".into(),
            body: body(format!(
                "⏹ No longer following the pull request: {}",
                clip(reason, 1500)
            )),
            attachment: None,
            at: detail.task.updated_at,
        });
    }
    let t = &detail.task;
    if matches!(
        t.stage.as_str(),
        "done" | "failed" | "cancelled" | "blocked"
    ) {
        let reason = t.outcome.as_ref().and_then(|o| {
            o["reason"]
                .as_str()
                .or_else(|| o.as_str())
                .map(str::to_owned)
        });
        let text = match (t.stage.as_str(), reason) {
            ("done", _) => match pull_request(detail) {
                Some(pr) => format!("✅ Done · {} · pull request {}", cost(t), pr.url),
                None => format!("✅ Done · {}", cost(t)),
            },
            (stage, Some(r)) => format!("{} {stage}: {}", stage_mark(stage), clip(&r, 1500)),
            (stage, None) => format!("{} {stage}", stage_mark(stage)),
        };
        out.push(Note {
            key: "final".into(),
            body: body(text),
            attachment: None,
            at: t.updated_at,
        });
    }
    out
}

/// Why a follow-up opened on the done task: people's review comments on the pull
/// request (each with its file:line and author; all of them attached when long), or
/// a base that moved under it.
fn follow_up_note(f: &api::FollowUp) -> Note {
    let d = &f.detail;
    let key = format!("follow-up/{}", f.n);
    match f.kind.as_str() {
        "review_comments" => {
            let comments = d["comments"].as_array().map(Vec::as_slice).unwrap_or(&[]);
            let n = if comments.is_empty() {
                f.keys.len()
            } else {
                comments.len()
            };
            let on = d["pull_request"]
                .as_u64()
                .map(|p| format!(" on pull request #{p}"))
                .unwrap_or_default();
            let text: String = comments
                .iter()
                .map(|c| {
                    let place = match (c["path"].as_str(), c["line"].as_u64()) {
                        (Some(p), Some(l)) => format!("{p}:{l}"),
                        (Some(p), None) => p.to_owned(),
                        _ => "the conversation".to_owned(),
                    };
                    format!(
                        "{} on {place}: {}\n",
                        c["author"].as_str().unwrap_or("someone"),
                        c["body"].as_str().unwrap_or_default().trim()
                    )
                })
                .collect();
            let title = format!(
                "↻ Follow-up {}: {n} review comment{}{on}; the owner works on {}",
                f.n,
                if n == 1 { "" } else { "s" },
                if n == 1 { "it" } else { "them" }
            );
            with_output(title, &text, "review-comments.txt", key, f.opened_at)
        }
        "merge_conflict" => {
            let base = clip(d["base"].as_str().unwrap_or("?"), 100).replace('`', "'");
            let how = if d["mergeable"] == "behind" {
                "the pull request must catch up with it"
            } else {
                "the pull request conflicts with it"
            };
            Note {
                key,
                body: body(format!(
                    "↻ Follow-up {}: the base `{base}` moved and {how}; the branch is brought onto it, checked and pushed again",
                    f.n
                )),
                attachment: None,
                at: f.opened_at,
            }
        }
        other => Note {
            key,
            body: body(format!("↻ Follow-up {}: {}", f.n, clip(other, 100))),
            attachment: None,
            at: f.opened_at,
        },
    }
}

/// What a follow-up's own steps did, for the thread: the update onto the base
/// (`sync/k`), the owner's conflict resolution (`resolve/r`), the replies posted
/// under the review comments (`reply/n`). `None`: not one of them.
fn follow_up_step_note(id: &str, r: &Value, key: &str, at: i64) -> Option<Note> {
    let kind = id.split('/').next().unwrap_or_default();
    let files = || {
        r["files"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(|f| format!("`{}`", clip(f, 100).replace('`', "'")))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let text = match (kind, r["outcome"].as_str()) {
        ("sync", Some("updated")) => format!(
            "🔀 Brought onto `{}`: no conflicts, the branch is at `{}`",
            clip(r["base"].as_str().unwrap_or("the base"), 100).replace('`', "'"),
            short_sha(r["head"].as_str().unwrap_or_default())
        ),
        ("sync", Some("conflicted")) => format!(
            "🔀 Bringing the branch onto its base stopped on conflicts in {}; the owner resolves them",
            files()
        ),
        ("sync", Some("up_to_date")) => {
            "🔀 The branch already holds its base: nothing to push".to_owned()
        }
        ("resolve", Some("updated")) => format!(
            "✅ Conflicts resolved: the branch is at `{}`",
            short_sha(r["head"].as_str().unwrap_or_default())
        ),
        ("resolve", Some("conflicted")) => format!(
            "🔀 Resolved; the update stopped again on conflicts in {}",
            files()
        ),
        ("resolve", Some("unresolved")) => format!(
            "⚠️ Conflict markers left in {}; the owner gets another round",
            files()
        ),
        ("reply", _) => {
            let replies = r["replies"].as_array()?;
            let links: Vec<String> = replies
                .iter()
                .filter_map(|x| x["url"].as_str())
                .map(|u| format!("<{u}>"))
                .collect();
            format!(
                "↩ Replied to {} review comment{}: {}",
                replies.len(),
                if replies.len() == 1 { "" } else { "s" },
                links.join(" ")
            )
        }
        _ => return None,
    };
    Some(Note {
        key: key.to_owned(),
        body: body(clip(&text, MAX_CONTENT)),
        attachment: None,
        at,
    })
}

/// The arbiter's ruling and, when it has a panel, each member's opinion (or why it
/// gave none) in front of it.
fn ruling_note(r: &Value) -> (String, String) {
    let ruling = &r["ruling"];
    let word = ruling["ruling"].as_str().unwrap_or("?");
    // `instructions` for revise, `reason` otherwise (the ruling contract).
    let why = ruling["instructions"]
        .as_str()
        .or_else(|| ruling["reason"].as_str())
        .unwrap_or("");
    let mut text = why.to_owned();
    if let Some(panel) = r["panel"].as_array().filter(|p| !p.is_empty()) {
        text.push_str("\n\nPanel:");
        for o in panel {
            let member = o["member"].as_str().unwrap_or("?");
            let said = match o["opinion"]["opinion"].as_str() {
                Some(w) => format!("{w}: {}", o["opinion"]["reason"].as_str().unwrap_or("")),
                None => format!(
                    "no opinion ({})",
                    o["error"].as_str().unwrap_or("no answer")
                ),
            };
            text.push_str(&format!("\n• {member} — {said}"));
        }
    }
    (format!("⚖️ Arbiter: **{word}**"), text.trim().to_owned())
}

/// The pull request, once it is open.
fn pull_request_note(pr: &PullRequestReceipt, key: String, at: i64) -> Note {
    let how = if pr.created { "opened" } else { "found open" };
    let mut text = format!(
        "🚀 Pull request #{} {how}: {}\n`{}` → `{}`",
        pr.number, pr.url, pr.head, pr.base
    );
    for w in &pr.warnings {
        text.push_str(&format!("\n⚠️ {}", clip(w, 300)));
    }
    Note {
        key,
        body: body(text),
        attachment: None,
        at,
    }
}

/// What CI said about one pushed commit; a failure with the end of each failing
/// check's log.
fn ci_note(ci: &CiReceipt, key: String, at: i64) -> Note {
    let sha = short_sha(&ci.sha);
    if ci.passed() {
        return Note {
            key,
            body: body(format!("✅ CI passed on `{sha}`")),
            attachment: None,
            at,
        };
    }
    let names: Vec<String> = ci
        .failing
        .iter()
        .map(|f| format!("**{}**", f.check))
        .collect();
    let mut title = format!("❌ CI failed on `{sha}`: {}", names.join(", "));
    if names.is_empty() {
        title.push_str(&format!("**{}**", ci.state));
    }
    for url in ci.failing.iter().filter_map(|f| f.url.as_deref()) {
        title.push_str(&format!("\n🔗 {url}"));
    }
    let logs: Vec<String> = ci
        .failing
        .iter()
        .map(|f| match ci.failing.len() {
            1 => f.text.clone(),
            _ => format!("── {} ──\n{}", f.check, f.text),
        })
        .collect();
    with_output(title, &logs.join("\n"), "ci-failure.txt", key, at)
}

/// Why an owner fix was asked for, from its receipt's `reason`.
fn fix_reason(reason: Option<&str>) -> &'static str {
    match reason {
        Some("ci") => "for the CI failure",
        Some("check") => "for the failing check",
        Some("arbiter") => "as the arbiter ruled",
        Some("review") => "after the review",
        _ => "",
    }
}

/// Who settled an approval, in words: a person (`approved by ana (via web)`,
/// `approved for this task by ana (via discord)`) or a policy, whose name says
/// it all (`approved: allowed for this task by ana via discord`).
pub fn decided_by(a: &api::Approval) -> String {
    match (&a.decided_by, a.state.as_str()) {
        (Some(d), state) if d.kind == "policy" => format!("{state}: {}", d.name),
        (Some(d), state) if a.for_task => {
            format!("{state} for this task by {} (via {})", d.name, d.via)
        }
        (Some(d), state) => format!("{state} by {} (via {})", d.name, d.via),
        (None, "expired") => "expired: nobody decided in time".into(),
        (None, "withdrawn") => "withdrawn: the task no longer waits for it".into(),
        (None, state) => state.to_owned(),
    }
}

/// One approval: the question with Allow / Deny while pending; who decided (and
/// no buttons) once settled.
pub fn approval(a: &api::Approval) -> Value {
    let mut text = format!(
        "🙋 **Approval** `{}` · {} · task `{}`\n{}\n",
        a.id,
        a.kind,
        a.task_id,
        clip(&a.summary, 600)
    );
    let d = &a.details;
    if let Some(cmd) = d["input"]["command"]
        .as_str()
        .or_else(|| d["command"].as_str())
    {
        text.push_str(&format!("```\n{}\n```\n", clip(cmd, 400)));
    } else if let Some(plan) = d["text"].as_str() {
        text.push_str(&format!("```\n{}\n```\n", clip(plan, 900)));
    } else if let Some(memory) = d["memory"].as_str().filter(|_| a.kind == "memory") {
        // What every later task's agents would be told, whole as far as it fits.
        text.push_str(&format!("```\n{}\n```\n", clip(memory, 1500)));
    }
    // What the buttons do, for kinds that name it: a stall continues or interrupts
    // (or the task is cancelled with /cancel), a budget raises the cap or stops.
    let (allow, deny) = match a.kind.as_str() {
        "stall" => ("Continue", "Interrupt"),
        "budget" => ("Raise cap", "Stop task"),
        _ => ("Allow", "Deny"),
    };
    if a.state == "pending" {
        match a.kind.as_str() {
            "stall" => text.push_str(&format!("Interrupt sends your `/deny` note to the agent; `/cancel {}` stops the task.\n", a.task_id)),
            "budget" => text.push_str("Raise by the amount in an `/approve` note (like `$5` or `200k`), else by the cap again.\n"),
            _ => {}
        }
    }
    let components = if a.state == "pending" {
        let mut buttons = vec![
            json!({ "type": 2, "style": 3, "label": allow, "custom_id": format!("{ALLOW}{}", a.id) }),
        ];
        // A grant needs a command to match later requests against.
        if a.kind == "tool" && gaffer_core::granted_command(&a.details).is_some() {
            buttons.push(json!({ "type": 2, "style": 1, "label": "Allow for this task", "custom_id": format!("{ALLOW_TASK}{}", a.id) }));
        }
        buttons.push(
            json!({ "type": 2, "style": 4, "label": deny, "custom_id": format!("{DENY}{}", a.id) }),
        );
        json!([{ "type": 1, "components": buttons }])
    } else {
        let mark = if a.state == "approved" { "✅" } else { "🚫" };
        text.push_str(&format!("{mark} **{}**", decided_by(a)));
        if let Some(note) = a.note.as_deref().filter(|_| a.decided_by.is_some()) {
            text.push_str(&format!(": {}", clip(note, 300)));
        }
        json!([])
    };
    let mut b = body(text);
    b["components"] = components;
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn approval_of(state: &str, by: Option<(&str, &str)>) -> api::Approval {
        api::Approval {
            id: "ap-1".into(),
            task_id: "t-1".into(),
            project_id: "p-1".into(),
            project: "demo".into(),
            step_id: "plan-approval".into(),
            attempt: 1,
            kind: "plan".into(),
            state: state.into(),
            summary: "Approve the plan?".into(),
            details: json!({ "text": "1. add a section" }),
            decided_by: by.map(|(name, via)| api::DecidedBy {
                kind: "user".into(),
                name: name.into(),
                via: via.into(),
            }),
            note: None,
            requested_at: 1,
            decided_at: None,
            expires_at: None,
            for_task: false,
        }
    }

    #[test]
    fn a_follow_up_says_why_it_opened_and_its_steps_what_they_did() {
        let review = api::FollowUp {
            n: 2,
            kind: "review_comments".into(),
            keys: vec!["review-comment:7".into(), "comment:9".into()],
            detail: json!({ "pull_request": 12, "comments": [
                { "author": "rita", "path": "src/list.rs", "line": 4, "body": "Name this flag --json, like the others." },
                { "author": "sam", "body": "  Please add a changelog entry.\n" },
            ]}),
            opened_at: 5,
        };
        let note = follow_up_note(&review);
        assert_eq!(note.key, "follow-up/2");
        assert_eq!(note.at, 5);
        assert_eq!(
            note.body["content"],
            "↻ Follow-up 2: 2 review comments on pull request #12; the owner works on them\n```\nrita on src/list.rs:4: Name this flag --json, like the others.\nsam on the conversation: Please add a changelog entry.\n```"
        );
        let conflict = api::FollowUp {
            n: 3,
            kind: "merge_conflict".into(),
            keys: vec!["merge_conflict:abc".into()],
            detail: json!({ "head_sha": "abc", "base": "main", "mergeable": "conflicted" }),
            opened_at: 9,
        };
        assert_eq!(
            follow_up_note(&conflict).body["content"],
            "↻ Follow-up 3: the base `main` moved and the pull request conflicts with it; the branch is brought onto it, checked and pushed again"
        );
        let step = |id: &str, r: Value| {
            follow_up_step_note(id, &r, "k", 1)
                .map(|n| n.body["content"].as_str().unwrap().to_owned())
        };
        assert_eq!(
            step("sync/1", json!({ "outcome": "conflicted", "files": ["src/list.rs", "README.md"] })).unwrap(),
            "🔀 Bringing the branch onto its base stopped on conflicts in `src/list.rs`, `README.md`; the owner resolves them"
        );
        assert_eq!(
            step(
                "resolve/1",
                json!({ "outcome": "updated", "head": "0123456789abcdef" })
            )
            .unwrap(),
            "✅ Conflicts resolved: the branch is at `0123456789`"
        );
        assert_eq!(
            step("reply/2", json!({ "follow_up": 2, "replies": [{ "url": "https://forge/c/1" }, { "url": "https://forge/c/2" }] })).unwrap(),
            "↩ Replied to 2 review comments: <https://forge/c/1> <https://forge/c/2>"
        );
        assert_eq!(step("code/1", json!({ "outcome": "updated" })), None);
        assert_eq!(
            step("reply/1", json!({})),
            None,
            "no replies listed: nothing to say"
        );
    }

    #[test]
    fn stall_and_budget_buttons_say_what_they_do() {
        let labels = |kind: &str| {
            let mut a = approval_of("pending", None);
            a.kind = kind.into();
            let m = approval(&a);
            let labels: Vec<String> = m["components"][0]["components"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| b["label"].as_str().unwrap().to_owned())
                .collect();
            (labels, m["content"].as_str().unwrap_or_default().to_owned())
        };
        let (stall, text) = labels("stall");
        assert_eq!(stall, ["Continue", "Interrupt"]);
        assert!(text.contains("/cancel t-1"), "{text}");
        let (budget, text) = labels("budget");
        assert_eq!(budget, ["Raise cap", "Stop task"]);
        assert!(text.contains("$5"), "{text}");
        assert_eq!(labels("plan").0, ["Allow", "Deny"]);
    }

    #[test]
    fn a_pending_approval_has_allow_and_deny_and_a_settled_one_names_the_decider_without_buttons() {
        let pending = approval(&approval_of("pending", None));
        let ids: Vec<&str> = pending["components"][0]["components"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["custom_id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["gaffer:allow:ap-1", "gaffer:deny:ap-1"]);
        let settled = approval(&approval_of("denied", Some(("ana", "web"))));
        assert_eq!(settled["components"], json!([]));
        assert!(settled["content"]
            .as_str()
            .unwrap()
            .contains("denied by ana (via web)"));
        assert_ne!(digest(&pending), digest(&settled));
    }

    #[test]
    fn a_ruling_note_lists_each_panel_opinion_and_the_failures() {
        // The arbiter receipt's shape (`gaffer-engine` suite::panel checks it).
        let receipt = json!({
            "ruling": { "ruling": "revise", "instructions": "Pin the install with --locked." },
            "panel": [
                { "member": "claude", "agent": "claude", "opinion": { "opinion": "proceed", "reason": "the check passes" }, "text": "…", "usage": {} },
                { "member": "codex:gpt-5-codex", "agent": "codex", "model": "gpt-5-codex", "opinion": { "opinion": "revise", "reason": "use --locked" }, "text": "…", "usage": {} },
                { "member": "openai:gpt-4.1", "agent": "openai", "model": "gpt-4.1", "error": "gave no opinion within 600 s (panel_timeout_secs)", "text": "", "usage": {} },
            ],
        });
        let (title, text) = ruling_note(&receipt);
        assert_eq!(title, "⚖️ Arbiter: **revise**");
        assert_eq!(
            text,
            "Pin the install with --locked.\n\nPanel:\n• claude — proceed: the check passes\n• codex:gpt-5-codex — revise: use --locked\n• openai:gpt-4.1 — no opinion (gave no opinion within 600 s (panel_timeout_secs))"
        );
        // Without a panel, the ruling alone.
        let (_, alone) =
            ruling_note(&json!({ "ruling": { "ruling": "proceed", "reason": "fine" } }));
        assert_eq!(alone, "fine");
    }

    #[test]
    fn long_output_is_attached_and_short_output_inline() {
        let short = with_output("t".into(), "one line", "o.txt", "k".into(), 0);
        assert!(short.attachment.is_none());
        assert!(short.body["content"].as_str().unwrap().contains("one line"));
        let long_text = "x".repeat(5000);
        let long = with_output("t".into(), &long_text, "o.txt", "k".into(), 0);
        assert_eq!(long.attachment, Some(("o.txt".into(), long_text)));
        assert!(long.body["content"].as_str().unwrap().chars().count() <= MAX_CONTENT);
    }

    #[test]
    fn mentions_in_a_request_ping_nobody_and_content_stays_within_the_limit() {
        let task = api::Task {
            id: "t-1".into(),
            project_id: "p-1".into(),
            project: "demo".into(),
            request: format!("@everyone {}", "y".repeat(5000)),
            stage: "queued".into(),
            after: Vec::new(),
            created_by: "ana via discord".into(),
            agent: None,
            key: None,
            outcome: None,
            tokens: 0,
            cost_usd: Some(0.0),
            created_at: 0,
            updated_at: 0,
        };
        let h = header(&task);
        assert_eq!(h["allowed_mentions"], json!({ "parse": [] }));
        assert!(h["content"].as_str().unwrap().chars().count() <= MAX_CONTENT);
        assert!(thread_name(&task).chars().count() <= 100);
    }
}

/// One transcript line for an agent activity (`None`: not shown, like usage).
/// Backticks in what the agent wrote are replaced so it cannot close the code span.
pub fn transcript_line(a: &Value) -> Option<String> {
    let flat = |v: &Value, max: usize| {
        let text: String = v
            .as_str()
            .unwrap_or_default()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        clip(&text, max)
    };
    let code = |s: String| s.replace('`', "'");
    match a["type"].as_str()? {
        "tool_call" => Some(format!(
            "↳ **{}** `{}`",
            code(flat(&a["name"], 40)),
            code(clip(
                &gaffer_protocol::activity::tool_input(&a["input"])
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" "),
                300
            ))
        )),
        "file_change" => Some(format!(
            "✎ `{}` ({})",
            code(flat(&a["path"], 200)),
            flat(&a["kind"], 20)
        )),
        "assistant_text" => Some(format!("💬 {}", flat(&a["text"], 800))),
        "rate_limited" => Some(format!("⏸ rate limited until {}", flat(&a["until"], 40))),
        _ => None,
    }
}

/// The transcript line for a person steering the agent from elsewhere (the page, the
/// CLI, the API): their message, or the turn they stopped. A reply in the thread is
/// already there in its author's own words, so it is not repeated.
pub fn steer_line(e: &gaffer_core::Event) -> Option<String> {
    let flat = |s: &str, max: usize| clip(&s.split_whitespace().collect::<Vec<_>>().join(" "), max);
    match e {
        gaffer_core::Event::MessageSent { text, by, .. } if by.via != "discord" => Some(format!(
            "✉ **{}** ({}) to the agent: {}",
            flat(&by.name, 60),
            flat(&by.via, 40),
            flat(text, 800)
        )),
        gaffer_core::Event::TurnInterrupted { by, .. } => Some(format!(
            "‖ **{}** ({}) stopped the turn; the agent waits for a message",
            flat(&by.name, 60),
            flat(&by.via, 40)
        )),
        _ => None,
    }
}

/// Transcript lines `(seq, line)` packed, in order, into messages of at most
/// [`MAX_CONTENT`] characters: `(first seq, last seq, body)` each.
pub fn transcript_batches(lines: &[(i64, String)]) -> Vec<(i64, i64, Value)> {
    let mut out = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    let (mut first, mut last, mut size) = (0, 0, 0);
    for (seq, line) in lines {
        let n = line.chars().count();
        if !current.is_empty() && size + 1 + n > MAX_CONTENT {
            out.push((first, last, body(current.join("\n"))));
            current.clear();
            size = 0;
        }
        if current.is_empty() {
            first = *seq;
            size = n;
        } else {
            size += 1 + n;
        }
        current.push(line);
        last = *seq;
    }
    if !current.is_empty() {
        out.push((first, last, body(current.join("\n"))));
    }
    out
}

#[cfg(test)]
mod transcript_tests {
    use super::*;
    use gaffer_core::{Actor, Event, SessionId};

    #[test]
    fn a_message_from_elsewhere_is_a_transcript_line_and_a_thread_reply_is_not_repeated() {
        let sent = |via: &str| Event::MessageSent {
            message_id: "m-1".into(),
            text: "Use the Row printer\n  in src/print.rs".into(),
            by: Actor::user("ana", via),
        };
        assert_eq!(
            steer_line(&sent("web:login-link")).as_deref(),
            Some("✉ **ana** (web:login-link) to the agent: Use the Row printer in src/print.rs")
        );
        assert_eq!(steer_line(&sent("discord")), None);
        let stopped = Event::TurnInterrupted {
            session_id: SessionId("s-1".into()),
            by: Actor::user("bo", "cli"),
        };
        assert_eq!(
            steer_line(&stopped).as_deref(),
            Some("‖ **bo** (cli) stopped the turn; the agent waits for a message")
        );
    }

    #[test]
    fn batches_keep_every_line_once_in_order_within_discords_limit() {
        let lines: Vec<(i64, String)> = (1..=300)
            .map(|i| {
                (
                    i,
                    format!("↳ **Bash** `make test-{i}` {}", "x".repeat(i as usize % 90)),
                )
            })
            .collect();
        let batches = transcript_batches(&lines);
        assert!(batches.len() > 1 && batches.len() < 40, "{}", batches.len());
        let mut seen = Vec::new();
        for (first, last, b) in &batches {
            let text = b["content"].as_str().unwrap();
            assert!(text.chars().count() <= MAX_CONTENT);
            assert!(!text.ends_with('…'), "nothing cut");
            let got: Vec<&str> = text.lines().collect();
            assert_eq!(
                got.first().copied(),
                Some(lines[(*first - 1) as usize].1.as_str())
            );
            assert_eq!(
                got.last().copied(),
                Some(lines[(*last - 1) as usize].1.as_str())
            );
            seen.extend(got.into_iter().map(str::to_owned));
        }
        let all: Vec<String> = lines.into_iter().map(|(_, l)| l).collect();
        assert_eq!(seen, all);
    }

    #[test]
    fn a_line_shows_what_the_agent_did_and_cannot_break_out_of_its_code_span() {
        let line = transcript_line(&serde_json::json!({
            "type": "tool_call", "name": "Bash", "input": { "command": "echo `id`\nrm -rf x" }
        }))
        .unwrap();
        assert_eq!(line, "↳ **Bash** `echo 'id' rm -rf x`");
        assert_eq!(
            transcript_line(&serde_json::json!({ "type": "usage" })),
            None
        );
    }
}
