//! Crash recovery: steps that were running when their process died are marked
//! interrupted; a non-idempotent one is probed (`reconcile`) and, when its effects
//! cannot be proven, handed to a person (`ask_human`).

use crate::error::{EngineError, Result, StepFailure};
use crate::failure::Failure;
use crate::pipeline::StepKind;
use crate::Engine;
use gaffer_app::Subject;
use gaffer_core::{ApprovalKind, Event, StepId, TaskId, TaskState};
use serde_json::json;
use tokio_util::sync::CancellationToken;

impl Engine {
    /// Recovery for one task: its running steps are marked interrupted (the reducer
    /// then re-queues reads and idempotent steps and turns non-idempotent ones into
    /// `effect_unknown`). Returns whether the task is unfinished. Call it only while
    /// holding the task's lease: then no other process runs it.
    pub async fn recover_task(&self, id: &TaskId) -> Result<bool> {
        let Some((task, _)) = self.load(id).await? else {
            return Err(EngineError::Invalid(format!("task `{id}` does not exist")));
        };
        if task.stage.is_final() {
            return Ok(false);
        }
        let running: Vec<Event> = task
            .steps
            .values()
            .filter(|s| s.state == gaffer_core::StepState::Started)
            .map(|s| Event::StepInterrupted {
                step_id: s.id.clone(),
            })
            .collect();
        if !running.is_empty() {
            tracing::info!(task = %id, steps = running.len(), "marking interrupted steps");
            self.append(id, running).await?;
        }
        Ok(true)
    }

    /// A non-idempotent step was running when the process died. A push or a pull
    /// request is probed on the forge (see `ship`); for an agent turn the probe reads
    /// the worktree, but its effects cannot be proven absent, so a human decides.
    pub(crate) async fn reconcile(&self, task: &TaskState, id: &StepId) -> Result<()> {
        self.append(
            &task.id,
            vec![Event::StepReconcileStarted {
                step_id: id.clone(),
            }],
        )
        .await?;
        if matches!(
            StepKind::of(id),
            Some(StepKind::Push(_) | StepKind::PullRequest)
        ) {
            return self.reconcile_ship(task, id).await;
        }
        let changed = self.worktree(task).ok().and_then(|wt| {
            let dirty = wt.has_changes().ok()?;
            Some((dirty, wt.changed_files().unwrap_or_default()))
        });
        let reason = match changed {
            Some((true, files)) => format!(
                "`{}` was interrupted by a crash after changing the worktree (uncommitted changes in: {}); approve to run it again on top of them, deny to fail the task",
                task.steps[id].name,
                files.join(", ")
            ),
            Some((false, _)) => format!(
                "`{}` was interrupted by a crash; the worktree shows no uncommitted change, but commands it ran may have had effects; approve to run it again, deny to fail the task",
                task.steps[id].name
            ),
            None => format!("`{}` was interrupted by a crash and its worktree cannot be read", task.steps[id].name),
        };
        self.append(
            &task.id,
            vec![Event::StepManualRequired {
                step_id: id.clone(),
                reason,
            }],
        )
        .await
    }

    pub(crate) async fn ask_human(
        &self,
        task: &TaskState,
        id: &StepId,
        cancel: &CancellationToken,
    ) -> Result<()> {
        let step = &task.steps[id];
        let summary = step
            .error
            .clone()
            .unwrap_or_else(|| format!("`{}` needs a human", step.name));
        let details = json!({ "step": id, "intent": step.intent, "attempt": step.attempt });
        let wait = self.ask(
            task,
            step,
            step.attempt,
            ApprovalKind::Manual,
            summary,
            details,
            Subject::default(),
        );
        let resolution = tokio::select! {
            r = wait => r,
            () = cancel.cancelled() => return Err(EngineError::Cancelled),
        };
        let resolution = match resolution {
            Ok(r) => r,
            Err(Failure::Engine(e)) => return Err(e),
            Err(Failure::Step(StepFailure(e))) => return Err(EngineError::Invalid(e)),
            Err(Failure::Cancelled) => return Err(EngineError::Cancelled),
        };
        if resolution.approved() {
            self.append(
                &task.id,
                vec![Event::StepRetried {
                    step_id: id.clone(),
                }],
            )
            .await
        } else {
            self.append(
                &task.id,
                vec![Event::TaskFailed {
                    reason: format!(
                        "`{}` needed a human after a crash: {}",
                        step.name,
                        resolution.reason()
                    ),
                }],
            )
            .await
        }
    }
}
