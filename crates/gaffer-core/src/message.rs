//! A person's messages to a task's running agent, and interrupts of its turn.
//!
//! `message_sent` records what a person (never an agent, a policy or gaffer) told
//! the agent of the task's open session; `message_delivered` records, once, that
//! the agent got it (live, into the running turn, or with the next turn's prompt).
//! A message recorded and not delivered is what the engine owes the agent: it is
//! delivered when the engine next talks to the task's agent, also after a crash.
//! `turn_interrupted` records that a person stopped the running turn; the step then
//! waits for the next message, which starts the next turn of the same session.

use crate::{Actor, SessionId, Timestamp};
use serde::{Deserialize, Serialize};

/// The longest message a person may send, in bytes (the API refuses longer ones).
pub const MAX_MESSAGE_BYTES: usize = 8000;

/// How a message reached the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Delivery {
    /// Into the running turn, the way the agent's protocol allows.
    Live,
    /// As the prompt of a new turn of the same session.
    NextTurn,
}

impl Delivery {
    /// The snake_case name used on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Delivery::Live => "live",
            Delivery::NextTurn => "next_turn",
        }
    }
}

/// A person's message to the task's agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Unique in the task; the agent side delivers each id once.
    pub id: String,
    /// What the person wrote (redacted before it was recorded).
    pub text: String,
    /// Who sent it, and from where.
    pub by: Actor,
    /// When it was recorded.
    pub sent_at: Timestamp,
    /// Set once the agent got it.
    pub delivered: Option<Delivered>,
}

/// When and how a message reached the agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Delivered {
    /// The session that got it.
    pub session_id: SessionId,
    /// Live or with the next turn.
    pub delivery: Delivery,
    /// Given masked with the step's placeholders (a masked cloud role), not as written.
    #[serde(default)]
    pub masked: bool,
    /// When the delivery was recorded.
    pub at: Timestamp,
}

/// A person stopped the running turn of `session_id`; the step waits for a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Interrupt {
    /// The session whose turn was stopped.
    pub session_id: SessionId,
    /// Who stopped it, and from where.
    pub by: Actor,
    /// When.
    pub at: Timestamp,
}
