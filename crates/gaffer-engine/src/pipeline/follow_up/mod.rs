//! After the pull request: what the pipeline does with a follow-up
//! ([`gaffer_core::FollowUp`]) the follower opened on a done task.
//!
//! The task's stage is `shipping` again; [`start`] records the first step of the
//! newest follow-up (once: a step whose input names the follow-up marks it
//! started), by its `kind`. From there its steps go through [`super::decide`] like
//! any other, and the round ends with `task_done`: the task is done again, and
//! followed again.
//!
//! **A new follow-up kind plugs in** with (1) a `FOLLOW_UP_KIND` constant and the
//! follower's check that appends `follow_up_opened { kind, keys, detail }` (see
//! `crate::follow` — `keys` name what it answers, so it is answered once); (2) a
//! module here whose `start` returns the kind's first step, with
//! `"follow_up": n` in its input (see [`input`]), added to [`start`]'s match;
//! (3) `decide` arms for its own step kinds, if it has any, ending in
//! [`super::done_again`]; (4) the step bodies under `crate::steps`. Shared
//! pieces: an owner fix (`fix/k` with a reason), `push-approval/n` (the ship
//! approval rules), `push/p` (never forced), `ci/p` and its fix loop (counted per
//! round by [`ci_run`]).

pub(crate) mod review;
pub(crate) mod sync;

use super::{fail, Next};
use gaffer_core::{FollowUp, Step, TaskState};
use serde_json::Value;

/// The follow-up a step belongs to (its input's `follow_up`), if any.
pub(crate) fn follow_up_of(step: &Step) -> Option<u32> {
    step.input
        .get("follow_up")
        .and_then(Value::as_u64)
        .map(|n| n as u32)
}

/// `input` with `"follow_up": n`, the mark of a follow-up's steps.
pub(crate) fn input(f: &FollowUp, mut input: Value) -> Value {
    if let Value::Object(map) = &mut input {
        map.insert("follow_up".into(), f.n.into());
    }
    input
}

/// The newest follow-up, when nothing was recorded for it yet: its first step.
pub(super) fn start(task: &TaskState, last: &Step) -> Option<Next> {
    let f = task.last_follow_up()?;
    if task.steps.values().any(|s| follow_up_of(s) == Some(f.n)) {
        return None;
    }
    Some(match f.kind.as_str() {
        review::KIND => review::start(task, f, last),
        sync::KIND => sync::start(task, f, last),
        other => fail(format!(
            "follow-up {} is of a kind this gaffer does not know (`{other}`); upgrade gaffer",
            f.n
        )),
    })
}

/// Which run of CI `ci/n` is in its round: counted from the newest follow-up's
/// first step (the limit of CI fixes holds per round), or `n` before any.
pub(crate) fn ci_run(task: &TaskState, n: u32) -> u32 {
    let Some(f) = task.last_follow_up() else {
        return n;
    };
    let Some(from) = task
        .steps
        .values()
        .filter(|s| follow_up_of(s) == Some(f.n))
        .map(|s| s.order)
        .min()
    else {
        return n;
    };
    task.steps
        .values()
        .filter(|s| {
            s.order > from && matches!(super::StepKind::of(&s.id), Some(super::StepKind::Ci(_)))
        })
        .count() as u32
}
