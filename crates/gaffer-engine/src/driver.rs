//! The driver: reads a task from the journal, asks [`decide`] what is next, does it,
//! records the outcome, and repeats until the task is over or must wait.
//!
//! Every effect is a step whose intent is in the journal before it runs. The
//! receipts of finished steps are never recomputed, so a restart picks up exactly
//! where the journal says the task is.

use crate::agents::AgentFactory;
use crate::error::{EngineError, Result, StepFailure};
use crate::pipeline::{decide, plan_of, Limits, Next, StepKind};
use crate::prompts;
use gaffer_agents::{
    AgentEvent, AgentSession, ApprovalGate, Mode, PermissionDecision, PermissionRequest, Redactor,
    StartOptions, TurnStatus, Usage,
};
use gaffer_app::{App, ApprovalRequest, Subject};
use gaffer_core::{
    Actor, ApprovalKind, Event, Intent, ProjectState, Rejected, Role, SessionId, Stage, Step,
    StepId, StreamId, StreamState, TaskId, TaskState,
};
use gaffer_forge::{slug, Repo, Worktree};
use gaffer_protocol::contracts::{ContractError, Plan, Ruling, Verdict};
use gaffer_store::{Journal, NewEvent, StoreError};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The tokenizer context selection counts its budget in.
pub(crate) const CONTEXT_TOKENIZER: gaffer_index::TokenizerKind =
    gaffer_index::TokenizerKind::Cl100k;

/// How the engine runs tasks.
#[derive(Clone)]
pub struct Settings {
    /// Worktrees live under `<data_dir>/worktrees/<task id>`.
    pub data_dir: PathBuf,
    /// Agent, model and effort per role.
    pub roles: gaffer_config::Roles,
    /// Per-project overrides of `roles`, by project name.
    pub project_roles: std::collections::BTreeMap<String, gaffer_config::Roles>,
    /// Loop bounds.
    pub limits: Limits,
    /// Longest a check command may run.
    pub check_timeout: Duration,
    /// Secrets removed from check output and agent activity.
    pub redactor: Arc<Redactor>,
    /// Extra environment for agent processes (on top of gaffer's own and `GAFFER_*`).
    pub agent_env: std::collections::BTreeMap<String, String>,
    /// Where the project index keeps per-file facts between runs.
    pub index_cache: Arc<dyn gaffer_index::IndexCache>,
    /// Tokens of repository context given to each agent (files chosen for the task).
    pub context_budget: usize,
    /// How each project ships, by project name; a project without one keeps its
    /// task branches local.
    pub shipping: std::collections::BTreeMap<String, crate::Shipping>,
    /// Each project's task tracker, by project name.
    pub trackers: std::collections::BTreeMap<String, crate::Tracker>,
    /// How agent processes are confined (see `gaffer_agents::sandbox`).
    pub sandbox: gaffer_agents::sandbox::Sandbox,
}

impl Settings {
    /// Defaults for everything but where the data lives.
    pub fn new(data_dir: PathBuf) -> Self {
        Self {
            data_dir,
            roles: gaffer_config::Roles::default(),
            project_roles: Default::default(),
            limits: Limits::default(),
            check_timeout: Duration::from_secs(20 * 60),
            redactor: Arc::new(Redactor::default()),
            agent_env: Default::default(),
            index_cache: Arc::new(gaffer_index::MemoryCache::default()),
            context_budget: 8000,
            shipping: Default::default(),
            trackers: Default::default(),
            sandbox: Default::default(),
        }
    }
}

/// The engine: runs tasks through the pipeline.
#[derive(Clone)]
pub struct Engine {
    app: App,
    agents: Arc<dyn AgentFactory>,
    pub(crate) settings: Settings,
    /// The tasks [`Engine::work`] runs now, shared by every clone.
    pub(crate) held: Arc<std::sync::Mutex<std::collections::HashSet<String>>>,
}

impl Engine {
    /// An engine over the app service, making agents with `agents`.
    pub fn new(app: App, agents: Arc<dyn AgentFactory>, settings: Settings) -> Self {
        Self {
            app,
            agents,
            settings,
            held: Arc::default(),
        }
    }

    /// Whether `agent` names a backend that can be started here (the executable or
    /// API key is present); the error says what is missing.
    pub fn check_agent(&self, agent: &str) -> std::result::Result<(), String> {
        self.agents.backend(agent, None, None).map(|_| ())
    }

    /// The same engine over another app service (a fenced journal, say).
    pub(crate) fn with_app(&self, app: App) -> Self {
        Self {
            app,
            agents: self.agents.clone(),
            settings: self.settings.clone(),
            held: self.held.clone(),
        }
    }

    /// The app service it uses.
    pub fn app(&self) -> &App {
        &self.app
    }

    fn journal(&self) -> &Arc<dyn Journal> {
        self.app.journal()
    }

    /// Recovery for one task: its running steps are marked interrupted (the reducer
    /// then re-queues reads and idempotent steps and turns non-idempotent ones into
    /// `effect_unknown`). Returns whether the task is unfinished. Call it only while
    /// holding the task's lease: then no other process runs it.
    pub async fn recover_task(&self, id: &TaskId) -> Result<bool> {
        let Some((task, _)) = self.load(id).await? else {
            return Err(EngineError::Invalid(format!("task `{id}` does not exist")));
        };
        if task.stage.is_final() {
            return Ok(false);
        }
        let running: Vec<Event> = task
            .steps
            .values()
            .filter(|s| s.state == gaffer_core::StepState::Started)
            .map(|s| Event::StepInterrupted {
                step_id: s.id.clone(),
            })
            .collect();
        if !running.is_empty() {
            tracing::info!(task = %id, steps = running.len(), "marking interrupted steps");
            self.append(id, running).await?;
        }
        Ok(true)
    }

    /// Run a task until it is over (returns its final stage). `cancel` stops it
    /// cleanly: the agent is stopped, the worktree kept, the task cancelled.
    pub async fn run_task(&self, id: &TaskId, cancel: CancellationToken) -> Result<Stage> {
        // A cancellation recorded by anyone (API, another terminal) stops this run too.
        let cancel = cancel.child_token();
        let mut events = self.journal().subscribe();
        let watch = {
            let token = cancel.clone();
            let id = id.0.clone();
            tokio::spawn(async move {
                loop {
                    match events.recv().await {
                        Ok(e)
                            if e.stream_id == id
                                && matches!(e.event, Event::TaskCancelled { .. }) =>
                        {
                            token.cancel();
                            return;
                        }
                        Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                    }
                }
            })
        };
        let result = self.drive(id, &cancel).await;
        watch.abort();
        result
    }

    async fn drive(&self, id: &TaskId, cancel: &CancellationToken) -> Result<Stage> {
        loop {
            if cancel.is_cancelled() {
                return self.cancel(id).await;
            }
            let Some((task, head)) = self.load(id).await? else {
                return Err(EngineError::Invalid(format!("task `{id}` does not exist")));
            };
            let next = decide(&task, &self.settings.limits);
            tracing::debug!(task = %id, ?next, "next");
            let outcome = match next {
                Next::Finished => return Ok(task.stage),
                Next::Record(events) => self.record_decision(id, head, events).await,
                Next::Run(step) => self.run_step(&task, &step, cancel).await,
                Next::Reconcile(step) => self.reconcile(&task, &step).await,
                Next::AskHuman(step) => self.ask_human(&task, &step, cancel).await,
                Next::Wait => {
                    let step = task
                        .frontier()
                        .in_flight
                        .first()
                        .map(|s| s.0.clone())
                        .unwrap_or_default();
                    return Err(EngineError::Busy(step));
                }
            };
            match outcome {
                Ok(()) => {}
                Err(EngineError::Cancelled) => return self.cancel(id).await,
                Err(EngineError::Finished(_)) => {}
                Err(e) => return Err(e),
            }
        }
    }

    async fn cancel(&self, id: &TaskId) -> Result<Stage> {
        // The engine does not know who pressed Ctrl-C; a cancellation recorded
        // elsewhere (API, CLI) already names its person and wins over this one.
        match self
            .append(
                id,
                vec![Event::TaskCancelled {
                    by: Actor::system("engine"),
                    reason: Some("the run was stopped (Ctrl-C)".into()),
                }],
            )
            .await
        {
            Ok(()) | Err(EngineError::Finished(_)) => {}
            Err(e) => return Err(e),
        }
        Ok(self
            .load(id)
            .await?
            .map_or(Stage::Cancelled, |(t, _)| t.stage))
    }

    /// The task's state and head, replayed from its events.
    pub(crate) async fn load(&self, id: &TaskId) -> Result<Option<(TaskState, i64)>> {
        let events = self.journal().stream_events(&StreamId::from(id), 0).await?;
        let head = events.last().map_or(0, |e| e.seq);
        let state =
            StreamState::replay(events.iter().map(|e| (e.at, &e.event))).map_err(|(i, r)| {
                EngineError::Invalid(format!("task `{id}` event {} does not replay: {r}", i + 1))
            })?;
        match state {
            Some(StreamState::Task(t)) => Ok(Some((*t, head))),
            Some(StreamState::Project(_)) => Err(EngineError::Invalid(format!(
                "`{id}` is a project, not a task"
            ))),
            None => Ok(None),
        }
    }

    pub(crate) async fn project(&self, task: &TaskState) -> Result<ProjectState> {
        match self
            .journal()
            .state(&StreamId::from(&task.project_id))
            .await?
        {
            Some(StreamState::Project(p)) => Ok(p),
            _ => Err(EngineError::Invalid(format!(
                "project `{}` of task `{}` does not exist",
                task.project_id, task.id
            ))),
        }
    }

    /// Append a decision made on the state at `head`: if anything was appended
    /// since, nothing is written and the next loop decides again.
    async fn record_decision(&self, id: &TaskId, head: i64, events: Vec<Event>) -> Result<()> {
        let events = events.into_iter().map(NewEvent::now).collect();
        match self
            .journal()
            .append(&StreamId::from(id), head, events)
            .await
        {
            Ok(_) | Err(StoreError::Conflict { .. }) => Ok(()),
            Err(StoreError::Rejected {
                reason: Rejected::TaskFinished { .. },
                ..
            }) => Err(EngineError::Finished(id.0.clone())),
            Err(e) => Err(e.into()),
        }
    }

    /// Append facts (a step's outcome, agent activity) at whatever the head is now:
    /// the reducer re-checks them against the current state.
    pub(crate) async fn append(&self, id: &TaskId, events: Vec<Event>) -> Result<()> {
        let stream = StreamId::from(id);
        for _ in 0..64 {
            let head = self.journal().head(&stream).await?;
            let batch = events.iter().cloned().map(NewEvent::now).collect();
            match self.journal().append(&stream, head, batch).await {
                Ok(_) => return Ok(()),
                Err(StoreError::Conflict { .. }) => continue,
                Err(StoreError::Rejected {
                    reason: Rejected::TaskFinished { .. },
                    ..
                }) => return Err(EngineError::Finished(id.0.clone())),
                Err(e) => return Err(e.into()),
            }
        }
        Err(EngineError::Invalid(format!(
            "task `{id}` keeps changing; could not append"
        )))
    }

    async fn run_step(
        &self,
        task: &TaskState,
        id: &StepId,
        cancel: &CancellationToken,
    ) -> Result<()> {
        let step = &task.steps[id];
        let Some(kind) = StepKind::of(id) else {
            return Err(EngineError::Invalid(format!("unknown step `{id}`")));
        };
        self.append(
            &task.id,
            vec![Event::StepStarted {
                step_id: id.clone(),
            }],
        )
        .await?;
        let started = Instant::now();
        let result = self.execute(task, step, kind, cancel).await;
        tracing::info!(task = %task.id, step = %id, ok = result.is_ok(), ms = started.elapsed().as_millis() as u64, "step finished");
        match result {
            Ok(receipt) => {
                self.append(
                    &task.id,
                    vec![Event::StepCompleted {
                        step_id: id.clone(),
                        receipt,
                    }],
                )
                .await
            }
            Err(Failure::Step(StepFailure(error))) => {
                let error = self.settings.redactor.redact(&error);
                self.append(
                    &task.id,
                    vec![Event::StepFailed {
                        step_id: id.clone(),
                        error,
                    }],
                )
                .await
            }
            Err(Failure::Cancelled) => {
                let _ = self
                    .append(
                        &task.id,
                        vec![Event::StepFailed {
                            step_id: id.clone(),
                            error: "cancelled".into(),
                        }],
                    )
                    .await;
                Err(EngineError::Cancelled)
            }
            Err(Failure::Engine(e)) => Err(e),
        }
    }

    async fn execute(
        &self,
        task: &TaskState,
        step: &Step,
        kind: StepKind,
        cancel: &CancellationToken,
    ) -> Result<Value, Failure> {
        match kind {
            StepKind::Worktree => self.make_worktree(task).await,
            StepKind::Plan => self.plan(task, step, cancel).await,
            StepKind::PlanApproval => self.plan_approval(task, step).await,
            StepKind::Code(n) => {
                let plan = plan_of(task).ok_or_else(|| fail("the plan is missing"))?;
                let sub = plan
                    .subtasks
                    .get(n as usize - 1)
                    .ok_or_else(|| fail(format!("the plan has no subtask {n}")))?;
                let assignment = format!(
                    "Your assignment now: subtask {n} of {}: {}\n{}\nFiles: {}\nDone when: {}",
                    plan.subtasks.len(),
                    sub.title,
                    sub.description,
                    if sub.files.is_empty() {
                        "(not listed)".into()
                    } else {
                        sub.files.join(", ")
                    },
                    sub.acceptance
                );
                self.owner_turn(task, step, &assignment, cancel).await
            }
            StepKind::Fix(_) => {
                let assignment = fix_assignment(&step.input);
                self.owner_turn(task, step, &assignment, cancel).await
            }
            StepKind::Commit(n) => {
                let plan = plan_of(task).ok_or_else(|| fail("the plan is missing"))?;
                let title = plan
                    .subtasks
                    .get(n as usize - 1)
                    .map_or_else(|| format!("subtask {n}"), |s| s.title.clone());
                self.commit(task, step, &title)
            }
            StepKind::CommitFix(n) => {
                let reason = task
                    .steps
                    .get(&StepKind::Fix(n).id())
                    .and_then(|s| s.input.get("reason"))
                    .and_then(Value::as_str)
                    .unwrap_or("review");
                self.commit(task, step, &format!("Address {reason} feedback ({n})"))
            }
            StepKind::Review(_) => self.review(task, step, cancel).await,
            StepKind::Arbiter(_) => self.arbitrate(task, step, cancel).await,
            StepKind::Escalation(_) => self.escalation(task, step).await,
            StepKind::Check(_) => self.check(task).await,
            StepKind::Ship => self.ship(task).await,
            StepKind::TrackerOpen => self.tracker_open(task).await,
            StepKind::ShipApproval => self.ship_approval(task, step).await,
            StepKind::Push(_) => self.push(task, step).await,
            StepKind::PullRequest => self.pull_request(task, step).await,
            StepKind::Ci(n) => self.ci(task, step, n, cancel).await,
            StepKind::Report => self.report(task).await,
        }
    }

    pub(crate) fn worktree(&self, task: &TaskState) -> Result<Worktree, Failure> {
        let receipt = task
            .steps
            .get(&StepKind::Worktree.id())
            .and_then(|s| s.receipt.as_ref())
            .ok_or_else(|| fail("the worktree step has no receipt"))?;
        let field = |k: &str| {
            receipt
                .get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        Ok(Worktree {
            path: PathBuf::from(field("path")),
            branch: field("branch"),
            base: field("base"),
        })
    }

    async fn make_worktree(&self, task: &TaskState) -> Result<Value, Failure> {
        let project = self.project(task).await?;
        let repo = Repo::open(std::path::Path::new(&project.path))?;
        let base = match &task.options.base {
            Some(b) => b.clone(),
            None => repo.default_branch()?,
        };
        repo.ensure_clean(&base)?;
        let dir = self
            .settings
            .data_dir
            .join("worktrees")
            .join(task.id.as_str());
        let branch = format!("gaffer/{}-{}", task.id, slug(&task.request));
        let wt = repo.ensure_worktree(&dir, &branch, &base)?;
        // Whether the plan's subtasks become tracker tasks: decided once, here, so
        // `decide` reads it from the journal.
        let tracker = self.settings.trackers.contains_key(&project.name);
        Ok(
            json!({ "path": wt.path, "branch": wt.branch, "base": wt.base, "base_ref": base, "tracker": tracker }),
        )
    }

    fn commit(&self, task: &TaskState, step: &Step, title: &str) -> Result<Value, Failure> {
        let wt = self.worktree(task)?;
        let key = format!("{}/{}", task.id, step.id);
        // The request is the user's own text and may quote a secret: the message is
        // pushed and shown by the forge, and goes to git on its command line.
        let message = self.settings.redactor.redact(&format!(
            "{title}\n\ngaffer task {}: {}",
            task.id,
            prompts::head(&task.request, 500)
        ));
        let out = wt.commit_step(&message, &key)?;
        Ok(json!({ "sha": out.sha, "created": out.created }))
    }

    /// The agent and model for `role`: `--agent` for every role, else the project's
    /// override, else the configured role.
    fn role_agent(&self, task: &TaskState, project: &str, role: Role) -> RoleAgent {
        let roles = self
            .settings
            .project_roles
            .get(project)
            .unwrap_or(&self.settings.roles);
        let cfg = match role {
            Role::Planner => &roles.planner,
            Role::Owner => &roles.owner,
            Role::Reviewer => &roles.reviewer,
            Role::Arbiter => &roles.arbiter,
        };
        match &task.options.agent {
            Some(agent) => RoleAgent {
                agent: agent.clone(),
                model: None,
                effort: cfg.effort.clone(),
            },
            None => RoleAgent {
                agent: cfg.agent.clone(),
                model: cfg.model.clone(),
                effort: cfg.effort.clone(),
            },
        }
    }

    /// The files the context manager picks for `text` (or, for review, the changed
    /// files and their neighbourhood), with why, and their contents or signatures
    /// within the context budget. Context is a help, never a reason to fail a step.
    async fn repo_context(
        &self,
        wt: &Worktree,
        text: &str,
        changed: Option<Vec<String>>,
    ) -> String {
        let cache = self.settings.index_cache.clone();
        let root = wt.path.clone();
        let text = text.to_owned();
        let opts = gaffer_index::PackOptions {
            budget: self.settings.context_budget,
            ..Default::default()
        };
        let picked = tokio::task::spawn_blocking(move || {
            let tok = CONTEXT_TOKENIZER;
            match changed {
                Some(files) => {
                    gaffer_index::select_neighbourhood(&root, &files, &opts, tok, cache.as_ref())
                }
                None => gaffer_index::select_context(&root, &text, &opts, tok, cache.as_ref()),
            }
        })
        .await;
        let selection = match picked {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                tracing::warn!("context selection failed: {e}");
                return String::new();
            }
            Err(e) => {
                tracing::warn!("context selection stopped: {e}");
                return String::new();
            }
        };
        if selection.files.is_empty() {
            return String::new();
        }
        let list: Vec<String> = selection
            .files
            .iter()
            .map(|e| format!("- {} ({:?}): {}", e.path, e.mode, e.reasons.join("; ")))
            .collect();
        format!(
            "Files gaffer's context manager picked as a starting point (read others as you need):\n{}\n\n{}",
            list.join("\n"),
            selection.pack()
        )
    }

    async fn plan(
        &self,
        task: &TaskState,
        step: &Step,
        cancel: &CancellationToken,
    ) -> Result<Value, Failure> {
        let wt = self.worktree(task)?;
        let context = self.repo_context(&wt, &task.request, None).await;
        let prompt = prompts::fill(
            prompts::PLANNER,
            &[("request", &task.request), ("context", &context)],
        );
        let turn = self
            .agent_turn(
                task,
                step,
                Role::Planner,
                Mode::ReadOnly,
                &wt,
                prompt,
                cancel,
                |text| Plan::parse(text).map(|p| json!(p)),
            )
            .await?;
        match turn.parsed {
            Ok(plan) => Ok(
                json!({ "plan": plan, "usage": turn.usage, "text": prompts::head(&turn.text, 4000) }),
            ),
            Err(e) => Err(fail(format!(
                "the planner's answer is not a valid plan after a retry: {e}"
            ))),
        }
    }

    async fn plan_approval(&self, task: &TaskState, step: &Step) -> Result<Value, Failure> {
        let plan = plan_of(task).ok_or_else(|| fail("the plan is missing"))?;
        let summary = format!(
            "Approve the plan ({} subtask{}) for: {}",
            plan.subtasks.len(),
            if plan.subtasks.len() == 1 { "" } else { "s" },
            prompts::head(&task.request, 200)
        );
        let details = json!({ "plan": plan, "text": prompts::plan_text(&plan) });
        let resolution = self
            .ask(
                task,
                step,
                1,
                ApprovalKind::Plan,
                summary,
                details,
                Subject::default(),
            )
            .await?;
        if resolution.approved() {
            Ok(
                json!({ "approval": resolution.approval.id, "decision": "approve", "reason": resolution.reason() }),
            )
        } else {
            Err(fail(format!(
                "the plan was not approved ({})",
                resolution.reason()
            )))
        }
    }

    async fn escalation(&self, task: &TaskState, step: &Step) -> Result<Value, Failure> {
        let reason = step
            .input
            .get("reason")
            .and_then(Value::as_str)
            .unwrap_or("the arbiter asks a human");
        let summary = format!(
            "The arbiter escalates: {}. Approve to go on to the checks; deny to block the task.",
            prompts::head(reason, 300)
        );
        let diff = self
            .worktree(task)
            .ok()
            .and_then(|wt| wt.diff().ok())
            .unwrap_or_default();
        let details = json!({ "reason": reason, "diff": prompts::head(&diff, 8000) });
        let resolution = self
            .ask(
                task,
                step,
                1,
                ApprovalKind::Escalation,
                summary,
                details,
                Subject::default(),
            )
            .await?;
        if resolution.approved() {
            Ok(
                json!({ "approval": resolution.approval.id, "decision": "approve", "reason": resolution.reason() }),
            )
        } else {
            Err(fail(resolution.reason()))
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn ask(
        &self,
        task: &TaskState,
        step: &Step,
        attempt: u32,
        kind: ApprovalKind,
        summary: String,
        details: Value,
        subject: Subject,
    ) -> Result<gaffer_app::Resolution, Failure> {
        let approval = self
            .app
            .request_approval(ApprovalRequest {
                task_id: task.id.clone(),
                step_id: step.id.clone(),
                attempt,
                kind,
                summary,
                details,
                subject,
            })
            .await
            .map_err(EngineError::from)?;
        Ok(self
            .app
            .wait_for_decision(&approval.id)
            .await
            .map_err(EngineError::from)?)
    }

    async fn owner_turn(
        &self,
        task: &TaskState,
        step: &Step,
        assignment: &str,
        cancel: &CancellationToken,
    ) -> Result<Value, Failure> {
        let wt = self.worktree(task)?;
        let plan = plan_of(task)
            .map(|p| prompts::plan_text(&p))
            .unwrap_or_default();
        let mut assignment = assignment.to_owned();
        if step.attempt > 1 {
            assignment.push_str(
                "\n\nNote: an earlier attempt at this turn was interrupted. The worktree may already hold part of the change; check `git status` and continue from there.",
            );
        }
        let context = self
            .repo_context(&wt, &format!("{}\n{assignment}", task.request), None)
            .await;
        let prompt = prompts::fill(
            prompts::OWNER,
            &[
                ("request", &task.request),
                ("plan", &plan),
                ("assignment", &assignment),
                ("context", &context),
            ],
        );
        let turn = self
            .agent_turn(
                task,
                step,
                Role::Owner,
                Mode::ReadWrite,
                &wt,
                prompt,
                cancel,
                |_| Ok(Value::Null),
            )
            .await?;
        let files = wt.changed_files().unwrap_or_default();
        Ok(
            json!({ "summary": prompts::head(&turn.text, 4000), "usage": turn.usage, "changed_files": files }),
        )
    }

    fn history(&self, task: &TaskState) -> String {
        let mut lines = Vec::new();
        for s in task.steps_in_order() {
            let Some(receipt) = &s.receipt else { continue };
            match StepKind::of(&s.id) {
                Some(StepKind::Review(n)) => lines.push(format!(
                    "- review {n}: {}",
                    receipt
                        .get("verdict")
                        .map(Value::to_string)
                        .unwrap_or_default()
                )),
                Some(StepKind::Arbiter(n)) => lines.push(format!(
                    "- arbiter {n}: {}",
                    receipt
                        .get("ruling")
                        .map(Value::to_string)
                        .unwrap_or_default()
                )),
                Some(StepKind::Check(n)) => lines.push(format!(
                    "- check {n}: {}",
                    if receipt.get("passed").and_then(Value::as_bool) == Some(true) {
                        "passed"
                    } else {
                        "failed"
                    }
                )),
                Some(StepKind::Fix(n)) => lines.push(format!(
                    "- owner fix {n}: {}",
                    prompts::head(
                        receipt.get("summary").and_then(Value::as_str).unwrap_or(""),
                        300
                    )
                )),
                _ => {}
            }
        }
        if lines.is_empty() {
            "(nothing yet)".into()
        } else {
            lines.join("\n")
        }
    }

    async fn review(
        &self,
        task: &TaskState,
        step: &Step,
        cancel: &CancellationToken,
    ) -> Result<Value, Failure> {
        let wt = self.worktree(task)?;
        let plan = plan_of(task)
            .map(|p| prompts::plan_text(&p))
            .unwrap_or_default();
        let diff = wt.diff()?;
        let history = format!("Earlier in this task:\n{}", self.history(task));
        let changed = wt.changed_files().unwrap_or_default();
        let context = self.repo_context(&wt, &task.request, Some(changed)).await;
        let prompt = prompts::fill(
            prompts::REVIEWER,
            &[
                ("request", &task.request),
                ("plan", &plan),
                ("diff", &prompts::head(&diff, 60_000)),
                ("history", &history),
                ("context", &context),
            ],
        );
        let turn = self
            .agent_turn(
                task,
                step,
                Role::Reviewer,
                Mode::ReadOnly,
                &wt,
                prompt,
                cancel,
                |text| Verdict::parse(text).map(|v| json!(v)),
            )
            .await?;
        let verdict = turn.parsed.unwrap_or_else(|e| {
            json!(Verdict::Blocked {
                reason: format!("the reviewer's verdict could not be read after a retry: {e}")
            })
        });
        Ok(json!({ "verdict": verdict, "usage": turn.usage }))
    }

    async fn arbitrate(
        &self,
        task: &TaskState,
        step: &Step,
        cancel: &CancellationToken,
    ) -> Result<Value, Failure> {
        let wt = self.worktree(task)?;
        let plan = plan_of(task)
            .map(|p| prompts::plan_text(&p))
            .unwrap_or_default();
        let diff = wt.diff()?;
        let trigger = step.input.to_string();
        let prompt = prompts::fill(
            prompts::ARBITER,
            &[
                ("request", &task.request),
                ("plan", &plan),
                ("diff", &prompts::head(&diff, 60_000)),
                ("history", &self.history(task)),
                ("trigger", &trigger),
            ],
        );
        let turn = self
            .agent_turn(
                task,
                step,
                Role::Arbiter,
                Mode::ReadOnly,
                &wt,
                prompt,
                cancel,
                |text| Ruling::parse(text).map(|r| json!(r)),
            )
            .await?;
        let ruling = turn.parsed.unwrap_or_else(|e| {
            json!(Ruling::Escalate {
                reason: format!("the arbiter's ruling could not be read after a retry: {e}")
            })
        });
        Ok(json!({ "ruling": ruling, "usage": turn.usage }))
    }

    async fn check(&self, task: &TaskState) -> Result<Value, Failure> {
        let wt = self.worktree(task)?;
        let project = self.project(task).await?;
        let Some(command) = project.check_command.clone() else {
            return Ok(
                json!({ "passed": true, "command": null, "note": "no check command configured" }),
            );
        };
        let started = Instant::now();
        let run = tokio::process::Command::new("sh")
            .arg("-c")
            .arg(&command)
            .current_dir(&wt.path)
            .env("GAFFER_TASK_ID", task.id.as_str())
            .env("GAFFER_PROJECT", &project.name)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output();
        let (passed, code, output) =
            match tokio::time::timeout(self.settings.check_timeout, run).await {
                Err(_) => (
                    false,
                    None,
                    format!("timed out after {}s", self.settings.check_timeout.as_secs()),
                ),
                Ok(Err(e)) => return Err(fail(format!("cannot run the check `{command}`: {e}"))),
                Ok(Ok(out)) => {
                    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
                    text.push_str(&String::from_utf8_lossy(&out.stderr));
                    (out.status.success(), out.status.code(), text)
                }
            };
        let output = self.settings.redactor.redact(&prompts::tail(&output, 8000));
        Ok(json!({
            "passed": passed,
            "command": command,
            "exit_code": code,
            "output_tail": output,
            "duration_ms": started.elapsed().as_millis() as u64,
        }))
    }

    async fn ship(&self, task: &TaskState) -> Result<Value, Failure> {
        let project = self.project(task).await?;
        let forge = self.forge_summary(&project);
        let note = if forge.is_null() {
            format!("no forge is configured for project {}: the branch stays in the repository, unpushed (add [projects.{}.forge] to the config to push it and open a pull request)", project.name, project.name)
        } else {
            format!(
                "shipping to {} after approval: push, pull request, CI",
                forge["kind"].as_str().unwrap_or("the forge")
            )
        };
        let wt = self.worktree(task)?;
        let commits: Vec<Value> = wt
            .commits()?
            .into_iter()
            .map(|(sha, subject)| json!({ "sha": sha, "subject": subject }))
            .collect();
        let mut usage = Usage::default();
        let mut verdicts = Vec::new();
        let mut check = Value::Null;
        for s in task.steps_in_order() {
            let Some(receipt) = &s.receipt else { continue };
            if let Some(u) = receipt
                .get("usage")
                .and_then(|u| serde_json::from_value::<Usage>(u.clone()).ok())
            {
                usage += u;
            }
            if let Some(v) = receipt.get("verdict") {
                verdicts.push(v.clone());
            }
            if matches!(StepKind::of(&s.id), Some(StepKind::Check(_))) {
                check = json!({
                    "passed": receipt.get("passed"),
                    "command": receipt.get("command"),
                    "exit_code": receipt.get("exit_code"),
                });
            }
        }
        Ok(json!({
            "task_id": task.id,
            "branch": wt.branch,
            "worktree": wt.path,
            "base": wt.base,
            "commits": commits,
            "changed_files": wt.changed_files()?,
            "verdicts": verdicts,
            "check": check,
            "tokens": {
                "input": usage.input_tokens,
                "output": usage.output_tokens,
                "cached_input": usage.cached_input_tokens,
            },
            "cost_usd": usage.cost_usd.unwrap_or(0.0),
            "forge": forge,
            "note": note,
        }))
    }

    /// A non-idempotent step was running when the process died. A push or a pull
    /// request is probed on the forge (see `ship`); for an agent turn the probe reads
    /// the worktree, but its effects cannot be proven absent, so a human decides.
    async fn reconcile(&self, task: &TaskState, id: &StepId) -> Result<()> {
        self.append(
            &task.id,
            vec![Event::StepReconcileStarted {
                step_id: id.clone(),
            }],
        )
        .await?;
        if matches!(
            StepKind::of(id),
            Some(StepKind::Push(_) | StepKind::PullRequest)
        ) {
            return self.reconcile_ship(task, id).await;
        }
        let changed = self.worktree(task).ok().and_then(|wt| {
            let dirty = wt.has_changes().ok()?;
            Some((dirty, wt.changed_files().unwrap_or_default()))
        });
        let reason = match changed {
            Some((true, files)) => format!(
                "`{}` was interrupted by a crash after changing the worktree (uncommitted changes in: {}); approve to run it again on top of them, deny to fail the task",
                task.steps[id].name,
                files.join(", ")
            ),
            Some((false, _)) => format!(
                "`{}` was interrupted by a crash; the worktree shows no uncommitted change, but commands it ran may have had effects; approve to run it again, deny to fail the task",
                task.steps[id].name
            ),
            None => format!("`{}` was interrupted by a crash and its worktree cannot be read", task.steps[id].name),
        };
        self.append(
            &task.id,
            vec![Event::StepManualRequired {
                step_id: id.clone(),
                reason,
            }],
        )
        .await
    }

    async fn ask_human(
        &self,
        task: &TaskState,
        id: &StepId,
        cancel: &CancellationToken,
    ) -> Result<()> {
        let step = &task.steps[id];
        let summary = step
            .error
            .clone()
            .unwrap_or_else(|| format!("`{}` needs a human", step.name));
        let details = json!({ "step": id, "intent": step.intent, "attempt": step.attempt });
        let wait = self.ask(
            task,
            step,
            step.attempt,
            ApprovalKind::Manual,
            summary,
            details,
            Subject::default(),
        );
        let resolution = tokio::select! {
            r = wait => r,
            () = cancel.cancelled() => return Err(EngineError::Cancelled),
        };
        let resolution = match resolution {
            Ok(r) => r,
            Err(Failure::Engine(e)) => return Err(e),
            Err(Failure::Step(StepFailure(e))) => return Err(EngineError::Invalid(e)),
            Err(Failure::Cancelled) => return Err(EngineError::Cancelled),
        };
        if resolution.approved() {
            self.append(
                &task.id,
                vec![Event::StepRetried {
                    step_id: id.clone(),
                }],
            )
            .await
        } else {
            self.append(
                &task.id,
                vec![Event::TaskFailed {
                    reason: format!(
                        "`{}` needed a human after a crash: {}",
                        step.name,
                        resolution.reason()
                    ),
                }],
            )
            .await
        }
    }

    /// One agent session for one step: start, send the prompt, stream events into
    /// the journal, retry once if the answer breaks its contract, stop.
    #[allow(clippy::too_many_arguments)]
    async fn agent_turn(
        &self,
        task: &TaskState,
        step: &Step,
        role: Role,
        mode: Mode,
        wt: &Worktree,
        prompt: String,
        cancel: &CancellationToken,
        contract: impl Fn(&str) -> Result<Value, ContractError>,
    ) -> Result<Turn, Failure> {
        let project = self.project(task).await?;
        let RoleAgent {
            agent,
            model,
            effort,
        } = self.role_agent(task, &project.name, role);
        let backend = self
            .agents
            .backend(&agent, model.as_deref(), effort.as_deref())
            .map_err(fail)?;
        let mut env = self.settings.agent_env.clone();
        if let Some(tokens) = effort
            .as_deref()
            .filter(|_| agent == "claude")
            .and_then(crate::agents::claude_thinking_tokens)
        {
            env.insert("MAX_THINKING_TOKENS".into(), tokens);
        }
        let opts = StartOptions {
            workspace: wt.path.clone(),
            role: role.as_str().into(),
            role_prompt: String::new(),
            mode,
            env,
            task_id: task.id.0.clone(),
            project: project.name.clone(),
            model,
            sandbox: self.settings.sandbox.clone(),
        };
        let gate = Arc::new(Gate {
            engine: self.clone(),
            task: task.clone(),
            step: step.clone(),
            asked: AtomicU32::new(0),
        });
        let mut session = backend
            .start(opts, gate)
            .await
            .map_err(|e| fail(format!("cannot start {agent}: {e}")))?;
        let record = session.record();
        let session_id = SessionId(gaffer_app::new_id("s"));
        self.append(
            &task.id,
            vec![Event::SessionStarted {
                session_id: session_id.clone(),
                agent: agent.clone(),
                role,
                workspace_key: record.workspace_key.clone(),
                agent_session_id: Some(record.session_id.clone()),
                step_id: Some(step.id.clone()),
            }],
        )
        .await?;
        let outcome = self
            .converse(
                task,
                step,
                &session_id,
                session.as_mut(),
                prompt,
                cancel,
                &contract,
            )
            .await;
        let _ = session.shutdown().await;
        let reason = match &outcome {
            Ok(_) => "turn finished".to_owned(),
            Err(Failure::Cancelled) => "cancelled".to_owned(),
            Err(Failure::Step(StepFailure(e))) => prompts::head(e, 300),
            Err(Failure::Engine(e)) => prompts::head(&e.to_string(), 300),
        };
        let _ = self
            .append(&task.id, vec![Event::SessionEnded { session_id, reason }])
            .await;
        outcome
    }

    #[allow(clippy::too_many_arguments)]
    async fn converse(
        &self,
        task: &TaskState,
        step: &Step,
        session_id: &SessionId,
        session: &mut dyn AgentSession,
        prompt: String,
        cancel: &CancellationToken,
        contract: &impl Fn(&str) -> Result<Value, ContractError>,
    ) -> Result<Turn, Failure> {
        let mut usage = Usage::default();
        let mut prompt = prompt;
        let mut tries = 0;
        loop {
            tries += 1;
            session
                .send_turn(&prompt)
                .await
                .map_err(|e| fail(format!("agent turn: {e}")))?;
            let result = loop {
                let event = tokio::select! {
                    ev = session.next_event() => ev,
                    () = cancel.cancelled() => {
                        let _ = session.cancel().await;
                        return Err(Failure::Cancelled);
                    }
                };
                let event = match event {
                    None => {
                        return Err(fail(
                            "the agent ended the session before finishing its turn",
                        ))
                    }
                    Some(Err(e)) => return Err(fail(format!("agent: {e}"))),
                    Some(Ok(ev)) => ev,
                };
                match &event {
                    AgentEvent::TurnCompleted { result } => break result.clone(),
                    AgentEvent::SessionStarted {
                        session_id: agent_id,
                        verified: true,
                    } => {
                        self.append(
                            &task.id,
                            vec![Event::SessionVerified {
                                session_id: session_id.clone(),
                                agent_session_id: agent_id.clone(),
                            }],
                        )
                        .await?;
                    }
                    AgentEvent::PermissionRequested { .. }
                    | AgentEvent::PermissionResolved { .. } => {}
                    other => {
                        if let Some(activity) = activity(other) {
                            self.append(
                                &task.id,
                                vec![Event::AgentActivity {
                                    step_id: step.id.clone(),
                                    activity,
                                }],
                            )
                            .await?;
                        }
                    }
                }
            };
            usage += result.usage;
            match result.status {
                TurnStatus::Completed => {}
                TurnStatus::Interrupted => return Err(Failure::Cancelled),
                other => {
                    return Err(fail(format!(
                        "the agent's turn ended {other:?}: {}",
                        result
                            .reason
                            .clone()
                            .unwrap_or_else(|| prompts::head(&result.text, 500))
                    )))
                }
            }
            match contract(&result.text) {
                Ok(parsed) => {
                    return Ok(Turn {
                        text: result.text,
                        usage,
                        parsed: Ok(parsed),
                    })
                }
                Err(e) if tries < 2 => {
                    prompt = prompts::fill(prompts::RETRY, &[("error", &e.to_string())]);
                }
                Err(e) => {
                    return Ok(Turn {
                        text: result.text,
                        usage,
                        parsed: Err(e),
                    })
                }
            }
        }
    }
}

/// Who plays a role in one task.
struct RoleAgent {
    agent: String,
    model: Option<String>,
    effort: Option<String>,
}

/// What a turn produced.
struct Turn {
    text: String,
    usage: Usage,
    parsed: Result<Value, ContractError>,
}

/// How a step's execution ended when it did not produce a receipt.
pub(crate) enum Failure {
    /// The step failed; recorded as `step_failed`.
    Step(StepFailure),
    /// The user stopped the task.
    Cancelled,
    /// The engine itself failed (journal error); nothing is recorded for the step.
    Engine(EngineError),
}

impl From<gaffer_forge::ForgeError> for Failure {
    fn from(e: gaffer_forge::ForgeError) -> Self {
        Failure::Step(StepFailure(e.to_string()))
    }
}

impl From<EngineError> for Failure {
    fn from(e: EngineError) -> Self {
        match e {
            EngineError::Cancelled => Failure::Cancelled,
            other => Failure::Engine(other),
        }
    }
}

pub(crate) fn fail(message: impl Into<String>) -> Failure {
    Failure::Step(StepFailure(message.into()))
}

/// The owner's instructions for a fix, from the fix step's input.
fn fix_assignment(input: &Value) -> String {
    let detail = &input["detail"];
    match input.get("reason").and_then(Value::as_str) {
        Some("review") => format!("The reviewer asks for changes:\n{}", detail.as_str().unwrap_or_default()),
        Some("arbiter") => format!("The arbiter rules that you must revise:\n{}", detail.as_str().unwrap_or_default()),
        Some("ci") => crate::ship::ci_fix_assignment(detail),
        Some("check") => format!(
            "The project's check `{}` failed (exit code {}). The end of its output:\n```\n{}\n```\nFind and fix the cause.",
            detail.get("command").and_then(Value::as_str).unwrap_or("?"),
            detail.get("exit_code").map(Value::to_string).unwrap_or_else(|| "?".into()),
            detail.get("output_tail").and_then(Value::as_str).unwrap_or_default()
        ),
        _ => format!("Fix this:\n{detail}"),
    }
}

/// A journal-sized view of an agent event (long texts cut).
fn activity(event: &AgentEvent) -> Option<Value> {
    let mut v = serde_json::to_value(event).ok()?;
    if let Value::Object(map) = &mut v {
        for value in map.values_mut() {
            if let Value::String(s) = value {
                if s.len() > 2000 {
                    *s = prompts::head(s, 2000);
                }
            }
        }
    }
    Some(v)
}

/// Turns every permission request of one step into one gaffer approval.
struct Gate {
    engine: Engine,
    task: TaskState,
    step: Step,
    asked: AtomicU32,
}

/// The paths a tool call names, for path-glob rules.
fn paths_of(input: &Value) -> Vec<String> {
    ["file_path", "path", "notebook_path"]
        .iter()
        .filter_map(|k| input.get(*k).and_then(Value::as_str).map(str::to_owned))
        .collect()
}

fn command_of(input: &Value) -> Option<String> {
    if let Some(c) = input.get("command") {
        return match c {
            Value::String(s) => Some(s.clone()),
            Value::Array(parts) => Some(
                parts
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(" "),
            ),
            _ => None,
        };
    }
    input.get("argv").and_then(Value::as_array).map(|a| {
        a.iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" ")
    })
}

#[async_trait::async_trait]
impl ApprovalGate for Gate {
    async fn decide(&self, request: PermissionRequest) -> PermissionDecision {
        // One approval per request of this step attempt; attempts never share keys.
        let n = self.asked.fetch_add(1, Ordering::SeqCst) + 1;
        let attempt = self.step.attempt * 1000 + n;
        let command = command_of(&request.input);
        let paths = paths_of(&request.input);
        let what = command
            .clone()
            .or_else(|| paths.first().cloned())
            .unwrap_or_else(|| prompts::head(&request.input.to_string(), 200));
        let summary = format!(
            "{} wants to run {}: {}",
            self.step.name, request.tool_name, what
        );
        let subject = Subject {
            tool: Some(request.tool_name.clone()),
            command,
            paths,
            intent: Some(Intent::NonIdempotent),
        };
        let details = json!({ "tool": request.tool_name, "input": request.input, "reason": request.reason, "agent_request": request.id });
        match self
            .engine
            .ask(
                &self.task,
                &self.step,
                attempt,
                ApprovalKind::Tool,
                summary,
                details,
                subject,
            )
            .await
        {
            Ok(r) if r.approved() => PermissionDecision::allow(),
            Ok(r) => PermissionDecision::deny(r.reason()),
            Err(_) => PermissionDecision::deny("gaffer could not record the approval"),
        }
    }
}
