//! A project command (the check, a setup command) run in the worktree. The owner
//! wrote, or will write, everything such a command runs (the Makefile,
//! `package.json`, the tests), so it runs confined like the owner: the same sandbox
//! (write only in the worktree, a private temp dir and the configured caches; read
//! only the allowlist), an environment built from the allowlist plus
//! `[projects.<name>] check_env` and gaffer's `GAFFER_*` variables, and every process
//! it starts killed when it ends.

use crate::failure::{fail, Failure};
use crate::pipeline::{receipt_of, StepKind};
use crate::{prompts, Engine};
use gaffer_agents::contain::ContainedCommand;
use gaffer_agents::sandbox::{self, Confinement, SandboxMode};
use gaffer_core::{ProjectState, TaskState};
use gaffer_forge::Worktree;
use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Instant;
use tokio::io::AsyncReadExt;

/// How a project command ended.
pub(crate) struct CommandRun {
    /// Exit status 0 within the time limit.
    pub passed: bool,
    /// Its exit code, if it exited.
    pub exit_code: Option<i32>,
    /// The end of stdout then stderr, redacted.
    pub output_tail: String,
    pub duration_ms: u64,
    /// Set when it failed and its output says the sandbox refused something.
    pub sandbox: Option<String>,
}

/// The port the `setup` step chose for the task (`port = true`), if any.
pub(crate) fn task_port(task: &TaskState) -> Option<u64> {
    receipt_of(task, StepKind::Setup)?.get("port")?.as_u64()
}

impl Engine {
    /// What a project command gets on top of the allowlist: `check_env`, the task
    /// and project names, and the task's port.
    pub(crate) fn project_command_env(
        &self,
        task: &TaskState,
        project: &ProjectState,
        port: Option<u64>,
    ) -> BTreeMap<String, String> {
        let mut env = self
            .settings
            .check_env
            .get(&project.name)
            .cloned()
            .unwrap_or_default();
        env.insert("GAFFER_TASK_ID".into(), task.id.as_str().into());
        env.insert("GAFFER_PROJECT".into(), project.name.clone());
        if let Some(port) = port {
            env.insert("GAFFER_PORT".into(), port.to_string());
        }
        env
    }

    /// Run `command` with `sh -c` in the worktree, confined, for at most the check
    /// timeout. `what` names it in errors (`the check`, `setup command`).
    pub(crate) async fn run_project_command(
        &self,
        task: &TaskState,
        project: &ProjectState,
        wt: &Worktree,
        what: &str,
        command: &str,
        env: &BTreeMap<String, String>,
    ) -> Result<CommandRun, Failure> {
        let mut cmd = ContainedCommand::new("check", "sh", &wt.path);
        cmd.args(["-c", command])
            .envs(&gaffer_agents::environment::build(&[], env))
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
            .map_err(|e| fail(format!("cannot run {what} `{command}`: {e}")))?;
        let note = child.sandbox_note().map(str::to_owned);
        let (mut out, mut err) = (child.child.stdout.take(), child.child.stderr.take());
        let run = async {
            // Both pipes close once the command and whatever it left running are gone.
            let (o, e) = tokio::join!(read_all(out.as_mut()), read_all(err.as_mut()));
            (child.wait().await, o, e)
        };
        let timeout = self.settings.check_timeout;
        let (passed, exit_code, output) = match tokio::time::timeout(timeout, run).await {
            Err(_) => {
                child.kill().await;
                (
                    false,
                    None,
                    format!("timed out after {}s", timeout.as_secs()),
                )
            }
            Ok((Err(e), _, _)) => return Err(fail(format!("cannot run {what} `{command}`: {e}"))),
            Ok((Ok(status), o, e)) => {
                let mut text = String::from_utf8_lossy(&o).into_owned();
                text.push_str(&String::from_utf8_lossy(&e));
                (status.success(), status.code(), text)
            }
        };
        // Redacted whole, then cut: a cut through a secret must not keep half of it.
        let output_tail = prompts::tail(&self.settings.redactor.redact(&output), 8000);
        let sandbox = note
            .filter(|_| !passed && sandbox::looks_refused(&output_tail))
            .map(|note| format!("{what} was refused something by {note}"));
        Ok(CommandRun {
            passed,
            exit_code,
            output_tail,
            duration_ms: started.elapsed().as_millis() as u64,
            sandbox,
        })
    }
}

async fn read_all<R: tokio::io::AsyncRead + Unpin>(pipe: Option<&mut R>) -> Vec<u8> {
    let mut buf = Vec::new();
    if let Some(p) = pipe {
        let _ = p.read_to_end(&mut buf).await;
    }
    buf
}
