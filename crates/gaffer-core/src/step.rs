use crate::{ContextPack, StepId, Timestamp};
use serde::{Deserialize, Serialize};
use std::fmt;

/// What running a step does to the world, recorded before it runs. It decides
/// what a failure means and what happens after a crash in the middle of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Intent {
    /// Reads only. A failure is an observation; after a crash it runs again.
    ReadOnly,
    /// Same effect however often it runs. A failure blocks dependants; after a crash it runs again.
    Idempotent,
    /// Must happen at most once (push, PR, agent turn with side effects). After a crash it
    /// becomes `effect_unknown` and is reconciled by a probe, never blindly re-run.
    NonIdempotent,
}

impl Intent {
    /// The snake_case name used on the wire and in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            Intent::ReadOnly => "read_only",
            Intent::Idempotent => "idempotent",
            Intent::NonIdempotent => "non_idempotent",
        }
    }
}

/// Where a step is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepState {
    /// The intent is recorded; the effect has not started.
    IntentRecorded,
    /// The effect is running.
    Started,
    /// Done, with a receipt.
    Completed,
    /// The effect failed.
    Failed,
    /// A non-idempotent effect was running when the process died: it may or may not have happened.
    EffectUnknown,
    /// A read-only probe is finding out whether the effect happened. Running, like
    /// `started`: a crash during the probe leaves it here, and recovery sends it back
    /// to `effect_unknown` to be probed again.
    Reconciling,
    /// The probe could not tell; a human must decide.
    ManualRequired,
}

impl StepState {
    /// The snake_case name used on the wire and in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            StepState::IntentRecorded => "intent_recorded",
            StepState::Started => "started",
            StepState::Completed => "completed",
            StepState::Failed => "failed",
            StepState::EffectUnknown => "effect_unknown",
            StepState::Reconciling => "reconciling",
            StepState::ManualRequired => "manual_required",
        }
    }
}

impl fmt::Display for StepState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One effect of a task, with its durable intent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// Unique within the task.
    pub id: StepId,
    /// What the step does, for people (`plan`, `owner turn`, `git commit`, …).
    pub name: String,
    /// Recorded before the effect runs.
    pub intent: Intent,
    /// Steps that must be satisfied before this one may start.
    pub depends_on: Vec<StepId>,
    /// What the step was asked to do.
    pub input: serde_json::Value,
    /// Where it is.
    pub state: StepState,
    /// 1 for the first run; grows when the step is run again.
    pub attempt: u32,
    /// What the effect produced, once completed; for a failed step, only what its
    /// agent turns spent (`{"usage": …}`), when they spent anything.
    pub receipt: Option<serde_json::Value>,
    /// Why it failed or needs a human, when it did.
    pub error: Option<String>,
    /// The repository context its agent was given, once packed (the last attempt's).
    pub context: Option<ContextPack>,
    /// Position among the task's steps in recording order (0, 1, …).
    pub order: u32,
    /// When the intent was recorded.
    pub recorded_at: Timestamp,
    /// When the step last changed.
    pub updated_at: Timestamp,
}

impl Step {
    /// Settled steps never hold a task back: completed, or a failed read that became an observation.
    pub fn is_settled(&self) -> bool {
        match self.state {
            StepState::Completed => true,
            StepState::Failed => self.intent == Intent::ReadOnly,
            _ => false,
        }
    }
}
