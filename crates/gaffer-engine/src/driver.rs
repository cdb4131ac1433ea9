//! The driver: reads a task from the journal, asks [`decide`] what is next, does it,
//! records the outcome, and repeats until the task is over or must wait.
//!
//! Every effect is a step whose intent is in the journal before it runs. The
//! receipts of finished steps are never recomputed, so a restart picks up exactly
//! where the journal says the task is. A step's outcome withdraws, in the same
//! append, the approvals the step left pending ([`Engine::record_outcome`]).

use crate::agents::AgentFactory;
use crate::error::{EngineError, Result, StepFailure};
use crate::failure::Failure;
use crate::pipeline::{decide, Limits, Next, StepKind};
use crate::steps::owner::{code_assignment, fix_assignment};
use gaffer_agents::Redactor;
use gaffer_app::App;
use gaffer_core::{
    Actor, Event, ProjectState, Rejected, Stage, Step, StepId, StreamId, StreamState, TaskId,
    TaskState,
};
use gaffer_store::{Journal, NewEvent, StoreError};
use serde_json::Value;
use std::path::PathBuf;
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
    /// Extra environment for agent processes, on top of the allowlist and `GAFFER_*`
    /// (`[agents] env`): nothing else of gaffer's own environment reaches them.
    pub agent_env: std::collections::BTreeMap<String, String>,
    /// Extra environment for each project's check, by project name, on top of the
    /// allowlist and `GAFFER_TASK_ID` / `GAFFER_PROJECT` (`[projects.<name>] check_env`).
    pub check_env: std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>>,
    /// Where the project index keeps per-file facts between runs.
    pub index_cache: Arc<dyn gaffer_index::IndexCache>,
    /// Tokens of repository context given to each agent (files chosen for the task).
    pub context_budget: usize,
    /// How each project ships, by project name; a project without one keeps its
    /// task branches local.
    pub shipping: std::collections::BTreeMap<String, crate::Shipping>,
    /// Each project's task tracker, by project name.
    pub trackers: std::collections::BTreeMap<String, crate::Tracker>,
    /// Each project's issue intake, by project name (see [`crate::Intake`]).
    pub intake: std::collections::BTreeMap<String, crate::Intake>,
    /// How agent processes are confined (see `gaffer_agents::sandbox`).
    pub sandbox: gaffer_agents::sandbox::Sandbox,
    /// How each project's new worktrees are made ready, by project name
    /// (`[projects.<name>] setup`, `copy`, `port`).
    pub worktree_setup: std::collections::BTreeMap<String, gaffer_config::WorktreeSetup>,
    /// When a running agent looks stuck (`[watchdog]`); off unless configured.
    pub watchdog: gaffer_config::Watchdog,
    /// Per-project watchdogs (`[projects.<name>.watchdog]`), by project name.
    pub project_watchdog: std::collections::BTreeMap<String, gaffer_config::Watchdog>,
    /// Spending caps (`[budget]`); none unless configured.
    pub budget: gaffer_config::Budget,
    /// Per-project caps (`[projects.<name>.budget]`), by project name.
    pub project_budget: std::collections::BTreeMap<String, gaffer_config::Budget>,
    /// Each project's privacy mode, the networks that count as local, the ACP agents
    /// declared local.
    pub privacy: crate::privacy::PrivacySettings,
    /// Cool-down and rate-limit threshold of the roles' fallback agents.
    pub fallback: gaffer_config::FallbackConfig,
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
            check_env: Default::default(),
            index_cache: Arc::new(gaffer_index::MemoryCache::default()),
            context_budget: 8000,
            shipping: Default::default(),
            trackers: Default::default(),
            intake: Default::default(),
            sandbox: Default::default(),
            worktree_setup: Default::default(),
            watchdog: gaffer_config::Watchdog::OFF,
            project_watchdog: Default::default(),
            budget: gaffer_config::Budget::default(),
            project_budget: Default::default(),
            privacy: Default::default(),
            fallback: Default::default(),
        }
    }

    /// The watchdog of `project`.
    pub fn watchdog_for(&self, project: &str) -> gaffer_config::Watchdog {
        self.project_watchdog
            .get(project)
            .copied()
            .unwrap_or(self.watchdog)
    }

    /// The spending caps of `project`.
    pub fn budget_for(&self, project: &str) -> gaffer_config::Budget {
        self.project_budget
            .get(project)
            .copied()
            .unwrap_or(self.budget)
    }
}

/// The engine: runs tasks through the pipeline.
#[derive(Clone)]
pub struct Engine {
    pub(crate) app: App,
    pub(crate) agents: Arc<dyn AgentFactory>,
    pub(crate) settings: Settings,
    /// The tasks [`Engine::work`] runs now, shared by every clone.
    pub(crate) held: Arc<std::sync::Mutex<std::collections::HashSet<String>>>,
    /// The repository indexes this process keeps in memory, shared by every clone, role
    /// and task.
    pub(crate) indexes: Arc<crate::context::Indexes>,
    /// Wakes the pull-request follower early (see [`Engine::wake_follower`]).
    pub(crate) follow_wake: Arc<tokio::sync::Notify>,
    /// The placeholder tables of the masked steps running now, shared by every clone.
    pub(crate) masks: Arc<crate::masks::StepMasks>,
}

impl Engine {
    /// An engine over the app service, making agents with `agents`. Its data dir is
    /// added to what no sandbox rule may make readable.
    pub fn new(app: App, agents: Arc<dyn AgentFactory>, mut settings: Settings) -> Self {
        if !settings.sandbox.protected.contains(&settings.data_dir) {
            settings.sandbox.protected.push(settings.data_dir.clone());
        }
        Self {
            app,
            agents,
            settings,
            held: Arc::default(),
            indexes: Arc::default(),
            follow_wake: Arc::default(),
            masks: Arc::default(),
        }
    }

    /// Whether `agent` names a backend that can be started here (the executable or
    /// API key is present); the error says what is missing.
    pub fn check_agent(&self, agent: &str) -> std::result::Result<(), String> {
        self.agents.ready(agent)
    }

    /// Whether every role of a task in `project` (by name) can start here: `agent`
    /// for every role when given (`--agent`), else the project's roles, else the
    /// configured ones. Checked before anything is stored; the error names the
    /// roles, the missing executable or API key, and what to do.
    pub fn check_roles(
        &self,
        project: &str,
        agent: Option<&str>,
    ) -> std::result::Result<(), String> {
        let roles = self.roles_of(project);
        // A role plays when one agent of its chain can start (a fallback takes over
        // from one that cannot); each agent is asked once. `--agent` puts every role
        // on one backend; the panel keeps its members, each a chain of one.
        let mut ready: Vec<(&str, std::result::Result<(), String>)> = Vec::new();
        let mut unplayable: Vec<(&str, Vec<&str>, String)> = Vec::new();
        let panel = roles.panel.iter().flat_map(|p| &p.members);
        let players = roles
            .each()
            .into_iter()
            .map(|(role, cfg)| {
                let chain = match agent {
                    Some(a) => vec![a],
                    None => cfg.chain(),
                };
                (role, chain)
            })
            .chain(panel.map(|m| ("arbiter's panel", vec![m.agent.as_str()])));
        for (role, chain) in players {
            let mut first_error = None;
            for name in &chain {
                let result = match ready.iter().find(|(a, _)| a == name) {
                    Some((_, r)) => r.clone(),
                    None => {
                        let r = self.agents.ready(name);
                        ready.push((name, r.clone()));
                        r
                    }
                };
                match result {
                    Ok(()) => {
                        first_error = None;
                        break;
                    }
                    Err(e) => {
                        first_error.get_or_insert(e);
                    }
                }
            }
            if let Some(e) = first_error {
                match unplayable.iter_mut().find(|(a, _, _)| *a == chain[0]) {
                    Some((_, roles, _)) if roles.contains(&role) => {}
                    Some((_, roles, _)) => roles.push(role),
                    None => unplayable.push((chain[0], vec![role], e)),
                }
            }
        }
        if let Some((name, roles, e)) = unplayable.into_iter().next() {
            return Err(format!(
                "agent {name} ({}) cannot start: {e}",
                roles.join(", ")
            ));
        }
        Ok(())
    }

    /// What the privacy of `project` (by name) makes of each of its roles, `agent`
    /// playing every role when given (`--agent`): whether it complies, where its model
    /// runs, whether it sees a masked pack.
    pub fn privacy_of(
        &self,
        project: &str,
        agent: Option<&str>,
    ) -> Vec<crate::privacy::RolePrivacy> {
        crate::privacy::project_privacy(
            project,
            self.roles_of(project),
            agent,
            &self.settings.privacy,
            &crate::privacy::Process,
        )
    }

    /// Whether every role of a task in `project` may run under the project's privacy
    /// (`local-only`: no cloud model; `masked`: only a built-in cloud planner). Checked
    /// before anything is stored; the error names the role, its agent and endpoint,
    /// and what to change.
    pub fn check_privacy(
        &self,
        project: &str,
        agent: Option<&str>,
    ) -> std::result::Result<(), String> {
        gaffer_app::TaskAdmission::admit(&self.admission(), project, agent)
    }

    /// The same check, for the app service to put every new task to (it holds no
    /// engine: the engine holds the app).
    pub fn admission(&self) -> crate::privacy::Admission {
        crate::privacy::Admission {
            roles: self.settings.roles.clone(),
            project_roles: self.settings.project_roles.clone(),
            settings: self.settings.privacy.clone(),
        }
    }

    /// The roles of tasks in `project` (by name): its overrides, else the configured ones.
    pub(crate) fn roles_of(&self, project: &str) -> &gaffer_config::Roles {
        self.settings
            .project_roles
            .get(project)
            .unwrap_or(&self.settings.roles)
    }

    /// The same engine over another app service (a fenced journal, say).
    pub(crate) fn with_app(&self, app: App) -> Self {
        Self {
            app,
            agents: self.agents.clone(),
            settings: self.settings.clone(),
            held: self.held.clone(),
            indexes: self.indexes.clone(),
            follow_wake: self.follow_wake.clone(),
            masks: self.masks.clone(),
        }
    }

    /// What it removes from everything it records: every secret it knows of.
    pub fn redactor(&self) -> &Arc<Redactor> {
        &self.settings.redactor
    }

    /// The app service it uses.
    pub fn app(&self) -> &App {
        &self.app
    }

    pub(crate) fn journal(&self) -> &Arc<dyn Journal> {
        self.app.journal()
    }

    /// Run a task until it is over (returns its final stage). `cancel` stops it
    /// cleanly: the agent is stopped, the worktree kept, the task cancelled.
    pub async fn run_task(&self, id: &TaskId, cancel: CancellationToken) -> Result<Stage> {
        let span = tracing::info_span!("task", task_id = %id);
        tracing::Instrument::instrument(self.run_task_in_span(id, cancel), span).await
    }

    async fn run_task_in_span(&self, id: &TaskId, cancel: CancellationToken) -> Result<Stage> {
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

    /// Stop the task: the steps it was running fail as cancelled and the task is
    /// cancelled, in one append (a crash cannot leave a failed step of a task that
    /// was meant to be cancelled: resumed, it would fail instead).
    async fn cancel(&self, id: &TaskId) -> Result<Stage> {
        for _ in 0..64 {
            let Some((task, head)) = self.load(id).await? else {
                return Err(EngineError::Invalid(format!("task `{id}` does not exist")));
            };
            if task.stage.is_final() {
                return Ok(task.stage);
            }
            let mut events: Vec<Event> = task
                .steps_in_order()
                .into_iter()
                .filter(|s| s.state == gaffer_core::StepState::Started)
                .map(|s| Event::StepFailed {
                    step_id: s.id.clone(),
                    error: "cancelled".into(),
                    usage: None,
                })
                .collect();
            // The engine does not know who pressed Ctrl-C; a cancellation recorded
            // elsewhere (API, CLI) already names its person and wins over this one.
            events.push(Event::TaskCancelled {
                by: Actor::system("engine"),
                reason: Some("the run was stopped (Ctrl-C)".into()),
            });
            match self.append_at(id, head, &events).await {
                Ok(true) => return Ok(Stage::Cancelled),
                Ok(false) => continue,
                Err(EngineError::Finished(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Err(EngineError::Invalid(format!(
            "task `{id}` keeps changing; could not cancel it"
        )))
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
        self.append_at(id, head, &events).await.map(|_| ())
    }

    /// Append facts (a step's outcome, agent activity) at whatever the head is now:
    /// the reducer re-checks them against the current state.
    pub(crate) async fn append(&self, id: &TaskId, events: Vec<Event>) -> Result<()> {
        let stream = StreamId::from(id);
        for _ in 0..64 {
            let head = self.journal().head(&stream).await?;
            if self.append_at(id, head, &events).await? {
                return Ok(());
            }
        }
        Err(Self::keeps_changing(id))
    }

    /// Append a step's outcome (`outcome`: completed, failed, retried, needs a
    /// person) and, in the same append, withdraw every approval of the step still
    /// pending: the attempt that asked it is over, so nothing waits for its answer
    /// (an open question left by an attempt a crash ended would otherwise keep the
    /// task from being done). Read and written at one head, so a decision that comes
    /// meanwhile is seen, never withdrawn.
    pub(crate) async fn record_outcome(
        &self,
        task_id: &TaskId,
        step_id: &StepId,
        outcome: Event,
    ) -> Result<()> {
        let moved_on = match &outcome {
            Event::StepCompleted { .. } => "finished",
            Event::StepFailed { .. } => "failed",
            Event::StepRetried { .. } => "runs again",
            _ => "waits for a person",
        };
        for _ in 0..64 {
            let Some((task, head)) = self.load(task_id).await? else {
                return Err(EngineError::Invalid(format!(
                    "task `{task_id}` does not exist"
                )));
            };
            let name = task.steps.get(step_id).map_or("the step", |s| &s.name);
            let reason = format!("`{name}` {moved_on}: nothing waits for this answer any more");
            let withdrawn = task
                .pending_approvals()
                .filter(|a| a.step_id == *step_id)
                .map(|a| Event::ApprovalWithdrawn {
                    approval_id: a.id.clone(),
                    reason: reason.clone(),
                });
            let events: Vec<Event> = std::iter::once(outcome.clone()).chain(withdrawn).collect();
            if self.append_at(task_id, head, &events).await? {
                return Ok(());
            }
        }
        Err(Self::keeps_changing(task_id))
    }

    /// Append events decided on the state at `head`, all or none. `Ok(false)`:
    /// something was appended since, nothing is written (decide again).
    pub(crate) async fn append_at(&self, id: &TaskId, head: i64, events: &[Event]) -> Result<bool> {
        let batch = events.iter().cloned().map(NewEvent::now).collect();
        match self
            .journal()
            .append(&StreamId::from(id), head, batch)
            .await
        {
            Ok(_) => Ok(true),
            Err(StoreError::Conflict { .. }) => Ok(false),
            Err(StoreError::Rejected {
                reason: Rejected::TaskFinished { .. },
                ..
            }) => Err(EngineError::Finished(id.0.clone())),
            Err(e) => Err(e.into()),
        }
    }

    fn keeps_changing(id: &TaskId) -> EngineError {
        EngineError::Invalid(format!("task `{id}` keeps changing; could not append"))
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
        // Every log line of the step's work names the step (and, from run_task's
        // span, the task): `--log-format json` carries both.
        let span = tracing::info_span!("step", step_id = %id);
        let result = tracing::Instrument::instrument(
            async {
                let result = if kind.waits_for_a_person() {
                    // Nothing else interrupts a wait for a decision: a run stopped here
                    // (Ctrl-C at the question) must not wait for an answer first.
                    tokio::select! {
                        r = self.execute(task, step, kind, cancel) => r,
                        () = cancel.cancelled() => Err(Failure::Cancelled),
                    }
                } else {
                    self.execute(task, step, kind, cancel).await
                };
                tracing::info!(task = %task.id, step = %id, ok = result.is_ok(), ms = started.elapsed().as_millis() as u64, "step finished");
                result
            },
            span,
        )
        .await;
        match result {
            Ok(mut receipt) => {
                // Which privacy applied to an agent step is recorded with it.
                if let (Some(role), Value::Object(fields)) =
                    (crate::privacy::step_role(kind), &mut receipt)
                {
                    let applied = self.applied_privacy(task, id, role, fields.get("privacy"));
                    fields.insert("privacy".into(), applied.await?);
                }
                let step_id = id.clone();
                let done = Event::StepCompleted { step_id, receipt };
                self.record_outcome(&task.id, id, done).await
            }
            Err(Failure::Step(StepFailure(error))) => {
                let error = self.settings.redactor.redact(&error);
                let step_id = id.clone();
                let failed = Event::StepFailed {
                    step_id,
                    error,
                    usage: None,
                };
                self.record_outcome(&task.id, id, failed).await
            }
            Err(Failure::Spent(StepFailure(error), usage)) => {
                let error = self.settings.redactor.redact(&error);
                let step_id = id.clone();
                let usage = Some(usage);
                let failed = Event::StepFailed {
                    step_id,
                    error,
                    usage,
                };
                self.record_outcome(&task.id, id, failed).await
            }
            // `cancel` fails the step and cancels the task in one append.
            Err(Failure::Cancelled) => Err(EngineError::Cancelled),
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
            StepKind::Setup => self.setup(task).await,
            StepKind::Plan => self.plan(task, step, cancel).await,
            StepKind::Challenge(n) => self.challenge(task, step, n, cancel).await,
            StepKind::Revise(n) => self.revise(task, step, n, cancel).await,
            StepKind::PlanApproval => self.plan_approval(task, step).await,
            StepKind::Code(n) => {
                let assignment = code_assignment(task, n)?;
                self.owner_turn(task, step, &assignment, cancel).await
            }
            StepKind::Fix(_) => {
                let assignment = fix_assignment(&step.input);
                self.owner_turn(task, step, &assignment, cancel).await
            }
            StepKind::Commit(n) => self.commit_subtask(task, step, n).await,
            StepKind::CommitFix(n) => self.commit_fix(task, step, n).await,
            StepKind::Test(_) => self.tester_turn(task, step, cancel).await,
            StepKind::CommitTest(_) => self.commit_tests(task, step).await,
            StepKind::TestRun(_) => self.check(task).await,
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
            StepKind::FollowUpApproval(_) => self.follow_up_approval(task, step).await,
            StepKind::PushApproval(_) => self.push_approval(task, step).await,
            StepKind::Reply(_) => self.reply(task, step).await,
            StepKind::Sync(_) => self.sync_base(task).await,
            StepKind::Resolve(_) => self.resolve_conflicts(task, step, cancel).await,
        }
    }
}
