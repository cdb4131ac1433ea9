use crate::{
    Actor, ActorKind, AgentSwitch, Approval, ApprovalId, ApprovalKind, ApprovalState, Decision,
    Delivered, Event, FollowUp, Intent, Interrupt, Message, ProjectId, Rejected, Session,
    SessionId, Stage, Step, StepId, StepState, TaskId, TaskOptions, Timestamp,
};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// A task, as its events describe it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskState {
    /// Its id and stream id.
    pub id: TaskId,
    /// The project it runs in.
    pub project_id: ProjectId,
    /// What was asked.
    pub request: String,
    /// Who asked.
    pub created_by: Actor,
    /// How it should run.
    #[serde(default)]
    pub options: TaskOptions,
    /// Where it is in its lifecycle.
    pub stage: Stage,
    /// The final summary (done) or reason (failed, cancelled, blocked).
    pub outcome: Option<serde_json::Value>,
    /// Its steps, by id.
    pub steps: BTreeMap<StepId, Step>,
    /// Its approvals, by id.
    pub approvals: BTreeMap<ApprovalId, Approval>,
    /// Its agent sessions, by id.
    pub sessions: BTreeMap<SessionId, Session>,
    /// The worker that holds (or last held) the task's lease, and that lease's
    /// generation (0: never leased).
    #[serde(default)]
    pub worker: Option<String>,
    /// The newest lease generation recorded (`task_leased`).
    #[serde(default)]
    pub lease_generation: i64,
    /// People's messages to its agent, in the order they were sent.
    #[serde(default)]
    pub messages: Vec<Message>,
    /// The running turn a person stopped, until their next message (or the
    /// session's end).
    #[serde(default)]
    pub interrupted: Option<Interrupt>,
    /// Every switch of a role to its next agent, in order.
    #[serde(default)]
    pub switches: Vec<AgentSwitch>,
    /// The tasks of `options.after` it still waits for (none once queued).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub waiting_for: BTreeSet<TaskId>,
    /// What its pull request asked after it shipped, in order (see [`FollowUp`]).
    #[serde(default)]
    pub follow_ups: Vec<FollowUp>,
    /// Why its pull request is no longer followed, once it is not.
    #[serde(default)]
    pub following_ended: Option<String>,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it last changed.
    pub updated_at: Timestamp,
}

impl TaskState {
    /// Start a task stream from its first event.
    pub fn create(at: Timestamp, event: &Event) -> Result<Self, Rejected> {
        match event {
            Event::TaskCreated {
                task_id,
                project_id,
                request,
                by,
                options,
            } => {
                if task_id.as_str().is_empty() {
                    return Err(Rejected::Empty("task_id"));
                }
                if project_id.as_str().is_empty() {
                    return Err(Rejected::Empty("project_id"));
                }
                if request.trim().is_empty() {
                    return Err(Rejected::Empty("request"));
                }
                let waiting_for = crate::dependency::awaited(task_id, &options.after)?;
                Ok(Self {
                    id: task_id.clone(),
                    project_id: project_id.clone(),
                    request: request.clone(),
                    created_by: by.clone(),
                    options: options.clone(),
                    stage: if waiting_for.is_empty() {
                        Stage::Queued
                    } else {
                        Stage::Waiting
                    },
                    outcome: None,
                    steps: BTreeMap::new(),
                    approvals: BTreeMap::new(),
                    sessions: BTreeMap::new(),
                    worker: None,
                    lease_generation: 0,
                    messages: Vec::new(),
                    interrupted: None,
                    switches: Vec::new(),
                    waiting_for,
                    follow_ups: Vec::new(),
                    following_ended: None,
                    created_at: at,
                    updated_at: at,
                })
            }
            other => Err(Rejected::NotACreation {
                stream: "task",
                expected: "task_created",
                got: other.kind(),
            }),
        }
    }

    /// The reducer for one later event. Every check happens before any field
    /// changes, so on `Err` the state is exactly as before.
    pub fn apply(&mut self, at: Timestamp, event: &Event) -> Result<(), Rejected> {
        if self.stage.is_final() && !FollowUp::comes_after_the_end(event) {
            return Err(Rejected::TaskFinished {
                stage: self.stage,
                got: event.kind(),
            });
        }
        if event.is_project_event() {
            return Err(Rejected::WrongStream {
                stream: "task",
                got: event.kind(),
            });
        }
        if self.stage == Stage::Waiting && !crate::dependency::may_happen_while_waiting(event) {
            return Err(Rejected::Waiting { got: event.kind() });
        }
        match event {
            Event::TaskCreated { .. } => {
                return Err(Rejected::AlreadyCreated { got: event.kind() })
            }
            Event::TaskStageEntered { stage } => {
                if !self.stage.may_enter(*stage) {
                    return Err(Rejected::IllegalStage {
                        from: self.stage,
                        to: *stage,
                    });
                }
                self.stage = *stage;
            }
            Event::FollowUpOpened { .. } | Event::FollowingEnded { .. } => {
                self.follow_up(at, event)?;
            }
            Event::TaskDone { summary } => {
                if !self.stage.may_finish() {
                    return Err(Rejected::IllegalStage {
                        from: self.stage,
                        to: Stage::Done,
                    });
                }
                if let Some(step) = self.steps.values().find(|s| !s.is_settled()) {
                    return Err(Rejected::NotSettled(format!(
                        "step `{}` is {}",
                        step.id, step.state
                    )));
                }
                if let Some(a) = self.pending_approvals().next() {
                    return Err(Rejected::NotSettled(format!(
                        "approval `{}` is pending",
                        a.id
                    )));
                }
                self.finish(at, Stage::Done, summary.clone());
            }
            Event::TaskFailed { reason } => {
                self.finish(at, Stage::Failed, serde_json::json!({ "reason": reason }));
            }
            Event::TaskBlocked { reason } => {
                self.finish(at, Stage::Blocked, serde_json::json!({ "reason": reason }));
            }
            Event::TaskDependencyDone { dependency } => {
                self.dependency_done(dependency)?;
            }
            Event::TaskDependencyFailed {
                dependency,
                stage,
                reason,
            } => {
                let outcome = self.dependency_failed(dependency, *stage, reason.as_deref())?;
                self.finish(at, Stage::Blocked, outcome);
            }
            Event::TaskCancelled { by, reason } => {
                let outcome = serde_json::json!({ "reason": reason, "by": by });
                self.finish(at, Stage::Cancelled, outcome);
            }
            Event::StepIntentRecorded {
                step_id,
                name,
                intent,
                depends_on,
                input,
            } => {
                if step_id.as_str().is_empty() {
                    return Err(Rejected::Empty("step_id"));
                }
                if self.steps.contains_key(step_id) {
                    return Err(Rejected::DuplicateStep(step_id.clone()));
                }
                if let Some(missing) = depends_on.iter().find(|d| !self.steps.contains_key(*d)) {
                    return Err(Rejected::UnknownDependency {
                        step: step_id.clone(),
                        missing: missing.clone(),
                    });
                }
                self.steps.insert(
                    step_id.clone(),
                    Step {
                        id: step_id.clone(),
                        name: name.clone(),
                        intent: *intent,
                        depends_on: depends_on.clone(),
                        input: input.clone(),
                        state: StepState::IntentRecorded,
                        attempt: 1,
                        receipt: None,
                        error: None,
                        context: None,
                        order: self.steps.len() as u32,
                        recorded_at: at,
                        updated_at: at,
                    },
                );
            }
            Event::StepStarted { step_id } => {
                self.step_in(step_id, &[StepState::IntentRecorded], event)?;
                if let Some(waiting_for) = self.unsatisfied_dependency(step_id) {
                    return Err(Rejected::DependencyNotReady {
                        step: step_id.clone(),
                        waiting_for,
                    });
                }
                self.set_step(at, step_id, |s| s.state = StepState::Started);
            }
            Event::TaskLeased {
                worker_id,
                generation,
            } => {
                if worker_id.trim().is_empty() {
                    return Err(Rejected::Empty("worker_id"));
                }
                if *generation <= self.lease_generation {
                    return Err(Rejected::StaleLease {
                        got: *generation,
                        current: self.lease_generation,
                    });
                }
                self.worker = Some(worker_id.clone());
                self.lease_generation = *generation;
            }
            Event::AgentActivity { step_id, .. }
            | Event::CiStatusChanged { step_id, .. }
            | Event::PanelOpinion { step_id, .. } => {
                self.step_in(step_id, &[StepState::Started], event)?;
            }
            Event::StepContextPacked { step_id, pack, .. } => {
                self.step_in(step_id, &[StepState::Started], event)?;
                if let Some(problem) = pack.problem() {
                    return Err(Rejected::InvalidContextPack {
                        step: step_id.clone(),
                        problem,
                    });
                }
                self.set_step(at, step_id, |s| s.context = Some(pack.clone()));
            }
            Event::StepCompleted { step_id, receipt } => {
                self.step_in(step_id, AWAITING_OUTCOME, event)?;
                self.set_step(at, step_id, |s| {
                    s.state = StepState::Completed;
                    s.receipt = Some(receipt.clone());
                    s.error = None;
                });
            }
            Event::StepFailed {
                step_id,
                error,
                usage,
            } => {
                self.step_in(step_id, AWAITING_OUTCOME, event)?;
                self.set_step(at, step_id, |s| {
                    s.state = StepState::Failed;
                    s.error = Some(error.clone());
                    // A failed step's receipt holds only what it spent (see `Spend`).
                    s.receipt = usage.as_ref().map(|u| serde_json::json!({ "usage": u }));
                });
            }
            Event::StepInterrupted { step_id } => {
                // A running effect, or a running probe: a crash in the middle of
                // recovering from a crash is recovered the same way (probe again).
                self.step_in(step_id, RUNNING, event)?;
                self.set_step(at, step_id, |s| match (s.state, s.intent) {
                    (StepState::Reconciling, _) => s.state = StepState::EffectUnknown,
                    (_, Intent::ReadOnly | Intent::Idempotent) => {
                        s.state = StepState::IntentRecorded;
                        s.attempt += 1;
                    }
                    (_, Intent::NonIdempotent) => s.state = StepState::EffectUnknown,
                });
            }
            Event::StepReconcileStarted { step_id } => {
                self.step_in(step_id, &[StepState::EffectUnknown], event)?;
                self.set_step(at, step_id, |s| s.state = StepState::Reconciling);
            }
            Event::StepManualRequired { step_id, reason } => {
                self.step_in(
                    step_id,
                    &[StepState::EffectUnknown, StepState::Reconciling],
                    event,
                )?;
                self.set_step(at, step_id, |s| {
                    s.state = StepState::ManualRequired;
                    s.error = Some(reason.clone());
                });
            }
            Event::StepRetried { step_id } => {
                // From `reconciling`: the probe proved the effect did not happen, so
                // running it again cannot do it twice.
                self.step_in(
                    step_id,
                    &[
                        StepState::Failed,
                        StepState::Reconciling,
                        StepState::ManualRequired,
                    ],
                    event,
                )?;
                self.set_step(at, step_id, |s| {
                    s.state = StepState::IntentRecorded;
                    s.attempt += 1;
                    s.error = None;
                    s.receipt = None;
                });
            }
            Event::ApprovalRequested {
                approval_id,
                step_id,
                attempt,
                kind,
                summary,
                details,
            } => {
                if approval_id.as_str().is_empty() {
                    return Err(Rejected::Empty("approval_id"));
                }
                if summary.trim().is_empty() {
                    return Err(Rejected::Empty("summary"));
                }
                if self.approvals.contains_key(approval_id) {
                    return Err(Rejected::DuplicateApproval(approval_id.clone()));
                }
                if !self.steps.contains_key(step_id) {
                    return Err(Rejected::UnknownStep(step_id.clone()));
                }
                if let Some(existing) = self
                    .approvals
                    .values()
                    .find(|a| a.step_id == *step_id && a.attempt == *attempt)
                {
                    return Err(Rejected::DuplicateApprovalKey {
                        step: step_id.clone(),
                        attempt: *attempt,
                        existing: existing.id.clone(),
                    });
                }
                self.approvals.insert(
                    approval_id.clone(),
                    Approval {
                        id: approval_id.clone(),
                        step_id: step_id.clone(),
                        attempt: *attempt,
                        kind: *kind,
                        summary: summary.clone(),
                        details: details.clone(),
                        state: ApprovalState::Pending,
                        decided_by: None,
                        note: None,
                        requested_at: at,
                        decided_at: None,
                        for_task: false,
                    },
                );
            }
            Event::ApprovalDecided {
                approval_id,
                decision,
                by,
                note,
                for_task,
                grant,
            } => {
                self.check_grant(approval_id, *decision, by, *for_task, grant.as_ref())?;
                let state = match decision {
                    Decision::Approve => ApprovalState::Approved,
                    Decision::Deny => ApprovalState::Denied,
                };
                self.settle_approval(at, approval_id, state, Some(by.clone()), note.clone())?;
                if let Some(a) = self.approvals.get_mut(approval_id) {
                    a.for_task = *for_task;
                }
            }
            Event::ApprovalExpired {
                approval_id,
                reason,
            } => {
                let note = Some(reason.clone());
                self.settle_approval(at, approval_id, ApprovalState::Expired, None, note)?;
            }
            Event::ApprovalWithdrawn {
                approval_id,
                reason,
            } => {
                let note = Some(reason.clone());
                self.settle_approval(at, approval_id, ApprovalState::Withdrawn, None, note)?;
            }
            Event::SessionStarted {
                session_id,
                agent,
                role,
                workspace_key,
                agent_session_id,
                step_id,
            } => {
                if session_id.as_str().is_empty() {
                    return Err(Rejected::Empty("session_id"));
                }
                if self.sessions.contains_key(session_id) {
                    return Err(Rejected::DuplicateSession(session_id.clone()));
                }
                if let Some(step) = step_id {
                    if !self.steps.contains_key(step) {
                        return Err(Rejected::UnknownStep(step.clone()));
                    }
                }
                self.sessions.insert(
                    session_id.clone(),
                    Session {
                        id: session_id.clone(),
                        agent: agent.clone(),
                        role: *role,
                        workspace_key: workspace_key.clone(),
                        agent_session_id: agent_session_id.clone(),
                        verified: false,
                        step_id: step_id.clone(),
                        ended: None,
                        started_at: at,
                    },
                );
            }
            Event::SessionVerified {
                session_id,
                agent_session_id,
            } => {
                let session = self.live_session(session_id)?;
                session.agent_session_id = Some(agent_session_id.clone());
                session.verified = true;
            }
            Event::SessionEnded { session_id, reason } => {
                let session = self.live_session(session_id)?;
                session.ended = Some(reason.clone());
                if self
                    .interrupted
                    .as_ref()
                    .is_some_and(|i| i.session_id == *session_id)
                {
                    self.interrupted = None;
                }
            }
            Event::MessageSent {
                message_id,
                text,
                by,
            } => {
                self.person("send a message to the agent", by)?;
                if message_id.is_empty() {
                    return Err(Rejected::Empty("message_id"));
                }
                if text.trim().is_empty() {
                    return Err(Rejected::Empty("text"));
                }
                if self.messages.iter().any(|m| m.id == *message_id) {
                    return Err(Rejected::DuplicateMessage(message_id.clone()));
                }
                self.running_session()
                    .ok_or(Rejected::NoRunningAgent { got: event.kind() })?;
                self.messages.push(Message {
                    id: message_id.clone(),
                    text: text.clone(),
                    by: by.clone(),
                    sent_at: at,
                    delivered: None,
                });
                // The message is what the interrupted turn waited for.
                self.interrupted = None;
            }
            Event::MessageDelivered {
                message_id,
                session_id,
                delivery,
                masked,
            } => {
                if !self.sessions.contains_key(session_id) {
                    return Err(Rejected::UnknownSession(session_id.clone()));
                }
                let message = self
                    .messages
                    .iter_mut()
                    .find(|m| m.id == *message_id)
                    .ok_or_else(|| Rejected::UnknownMessage(message_id.clone()))?;
                if message.delivered.is_some() {
                    return Err(Rejected::MessageAlreadyDelivered(message_id.clone()));
                }
                message.delivered = Some(Delivered {
                    session_id: session_id.clone(),
                    delivery: *delivery,
                    masked: *masked,
                    at,
                });
            }
            Event::AgentSwitched {
                step_id,
                role,
                from,
                to,
                trigger,
                detail,
                until,
                effects,
            } => {
                self.step_in(step_id, &[StepState::Started], event)?;
                let bad = |reason: String| Rejected::BadSwitch {
                    step: step_id.clone(),
                    reason,
                };
                if from.is_empty() || to.is_empty() || trigger.is_empty() {
                    return Err(bad("`from`, `to` and `trigger` must not be empty".into()));
                }
                if from == to {
                    return Err(bad(format!("`{from}` cannot take over from itself")));
                }
                // The agent that was out is done with the step before the next starts:
                // a crash between the two never leaves both conversations open.
                if let Some(open) = self.sessions.values().find(|s| {
                    s.ended.is_none() && s.step_id.as_ref() == Some(step_id) && s.agent == *from
                }) {
                    return Err(bad(format!(
                        "the {from} session `{}` of the step is still open",
                        open.id
                    )));
                }
                self.switches.push(AgentSwitch {
                    step_id: step_id.clone(),
                    role: *role,
                    from: from.clone(),
                    to: to.clone(),
                    trigger: trigger.clone(),
                    detail: detail.clone(),
                    until: *until,
                    effects: *effects,
                    at,
                });
            }
            Event::TurnInterrupted { session_id, by } => {
                self.person("interrupt the agent", by)?;
                let running = self
                    .running_session()
                    .ok_or(Rejected::NoRunningAgent { got: event.kind() })?;
                if running.id != *session_id {
                    return Err(Rejected::SessionEnded(session_id.clone()));
                }
                if let Some(i) = &self.interrupted {
                    return Err(Rejected::AlreadyInterrupted(i.session_id.clone()));
                }
                self.interrupted = Some(Interrupt {
                    session_id: session_id.clone(),
                    by: by.clone(),
                    at,
                });
            }
            Event::ProjectRegistered { .. }
            | Event::ProjectCheckCommandSet { .. }
            | Event::ProjectAutoApproveSet { .. } => {
                return Err(Rejected::WrongStream {
                    stream: "task",
                    got: event.kind(),
                })
            }
        }
        self.updated_at = at;
        Ok(())
    }

    /// Approvals still waiting for a decision.
    pub fn pending_approvals(&self) -> impl Iterator<Item = &Approval> {
        self.approvals
            .values()
            .filter(|a| a.state == ApprovalState::Pending)
    }

    /// The agent session open now (the newest, if a crash left an older one open):
    /// the one a person's message or interrupt is for.
    pub fn running_session(&self) -> Option<&Session> {
        self.sessions
            .values()
            .filter(|s| s.ended.is_none())
            .max_by_key(|s| (s.started_at, s.id.clone()))
    }

    /// Messages the agent has not got yet, oldest first.
    pub fn undelivered_messages(&self) -> impl Iterator<Item = &Message> {
        self.messages.iter().filter(|m| m.delivered.is_none())
    }

    /// Steps in the order they were recorded.
    pub fn steps_in_order(&self) -> Vec<&Step> {
        let mut steps: Vec<&Step> = self.steps.values().collect();
        steps.sort_by_key(|s| s.order);
        steps
    }

    /// The step recorded last, if any.
    pub fn last_step(&self) -> Option<&Step> {
        self.steps.values().max_by_key(|s| s.order)
    }

    /// Whether every step is settled (completed, or a failed read-only observation).
    pub fn all_steps_settled(&self) -> bool {
        self.steps.values().all(Step::is_settled)
    }

    /// The first dependency of `step_id` that is not settled, if any.
    pub(crate) fn unsatisfied_dependency(&self, step_id: &StepId) -> Option<StepId> {
        let step = self.steps.get(step_id)?;
        step.depends_on
            .iter()
            .find(|d| !self.steps.get(*d).is_some_and(Step::is_settled))
            .cloned()
    }

    /// Messages and interrupts come from people only: an agent, a policy rule or
    /// gaffer itself cannot steer an agent.
    fn person(&self, what: &'static str, by: &Actor) -> Result<(), Rejected> {
        if by.kind == ActorKind::User {
            Ok(())
        } else {
            Err(Rejected::NotAPerson {
                what,
                by: by.name.clone(),
            })
        }
    }

    pub(crate) fn finish(&mut self, at: Timestamp, stage: Stage, outcome: serde_json::Value) {
        // A final task waits for nothing: withdraw what is still pending, so no
        // approval can stay open forever.
        for approval in self.approvals.values_mut() {
            if approval.state == ApprovalState::Pending {
                approval.state = ApprovalState::Withdrawn;
                approval.note = Some(format!("task {stage}"));
                approval.decided_at = Some(at);
            }
        }
        self.stage = stage;
        self.outcome = Some(outcome);
        self.waiting_for.clear();
    }

    fn step_in(
        &self,
        step_id: &StepId,
        allowed: &[StepState],
        event: &Event,
    ) -> Result<(), Rejected> {
        let step = self
            .steps
            .get(step_id)
            .ok_or_else(|| Rejected::UnknownStep(step_id.clone()))?;
        if allowed.contains(&step.state) {
            Ok(())
        } else {
            Err(Rejected::StepState {
                step: step_id.clone(),
                state: step.state,
                got: event.kind(),
            })
        }
    }

    fn set_step(&mut self, at: Timestamp, step_id: &StepId, change: impl FnOnce(&mut Step)) {
        if let Some(step) = self.steps.get_mut(step_id) {
            change(step);
            step.updated_at = at;
        }
    }

    /// A per-task grant is made only by a person approving a `tool` approval that
    /// names a command, and approves only a `tool` approval of this task asking
    /// the same call (see [`crate::same_tool_call`]).
    fn check_grant(
        &self,
        approval_id: &ApprovalId,
        decision: Decision,
        by: &Actor,
        for_task: bool,
        grant: Option<&ApprovalId>,
    ) -> Result<(), Rejected> {
        if !for_task && grant.is_none() {
            return Ok(());
        }
        let refuse = |reason: String| {
            Err(Rejected::GrantRefused {
                approval: approval_id.clone(),
                reason,
            })
        };
        let approval = self
            .approvals
            .get(approval_id)
            .ok_or_else(|| Rejected::UnknownApproval(approval_id.clone()))?;
        if approval.kind != ApprovalKind::Tool {
            return refuse(format!(
                "only tool approvals can be allowed for the task, not {} approvals",
                approval.kind.as_str()
            ));
        }
        if decision != Decision::Approve {
            return refuse("a denial cannot be for the task".into());
        }
        if for_task {
            if grant.is_some() {
                return refuse("a grant's own approval cannot come from another grant".into());
            }
            if by.kind != ActorKind::User {
                return refuse("only a person allows a call for the task".into());
            }
            if crate::granted_command(&approval.details).is_none() {
                return refuse("it names no command to allow again".into());
            }
        }
        if let Some(g) = grant {
            let covers = self.approvals.get(g).is_some_and(|g| {
                g.kind == ApprovalKind::Tool
                    && g.state == ApprovalState::Approved
                    && g.for_task
                    && crate::same_tool_call(&g.details, &approval.details)
            });
            if !covers {
                return refuse(format!(
                    "`{g}` is not a grant of this task for the same tool call"
                ));
            }
        }
        Ok(())
    }

    fn settle_approval(
        &mut self,
        at: Timestamp,
        approval_id: &ApprovalId,
        state: ApprovalState,
        by: Option<Actor>,
        note: Option<String>,
    ) -> Result<(), Rejected> {
        let approval = self
            .approvals
            .get_mut(approval_id)
            .ok_or_else(|| Rejected::UnknownApproval(approval_id.clone()))?;
        if approval.state != ApprovalState::Pending {
            return Err(Rejected::ApprovalSettled {
                approval: approval_id.clone(),
                state: approval.state,
            });
        }
        approval.state = state;
        approval.decided_by = by;
        approval.note = note;
        approval.decided_at = Some(at);
        Ok(())
    }

    fn live_session(&mut self, session_id: &SessionId) -> Result<&mut Session, Rejected> {
        let session = self
            .sessions
            .get_mut(session_id)
            .ok_or_else(|| Rejected::UnknownSession(session_id.clone()))?;
        if session.ended.is_some() {
            return Err(Rejected::SessionEnded(session_id.clone()));
        }
        Ok(session)
    }
}

/// States in which something runs for the step: its effect, or the probe of an
/// effect a crash left unknown. A crash leaves a step in one of these, and
/// `step_interrupted` takes it out.
const RUNNING: &[StepState] = &[StepState::Started, StepState::Reconciling];

/// States in which a running (or unknown) effect can still get its outcome.
const AWAITING_OUTCOME: &[StepState] = &[
    StepState::Started,
    StepState::Reconciling,
    StepState::ManualRequired,
];
