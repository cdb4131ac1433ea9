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
//!
//! A person can reach into a running turn. [`AgentSession::steer`] gives the agent a
//! message the way its protocol allows, and reports each message exactly once as
//! [`AgentEvent::MessageDelivered`]: Claude Code takes it on its stream-json input
//! (echoed with `--replay-user-messages`, so gaffer's turn ends only once every message
//! was answered); Codex by `turn/steer` on the running turn (the turn's end waits for the
//! answer); an ACP agent by `session/cancel` then a new prompt that repeats what the
//! cancelled one asked (Gemini CLI forgets a cancelled prompt); the built-in loop with its
//! next model call. A message that cannot join the running turn (none runs, it is ending,
//! or the agent refused) comes back as [`Delivery::NextTurn`] for the caller to send with
//! the next prompt. [`AgentSession::interrupt`] stops the turn and keeps the session:
//! files and conversation stay, and the next turn goes on from them.

pub mod accounting;
pub mod acp;
pub mod claude;
pub mod codex;
pub mod contain;
pub mod environment;
mod error;
pub mod jsonrpc;
pub mod llm;
pub mod local_only;
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
    AgentEvent, AgentKind, Delivery, Mode, PermissionDecision, PermissionKind, PermissionRequest,
    ProviderError, SessionRecord, StartOptions, TurnResult, TurnStatus, Usage,
};
pub use workspace::{
    canonical_workspace, canonical_workspace_from, claude_project_key, workspace_key,
};
