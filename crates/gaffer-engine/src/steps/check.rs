//! The project's own check command, run in the worktree. The owner wrote everything the
//! check runs (the Makefile, `package.json`, the tests), so it runs confined like the
//! owner: the same sandbox (write only in the worktree, a private temp dir and the
//! configured caches; read only the allowlist), an environment built from the allowlist
//! plus `[projects.<name>] check_env`, and every process it starts killed when it ends.

use crate::failure::{fail, Failure};
use crate::{prompts, Engine};
use gaffer_agents::contain::ContainedCommand;
use gaffer_agents::sandbox::{self, Confinement, SandboxMode};
use gaffer_core::TaskState;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Instant;
use tokio::io::AsyncReadExt;

impl Engine {
    pub(crate) async fn check(&self, task: &TaskState) -> Result<Value, Failure> {
        let wt = self.worktree(task).await?;
        let project = self.project(task).await?;
        let Some(command) = project.check_command.clone() else {
            return Ok(
                json!({ "passed": true, "command": null, "note": "no check command configured" }),
            );
        };
        let mut env: BTreeMap<String, String> = self
            .settings
            .check_env
            .get(&project.name)
            .cloned()
            .unwrap_or_default();
        env.insert("GAFFER_TASK_ID".into(), task.id.as_str().into());
        env.insert("GAFFER_PROJECT".into(), project.name.clone());
        let mut cmd = ContainedCommand::new("check", "sh", &wt.path);
        cmd.args(["-c", &command])
            .envs(&gaffer_agents::environment::build(&[], &env))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .hold_lock(&self.turn_lock(&task.id));
        if self.settings.sandbox.mode != SandboxMode::Off {
            let mut c = Confinement::new(&self.settings.sandbox);
            c.writable.push(wt.path.clone());
            c.readable.push(std::path::PathBuf::from(&project.path));
            cmd.confine(c);
        }
        let started = Instant::now();
        let mut child = cmd
            .spawn()
            .map_err(|e| fail(format!("cannot run the check `{command}`: {e}")))?;
        let note = child.sandbox_note().map(str::to_owned);
        let (mut out, mut err) = (child.child.stdout.take(), child.child.stderr.take());
        let run = async {
            // Both pipes close once the check and whatever it left running are gone.
            let (o, e) = tokio::join!(read_all(out.as_mut()), read_all(err.as_mut()));
            (child.wait().await, o, e)
        };
        let timeout = self.settings.check_timeout;
        let (passed, code, output) = match tokio::time::timeout(timeout, run).await {
            Err(_) => {
                child.kill().await;
                (
                    false,
                    None,
                    format!("timed out after {}s", timeout.as_secs()),
                )
            }
            Ok((Err(e), _, _)) => {
                return Err(fail(format!("cannot run the check `{command}`: {e}")))
            }
            Ok((Ok(status), o, e)) => {
                let mut text = String::from_utf8_lossy(&o).into_owned();
                text.push_str(&String::from_utf8_lossy(&e));
                (status.success(), status.code(), text)
            }
        };
        // Redacted whole, then cut: a cut through a secret must not keep half of it.
        let output = prompts::tail(&self.settings.redactor.redact(&output), 8000);
        let mut receipt = json!({
            "passed": passed,
            "command": command,
            "exit_code": code,
            "output_tail": output,
            "duration_ms": started.elapsed().as_millis() as u64,
        });
        if let Some(note) = note.filter(|_| !passed && sandbox::looks_refused(&output)) {
            receipt["sandbox"] = json!(format!("the check was refused something by {note}"));
        }
        Ok(receipt)
    }
}

async fn read_all<R: tokio::io::AsyncRead + Unpin>(pipe: Option<&mut R>) -> Vec<u8> {
    let mut buf = Vec::new();
    if let Some(p) = pipe {
        let _ = p.read_to_end(&mut buf).await;
    }
    buf
}
