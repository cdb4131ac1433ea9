//! The `merge_conflict` follow-up: the base moved under a shipped task's pull request
//! and the forge says it no longer merges. Pure, like the rest of the pipeline.
//!
//! `sync/n` fetches the base and rebases or merges onto it (the project's
//! `conflict_strategy`, recorded in its receipt) → when git stopped on conflicts,
//! `resolve/r` (the owner edits the conflicted files; gaffer checks that no marker is
//! left, then continues, which may stop again on a later commit) → `check/c` (the
//! project's check, on the updated branch) → `sync-approval/n` (the ship approval
//! rules: policy or a person) → `push/p` (for a rebase with
//! `--force-with-lease` against the commit gaffer last pushed, whose sha is in the
//! step's input; for a merge a plain push) → `ci/p` → done again. A base that moved
//! without a textual conflict goes from `sync/n` straight to the check: no owner
//! turn. A branch that already holds the base (the forge's answer was stale) ends
//! the follow-up without a push.

use super::{count, fail, go, receipt_of, record, shipped_summary, Next, StepKind};
use gaffer_core::{Event, Stage, Step, TaskState};
use serde_json::{json, Value};

/// The follow-up kind this module answers.
pub const FOLLOW_UP_KIND: &str = "merge_conflict";

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

/// The sync step a step belongs to (its input's `sync`).
fn sync_of(step: &Step) -> Option<u32> {
    input_u32(step, "sync")
}

/// The next move of the `merge_conflict` follow-up, or `None` when `last` is not
/// part of it (and no such follow-up waits to start).
pub(super) fn decide(task: &TaskState, last: &Step, kind: StepKind) -> Option<Next> {
    let failed = last.state == gaffer_core::StepState::Failed;
    let why = || last.error.clone().unwrap_or_default();
    match kind {
        StepKind::Sync(_) if failed => Some(fail(format!(
            "updating the branch onto its moved base failed: {}",
            why()
        ))),
        StepKind::Sync(s) => Some(after_update(task, last, s)),
        StepKind::Resolve(r) if failed => Some(fail(format!(
            "the owner's conflict resolution (round {r}) failed: {}",
            why()
        ))),
        StepKind::Resolve(_) => Some(after_update(task, last, sync_of(last)?)),
        StepKind::Check(c) if sync_of(last).is_some() => {
            let s = sync_of(last)?;
            let receipt = last.receipt.clone().unwrap_or(Value::Null);
            Some(if failed {
                fail(format!("check run {c} could not run: {}", why()))
            } else if receipt.get("passed").and_then(Value::as_bool) == Some(true) {
                go(
                    task,
                    Stage::Shipping,
                    StepKind::SyncApproval(s),
                    last,
                    json!({ "sync": s }),
                )
            } else {
                fail(format!(
                    "the check fails on the branch updated onto its moved base (check run {c}); nothing was pushed, the pull request stays as it was and the updated branch is in the worktree"
                ))
            })
        }
        StepKind::SyncApproval(_) if failed => Some(fail(format!(
            "pushing the updated branch was not approved ({}); the pull request stays as it was",
            why()
        ))),
        StepKind::SyncApproval(s) => Some(push(task, last, s)),
        _ => start(task, last),
    }
}

/// A `merge_conflict` follow-up no sync answered yet: its first step.
fn start(task: &TaskState, last: &Step) -> Option<Next> {
    let follow_up = task.last_follow_up()?;
    if follow_up.kind != FOLLOW_UP_KIND {
        return None;
    }
    let answered = task.steps.values().any(|s| {
        matches!(StepKind::of(&s.id), Some(StepKind::Sync(_)))
            && input_u32(s, "follow_up") == Some(follow_up.n)
    });
    if answered {
        return None;
    }
    let n = count(task, |k| matches!(k, StepKind::Sync(_))) + 1;
    Some(go(
        task,
        Stage::Shipping,
        StepKind::Sync(n),
        last,
        json!({ "follow_up": follow_up.n }),
    ))
}

/// After `sync/s` or a `resolve/r` of it: resolve (again), check, or done.
fn after_update(task: &TaskState, last: &Step, s: u32) -> Next {
    match outcome(last) {
        "up_to_date" => {
            // The branch already holds the base: nothing to push. Done again, with
            // what was shipped before.
            let ci = task
                .steps_in_order()
                .into_iter()
                .rev()
                .find(|s| matches!(StepKind::of(&s.id), Some(StepKind::Ci(_))))
                .and_then(|s| s.receipt.clone())
                .unwrap_or(Value::Null);
            Next::Record(vec![Event::TaskDone {
                summary: shipped_summary(task, &ci),
            }])
        }
        "updated" => {
            let c = count(task, |k| matches!(k, StepKind::Check(_))) + 1;
            // After an owner turn the task is testing; straight from the update it
            // stays shipping (a shipped task does not go back to testing).
            let stage = if task.stage == Stage::Coding {
                Stage::Testing
            } else {
                task.stage
            };
            go(task, stage, StepKind::Check(c), last, json!({ "sync": s }))
        }
        "conflicted" | "unresolved" => {
            let rounds = task
                .steps
                .values()
                .filter(|st| {
                    matches!(StepKind::of(&st.id), Some(StepKind::Resolve(_)))
                        && sync_of(st) == Some(s)
                })
                .count() as u32;
            if rounds >= RESOLVE_ROUNDS {
                return Next::Record(vec![Event::TaskBlocked {
                    reason: format!(
                        "the conflicts with the moved base are still not resolved after {rounds} owner rounds; resolve them by hand in the worktree, or close the pull request"
                    ),
                }]);
            }
            let files = last
                .receipt
                .as_ref()
                .and_then(|r| r.get("files"))
                .cloned()
                .unwrap_or(json!([]));
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

/// The push of sync `s`: with a lease on the commit gaffer last pushed for a rebase,
/// plain for a merge.
fn push(task: &TaskState, last: &Step, s: u32) -> Next {
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
        FOLLOW_UP_KIND.to_owned(),
        vec![format!("{FOLLOW_UP_KIND}:{}", pr.head_sha)],
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
