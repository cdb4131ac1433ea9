//! # gaffer-agents
//!
//! How gaffer talks to the agents that do the work. One trait for a session
//! ([`AgentSession`]), started by an [`AgentBackend`]:
//!
//! * [`claude::ClaudeBackend`] — Claude Code, stream-json control protocol;
//! * [`codex::CodexBackend`] — `codex app-server`, JSON-RPC over stdio;
//! * [`acp::AcpBackend`] — any Agent Client Protocol agent (Gemini CLI `--acp`, ...);
//! * [`toolloop::BuiltinBackend`] — gaffer's own tool loop over OpenAI-compatible Chat
//!   Completions or Anthropic Messages.
//!
//! Every permission request any backend raises goes through one [`ApprovalGate`] exactly
//! once per underlying request. Events are normalized ([`AgentEvent`]) and redacted
//! ([`Redactor`]) before they leave a session. The crate knows nothing about pipelines,
//! the journal or the store: those implement the traits defined here
//! ([`ApprovalGate`], [`ratelimit::CounterStore`]).

pub mod accounting;
pub mod acp;
pub mod claude;
pub mod codex;
pub mod contain;
pub mod environment;
mod error;
pub mod jsonrpc;
pub mod llm;
pub mod patch;
mod process;
pub mod ratelimit;
mod redact;
pub mod sandbox;
mod session;
mod state;
mod stream_json;
pub mod toolloop;
pub mod tools;
mod types;
pub mod wire;
mod workspace;

pub use error::{AgentError, Result};

pub use process::{find_executable, find_executable_in};
pub use redact::{Redactor, REDACTED};
pub use session::{
    redact_event, run_turn, AgentBackend, AgentSession, AllowAll, ApprovalGate, ChannelGate,
    DenyAll, PendingApproval,
};
pub use types::{
    AgentEvent, AgentKind, Mode, PermissionDecision, PermissionKind, PermissionRequest,
    SessionRecord, StartOptions, TurnResult, TurnStatus, Usage,
};
pub use workspace::{
    canonical_workspace, canonical_workspace_from, claude_project_key, workspace_key,
};
