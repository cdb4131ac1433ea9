//! Serde types shared by every backend: the normalized event stream, permission
//! requests and decisions, usage, start options and session records.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Which kind of agent a session talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum AgentKind {
    /// Claude Code (`claude -p` stream-json control protocol).
    ClaudeCode,
    /// Codex (`codex app-server`, JSON-RPC over stdio).
    Codex,
    /// Any Agent Client Protocol agent (Gemini CLI `--acp`, configured commands).
    Acp,
    /// gaffer's own tool loop over an LLM HTTP API.
    Builtin,
}

impl AgentKind {
    /// Stable lowercase name, used in keys and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            AgentKind::ClaudeCode => "claude_code",
            AgentKind::Codex => "codex",
            AgentKind::Acp => "acp",
            AgentKind::Builtin => "builtin",
        }
    }
}

/// Whether the agent may change the workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Owner: may edit files and run commands (each risky action still goes through the gate).
    #[default]
    ReadWrite,
    /// Reviewer / arbiter: may only read.
    ReadOnly,
}

/// Everything a backend needs to start (or resume) a session.
#[derive(Debug, Clone, Default)]
pub struct StartOptions {
    /// The task's worktree. Canonicalised with [`crate::canonical_workspace`] by the backend.
    pub workspace: PathBuf,
    /// Role name (`owner`, `reviewer`, `arbiter`, `planner`, ...). Exported as `GAFFER_ROLE`.
    pub role: String,
    /// Role prompt (system / developer instructions).
    pub role_prompt: String,
    /// Read-write or read-only.
    pub mode: Mode,
    /// Environment variables for the agent process, on top of the allowlist
    /// ([`crate::environment`]): nothing else of gaffer's environment reaches it.
    pub env: BTreeMap<String, String>,
    /// Exported as `GAFFER_TASK_ID`.
    pub task_id: String,
    /// Exported as `GAFFER_PROJECT`.
    pub project: String,
    /// Model override, if any.
    pub model: Option<String>,
    /// How the agent process (and everything it starts) is confined.
    pub sandbox: crate::sandbox::Sandbox,
    /// Where this task's sessions keep their agent state, one subdirectory per agent
    /// (`claude`, `codex`, `gemini`): private to gaffer, seeded with the user's login
    /// (see [`crate::state`]). `None`: the agent's own dirs (from `env`, else `$HOME`).
    pub state_dir: Option<PathBuf>,
    /// What the agent may read beyond the sandbox's allowlist (the repository, whose
    /// `.git` holds the worktree's objects).
    pub readable: Vec<PathBuf>,
    /// A lock file every process of the session holds (shared) while alive, so crash
    /// recovery can wait until none is ([`crate::contain::wait_until_released`]).
    pub lock: Option<PathBuf>,
    /// A rate limit asking to wait longer than this ends the turn
    /// ([`crate::AgentError::RetryAfterTooLong`]) instead of being waited out: set when
    /// another agent can take the role over. The built-in loop honours it; the CLIs
    /// decide themselves (and give up on long waits).
    pub max_retry_wait: Option<std::time::Duration>,
    /// The session's model must stay local (a role of a `local-only` or `masked`
    /// project): the backend leaves out every setting of gaffer's that would send the
    /// agent to another provider, pins its endpoint to the one gaffer checked, and
    /// turns off the agent's telemetry, error reports and update checks
    /// ([`crate::local_only`]).
    pub local_only: bool,
}

impl StartOptions {
    /// Environment given to every agent process: `opts.env` plus the three `GAFFER_*` variables.
    pub fn agent_env(&self) -> BTreeMap<String, String> {
        let mut env = self.env.clone();
        env.insert("GAFFER_ROLE".into(), self.role.clone());
        env.insert("GAFFER_TASK_ID".into(), self.task_id.clone());
        env.insert("GAFFER_PROJECT".into(), self.project.clone());
        env
    }
}

/// What the engine stores about a session so it can resume it later.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRecord {
    /// Which agent.
    pub agent: AgentKind,
    /// Role the session was started for.
    pub role: String,
    /// Canonical workspace key ([`crate::workspace_key`]).
    pub workspace_key: String,
    /// The agent's session / thread id (assigned by gaffer where the agent allows it).
    pub session_id: String,
    /// True once the agent itself reported this id back (first reply).
    pub verified: bool,
}

/// Token counts and cost of one turn (or a roll-up).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens not served from cache.
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
    /// Prompt tokens served from cache.
    pub cached_input_tokens: u64,
    /// Cost in US dollars, when known.
    pub cost_usd: Option<f64>,
}

impl Usage {
    /// Whether any token was spent.
    pub fn spent(&self) -> bool {
        self.input_tokens + self.output_tokens + self.cached_input_tokens > 0
    }
}

impl std::ops::AddAssign for Usage {
    /// A sum's cost is known only when every part that spent tokens has one: an
    /// unpriced turn makes it unknown, never cheaper.
    fn add_assign(&mut self, o: Usage) {
        self.cost_usd = match (self.cost_usd, o.cost_usd) {
            (Some(a), Some(b)) => Some(a + b),
            (Some(a), None) if !o.spent() => Some(a),
            (None, Some(b)) if !self.spent() => Some(b),
            _ => None,
        };
        self.input_tokens += o.input_tokens;
        self.output_tokens += o.output_tokens;
        self.cached_input_tokens += o.cached_input_tokens;
    }
}

/// What kind of action a permission request is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PermissionKind {
    /// Running a command.
    Command,
    /// Changing files.
    FileChange,
    /// Any other tool.
    Tool,
}

/// One permission request raised by an agent, normalized.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PermissionRequest {
    /// Stable key: `<agent>:<session id>:<underlying request id>`. A repeated request for the
    /// same underlying id has the same key and never produces a second decision request.
    pub id: String,
    /// Agent kind.
    pub agent: AgentKind,
    /// Session the request belongs to.
    pub session_id: String,
    /// Tool name as the agent calls it (`Bash`, `commandExecution`, `run`, ...).
    pub tool_name: String,
    /// Tool input (redacted): the agent's own arguments, or (ACP agents that send none)
    /// what the request shows (`title`, `kind`, `locations`, `content`).
    pub input: Value,
    /// The command line it asks to run, when it runs one: what policy rules and a
    /// per-task grant match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The files it names (as the agent wrote them), for path rules.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    /// Kind of action.
    pub kind: PermissionKind,
    /// Why the agent asks, when it says.
    pub reason: Option<String>,
}

impl PermissionRequest {
    /// The command line in a tool input: `command` (a string, or an argv array joined
    /// with spaces) or `argv`.
    pub fn command_in(input: &Value) -> Option<String> {
        let line = |v: &Value| match v {
            Value::String(s) => Some(s.clone()),
            Value::Array(parts) => Some(
                parts
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(" "),
            ),
            _ => None,
        };
        input
            .get("command")
            .and_then(line)
            .or_else(|| input.get("argv").and_then(line))
    }

    /// The paths a tool input names: `file_path`, `path`, `notebook_path`.
    pub fn paths_in(input: &Value) -> Vec<String> {
        ["file_path", "path", "notebook_path"]
            .iter()
            .filter_map(|k| input.get(*k).and_then(Value::as_str).map(str::to_owned))
            .collect()
    }
}

/// The engine's answer to a [`PermissionRequest`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum PermissionDecision {
    /// Go ahead; `updated_input` replaces the tool input when given.
    Allow {
        /// Replacement input (Claude `updatedInput`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        updated_input: Option<Value>,
    },
    /// Refuse, with a message the agent sees.
    Deny {
        /// Why.
        message: String,
    },
}

impl PermissionDecision {
    /// Allow without changing the input.
    pub fn allow() -> Self {
        PermissionDecision::Allow {
            updated_input: None,
        }
    }
    /// Deny with a message.
    pub fn deny(message: impl Into<String>) -> Self {
        PermissionDecision::Deny {
            message: message.into(),
        }
    }
    /// True for `Allow`.
    pub fn is_allow(&self) -> bool {
        matches!(self, PermissionDecision::Allow { .. })
    }
}

/// How a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnStatus {
    /// The agent finished normally.
    Completed,
    /// Cancelled by gaffer.
    Interrupted,
    /// The agent reported a failure.
    Failed,
    /// The built-in loop stopped because the same failing call kept repeating.
    RepeatedFailure,
    /// The built-in loop ran out of steps.
    StepLimit,
}

/// The final result of one turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnResult {
    /// How it ended.
    pub status: TurnStatus,
    /// Final assistant text (Claude `result`, last agent message, `finish.summary`).
    pub text: String,
    /// Usage of this turn.
    pub usage: Usage,
    /// Session id reported by the agent.
    pub session_id: String,
    /// Extra reason (failure message, stop reason).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// What the agent reported of its model provider's refusal when the turn failed
    /// on one (Claude Code's `api_error_status`, Codex's `codexErrorInfo`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_error: Option<ProviderError>,
}

/// A model provider's refusal of a turn, as the agent reported it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderError {
    /// The HTTP status (429, 500, 529, ...), when the agent says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The agent's own name for the error (`rate_limit_error`, `usageLimitExceeded`,
    /// `responseTooManyFailedAttempts`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Seconds until the provider takes requests again, when the agent says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_secs: Option<u64>,
}

/// How a person's message (see [`crate::AgentSession::steer`]) reached the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Delivery {
    /// Into the running turn: the agent reads it before it goes on (Claude Code's
    /// stream-json input, Codex `turn/steer`, ACP cancel then prompt, the built-in
    /// loop's next model call).
    Live,
    /// No turn is running, or the agent refused it mid-turn: it goes with the next
    /// turn's prompt, and is not delivered yet.
    NextTurn,
}

/// One normalized event of an agent session. Every backend produces these.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum AgentEvent {
    /// The agent reported its session id.
    SessionStarted {
        /// Id reported.
        session_id: String,
        /// Whether it matches the id gaffer assigned / asked to resume.
        verified: bool,
    },
    /// Assistant text (a whole message or a chunk).
    AssistantText {
        /// Text.
        text: String,
    },
    /// The agent calls a tool.
    ToolCall {
        /// Call id.
        call_id: String,
        /// Tool name.
        name: String,
        /// Arguments.
        input: Value,
    },
    /// A tool call finished.
    ToolResult {
        /// Call id.
        call_id: String,
        /// Output (possibly truncated).
        output: String,
        /// True when the tool failed or was refused.
        is_error: bool,
    },
    /// A file was changed.
    FileChange {
        /// Path (as the agent reported it).
        path: String,
        /// `add`, `update`, `delete`, `write`, `edit`, ...
        kind: String,
        /// Unified diff when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        diff: Option<String>,
    },
    /// The agent asks for permission; the gate has been asked exactly once for this `request.id`.
    PermissionRequested {
        /// The request.
        request: PermissionRequest,
    },
    /// The decision was relayed to the agent.
    PermissionResolved {
        /// `PermissionRequest::id`.
        request_id: String,
        /// The decision.
        decision: PermissionDecision,
    },
    /// Token usage / cost reported.
    Usage {
        /// Usage.
        usage: Usage,
    },
    /// What the running turn spent so far, as the agent's model calls report it
    /// while it runs (Claude Code's assistant messages): provisional, for limits
    /// that must act mid-turn (spending caps, the watchdog). It stands for the
    /// turn's spend up to the next [`AgentEvent::Usage`], which replaces it: only
    /// `Usage` and [`TurnResult::usage`] are the turn's counted spend.
    UsageSoFar {
        /// The turn's usage so far (not a delta).
        usage: Usage,
    },
    /// Waiting because of a rate limit.
    RateLimited {
        /// RFC 3339 time the wait ends.
        until: String,
        /// Provider / agent.
        provider: String,
        /// Why (`429`, `rpm`, `rpd`, `usage limit`).
        reason: String,
    },
    /// A message given to [`crate::AgentSession::steer`] was written to the agent, or
    /// could not be and waits for the next turn.
    MessageDelivered {
        /// The id the caller gave it.
        message_id: String,
        /// How.
        delivery: Delivery,
    },
    /// The turn ended.
    TurnCompleted {
        /// Result.
        result: TurnResult,
    },
}
