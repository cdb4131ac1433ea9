//! The watchdog at the edge: the clock, the `stall` approval, and what the answer
//! does ([`Watch`], used by `turn::converse`; what counts as stuck is
//! [`crate::watchdog`]).
//!
//! A sighting asks one `stall` approval naming what was seen, while the agent goes
//! on (it may get unstuck by itself). At most one is pending per session; what is
//! seen meanwhile is asked about once it is decided. The answer:
//! - **approve (continue)**: the turn goes on; a note is sent to the agent as the
//!   decider's message (the `live` path: into the running turn, else the next); an
//!   agent still idle (or a turn still running) a whole `idle` (or `turn`) after the
//!   answer is asked about again;
//! - **deny (interrupt)**: the running turn is stopped as `gaffer interrupt` stops
//!   it (recorded as the decider's `turn_interrupted`), and the note (or, without
//!   one, what the watchdog saw) becomes the decider's message that starts the next
//!   turn;
//! - **cancel**: the person cancels the task (`gaffer task cancel`, the page's Cancel
//!   task), which withdraws the approval;
//! - expired: as continue without a note (nobody looked; the agent is not stopped
//!   on nobody's word).
//!
//! A turn that ends while the question is pending waits for the answer before its
//! answer counts: the task pauses, nothing is lost. A step that ends otherwise
//! (failure, cancel) withdraws it.

use crate::failure::Failure;
use crate::live::Live;
use crate::watchdog::{Stall, Watchdog};
use crate::Engine;
use gaffer_agents::{AgentEvent, AgentSession};
use gaffer_app::{ApprovalRequest, Outcome, Resolution, Subject};
use gaffer_core::{Actor, ApprovalKind, SessionId, Step, TaskState};
use serde_json::json;
use std::time::Instant;
use tokio::task::JoinHandle;

/// Approval keys of a step attempt's stall questions: `STALL_KEYS + attempt × 1000 + n`.
const STALL_KEYS: u32 = 1_000_000_000;

type Waiting = JoinHandle<Result<Resolution, gaffer_app::AppError>>;

/// One agent session's watchdog, with its pending question.
pub(crate) struct Watch {
    dog: Watchdog,
    engine: Engine,
    task: TaskState,
    step: Step,
    session: SessionId,
    pending: Option<(String, Waiting)>,
    /// The message that starts the turn after an interrupt, sent once the
    /// interrupted turn has ended (sent earlier, it would be steered into the turn
    /// being stopped).
    after_interrupt: Option<(String, Actor)>,
}

/// What woke the watch.
pub(crate) enum Wake {
    /// A time trigger may be met.
    Alarm,
    /// The pending question was answered.
    Decided(Box<Result<Resolution, Failure>>),
}

impl Watch {
    pub(crate) fn new(
        engine: &Engine,
        task: &TaskState,
        step: &Step,
        session: &SessionId,
        cfg: gaffer_config::Watchdog,
        writes: bool,
    ) -> Self {
        Self {
            dog: Watchdog::new(cfg, writes),
            engine: engine.clone(),
            task: task.clone(),
            step: step.clone(),
            session: session.clone(),
            pending: None,
            after_interrupt: None,
        }
    }

    pub(crate) fn turn_started(&mut self) {
        self.dog.turn_started(Instant::now());
    }

    pub(crate) fn turn_ended(&mut self) {
        self.dog.turn_ended();
    }

    /// Feed an agent event; ask if it makes the agent look stuck.
    pub(crate) async fn observe(&mut self, event: &AgentEvent) -> Result<(), Failure> {
        self.dog.observe(event, Instant::now());
        self.ask_if_stalled().await
    }

    /// Until the pending question is answered or a time trigger may be met.
    /// Cancel-safe: the question stays pending when another branch wins.
    pub(crate) async fn wake(&mut self) -> Wake {
        if let Some((_, waiting)) = &mut self.pending {
            let got = waiting.await;
            self.pending = None;
            return Wake::Decided(Box::new(match got {
                Ok(Ok(r)) => Ok(r),
                Ok(Err(e)) => Err(crate::error::EngineError::from(e).into()),
                Err(e) => Err(crate::failure::fail(format!(
                    "waiting for a stall decision: {e}"
                ))),
            }));
        }
        match self.dog.deadline() {
            Some(at) => {
                tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await;
                Wake::Alarm
            }
            None => std::future::pending().await,
        }
    }

    /// Ask a person about what the watchdog sees now, unless a question is pending.
    pub(crate) async fn ask_if_stalled(&mut self) -> Result<(), Failure> {
        if self.pending.is_some() {
            return Ok(());
        }
        let Some(stall) = self.dog.check(Instant::now()) else {
            return Ok(());
        };
        tracing::info!(task = %self.task.id, step = %self.step.id, trigger = stall.trigger, "the agent looks stuck: {}", stall.seen);
        let id = self.request(&stall).await?;
        let app = self.engine.app.clone();
        let waiting = {
            let id = id.clone();
            tokio::spawn(async move { app.wait_for_decision(&id).await })
        };
        self.pending = Some((id, waiting));
        Ok(())
    }

    async fn request(&self, stall: &Stall) -> Result<String, Failure> {
        let Some((now, _)) = self.engine.load(&self.task.id).await? else {
            return Err(crate::failure::fail("the task vanished"));
        };
        let asked = now
            .approvals
            .values()
            .filter(|a| a.step_id == self.step.id && a.kind == ApprovalKind::Stall)
            .count() as u32;
        let mut details = json!({
            "trigger": stall.trigger,
            "seen": stall.seen,
            "step": self.step.id,
            "session": self.session,
            "choices": {
                "approve": "continue",
                "deny": "interrupt the turn",
                "cancel": format!("gaffer task cancel {}", self.task.id),
            },
        });
        if let (Some(d), Some(facts)) = (details.as_object_mut(), stall.facts.as_object()) {
            for (k, v) in facts {
                d.insert(k.clone(), v.clone());
            }
        }
        let approval = self
            .engine
            .app
            .request_approval(ApprovalRequest {
                task_id: self.task.id.clone(),
                step_id: self.step.id.clone(),
                attempt: STALL_KEYS + self.step.attempt * 1000 + asked + 1,
                kind: ApprovalKind::Stall,
                summary: format!(
                    "`{}` looks stuck: {}. Continue, interrupt the turn, or cancel the task?",
                    self.step.name, stall.seen
                ),
                details,
                subject: Subject::default(),
            })
            .await
            .map_err(crate::error::EngineError::from)?;
        Ok(approval.id)
    }

    /// Act on an answer. `running`: a turn runs now (an interrupt stops it).
    pub(crate) async fn apply(
        &mut self,
        decided: Box<Result<Resolution, Failure>>,
        session: &mut dyn AgentSession,
        live: &mut Live,
        running: bool,
    ) -> Result<(), Failure> {
        let resolution = (*decided)?;
        let person = resolution
            .approval
            .decided_by
            .as_ref()
            .filter(|d| d.kind == "user")
            .map(|d| Actor::user(&d.name, &d.via));
        let note = resolution
            .approval
            .note
            .clone()
            .filter(|n| !n.trim().is_empty());
        if matches!(resolution.outcome, Outcome::Approved | Outcome::Expired) {
            // Went on: asked again if it stalls again the same way.
            let trigger = resolution.approval.details["trigger"]
                .as_str()
                .unwrap_or("");
            self.dog.continued(trigger, Instant::now());
        }
        let app = &self.engine.app;
        let task = self.task.id.as_str();
        match (resolution.outcome, person) {
            (Outcome::Approved, Some(by)) => {
                if let Some(note) = note {
                    app.send_message(task, &note, by)
                        .await
                        .map_err(crate::error::EngineError::from)?;
                }
            }
            (Outcome::Denied, Some(by)) => {
                let seen = resolution.approval.details["seen"].as_str().unwrap_or("");
                let text = note.unwrap_or_else(|| {
                    format!(
                        "gaffer's watchdog stopped your turn: {seen}. Do not repeat what did not work: step back, take another approach, or say plainly what blocks you."
                    )
                });
                if running {
                    // Already stopped by someone: the message still follows.
                    if let Err(e) = app.interrupt(task, by.clone()).await {
                        tracing::info!(task, "the stall's interrupt was not recorded: {e}");
                    }
                    live.steer(session).await?;
                    self.after_interrupt = Some((text, by));
                } else {
                    app.send_message(task, &text, by)
                        .await
                        .map_err(crate::error::EngineError::from)?;
                }
            }
            // Expired or withdrawn: nobody said to stop.
            _ => {}
        }
        // What was seen meanwhile is asked about now.
        self.ask_if_stalled().await
    }

    /// The turn ended: a pending question is answered before its answer counts.
    pub(crate) async fn settle(
        &mut self,
        session: &mut dyn AgentSession,
        live: &mut Live,
        cancel: &tokio_util::sync::CancellationToken,
    ) -> Result<(), Failure> {
        while self.pending.is_some() {
            let decided = tokio::select! {
                w = self.wake() => w,
                () = cancel.cancelled() => return Err(Failure::Cancelled),
            };
            if let Wake::Decided(d) = decided {
                self.apply(d, session, live, false).await?;
            }
        }
        if let Some((text, by)) = self.after_interrupt.take() {
            self.engine
                .app
                .send_message(self.task.id.as_str(), &text, by)
                .await
                .map_err(crate::error::EngineError::from)?;
        }
        Ok(())
    }

    /// The session ends: a question still pending is withdrawn.
    pub(crate) async fn close(&mut self, reason: &str) {
        if let Some((id, waiting)) = self.pending.take() {
            waiting.abort();
            let _ = self.engine.app.withdraw(&id, reason).await;
        }
    }
}
