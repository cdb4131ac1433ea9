//! One agent session for one step: the role's agent is started in the worktree,
//! given the prompt, its events streamed into the journal, its answer checked
//! against the role's contract (asked again once), and the session ended.

use crate::error::StepFailure;
use crate::failure::{fail, fail_spent, Failure};
use crate::fallback::{classify, has_effect, Symptom, Watch};
use crate::gate::Gate;
use crate::live::Live;
use crate::{prompts, Engine};
use gaffer_agents::sandbox::REFUSED_BY_SANDBOX;
use gaffer_agents::{
    AgentBackend, AgentError, AgentEvent, AgentSession, Mode, StartOptions, TurnStatus, Usage,
};
use gaffer_app::Subject;
use gaffer_core::{ApprovalKind, Event, Role, Session, SessionId, Step, StepId, TaskState};
use gaffer_forge::Worktree;
use gaffer_protocol::contracts::ContractError;
use serde_json::{json, Value};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

impl Engine {
    /// The configured agents of `role` in tasks of `project` (by name).
    pub(crate) fn role_config(&self, project: &str, role: Role) -> &gaffer_config::RoleConfig {
        let roles = self.roles_of(project);
        match role {
            Role::Planner => &roles.planner,
            Role::Owner => &roles.owner,
            Role::Reviewer => &roles.reviewer,
            Role::Arbiter => &roles.arbiter,
            // Only asked for when the project has one (the plan step recorded it);
            // without, the planner's agent.
            Role::Challenger => roles
                .challenger
                .as_ref()
                .map_or(&roles.planner, |c| &c.role),
            Role::Tester => roles.tester.as_ref().unwrap_or(&roles.owner),
            // Members name their own agent and model (`steps::panel`); this is only
            // the effort they share with the arbiter.
            Role::Panelist => &roles.arbiter,
        }
    }

    /// How `agent` plays `role`: the role's model is its primary agent's (a fallback
    /// runs its own default model); `--agent` runs its default model too.
    pub(crate) fn role_agent(
        &self,
        task: &TaskState,
        project: &str,
        role: Role,
        agent: &str,
    ) -> RoleAgent {
        let cfg = self.role_config(project, role);
        RoleAgent {
            agent: agent.to_owned(),
            model: cfg
                .model
                .clone()
                .filter(|_| task.options.agent.is_none() && agent == cfg.agent),
            effort: cfg.effort.clone(),
        }
    }

    /// What the project's privacy makes of a turn of `role` in `task`: played by its
    /// first agent (`--agent`, else the first of the role's chain), its prompt masked
    /// when any agent of the chain that may take the turn over needs it masked.
    pub(crate) fn role_privacy(
        &self,
        task: &TaskState,
        project: &str,
        role: Role,
    ) -> crate::privacy::RolePrivacy {
        let cfg = self.role_config(project, role);
        let chain = match &task.options.agent {
            Some(agent) => vec![agent.as_str()],
            None => cfg.chain(),
        };
        crate::privacy::turn_privacy(
            project,
            self.settings.privacy.mode(project),
            role.as_str(),
            &chain,
            self.roles_of(project),
            &self.settings.privacy,
            &crate::privacy::Process,
        )
    }

    /// What the project's privacy makes of `role` played by `agent` (a fallback is
    /// checked as itself).
    pub(crate) fn agent_privacy(
        &self,
        project: &str,
        role: Role,
        agent: &str,
    ) -> crate::privacy::RolePrivacy {
        crate::privacy::role_privacy(
            project,
            self.settings.privacy.mode(project),
            role.as_str(),
            agent,
            self.roles_of(project),
            &self.settings.privacy,
            &crate::privacy::Process,
        )
    }

    /// What privacy applied to `step`'s turn of `role`, as recorded with it: that of the
    /// agent that played it (a fallback that took the turn over is recorded as itself),
    /// the last session of the role the step started; with what the step itself said
    /// of its prompt (`step_said`: the plan step's masking and placeholders).
    pub(crate) async fn applied_privacy(
        &self,
        task: &TaskState,
        step: &StepId,
        role: Role,
        step_said: Option<&Value>,
    ) -> Result<Value, crate::EngineError> {
        let project = self.project(task).await?;
        let now = self.load(&task.id).await?.map(|(t, _)| t);
        let ran = now.as_ref().and_then(|t| {
            t.sessions
                .values()
                .filter(|s| s.role == role && s.step_id.as_ref() == Some(step))
                .max_by_key(|s| (s.started_at, s.id.clone()))
                .map(|s| s.agent.clone())
        });
        let mut applied = match ran {
            Some(agent) => self.agent_privacy(&project.name, role, &agent),
            None => self.role_privacy(task, &project.name, role),
        }
        .to_json();
        for said in ["masked", "placeholders"] {
            if let Some(v) = step_said.and_then(|p| p.get(said)) {
                applied[said] = v.clone();
            }
        }
        Ok(applied)
    }

    /// One agent session for one step: start `who`, send the prompt, stream events
    /// into the journal, retry once if the answer breaks its contract, stop. What
    /// shows the agent is out, and whether a tool that may have done something ran,
    /// goes into `watch`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn session_turn(
        &self,
        task: &TaskState,
        step: &Step,
        role: Role,
        mode: Mode,
        wt: &Worktree,
        prompt: &str,
        cancel: &CancellationToken,
        contract: &impl Fn(&str) -> Result<Value, ContractError>,
        who: RoleAgent,
        seen: &mut Watch,
    ) -> Result<Turn, Failure> {
        let project = self.project(task).await?;
        let RoleAgent {
            agent,
            model,
            effort,
        } = who;
        let model_label = model.clone();
        // The project's privacy is checked again at every turn (the config may have
        // changed since the task was stored), for the agent that plays it now: a
        // refused role never starts.
        let privacy = self.agent_privacy(&project.name, role, &agent);
        if let Some(refusal) = &privacy.refusal {
            return Err(fail(refusal.clone()));
        }
        let now = crate::fallback::now_ms();
        let threshold = self.settings.fallback.retry_after_secs;
        let backend = match self
            .agents
            .backend(&agent, model.as_deref(), effort.as_deref())
        {
            Ok(b) => b,
            Err(e) => {
                seen.outage = classify(&Symptom::Start(&e, None), threshold, now);
                return Err(fail(e));
            }
        };
        let mut opts = self.start_options(
            task,
            &project,
            role.as_str(),
            mode,
            wt,
            &agent,
            model,
            effort.as_deref(),
        );
        opts.max_retry_wait = seen.max_retry_wait;
        // A masked (cloud) role works in an empty directory of its own and may read
        // nothing of the project: all it sees of it is the masked prompt.
        // People's messages to it are masked with its step's table, like its prompt.
        let masker = if privacy.masked {
            opts.local_only = false;
            opts.workspace = self.masked_workspace(&task.id).map_err(fail)?;
            opts.readable = Vec::new();
            let masker = self.masks.of(&task.id, &step.id).ok_or_else(|| {
                fail(format!(
                    "the {role} of step `{}` would run masked, but the step masked nothing: not starting {agent}",
                    step.name
                ))
            })?;
            Some(masker)
        } else {
            None
        };
        // Every role is told what the project's people keep for every task, except a
        // masked one: the notes are the project's own words, unmasked.
        let prompt = if privacy.masked {
            prompt.to_owned()
        } else {
            crate::memory::with_memory(self.project_memory(&project.name), prompt.to_owned())
        };
        let mut budget = crate::budget::MidTurn::new(self, task, step).await?;
        let gate = Arc::new(Gate::new(self.clone(), task.clone(), step.clone()));
        let (session_id, mut session) = self
            .open_session(task, step, role, &agent, backend.as_ref(), opts, gate, seen)
            .await?;
        let mut watch = crate::stall::Watch::new(
            self,
            task,
            step,
            &session_id,
            self.settings.watchdog_for(&project.name),
            mode == Mode::ReadWrite,
        );
        let outcome = self
            .converse(
                task,
                step,
                &session_id,
                session.as_mut(),
                model_label.as_deref(),
                &mut watch,
                &mut budget,
                masker,
                prompt,
                cancel,
                contract,
                seen,
            )
            .await;
        watch.close("the agent's session ended").await;
        budget.close("the agent's session ended").await;
        let _ = session.shutdown().await;
        let reason = match &outcome {
            Ok(_) => "turn finished".to_owned(),
            Err(Failure::Cancelled) => "cancelled".to_owned(),
            Err(Failure::Step(StepFailure(e)) | Failure::Spent(StepFailure(e), _)) => {
                prompts::head(e, 300)
            }
            Err(Failure::Engine(e)) => prompts::head(&e.to_string(), 300),
        };
        let _ = self
            .append(&task.id, vec![Event::SessionEnded { session_id, reason }])
            .await;
        outcome
    }

    /// How an agent playing `role` for `task` starts in `wt`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn start_options(
        &self,
        task: &TaskState,
        project: &gaffer_core::ProjectState,
        role: &str,
        mode: Mode,
        wt: &Worktree,
        agent: &str,
        model: Option<String>,
        effort: Option<&str>,
    ) -> StartOptions {
        let mut env = self.settings.agent_env.clone();
        if let Some(tokens) = effort
            .filter(|_| agent == "claude")
            .and_then(crate::agents::claude_thinking_tokens)
        {
            env.insert("MAX_THINKING_TOKENS".into(), tokens);
        }
        // A dev server the agent starts listens where the task's setup said.
        if let Some(port) = crate::steps::command::task_port(task) {
            env.insert("GAFFER_PORT".into(), port.to_string());
        }
        StartOptions {
            workspace: wt.path.clone(),
            role: role.into(),
            role_prompt: String::new(),
            mode,
            env,
            task_id: task.id.0.clone(),
            project: project.name.clone(),
            model,
            sandbox: self.settings.sandbox.clone(),
            state_dir: Some(self.agent_state_dir(&task.id)),
            // The worktree's objects and refs live in the repository's `.git`.
            readable: vec![std::path::PathBuf::from(&project.path)],
            lock: Some(self.turn_lock(&task.id)),
            // Set by a turn another agent can take over (`session_turn`).
            max_retry_wait: None,
            // Outside `standard` every agent that sees the project must stay local
            // (a masked cloud planner is unset again by `session_turn`).
            local_only: self.settings.privacy.mode(&project.name)
                != gaffer_config::Privacy::Standard,
        }
    }

    /// The session a turn of `step` runs in. A turn of this step that a crash cut
    /// short left its session open: it is resumed, so the agent goes on in the
    /// conversation where it did what the worktree now holds. When the agent no
    /// longer has that conversation, a person decides whether a new one starts;
    /// never silently. Otherwise a new session is started and recorded.
    #[allow(clippy::too_many_arguments)]
    async fn open_session(
        &self,
        task: &TaskState,
        step: &Step,
        role: Role,
        agent: &str,
        backend: &dyn AgentBackend,
        opts: StartOptions,
        gate: Arc<Gate>,
        seen: &mut Watch,
    ) -> Result<(SessionId, Box<dyn AgentSession>), Failure> {
        if let Some((open, agent_session)) =
            interrupted_session(task, &step.id).filter(|(s, _)| s.role == role && s.agent == agent)
        {
            match backend
                .resume(opts.clone(), agent_session, gate.clone())
                .await
            {
                Ok(session) => {
                    tracing::info!(task = %task.id, step = %step.id, session = %open.id, "resumed the interrupted {agent} conversation");
                    return Ok((open.id.clone(), session));
                }
                Err(AgentError::SessionGone { detail, .. }) => {
                    self.session_gone(task, step, open, agent, agent_session, &detail)
                        .await?;
                }
                Err(e) => {
                    return Err(fail(format!(
                        "cannot resume the interrupted {agent} conversation `{agent_session}`: {e}"
                    )))
                }
            }
        }
        let session = match backend.start(opts, gate).await {
            Ok(s) => s,
            Err(e) => {
                let detail = format!("cannot start {agent}: {e}");
                let threshold = self.settings.fallback.retry_after_secs;
                let now = crate::fallback::now_ms();
                seen.outage = classify(&Symptom::Start(&detail, Some(&e)), threshold, now);
                return Err(fail(detail));
            }
        };
        let session_id = self
            .record_session(task, step, role, agent, session.record())
            .await?;
        Ok((session_id, session))
    }

    /// Record a session just started for `step`: its agent's own id, and whether the
    /// agent already confirmed it.
    pub(crate) async fn record_session(
        &self,
        task: &TaskState,
        step: &Step,
        role: Role,
        agent: &str,
        record: gaffer_agents::SessionRecord,
    ) -> Result<SessionId, Failure> {
        let session_id = SessionId(gaffer_app::new_id("s"));
        let mut events = vec![Event::SessionStarted {
            session_id: session_id.clone(),
            agent: agent.to_owned(),
            role,
            workspace_key: record.workspace_key.clone(),
            agent_session_id: Some(record.session_id.clone()),
            step_id: Some(step.id.clone()),
        }];
        // Codex and ACP agents name the conversation themselves: their answer to
        // starting it is the agent's own record of the id.
        if record.verified {
            events.push(Event::SessionVerified {
                session_id: session_id.clone(),
                agent_session_id: record.session_id,
            });
        }
        self.append(&task.id, events).await?;
        Ok(session_id)
    }

    /// The agent no longer has the conversation a crash interrupted: a person is
    /// told and decides. Approved, the old session is ended and a new one may
    /// start; denied, the step fails.
    async fn session_gone(
        &self,
        task: &TaskState,
        step: &Step,
        open: &Session,
        agent: &str,
        agent_session: &str,
        detail: &str,
    ) -> Result<(), Failure> {
        let summary = format!(
            "`{}` was interrupted by a crash and {agent} no longer has its conversation `{agent_session}` ({detail}); approve to go on in a new conversation (the agent will not remember what it did; the worktree keeps it), deny to fail the task",
            step.name
        );
        let details = json!({
            "step": step.id,
            "agent": agent,
            "agent_session_id": agent_session,
            "session": open.id,
            "detail": detail,
        });
        // The step's own question about its session: attempt × 1000 is the one key
        // of this attempt that the gate's tool approvals (× 1000 + n, n ≥ 1) never use.
        let resolution = self
            .ask(
                task,
                step,
                step.attempt * 1000,
                ApprovalKind::Manual,
                summary,
                details,
                Subject::default(),
            )
            .await?;
        self.append(
            &task.id,
            vec![Event::SessionEnded {
                session_id: open.id.clone(),
                reason: format!("could not be resumed: {detail}"),
            }],
        )
        .await?;
        if resolution.approved() {
            Ok(())
        } else {
            Err(fail(format!(
                "{agent} no longer has the conversation `{agent_session}` that a crash interrupted ({detail}), and no new one was started: {}",
                resolution.reason()
            )))
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn converse(
        &self,
        task: &TaskState,
        step: &Step,
        session_id: &SessionId,
        session: &mut dyn AgentSession,
        model: Option<&str>,
        watch: &mut crate::stall::Watch,
        budget: &mut crate::budget::MidTurn,
        masker: Option<crate::masks::SharedMasker>,
        prompt: String,
        cancel: &CancellationToken,
        contract: &impl Fn(&str) -> Result<Value, ContractError>,
        seen: &mut Watch,
    ) -> Result<Turn, Failure> {
        let threshold = self.settings.fallback.retry_after_secs;
        let mut usage = Usage::default();
        let mut refused = Vec::new();
        let mut live = Live::new(self, &task.id, session_id, masker);
        // A person stopped this session's turn and a crash came before their
        // message: the resumed step waits for it, as the stopped one did.
        let mut people = if live.waits().await? {
            live.next_prompt(true, cancel).await?
        } else {
            None
        };
        let mut prompt = people.as_ref().map_or(prompt, |p| p.prompt.clone());
        let mut tries = 0;
        loop {
            if people.is_none() {
                tries += 1;
            }
            self.within_budget(task, step, &usage).await?;
            budget.turn_started(&usage);
            let turn_started = std::time::Instant::now();
            session
                .send_turn(&prompt)
                .await
                .map_err(|e| fail(format!("agent turn: {e}")))?;
            watch.turn_started();
            if let Some(turn) = people.take() {
                live.sent(&turn).await?;
            }
            live.steer(session).await?;
            let result = loop {
                let event = tokio::select! {
                    ev = session.next_event() => ev,
                    () = cancel.cancelled() => {
                        let _ = session.interrupt().await;
                        return Err(Failure::Cancelled);
                    }
                    () = live.changed() => {
                        live.steer(session).await?;
                        continue;
                    }
                    wake = watch.wake() => {
                        match wake {
                            crate::stall::Wake::Alarm => watch.ask_if_stalled().await?,
                            crate::stall::Wake::Decided(d) => watch.apply(d, session, &mut live, true).await?,
                        }
                        continue;
                    }
                    decided = budget.wake() => {
                        budget.apply(decided, Some(session)).await?;
                        continue;
                    }
                };
                let event = match event {
                    None => {
                        return Err(fail(
                            "the agent ended the session before finishing its turn",
                        ))
                    }
                    Some(Err(e)) => {
                        seen.outage =
                            classify(&Symptom::Stream(&e), threshold, crate::fallback::now_ms());
                        return Err(fail(format!("agent: {e}")));
                    }
                    Some(Ok(ev)) => ev,
                };
                watch.observe(&event).await?;
                budget.observe(&event).await?;
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
                    AgentEvent::MessageDelivered {
                        message_id,
                        delivery,
                    } => live.reported(message_id, *delivery).await?,
                    // The spend so far is for the caps and the watchdog; the
                    // turn's `usage` is what is recorded.
                    AgentEvent::PermissionRequested { .. }
                    | AgentEvent::PermissionResolved { .. }
                    | AgentEvent::UsageSoFar { .. } => {}
                    other => {
                        match other {
                            AgentEvent::ToolCall { name, .. } if has_effect(name) => {
                                seen.effects = true;
                            }
                            AgentEvent::RateLimited { until, .. } => {
                                seen.rate_limited_until = humantime::parse_rfc3339_weak(until)
                                    .ok()
                                    .or_else(|| humantime::parse_rfc3339(until).ok())
                                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                                    .and_then(|d| i64::try_from(d.as_millis()).ok());
                            }
                            _ => {}
                        }
                        if let AgentEvent::ToolResult { output, .. } = other {
                            if let Some(at) = output.find(REFUSED_BY_SANDBOX) {
                                refused.push(prompts::head(output[..at].trim(), 300));
                            }
                        }
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
            self.append(
                &task.id,
                vec![Event::AgentActivity {
                    step_id: step.id.clone(),
                    activity: turn_ended(session_id, model, &result, turn_started.elapsed()),
                }],
            )
            .await?;
            usage += result.usage;
            watch.turn_ended();
            // Over a cap during the turn: answered before its result counts.
            budget.settle(&usage, cancel).await?;
            // The watchdog asked about this turn: the answer comes before its result counts.
            watch.settle(session, &mut live, cancel).await?;
            match result.status {
                TurnStatus::Completed => {}
                // A person stopped the turn: the session's next turn is their next message.
                TurnStatus::Interrupted if live.stopped_by_a_person() => {
                    people = live.next_prompt(true, cancel).await?;
                    if let Some(p) = &people {
                        prompt = p.prompt.clone();
                    }
                    continue;
                }
                TurnStatus::Interrupted => return Err(Failure::Cancelled),
                other => {
                    seen.outage = classify(
                        &Symptom::Turn(&result, seen.rate_limited_until),
                        threshold,
                        crate::fallback::now_ms(),
                    );
                    return Err(fail_spent(
                        format!(
                            "the agent's turn ended {other:?}: {}",
                            result
                                .reason
                                .clone()
                                .unwrap_or_else(|| prompts::head(&result.text, 500))
                        ),
                        &usage,
                    ));
                }
            }
            // People's messages the turn could not take: the session answers them
            // before its answer counts.
            people = live.next_prompt(false, cancel).await?;
            if let Some(p) = &people {
                prompt = p.prompt.clone();
                continue;
            }
            match contract(&result.text) {
                Ok(parsed) => {
                    return Ok(Turn {
                        text: result.text,
                        usage,
                        parsed: Ok(parsed),
                        refused,
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
                        refused,
                    })
                }
            }
        }
    }
}

impl Engine {
    /// Where the task's agent sessions keep their state: private to gaffer, kept for
    /// resume (see `gaffer_agents::StartOptions::state_dir`).
    pub(crate) fn agent_state_dir(&self, task: &gaffer_core::TaskId) -> std::path::PathBuf {
        self.settings.data_dir.join("agents").join(task.as_str())
    }

    /// The empty directory a masked role of `task` works in, made (emptied) now.
    fn masked_workspace(&self, task: &gaffer_core::TaskId) -> Result<std::path::PathBuf, String> {
        let dir = self.settings.data_dir.join("masked").join(task.as_str());
        let made = match std::fs::remove_dir_all(&dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => std::fs::create_dir_all(&dir),
        };
        made.map_err(|e| {
            format!(
                "cannot make the masked planner's empty directory {}: {e}",
                dir.display()
            )
        })?;
        Ok(dir)
    }

    /// The lock every process of the task's turns and checks holds while alive; crash
    /// recovery waits on it before it probes the worktree.
    pub(crate) fn turn_lock(&self, task: &gaffer_core::TaskId) -> std::path::PathBuf {
        self.settings
            .data_dir
            .join("run")
            .join(format!("{}.lock", task.as_str()))
    }
}

/// Who plays a role in one task.
pub(crate) struct RoleAgent {
    pub(crate) agent: String,
    pub(crate) model: Option<String>,
    pub(crate) effort: Option<String>,
}

/// What a turn produced.
pub(crate) struct Turn {
    pub(crate) text: String,
    pub(crate) usage: Usage,
    pub(crate) parsed: Result<Value, ContractError>,
    /// Tool results the sandbox refused (what the command said, cut short).
    pub(crate) refused: Vec<String>,
}

impl Turn {
    /// The answer as its contract reads it; else the step fails with what was wrong
    /// (the agent was already asked again once). `what` names the answer.
    pub(crate) fn contracted(&self, what: &str) -> Result<Value, Failure> {
        self.parsed.clone().map_err(|e| {
            fail_spent(
                format!("{what} is not valid after a retry: {}", e.brief()),
                &self.usage,
            )
        })
    }
}

/// The session a crash left open in `step` (a turn was running in it when the
/// process died), with the agent's own id for it.
pub(crate) fn interrupted_session<'a>(
    task: &'a TaskState,
    step: &StepId,
) -> Option<(&'a Session, &'a str)> {
    task.sessions
        .values()
        .filter(|s| s.ended.is_none() && s.step_id.as_ref() == Some(step))
        .filter_map(|s| Some((s, s.agent_session_id.as_deref()?)))
        .max_by_key(|(s, _)| s.started_at)
}

/// A journal-sized view of an agent event: every string (tool inputs included, at
/// any depth) cut to [`ACTIVITY_STRING`] bytes and the whole to [`ACTIVITY_TOTAL`].
fn activity(event: &AgentEvent) -> Option<Value> {
    let v = serde_json::to_value(event).ok()?;
    Some(gaffer_app::sanitize::cap_value(
        v,
        ACTIVITY_STRING,
        ACTIVITY_TOTAL,
    ))
}

/// The record of one finished turn (how it ended, how long it took, on which
/// model) that `/metrics` folds into its turn durations; no usage here, the
/// step's receipt is where a turn's spend is counted.
pub(crate) fn turn_ended(
    session_id: &SessionId,
    model: Option<&str>,
    result: &gaffer_agents::TurnResult,
    took: std::time::Duration,
) -> Value {
    json!({
        "type": "turn_ended",
        "session_id": session_id,
        "status": result.status,
        "model": model,
        "duration_ms": took.as_millis() as u64,
    })
}

/// The longest string of an agent event the journal keeps, in bytes.
pub(crate) const ACTIVITY_STRING: usize = 2000;
/// The largest agent event (as JSON) the journal keeps, in bytes.
pub(crate) const ACTIVITY_TOTAL: usize = 16 * 1024;
