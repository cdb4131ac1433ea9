//! The tester's turn (once before review, see [`crate::pipeline`]): in the worktree,
//! read-write like the owner, it writes tests for each subtask's acceptance criterion
//! and answers with the files it wrote. Committed on its own (`commit-test/N`, its own
//! `Gaffer-Step` trailer); an answer that breaks the contract is sent back once, then
//! fails the step with what was wrong.

use crate::failure::{fail, Failure};
use crate::pipeline::plan_of;
use crate::{prompts, Engine};
use gaffer_agents::Mode;
use gaffer_core::{Role, Step, TaskState};
use gaffer_protocol::contracts::TestReport;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

impl Engine {
    pub(crate) async fn tester_turn(
        &self,
        task: &TaskState,
        step: &Step,
        cancel: &CancellationToken,
    ) -> Result<Value, Failure> {
        let wt = self.worktree(task).await?;
        let project = self.project(task).await?;
        let plan = plan_of(task).ok_or_else(|| fail("the plan is missing"))?;
        let diff = self.settings.redactor.redact(&wt.diff()?);
        let context = self
            .repo_context(task, step, Role::Tester, &wt, &task.request, None)
            .await?;
        let prompt = prompts::fill(
            prompts::TESTER,
            &[
                ("request", &task.request),
                ("plan", &prompts::plan_text(&plan)),
                ("diff", &prompts::head(&diff, 60_000)),
                (
                    "check",
                    project
                        .check_command
                        .as_deref()
                        .unwrap_or("(none configured)"),
                ),
                ("context", &context),
            ],
        );
        let turn = self
            .agent_turn(
                task,
                step,
                Role::Tester,
                Mode::ReadWrite,
                &wt,
                prompt,
                cancel,
                |text| TestReport::parse(text).map(|r| json!(r)),
            )
            .await?;
        let report = turn.contracted("the tester's answer")?;
        let files = wt.changed_files().unwrap_or_default();
        Ok(
            json!({ "report": report, "usage": turn.usage, "changed_files": files, "summary": prompts::head(&turn.text, 4000) }),
        )
    }

    /// `commit-test/N`: the tester's tests, on their own commit.
    pub(crate) async fn commit_tests(
        &self,
        task: &TaskState,
        step: &Step,
    ) -> Result<Value, Failure> {
        self.commit(task, step, "Tests for the acceptance criteria")
            .await
    }
}
