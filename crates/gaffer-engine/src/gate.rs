//! Approvals asked by steps: [`Engine::ask`] records one and waits for its
//! decision; [`Gate`] turns each permission request of an agent into one.

use crate::error::EngineError;
use crate::failure::Failure;
use crate::pipeline::StepKind;
use crate::{keys, prompts, Engine};
use gaffer_agents::{ApprovalGate, PermissionDecision, PermissionRequest};
use gaffer_app::{ApprovalRequest, Subject};
use gaffer_core::{ApprovalKind, Intent, Step, TaskState};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU32, Ordering};

impl Engine {
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
}

/// The receipt of a step that asked a person: the approval and its reason when
/// approved; else the person's reason, for the step's failure.
pub(crate) fn answered(resolution: &gaffer_app::Resolution) -> Result<Value, String> {
    if resolution.approved() {
        Ok(
            json!({ "approval": resolution.approval.id, "decision": "approve", "reason": resolution.reason() }),
        )
    } else {
        Err(resolution.reason())
    }
}

/// Turns every permission request of one step into one gaffer approval.
pub(crate) struct Gate {
    engine: Engine,
    task: TaskState,
    step: Step,
    /// Panel member index (from 0), or `None` for the step's own session.
    member: Option<usize>,
    asked: AtomicU32,
}

impl Gate {
    /// The gate for a session of one attempt of `step`. Its keys follow those an
    /// earlier session of the attempt asked (an agent that was out, see `fallback`):
    /// never the same key, so no earlier answer counts for another request.
    pub(crate) fn new(engine: Engine, task: TaskState, step: Step) -> Self {
        Self::asking(engine, task, step, None)
    }

    /// The gate of panel member `index` (from 0) in one attempt of the arbiter
    /// `step`: members ask in parallel, each in its own key range
    /// ([`keys::member_tool`]), apart from the arbiter's own.
    pub(crate) fn for_member(engine: Engine, task: TaskState, step: Step, index: usize) -> Self {
        Self::asking(engine, task, step, Some(index))
    }

    fn asking(engine: Engine, task: TaskState, step: Step, member: Option<usize>) -> Self {
        let who = member.map(|m| m as u32);
        let asked = task
            .approvals
            .values()
            .filter(|a| a.step_id == step.id)
            .filter_map(|a| keys::tool_request_of(step.attempt, a.attempt))
            .filter(|(m, _)| *m == who)
            .map(|(_, n)| n)
            .max()
            .unwrap_or(0);
        Self {
            engine,
            task,
            step,
            member,
            asked: AtomicU32::new(asked),
        }
    }

    /// The key of the next request, or `None` past this session's range.
    fn next_key(&self) -> Option<u32> {
        let n = self.asked.fetch_add(1, Ordering::SeqCst) + 1;
        match self.member {
            None => keys::tool(self.step.attempt, n),
            Some(m) => keys::member_tool(self.step.attempt, m, n),
        }
    }
}

/// The read-only role a step is played by, if it is one.
fn read_only_role(step: &Step) -> Option<&'static str> {
    match StepKind::of(&step.id)? {
        StepKind::Plan | StepKind::Revise(_) => Some("planner"),
        StepKind::Challenge(_) => Some("challenger"),
        StepKind::Review(_) => Some("reviewer"),
        StepKind::Arbiter(_) => Some("arbiter"),
        _ => None,
    }
}

#[async_trait::async_trait]
impl ApprovalGate for Gate {
    async fn decide(&self, request: PermissionRequest) -> PermissionDecision {
        // The planner, reviewer and arbiter only read: what writes or runs anything
        // else is refused before any policy, `--yes` or the auto switch is asked.
        if let Some(role) = read_only_role(&self.step) {
            if let Some(why) = crate::read_only::refusal(role, &request) {
                tracing::info!(step = %self.step.id, tool = %request.tool_name, "refused for a read-only role");
                return PermissionDecision::deny(why);
            }
        }
        // One approval per request of this step attempt, each with its own key.
        let Some(attempt) = self.next_key() else {
            tracing::warn!(step = %self.step.id, tool = %request.tool_name, "past the approvals one attempt may ask");
            return PermissionDecision::deny(format!(
                "refused: this step has already asked for {} approvals; gaffer asks no more in one attempt. Finish with what you have, or stop.",
                if self.member.is_some() { keys::MEMBER_TOOL_REQUESTS } else { keys::TOOL_REQUESTS }
            ));
        };
        // The backend read the command line and the paths out of the agent's own request.
        let command = request.command.clone();
        let paths = request.paths.clone();
        let what = command
            .clone()
            .or_else(|| paths.first().cloned())
            .unwrap_or_else(|| prompts::head(&request.input.to_string(), 200));
        let summary = prompts::head(
            &format!(
                "{} wants to run {}: {}",
                self.step.name, request.tool_name, what
            ),
            1000,
        );
        let subject = Subject {
            tool: Some(request.tool_name.clone()),
            command,
            paths,
            intent: Some(Intent::NonIdempotent),
        };
        // The agent's input as the journal keeps it: a 5 MB input is not stored whole.
        let input = gaffer_app::sanitize::cap_value(
            request.input,
            crate::turn::ACTIVITY_STRING,
            crate::turn::ACTIVITY_TOTAL,
        );
        let details = json!({ "tool": request.tool_name, "input": input, "reason": request.reason, "agent_request": request.id });
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
