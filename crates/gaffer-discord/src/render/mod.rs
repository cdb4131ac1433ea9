//! What the adapter shows, as Discord message bodies: pure functions of the
//! app's wire types, so every message can be recomputed from the journal at any
//! time and compared with what was last sent (see [`digest`]).

mod notes;

pub use notes::{notes, Note};

use gaffer_protocol::api;
use gaffer_protocol::receipts::PullRequestReceipt;
use gaffer_protocol::words::ApprovalWords;
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
        ApprovalWords::of(&a.kind).name,
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
    // What the buttons do, in the words every surface uses: a stall continues or
    // interrupts (or the task is cancelled with /cancel), a budget raises the cap or stops.
    let words = ApprovalWords::of(&a.kind);
    let (allow, deny) = (words.approve, words.deny);
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
        assert_eq!(labels("plan").0, ["Approve", "Deny"]);
        assert!(
            text.starts_with("🙋 **Approval** `ap-1` · Spending cap ·"),
            "{text}"
        );
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
    let flat = |v: &Value, max: usize| flat(v.as_str().unwrap_or_default(), max);
    let code = |s: String| s.replace('`', "'");
    match a["type"].as_str()? {
        "tool_call" => Some(format!(
            "↳ **{}** `{}`",
            code(flat(&a["name"], 40)),
            code(self::flat(
                &gaffer_protocol::activity::tool_input(&a["input"]),
                300
            ))
        )),
        "file_change" => Some(format!(
            "✎ `{}` ({})",
            code(flat(&a["path"], 200)),
            flat(&a["kind"], 20)
        )),
        "tool_result" => Some(format!(
            "  ⎿ `{}`",
            code(clip(
                &gaffer_protocol::activity::tool_output_line(
                    a["output"].as_str().unwrap_or_default(),
                    a["is_error"].as_bool() == Some(true)
                ),
                200
            ))
        )),
        "assistant_text" => Some(format!("💬 {}", flat(&a["text"], 800))),
        "rate_limited" => Some(format!("⏸ rate limited until {}", flat(&a["until"], 40))),
        _ => None,
    }
}

/// `s` on one line (every run of whitespace one space), cut to `max` characters.
fn flat(s: &str, max: usize) -> String {
    clip(&s.split_whitespace().collect::<Vec<_>>().join(" "), max)
}

/// The transcript line for a person steering the agent from elsewhere (the page, the
/// CLI, the API): their message, or the turn they stopped. A reply in the thread is
/// already there in its author's own words, so it is not repeated.
pub fn steer_line(e: &gaffer_core::Event) -> Option<String> {
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
        // A tool's result: one line under its call, in a code span it cannot leave.
        let result = transcript_line(&serde_json::json!({
            "type": "tool_result", "call_id": "c1", "is_error": true,
            "output": "error: `x` not found\nhint: install it\n"
        }))
        .unwrap();
        assert_eq!(result, "  ⎿ `failed: error: 'x' not found (+1 more line)`");
    }
}
