//! Live control of a running task: a person's message to its agent
//! ([`App::send_message`]) and an interrupt of its turn ([`App::interrupt`]). Both
//! are journal events the reducer judges (a person only, an open agent session, an
//! unfinished task); the engine running the task is woken by them and acts.

use crate::error::{AppError, Result};
use crate::{convert, new_id, App};
use gaffer_core::{
    Actor, ActorKind, Event, Rejected, StreamId, StreamState, TaskState, MAX_MESSAGE_BYTES,
};
use gaffer_protocol::api;
use gaffer_store::{NewEvent, StoreError};

impl App {
    /// Record a person's message `text` for the agent running task `id`. The engine
    /// delivers it into the live turn, or with the next turn (see gaffer-engine's
    /// `live` module), exactly once. Refused with nothing recorded: an empty or too
    /// long text (400 `text`), an unknown task (404), an actor who is not a person
    /// (403), a finished task (409 `task_finished`) or one with no agent session
    /// open now (409 `no_running_agent`).
    pub async fn send_message(&self, id: &str, text: &str, by: Actor) -> Result<api::Message> {
        Self::person(&by, "sends a message to an agent")?;
        let text = self.redacted(text.trim());
        if text.is_empty() {
            return Err(AppError::invalid(
                "text",
                "`text` is empty; say what the agent should know",
            ));
        }
        if text.len() > MAX_MESSAGE_BYTES {
            return Err(AppError::invalid(
                "text",
                format!(
                    "`text` is {} bytes; at most {MAX_MESSAGE_BYTES} are sent to an agent",
                    text.len()
                ),
            ));
        }
        let message_id = new_id("m");
        let event = Event::MessageSent {
            message_id: message_id.clone(),
            text,
            by,
        };
        let task = self.append_live(id, event).await?;
        let m = task
            .messages
            .iter()
            .find(|m| m.id == message_id)
            .ok_or_else(|| AppError::conflict("conflict", "the message vanished; try again"))?;
        Ok(convert::message(id, m))
    }

    /// Stop the turn the agent of task `id` is running, keeping the task and the
    /// session: the step then waits for the next message ([`App::send_message`]),
    /// which starts the next turn. Refused as [`App::send_message`] is, and with
    /// 409 `already_interrupted` when the turn already waits for a message.
    pub async fn interrupt(&self, id: &str, by: Actor) -> Result<api::Interrupted> {
        Self::person(&by, "interrupts an agent")?;
        let state = self.live_state(id).await?.0;
        let session = match (&state.stage, state.running_session()) {
            (stage, _) if stage.is_final() => {
                let got = "turn_interrupted";
                return Err(self.refusal(
                    id,
                    &state,
                    Rejected::TaskFinished { stage: *stage, got },
                ));
            }
            (_, Some(s)) => s.id.clone(),
            (_, None) => {
                let got = "turn_interrupted";
                return Err(self.refusal(id, &state, Rejected::NoRunningAgent { got }));
            }
        };
        let event = Event::TurnInterrupted {
            session_id: session.clone(),
            by: by.clone(),
        };
        self.append_live(id, event).await?;
        Ok(api::Interrupted {
            task_id: id.to_owned(),
            session_id: session.0,
            by: convert::actor(&by),
            next: "the agent stopped its turn and waits: the next message (`gaffer say`, POST /api/tasks/{id}/messages) starts its next turn".into(),
        })
    }

    /// The messages people sent to task `id`'s agent, oldest first.
    pub async fn messages(&self, id: &str) -> Result<Vec<api::Message>> {
        let (task, _) = self.live_state(id).await?;
        Ok(task
            .messages
            .iter()
            .map(|m| convert::message(id, m))
            .collect())
    }

    fn person(by: &Actor, what: &str) -> Result<()> {
        if by.kind == ActorKind::User {
            Ok(())
        } else {
            Err(AppError::Forbidden(format!(
                "only a person {what}; `{}` ({}) is not one",
                by.name, by.via
            )))
        }
    }

    async fn live_state(&self, id: &str) -> Result<(TaskState, i64)> {
        let stream = StreamId(id.to_owned());
        let head = self.journal().head(&stream).await?;
        match self.journal().state(&stream).await? {
            Some(StreamState::Task(t)) => Ok((*t, head)),
            _ => Err(AppError::NotFound {
                what: "task",
                id: id.to_owned(),
            }),
        }
    }

    /// Append `event` to task `id` at the head read, again if the task moved
    /// meanwhile; the task as it is after it.
    async fn append_live(&self, id: &str, event: Event) -> Result<TaskState> {
        let stream = StreamId(id.to_owned());
        for _ in 0..32 {
            let (mut task, head) = self.live_state(id).await?;
            let new = NewEvent::now(event.clone());
            let at = new.at;
            match self.journal().append(&stream, head, vec![new]).await {
                Ok(_) => {
                    task.apply(at, &event)
                        .map_err(|r| self.refusal(id, &task, r))?;
                    return Ok(task);
                }
                Err(StoreError::Conflict { .. }) => continue,
                Err(StoreError::Rejected { reason, .. }) => {
                    return Err(self.refusal(id, &task, reason))
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(AppError::conflict(
            "conflict",
            "the task is changing too fast; try again",
        ))
    }

    /// What a person is told when the reducer refuses their message or interrupt.
    fn refusal(&self, id: &str, task: &TaskState, reason: Rejected) -> AppError {
        match reason {
            Rejected::TaskFinished { stage, .. } => AppError::conflict(
                "task_finished",
                format!("task `{id}` is already {stage}; nothing runs to be told or stopped"),
            ),
            Rejected::NoRunningAgent { .. } | Rejected::SessionEnded(_) => AppError::conflict(
                "no_running_agent",
                format!(
                    "no agent is running in task `{id}` now ({}); send it while a step's agent works (`gaffer task show {id}` lists its sessions)",
                    task.stage
                ),
            ),
            Rejected::AlreadyInterrupted(_) => AppError::conflict(
                "already_interrupted",
                format!("the agent of task `{id}` is already stopped and waits for a message; `gaffer say {id} TEXT` goes on"),
            ),
            Rejected::NotAPerson { .. } => AppError::Forbidden(reason.to_string()),
            other => AppError::conflict("conflict", other.to_string()),
        }
    }
}
