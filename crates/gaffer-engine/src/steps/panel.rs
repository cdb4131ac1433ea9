//! The arbiter's panel (`[roles.arbiter] panel`): before each ruling, every member
//! gives its opinion in a fresh read-only session, all in parallel, and the arbiter
//! rules with every opinion in front of it (`steps::arbiter`).
//!
//! Each member's answer is recorded as it comes (a `panel_opinion` event inside the
//! running arbiter step): its recommendation and reason (the opinion contract, sent
//! back once when invalid), its whole answer redacted, and what it spent. A member
//! that fails (cannot start, errors, breaks the contract twice, or takes longer than
//! `panel_timeout_secs`) is recorded as failed with why, and the ruling goes on with
//! the others; when every member failed, the arbiter rules alone and is told so.
//!
//! **Crashes.** The arbiter step only reads, so it runs again after a crash; a member
//! whose answer (or failure) is recorded is not asked again, the others are asked in
//! new sessions (the sessions the crash cut short are ended first: a member never
//! goes on in a half-finished conversation). A panel member's people's messages: none;
//! a person's message waits for the arbiter's own turn.

use crate::failure::Failure;
use crate::gate::Gate;
use crate::{prompts, Engine};
use gaffer_agents::{AgentEvent, AgentSession, Mode, TurnStatus, Usage};
use gaffer_config::{Panel, PanelMember};
use gaffer_core::{Event, ProjectState, Role, SessionId, Step, StreamId, TaskState};
use gaffer_forge::Worktree;
use gaffer_protocol::contracts::Opinion;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The longest answer of a member the journal keeps, in bytes.
const OPINION_TEXT: usize = 8000;

/// One member's answer, as its `panel_opinion` event and the ruling's receipt hold it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct MemberOpinion {
    /// `agent[:model]`, as configured.
    pub(crate) member: String,
    pub(crate) agent: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) model: Option<String>,
    /// The opinion contract's `{"opinion","reason"}`; none when the member failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) opinion: Option<Opinion>,
    /// Its whole answer, redacted and cut short.
    #[serde(default)]
    pub(crate) text: String,
    /// Why it gave no opinion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
    #[serde(default)]
    pub(crate) usage: Usage,
}

impl MemberOpinion {
    fn event(&self, step: &Step) -> Event {
        Event::PanelOpinion {
            step_id: step.id.clone(),
            member: self.member.clone(),
            agent: self.agent.clone(),
            model: self.model.clone(),
            opinion: self.opinion.as_ref().map(|o| json!(o)),
            text: self.text.clone(),
            error: self.error.clone(),
            usage: json!(self.usage),
        }
    }
}

impl Engine {
    /// The panel's opinions for the arbiter `step`, in the configured order: those
    /// recorded before a crash as they are, the rest asked now, in parallel, each
    /// recorded as it comes. `prompt` is what every member is asked.
    pub(crate) async fn consult_panel(
        &self,
        task: &TaskState,
        step: &Step,
        panel: &Panel,
        wt: &Worktree,
        prompt: &str,
        cancel: &CancellationToken,
    ) -> Result<Vec<MemberOpinion>, Failure> {
        let recorded = self.recorded_opinions(task, step).await?;
        self.end_cut_short_member_sessions(task, step).await?;
        let project = self.project(task).await?;
        let limit = Duration::from_secs(panel.timeout_secs);
        let asked = panel
            .members
            .iter()
            .enumerate()
            .filter(|(_, m)| !recorded.iter().any(|r| r.member == m.label()))
            .map(|(index, member)| {
                self.ask_member(
                    task, step, &project, index, member, wt, prompt, limit, cancel,
                )
            });
        let fresh = futures::future::join_all(asked).await;
        let mut all = recorded;
        for answer in fresh {
            all.push(answer?);
        }
        all.sort_by_key(|o| {
            panel
                .members
                .iter()
                .position(|m| m.label() == o.member)
                .unwrap_or(usize::MAX)
        });
        // A member dropped from the config since the crash is not heard.
        all.retain(|o| panel.members.iter().any(|m| m.label() == o.member));
        Ok(all)
    }

    /// The opinions already recorded in this arbiter step (by an attempt a crash cut short).
    async fn recorded_opinions(
        &self,
        task: &TaskState,
        step: &Step,
    ) -> Result<Vec<MemberOpinion>, Failure> {
        let events = self
            .journal()
            .stream_events(&StreamId::from(&task.id), 0)
            .await
            .map_err(crate::error::EngineError::from)?;
        Ok(events
            .into_iter()
            .filter_map(|e| match e.event {
                Event::PanelOpinion {
                    step_id,
                    member,
                    agent,
                    model,
                    opinion,
                    text,
                    error,
                    usage,
                } if step_id == step.id => Some(MemberOpinion {
                    member,
                    agent,
                    model,
                    opinion: opinion.and_then(|o| serde_json::from_value(o).ok()),
                    text,
                    error,
                    usage: serde_json::from_value(usage).unwrap_or_default(),
                }),
                _ => None,
            })
            .collect())
    }

    /// Member sessions of this step a crash left open: ended, their members are asked
    /// again in new ones.
    async fn end_cut_short_member_sessions(
        &self,
        task: &TaskState,
        step: &Step,
    ) -> Result<(), Failure> {
        let ended: Vec<Event> = task
            .sessions
            .values()
            .filter(|s| {
                s.role == Role::Panelist
                    && s.ended.is_none()
                    && s.step_id.as_ref() == Some(&step.id)
            })
            .map(|s| Event::SessionEnded {
                session_id: s.id.clone(),
                reason: "interrupted by a crash; the member is asked again in a new session".into(),
            })
            .collect();
        if !ended.is_empty() {
            self.append(&task.id, ended).await?;
        }
        Ok(())
    }

    /// Ask one member and record what it said (or why it said nothing). Only a
    /// cancellation or the journal failing fails the step.
    #[allow(clippy::too_many_arguments)]
    async fn ask_member(
        &self,
        task: &TaskState,
        step: &Step,
        project: &ProjectState,
        index: usize,
        member: &PanelMember,
        wt: &Worktree,
        prompt: &str,
        limit: Duration,
        cancel: &CancellationToken,
    ) -> Result<MemberOpinion, Failure> {
        let mut usage = Usage::default();
        let answer = self
            .member_turn(
                task,
                step,
                project,
                (index, member),
                wt,
                prompt,
                limit,
                cancel,
                &mut usage,
            )
            .await;
        let redact = |s: &str| self.settings.redactor.redact(s);
        let said = match answer {
            Ok(text) => {
                let text = redact(&text);
                match Opinion::parse(&text) {
                    Ok(opinion) => MemberOpinion {
                        opinion: Some(opinion),
                        ..self.member_said(member, prompts::head(&text, OPINION_TEXT), None)
                    },
                    Err(e) => self.member_said(
                        member,
                        prompts::head(&text, OPINION_TEXT),
                        Some(format!(
                            "its answer is not a valid opinion after a retry: {}",
                            e.brief()
                        )),
                    ),
                }
            }
            Err(NoAnswer::Failed(e)) => self.member_said(member, String::new(), Some(redact(&e))),
            Err(NoAnswer::Stop(f)) => return Err(f),
        };
        let said = MemberOpinion { usage, ..said };
        tracing::info!(task = %task.id, step = %step.id, member = %said.member, ok = said.error.is_none(), "panel member answered");
        self.append(&task.id, vec![said.event(step)]).await?;
        Ok(said)
    }

    fn member_said(
        &self,
        member: &PanelMember,
        text: String,
        error: Option<String>,
    ) -> MemberOpinion {
        MemberOpinion {
            member: member.label(),
            agent: member.agent.clone(),
            model: member.model.clone(),
            opinion: None,
            text,
            error,
            usage: Usage::default(),
        }
    }

    /// One member's session: started fresh and read-only, asked (and asked again
    /// once when its answer breaks the contract), ended. Its final text, or why it
    /// has none; what it spent is added to `usage` as it goes.
    #[allow(clippy::too_many_arguments)]
    async fn member_turn(
        &self,
        task: &TaskState,
        step: &Step,
        project: &ProjectState,
        (index, member): (usize, &PanelMember),
        wt: &Worktree,
        prompt: &str,
        limit: Duration,
        cancel: &CancellationToken,
        usage: &mut Usage,
    ) -> Result<String, NoAnswer> {
        let deadline = Instant::now() + limit;
        let late = || {
            NoAnswer::Failed(format!(
                "gave no opinion within {} s (panel_timeout_secs)",
                limit.as_secs()
            ))
        };
        // A member reads what the arbiter reads: the project's privacy is checked for
        // its agent as for every other turn, and a refused member never starts.
        let privacy = self.agent_privacy(&project.name, Role::Panelist, &member.agent);
        if let Some(refusal) = privacy.refusal {
            return Err(NoAnswer::Failed(refusal));
        }
        let effort = self.roles_of(&project.name).arbiter.effort.clone();
        let backend = self
            .agents
            .backend(&member.agent, member.model.as_deref(), effort.as_deref())
            .map_err(NoAnswer::Failed)?;
        let opts = self.start_options(
            task,
            project,
            Role::Panelist.as_str(),
            Mode::ReadOnly,
            wt,
            &member.agent,
            member.model.clone(),
            effort.as_deref(),
        );
        let gate = Arc::new(Gate::for_member(
            self.clone(),
            task.clone(),
            step.clone(),
            index,
        ));
        let mut session = tokio::time::timeout_at(deadline, backend.start(opts, gate))
            .await
            .map_err(|_| late())?
            .map_err(|e| NoAnswer::Failed(format!("cannot start {}: {e}", member.agent)))?;
        let session_id = match self
            .record_session(task, step, Role::Panelist, &member.agent, session.record())
            .await
        {
            Ok(id) => id,
            Err(f) => {
                let _ = session.shutdown().await;
                return Err(NoAnswer::Stop(f));
            }
        };
        let answer = tokio::select! {
            a = tokio::time::timeout_at(deadline, self.opinion_turns(task, step, &session_id, member, session.as_mut(), prompt, usage)) => a.unwrap_or_else(|_| Err(late())),
            () = cancel.cancelled() => Err(NoAnswer::Stop(Failure::Cancelled)),
        };
        let _ = session.shutdown().await;
        let reason = match &answer {
            Ok(_) => "opinion given".to_owned(),
            Err(NoAnswer::Failed(e)) => prompts::head(e.as_str(), 300),
            Err(NoAnswer::Stop(_)) => "stopped".to_owned(),
        };
        self.append(&task.id, vec![Event::SessionEnded { session_id, reason }])
            .await
            .map_err(|e| NoAnswer::Stop(e.into()))?;
        answer
    }

    /// The member's turn, and its retry when the answer is not an opinion, each
    /// recorded as ended like every turn. No person's messages: a member is
    /// consulted, not steered.
    #[allow(clippy::too_many_arguments)]
    async fn opinion_turns(
        &self,
        task: &TaskState,
        step: &Step,
        session_id: &SessionId,
        member: &PanelMember,
        session: &mut dyn AgentSession,
        prompt: &str,
        usage: &mut Usage,
    ) -> Result<String, NoAnswer> {
        let err = NoAnswer::Failed;
        let mut prompt = prompt.to_owned();
        let mut tries = 0;
        loop {
            tries += 1;
            let started = std::time::Instant::now();
            session
                .send_turn(&prompt)
                .await
                .map_err(|e| err(format!("agent turn: {e}")))?;
            let result = loop {
                match session.next_event().await {
                    None => {
                        return Err(err(
                            "the agent ended the session before finishing its turn".into()
                        ))
                    }
                    Some(Err(e)) => return Err(err(format!("agent: {e}"))),
                    Some(Ok(AgentEvent::TurnCompleted { result })) => break result,
                    Some(Ok(_)) => {}
                }
            };
            let ended = crate::turn::turn_ended(
                session_id,
                member.model.as_deref(),
                &result,
                started.elapsed(),
            );
            self.append(
                &task.id,
                vec![Event::AgentActivity {
                    step_id: step.id.clone(),
                    activity: ended,
                }],
            )
            .await
            .map_err(|e| NoAnswer::Stop(e.into()))?;
            *usage += result.usage;
            if result.status != TurnStatus::Completed {
                return Err(err(format!(
                    "the agent's turn ended {:?}: {}",
                    result.status,
                    result
                        .reason
                        .clone()
                        .unwrap_or_else(|| prompts::head(&result.text, 500))
                )));
            }
            match Opinion::parse(&result.text) {
                Err(e) if tries < 2 => {
                    prompt = prompts::fill(prompts::RETRY, &[("error", &e.to_string())]);
                }
                // The caller reads it again (redacted) and records why it is not one.
                _ => return Ok(result.text),
            }
        }
    }
}

/// Why a member gave no answer: recorded as its failure, or what stops the step.
enum NoAnswer {
    Failed(String),
    Stop(Failure),
}

/// The opinions as the arbiter reads them.
pub(crate) fn opinions_text(opinions: &[MemberOpinion]) -> String {
    if opinions.is_empty() {
        return String::new();
    }
    let given = opinions.iter().filter(|o| o.opinion.is_some()).count();
    let lines: Vec<String> = opinions
        .iter()
        .enumerate()
        .map(|(i, o)| match (&o.opinion, &o.error) {
            (Some(op), _) => format!(
                "{}. {} recommends {}: {}",
                i + 1,
                o.member,
                op.opinion.as_str(),
                op.reason
            ),
            (None, e) => format!(
                "{}. {} gave no opinion ({})",
                i + 1,
                o.member,
                e.as_deref().unwrap_or("no answer")
            ),
        })
        .collect();
    let head = if given == 0 {
        "\nYour panel gave no opinion (every member failed): rule on your own reading.\n"
    } else {
        "\nYour panel's opinions (each member read what you read and answered on its own; weigh their evidence, the ruling is yours):\n"
    };
    format!("{head}\n{}\n", lines.join("\n"))
}
