//! The planner's turn (read-only) and the plan's approval by a person.

use crate::failure::{fail, fail_spent, Failure};
use crate::pipeline::plan_of;
use crate::{prompts, Engine};
use gaffer_agents::Mode;
use gaffer_app::Subject;
use gaffer_core::{ApprovalKind, Role, Step, TaskState};
use gaffer_protocol::contracts::Plan;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

impl Engine {
    pub(crate) async fn plan(
        &self,
        task: &TaskState,
        step: &Step,
        cancel: &CancellationToken,
    ) -> Result<Value, Failure> {
        let wt = self.worktree(task).await?;
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
            Err(e) => Err(fail_spent(
                format!(
                    "the planner's answer is not a valid plan after a retry: {}",
                    e.brief()
                ),
                &turn.usage,
            )),
        }
    }

    pub(crate) async fn plan_approval(
        &self,
        task: &TaskState,
        step: &Step,
    ) -> Result<Value, Failure> {
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
}
