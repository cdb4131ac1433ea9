//! How a step's execution ends when it produces no receipt.

use crate::error::{EngineError, StepFailure};
use serde_json::Value;

/// How a step's execution ended when it did not produce a receipt.
pub(crate) enum Failure {
    /// The step failed; recorded as `step_failed`.
    Step(StepFailure),
    /// The step failed after its agent's turns spent this (the receipt-shaped
    /// `usage`): recorded as `step_failed` with it, so the task's cost counts it.
    Spent(StepFailure, Value),
    /// The user stopped the task.
    Cancelled,
    /// The engine itself failed (journal error); nothing is recorded for the step.
    Engine(EngineError),
}

impl From<gaffer_forge::ForgeError> for Failure {
    fn from(e: gaffer_forge::ForgeError) -> Self {
        Failure::Step(StepFailure(e.to_string()))
    }
}

impl From<EngineError> for Failure {
    fn from(e: EngineError) -> Self {
        match e {
            EngineError::Cancelled => Failure::Cancelled,
            other => Failure::Engine(other),
        }
    }
}

/// A step failure with this message.
pub(crate) fn fail(message: impl Into<String>) -> Failure {
    Failure::Step(StepFailure(message.into()))
}

/// A step failure with this message, after agent turns that spent `usage`.
pub(crate) fn fail_spent(message: impl Into<String>, usage: &gaffer_agents::Usage) -> Failure {
    match serde_json::to_value(usage) {
        Ok(usage) => Failure::Spent(StepFailure(message.into()), usage),
        Err(_) => fail(message),
    }
}
