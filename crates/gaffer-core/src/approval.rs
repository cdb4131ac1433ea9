use crate::{Actor, ApprovalId, StepId, Timestamp};
use serde::{Deserialize, Serialize};
use std::fmt;

/// What a human is asked to approve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalKind {
    /// The planner's plan.
    Plan,
    /// A tool call an agent wants to make.
    Tool,
    /// Pushing the branch / opening the pull request.
    Ship,
    /// A non-idempotent step whose effect is unknown after a crash.
    Manual,
    /// The arbiter asks a human to settle it.
    Escalation,
    /// The owner or the reviewer proposes an addition to the project's memory.
    Memory,
    /// The watchdog saw a running agent look stuck: approve continues, deny
    /// interrupts the turn; the note goes to the agent as a message.
    Stall,
    /// A spending cap was reached: approve raises this task's cap, deny stops it.
    Budget,
}

impl ApprovalKind {
    /// The snake_case name used on the wire and in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalKind::Plan => "plan",
            ApprovalKind::Tool => "tool",
            ApprovalKind::Ship => "ship",
            ApprovalKind::Manual => "manual",
            ApprovalKind::Escalation => "escalation",
            ApprovalKind::Memory => "memory",
            ApprovalKind::Stall => "stall",
            ApprovalKind::Budget => "budget",
        }
    }
}

/// A human's (or a policy's) answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Go ahead.
    Approve,
    /// Do not.
    Deny,
}

/// Where an approval is. Only `pending` can change, and only once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalState {
    /// Waiting for a decision.
    Pending,
    /// Approved (by a person or a policy rule).
    Approved,
    /// Denied.
    Denied,
    /// Nobody decided in time; treated as the expiry policy says (deny by default).
    Expired,
    /// The asker moved on (cancelled, or answered elsewhere); nothing to decide any more.
    Withdrawn,
}

impl ApprovalState {
    /// Every state, pending first.
    pub const ALL: [ApprovalState; 5] = [
        ApprovalState::Pending,
        ApprovalState::Approved,
        ApprovalState::Denied,
        ApprovalState::Expired,
        ApprovalState::Withdrawn,
    ];

    /// The snake_case name used on the wire and in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalState::Pending => "pending",
            ApprovalState::Approved => "approved",
            ApprovalState::Denied => "denied",
            ApprovalState::Expired => "expired",
            ApprovalState::Withdrawn => "withdrawn",
        }
    }
}

impl fmt::Display for ApprovalState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A question for a human, keyed by `(task, step, attempt)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Approval {
    /// Unique across the journal.
    pub id: ApprovalId,
    /// The step that waits for it.
    pub step_id: StepId,
    /// Which request of that step this is (1, 2, …); with the task and step, the unique key.
    pub attempt: u32,
    /// What is asked.
    pub kind: ApprovalKind,
    /// The question in words a human can judge.
    pub summary: String,
    /// Command, files, diff excerpt, reason: whatever helps decide.
    pub details: serde_json::Value,
    /// Where it is.
    pub state: ApprovalState,
    /// Who decided, once decided.
    pub decided_by: Option<Actor>,
    /// The decider's note, or why it expired or was withdrawn.
    pub note: Option<String>,
    /// When it was asked.
    pub requested_at: Timestamp,
    /// When it stopped being pending.
    pub decided_at: Option<Timestamp>,
    /// Approved "for this task": the same tool call is approved again, by this
    /// grant, for the rest of the task.
    #[serde(default)]
    pub for_task: bool,
}

/// The command line a `tool` approval asks to run, from the `subject` recorded
/// in its details: a per-task grant needs one (a grant without a command would
/// cover every call of the tool).
pub fn granted_command(details: &serde_json::Value) -> Option<&str> {
    details
        .pointer("/subject/command")
        .and_then(serde_json::Value::as_str)
        .filter(|c| !c.trim().is_empty())
}

/// Whether a grant recorded with `grant` details covers a request with `asked`
/// details: the same tool and exactly the same command line, byte for byte (no
/// prefix rule, no normalising: `cargo publish` covers neither
/// `cargo publish --force` nor `cargo  publish`).
pub fn same_tool_call(grant: &serde_json::Value, asked: &serde_json::Value) -> bool {
    let tool = |d: &serde_json::Value| {
        d.pointer("/subject/tool")
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned)
    };
    match (granted_command(grant), granted_command(asked)) {
        (Some(g), Some(a)) => g == a && tool(grant).is_some() && tool(grant) == tool(asked),
        _ => false,
    }
}
