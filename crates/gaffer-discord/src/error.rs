//! The adapter's errors.

/// What can go wrong talking to Discord.
#[derive(Debug, thiserror::Error)]
pub enum DiscordError {
    /// The token was refused (REST 401 or gateway close 4004). Not retried: the
    /// adapter stops and says which variable holds the token.
    #[error("Discord refused the bot token ({0}); check the token in the environment variable named by discord.token_env")]
    Unauthorized(String),
    /// The gateway closed with a code that forbids reconnecting (bad intents,
    /// invalid shard, …). Not retried.
    #[error("the Discord gateway closed the connection for good: {code} {reason}")]
    Fatal {
        /// Discord's close code.
        code: u16,
        /// Its reason.
        reason: String,
    },
    /// Discord answered with an error status; `code` is Discord's JSON error code.
    /// Returned to the caller (rate limits are retried before this).
    #[error("Discord answered {status} to {route}: {message} (code {code})")]
    Api {
        /// HTTP status.
        status: u16,
        /// Discord's error code (0 when absent).
        code: u64,
        /// Discord's message.
        message: String,
        /// Method and route (the channel id kept, other ids and tokens hidden).
        route: String,
    },
    /// Still rate limited after every retry.
    #[error("Discord kept rate-limiting {0}; gave up after retrying")]
    RateLimited(String),
    /// Network or TLS failure, or an answer that is not Discord's JSON.
    #[error("cannot reach Discord: {0}")]
    Transport(String),
    /// The app service refused or failed.
    #[error(transparent)]
    App(#[from] gaffer_app::AppError),
}

impl DiscordError {
    /// Discord's JSON error code, if this is an API error.
    pub fn code(&self) -> Option<u64> {
        match self {
            DiscordError::Api { code, .. } => Some(*code),
            _ => None,
        }
    }
}

/// The adapter's result type.
pub type Result<T, E = DiscordError> = std::result::Result<T, E>;
