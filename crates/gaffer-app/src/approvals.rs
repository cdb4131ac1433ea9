//! Approvals: created once per `(task, step, attempt)`, judged by policy once,
//! decided once, waited for without polling. See the crate docs for the contract.

use crate::error::{AppError, Result};
use crate::tasks::is_final;
use crate::{convert, new_id, policy, App, Subject};
use gaffer_core::{
    Actor, ActorKind, ApprovalId, ApprovalKind, ApprovalState, Decision, Event, Rejected, StepId,
    StreamId, TaskId,
};
use gaffer_protocol::api;
use gaffer_store::{
    now_ms, ApprovalFilter, ApprovalRow, NewEvent, RecordedEvent, StoreError, TaskView,
};
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;

/// Most optimistic-append retries before giving up with a 409.
const MAX_TRIES: usize = 256;
/// Longest note accepted, in bytes.
const MAX_NOTE_BYTES: usize = 4000;

/// What the engine asks a human (or the policy) to approve.
#[derive(Debug, Clone)]
pub struct ApprovalRequest {
    /// The task that waits.
    pub task_id: TaskId,
    /// The step that waits; its intent must be recorded already.
    pub step_id: StepId,
    /// Which request of that step (1, 2, …). Same key → same approval.
    pub attempt: u32,
    /// What is asked.
    pub kind: ApprovalKind,
    /// The question in words a human can judge.
    pub summary: String,
    /// Command, files, diff excerpt, reason: shown to the decider.
    pub details: serde_json::Value,
    /// What the call does, for the auto-approve rules (recorded in `details.subject`).
    pub subject: Subject,
}

/// Optional guards a decider sends with a decision: if given, they must name the
/// approval's own task and project, or nothing is recorded.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    /// The task the decider believes the approval belongs to.
    pub task_id: Option<String>,
    /// The project the decider believes the approval belongs to.
    pub project_id: Option<String>,
}

/// What [`App::decide`] and [`App::withdraw`] return.
#[derive(Debug, Clone, PartialEq)]
pub struct Decided {
    /// The approval as recorded now.
    pub approval: api::Approval,
    /// True if this call recorded the settle event; false if another came first
    /// (the approval is returned unchanged).
    pub applied: bool,
}

/// How an approval ended, for the waiting agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Go ahead.
    Approved,
    /// Do not.
    Denied,
    /// Nobody decided in time: counts as denied.
    Expired,
    /// The asker moved on, or the task ended.
    Withdrawn,
}

/// What [`App::wait_for_decision`] returns.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolution {
    /// The approval as recorded.
    pub approval: api::Approval,
    /// How it ended.
    pub outcome: Outcome,
}

impl Resolution {
    /// Whether the agent may go ahead.
    pub fn approved(&self) -> bool {
        self.outcome == Outcome::Approved
    }

    /// The words the agent is told: who decided and their note, or why it expired.
    pub fn reason(&self) -> String {
        let who = self
            .approval
            .decided_by
            .as_ref()
            .map(|d| format!("{} ({})", d.name, d.via))
            .unwrap_or_else(|| "gaffer".into());
        let note = self.approval.note.clone().unwrap_or_default();
        match self.outcome {
            Outcome::Approved => format!("approved by {who}{}", suffix(&note)),
            Outcome::Denied => format!("denied by {who}{}", suffix(&note)),
            Outcome::Expired => format!("denied: {note}"),
            Outcome::Withdrawn => format!("withdrawn: {note}"),
        }
    }
}

fn suffix(note: &str) -> String {
    if note.is_empty() {
        String::new()
    } else {
        format!(": {note}")
    }
}

fn outcome_of(state: &str) -> Option<Outcome> {
    match state {
        "approved" => Some(Outcome::Approved),
        "denied" => Some(Outcome::Denied),
        "expired" => Some(Outcome::Expired),
        "withdrawn" => Some(Outcome::Withdrawn),
        _ => None,
    }
}

fn parse_state(s: &str) -> Option<ApprovalState> {
    ApprovalState::ALL.into_iter().find(|x| x.as_str() == s)
}

/// Whether `e` may settle approval `id` of task `task`.
fn settles(e: &RecordedEvent, task: &str, id: &str) -> bool {
    if e.stream_id != task {
        return false;
    }
    match &e.event {
        Event::ApprovalDecided { approval_id, .. }
        | Event::ApprovalExpired { approval_id, .. }
        | Event::ApprovalWithdrawn { approval_id, .. } => approval_id.as_str() == id,
        Event::TaskDone { .. }
        | Event::TaskFailed { .. }
        | Event::TaskCancelled { .. }
        | Event::TaskBlocked { .. }
        | Event::TaskDependencyFailed { .. } => true,
        _ => false,
    }
}

/// A pending approval's row after its own settle event `e`, exactly as the
/// reducer and projection make it; `None` for any other event.
fn settled_row(row: &ApprovalRow, e: &RecordedEvent) -> Option<ApprovalRow> {
    let mut r = row.clone();
    match &e.event {
        Event::ApprovalDecided {
            approval_id,
            decision,
            by,
            note,
            for_task,
            ..
        } if approval_id.as_str() == r.id => {
            r.for_task = *for_task;
            r.state = match decision {
                Decision::Approve => ApprovalState::Approved,
                Decision::Deny => ApprovalState::Denied,
            }
            .as_str()
            .to_owned();
            r.decided_by = Some(serde_json::to_string(by).ok()?);
            r.note = note.clone();
        }
        Event::ApprovalExpired {
            approval_id,
            reason,
        } if approval_id.as_str() == r.id => {
            r.state = ApprovalState::Expired.as_str().to_owned();
            r.decided_by = None;
            r.note = Some(reason.clone());
        }
        Event::ApprovalWithdrawn {
            approval_id,
            reason,
        } if approval_id.as_str() == r.id => {
            r.state = ApprovalState::Withdrawn.as_str().to_owned();
            r.decided_by = None;
            r.note = Some(reason.clone());
        }
        _ => return None,
    }
    r.decided_at = Some(e.at);
    Some(r)
}

/// A lost race worth re-reading after: another writer moved the stream, or the
/// reducer saw the approval (or task) settled by someone else.
fn raced(e: &StoreError) -> bool {
    match e {
        StoreError::Conflict { .. } => true,
        StoreError::Rejected { reason, .. } => matches!(
            reason,
            Rejected::ApprovalSettled { .. }
                | Rejected::DuplicateApprovalKey { .. }
                | Rejected::TaskFinished { .. }
        ),
        StoreError::Constraint(_) => true,
        _ => false,
    }
}

impl App {
    /// Ask for an approval, keyed by `(task, step, attempt)`. If that key is
    /// already recorded, the recorded approval is returned as it is now (pending
    /// or settled) and nothing is appended. Otherwise the policy is judged once
    /// and the approval is recorded; if an auto rule or the project toggle
    /// approves it, the decision (by a `policy` actor) is appended in the same
    /// batch, so the returned approval is already `approved`.
    ///
    /// Errors: unknown task (404), empty summary / attempt 0 / unknown step (400),
    /// task already final (409 `task_finished`).
    pub async fn request_approval(&self, req: ApprovalRequest) -> Result<api::Approval> {
        if req.summary.trim().is_empty() {
            return Err(AppError::invalid("summary", "`summary` must not be empty"));
        }
        if req.attempt == 0 {
            return Err(AppError::invalid("attempt", "`attempt` starts at 1"));
        }
        let stream = StreamId::from(&req.task_id);
        for _ in 0..MAX_TRIES {
            let view = self.task_view(req.task_id.as_str()).await?;
            if let Some(existing) = view
                .approvals
                .iter()
                .find(|a| a.step_id == req.step_id.as_str() && a.attempt == i64::from(req.attempt))
            {
                // One key is one question: the same kind asked again (after a crash)
                // finds its answer; another kind never takes it, so no count of
                // rule-approved requests reaches a question only a person answers.
                if existing.kind != req.kind.as_str() {
                    return Err(AppError::conflict(
                        "approval_key_taken",
                        format!(
                            "step `{}` of task `{}` already asked a {} question with key {}; a {} question cannot take its answer",
                            req.step_id, req.task_id, existing.kind, req.attempt, req.kind.as_str()
                        ),
                    ));
                }
                self.remember(existing);
                return Ok(self.wire(existing).await);
            }
            if is_final(&view.task.stage) {
                return Err(AppError::conflict(
                    "task_finished",
                    format!(
                        "task `{}` is {}; it asks nothing more",
                        req.task_id, view.task.stage
                    ),
                ));
            }
            if !view.steps.iter().any(|s| s.step_id == req.step_id.as_str()) {
                return Err(AppError::invalid(
                    "step_id",
                    format!(
                        "step `{}` is not recorded in task `{}`; record its intent first",
                        req.step_id, req.task_id
                    ),
                ));
            }
            let project = self.project_row(&view.task.project_id).await?;
            let now = now_ms();
            let task_auto = serde_json::from_str::<gaffer_core::TaskOptions>(&view.task.options)
                .map(|o| o.auto_approve)
                .unwrap_or(false);
            // Agents name files by absolute path; rules speak of paths in the
            // worktree. Only a path that is physically inside the task's worktree
            // (or the project) becomes relative; anything else stays absolute and
            // matches no path rule.
            let mut roots: Vec<std::path::PathBuf> = view
                .steps
                .iter()
                .find(|s| s.step_id == "worktree")
                .and_then(|s| s.receipt.as_deref())
                .and_then(|r| serde_json::from_str::<serde_json::Value>(r).ok())
                .and_then(|r| {
                    r.get("path")
                        .and_then(|p| p.as_str())
                        .map(std::path::PathBuf::from)
                })
                .into_iter()
                .collect();
            roots.push(std::path::PathBuf::from(&project.path));
            let mut subject = req.subject.clone();
            subject.paths = subject
                .paths
                .iter()
                .map(|p| policy::relative_to(p, &roots))
                .collect();
            let judged = self.policy().judge(
                &project.name,
                project.auto_approve,
                task_auto,
                req.kind,
                &subject,
                now,
            );
            let mut details = match req.details.clone() {
                serde_json::Value::Object(m) => m,
                serde_json::Value::Null => serde_json::Map::new(),
                other => {
                    let mut m = serde_json::Map::new();
                    m.insert("value".into(), other);
                    m
                }
            };
            details.insert(
                "subject".into(),
                serde_json::to_value(&req.subject).unwrap_or_default(),
            );
            details.insert(
                "policy".into(),
                serde_json::json!({
                    "expires_at": judged.expires_at,
                    "on_expiry": "deny",
                    "deciders": judged.deciders,
                    "auto": judged.auto,
                }),
            );
            let details = serde_json::Value::Object(details);
            // Allowed for this task already: a grant of this task for the same call.
            let grant = if judged.auto.is_none() && req.kind == ApprovalKind::Tool {
                view.approvals.iter().find(|g| {
                    g.for_task
                        && g.kind == ApprovalKind::Tool.as_str()
                        && g.state == ApprovalState::Approved.as_str()
                        && gaffer_core::same_tool_call(&convert::approval(g).details, &details)
                })
            } else {
                None
            };
            let id = ApprovalId(new_id("ap"));
            let mut events = vec![NewEvent {
                at: now,
                event: Event::ApprovalRequested {
                    approval_id: id.clone(),
                    step_id: req.step_id.clone(),
                    attempt: req.attempt,
                    kind: req.kind,
                    summary: req.summary.trim().to_owned(),
                    details,
                },
            }];
            if let Some(rule) = &judged.auto {
                events.push(NewEvent {
                    at: now,
                    event: Event::ApprovalDecided {
                        approval_id: id.clone(),
                        decision: Decision::Approve,
                        by: Actor::policy(rule),
                        note: Some(format!("auto-approved by {rule}")),
                        for_task: false,
                        grant: None,
                    },
                });
            } else if let Some(g) = grant {
                let granted_by = convert::approval(g)
                    .decided_by
                    .map(|d| format!("{} via {}", d.name, d.via))
                    .unwrap_or_else(|| "a person".into());
                let rule = format!("allowed for this task by {granted_by}");
                events.push(NewEvent {
                    at: now,
                    event: Event::ApprovalDecided {
                        approval_id: id.clone(),
                        decision: Decision::Approve,
                        by: Actor::policy(&rule),
                        note: Some(format!(
                            "auto-approved: the same command was {rule} ({})",
                            g.id
                        )),
                        for_task: false,
                        grant: Some(ApprovalId(g.id.clone())),
                    },
                });
            }
            match self.journal().append(&stream, view.head_seq, events).await {
                Ok(_) => {
                    self.remember_home(id.as_str(), req.task_id.as_str(), &project.id);
                    return self.approval(id.as_str()).await;
                }
                Err(e) if raced(&e) => continue,
                Err(StoreError::Rejected {
                    reason: Rejected::UnknownStep(s),
                    ..
                }) => {
                    return Err(AppError::invalid(
                        "step_id",
                        format!("step `{s}` is not recorded"),
                    ))
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(AppError::conflict(
            "conflict",
            "the task is changing too fast; try again",
        ))
    }

    /// Wait until approval `id` is settled, woken by the journal's
    /// committed-event broadcast (no polling). When its `expires_at` passes
    /// first, records `approval_expired` (counts as denied, with the reason the
    /// agent is shown). Returns at once if it is already settled.
    pub async fn wait_for_decision(&self, id: &str) -> Result<Resolution> {
        // Subscribe before reading, so a decision between the read and the wait is seen.
        let mut rx = self.journal().subscribe();
        let (task_id, _) = self.home(id).await?;
        loop {
            let row = self.approval_row(&task_id, id).await?;
            if let Some(outcome) = outcome_of(&row.state) {
                return Ok(Resolution {
                    approval: self.wire(&row).await,
                    outcome,
                });
            }
            let a = convert::approval(&row);
            let deadline = a.expires_at.unwrap_or(i64::MAX);
            let now = now_ms();
            if now >= deadline {
                self.expire(&task_id, id).await?;
                continue;
            }
            let wait = Duration::from_millis(
                u64::try_from(deadline - now)
                    .unwrap_or(u64::MAX)
                    .min(86_400_000 * 365),
            );
            let sleep = tokio::time::sleep(wait);
            tokio::pin!(sleep);
            loop {
                tokio::select! {
                    got = rx.recv() => match got {
                        Ok(e) if settles(&e, &task_id, id) => {
                            // The settle event of this very approval says all the
                            // projection would: answer without another read.
                            if let Some(done) = settled_row(&row, &e) {
                                if let Some(outcome) = outcome_of(&done.state) {
                                    return Ok(Resolution { approval: self.wire(&done).await, outcome });
                                }
                            }
                            break;
                        }
                        Ok(_) => {}
                        Err(RecvError::Lagged(_)) => break,
                        Err(RecvError::Closed) => {
                            return Err(AppError::conflict("closed", "the journal closed while waiting"))
                        }
                    },
                    () = &mut sleep => break,
                }
            }
        }
    }

    /// Record a person's decision on approval `id`. The first decision wins; a
    /// later one gets the recorded approval back unchanged with `applied = false`.
    /// Refused with nothing recorded: an unknown id (404), a `scope` naming another
    /// task or project (409 `wrong_scope`), an actor who is not a person or not a
    /// listed decider (403), a note over 4000 bytes (400).
    pub async fn decide(
        &self,
        id: &str,
        decision: Decision,
        by: Actor,
        note: Option<String>,
        scope: Scope,
    ) -> Result<Decided> {
        self.record_decision(id, decision, by, note, scope, false)
            .await
    }

    /// "Allow for this task": approve `id` as [`App::decide`] does, and grant the
    /// same call for the rest of its task — a later `tool` approval of that task
    /// asking the same tool and exactly the same command (see
    /// [`gaffer_core::same_tool_call`]) is approved when it is asked, by a policy
    /// actor naming `by` ("allowed for this task by ann via discord"). Never
    /// another task, never another kind.
    ///
    /// Refused with nothing recorded (400 naming `for_task`): an approval that is
    /// not a `tool` approval, or names no command. Otherwise as [`App::decide`].
    pub async fn allow_for_task(
        &self,
        id: &str,
        by: Actor,
        note: Option<String>,
        scope: Scope,
    ) -> Result<Decided> {
        self.record_decision(id, Decision::Approve, by, note, scope, true)
            .await
    }

    async fn record_decision(
        &self,
        id: &str,
        decision: Decision,
        by: Actor,
        note: Option<String>,
        scope: Scope,
        for_task: bool,
    ) -> Result<Decided> {
        if by.kind != ActorKind::User {
            return Err(AppError::Forbidden("only a person decides through this call; policies decide when the approval is created".into()));
        }
        if note.as_ref().is_some_and(|n| n.len() > MAX_NOTE_BYTES) {
            return Err(AppError::invalid(
                "note",
                format!("`note` is longer than {MAX_NOTE_BYTES} bytes"),
            ));
        }
        let note = note
            .map(|n| self.redacted(n.trim()))
            .filter(|n| !n.is_empty());
        let (task_id, project_id) = self.home(id).await?;
        if let Some(t) = scope.task_id.as_deref().filter(|t| *t != task_id) {
            return Err(AppError::conflict(
                "wrong_scope",
                format!(
                    "approval `{id}` belongs to task `{task_id}`, not `{t}`; nothing was recorded"
                ),
            ));
        }
        if let Some(p) = scope.project_id.as_deref().filter(|p| *p != project_id) {
            return Err(AppError::conflict(
                "wrong_scope",
                format!("approval `{id}` belongs to project `{project_id}`, not `{p}`; nothing was recorded"),
            ));
        }
        if for_task {
            let a = self.wire(&self.approval_row(&task_id, id).await?).await;
            if a.kind != ApprovalKind::Tool.as_str() {
                return Err(AppError::invalid(
                    "for_task",
                    format!("`for_task` is only for tool approvals; approval `{id}` is a {} approval (approve it without `for_task`)", a.kind),
                ));
            }
            if gaffer_core::granted_command(&a.details).is_none() {
                return Err(AppError::invalid(
                    "for_task",
                    format!("approval `{id}` names no command to allow again; approve it without `for_task`"),
                ));
            }
        }
        let event = Event::ApprovalDecided {
            approval_id: ApprovalId(id.to_owned()),
            decision,
            by: by.clone(),
            note,
            for_task,
            grant: None,
        };
        self.settle(&task_id, id, event, Some(&by)).await
    }

    /// The asker moved on (answered locally, cancelled, timed out on its side):
    /// settle a pending approval as `withdrawn`, once. A settled approval is
    /// returned unchanged with `applied = false`.
    pub async fn withdraw(&self, id: &str, reason: &str) -> Result<Decided> {
        let (task_id, _) = self.home(id).await?;
        let event = Event::ApprovalWithdrawn {
            approval_id: ApprovalId(id.to_owned()),
            reason: if reason.trim().is_empty() {
                "the asker moved on".into()
            } else {
                self.redacted(reason.trim())
            },
        };
        self.settle(&task_id, id, event, None).await
    }

    /// Expire every pending approval whose `expires_at` has passed. Returns how
    /// many this call expired. [`App::run_expiry`] calls it at each deadline.
    pub async fn expire_due(&self) -> Result<usize> {
        let now = now_ms();
        let mut n = 0;
        for a in self.approvals(Some("pending")).await? {
            if a.expires_at.is_some_and(|e| e <= now)
                && self.expire(&a.task_id, &a.id).await?.applied
            {
                n += 1;
            }
        }
        Ok(n)
    }

    /// Expire approvals at their deadlines, for approvals nobody waits on (after a
    /// restart). Sleeps until the next deadline or the next committed event,
    /// whichever is first; never polls. Runs until the journal closes.
    pub async fn run_expiry(&self) -> Result<()> {
        let mut rx = self.journal().subscribe();
        loop {
            self.expire_due().await?;
            let next = self
                .approvals(Some("pending"))
                .await?
                .iter()
                .filter_map(|a| a.expires_at)
                .min();
            let wait = next
                .map(|n| Duration::from_millis(u64::try_from(n - now_ms()).unwrap_or(0)))
                .unwrap_or(Duration::from_secs(86_400));
            let deadline = tokio::time::Instant::now() + wait;
            let sleep = tokio::time::sleep_until(deadline);
            tokio::pin!(sleep);
            // Only a new approval can bring the next deadline closer; its
            // deadline is in its own event, so no scan is needed until a timer fires.
            loop {
                tokio::select! {
                    got = rx.recv() => match got {
                        Ok(e) => {
                            if let Event::ApprovalRequested { details, .. } = &e.event {
                                if let Some(at) = details.pointer("/policy/expires_at").and_then(serde_json::Value::as_i64) {
                                    let due = tokio::time::Instant::now()
                                        + Duration::from_millis(u64::try_from(at - now_ms()).unwrap_or(0));
                                    if due < sleep.deadline() {
                                        sleep.as_mut().reset(due);
                                    }
                                }
                            }
                        }
                        Err(RecvError::Lagged(_)) => break,
                        Err(RecvError::Closed) => return Ok(()),
                    },
                    () = &mut sleep => break,
                }
            }
        }
    }

    /// Every approval, newest first; only those in `state` when given.
    pub async fn approvals(&self, state: Option<&str>) -> Result<Vec<api::Approval>> {
        if let Some(s) = state {
            if parse_state(s).is_none() {
                return Err(AppError::invalid(
                    "state",
                    format!("`state` `{s}` is unknown; use pending, approved, denied, expired or withdrawn"),
                ));
            }
        }
        let rows = self
            .journal()
            .approvals(&ApprovalFilter {
                state: state.map(str::to_owned),
                id: None,
            })
            .await?;
        for r in &rows {
            self.remember(r);
        }
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            out.push(self.wire(r).await);
        }
        Ok(out)
    }

    /// One approval by id.
    pub async fn approval(&self, id: &str) -> Result<api::Approval> {
        let (task_id, _) = self.home(id).await?;
        Ok(self.wire(&self.approval_row(&task_id, id).await?).await)
    }

    async fn expire(&self, task_id: &str, id: &str) -> Result<Decided> {
        let row = self.approval_row(task_id, id).await?;
        let expired_after = convert::approval(&row)
            .expires_at
            .map(|e| (e - row.requested_at) / 1000)
            .unwrap_or(0);
        let event = Event::ApprovalExpired {
            approval_id: ApprovalId(id.to_owned()),
            reason: format!(
                "nobody decided within {}; denied by default",
                human_secs(expired_after)
            ),
        };
        self.settle(task_id, id, event, None).await
    }

    /// Append one settle event for `id` unless it is already settled.
    async fn settle(
        &self,
        task_id: &str,
        id: &str,
        event: Event,
        by: Option<&Actor>,
    ) -> Result<Decided> {
        let stream = StreamId(task_id.to_owned());
        for _ in 0..MAX_TRIES {
            let view = self.task_view(task_id).await?;
            let row =
                view.approvals
                    .iter()
                    .find(|a| a.id == id)
                    .ok_or_else(|| AppError::NotFound {
                        what: "approval",
                        id: id.to_owned(),
                    })?;
            if row.state != "pending" {
                return Ok(Decided {
                    approval: self.wire(row).await,
                    applied: false,
                });
            }
            if let Some(by) = by {
                let deciders = convert::approval(row)
                    .details
                    .pointer("/policy/deciders")
                    .and_then(|d| d.as_array().cloned())
                    .unwrap_or_default();
                if !deciders.is_empty()
                    && !deciders
                        .iter()
                        .any(|d| d.as_str() == Some(by.name.as_str()))
                {
                    return Err(AppError::Forbidden(format!(
                        "`{}` may not decide approval `{id}`; its project's deciders are {}",
                        by.name,
                        deciders
                            .iter()
                            .filter_map(|d| d.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )));
                }
            }
            let new = NewEvent::now(event.clone());
            let at = new.at;
            match self
                .journal()
                .append(&stream, view.head_seq, vec![new])
                .await
            {
                Ok(_) => {
                    let recorded = RecordedEvent {
                        pos: 0,
                        stream_id: task_id.to_owned(),
                        seq: 0,
                        at,
                        event: event.clone(),
                        hash: String::new(),
                    };
                    // The row as the projection now holds it, without reading it back.
                    let row = match settled_row(row, &recorded) {
                        Some(r) => r,
                        None => self.approval_row(task_id, id).await?,
                    };
                    return Ok(Decided {
                        approval: self.wire(&row).await,
                        applied: true,
                    });
                }
                Err(e) if raced(&e) => continue,
                Err(StoreError::Rejected {
                    reason: Rejected::GrantRefused { reason, .. },
                    ..
                }) => return Err(AppError::invalid("for_task", reason)),
                Err(e) => return Err(e.into()),
            }
        }
        Err(AppError::conflict(
            "conflict",
            "the approval is contended; try again",
        ))
    }

    /// The task's view, or `NotFound` naming it.
    pub(crate) async fn task_view(&self, task_id: &str) -> Result<TaskView> {
        self.journal()
            .task(task_id)
            .await?
            .ok_or_else(|| AppError::NotFound {
                what: "task",
                id: task_id.to_owned(),
            })
    }

    async fn approval_row(&self, task_id: &str, id: &str) -> Result<ApprovalRow> {
        self.task_view(task_id)
            .await?
            .approvals
            .into_iter()
            .find(|a| a.id == id)
            .ok_or_else(|| AppError::NotFound {
                what: "approval",
                id: id.to_owned(),
            })
    }

    /// The wire form of a row, with its project's name (names never change: cached).
    async fn wire(&self, r: &ApprovalRow) -> api::Approval {
        let mut a = convert::approval(r);
        let cached = self
            .inner
            .names
            .lock()
            .ok()
            .and_then(|n| n.get(&r.project_id).cloned());
        a.project = match cached {
            Some(n) => n,
            None => {
                let all = self.journal().projects().await.unwrap_or_default();
                if let Ok(mut names) = self.inner.names.lock() {
                    for p in &all {
                        names.insert(p.id.clone(), p.name.clone());
                    }
                }
                all.into_iter()
                    .find(|p| p.id == r.project_id)
                    .map(|p| p.name)
                    .unwrap_or_default()
            }
        };
        a
    }

    fn remember(&self, r: &ApprovalRow) {
        self.remember_home(&r.id, &r.task_id, &r.project_id);
    }

    fn remember_home(&self, id: &str, task: &str, project: &str) {
        if let Ok(mut h) = self.inner.homes.lock() {
            if h.len() > 100_000 {
                h.clear();
            }
            h.insert(id.to_owned(), (task.to_owned(), project.to_owned()));
        }
    }

    /// The task and project of approval `id` (immutable facts, cached).
    async fn home(&self, id: &str) -> Result<(String, String)> {
        if let Some(h) = self
            .inner
            .homes
            .lock()
            .ok()
            .and_then(|h| h.get(id).cloned())
        {
            return Ok(h);
        }
        let rows = self
            .journal()
            .approvals(&ApprovalFilter {
                state: None,
                id: Some(id.to_owned()),
            })
            .await?;
        for r in &rows {
            self.remember(r);
        }
        rows.first()
            .map(|r| (r.task_id.clone(), r.project_id.clone()))
            .ok_or_else(|| AppError::NotFound {
                what: "approval",
                id: id.to_owned(),
            })
    }
}

fn human_secs(s: i64) -> String {
    match s {
        s if s < 120 => format!("{s}s"),
        s if s < 7200 => format!("{}m", s / 60),
        s => format!("{}h", s / 3600),
    }
}
