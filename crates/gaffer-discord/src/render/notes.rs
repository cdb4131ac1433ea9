//! The notes posted once into a task's thread: plan, verdicts, checks, fixes,
//! the pull request, CI, follow-ups and how the task ended.

use super::{body, clip, cost, pull_request, stage_mark, INLINE_LIMIT, MAX_CONTENT};
use crate::rest::Attachment;
use gaffer_protocol::api;
use gaffer_protocol::receipts::{short_sha, CiReceipt, PullRequestReceipt, RunningPlan};
use gaffer_protocol::words;
use serde_json::Value;

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
    let mut out: Vec<Note> = plan_note(detail).into_iter().collect();
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
        if s.id.starts_with("review/") {
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
        } else if s.id.starts_with("check/") || s.id.starts_with("test-run/") {
            // The project's check, or the same check run on the tester's new tests.
            let passed = r["passed"].as_bool() == Some(true);
            let cmd = r["command"].as_str().unwrap_or("(none)");
            let what = if s.id.starts_with("test-run/") {
                "The tester's tests:"
            } else {
                "Check"
            };
            let title = format!(
                "{} {what} `{}` {}",
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
    out.extend(detail.switches.iter().map(switch_note));
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

/// The plan that runs, once the challenger (if the project has one) is done with
/// it: the planner's last revision, which one it is after how many rounds, and the
/// challenges left open. Posted once, when the plan approval is asked (or the plan
/// was approved without one), so it is never the first draft a revision replaced.
fn plan_note(detail: &api::TaskDetail) -> Option<Note> {
    let first = detail
        .steps
        .iter()
        .find(|s| s.id == RunningPlan::PLAN_STEP)?;
    let asked = detail.approvals.iter().any(|a| a.kind == "plan")
        || detail
            .steps
            .iter()
            .any(|s| s.id == RunningPlan::APPROVAL_STEP && s.state == "completed");
    if !asked {
        return None;
    }
    let running = RunningPlan::of(&detail.steps, &detail.approvals)?;
    let mut text = String::new();
    for (n, st) in running.subtasks().iter().enumerate() {
        text.push_str(&format!(
            "{}. {} — {}\n",
            n + 1,
            st["title"].as_str().unwrap_or(""),
            st["description"].as_str().unwrap_or("")
        ));
    }
    if !running.open_challenges.is_empty() {
        text.push_str("\nLeft open by the challenger:\n");
        for c in &running.open_challenges {
            text.push_str(&format!(
                "[{}] ({}) {} — evidence: {}\n",
                c["id"].as_str().unwrap_or("?"),
                c["severity"].as_str().unwrap_or("?"),
                c["claim"].as_str().unwrap_or(""),
                c["evidence"].as_str().unwrap_or("")
            ));
        }
    }
    // When the loop's last step ended: before the approval it leads to.
    let at = detail
        .steps
        .iter()
        .filter(|s| {
            s.id == RunningPlan::PLAN_STEP
                || s.id.starts_with(RunningPlan::CHALLENGE_PREFIX)
                || s.id.starts_with(RunningPlan::REVISE_PREFIX)
        })
        .map(|s| s.updated_at)
        .max()
        .unwrap_or(first.updated_at);
    Some(with_output(
        format!("📝 **Plan** ({})", running.headline()),
        &text,
        "plan.txt",
        format!("{}#{}", first.id, first.attempt),
        at,
    ))
}

/// A role moved to its fallback agent: who was out and why, who took over, whether
/// a person had to allow it, and when the first agent is tried again.
fn switch_note(w: &api::AgentSwitch) -> Note {
    let why = words::switch_trigger(&w.trigger).unwrap_or("out");
    let how = if w.effects {
        "after a person's approval: the turn had already done something"
    } else {
        "running the turn again"
    };
    let name = |a: &str| clip(a, 60).replace('`', "'");
    let mut text = format!(
        "🔀 `{}`: **{}** is out ({why}); **{}** takes over, {how}. {} is tried again <t:{}:R>.",
        name(&w.step_id),
        name(&w.from),
        name(&w.to),
        name(&w.from),
        w.until.max(0) / 1000
    );
    let said = w.detail.split_whitespace().collect::<Vec<_>>().join(" ");
    if !said.is_empty() {
        text.push_str(&format!("\n> {}", clip(&said, 300)));
    }
    Note {
        key: format!("switch/{}/{}/{}", w.step_id, w.from, w.at),
        body: body(text),
        attachment: None,
        at: w.at,
    }
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
        Some("tests") => "for the tester's failing tests",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn sub(title: &str) -> Value {
        json!({ "subtasks": [{ "title": title, "description": "write it", "files": [], "acceptance": "a" }] })
    }

    fn detail_with(steps: Vec<Value>, approvals: Vec<Value>) -> api::TaskDetail {
        let steps: Vec<Value> = steps
            .into_iter()
            .enumerate()
            .map(|(i, mut s)| {
                s["updated_at"] = json!(i as i64 + 10);
                s
            })
            .collect();
        serde_json::from_value(json!({
            "id": "t-1", "project_id": "p-1", "project": "demo", "request": "docs",
            "stage": "awaiting_plan_approval", "after": [], "created_by": "ana", "agent": null,
            "key": null, "outcome": null, "tokens": 0, "cost_usd": 0.0, "created_at": 0, "updated_at": 0,
            "steps": steps, "approvals": approvals, "sessions": [],
        }))
        .unwrap()
    }

    fn step(id: &str, state: &str, receipt: Value) -> Value {
        json!({ "id": id, "name": id, "intent": "idempotent", "state": state, "attempt": 1,
                "receipt": receipt, "error": null })
    }

    /// A fallback switch, the tester's failing test run and the fix it asked for
    /// reach the thread (none of them did; the fix was a bare "🔧 Fix 1").
    #[test]
    fn switches_test_runs_and_test_fixes_are_posted_in_words() {
        let mut d = detail_with(
            vec![
                step(
                    "test-run/1",
                    "completed",
                    json!({ "command": "cargo test", "passed": false, "output_tail": "test list::json ... FAILED" }),
                ),
                step(
                    "fix/1",
                    "completed",
                    json!({ "reason": "tests", "summary": "made list --json print an array" }),
                ),
            ],
            vec![],
        );
        d.switches = vec![api::AgentSwitch {
            step_id: "code/1".into(),
            role: "owner".into(),
            from: "claude".into(),
            to: "codex".into(),
            trigger: "usage_limit".into(),
            detail: "Claude AI usage limit reached|1796212800".into(),
            until: 1_796_212_800_000,
            effects: false,
            at: 11,
        }];
        let all = notes(&d);
        let content = |i: usize| all[i].body["content"].as_str().unwrap().to_owned();
        assert_eq!(all.len(), 3, "{all:#?}");
        assert_eq!(
            content(0),
            "❌ The tester's tests: `cargo test` failed\n```\ntest list::json ... FAILED\n```"
        );
        assert_eq!(
            content(1),
            "🔧 Fix 1 for the tester's failing tests\n```\nmade list --json print an array\n```"
        );
        assert_eq!(
            content(2),
            "🔀 `code/1`: **claude** is out (usage limit reached); **codex** takes over, running the turn again. claude is tried again <t:1796212800:R>.\n> Claude AI usage limit reached|1796212800"
        );
        assert_eq!(all[2].key, "switch/code/1/claude/11");
        assert_eq!(all[2].at, 11);
    }

    /// The thread's plan note is the plan that runs: after a challenge, the last
    /// revision (it showed the first draft), with the rounds and what stayed open;
    /// posted once the loop is over, not while a revision may still replace it.
    #[test]
    fn the_plan_note_shows_the_revision_that_runs_once_the_challenge_is_over() {
        let open = json!([{ "id": "C2", "claim": "MSRV missing", "severity": "medium", "evidence": "Cargo.toml" }]);
        let steps = vec![
            step("plan", "completed", json!({ "plan": sub("First draft") })),
            step(
                "challenge/1",
                "completed",
                json!({ "challenges": { "agreement": false, "challenges": open } }),
            ),
            step(
                "revise/1",
                "completed",
                json!({ "revision": { "plan": sub("Name the install command"), "answers": [] } }),
            ),
            step(
                "challenge/2",
                "completed",
                json!({ "challenges": { "agreement": false, "challenges": open } }),
            ),
        ];
        let plan_note = |d: &api::TaskDetail| {
            notes(d).into_iter().find(|n| {
                n.body["content"]
                    .as_str()
                    .is_some_and(|c| c.starts_with("📝"))
            })
        };
        assert_eq!(
            plan_note(&detail_with(steps.clone(), vec![])),
            None,
            "still in the loop: nothing to post yet"
        );
        let approval = json!({
            "id": "ap-1", "task_id": "t-1", "project_id": "p-1", "project": "demo",
            "step_id": "plan-approval", "attempt": 1, "kind": "plan", "state": "pending",
            "summary": "Approve the plan", "details": { "open_challenges": open },
            "decided_by": null, "note": null, "requested_at": 20, "decided_at": null, "expires_at": null,
        });
        let mut asked = steps.clone();
        asked.push(step("plan-approval", "started", Value::Null));
        let note = plan_note(&detail_with(asked, vec![approval])).unwrap();
        assert_eq!(note.key, "plan#1");
        assert_eq!(
            note.at, 13,
            "after the loop's last step, before the approval"
        );
        assert_eq!(
            note.body["content"],
            "📝 **Plan** (1 subtask, revision 2 after 2 challenge rounds, 1 challenge left open)\n```\n1. Name the install command — write it\n\nLeft open by the challenger:\n[C2] (medium) MSRV missing — evidence: Cargo.toml\n```"
        );
        // Without a challenger, approved by a policy: the planner's plan, plainly.
        let plain = detail_with(
            vec![
                step("plan", "completed", json!({ "plan": sub("First draft") })),
                step("plan-approval", "completed", json!({})),
            ],
            vec![],
        );
        assert_eq!(
            plan_note(&plain).unwrap().body["content"],
            "📝 **Plan** (1 subtask)\n```\n1. First draft — write it\n```"
        );
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
}
