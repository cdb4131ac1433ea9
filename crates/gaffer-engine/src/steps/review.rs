//! The reviewer's turn: read-only, over the diff and the task's history; its
//! verdict decides between the checks, a fix and the arbiter.

use crate::failure::Failure;
use crate::pipeline::{plan_of, StepKind};
use crate::{prompts, Engine};
use gaffer_agents::Mode;
use gaffer_core::{Role, Step, TaskState};
use gaffer_protocol::contracts::Verdict;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

impl Engine {
    pub(crate) fn history(&self, task: &TaskState) -> String {
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

    pub(crate) async fn review(
        &self,
        task: &TaskState,
        step: &Step,
        cancel: &CancellationToken,
    ) -> Result<Value, Failure> {
        let wt = self.worktree(task).await?;
        let plan = plan_of(task)
            .map(|p| prompts::plan_text(&p))
            .unwrap_or_default();
        let diff = wt.diff()?;
        let history = format!("Earlier in this task:\n{}", self.history(task));
        let changed = wt.changed_files().unwrap_or_default();
        let context = self
            .repo_context(
                task,
                step,
                Role::Reviewer,
                &wt,
                &task.request,
                Some(changed),
            )
            .await?;
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
        self.propose_memory(task, step, &turn.text).await?;
        let verdict = turn.parsed.unwrap_or_else(|e| {
            json!(Verdict::Blocked {
                reason: format!(
                    "the reviewer's verdict could not be read after a retry: {}",
                    e.brief()
                )
            })
        });
        Ok(json!({ "verdict": verdict, "usage": turn.usage }))
    }
}
