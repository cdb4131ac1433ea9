//! The plan's challenge loop, decided from the journal: `plan` → `challenge/1` →
//! (`revise/1` → `challenge/2` → …) → `plan-approval`. The challenger's round limit
//! is recorded in the `plan` step's receipt, so a config change does not move a
//! task already under way.

use super::{go, record, Next, StepKind};
use gaffer_core::{Stage, Step, TaskState};
use gaffer_protocol::contracts::{Challenge, Challenges, Plan, Revision};
use serde_json::{json, Value};

/// Challenger turns the task allows; `None`: its project has no challenger.
pub(crate) fn max_rounds(task: &TaskState) -> Option<u32> {
    let receipt = task.steps.get(&StepKind::Plan.id())?.receipt.as_ref()?;
    receipt
        .get("challenger")?
        .get("max_rounds")?
        .as_u64()
        .map(|n| n as u32)
}

/// The challenger's answer in round `n`, once that round completed.
pub fn challenges_of(task: &TaskState, n: u32) -> Option<Challenges> {
    let receipt = task
        .steps
        .get(&StepKind::Challenge(n).id())?
        .receipt
        .as_ref()?;
    serde_json::from_value(receipt.get("challenges")?.clone()).ok()
}

/// The planner's revision `n`, once it completed.
pub fn revision_of(task: &TaskState, n: u32) -> Option<Revision> {
    let receipt = task
        .steps
        .get(&StepKind::Revise(n).id())?
        .receipt
        .as_ref()?;
    serde_json::from_value(receipt.get("revision")?.clone()).ok()
}

/// The plan as it stands: the last revision's, else the planner's first.
pub(crate) fn current_plan(task: &TaskState) -> Option<Plan> {
    let revisions = super::count(task, |k| matches!(k, StepKind::Revise(_)));
    (1..=revisions)
        .rev()
        .find_map(|n| revision_of(task, n))
        .map(|r| r.plan)
        .or_else(|| {
            let receipt = task.steps.get(&StepKind::Plan.id())?.receipt.as_ref()?;
            serde_json::from_value(receipt.get("plan")?.clone()).ok()
        })
}

fn approval(task: &TaskState, last: &Step) -> Next {
    go(
        task,
        Stage::AwaitingPlanApproval,
        StepKind::PlanApproval,
        last,
        json!({}),
    )
}

/// After the planner's plan: the challenger's first round, or, without one, the approval.
pub(crate) fn after_plan(task: &TaskState, last: &Step) -> Next {
    match max_rounds(task) {
        Some(_) => Next::Record(vec![record(
            StepKind::Challenge(1),
            Some(last),
            json!({ "round": 1 }),
        )]),
        None => approval(task, last),
    }
}

/// After challenge round `n`: the approval when the challenger agrees or the rounds
/// are spent (what is still open is shown there), else the planner's revision.
pub(crate) fn after_challenge(task: &TaskState, last: &Step, n: u32) -> Next {
    let Some(answer) = challenges_of(task, n) else {
        return super::fail(format!(
            "step `{}` has no challenges in its receipt",
            last.id
        ));
    };
    if answer.agreement || n >= max_rounds(task).unwrap_or(0) {
        return approval(task, last);
    }
    Next::Record(vec![record(
        StepKind::Revise(n),
        Some(last),
        json!({ "round": n }),
    )])
}

/// After revision `n`: the challenger reads it.
pub(crate) fn after_revision(last: &Step, n: u32) -> Next {
    Next::Record(vec![record(
        StepKind::Challenge(n + 1),
        Some(last),
        json!({ "round": n + 1 }),
    )])
}

/// What the plan approval shows of the loop: each revision with what it changed and
/// its answers, each challenge round, and the challenges still open (the last
/// round's, unless the challenger agreed).
pub(crate) fn history(task: &TaskState) -> Value {
    let rounds = super::count(task, |k| matches!(k, StepKind::Challenge(_)));
    if max_rounds(task).is_none() {
        return json!({});
    }
    let first = task
        .steps
        .get(&StepKind::Plan.id())
        .and_then(|s| s.receipt.as_ref())
        .and_then(|r| r.get("plan"))
        .cloned()
        .unwrap_or(Value::Null);
    let mut revisions = vec![json!({ "revision": 1, "step": StepKind::Plan.id(), "plan": first })];
    let mut challenge_rounds = Vec::new();
    let mut open: Vec<Challenge> = Vec::new();
    for n in 1..=rounds {
        let Some(answer) = challenges_of(task, n) else {
            continue;
        };
        challenge_rounds.push(
            json!({ "round": n, "agreement": answer.agreement, "challenges": answer.challenges }),
        );
        open = answer.challenges;
        if let Some(revision) = revision_of(task, n) {
            let changes = task
                .steps
                .get(&StepKind::Revise(n).id())
                .and_then(|s| s.receipt.as_ref())
                .and_then(|r| r.get("changes"))
                .cloned()
                .unwrap_or(json!([]));
            revisions.push(json!({
                "revision": n + 1,
                "step": StepKind::Revise(n).id(),
                "plan": revision.plan,
                "answers": revision.answers,
                "changes": changes,
            }));
        }
    }
    json!({ "revisions": revisions, "challenge_rounds": challenge_rounds, "open_challenges": open })
}
