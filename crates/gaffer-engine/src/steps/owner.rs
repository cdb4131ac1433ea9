//! The owner's turns: a subtask of the plan (`code/N`) or a fix (`fix/N`), in the
//! worktree, read-write. Non-idempotent: after a crash a person decides.

use crate::failure::{fail, Failure};
use crate::pipeline::plan_of;
use crate::{prompts, Engine};
use gaffer_agents::Mode;
use gaffer_core::{Role, Step, TaskState};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

impl Engine {
    pub(crate) async fn owner_turn(
        &self,
        task: &TaskState,
        step: &Step,
        assignment: &str,
        cancel: &CancellationToken,
    ) -> Result<Value, Failure> {
        let wt = self.worktree(task).await?;
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
            .repo_context(
                task,
                step,
                Role::Owner,
                &wt,
                &format!("{}\n{assignment}", task.request),
                None,
            )
            .await?;
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
        self.propose_memory(task, step, &turn.text).await?;
        let files = wt.changed_files().unwrap_or_default();
        let mut receipt = json!({ "summary": prompts::head(&turn.text, 4000), "usage": turn.usage, "changed_files": files });
        // A fix says what it answered (`review`, `arbiter`, `check`, `ci`), for the
        // front ends, which do not see the step's input.
        if let Some(reason) = step.input.get("reason") {
            receipt["reason"] = reason.clone();
        }
        if !turn.refused.is_empty() {
            // The step says what the sandbox refused (the task page shows the receipt and
            // each tool result with where writing is allowed).
            receipt["sandbox_refused"] = json!(turn.refused);
        }
        Ok(receipt)
    }
}

/// The owner's instructions for a fix, from the fix step's input.
pub(crate) fn fix_assignment(input: &Value) -> String {
    let detail = &input["detail"];
    match input.get("reason").and_then(Value::as_str) {
        Some("review") => format!("The reviewer asks for changes:\n{}", detail.as_str().unwrap_or_default()),
        Some("arbiter") => format!("The arbiter rules that you must revise:\n{}", detail.as_str().unwrap_or_default()),
        Some("ci") => super::ship::ci_fix_assignment(detail),
        Some(crate::pipeline::follow_up::review::KIND) => {
            super::follow_up::review_fix_assignment(detail)
        }
        Some("tests") => format!(
            "The tester's tests fail: the project's check `{}` exits {}. The end of its output:\n```\n{}\n```\nFix the code so that the tests pass; change a test only if it is wrong about the acceptance criterion, and say why.",
            detail.get("command").and_then(Value::as_str).unwrap_or("?"),
            detail.get("exit_code").map(Value::to_string).unwrap_or_else(|| "?".into()),
            detail.get("output_tail").and_then(Value::as_str).unwrap_or_default(),
        ),
        Some("check") => format!(
            "The project's check `{}` failed (exit code {}). The end of its output:\n```\n{}\n```\n{}Find and fix the cause.",
            detail.get("command").and_then(Value::as_str).unwrap_or("?"),
            detail.get("exit_code").map(Value::to_string).unwrap_or_else(|| "?".into()),
            detail.get("output_tail").and_then(Value::as_str).unwrap_or_default(),
            detail
                .get("sandbox")
                .and_then(Value::as_str)
                .map(|s| format!("{s}.\n"))
                .unwrap_or_default()
        ),
        _ => format!("Fix this:\n{detail}"),
    }
}

/// The owner's instructions for subtask `n` of the plan.
pub(crate) fn code_assignment(task: &TaskState, n: u32) -> Result<String, Failure> {
    let plan = plan_of(task).ok_or_else(|| fail("the plan is missing"))?;
    let sub = plan
        .subtasks
        .get(n as usize - 1)
        .ok_or_else(|| fail(format!("the plan has no subtask {n}")))?;
    Ok(format!(
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
    ))
}
