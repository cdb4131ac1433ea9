use serde::{Deserialize, Serialize};
use std::fmt;

/// Where a task is in its lifecycle.
///
/// ```text
/// waiting → queued                              (every task it runs after is done)
/// waiting → blocked                             (one of them failed, was cancelled or blocked)
/// queued → planning → awaiting_plan_approval → coding ⇄ reviewing → arbitrating
///        → testing → shipping → done            (any non-final → failed | cancelled | blocked)
///                    shipping ⇄ coding          (the owner fixes what CI found, then it is pushed again)
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Accepted, waiting for the tasks it runs after (`after`) to be done; no worker
    /// takes it until then.
    Waiting,
    /// Accepted, waiting for a worker.
    Queued,
    /// The planner is breaking the request down.
    Planning,
    /// A human must approve the plan.
    AwaitingPlanApproval,
    /// The owner agent is changing code.
    Coding,
    /// The reviewer is reading the owner's work.
    Reviewing,
    /// The arbiter is settling a disagreement.
    Arbitrating,
    /// The project's check command is running.
    Testing,
    /// The branch (and later the pull request) is being prepared.
    Shipping,
    /// Finished successfully. Final.
    Done,
    /// Finished unsuccessfully. Final.
    Failed,
    /// Stopped by a person. Final.
    Cancelled,
    /// Cannot go on without a new task. Final.
    Blocked,
}

impl Stage {
    /// Every stage, in lifecycle order.
    pub const ALL: [Stage; 13] = [
        Stage::Waiting,
        Stage::Queued,
        Stage::Planning,
        Stage::AwaitingPlanApproval,
        Stage::Coding,
        Stage::Reviewing,
        Stage::Arbitrating,
        Stage::Testing,
        Stage::Shipping,
        Stage::Done,
        Stage::Failed,
        Stage::Cancelled,
        Stage::Blocked,
    ];

    /// Final stages accept no further event.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            Stage::Done | Stage::Failed | Stage::Cancelled | Stage::Blocked
        )
    }

    /// The working stages a task may move to from `self` by `task_stage_entered`.
    /// Final stages are reached by their own events, never by this table; a waiting
    /// task leaves `waiting` only by `task_dependency_done` / `task_dependency_failed`.
    pub fn may_enter(self, to: Stage) -> bool {
        use Stage::*;
        matches!(
            (self, to),
            (Queued, Planning)
                | (Planning, AwaitingPlanApproval | Coding)
                | (AwaitingPlanApproval, Coding | Planning)
                | (Coding, Reviewing | Testing | Shipping)
                | (Reviewing, Coding | Arbitrating | Testing)
                | (Arbitrating, Coding | Reviewing | Testing)
                | (Testing, Coding | Reviewing | Shipping)
                | (Shipping, Coding)
        )
    }

    /// Whether `task_done` is allowed from this stage.
    pub fn may_finish(self) -> bool {
        matches!(self, Stage::Testing | Stage::Shipping)
    }

    /// The snake_case name used on the wire and in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Waiting => "waiting",
            Stage::Queued => "queued",
            Stage::Planning => "planning",
            Stage::AwaitingPlanApproval => "awaiting_plan_approval",
            Stage::Coding => "coding",
            Stage::Reviewing => "reviewing",
            Stage::Arbitrating => "arbitrating",
            Stage::Testing => "testing",
            Stage::Shipping => "shipping",
            Stage::Done => "done",
            Stage::Failed => "failed",
            Stage::Cancelled => "cancelled",
            Stage::Blocked => "blocked",
        }
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
