use crate::{ApprovalId, StepId, StepState, TaskState};
use serde::{Deserialize, Serialize};

/// What may happen next in a task, derived from its state (never stored).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Frontier {
    /// Steps whose intent is recorded and whose dependencies are settled: they may start.
    pub runnable: Vec<StepId>,
    /// Steps running now: their effect, or the probe of an effect a crash left
    /// unknown (`reconciling`). Only their runner, or recovery after it died
    /// (`step_interrupted`), moves them on.
    pub in_flight: Vec<StepId>,
    /// Non-idempotent steps interrupted by a crash: probe them before anything else.
    pub to_reconcile: Vec<StepId>,
    /// Steps that stop the task until someone acts: failed writes, manual.
    pub blocking: Vec<StepId>,
    /// Approvals waiting for a decision.
    pub pending_approvals: Vec<ApprovalId>,
}

impl Frontier {
    /// True when nothing runs, nothing can run, and nothing waits: the task is quiet.
    pub fn is_quiet(&self) -> bool {
        self.runnable.is_empty()
            && self.in_flight.is_empty()
            && self.to_reconcile.is_empty()
            && self.pending_approvals.is_empty()
    }
}

impl TaskState {
    /// Which steps may run next, which need reconciling, which block.
    /// A final task has an empty frontier.
    pub fn frontier(&self) -> Frontier {
        let mut f = Frontier::default();
        if self.stage.is_final() {
            return f;
        }
        for step in self.steps.values() {
            match step.state {
                StepState::IntentRecorded => {
                    if self.unsatisfied_dependency(&step.id).is_none() {
                        f.runnable.push(step.id.clone());
                    }
                }
                StepState::Started | StepState::Reconciling => f.in_flight.push(step.id.clone()),
                StepState::EffectUnknown => f.to_reconcile.push(step.id.clone()),
                StepState::ManualRequired => f.blocking.push(step.id.clone()),
                StepState::Failed if !step.is_settled() => f.blocking.push(step.id.clone()),
                StepState::Failed | StepState::Completed => {}
            }
        }
        f.pending_approvals = self.pending_approvals().map(|a| a.id.clone()).collect();
        f
    }
}
