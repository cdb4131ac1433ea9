//! One agent session for one step: the role's agent is started in the worktree,
//! given the prompt, its events streamed into the journal, its answer checked
//! against the role's contract (asked again once), and the session ended.

use crate::error::StepFailure;
use crate::failure::{fail, Failure};
use crate::gate::Gate;
use crate::{prompts, Engine};
use gaffer_agents::sandbox::REFUSED_BY_SANDBOX;
use gaffer_agents::{AgentEvent, AgentSession, Mode, StartOptions, TurnStatus, Usage};
use gaffer_core::{Event, Role, SessionId, Step, TaskState};
use gaffer_forge::Worktree;
use gaffer_protocol::contracts::ContractError;
use serde_json::Value;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

impl Engine {
    /// The agent and model for `role`: `--agent` for every role, else the project's
    /// override, else the configured role.
    pub(crate) fn role_agent(&self, task: &TaskState, project: &str, role: Role) -> RoleAgent {
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

    /// One agent session for one step: start, send the prompt, stream events into
    /// the journal, retry once if the answer breaks its contract, stop.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn agent_turn(
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
            state_dir: Some(self.agent_state_dir(&task.id)),
            // The worktree's objects and refs live in the repository's `.git`.
            readable: vec![std::path::PathBuf::from(&project.path)],
            lock: Some(self.turn_lock(&task.id)),
        };
        let gate = Arc::new(Gate::new(self.clone(), task.clone(), step.clone()));
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
    pub(crate) async fn converse(
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
        let mut refused = Vec::new();
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

/// The longest string of an agent event the journal keeps, in bytes.
pub(crate) const ACTIVITY_STRING: usize = 2000;
/// The largest agent event (as JSON) the journal keeps, in bytes.
pub(crate) const ACTIVITY_TOTAL: usize = 16 * 1024;
