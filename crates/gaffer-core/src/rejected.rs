use crate::{ApprovalId, ApprovalState, SessionId, Stage, StepId, StepState, TaskId};

/// Why the reducer refused an event. The state it was offered is unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Rejected {
    /// The first event of a stream must create it (`task_created`, `project_registered`).
    #[error("a {stream} stream must start with {expected}, not `{got}`")]
    NotACreation {
        /// Which kind of stream was being started.
        stream: &'static str,
        /// The event that would have created it.
        expected: &'static str,
        /// The event offered.
        got: &'static str,
    },
    /// A creation event offered to a stream that already exists.
    #[error("the stream already exists; `{got}` can only start a new stream")]
    AlreadyCreated {
        /// The event offered.
        got: &'static str,
    },
    /// A task event offered to a project stream, or the reverse.
    #[error("`{got}` does not belong to a {stream} stream")]
    WrongStream {
        /// The kind of stream.
        stream: &'static str,
        /// The event offered.
        got: &'static str,
    },
    /// Nothing may happen to a task after done, failed, cancelled or blocked.
    #[error("task is {stage}, a final state; `{got}` is refused")]
    TaskFinished {
        /// The final stage.
        stage: Stage,
        /// The event offered.
        got: &'static str,
    },
    /// A stage change the lifecycle does not allow.
    #[error("a task cannot go from {from} to {to}")]
    IllegalStage {
        /// Current stage.
        from: Stage,
        /// Requested stage.
        to: Stage,
    },
    /// Done needs every step settled and no approval pending.
    #[error("task cannot be done: {0}")]
    NotSettled(String),
    /// The event names a step this task does not have.
    #[error("step `{0}` does not exist in this task")]
    UnknownStep(StepId),
    /// A step id used twice.
    #[error("step `{0}` is already recorded")]
    DuplicateStep(StepId),
    /// A step may only depend on steps recorded before it.
    #[error("step `{step}` depends on `{missing}`, which does not exist")]
    UnknownDependency {
        /// The new step.
        step: StepId,
        /// The dependency that is not there.
        missing: StepId,
    },
    /// The step is not in a state where this event makes sense.
    #[error("step `{step}` is {state}; `{got}` is refused")]
    StepState {
        /// The step.
        step: StepId,
        /// Its state now.
        state: StepState,
        /// The event offered.
        got: &'static str,
    },
    /// A step started before the steps it depends on settled.
    #[error("step `{step}` cannot start: `{waiting_for}` has not completed")]
    DependencyNotReady {
        /// The step.
        step: StepId,
        /// The first unsatisfied dependency.
        waiting_for: StepId,
    },
    /// The event names an approval this task does not have.
    #[error("approval `{0}` does not exist in this task")]
    UnknownApproval(ApprovalId),
    /// An approval id used twice.
    #[error("approval `{0}` already exists")]
    DuplicateApproval(ApprovalId),
    /// A second approval for the same `(step, attempt)`.
    #[error("step `{step}` attempt {attempt} already has approval `{existing}`")]
    DuplicateApprovalKey {
        /// The step.
        step: StepId,
        /// The attempt.
        attempt: u32,
        /// The approval already recorded for that key.
        existing: ApprovalId,
    },
    /// The first decision wins; this one came later.
    #[error("approval `{approval}` is already {state}")]
    ApprovalSettled {
        /// The approval.
        approval: ApprovalId,
        /// What was recorded first.
        state: ApprovalState,
    },
    /// A per-task grant ("allow for this task") where none may be: see
    /// [`crate::same_tool_call`] for what a grant covers.
    #[error("approval `{approval}`: {reason}")]
    GrantRefused {
        /// The approval being decided.
        approval: ApprovalId,
        /// What is wrong.
        reason: String,
    },
    /// The event names a session this task does not have.
    #[error("session `{0}` does not exist in this task")]
    UnknownSession(SessionId),
    /// A session id used twice.
    #[error("session `{0}` already exists")]
    DuplicateSession(SessionId),
    /// The session has ended.
    #[error("session `{0}` has ended")]
    SessionEnded(SessionId),
    /// A lease generation at or below one already recorded: a stale worker.
    #[error("lease generation {got} is not newer than generation {current} already recorded")]
    StaleLease {
        /// The generation offered.
        got: i64,
        /// The newest generation recorded.
        current: i64,
    },
    /// Only a person may do this (send a message, interrupt a turn).
    #[error("only a person may {what}; `{by}` is not one")]
    NotAPerson {
        /// What was refused.
        what: &'static str,
        /// The actor's name.
        by: String,
    },
    /// A message or an interrupt needs an agent session that is open.
    #[error("no agent is running in this task; `{got}` is refused")]
    NoRunningAgent {
        /// The event offered.
        got: &'static str,
    },
    /// A message id used twice.
    #[error("message `{0}` already exists")]
    DuplicateMessage(String),
    /// The event names a message this task does not have.
    #[error("message `{0}` does not exist in this task")]
    UnknownMessage(String),
    /// A message is delivered once.
    #[error("message `{0}` was already delivered")]
    MessageAlreadyDelivered(String),
    /// The turn was already interrupted and waits for a message.
    #[error("the turn of session `{0}` is already interrupted; a message goes on")]
    AlreadyInterrupted(SessionId),
    /// A context pack that cannot be what a step's agent got.
    #[error("the context pack of step `{step}` is invalid: {problem}")]
    InvalidContextPack {
        /// The step.
        step: StepId,
        /// What is wrong.
        problem: String,
    },
    /// A switch to the next agent that is not one (`from` and `to` the same), or
    /// while the failed agent's session in the step is still open.
    #[error("agent switch in step `{step}`: {reason}")]
    BadSwitch {
        /// The step.
        step: StepId,
        /// What is wrong.
        reason: String,
    },
    /// A task waiting for the tasks it runs after cannot be leased or worked on.
    #[error("the task waits for the tasks it runs after; `{got}` is refused")]
    Waiting {
        /// The event offered.
        got: &'static str,
    },
    /// A dependency event for a task that is not waiting, or for a task it does not
    /// (or no longer) wait for.
    #[error("the task does not wait for `{dependency}`")]
    NotAwaited {
        /// The task named.
        dependency: TaskId,
    },
    /// A `task_created` whose `after` list cannot be waited for.
    #[error("`after`: {0}")]
    BadAfter(String),
    /// A follow-up (after the pull request) that cannot be opened: the task is not
    /// done, it is no longer followed, or one of its keys was already answered.
    #[error("follow-up refused: {0}")]
    FollowUp(String),
    /// A field that must not be empty was empty.
    #[error("`{0}` must not be empty")]
    Empty(&'static str),
}
