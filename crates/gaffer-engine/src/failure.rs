//! How a step's execution ends when it produces no receipt.

use crate::error::{EngineError, StepFailure};

/// How a step's execution ended when it did not produce a receipt.
pub(crate) enum Failure {
    /// The step failed; recorded as `step_failed`.
    Step(StepFailure),
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
