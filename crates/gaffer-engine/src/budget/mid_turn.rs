//! Spending caps during a turn: the running turn's spend, as the agent reports it,
//! checked against the caps whenever it grows ([`MidTurn`], used by
//! `turn::converse` the way the watchdog's [`crate::stall::Watch`] is).
//!
//! The turn's spend so far is what its [`AgentEvent::Usage`] events counted plus
//! the latest [`AgentEvent::UsageSoFar`] since (the agent's provisional count,
//! replaced by the next `Usage`): never the two for the same tokens. It only
//! decides when to ask; what the step records is the turn's result, as always.
//! The caps are checked when the agent goes on after its spend grew (its next
//! event), not when the turn ends: the check before the next turn asks then.
//!
//! At most one `budget` question is pending per session. Approved, the turn goes
//! on (raised; asked again if it is still over, as before a turn); denied or
//! expired, the turn is interrupted and, once it has ended, the step fails with
//! what it spent. A turn that ends while the question is pending waits for the
//! answer before its result counts.

use super::Asked;
use crate::failure::{fail, fail_spent, Failure};
use crate::Engine;
use gaffer_agents::{AgentEvent, AgentSession, Usage};
use gaffer_app::Resolution;
use gaffer_core::{Step, TaskState};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

type Waiting = JoinHandle<Result<Resolution, gaffer_app::AppError>>;

/// One agent session's spending caps while its turns run.
pub(crate) struct MidTurn {
    engine: Engine,
    task: TaskState,
    step: Step,
    /// `None`: no cap is set, nothing to watch.
    caps: Option<gaffer_config::Budget>,
    /// What the step's earlier turns spent (not in a receipt yet).
    before: Usage,
    /// What this turn's `Usage` events counted.
    counted: Usage,
    /// The agent's latest spend so far since then (replaced by the next `Usage`).
    so_far: Usage,
    /// The spend grew since the caps were last checked.
    grew: bool,
    pending: Option<(Asked, Waiting)>,
    /// A person said stop (or nobody answered): why.
    stopped: Option<String>,
}

impl MidTurn {
    pub(crate) async fn new(
        engine: &Engine,
        task: &TaskState,
        step: &Step,
    ) -> Result<Self, Failure> {
        let caps = engine.caps(task).await?;
        Ok(Self {
            engine: engine.clone(),
            task: task.clone(),
            step: step.clone(),
            caps: caps.any().then_some(caps),
            before: Usage::default(),
            counted: Usage::default(),
            so_far: Usage::default(),
            grew: false,
            pending: None,
            stopped: None,
        })
    }

    /// A turn starts, after turns of the step that spent `before`.
    pub(crate) fn turn_started(&mut self, before: &Usage) {
        self.before = *before;
        self.counted = Usage::default();
        self.so_far = Usage::default();
        self.grew = false;
    }

    /// Feed an agent event; ask a person if the turn's spend took the task over a
    /// cap and the agent goes on. Spend reported as the turn ends (its result's)
    /// is left to the check before the next turn: that one stops nothing running.
    pub(crate) async fn observe(&mut self, event: &AgentEvent) -> Result<(), Failure> {
        match event {
            AgentEvent::Usage { usage } => {
                self.counted += *usage;
                self.so_far = Usage::default();
                self.grew = true;
            }
            AgentEvent::UsageSoFar { usage } => {
                self.so_far = *usage;
                self.grew = true;
            }
            AgentEvent::TurnCompleted { .. } => self.grew = false,
            _ if std::mem::take(&mut self.grew) => return self.ask_if_over().await,
            _ => {}
        }
        Ok(())
    }

    async fn ask_if_over(&mut self) -> Result<(), Failure> {
        let Some(caps) = &self.caps else {
            return Ok(());
        };
        if self.pending.is_some() || self.stopped.is_some() {
            return Ok(());
        }
        let mut in_flight = self.before;
        in_flight += self.counted;
        in_flight += self.so_far;
        let Some(asked) = self
            .engine
            .ask_if_over(&self.task, &self.step, caps, &in_flight, true)
            .await?
        else {
            return Ok(());
        };
        let app = self.engine.app.clone();
        let id = asked.approval.clone();
        let waiting = tokio::spawn(async move { app.wait_for_decision(&id).await });
        self.pending = Some((asked, waiting));
        Ok(())
    }

    /// Until the pending question is answered (never, with none). Cancel-safe: the
    /// question stays pending when another branch wins.
    pub(crate) async fn wake(&mut self) -> Result<Resolution, Failure> {
        let Some((_, waiting)) = &mut self.pending else {
            return std::future::pending().await;
        };
        let got = waiting.await;
        match got {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => Err(crate::error::EngineError::from(e).into()),
            Err(e) => Err(fail(format!("waiting for a budget decision: {e}"))),
        }
    }

    /// Act on the answer `decided`. `session`: the agent whose turn runs now (a
    /// stop interrupts it).
    pub(crate) async fn apply(
        &mut self,
        decided: Result<Resolution, Failure>,
        session: Option<&mut dyn AgentSession>,
    ) -> Result<(), Failure> {
        let Some((asked, _)) = self.pending.take() else {
            return Ok(());
        };
        let resolution = decided?;
        if resolution.approved() {
            // Raised: still over (a raise too small) asks again.
            return self.ask_if_over().await;
        }
        tracing::info!(task = %self.task.id, step = %self.step.id, "stopping the turn at the spending cap");
        self.stopped = Some(asked.stopped(&resolution));
        if let Some(session) = session {
            session
                .interrupt()
                .await
                .map_err(|e| fail(format!("interrupting the turn at the spending cap: {e}")))?;
        }
        Ok(())
    }

    /// The turn ended, the step's turns having spent `usage`: a pending question is
    /// answered before its result counts; stopped, the step fails.
    pub(crate) async fn settle(
        &mut self,
        usage: &Usage,
        cancel: &CancellationToken,
    ) -> Result<(), Failure> {
        while self.pending.is_some() {
            let decided = tokio::select! {
                d = self.wake() => d,
                () = cancel.cancelled() => return Err(Failure::Cancelled),
            };
            self.apply(decided, None).await?;
        }
        match self.stopped.take() {
            Some(why) => Err(fail_spent(why, usage)),
            None => Ok(()),
        }
    }

    /// The session ends: a question still pending is withdrawn.
    pub(crate) async fn close(&mut self, reason: &str) {
        if let Some((asked, waiting)) = self.pending.take() {
            waiting.abort();
            let _ = self.engine.app.withdraw(&asked.approval, reason).await;
        }
    }
}
