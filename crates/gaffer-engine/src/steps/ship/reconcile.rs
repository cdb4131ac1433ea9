//! The probes for an interrupted `push/n` or `pr`: found → completed, proven absent → run again, unreadable → a human decides.

use super::{failure_text, pr_receipt};
use crate::pipeline::StepKind;
use crate::{Engine, Result};
use gaffer_core::{Event, StepId, TaskState};
use gaffer_forge::Repo;
use gaffer_protocol::receipts::PullRequestReceipt;
use serde_json::{json, Value};
use std::path::PathBuf;

impl Engine {
    /// The probe for an interrupted `push/n` or `pr`: found → completed with what was
    /// found; proven absent → run again; unreadable → a human decides.
    pub(crate) async fn reconcile_ship(&self, task: &TaskState, id: &StepId) -> Result<()> {
        let probe = match StepKind::of(id) {
            Some(StepKind::Push(_)) => {
                let lease = task.steps[id].input.get("lease").and_then(Value::as_str);
                self.probe_push(task, lease).await
            }
            _ => self.probe_pull_request(task).await,
        };
        let event = match probe {
            Ok(Some(receipt)) => Event::StepCompleted {
                step_id: id.clone(),
                receipt,
            },
            Ok(None) => Event::StepRetried {
                step_id: id.clone(),
            },
            Err(e) => Event::StepManualRequired {
                step_id: id.clone(),
                reason: self.settings.redactor.redact(&format!(
                    "`{}` was interrupted by a crash and the forge cannot be read to check whether it happened: {e}; approve to run it again (a push of the same commit and the pull request lookup cannot do it twice), deny to fail the task",
                    task.steps[id].name
                )),
            },
        };
        self.record_outcome(&task.id, id, event).await
    }

    /// For a push with a lease, a remote branch at neither the local commit nor the
    /// leased one means someone else pushed: a person decides, nothing is pushed.
    async fn probe_push(
        &self,
        task: &TaskState,
        lease: Option<&str>,
    ) -> std::result::Result<Option<Value>, String> {
        let lease = lease.map(str::to_owned);
        let project = self.project(task).await.map_err(|e| e.to_string())?;
        let ship = self.shipping(&project).map_err(failure_text)?.clone();
        let wt = self.worktree(task).await.map_err(failure_text)?;
        let root = PathBuf::from(&project.path);
        let branch = wt.branch.clone();
        let remote = ship.remote.clone();
        let shown_remote = gaffer_forge::redact(&ship.remote, &[]);
        let found = tokio::task::spawn_blocking(move || {
            let auth = Self::push_auth(&ship)?;
            let repo = Repo::open(&root).map_err(|e| e.to_string())?;
            let local = repo
                .resolve(&format!("refs/heads/{branch}"))
                .map_err(|e| e.to_string())?;
            let there = repo
                .remote_branch_sha(&remote, &branch, &auth)
                .map_err(|e| e.to_string())?;
            if let Some(expected) = &lease {
                if there.as_deref() != Some(local.as_str())
                    && there.as_deref() != Some(expected.as_str())
                {
                    return Err(format!(
                        "the remote branch `{branch}` is at {}, neither the rebased commit {local} nor {expected} where gaffer last pushed it: someone else pushed to it, and gaffer will not overwrite their work",
                        there.as_deref().unwrap_or("nothing (deleted)")
                    ));
                }
            }
            Ok::<_, String>((there.as_deref() == Some(local.as_str())).then_some(local))
        })
        .await
        .map_err(|e| e.to_string())??;
        Ok(found.map(|sha| {
            json!({ "sha": sha, "pushed": true, "branch": wt.branch, "remote": shown_remote, "reconciled": true })
        }))
    }

    async fn probe_pull_request(
        &self,
        task: &TaskState,
    ) -> std::result::Result<Option<Value>, String> {
        let project = self.project(task).await.map_err(|e| e.to_string())?;
        let ship = self.shipping(&project).map_err(failure_text)?;
        let wt = self.worktree(task).await.map_err(failure_text)?;
        let forge = self.forge(ship, &project)?;
        let found = forge
            .find_open_pr(&wt.branch)
            .await
            .map_err(|e| e.to_string())?;
        Ok(found.map(|pr| {
            json!(PullRequestReceipt {
                reconciled: true,
                ..pr_receipt(&pr, false)
            })
        }))
    }
}
