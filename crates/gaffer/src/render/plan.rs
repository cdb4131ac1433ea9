//! The plan as text: its subtasks, what the challenger loop left on it, and the
//! plan a task runs (`gaffer task show`).

use crate::output::one_line;
use gaffer_protocol::api;
use gaffer_protocol::receipts::RunningPlan;
use serde_json::Value;

use super::block;

/// The plan's subtasks as a numbered list: title, description, files, acceptance.
pub fn plan(plan: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for (i, st) in plan["subtasks"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let title = st["title"].as_str().unwrap_or("(untitled)");
        out.push(format!("{:>2}. {}", i + 1, one_line(title, 200)));
        if let Some(d) = st["description"].as_str().filter(|d| !d.trim().is_empty()) {
            out.extend(block(d, "    ", 6));
        }
        let files = crate::follow_up::files(&st["files"]);
        if !files.is_empty() {
            out.push(format!("    files: {files}"));
        }
        if let Some(a) = st["acceptance"].as_str().filter(|a| !a.trim().is_empty()) {
            out.push(format!("    done when: {}", one_line(a, 200)));
        }
    }
    out
}

/// What the challenger loop left on a plan approval: each revision's changes and
/// answers, then the challenges still open (nothing when no challenger ran).
pub(super) fn challenged(d: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for r in d["revisions"].as_array().into_iter().flatten().skip(1) {
        out.push(format!(
            "revision {} ({}):",
            r["revision"],
            one_line(r["step"].as_str().unwrap_or("?"), 20)
        ));
        for change in r["changes"].as_array().into_iter().flatten() {
            out.push(format!(
                "    {}",
                one_line(change.as_str().unwrap_or(""), 200)
            ));
        }
        for a in r["answers"].as_array().into_iter().flatten() {
            out.push(format!(
                "    [{}] {}: {}",
                one_line(a["id"].as_str().unwrap_or("?"), 20),
                one_line(a["decision"].as_str().unwrap_or("?"), 20),
                one_line(a["reason"].as_str().unwrap_or(""), 200)
            ));
        }
    }
    out.extend(open_challenges(
        d["open_challenges"]
            .as_array()
            .map_or(&[][..], Vec::as_slice),
    ));
    out
}

/// The challenges the planner left open, each with its evidence (nothing when none).
fn open_challenges(open: &[Value]) -> Vec<String> {
    let mut out = Vec::new();
    if !open.is_empty() {
        out.push(format!(
            "open     {} challenge{} the planner did not settle:",
            open.len(),
            if open.len() == 1 { "" } else { "s" }
        ));
        for c in open {
            out.push(format!(
                "    [{}] ({}) {}",
                one_line(c["id"].as_str().unwrap_or("?"), 20),
                one_line(c["severity"].as_str().unwrap_or("?"), 10),
                one_line(c["claim"].as_str().unwrap_or(""), 200)
            ));
            out.push(format!(
                "        evidence: {}",
                one_line(c["evidence"].as_str().unwrap_or(""), 200)
            ));
        }
    }
    out
}

/// The plan the task runs (after a challenge, the planner's last revision), which
/// revision it is, after how many challenge rounds, and what was left open.
pub(super) fn running(t: &api::TaskDetail) -> Vec<String> {
    let Some(p) = RunningPlan::of(&t.steps, &t.approvals) else {
        return Vec::new();
    };
    let mut out = vec![String::new(), format!("plan ({})", p.headline())];
    out.extend(plan(&p.plan).into_iter().map(|l| format!("  {l}")));
    out.extend(
        open_challenges(&p.open_challenges)
            .into_iter()
            .map(|l| format!("  {l}")),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sub(title: &str) -> Value {
        json!({ "subtasks": [{ "title": title, "description": "d", "files": [], "acceptance": "a" }] })
    }

    fn step(id: &str, receipt: Value) -> Value {
        json!({ "id": id, "name": id, "intent": "idempotent", "state": "completed", "attempt": 1,
                "receipt": receipt, "error": null, "updated_at": 0 })
    }

    /// After a challenge the engine runs the last revision: `task show` shows that
    /// one (it showed the planner's first), says which it is, and what stayed open.
    #[test]
    fn task_show_prints_the_revised_plan_that_runs_and_the_challenge_left_open() {
        let open = json!([{ "id": "C2", "claim": "MSRV missing", "severity": "medium", "evidence": "Cargo.toml rust-version" }]);
        let detail: api::TaskDetail = serde_json::from_value(json!({
            "id": "t-1", "project_id": "p-1", "project": "demo", "request": "docs",
            "stage": "awaiting_plan_approval", "after": [], "created_by": "ana", "agent": null,
            "key": null, "outcome": null, "tokens": 0, "cost_usd": 0.0, "created_at": 0, "updated_at": 0,
            "steps": [
                step("plan", json!({ "plan": sub("Write the first draft") })),
                step("challenge/1", json!({ "challenges": { "agreement": false, "challenges": [] } })),
                step("revise/1", json!({ "revision": { "plan": sub("Name the install command"), "answers": [] } })),
                step("challenge/2", json!({ "challenges": { "agreement": false, "challenges": open } })),
            ],
            "approvals": [{
                "id": "ap-1", "task_id": "t-1", "project_id": "p-1", "project": "demo",
                "step_id": "plan-approval", "attempt": 1, "kind": "plan", "state": "pending",
                "summary": "Approve the plan", "details": { "plan": sub("Name the install command"), "open_challenges": open },
                "decided_by": null, "note": null, "requested_at": 0, "decided_at": null, "expires_at": null,
            }],
            "sessions": [],
        }))
        .unwrap();
        let shown = crate::render::task(&detail, "t-1", 0);
        let at = shown
            .iter()
            .position(|l| l.starts_with("plan ("))
            .unwrap_or_else(|| panic!("{shown:#?}"));
        assert_eq!(
            shown[at..at + 8],
            [
                "plan (1 subtask, revision 2 after 2 challenge rounds, 1 challenge left open)",
                "   1. Name the install command",
                "      d",
                "      done when: a",
                "  open     1 challenge the planner did not settle:",
                "      [C2] (medium) MSRV missing",
                "          evidence: Cargo.toml rust-version",
                "",
            ],
            "{shown:#?}"
        );
        assert!(
            !shown.iter().any(|l| l.contains("first draft")),
            "{shown:#?}"
        );
    }
}
