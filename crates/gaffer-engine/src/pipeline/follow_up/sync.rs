//! The `merge_conflict` follow-up: the base moved under a shipped task's pull request
//! and the forge says it no longer merges (the follower opens it, keyed by the head
//! commit that no longer merges: see [`follow_up_for`]).
//!
//! `sync/n` fetches the base and rebases or merges onto it (the project's
//! `conflict_strategy`, recorded in its receipt) → when git stopped on conflicts,
//! `resolve/r` (the owner edits the conflicted files; gaffer checks that no marker is
//! left, then continues, which may stop again on a later commit) → `check/c` (the
//! project's check, on the updated branch; a failure goes to an owner fix
//! `fix/k` → `commit-fix/k` → `check`, bounded by the check attempts) →
//! `push-approval/f` (the ship approval rules: policy or a person) → `push/p` (for a
//! rebase with `--force-with-lease` against the commit gaffer last pushed, whose sha
//! is in the step's input; for a merge a plain push) → `ci/p` and its fix loop →
//! done again. A base that moved without a textual conflict goes from `sync/n`
//! straight to the check: no owner turn. A branch that already holds the base (the
//! forge's answer was stale) ends the follow-up without a push.
//!
//! Every step of an update carries `"sync": n` in its input, so a check or a fix
//! knows which update it belongs to after a crash, from the journal alone.

use super::super::{count, done_again, fail, go, receipt_of, record, Limits, Next, StepKind};
use super::input;
use gaffer_core::{FollowUp, Stage, Step, TaskState};
use serde_json::{json, Value};

/// The follow-up kind this module answers.
pub const KIND: &str = "merge_conflict";

/// Resolve rounds one sync may take (a rebase stops once per conflicting commit, and
/// a resolution that left markers gets another round) before a person must look.
pub const RESOLVE_ROUNDS: u32 = 5;

fn input_u32(step: &Step, key: &str) -> Option<u32> {
    step.input.get(key)?.as_u64().map(|n| n as u32)
}

fn outcome(step: &Step) -> &str {
    step.receipt
        .as_ref()
        .and_then(|r| r.get("outcome"))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The update a step belongs to (its input's `sync`).
pub(crate) fn sync_of(step: &Step) -> Option<u32> {
    input_u32(step, "sync")
}

/// The update owner fix `n` belongs to: it failed that update's check.
pub(crate) fn sync_of_fix(task: &TaskState, n: u32) -> Option<u32> {
    task.steps.get(&StepKind::Fix(n).id()).and_then(sync_of)
}

/// Whether follow-up `n` is a `merge_conflict` one.
pub(crate) fn answers(task: &TaskState, n: u32) -> bool {
    task.follow_ups.iter().any(|f| f.n == n && f.kind == KIND)
}

/// The first step of merge-conflict follow-up `f`: the update.
pub(super) fn start(task: &TaskState, f: &FollowUp, last: &Step) -> Next {
    let n = count(task, |k| matches!(k, StepKind::Sync(_))) + 1;
    go(
        task,
        Stage::Shipping,
        StepKind::Sync(n),
        last,
        input(f, json!({})),
    )
}

/// After `sync/s` or a `resolve/r` of it: resolve (again), check, or done.
pub(crate) fn after_update(task: &TaskState, last: &Step, failed: bool) -> Next {
    let why = last.error.clone().unwrap_or_default();
    let s = match StepKind::of(&last.id) {
        Some(StepKind::Sync(s)) => s,
        _ => match sync_of(last) {
            Some(s) => s,
            None => return fail(format!("`{}` names no update in its input", last.id)),
        },
    };
    if failed {
        return fail(match StepKind::of(&last.id) {
            Some(StepKind::Resolve(r)) => {
                format!("the owner's conflict resolution (round {r}) failed: {why}")
            }
            _ => format!("updating the branch onto its moved base failed: {why}"),
        });
    }
    match outcome(last) {
        // The branch already holds the base: nothing to push. Done again, with what
        // was shipped before.
        "up_to_date" => Next::Record(done_again(task)),
        "updated" => check(task, last, s),
        "conflicted" | "unresolved" => {
            let rounds = task
                .steps
                .values()
                .filter(|st| {
                    matches!(StepKind::of(&st.id), Some(StepKind::Resolve(_)))
                        && sync_of(st) == Some(s)
                })
                .count() as u32;
            let files = last
                .receipt
                .as_ref()
                .and_then(|r| r.get("files"))
                .cloned()
                .unwrap_or(json!([]));
            if rounds >= RESOLVE_ROUNDS {
                return Next::Record(vec![gaffer_core::Event::TaskBlocked {
                    reason: too_many_rounds(task, rounds, outcome(last), &files),
                }]);
            }
            let r = count(task, |k| matches!(k, StepKind::Resolve(_))) + 1;
            go(
                task,
                Stage::Coding,
                StepKind::Resolve(r),
                last,
                json!({ "sync": s, "files": files, "unresolved": outcome(last) == "unresolved" }),
            )
        }
        other => fail(format!(
            "step `{}` has an unknown update outcome `{other}` in its receipt",
            last.id
        )),
    }
}

/// Why an update is left to a person after `rounds` owner rounds: what is still
/// wrong in which files, that nothing was pushed, and where to finish it.
fn too_many_rounds(task: &TaskState, rounds: u32, outcome: &str, files: &Value) -> String {
    let files: Vec<&str> = files
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let what = if outcome == "unresolved" {
        "conflict markers are left in"
    } else {
        "git stopped again on conflicts in"
    };
    let worktree = receipt_of(task, StepKind::Worktree)
        .and_then(|r| r.get("path"))
        .and_then(Value::as_str)
        .unwrap_or("the task's worktree");
    format!(
        "the conflicts with the moved base are still not resolved after {rounds} owner rounds ({what} {}); nothing was pushed and the pull request stays as it was. Resolve them by hand in {worktree} (the update is under way there), or close the pull request",
        files.join(", ")
    )
}

/// The project's check on the branch of update `s` (again after an owner fix). After
/// an owner turn the task is testing; straight from the update it stays shipping.
pub(crate) fn check(task: &TaskState, last: &Step, s: u32) -> Next {
    let c = count(task, |k| matches!(k, StepKind::Check(_))) + 1;
    let stage = if task.stage == Stage::Coding {
        Stage::Testing
    } else {
        task.stage
    };
    go(task, stage, StepKind::Check(c), last, json!({ "sync": s }))
}

/// After the check of update `s`: passed, the push approval of its follow-up; failed,
/// an owner fix while the check attempts last (counted for this update), then the
/// task fails with nothing pushed.
pub(crate) fn after_check(task: &TaskState, last: &Step, limits: &Limits, failed: bool) -> Next {
    let Some(s) = sync_of(last) else {
        return fail(format!("`{}` names no update in its input", last.id));
    };
    if failed {
        return fail(format!(
            "{} could not run: {}",
            last.name,
            last.error.as_deref().unwrap_or_default()
        ));
    }
    let receipt = last.receipt.clone().unwrap_or(Value::Null);
    if receipt.get("passed").and_then(Value::as_bool) == Some(true) {
        let f = task
            .steps
            .get(&StepKind::Sync(s).id())
            .and_then(super::follow_up_of)
            .unwrap_or(0);
        return go(
            task,
            Stage::Shipping,
            StepKind::PushApproval(f),
            last,
            json!({ "follow_up": f, "sync": s }),
        );
    }
    let runs = task
        .steps
        .values()
        .filter(|st| {
            matches!(StepKind::of(&st.id), Some(StepKind::Check(_))) && sync_of(st) == Some(s)
        })
        .count() as u32;
    if runs < limits.check_attempts {
        let k = count(task, |k| matches!(k, StepKind::Fix(_))) + 1;
        return go(
            task,
            Stage::Coding,
            StepKind::Fix(k),
            last,
            json!({ "reason": "check", "detail": receipt, "sync": s }),
        );
    }
    fail(format!(
        "the check still fails on the branch updated onto its moved base after {runs} runs; nothing was pushed, the pull request stays as it was and the updated branch is in the worktree. The check: {}",
        super::super::failed_check(&receipt)
    ))
}

/// After `push-approval/f` of a merge-conflict follow-up: the push (with a lease on
/// the commit gaffer last pushed for a rebase, plain for a merge); a denial fails
/// the task with nothing pushed.
pub(crate) fn after_push_approval(task: &TaskState, last: &Step, failed: bool) -> Next {
    if failed {
        return fail(format!(
            "pushing the updated branch was not approved ({}); the pull request stays as it was",
            last.error.as_deref().unwrap_or("denied")
        ));
    }
    let Some(s) = sync_of(last) else {
        return fail(format!("`{}` names no update in its input", last.id));
    };
    let strategy = receipt_of(task, StepKind::Sync(s))
        .and_then(|r| r.get("strategy"))
        .and_then(Value::as_str)
        .unwrap_or("rebase");
    let last_pushed = task
        .steps_in_order()
        .into_iter()
        .rev()
        .filter(|st| matches!(StepKind::of(&st.id), Some(StepKind::Push(_))))
        .find_map(|st| st.receipt.as_ref()?.get("sha")?.as_str().map(str::to_owned));
    let p = count(task, |k| matches!(k, StepKind::Push(_))) + 1;
    let input = match (strategy, last_pushed) {
        ("rebase", Some(sha)) => json!({ "sync": s, "lease": sha }),
        ("rebase", None) => {
            return fail("the branch was rebased but gaffer has no record of what it pushed before, so it cannot push with a lease; push it by hand")
        }
        _ => json!({ "sync": s }),
    };
    Next::Record(vec![record(StepKind::Push(p), Some(last), input)])
}

/// The follow-up a follower opens for pull request `pr` read with
/// `Forge::pull_request`: `Some((kind, keys, detail))` when the forge says it must
/// take in its base (a conflict, or a base it must be up to date with), `None` when
/// it merges or the forge has not computed it yet (GitHub's `null`: ask again later).
/// The key is the head commit that no longer merges: a forge still reporting the old
/// head (or a sync that found nothing to do) never opens a second follow-up for it.
pub fn follow_up_for(pr: &gaffer_forge::PullRequest) -> Option<(String, Vec<String>, Value)> {
    if pr.state != "open" || pr.merged || !pr.mergeable.needs_update() || pr.head_sha.is_empty() {
        return None;
    }
    Some((
        KIND.to_owned(),
        vec![format!("{KIND}:{}", pr.head_sha)],
        json!({ "head_sha": pr.head_sha, "base": pr.base, "mergeable": pr.mergeable }),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use gaffer_forge::{Mergeability, PullRequest};

    fn pr(mergeable: Mergeability) -> PullRequest {
        PullRequest {
            number: 1,
            url: String::new(),
            state: "open".into(),
            title: "t".into(),
            head: "gaffer/t".into(),
            head_sha: "abc".into(),
            base: "main".into(),
            merged: false,
            mergeable,
            warnings: Vec::new(),
        }
    }

    #[test]
    fn only_a_pull_request_that_must_take_in_its_base_opens_a_follow_up_keyed_by_its_head() {
        let opened = follow_up_for(&pr(Mergeability::Conflicted));
        assert_eq!(
            opened
                .as_ref()
                .map(|(k, keys, _)| (k.as_str(), keys.clone())),
            Some(("merge_conflict", vec!["merge_conflict:abc".to_owned()]))
        );
        assert!(follow_up_for(&pr(Mergeability::Behind)).is_some());
        assert!(
            follow_up_for(&pr(Mergeability::Unknown)).is_none(),
            "GitHub still computing"
        );
        assert!(follow_up_for(&pr(Mergeability::Clean)).is_none());
        let mut closed = pr(Mergeability::Conflicted);
        closed.state = "closed".into();
        assert!(follow_up_for(&closed).is_none());
    }
}
