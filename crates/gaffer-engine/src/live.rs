//! People reaching into a running agent turn: their messages (`message_sent`) and
//! interrupts (`turn_interrupted`), recorded by the app service, carried into the
//! agent session of the turn that runs now ([`Live`], used by `turn::converse`).
//!
//! **Delivery.** When a turn starts, and whenever a message is recorded while it
//! runs, every message of the task not yet recorded as delivered is given to the
//! session with `AgentSession::steer` under its message id. The agent reports
//! each id once as `MessageDelivered`: `Live` (it is in the running turn) is
//! recorded at once as `message_delivered` (one append per message); `NextTurn`
//! (the agent could not take it mid-turn) is carried, and once the turn ends the
//! session's next turn starts with the carried messages as its prompt, recorded as
//! delivered `next_turn` when that turn was sent. A message the turn ended before
//! taking stays owed and goes to the task's next agent turn.
//!
//! **Crashes: at least once, never lost.** Between the agent taking a message and
//! `message_delivered` being committed there is a window no append can close (the
//! agent's stdin and the journal are not one transaction). A crash inside it leaves
//! the message recorded as not delivered, and the resumed turn gives it to the
//! agent again. We err this way on purpose: the other order (record, then deliver)
//! would lose a person's message to a crash silently, while a repeat costs the
//! agent one redundant paragraph. Outside that window (the usual crash: the
//! message was recorded while no engine ran, or before the engine got to it) the
//! message is delivered exactly once after resume: the per-message id keeps the
//! agent side from taking it twice, and the record keeps the engine from sending it
//! again. In one process a message is never given twice.
//!
//! **Masked.** A session of a masked cloud role (see [`crate::privacy`]) gets each
//! message masked with its step's placeholder table ([`crate::masks`]), live and as
//! its next turn alike: a name the person quotes gets the placeholder the pack gave it,
//! and a new one gets its own, which the step maps back in the role's answer. Every
//! other session gets the message as written. Each delivery records which.
//!
//! **Interrupt.** A `turn_interrupted` stops the running turn (`AgentSession::interrupt`);
//! the task, the step and the session go on. The step then waits for the person's
//! next message, which becomes the prompt of the session's next turn (so to just go
//! on, say so: `gaffer say TASK continue`). A crash during that wait keeps it: the
//! resumed step waits again before it prompts the agent. Cancelling the task ends
//! the wait.

use crate::failure::Failure;
use crate::masks::SharedMasker;
use crate::{prompts, Engine};
use gaffer_agents::AgentSession;
use gaffer_core::{Delivery, Event, Message, SessionId, TaskId, TaskState};
use gaffer_store::RecordedEvent;
use std::collections::HashSet;
use tokio::sync::broadcast::{self, error::RecvError};
use tokio_util::sync::CancellationToken;

/// The messages and interrupts of one agent session, while it runs turns.
pub(crate) struct Live {
    engine: Engine,
    task: TaskId,
    session: SessionId,
    wake: broadcast::Receiver<RecordedEvent>,
    /// Given to the agent in this process (the agent reports each once).
    steered: HashSet<String>,
    /// The agent could not take these mid-turn: they go with the next turn.
    carried: Vec<Message>,
    /// This session's turn is being stopped for a person.
    interrupting: bool,
    /// The step's placeholder table when the session is a masked cloud role's.
    masker: Option<SharedMasker>,
}

impl Live {
    /// Follow task `task`'s messages for `session`, masked with `masker` when given.
    /// Subscribes before anything is read, so no message recorded from now on is missed.
    pub(crate) fn new(
        engine: &Engine,
        task: &TaskId,
        session: &SessionId,
        masker: Option<SharedMasker>,
    ) -> Self {
        Self {
            wake: engine.journal().subscribe(),
            engine: engine.clone(),
            task: task.clone(),
            session: session.clone(),
            steered: HashSet::new(),
            carried: Vec::new(),
            interrupting: false,
            masker,
        }
    }

    /// Until a person's message or interrupt is recorded for this task (or the journal
    /// lagged, when anything may have been).
    pub(crate) async fn changed(&mut self) {
        loop {
            match self.wake.recv().await {
                Ok(e) if e.stream_id == self.task.as_str() && touches_the_agent(&e.event) => return,
                Ok(_) => {}
                Err(RecvError::Lagged(_)) => return,
                Err(RecvError::Closed) => std::future::pending::<()>().await,
            }
        }
    }

    async fn state(&self) -> Result<TaskState, Failure> {
        match self.engine.load(&self.task).await? {
            Some((t, _)) => Ok(t),
            None => Err(crate::failure::fail("the task vanished")),
        }
    }

    /// Give the agent every message it is owed that it was not given yet, and stop
    /// its turn if a person asked to: after the turn's prompt was sent, and on every
    /// [`Live::changed`].
    pub(crate) async fn steer(&mut self, session: &mut dyn AgentSession) -> Result<(), Failure> {
        let task = self.state().await?;
        for m in task.undelivered_messages() {
            if self.steered.insert(m.id.clone()) {
                session
                    .steer(&m.id, &self.for_the_agent(m))
                    .await
                    .map_err(|e| crate::failure::fail(format!("agent: {e}")))?;
            }
        }
        let stop = task
            .interrupted
            .as_ref()
            .is_some_and(|i| i.session_id == self.session);
        if stop && !self.interrupting {
            self.interrupting = true;
            tracing::info!(task = %self.task, session = %self.session, "a person interrupted the turn");
            session
                .interrupt()
                .await
                .map_err(|e| crate::failure::fail(format!("agent: {e}")))?;
        }
        Ok(())
    }

    /// The agent reported message `id`: record it delivered live, or carry it to the
    /// next turn.
    pub(crate) async fn reported(
        &mut self,
        id: &str,
        delivery: gaffer_agents::Delivery,
    ) -> Result<(), Failure> {
        match delivery {
            gaffer_agents::Delivery::Live => self.record(&[id.to_owned()], Delivery::Live).await,
            gaffer_agents::Delivery::NextTurn => {
                let task = self.state().await?;
                if let Some(m) = task.undelivered_messages().find(|m| m.id == id) {
                    if !self.carried.iter().any(|c| c.id == id) {
                        self.carried.push(m.clone());
                    }
                }
                Ok(())
            }
        }
    }

    async fn record(&self, ids: &[String], delivery: Delivery) -> Result<(), Failure> {
        let events = ids
            .iter()
            .map(|id| Event::MessageDelivered {
                message_id: id.clone(),
                session_id: self.session.clone(),
                delivery,
                masked: self.masker.is_some(),
            })
            .collect();
        Ok(self.engine.append(&self.task, events).await?)
    }

    /// The turn a person's interrupt stopped (not a cancellation).
    pub(crate) fn stopped_by_a_person(&self) -> bool {
        self.interrupting
    }

    /// The prompt of the session's next turn when people's messages are owed to it
    /// (carried from the turn that ended, or sent after an interrupt); with `wait`,
    /// waits for one (after an interrupt) unless `cancel` ends the wait.
    pub(crate) async fn next_prompt(
        &mut self,
        wait: bool,
        cancel: &CancellationToken,
    ) -> Result<Option<NextTurn>, Failure> {
        loop {
            let task = self.state().await?;
            // Messages the agent was given in this turn and did not report stay with
            // it; what the turn never took goes now.
            let mut owed: Vec<Message> = self.carried.clone();
            for m in task.undelivered_messages() {
                if !self.steered.contains(&m.id) && !owed.iter().any(|o| o.id == m.id) {
                    owed.push(m.clone());
                }
            }
            owed.retain(|m| task.undelivered_messages().any(|u| u.id == m.id));
            let waiting = task
                .interrupted
                .as_ref()
                .is_some_and(|i| i.session_id == self.session);
            if !owed.is_empty() && !waiting {
                self.carried.clear();
                self.interrupting = false;
                for m in &owed {
                    self.steered.insert(m.id.clone());
                }
                let prompt = prompts::fill(
                    prompts::MESSAGES,
                    &[(
                        "messages",
                        &owed
                            .iter()
                            .map(|m| self.for_the_agent(m))
                            .collect::<Vec<_>>()
                            .join("\n\n"),
                    )],
                );
                return Ok(Some(NextTurn {
                    prompt,
                    ids: owed.into_iter().map(|m| m.id).collect(),
                }));
            }
            if !wait && !waiting {
                return Ok(None);
            }
            tokio::select! {
                () = self.changed() => {}
                () = cancel.cancelled() => return Err(Failure::Cancelled),
            }
        }
    }

    /// A message as the agent reads it: who wrote it (a person of gaffer's, not the
    /// project's), then what, masked for a masked session.
    fn for_the_agent(&self, m: &Message) -> String {
        let text = match &self.masker {
            Some(masker) => masker.lock().mask_prose(&m.text),
            None => m.text.clone(),
        };
        format!(
            "Message from {} (a person supervising you):\n{text}",
            m.by.name
        )
    }

    /// The turn carrying `next` was sent: its messages are delivered.
    pub(crate) async fn sent(&self, next: &NextTurn) -> Result<(), Failure> {
        self.record(&next.ids, Delivery::NextTurn).await
    }

    /// Whether this session's turn waits for a person's message (interrupted, and a
    /// crash came before the message).
    pub(crate) async fn waits(&self) -> Result<bool, Failure> {
        let task = self.state().await?;
        Ok(task
            .interrupted
            .as_ref()
            .is_some_and(|i| i.session_id == self.session))
    }
}

/// A turn made of people's messages.
pub(crate) struct NextTurn {
    pub(crate) prompt: String,
    ids: Vec<String>,
}

fn touches_the_agent(e: &Event) -> bool {
    matches!(e, Event::MessageSent { .. } | Event::TurnInterrupted { .. })
}
