use crate::{SessionId, StepId, Timestamp};
use serde::{Deserialize, Serialize};
use std::fmt;

/// The part an agent plays in a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Breaks the request into subtasks.
    Planner,
    /// Writes the code, in its own worktree.
    Owner,
    /// Reads the owner's work, read-only, and returns a verdict.
    Reviewer,
    /// Settles owner/reviewer deadlocks; a fresh session every call.
    Arbiter,
    /// Challenges the plan before it is approved, read-only.
    Challenger,
    /// Writes tests for the acceptance criteria, in the worktree, before review.
    Tester,
    /// A member of the arbiter's panel: one opinion for the ruling, read-only, a
    /// fresh session every call.
    Panelist,
}

impl Role {
    /// The lowercase name used in config, env (`GAFFER_ROLE`) and on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Planner => "planner",
            Role::Owner => "owner",
            Role::Reviewer => "reviewer",
            Role::Arbiter => "arbiter",
            Role::Challenger => "challenger",
            Role::Tester => "tester",
            Role::Panelist => "panelist",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One agent conversation used by a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Session {
    /// gaffer's id, assigned at creation.
    pub id: SessionId,
    /// Which backend (`claude`, `codex`, `acp:gemini`, `openai`, …).
    pub agent: String,
    /// The role it plays.
    pub role: Role,
    /// The canonical (physical) path of the workspace it works in.
    pub workspace_key: String,
    /// The agent's own id for the conversation, used to resume it.
    pub agent_session_id: Option<String>,
    /// True once the agent's own record confirmed `agent_session_id`.
    pub verified: bool,
    /// The step that started it, if any.
    pub step_id: Option<StepId>,
    /// Why it ended, once it has.
    pub ended: Option<String>,
    /// When it started.
    pub started_at: Timestamp,
}

/// One switch of a role to its next agent (`agent_switched`), as the task keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentSwitch {
    /// The step that was running.
    pub step_id: StepId,
    /// The role.
    pub role: Role,
    /// The agent that was out.
    pub from: String,
    /// The agent that took over.
    pub to: String,
    /// Why: `usage_limit`, `rate_limited`, `server_error` or `cannot_start`.
    pub trigger: String,
    /// What the agent said.
    pub detail: String,
    /// `from` is not tried again for the role before this (ms).
    pub until: Timestamp,
    /// Whether the failed turn did something before it failed.
    pub effects: bool,
    /// When it was recorded (ms).
    pub at: Timestamp,
}
