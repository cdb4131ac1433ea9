/// Why the engine stopped working on a task.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The journal failed.
    #[error(transparent)]
    Store(#[from] gaffer_store::StoreError),
    /// The app service refused or failed.
    #[error(transparent)]
    App(#[from] gaffer_app::AppError),
    /// The task ended (done, failed, cancelled, blocked) while we worked on it.
    #[error("task `{0}` has already ended")]
    Finished(String),
    /// The task was cancelled by this process (Ctrl-C).
    #[error("cancelled")]
    Cancelled,
    /// A step is running somewhere else.
    #[error("step `{0}` is running in another process")]
    Busy(String),
    /// The task's repository or worktree is not on this machine (workers on many
    /// machines without a shared data dir): a worker elsewhere must run it.
    #[error("{0}")]
    Elsewhere(String),
    /// The task or its project is missing or inconsistent.
    #[error("{0}")]
    Invalid(String),
}

/// The engine's result type.
pub type Result<T, E = EngineError> = std::result::Result<T, E>;

/// Why one step failed: recorded as `step_failed`, in words for the task's reader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepFailure(pub String);
