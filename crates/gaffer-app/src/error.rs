//! What the app service refuses, and why. Every variant says which HTTP status
//! the server maps it to; none is retried by the app itself except store conflicts.

use gaffer_store::StoreError;

/// The app service's error.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// A request field is wrong; nothing was stored. HTTP 400, naming `field`.
    #[error("{message}")]
    Invalid {
        /// The request field at fault (`request`, `path`, `decision`, …).
        field: String,
        /// What was wrong and what to do.
        message: String,
    },
    /// The named thing does not exist. HTTP 404.
    #[error("{what} `{id}` does not exist")]
    NotFound {
        /// `project`, `task`, `approval`.
        what: &'static str,
        /// The id or name asked for.
        id: String,
    },
    /// The request contradicts what is recorded (a duplicate name, a finished
    /// task, a decision naming the wrong task or project). HTTP 409; nothing stored.
    #[error("{message}")]
    Conflict {
        /// Machine-readable: `conflict`, `wrong_scope`, `task_finished`, `name_taken`.
        code: &'static str,
        /// What was wrong.
        message: String,
    },
    /// The actor may not do this (not a listed decider, not a person). HTTP 403.
    #[error("{0}")]
    Forbidden(String),
    /// A service gaffer relies on (a forge) failed or refused. HTTP 502; nothing stored.
    #[error("{0}")]
    Upstream(String),
    /// The journal failed. HTTP 500; logged once by the server.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl AppError {
    pub(crate) fn invalid(field: &str, message: impl Into<String>) -> Self {
        Self::Invalid {
            field: field.to_owned(),
            message: message.into(),
        }
    }

    pub(crate) fn conflict(code: &'static str, message: impl Into<String>) -> Self {
        Self::Conflict {
            code,
            message: message.into(),
        }
    }
}

/// The app service's result type.
pub type Result<T, E = AppError> = std::result::Result<T, E>;
