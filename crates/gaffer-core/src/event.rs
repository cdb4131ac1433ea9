use crate::{
    ApprovalId, ApprovalKind, ContextPack, Decision, Delivery, Intent, ProjectId, Role, SessionId,
    Stage, StepId, TaskId,
};
use serde::{Deserialize, Serialize};

/// Who did something.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Actor {
    /// A person, a policy rule, or gaffer itself.
    pub kind: ActorKind,
    /// The person's name, the rule's description, or the component.
    pub name: String,
    /// Where it came from: `cli`, `api:<token name>`, `web`, `discord`, `engine`, …
    pub via: String,
}

/// The kinds of [`Actor`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActorKind {
    /// A person.
    User,
    /// An auto-approve rule, evaluated once when the approval was created.
    Policy,
    /// gaffer itself (recovery, expiry, the engine).
    System,
}

impl Actor {
    /// gaffer acting on its own, from `via` (e.g. `engine`, `recovery`).
    pub fn system(via: &str) -> Self {
        Self {
            kind: ActorKind::System,
            name: "gaffer".into(),
            via: via.into(),
        }
    }

    /// A person.
    pub fn user(name: &str, via: &str) -> Self {
        Self {
            kind: ActorKind::User,
            name: name.into(),
            via: via.into(),
        }
    }

    /// An auto-approve rule.
    pub fn policy(rule: &str) -> Self {
        Self {
            kind: ActorKind::Policy,
            name: rule.into(),
            via: "policy".into(),
        }
    }
}

/// How a task should run, chosen when it is created.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskOptions {
    /// Branch to start from (default: the project's default branch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    /// Put every role on this backend (`claude`, `codex`, `gemini`, `acp:<name>`, `openai`, `anthropic`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Approve the plan and every permission request by policy (`gaffer run --yes`).
    #[serde(default)]
    pub auto_approve: bool,
    /// The forge issue the task came from (`gaffer run --issue URL`): shipping
    /// comments on it with the pull request's link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issue: Option<String>,
    /// The origin key that makes creating this task happen once: a second creation
    /// with the same key returns this task instead (`schedule:<name>:<slot>`,
    /// `intake:<forge>/<repo>#<n>`, or a client's `Idempotency-Key`). Unique across
    /// the journal (the `tasks` projection's `origin_key`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Tasks of the same project this one runs after (`gaffer run --after ID`): it
    /// waits until every one is done, and is blocked when one fails, is cancelled
    /// or is blocked. See [`crate::dependency`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<TaskId>,
}

/// Everything that can happen, as recorded in the journal. The first event of a
/// stream creates it (`project_registered` or `task_created`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// A git repository is registered as a project.
    ProjectRegistered {
        /// The project id, which is also its stream id.
        project_id: ProjectId,
        /// Short unique name.
        name: String,
        /// Canonical (physical) path of the repository.
        path: String,
        /// The command that checks the project (`cargo test`, …), if known.
        check_command: Option<String>,
    },
    /// The project's check command changed.
    ProjectCheckCommandSet {
        /// The new command, or none.
        check_command: Option<String>,
    },
    /// The project-wide auto-approve toggle changed.
    ProjectAutoApproveSet {
        /// On or off.
        enabled: bool,
        /// Who flipped it.
        by: Actor,
    },

    /// A request became a task.
    TaskCreated {
        /// The task id, which is also its stream id.
        task_id: TaskId,
        /// The project it runs in.
        project_id: ProjectId,
        /// What was asked, in the requester's words.
        request: String,
        /// Who asked.
        by: Actor,
        /// How it should run (base branch, agent, auto-approval).
        #[serde(default)]
        options: TaskOptions,
    },
    /// The task moved to another working stage.
    TaskStageEntered {
        /// The new stage.
        stage: Stage,
    },
    /// The task finished successfully.
    TaskDone {
        /// What was achieved: branch, commits, verdicts, cost.
        summary: serde_json::Value,
    },
    /// The task finished unsuccessfully.
    TaskFailed {
        /// Why.
        reason: String,
    },
    /// A person stopped the task.
    TaskCancelled {
        /// Who.
        by: Actor,
        /// Why, if they said.
        reason: Option<String>,
    },
    /// Something happened on the shipped task's pull request that the task must
    /// answer (review comments, a base that moved): the done task opens again. See
    /// [`crate::FollowUp`]. Refused unless the task is done and still followed, and
    /// when any of `keys` was recorded before, so two followers (or a follower
    /// after a restart) cannot open the same follow-up twice.
    FollowUpOpened {
        /// Which follow-up: `review_comments`, `merge_conflict`, … (the pipeline
        /// module that answers it).
        kind: String,
        /// What makes it this follow-up and no other (`review_comments`: the
        /// comments' ids). Unique across the task's follow-ups.
        keys: Vec<String>,
        /// What the follow-up is about (the comments with their file and line),
        /// already redacted.
        #[serde(default)]
        detail: serde_json::Value,
    },
    /// The done task's pull request is no longer followed (merged, closed, or a
    /// person said stop): no follow-up opens any more.
    FollowingEnded {
        /// Why.
        reason: String,
    },
    /// A worker took the task: it alone may append to the task while its lease
    /// (this generation) holds. Recorded by the worker, fenced by that lease.
    TaskLeased {
        /// The worker (`host/pid/random`), as in `gaffer workers`.
        worker_id: String,
        /// The lease generation: 1 for the first lease of the task, +1 per takeover.
        generation: i64,
    },
    /// The task cannot go on.
    TaskBlocked {
        /// Why.
        reason: String,
    },
    /// A task this waiting task runs after is done; the last one queues it.
    TaskDependencyDone {
        /// The task it ran after.
        dependency: TaskId,
    },
    /// A task this waiting task runs after ended without being done: the waiting
    /// task is blocked, naming it and how it ended.
    TaskDependencyFailed {
        /// The task it ran after.
        dependency: TaskId,
        /// How that task ended: `failed`, `cancelled` or `blocked`.
        stage: Stage,
        /// That task's own reason, if it gave one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },

    /// A step's intent, recorded before its effect runs.
    StepIntentRecorded {
        /// Unique within the task.
        step_id: StepId,
        /// What it does, for people.
        name: String,
        /// What running it does to the world.
        intent: Intent,
        /// Steps that must be satisfied first.
        #[serde(default)]
        depends_on: Vec<StepId>,
        /// What it is asked to do.
        #[serde(default)]
        input: serde_json::Value,
    },
    /// The step's effect began.
    StepStarted {
        /// The step.
        step_id: StepId,
    },
    /// What an agent is doing during a running step (tool call, message, usage), already
    /// redacted. Changes no state; it is there for people watching and for the record.
    AgentActivity {
        /// The running step.
        step_id: StepId,
        /// The normalized agent event.
        activity: serde_json::Value,
    },
    /// The repository context the running step's agent is given, recorded before its turn
    /// (which files, whole or skeleton, their tokens, the budget). A step run again records
    /// its new pack over the old one.
    StepContextPacked {
        /// The running step.
        step_id: StepId,
        /// The role whose prompt holds the pack.
        role: Role,
        /// What was packed.
        pack: ContextPack,
    },
    /// The CI state of the pushed commit changed while a `ci` step waits for it (the
    /// first state seen, then every change of the overall state or of any check).
    /// Changes no state; it is there for people watching and for the record.
    CiStatusChanged {
        /// The running step that waits.
        step_id: StepId,
        /// The commit.
        sha: String,
        /// `pending`, `success`, `failure` or `error`.
        state: String,
        /// Every check: name, state, description, link (already redacted).
        #[serde(default)]
        checks: serde_json::Value,
    },
    /// A member of the arbiter's panel gave its opinion, or failed to, inside the
    /// running arbiter step (one per member and call). Changes no state; the step run
    /// again after a crash asks only the members without one.
    PanelOpinion {
        /// The running arbiter step.
        step_id: StepId,
        /// The member as configured: `agent[:model]`.
        member: String,
        /// Its backend.
        agent: String,
        /// Its model, when one was configured.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        /// What it recommends (`{"opinion","reason"}`, the opinion contract); none
        /// when it failed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        opinion: Option<serde_json::Value>,
        /// Its whole answer, redacted and cut short.
        #[serde(default)]
        text: String,
        /// Why it gave no opinion (error, timeout, an answer that broke the contract
        /// twice), redacted.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// What its session spent (the `usage` object a receipt holds).
        #[serde(default)]
        usage: serde_json::Value,
    },
    /// The step's effect finished, with a receipt.
    StepCompleted {
        /// The step.
        step_id: StepId,
        /// What it produced (commit id, PR number, verdict, …).
        receipt: serde_json::Value,
    },
    /// The step's effect failed.
    StepFailed {
        /// The step.
        step_id: StepId,
        /// Why, already redacted.
        error: String,
        /// What the step's agent turns spent before it failed (the `usage` object a
        /// receipt holds), so a failed task's cost counts them.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<serde_json::Value>,
    },
    /// The process running the step died (found at recovery). The reducer decides what
    /// follows from the intent: run again, or `effect_unknown`.
    StepInterrupted {
        /// The step.
        step_id: StepId,
    },
    /// A read-only probe is checking whether an unknown effect happened.
    StepReconcileStarted {
        /// The step.
        step_id: StepId,
    },
    /// The probe could not tell; a human must decide.
    StepManualRequired {
        /// The step.
        step_id: StepId,
        /// What the probe found.
        reason: String,
    },
    /// The step will run again (a failed idempotent step, or a human said so).
    StepRetried {
        /// The step.
        step_id: StepId,
    },

    /// A question for a human, keyed by `(task, step, attempt)`.
    ApprovalRequested {
        /// Unique across the journal.
        approval_id: ApprovalId,
        /// The step that waits.
        step_id: StepId,
        /// Which request of that step this is.
        attempt: u32,
        /// What is asked.
        kind: ApprovalKind,
        /// The question in words a human can judge.
        summary: String,
        /// Command, files, diff excerpt, reason.
        #[serde(default)]
        details: serde_json::Value,
    },
    /// The first (and only) decision.
    ApprovalDecided {
        /// The approval.
        approval_id: ApprovalId,
        /// Approve or deny.
        decision: Decision,
        /// Who decided, and from where.
        by: Actor,
        /// Their note.
        note: Option<String>,
        /// "Allow for this task": a person approving a `tool` approval also
        /// approves the same tool call (see [`crate::same_tool_call`])
        /// for the rest of this task. Absent in journals older than the field.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        for_task: bool,
        /// The approval decided `for_task` whose grant approved this one (by a
        /// policy actor naming who granted it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        grant: Option<ApprovalId>,
    },
    /// Nobody decided in time.
    ApprovalExpired {
        /// The approval.
        approval_id: ApprovalId,
        /// What the waiting agent is told.
        reason: String,
    },
    /// The asker no longer waits (it moved on, or the task ended).
    ApprovalWithdrawn {
        /// The approval.
        approval_id: ApprovalId,
        /// Why.
        reason: String,
    },

    /// An agent conversation began.
    SessionStarted {
        /// gaffer's id for it.
        session_id: SessionId,
        /// Backend name.
        agent: String,
        /// Role it plays.
        role: Role,
        /// Canonical workspace path.
        workspace_key: String,
        /// The agent's own id, if assigned up front.
        agent_session_id: Option<String>,
        /// The step that started it.
        step_id: Option<StepId>,
    },
    /// The agent's own record confirmed the session id.
    SessionVerified {
        /// The session.
        session_id: SessionId,
        /// The agent's id as it reported it.
        agent_session_id: String,
    },
    /// The conversation is over.
    SessionEnded {
        /// The session.
        session_id: SessionId,
        /// Why.
        reason: String,
    },

    /// A person's message to the task's running agent (see [`crate::Message`]).
    MessageSent {
        /// Unique in the task (`m-…`).
        message_id: String,
        /// What they wrote, redacted.
        text: String,
        /// Who: always a person, with the channel they were authenticated by.
        by: Actor,
    },
    /// The agent got the message; recorded once per message.
    MessageDelivered {
        /// The message.
        message_id: String,
        /// The session that got it.
        session_id: SessionId,
        /// Into the running turn, or as the next turn's prompt.
        delivery: Delivery,
        /// Masked with the step's placeholders, for a cloud model of a masked
        /// project (see `gaffer_index::mask`); false: given as written. Absent from
        /// events recorded before messages could be masked, which were all as written.
        #[serde(default)]
        masked: bool,
    },
    /// A role's agent was out (its quota used up, rate-limited past the threshold,
    /// failing with server errors, or unable to start): the running step goes on with
    /// the next agent of the role's chain. Recorded after the failed session ended,
    /// before the next agent starts.
    AgentSwitched {
        /// The running step.
        step_id: StepId,
        /// The role it plays.
        role: Role,
        /// The agent that was out.
        from: String,
        /// The agent that takes over.
        to: String,
        /// `usage_limit`, `rate_limited`, `server_error` or `cannot_start`.
        trigger: String,
        /// What the agent said, redacted.
        detail: String,
        /// `from` is not tried again for this role before this time (ms).
        until: crate::Timestamp,
        /// Whether the failed turn did something (changed the worktree or ran a
        /// command): then a person decides before `to` starts.
        effects: bool,
    },
    /// A person stopped the running turn, keeping the task and its session: the
    /// step waits for their next message, which starts the next turn.
    TurnInterrupted {
        /// The session whose turn was stopped.
        session_id: SessionId,
        /// Who: always a person.
        by: Actor,
    },
}

/// Which projection rows an event changes, so a store updates only those.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Touched {
    /// The project row.
    Project,
    /// The task row only.
    Task,
    /// The task row and one step.
    Step(StepId),
    /// The task row and one approval.
    Approval(ApprovalId),
    /// The task row and one session.
    Session(SessionId),
    /// The task row and every approval of the task (final events withdraw pending ones).
    TaskAndApprovals,
}

/// `Event::kind` and `Event::KINDS` from one list, so a new event type cannot be
/// missing from `KINDS` (the match would not compile without it). Clients that
/// must name every type, like the web page's `EventSource` listeners, use `KINDS`.
macro_rules! event_kinds {
    ($($variant:ident => $kind:literal,)*) => {
        impl Event {
            /// Every event type, in declaration order.
            pub const KINDS: &'static [&'static str] = &[$($kind),*];

            /// The snake_case event type, as in the journal's `type` field.
            pub fn kind(&self) -> &'static str {
                match self {
                    $(Event::$variant { .. } => $kind,)*
                }
            }
        }
    };
}

event_kinds! {
    ProjectRegistered => "project_registered",
    ProjectCheckCommandSet => "project_check_command_set",
    ProjectAutoApproveSet => "project_auto_approve_set",
    TaskCreated => "task_created",
    TaskStageEntered => "task_stage_entered",
    TaskDone => "task_done",
    TaskFailed => "task_failed",
    TaskCancelled => "task_cancelled",
    TaskBlocked => "task_blocked",
    TaskLeased => "task_leased",
    TaskDependencyDone => "task_dependency_done",
    TaskDependencyFailed => "task_dependency_failed",
    FollowUpOpened => "follow_up_opened",
    FollowingEnded => "following_ended",
    StepIntentRecorded => "step_intent_recorded",
    StepStarted => "step_started",
    AgentActivity => "agent_activity",
    StepContextPacked => "step_context_packed",
    CiStatusChanged => "ci_status_changed",
    PanelOpinion => "panel_opinion",
    StepCompleted => "step_completed",
    StepFailed => "step_failed",
    StepInterrupted => "step_interrupted",
    StepReconcileStarted => "step_reconcile_started",
    StepManualRequired => "step_manual_required",
    StepRetried => "step_retried",
    ApprovalRequested => "approval_requested",
    ApprovalDecided => "approval_decided",
    ApprovalExpired => "approval_expired",
    ApprovalWithdrawn => "approval_withdrawn",
    SessionStarted => "session_started",
    SessionVerified => "session_verified",
    SessionEnded => "session_ended",
    MessageSent => "message_sent",
    MessageDelivered => "message_delivered",
    TurnInterrupted => "turn_interrupted",
    AgentSwitched => "agent_switched",
}

impl Event {
    /// Whether this event belongs to a project stream (otherwise a task stream).
    pub fn is_project_event(&self) -> bool {
        matches!(
            self,
            Event::ProjectRegistered { .. }
                | Event::ProjectCheckCommandSet { .. }
                | Event::ProjectAutoApproveSet { .. }
        )
    }

    /// The projection rows this event changes.
    pub fn touched(&self) -> Touched {
        match self {
            Event::ProjectRegistered { .. }
            | Event::ProjectCheckCommandSet { .. }
            | Event::ProjectAutoApproveSet { .. } => Touched::Project,
            Event::TaskCreated { .. }
            | Event::TaskStageEntered { .. }
            | Event::TaskLeased { .. }
            | Event::TaskDependencyDone { .. }
            | Event::FollowUpOpened { .. }
            | Event::FollowingEnded { .. }
            | Event::AgentActivity { .. }
            | Event::CiStatusChanged { .. }
            | Event::PanelOpinion { .. }
            | Event::MessageSent { .. }
            | Event::MessageDelivered { .. }
            | Event::TurnInterrupted { .. } => Touched::Task,
            Event::TaskDone { .. }
            | Event::TaskFailed { .. }
            | Event::TaskCancelled { .. }
            | Event::TaskBlocked { .. }
            | Event::TaskDependencyFailed { .. } => Touched::TaskAndApprovals,
            Event::StepIntentRecorded { step_id, .. }
            | Event::StepStarted { step_id }
            | Event::StepCompleted { step_id, .. }
            | Event::StepFailed { step_id, .. }
            | Event::StepInterrupted { step_id }
            | Event::StepReconcileStarted { step_id }
            | Event::StepManualRequired { step_id, .. }
            | Event::StepRetried { step_id }
            | Event::StepContextPacked { step_id, .. }
            | Event::AgentSwitched { step_id, .. } => Touched::Step(step_id.clone()),
            Event::ApprovalRequested { approval_id, .. }
            | Event::ApprovalDecided { approval_id, .. }
            | Event::ApprovalExpired { approval_id, .. }
            | Event::ApprovalWithdrawn { approval_id, .. } => {
                Touched::Approval(approval_id.clone())
            }
            Event::SessionStarted { session_id, .. }
            | Event::SessionVerified { session_id, .. }
            | Event::SessionEnded { session_id, .. } => Touched::Session(session_id.clone()),
        }
    }
}
