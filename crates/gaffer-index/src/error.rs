//! The crate's one error type.

use std::path::PathBuf;

/// What went wrong in indexing or context selection.
///
/// Files that cannot be read or parsed are *not* errors: they are skipped with a reason
/// (see [`crate::Skipped`]) and the index goes on. These variants stop the whole call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The repository root does not exist or cannot be read. Returned by [`crate::build_index`];
    /// not retried.
    #[error("repository {path}: {source}; hint: pass the path of a checked-out repository")]
    Repo {
        /// The path as given.
        path: PathBuf,
        /// The underlying IO error.
        source: std::io::Error,
    },
    /// The repository root is a file, not a directory. Returned by [`crate::build_index`].
    #[error("{path} is not a directory; hint: pass the repository root, not a file in it")]
    NotADirectory {
        /// The path as given.
        path: PathBuf,
    },
    /// The index cache failed (IO, a database error in the store). Retrying may help.
    #[error("index cache: {0}")]
    Cache(String),
    /// The task text given to `context` is empty. Not retried.
    #[error("the task text is empty; hint: pass the issue or request text, or '-' to read it from stdin")]
    EmptyText,
    /// The token budget is too small to hold anything. Not retried.
    #[error("budget {got} is too small; hint: use at least {min} tokens")]
    BudgetTooSmall {
        /// The budget asked for.
        got: usize,
        /// The smallest budget accepted.
        min: usize,
    },
    /// A `--weight NAME=VALUE` override names no weight or has no number. Not retried.
    #[error("bad weight override '{0}'; hint: use NAME=VALUE with a field of gaffer_index::Weights, e.g. pagerank=0.5")]
    BadWeight(String),
    /// The tokenizer could not be loaded.
    #[error("tokenizer {name}: {message}")]
    Tokenizer {
        /// Tokenizer name (cl100k, o200k).
        name: String,
        /// What failed.
        message: String,
    },
    /// Reading the task text from stdin or writing the output failed (a closed pipe included:
    /// the binary treats [`std::io::ErrorKind::BrokenPipe`] as success).
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    /// Serializing the JSON output failed.
    #[error("json output: {0}")]
    Json(#[from] serde_json::Error),
}

/// `Result` with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
