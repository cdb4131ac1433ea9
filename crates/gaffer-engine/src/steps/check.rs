//! The project's own check command, run in the worktree confined like the owner
//! ([`crate::steps::command`]).

use crate::failure::Failure;
use crate::steps::command::task_port;
use crate::Engine;
use gaffer_core::TaskState;
use serde_json::{json, Value};

impl Engine {
    pub(crate) async fn check(&self, task: &TaskState) -> Result<Value, Failure> {
        let wt = self.worktree(task).await?;
        let project = self.project(task).await?;
        let Some(command) = project.check_command.clone() else {
            return Ok(
                json!({ "passed": true, "command": null, "note": "no check command configured" }),
            );
        };
        let env = self.project_command_env(task, &project, task_port(task));
        let run = self
            .run_project_command(task, &project, &wt, "the check", &command, &env)
            .await?;
        let mut receipt = json!({
            "passed": run.passed,
            "command": command,
            "exit_code": run.exit_code,
            "output_tail": run.output_tail,
            "duration_ms": run.duration_ms,
        });
        if let Some(note) = run.sandbox {
            receipt["sandbox"] = json!(note);
        }
        Ok(receipt)
    }
}
