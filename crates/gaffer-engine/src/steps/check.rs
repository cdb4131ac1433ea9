//! The project's own check command, run in the worktree.

use crate::failure::{fail, Failure};
use crate::{prompts, Engine};
use gaffer_core::TaskState;
use serde_json::{json, Value};
use std::time::Instant;

impl Engine {
    pub(crate) async fn check(&self, task: &TaskState) -> Result<Value, Failure> {
        let wt = self.worktree(task)?;
        let project = self.project(task).await?;
        let Some(command) = project.check_command.clone() else {
            return Ok(
                json!({ "passed": true, "command": null, "note": "no check command configured" }),
            );
        };
        let started = Instant::now();
        let run = tokio::process::Command::new("sh")
            .arg("-c")
            .arg(&command)
            .current_dir(&wt.path)
            .env("GAFFER_TASK_ID", task.id.as_str())
            .env("GAFFER_PROJECT", &project.name)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output();
        let (passed, code, output) =
            match tokio::time::timeout(self.settings.check_timeout, run).await {
                Err(_) => (
                    false,
                    None,
                    format!("timed out after {}s", self.settings.check_timeout.as_secs()),
                ),
                Ok(Err(e)) => return Err(fail(format!("cannot run the check `{command}`: {e}"))),
                Ok(Ok(out)) => {
                    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
                    text.push_str(&String::from_utf8_lossy(&out.stderr));
                    (out.status.success(), out.status.code(), text)
                }
            };
        // Redacted whole, then cut: a cut through a secret must not keep half of it.
        let output = prompts::tail(&self.settings.redactor.redact(&output), 8000);
        Ok(json!({
            "passed": passed,
            "command": command,
            "exit_code": code,
            "output_tail": output,
            "duration_ms": started.elapsed().as_millis() as u64,
        }))
    }
}
