//! Review comments on the pull request: an owner fix given the comments (`fix/k`,
//! reason `review_comments`) → `commit-fix/k` → `push-approval/n` → `push/p` →
//! `ci/p` (and its fix loop) → `reply/n` → done again. Rounds past the project's
//! `review_fix_attempts` first ask a person (`follow-up-approval/n`): approve for
//! one more round, deny to stop following the pull request.

use super::super::{count, done_again, go, record, Next, StepKind};
use super::input;
use gaffer_core::{Event, FollowUp, Stage, Step, TaskState};
use serde_json::{json, Value};

/// The follow-up kind, and the owner fix's reason.
pub(crate) const KIND: &str = "review_comments";

/// Review rounds allowed before a person is asked, when the `ship` receipt does not say.
pub(crate) const DEFAULT_ATTEMPTS: u32 = 3;

/// The project's `review_fix_attempts`, as the `ship` step recorded it.
fn attempts(task: &TaskState) -> u32 {
    super::super::forge_of(task)
        .and_then(|f| f.get("review_fix_attempts"))
        .and_then(Value::as_u64)
        .map_or(DEFAULT_ATTEMPTS, |n| n as u32)
}

/// The first step of review follow-up `f`.
pub(super) fn start(task: &TaskState, f: &FollowUp, last: &Step) -> Next {
    let round = task
        .follow_ups
        .iter()
        .filter(|x| x.kind == KIND && x.n <= f.n)
        .count() as u32;
    let limit = attempts(task);
    if round > limit {
        return Next::Record(vec![record(
            StepKind::FollowUpApproval(f.n),
            Some(last),
            input(f, json!({ "round": round, "limit": limit })),
        )]);
    }
    fix(task, f, last)
}

fn fix(task: &TaskState, f: &FollowUp, last: &Step) -> Next {
    let k = count(task, |k| matches!(k, StepKind::Fix(_))) + 1;
    go(
        task,
        Stage::Coding,
        StepKind::Fix(k),
        last,
        input(f, json!({ "reason": KIND, "detail": f.detail })),
    )
}

/// After `follow-up-approval/n`: approved, the fix; denied, done again and no
/// longer followed.
pub(crate) fn after_approval(task: &TaskState, last: &Step, n: u32, failed: bool) -> Next {
    let Some(f) = task.follow_ups.iter().find(|f| f.n == n) else {
        return super::super::fail(format!("`{}` names no follow-up {n}", last.id));
    };
    if !failed {
        return fix(task, f, last);
    }
    let mut events = done_again(task);
    events.push(Event::FollowingEnded {
        reason: format!(
            "a person stopped following after round {n} of review comments: {}",
            last.error.as_deref().unwrap_or("denied")
        ),
    });
    Next::Record(events)
}

/// After the fix of a review follow-up was committed: the push approval.
pub(crate) fn after_commit(task: &TaskState, last: &Step) -> Next {
    let n = task.last_follow_up().map_or(0, |f| f.n);
    go(
        task,
        Stage::Shipping,
        StepKind::PushApproval(n),
        last,
        json!({ "follow_up": n }),
    )
}

/// After `push-approval/n`: the push; a denial leaves the fix unpushed and the
/// comments unanswered, and the task done again (still followed).
pub(crate) fn after_push_approval(task: &TaskState, last: &Step, failed: bool) -> Next {
    if failed {
        return Next::Record(done_again(task));
    }
    let p = count(task, |k| matches!(k, StepKind::Push(_))) + 1;
    Next::Record(vec![record(StepKind::Push(p), Some(last), json!({}))])
}

/// After CI passed on a review follow-up's push: `reply/n`, once.
pub(crate) fn reply_due(task: &TaskState, last: &Step) -> Option<Next> {
    let f = task.last_follow_up().filter(|f| f.kind == KIND)?;
    if task.steps.contains_key(&StepKind::Reply(f.n).id()) {
        return None;
    }
    let fixed = task.steps.values().any(|s| {
        super::follow_up_of(s) == Some(f.n) && matches!(StepKind::of(&s.id), Some(StepKind::Fix(_)))
    });
    fixed.then(|| {
        Next::Record(vec![record(
            StepKind::Reply(f.n),
            Some(last),
            json!({ "follow_up": f.n }),
        )])
    })
}
