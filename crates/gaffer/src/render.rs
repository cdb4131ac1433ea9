//! Approvals and tasks as text for people: what is asked (the plan as a numbered
//! list, the command with its directory and why, the diff in short), and a task's
//! outcome, plan, verdicts and steps. Every value from an agent, a repository or a
//! request is escaped here (see [`crate::term`]).

pub mod after;
mod plan;

use plan::challenged;
pub use plan::plan;

use crate::output::{age, count, one_line, utc};
use crate::term;
use gaffer_protocol::api;
use serde_json::Value;

/// Lines of multi-line `text`, escaped and indented by `indent`; at most `max`
/// lines, the rest counted.
fn block(text: &str, indent: &str, max: usize) -> Vec<String> {
    let safe = term::text(text.trim_end());
    let lines: Vec<&str> = safe.lines().collect();
    let mut out: Vec<String> = lines
        .iter()
        .take(max)
        .map(|l| format!("{indent}{}", l.replace('\t', "    ")))
        .collect();
    if lines.len() > max {
        out.push(format!("{indent}… {} more lines", lines.len() - max));
    }
    out
}

/// `text` under a `label` on its first line, the other lines aligned with it.
fn labeled(label: &str, text: &str, max: usize) -> Vec<String> {
    labeled_lines(label, block(text, "", max))
}

/// `lines` under a `label` on the first, the others aligned with it.
fn labeled_lines(label: &str, lines: Vec<String>) -> Vec<String> {
    let indent = " ".repeat(label.chars().count());
    lines
        .into_iter()
        .enumerate()
        .map(|(i, l)| format!("{}{l}", if i == 0 { label } else { &indent }))
        .collect()
}

/// Files, added and removed lines of a unified diff.
pub fn diffstat(diff: &str) -> (usize, usize, usize) {
    let (mut files, mut added, mut removed) = (0, 0, 0);
    for l in diff.lines() {
        if l.starts_with("diff --git ") {
            files += 1;
        } else if l.starts_with('+') && !l.starts_with("+++") {
            added += 1;
        } else if l.starts_with('-') && !l.starts_with("---") {
            removed += 1;
        }
    }
    (files, added, removed)
}

fn diff_line(diff: &str) -> Option<String> {
    let (files, added, removed) = diffstat(diff);
    (files > 0).then(|| {
        format!(
            "diff     {files} file{} changed, +{added} −{removed}",
            if files == 1 { "" } else { "s" }
        )
    })
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// What an approval asks, for the person deciding: kind by kind, the parts that
/// matter. `worktree` is the task's, where a command runs unless it names another
/// directory.
pub fn approval_body(a: &api::Approval, worktree: Option<&str>) -> Vec<String> {
    let d = &a.details;
    let mut out = Vec::new();
    match a.kind.as_str() {
        "plan" => {
            out.extend(plan(&d["plan"]));
            out.extend(challenged(d));
        }
        "tool" => {
            if let Some(tool) = str_at(d, "/tool") {
                out.push(format!("tool     {}", one_line(tool, 80)));
            }
            match str_at(d, "/subject/command") {
                Some(cmd) => out.extend(labeled("command  ", cmd, 12)),
                None => out.push(format!(
                    "input    {}",
                    one_line(&d["input"].to_string(), 300)
                )),
            }
            let dir = ["/input/cwd", "/input/workdir", "/input/dir"]
                .iter()
                .find_map(|p| str_at(d, p))
                .or(worktree);
            if let Some(dir) = dir {
                out.push(format!("in       {}", one_line(dir, 200)));
            }
            if let Some(why) = str_at(d, "/reason") {
                out.push(format!("why      {}", one_line(why, 300)));
            }
        }
        "ship" => {
            out.push(format!(
                "branch   {} → {} (into {})",
                one_line(str_at(d, "/branch").unwrap_or("?"), 80),
                one_line(str_at(d, "/remote").unwrap_or("?"), 80),
                one_line(str_at(d, "/base").unwrap_or("?"), 80),
            ));
            let commits = d["commits"].as_array().map_or(0, Vec::len);
            out.push(format!("commits  {commits}"));
            let files: Vec<String> = d["changed_files"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|f| f.as_str().map_or_else(|| f.to_string(), str::to_owned))
                .map(|f| one_line(&f, 80))
                .collect();
            if !files.is_empty() {
                let shown: Vec<&str> = files.iter().take(8).map(String::as_str).collect();
                let more = files.len().saturating_sub(shown.len());
                out.push(format!(
                    "files    {}{}",
                    shown.join(", "),
                    if more > 0 {
                        format!(" and {more} more")
                    } else {
                        String::new()
                    }
                ));
            }
            out.extend(diff_line(str_at(d, "/diff").unwrap_or("")));
        }
        "memory" => {
            if let Some(project) = str_at(d, "/project") {
                out.push(format!("project  {}", one_line(project, 80)));
            }
            if let Some(text) = str_at(d, "/memory") {
                // Whole: it goes into every later prompt, so a person sees all of
                // it (a proposal is at most 2 KiB).
                out.extend(labeled("remember ", text, usize::MAX));
            }
        }
        "stall" => {
            if let Some(seen) = str_at(d, "/seen") {
                out.extend(labeled("seen     ", seen, 4));
            }
            if let Some(step) = str_at(d, "/step") {
                out.push(format!("step     {}", one_line(step, 80)));
            }
        }
        "budget" => {
            let money = str_at(d, "/unit") == Some("usd");
            let amount = |p: &str| {
                let n = d.pointer(p).and_then(Value::as_f64).unwrap_or(0.0);
                if money {
                    gaffer_core::format_usd(n)
                } else {
                    format!("{} tokens", count(n.round() as u64))
                }
            };
            // The cap in words ("this task's spending"), as on every surface.
            let cap = str_at(d, "/cap").unwrap_or("?");
            out.push(format!(
                "cap      {}: {} spent of {}",
                gaffer_protocol::words::budget_cap(cap)
                    .map_or_else(|| one_line(cap, 40), str::to_owned),
                amount("/spent"),
                amount("/limit")
            ));
            out.push(format!(
                "raise    by the amount in the note (like {}), else by {}",
                if money { "$5" } else { "200k" },
                amount("/default_raise")
            ));
        }
        "escalation" => {
            if let Some(why) = str_at(d, "/reason") {
                out.extend(labeled("why      ", why, 8));
            }
            out.extend(diff_line(str_at(d, "/diff").unwrap_or("")));
        }
        _ => {
            if let Some(step) = str_at(d, "/step") {
                out.push(format!("step     {}", one_line(step, 80)));
            }
            if let Some(error) = str_at(d, "/error").or_else(|| str_at(d, "/reason")) {
                out.extend(block(error, "         ", 8));
            }
        }
    }
    out
}

/// What approving and denying do, for the kinds whose answers have words of their
/// own (a `stall` continues or interrupts, a `budget` raises the cap or stops: the
/// words every surface shows), and how else to answer (`details.choices.cancel`).
pub fn choices(a: &api::Approval) -> Option<(String, String, Option<String>)> {
    let words = gaffer_protocol::words::ApprovalWords::of(&a.kind);
    if !words.names_its_answers() {
        return None;
    }
    Some((
        words.approve.to_owned(),
        words.deny.to_owned(),
        a.details
            .pointer("/choices/cancel")
            .and_then(Value::as_str)
            .map(|x| one_line(x, 80)),
    ))
}

/// Who decided (and their note), or why it ended without a decision.
pub fn settled(a: &api::Approval) -> String {
    let by = a
        .decided_by
        .as_ref()
        .map(|b| format!(" by {} ({})", one_line(&b.name, 60), one_line(&b.via, 40)))
        .unwrap_or_default();
    let note = a
        .note
        .as_deref()
        .filter(|n| !n.is_empty())
        .map(|n| format!(": {}", one_line(n, 200)))
        .unwrap_or_default();
    format!("{}{by}{note}", a.state)
}

/// "expires in 29m (2026-01-31T12:30:00Z); unanswered, it counts as denied".
pub fn expiry(a: &api::Approval, now: i64) -> Option<String> {
    let at = a.expires_at?;
    Some(format!(
        "expires in {} ({}); unanswered, it counts as denied",
        crate::output::span((at - now).max(0) / 1000),
        utc(at)
    ))
}

/// `gaffer approval show`: the whole approval.
pub fn approval(a: &api::Approval, short_id: &str, now: i64) -> Vec<String> {
    let mut out = vec![
        format!("approval {short_id} ({})", a.id),
        format!("task     {} · step {}", a.task_id, one_line(&a.step_id, 60)),
        format!("kind     {}", a.kind),
        format!(
            "asked    {} ({})",
            utc(a.requested_at),
            age(a.requested_at, now)
        ),
    ];
    if a.state == "pending" {
        out.push(format!(
            "state    pending, {}",
            expiry(a, now).unwrap_or_else(|| "never expires".into())
        ));
    } else {
        out.push(format!("state    {}", settled(a)));
    }
    out.push(String::new());
    out.push(one_line(&a.summary, 300));
    out.extend(approval_body(a, None).into_iter().map(|l| format!("  {l}")));
    if a.state == "pending" {
        out.push(String::new());
        out.push(format!(
            "decide with `gaffer approve {short_id}` or `gaffer deny {short_id} --note …`"
        ));
    }
    out
}

/// A step's state as a mark.
fn mark(state: &str) -> &'static str {
    match state {
        "completed" => "✓",
        "failed" => "✗",
        "running" | "started" => "…",
        "effect_unknown" | "manual_required" | "interrupted" => "!",
        _ => "·",
    }
}

/// `gaffer task show`: the task, its outcome, plan, verdicts, steps, approvals and
/// sessions, as text.
pub fn task(t: &api::TaskDetail, short_id: &str, now: i64) -> Vec<String> {
    let task = &t.task;
    let mut out = vec![
        format!("task     {short_id} ({})", task.id),
        format!("project  {}", one_line(&task.project, 60)),
        format!("stage    {}", task.stage),
    ];
    out.extend(labeled("request  ", &task.request, 8));
    out.push(format!(
        "created  {} ({}) by {}",
        utc(task.created_at),
        age(task.created_at, now),
        one_line(&task.created_by, 60)
    ));
    if let Some(agent) = &task.agent {
        out.push(format!("agent    {} (every role)", one_line(agent, 40)));
    }
    out.extend(after::lines(task));
    out.push(format!(
        "usage    {} tokens · {}",
        count(task.tokens),
        gaffer_core::format_cost(task.cost_usd)
    ));
    if let Some(w) = &t.worker {
        let state = match w.state.as_str() {
            "held" => "runs it now",
            "released" => "ran it, released",
            _ => "stopped renewing its lease; the next worker takes it over",
        };
        out.push(format!(
            "worker   {} ({state}; lease generation {})",
            one_line(&w.id, 80),
            w.generation
        ));
    }
    if let Some(o) = &task.outcome {
        out.push(String::new());
        out.push("outcome".into());
        out.extend(outcome(o));
    }
    out.extend(crate::follow_up::section(t));
    out.extend(plan::running(t));
    let verdicts: Vec<String> = t
        .steps
        .iter()
        .filter_map(|s| {
            let r = s.receipt.as_ref()?;
            let (word, text) = if let Some(v) = r.get("verdict") {
                (
                    v["verdict"].as_str()?,
                    v["feedback"].as_str().or(v["reason"].as_str()),
                )
            } else if let Some(v) = r.get("ruling") {
                (
                    v["ruling"].as_str()?,
                    v["instructions"].as_str().or(v["reason"].as_str()),
                )
            } else {
                return None;
            };
            let text = text
                .map(|t| format!("  {}", one_line(t, 160)))
                .unwrap_or_default();
            let mut lines = vec![format!("  {:<12} {word}{text}", one_line(&s.id, 12))];
            lines.extend(panel_lines(r));
            Some(lines.join("\n"))
        })
        .collect();
    if !verdicts.is_empty() {
        out.push(String::new());
        out.push("verdicts".into());
        out.extend(verdicts);
    }
    if !t.steps.is_empty() {
        out.push(String::new());
        out.push("steps".into());
        for s in &t.steps {
            let attempt = if s.attempt > 1 {
                format!(" (attempt {})", s.attempt)
            } else {
                String::new()
            };
            let error = s
                .error
                .as_deref()
                .map(|e| format!(" — {}", one_line(e, 120)))
                .unwrap_or_default();
            let did = s
                .receipt
                .as_ref()
                .and_then(|r| crate::follow_up::step_words(&s.id, r))
                .map(|w| format!(" — {w}"))
                .unwrap_or_default();
            out.push(format!(
                "  {} {:<14} {:<15} {}{attempt}{error}{did}",
                mark(&s.state),
                one_line(&s.id, 14),
                s.state,
                s.intent
            ));
            if let Some(pack) = &s.context {
                out.extend(context(pack));
            }
        }
    }
    if !t.approvals.is_empty() {
        out.push(String::new());
        out.push("approvals".into());
        let short = crate::ids::shorten(t.approvals.iter().map(|a| a.id.as_str()));
        for a in &t.approvals {
            out.push(format!(
                "  {}  {:<10} {}",
                short.get(&a.id).map_or(a.id.as_str(), String::as_str),
                a.kind,
                settled(a)
            ));
            out.push(format!("      {}", one_line(&a.summary, 120)));
        }
    }
    if !t.sessions.is_empty() {
        out.push(String::new());
        out.push("sessions".into());
        for s in &t.sessions {
            let verified = if s.verified { "verified" } else { "unverified" };
            out.push(format!(
                "  {:<9} {:<10} {verified}  {}",
                s.role,
                one_line(&s.agent, 10),
                one_line(&s.id, 40)
            ));
        }
    }
    if !t.switches.is_empty() {
        out.push(String::new());
        out.push("fallbacks".into());
        for s in &t.switches {
            let then = if s.effects {
                "a person approved going on"
            } else {
                "the turn ran again"
            };
            out.push(format!(
                "  {:<9} {} → {}  {}: {then}",
                one_line(&s.step_id, 9),
                one_line(&s.from, 10),
                one_line(&s.to, 10),
                one_line(&s.trigger, 14),
            ));
            out.push(format!(
                "      {}; {} is tried again after {}",
                one_line(&s.detail, 100),
                one_line(&s.from, 10),
                utc(s.until)
            ));
        }
    }
    out
}

/// How many files of a step's context pack `task show` names; `--json` has them all.
const CONTEXT_FILES_SHOWN: usize = 8;

/// A step's context pack: one line of totals, then its first files in rank order.
pub fn context(pack: &api::ContextPack) -> Vec<String> {
    let full = pack.files.iter().filter(|f| f.mode == "full").count();
    let mut out = vec![format!(
        "      context: {} file{} ({full} full, {} skeleton), {} of {} tokens",
        pack.files.len(),
        if pack.files.len() == 1 { "" } else { "s" },
        pack.files.len() - full,
        count(pack.used),
        count(pack.budget)
    )];
    for f in pack.files.iter().take(CONTEXT_FILES_SHOWN) {
        out.push(format!(
            "        {:<8} {:>6}  {}",
            f.mode,
            count(f.tokens),
            one_line(&f.path, 100)
        ));
    }
    if pack.files.len() > CONTEXT_FILES_SHOWN {
        out.push(format!(
            "        … {} more (gaffer task show --json lists every file)",
            pack.files.len() - CONTEXT_FILES_SHOWN
        ));
    }
    out
}

/// A finished task's outcome: the summary of a done task, the reason of the others.
fn outcome(o: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(b) = str_at(o, "/branch") {
        out.push(format!("  branch   {}", one_line(b, 120)));
    }
    for c in o["commits"].as_array().into_iter().flatten() {
        let sha = c["sha"].as_str().unwrap_or_default();
        out.push(format!(
            "  commit   {} {}",
            &sha[..sha.len().min(10)],
            one_line(c["subject"].as_str().unwrap_or_default(), 100)
        ));
    }
    if let Some(files) = o["changed_files"].as_array().filter(|f| !f.is_empty()) {
        let names: Vec<String> = files
            .iter()
            .map(|f| one_line(f.as_str().unwrap_or_default(), 60))
            .collect();
        out.push(format!("  files    {}", names.join(", ")));
    }
    if o["check"].is_object() {
        let passed = o["check"]["passed"].as_bool();
        let cmd = o["check"]["command"].as_str().unwrap_or("the check");
        out.push(format!(
            "  check    {} {}",
            one_line(cmd, 80),
            match passed {
                Some(true) => "passed",
                Some(false) => "failed",
                None => "did not run",
            }
        ));
    }
    for pr in [
        o.pointer("/forge/pull_request/url"),
        o.pointer("/pull_request/url"),
    ]
    .into_iter()
    .flatten()
    .filter_map(Value::as_str)
    .take(1)
    {
        // A GitLab receipt's link is a merge request: labelled as its users say it.
        let label = match str_at(o, "/forge/kind") {
            Some("gitlab") => "mr",
            _ => "pr",
        };
        out.push(format!("  {label:<9}{}", one_line(pr, 200)));
    }
    if let Some(note) = str_at(o, "/note") {
        out.extend(labeled("  note     ", note, 12));
    }
    if let Some(reason) = str_at(o, "/reason") {
        // A failed step's error ends with its command's output, whose last lines say why.
        out.extend(labeled_lines(
            "  reason   ",
            crate::output::error_lines(reason, 16, 300),
        ));
    }
    if let Some(by) = o.get("by").filter(|b| b.is_object()) {
        out.push(format!(
            "  by       {} ({})",
            one_line(by["name"].as_str().unwrap_or("?"), 60),
            one_line(by["via"].as_str().unwrap_or("?"), 40)
        ));
    }
    out
}

/// The arbiter's panel under its ruling: each member's opinion (or why it gave
/// none), with what it spent.
fn panel_lines(receipt: &Value) -> Vec<String> {
    receipt["panel"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|o| {
            let member = one_line(o["member"].as_str().unwrap_or("?"), 40);
            let said = match o["opinion"]["opinion"].as_str() {
                Some(word) => format!(
                    "{word}  {}",
                    one_line(o["opinion"]["reason"].as_str().unwrap_or_default(), 140)
                ),
                None => format!(
                    "no opinion  {}",
                    one_line(o["error"].as_str().unwrap_or("no answer"), 140)
                ),
            };
            let spent = gaffer_core::Spend::of_usage(&o["usage"]);
            format!(
                "    panel {member}: {said} ({} tokens, {})",
                spent.tokens(),
                spent.cost_display()
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn plan_approval(details: Value) -> api::Approval {
        serde_json::from_value(json!({
            "id": "ap-1", "task_id": "t-1", "project_id": "p-1", "project": "demo",
            "step_id": "plan-approval", "attempt": 1, "kind": "plan", "state": "pending",
            "summary": "Approve the plan", "details": details, "decided_by": null,
            "note": null, "requested_at": 0, "decided_at": null, "expires_at": null,
        }))
        .unwrap()
    }

    #[test]
    fn stall_and_budget_approvals_say_what_was_seen_and_what_each_answer_does() {
        let mut stall = plan_approval(json!({
            "trigger": "idle", "seen": "no activity from the agent for 10m during its turn",
            "step": "code/1",
            "choices": {"approve": "continue", "deny": "interrupt the turn", "cancel": "gaffer task cancel t-1"},
        }));
        stall.kind = "stall".into();
        assert_eq!(
            approval_body(&stall, None),
            vec![
                "seen     no activity from the agent for 10m during its turn".to_owned(),
                "step     code/1".to_owned(),
            ]
        );
        assert_eq!(
            choices(&stall),
            Some((
                "Continue".into(),
                "Interrupt".into(),
                Some("gaffer task cancel t-1".into())
            ))
        );
        let mut budget = plan_approval(json!({
            "cap": "task_usd", "unit": "usd", "spent": 2.04, "limit": 2.0, "default_raise": 2.0,
            "choices": {"approve": "raise this task's cap", "deny": "stop the task"},
        }));
        budget.kind = "budget".into();
        assert_eq!(
            approval_body(&budget, None),
            vec![
                "cap      this task's spending: $2.04 spent of $2.00".to_owned(),
                "raise    by the amount in the note (like $5), else by $2.00".to_owned(),
            ]
        );
        assert_eq!(choices(&budget).unwrap().2, None);
        assert_eq!(choices(&plan_approval(json!({}))), None);
    }

    #[test]
    fn a_memory_proposal_is_shown_whole_so_nothing_hides_below_a_cut() {
        let text: String = (1..=30).map(|i| format!("note {i}\n")).collect();
        let mut memory = plan_approval(json!({ "memory": text, "project": "demo" }));
        memory.kind = "memory".into();
        let body = approval_body(&memory, None);
        assert_eq!(body[0], "project  demo");
        assert_eq!(body[1], "remember note 1");
        assert_eq!(body.last().unwrap(), "         note 30");
        assert_eq!(body.len(), 31, "{body:#?}");
    }

    #[test]
    fn a_plan_approval_shows_each_revision_and_the_challenges_left_open() {
        let sub = |acc: &str| json!({ "subtasks": [{ "title": "Install docs", "description": "d", "files": [], "acceptance": acc }] });
        let a = plan_approval(json!({
            "plan": sub("names the command"),
            "revisions": [
                { "revision": 1, "step": "plan", "plan": sub("has a section") },
                { "revision": 2, "step": "revise/1", "plan": sub("names the command"),
                  "changes": ["changed subtask 1 (acceptance): Install docs"],
                  "answers": [{ "id": "C1", "decision": "adopted", "reason": "named it" },
                              { "id": "C2", "decision": "rejected", "reason": "no MSRV policy" }] },
            ],
            "open_challenges": [{ "id": "C2", "claim": "MSRV missing", "severity": "medium", "evidence": "Cargo.toml rust-version" }],
        }));
        let body = approval_body(&a, None);
        assert_eq!(
            body[3..],
            [
                "revision 2 (revise/1):",
                "    changed subtask 1 (acceptance): Install docs",
                "    [C1] adopted: named it",
                "    [C2] rejected: no MSRV policy",
                "open     1 challenge the planner did not settle:",
                "    [C2] (medium) MSRV missing",
                "        evidence: Cargo.toml rust-version",
            ],
            "{body:#?}"
        );
        assert_eq!(body[2], "    done when: names the command");
        // Without a challenger: only the plan.
        let plain = approval_body(&plan_approval(json!({ "plan": sub("x") })), None);
        assert_eq!(plain.len(), 3, "{plain:#?}");
    }

    /// A task failed by its worktree setup: the reason keeps the message and the
    /// end of the command's output, where it says why (the first 20 lines hid it).
    #[test]
    fn a_failed_setup_shows_the_end_of_its_output() {
        let output: String = (1..=60).map(|i| format!("fetch {i}\n")).collect();
        let reason = format!("worktree setup failed: setup command `npm ci` failed (exit code 1); fix it in [projects.web] setup or in the repository, then retry the task. Its output:\n{output}npm ERR! missing: left-pad@1.3.0");
        let lines = outcome(&json!({ "reason": reason }));
        let at = lines
            .iter()
            .position(|l| l.starts_with("  reason"))
            .unwrap();
        assert!(lines[at].ends_with("Its output:"), "{lines:#?}");
        assert_eq!(lines[at + 1], "           … 45 lines left out");
        assert_eq!(lines[at + 16], "           fetch 60");
        assert_eq!(
            lines[at + 17],
            "           npm ERR! missing: left-pad@1.3.0",
            "{lines:#?}"
        );
    }

    #[test]
    fn a_shipped_outcome_labels_its_link_as_the_forge_calls_it() {
        let shipped = |kind: &str| {
            outcome(&json!({
                "forge": { "kind": kind },
                "pull_request": { "url": "https://forge.example/x/1" },
            }))
        };
        assert_eq!(shipped("gitlab"), ["  mr       https://forge.example/x/1"]);
        assert_eq!(shipped("github"), ["  pr       https://forge.example/x/1"]);
        assert_eq!(shipped("gitea"), ["  pr       https://forge.example/x/1"]);
    }
}
