//! Crash recovery: steps that were running when their process died (their effect,
//! or the probe of an earlier crash's unknown effect) are marked interrupted; a
//! non-idempotent one is probed (`reconcile`: a push or pull request on the forge, a
//! conflict resolution by the update it finishes) and, when its effects cannot be
//! proven, handed to a person (`ask_human`).
//!
//! A crash can fall between any two appends, so every decision the engine writes in
//! more than one append leaves a state between them that recovery handles; the
//! others are one append. Checked by the crash-point harness
//! (`tests/suite/crash_points.rs`), which kills a run after every append and again
//! after every append of the recovery that follows.
//!
//! | decision | appends | the state between, after a crash |
//! |---|---|---|
//! | take a task over | one: `task_leased` + the running steps interrupted + their approvals withdrawn | — |
//! | cancel | one: running steps failed + `task_cancelled` | — |
//! | a step's outcome | one: completed/failed/retried/manual + its pending approvals withdrawn | — |
//! | run a step | `step_started`, then its outcome | `started`: interrupted at takeover; reads and idempotent steps run again, the others go to `effect_unknown` |
//! | probe an unknown effect | `step_reconcile_started`, then what the probe found | `reconciling`: interrupted back to `effect_unknown`, probed again (never a failed task) |
//! | ask a person | `approval_requested`; the answer (`approval_decided`, by the person's process); then the step's outcome | a step `started`: its question withdrawn and asked again (plan, escalation, ship: under the same key, so an answer already given counts); `manual_required`: the same key finds the answer |
//! | an agent turn | `session_started`, `session_verified`, `agent_activity` … inside a `started` step | facts only: the turn is interrupted as its step is |
//! | wait for CI | `ci_status_changed` records inside a `started` step | facts only: the wait starts again |

use crate::error::{EngineError, Result, StepFailure};
use crate::failure::Failure;
use crate::pipeline::{recover, StepKind};
use crate::turn::interrupted_session;
use crate::Engine;
use gaffer_app::Subject;
use gaffer_core::{ApprovalKind, Event, StepId, TaskId, TaskState};
use serde_json::json;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How long the probe of an interrupted turn waits for its processes to be gone.
const PROBE_WAIT: Duration = Duration::from_secs(30);

impl Engine {
    /// Recovery for one task: records what [`recover`] finds (the steps that were
    /// running interrupted, the approvals they waited for withdrawn), so that the
    /// reducer re-queues reads and idempotent steps and sends non-idempotent ones
    /// (and interrupted probes) to `effect_unknown`. Returns whether the task is
    /// unfinished. Call it only while holding the task's lease: then no other
    /// process runs it.
    pub async fn recover_task(&self, id: &TaskId) -> Result<bool> {
        self.take_over_task(id, None).await
    }

    /// [`Engine::recover_task`] with `leased` (a worker's `task_leased`) first, in
    /// the same append: taking a task over and what the taker found are one
    /// decision, so no crash can separate them.
    pub(crate) async fn take_over_task(&self, id: &TaskId, leased: Option<Event>) -> Result<bool> {
        for _ in 0..64 {
            let Some((task, head)) = self.load(id).await? else {
                return Err(EngineError::Invalid(format!("task `{id}` does not exist")));
            };
            if task.stage.is_final() {
                return Ok(false);
            }
            let found = recover(&task);
            if !found.is_empty() {
                tracing::info!(task = %id, events = found.len(), "recovering interrupted steps");
            }
            let events: Vec<Event> = leased.iter().cloned().chain(found).collect();
            if events.is_empty() {
                return Ok(true);
            }
            match self.append_at(id, head, &events).await {
                Ok(true) => return Ok(true),
                Ok(false) => continue,
                Err(EngineError::Finished(_)) => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        Err(EngineError::Invalid(format!(
            "task `{id}` keeps changing; could not recover it"
        )))
    }

    /// A non-idempotent step was running when the process died. A push or a pull
    /// request is probed on the forge (see `ship`); a conflict resolution whose
    /// update went on is found complete (see `Engine::probe_resolve`); for any other
    /// agent turn the probe reads the worktree, but its effects cannot be proven
    /// absent, so a human decides.
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
        if matches!(StepKind::of(id), Some(StepKind::Resolve(_))) {
            if let Some(receipt) = self.probe_resolve(task, &task.steps[id]).await {
                tracing::info!(task = %task.id, step = %id, "the interrupted conflict resolution had finished its update: recorded, not run again");
                let done = Event::StepCompleted {
                    step_id: id.clone(),
                    receipt,
                };
                return self.record_outcome(&task.id, id, done).await;
            }
        }
        let name = &task.steps[id].name;
        // Only once no process of the interrupted turn is alive does the worktree show
        // everything it did: each holds the task's lock until it is gone (their
        // supervisors kill them as soon as the gaffer that started them died).
        let lock = self.turn_lock(&task.id);
        let settled = gaffer_agents::contain::wait_until_released(&lock, PROBE_WAIT)
            .await
            .unwrap_or(false);
        if settled && crate::fallback::nothing_since_switch(task, id) {
            tracing::info!(task = %task.id, step = %id, "interrupted between a switch to the next agent and its start: runs again");
            return self
                .append(
                    &task.id,
                    vec![Event::StepRetried {
                        step_id: id.clone(),
                    }],
                )
                .await;
        }
        let changed = match self.worktree(task).await {
            Ok(wt) if settled => wt.uncommitted_files().ok(),
            _ => None,
        };
        // An agent turn goes on in the conversation the crash interrupted.
        let again = match interrupted_session(task, id) {
            Some((s, _)) => format!("run it again in the same {} conversation", s.agent),
            None => "run it again".to_owned(),
        };
        let reason = match changed {
            _ if !settled => format!(
                "`{name}` was interrupted by a crash and processes it started still run after {}s (they hold {}); approve to {again} once they are gone, deny to fail the task",
                PROBE_WAIT.as_secs(),
                lock.display()
            ),
            Some(files) if !files.is_empty() => format!(
                "`{name}` was interrupted by a crash after changing the worktree (uncommitted changes in: {}); approve to {again} on top of them, deny to fail the task",
                files.join(", ")
            ),
            Some(_) => format!(
                "`{name}` was interrupted by a crash; the worktree shows no uncommitted change, but commands it ran may have had effects; approve to {again}, deny to fail the task"
            ),
            None => format!("`{name}` was interrupted by a crash and its worktree cannot be read"),
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
            Err(Failure::Step(StepFailure(e)) | Failure::Spent(StepFailure(e), _)) => {
                return Err(EngineError::Invalid(e))
            }
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
