//! The steps of a `merge_conflict` follow-up (ordered by `pipeline::sync`): `sync/n`
//! fetches the base and rebases or merges the task branch onto it; `resolve/r` is the
//! owner's turn on the conflicts git stopped on, after which gaffer itself checks the
//! files for conflict markers and continues. The push approval is the follow-ups'
//! `push-approval/f` (see `crate::steps::follow_up`), asked with [`push_summary`].
//!
//! The owner only edits files: the worktree's git dir lies outside what its sandbox
//! may write, so staging and continuing are gaffer's, through the git dir gaffer
//! recorded. What the owner says is never taken for "resolved": the markers and the
//! clean `git status` are checked by `gaffer-forge`.

use crate::failure::{fail, Failure};
use crate::pipeline::follow_up::sync::sync_of;
use crate::pipeline::{receipt_of, StepKind};
use crate::steps::ship::base_branch;
use crate::{prompts, Engine};
use gaffer_core::{Step, TaskState};
use gaffer_forge::{ForgeError, Repo, UpdateOutcome};
use serde_json::{json, Value};
use std::path::PathBuf;
use tokio_util::sync::CancellationToken;

/// How much of each side of a conflicted file goes into the owner's prompt.
const SIDE_CHARS: usize = 6000;

/// The base the task branch was last updated onto, from the newest `sync/n` that
/// moved it (`None`: the branch is still on the base it started from).
pub(crate) fn updated_base(task: &TaskState) -> Option<String> {
    task.steps_in_order()
        .into_iter()
        .rev()
        .filter(|s| matches!(StepKind::of(&s.id), Some(StepKind::Sync(_))))
        .filter_map(|s| s.receipt.as_ref())
        .filter(|r| r.get("outcome").and_then(Value::as_str) != Some("up_to_date"))
        .find_map(|r| r.get("base_sha")?.as_str().map(str::to_owned))
}

/// A receipt for what an update left.
fn outcome_receipt(out: &UpdateOutcome) -> Value {
    match out {
        UpdateOutcome::UpToDate { head } => json!({ "outcome": "up_to_date", "head": head }),
        UpdateOutcome::Updated { head } => json!({ "outcome": "updated", "head": head }),
        UpdateOutcome::Conflicted { files } => json!({ "outcome": "conflicted", "files": files }),
    }
}

impl Engine {
    /// `sync/n`: fetch the base from the forge's remote and bring the task branch onto
    /// it by the project's `conflict_strategy` (recorded in the receipt, so the push
    /// that follows knows whether it needs a lease).
    pub(crate) async fn sync_base(&self, task: &TaskState) -> Result<Value, Failure> {
        let project = self.project(task).await?;
        let ship = self.shipping(&project)?.clone();
        let wt = self.worktree(task).await?;
        let base = base_branch(task, &wt);
        let strategy = ship.conflict_strategy;
        let root = PathBuf::from(&project.path);
        let (remote, fetch_base, worktree) = (ship.remote.clone(), base.clone(), wt.clone());
        let done = tokio::task::spawn_blocking(move || {
            let auth = Self::push_auth(&ship)?;
            let base_sha = Repo::open(&root)
                .and_then(|repo| repo.fetch_base(&remote, &fetch_base, &auth))
                .map_err(|e| e.to_string())?;
            let out = worktree
                .update_onto(&base_sha, strategy)
                .map_err(|e| e.to_string())?;
            Ok::<_, String>((base_sha, out))
        })
        .await
        .unwrap_or_else(|e| Err(format!("the update stopped: {e}")));
        let (base_sha, out) = done.map_err(|e| fail(self.settings.redactor.redact(&e)))?;
        let mut receipt = outcome_receipt(&out);
        receipt["strategy"] = json!(strategy.name());
        receipt["base"] = json!(base);
        receipt["base_sha"] = json!(base_sha);
        Ok(receipt)
    }

    /// `resolve/r`: the owner resolves the conflicted files; then gaffer checks them and
    /// continues the update. A resolution that left markers is `unresolved` (the next
    /// round tells the owner); a rebase that stops again on a later commit is
    /// `conflicted` again.
    pub(crate) async fn resolve_conflicts(
        &self,
        task: &TaskState,
        step: &Step,
        cancel: &CancellationToken,
    ) -> Result<Value, Failure> {
        let wt = self.worktree(task).await?;
        let conflicts = wt.conflicts()?;
        let files: Vec<String> = if conflicts.is_empty() {
            // A run after an interrupted resolution: git no longer lists them (they may
            // be staged), the step's input still does.
            step.input
                .get("files")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|f| f.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default()
        } else {
            conflicts.iter().map(|c| c.path.clone()).collect()
        };
        let redact = |t: &str| self.settings.redactor.redact(t);
        let base = base_branch(task, &wt);
        let mut assignment = format!(
            "The base branch `{base}` moved under this task's pull request, and bringing the task branch onto it stopped on conflicts. Resolve them: edit each conflicted file so that it keeps what the base changed and what this task changed, and remove every conflict marker (`<<<<<<<`, `=======`, `>>>>>>>`). Only edit files; do not run git (gaffer stages the files and continues when you are done, after checking that no marker is left).\n\nConflicted files: {}\n",
            files.join(", ")
        );
        if step.input.get("unresolved") == Some(&Value::Bool(true)) {
            assignment.push_str(
                "\nThe previous attempt left conflict markers in these files: remove them all.\n",
            );
        }
        for c in &conflicts {
            let side = |s: &Option<String>| match s {
                Some(text) => format!("```\n{}\n```", prompts::head(&redact(text), SIDE_CHARS)),
                None => "(deleted on this side)".to_owned(),
            };
            assignment.push_str(&format!(
                "\n### {}\n\nThe base branch's version:\n{}\n\nThis task's version:\n{}\n",
                c.path,
                side(&c.base_side),
                side(&c.task_side)
            ));
        }
        let mut receipt = self.owner_turn(task, step, &assignment, cancel).await?;
        let result = wt.continue_update(&files);
        let outcome = match result {
            Ok(out) => outcome_receipt(&out),
            Err(ForgeError::Unresolved { files, .. }) => {
                json!({ "outcome": "unresolved", "files": files })
            }
            Err(e) => return Err(e.into()),
        };
        if let (Value::Object(r), Value::Object(o)) = (&mut receipt, outcome) {
            r.extend(o);
        }
        Ok(receipt)
    }
}

impl Engine {
    /// The probe of an interrupted `resolve/r`. gaffer goes on with the update only
    /// after the owner's turn has ended, and whether an update is under way is read
    /// from the recorded git dir, which no agent may write: an update no longer under
    /// way, on a branch that holds the base of its `sync/n` with nothing left
    /// uncommitted, is the round's whole effect, found. Its outcome is recorded
    /// without running the turn again (a second turn on a finished update could only
    /// leave changes nothing commits) and without asking anyone. `None`: still under
    /// way (the turn may have been cut short), or unreadable: a person decides, as
    /// for any interrupted turn.
    pub(crate) async fn probe_resolve(&self, task: &TaskState, step: &Step) -> Option<Value> {
        let sync = sync_of(step)?;
        let base = receipt_of(task, StepKind::Sync(sync))?
            .get("base_sha")?
            .as_str()?
            .to_owned();
        let wt = self.worktree(task).await.ok()?;
        if wt.update_in_progress().is_some() || !wt.contains(&base).ok()? {
            return None;
        }
        // With no update under way this only reads: the task branch is checked out and
        // nothing is left uncommitted, or it is an error.
        let out = wt.continue_update(&[]).ok()?;
        let mut receipt = outcome_receipt(&out);
        receipt["reconciled"] = json!(true);
        Some(receipt)
    }
}

/// What `push-approval/f` of a merge-conflict follow-up asks: push the branch updated
/// by `sync/s` (its input's `sync`), and how.
pub(crate) fn push_summary(task: &TaskState, step: &Step, wt: &gaffer_forge::Worktree) -> String {
    let sync = step.input.get("sync").and_then(Value::as_u64).unwrap_or(0) as u32;
    let strategy = receipt_of(task, StepKind::Sync(sync))
        .and_then(|r| r.get("strategy"))
        .and_then(Value::as_str)
        .unwrap_or("rebase");
    let how = if strategy == "rebase" {
        "rebased, so it replaces the branch with --force-with-lease (refused if someone else pushed to it)"
    } else {
        "with the base merged in (a plain push)"
    };
    format!(
        "Push `{}`, updated onto the moved `{}` {how}?",
        wt.branch,
        base_branch(task, wt),
    )
}
