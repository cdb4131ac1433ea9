//! The crate's error type.

use std::path::PathBuf;

/// Errors of agent backends. None of them is retried automatically by this crate
/// except [`AgentError::RateLimited`] inside the built-in loop (bounded retries).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The agent executable was not found (env var / PATH). Not retried.
    #[error("agent executable `{name}` not found: set {env_var} or put `{name}` on PATH")]
    ExecutableNotFound {
        /// Executable name.
        name: String,
        /// Env var that overrides it.
        env_var: String,
    },
    /// Spawning the process failed.
    #[error("could not start {agent}: {source}")]
    Spawn {
        /// Agent.
        agent: String,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// The workspace path does not resolve to a directory.
    #[error("workspace `{path}` is not usable: {reason}")]
    Workspace {
        /// Path given.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// Resume was asked for a session the agent no longer has. gaffer never silently
    /// starts a new conversation instead: the user must be told.
    #[error("{agent} session `{session_id}` is gone ({detail}); it was not resumed and no new conversation was started")]
    SessionGone {
        /// Agent.
        agent: String,
        /// Session id.
        session_id: String,
        /// What was checked.
        detail: String,
    },
    /// The agent reported a different session id than the one gaffer assigned.
    #[error("{agent} reported session `{reported}` but gaffer expected `{expected}`")]
    SessionMismatch {
        /// Agent.
        agent: String,
        /// Expected id.
        expected: String,
        /// Reported id.
        reported: String,
    },
    /// The agent wrote a line that is not valid protocol. The session is stopped.
    #[error("{agent} sent a malformed line {line_no}: {reason}; line starts with: {snippet:?}")]
    MalformedOutput {
        /// Agent.
        agent: String,
        /// 1-based line number on stdout.
        line_no: u64,
        /// Parse error.
        reason: String,
        /// First bytes of the line (redacted).
        snippet: String,
    },
    /// The agent process ended while a turn was in progress.
    #[error("{agent} exited in the middle of a turn ({status}); stderr tail: {stderr:?}")]
    ExitedMidTurn {
        /// Agent.
        agent: String,
        /// Exit status description.
        status: String,
        /// Last bytes of stderr (redacted).
        stderr: String,
    },
    /// The agent answered a request with a protocol error.
    #[error("{agent} rejected `{method}`: {message}")]
    Rejected {
        /// Agent.
        agent: String,
        /// Method / request.
        method: String,
        /// Error message.
        message: String,
    },
    /// The agent process ended while no turn was running (e.g. it refused its arguments).
    #[error("{agent} exited ({status}); stderr tail: {stderr:?}")]
    Exited {
        /// Agent.
        agent: String,
        /// Exit status description.
        status: String,
        /// Last bytes of stderr (redacted).
        stderr: String,
    },
    /// The session is closed; no more turns.
    #[error("session is closed")]
    Closed,
    /// A turn is already running.
    #[error("a turn is already in progress")]
    TurnInProgress,
    /// LLM HTTP API error (not 429).
    #[error("{provider} API error: {message}")]
    Http {
        /// Provider.
        provider: String,
        /// Message (redacted).
        message: String,
    },
    /// Rate limit retries exhausted.
    #[error("{provider} kept answering 429 after {attempts} attempts")]
    RateLimited {
        /// Provider.
        provider: String,
        /// Attempts made.
        attempts: u32,
    },
    /// The provider asked to wait longer than the session may
    /// ([`crate::StartOptions::max_retry_wait`]).
    #[error("{provider} answered 429 with retry-after {retry_after_secs} s, longer than the {max_secs} s this session waits")]
    RetryAfterTooLong {
        /// Provider.
        provider: String,
        /// What it asked for.
        retry_after_secs: u64,
        /// The most the session waits.
        max_secs: u64,
    },
    /// Persisted counter store failure.
    #[error("counter store: {0}")]
    Counters(String),
    /// The sandbox cannot confine the agent and the config requires it (`[sandbox]
    /// mode = "required"`), or its rules could not be built. Not retried: the kernel
    /// will not change.
    #[error("{agent} was not started: {reason}")]
    Sandbox {
        /// Agent.
        agent: String,
        /// Why, and what to change.
        reason: String,
    },
    /// IO error talking to the agent.
    #[error("io error talking to {agent}: {source}")]
    Io {
        /// Agent.
        agent: String,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
}

/// `Result` with [`AgentError`].
pub type Result<T, E = AgentError> = std::result::Result<T, E>;

impl AgentError {
    /// The same error with every free-text field passed through the redactor.
    pub fn redacted(self, r: &crate::redact::Redactor) -> Self {
        match self {
            AgentError::MalformedOutput {
                agent,
                line_no,
                reason,
                snippet,
            } => AgentError::MalformedOutput {
                agent,
                line_no,
                reason: r.redact(&reason),
                snippet: r.redact(&snippet),
            },
            AgentError::ExitedMidTurn {
                agent,
                status,
                stderr,
            } => AgentError::ExitedMidTurn {
                agent,
                status,
                stderr: r.redact(&stderr),
            },
            AgentError::Exited {
                agent,
                status,
                stderr,
            } => AgentError::Exited {
                agent,
                status,
                stderr: r.redact(&stderr),
            },
            AgentError::Rejected {
                agent,
                method,
                message,
            } => AgentError::Rejected {
                agent,
                method,
                message: r.redact(&message),
            },
            AgentError::Http { provider, message } => AgentError::Http {
                provider,
                message: r.redact(&message),
            },
            AgentError::SessionGone {
                agent,
                session_id,
                detail,
            } => AgentError::SessionGone {
                agent,
                session_id,
                detail: r.redact(&detail),
            },
            other => other,
        }
    }
}
