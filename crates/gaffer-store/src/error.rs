use gaffer_core::{Rejected, StreamId};

/// What can go wrong with the journal.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Another writer appended first: the caller's view of the stream is stale.
    /// Re-read the stream and decide again; never retried blindly.
    #[error("stream `{stream}` moved on: expected head {expected}, found {actual}; re-read and try again")]
    Conflict {
        /// The stream.
        stream: StreamId,
        /// The head the caller expected.
        expected: i64,
        /// The head in the journal.
        actual: i64,
    },
    /// A worker appended for a task whose lease it no longer holds (it expired and
    /// another worker took the task over). Nothing was written; the worker must stop
    /// working on the task at once. Never retried.
    #[error("task `{task}`: the lease of worker `{worker}` (generation {generation}) is no longer held{}; this worker stops the task", holder.as_ref().map(|(w, g)| format!(" (worker `{w}` holds generation {g})")).unwrap_or_default())]
    LeaseLost {
        /// The task.
        task: String,
        /// The worker that appended.
        worker: String,
        /// The generation it appended under.
        generation: i64,
        /// Who holds the lease now, and its generation.
        holder: Option<(String, i64)>,
    },
    /// The reducer refused an event; nothing was written.
    #[error("event {index} for `{stream}` refused: {reason}")]
    Rejected {
        /// The stream.
        stream: StreamId,
        /// Index of the refused event in the batch.
        index: usize,
        /// The reducer's reason.
        reason: Rejected,
    },
    /// A uniqueness or reference rule of the journal refused the write; nothing was written.
    #[error("refused by the journal: {0}")]
    Constraint(String),
    /// The database was written by a newer gaffer.
    #[error("database {path} has schema version {found}, newer than this gaffer understands ({supported}); upgrade gaffer — the database was not changed")]
    NewerSchema {
        /// The database.
        path: String,
        /// Its version.
        found: i64,
        /// The newest this build knows.
        supported: i64,
    },
    /// The file is a database, but not one of gaffer's.
    #[error("{path} is not a gaffer journal (it has tables but no gaffer schema); point --data-dir or database.url elsewhere — nothing in it was changed")]
    Foreign {
        /// The database.
        path: String,
    },
    /// The database could not be opened (a PostgreSQL URL is shown with its password masked).
    #[error("cannot open database {path}: {source}; check that it exists, is reachable and that the credentials are right")]
    Open {
        /// The database.
        path: String,
        /// Why.
        #[source]
        source: sqlx::Error,
    },
    /// A stored event cannot be read back.
    #[error("event {seq} of `{stream}` is unreadable: {problem}")]
    Corrupt {
        /// The stream.
        stream: String,
        /// The seq.
        seq: i64,
        /// What is wrong.
        problem: String,
    },
    /// The URL names a database this build cannot open.
    #[error("{0}")]
    Unsupported(String),
    /// A journal copy was refused or stopped.
    #[error("journal copy refused: {0}")]
    Copy(String),
    /// A backup or restore was refused or failed; what is named was left as it was.
    #[error("{0}")]
    Backup(String),
    /// Migrating the schema failed.
    #[error("schema migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// Any other database error.
    #[error("database error: {0}")]
    Db(#[from] sqlx::Error),
}

/// The store's result type.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;
