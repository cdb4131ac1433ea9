//! `setup`: the task's new worktree made ready the way its project needs, before any
//! agent works in it. Files git ignores are copied from the main checkout (`.env`,
//! local config), a free port is chosen for the task (`GAFFER_PORT`), and the setup
//! commands run in the worktree confined like the owner ([`crate::steps::command`]).
//! Idempotent: a crash in the middle runs it again; once completed it never runs again.

use crate::failure::{fail, Failure};
use crate::{prompts, Engine};
use gaffer_core::TaskState;
use gaffer_forge::Worktree;
use serde_json::{json, Value};
use std::path::Path;

impl Engine {
    pub(crate) async fn setup(&self, task: &TaskState) -> Result<Value, Failure> {
        let project = self.project(task).await?;
        let wt = self.worktree(task).await?;
        let Some(setup) = self.settings.worktree_setup.get(&project.name) else {
            return Ok(json!({ "note": "the project no longer configures a setup" }));
        };
        let main = Path::new(&project.path);
        let mut copied = Vec::new();
        for rel in &setup.copy {
            copy_ignored(main, &wt, rel)?;
            copied.push(rel.clone());
        }
        let port = if setup.port {
            Some(u64::from(free_port()?))
        } else {
            None
        };
        let env = self.project_command_env(task, &project, port);
        let mut commands = Vec::new();
        for command in &setup.commands {
            let run = self
                .run_project_command(task, &project, &wt, "setup command", command, &env)
                .await?;
            if !run.passed {
                let code = run
                    .exit_code
                    .map_or_else(|| "no exit code".to_owned(), |c| format!("exit code {c}"));
                let sandbox = run.sandbox.map(|s| format!("; {s}")).unwrap_or_default();
                return Err(fail(format!(
                    "setup command `{command}` failed ({code}{sandbox}); fix it in [projects.{}] setup or in the repository, then retry the task. Its output:\n{}",
                    project.name,
                    prompts::tail(&run.output_tail, 4000)
                )));
            }
            commands.push(json!({ "command": command, "exit_code": run.exit_code, "duration_ms": run.duration_ms, "output_tail": prompts::tail(&run.output_tail, 2000) }));
        }
        Ok(json!({ "copied": copied, "commands": commands, "port": port }))
    }
}

/// Copy `rel` (a file or a directory) from the main checkout into the worktree. It
/// must be ignored by git there, or the task's commits would carry it (a `.env` pushed
/// to the forge); the error says what to do.
fn copy_ignored(main: &Path, wt: &Worktree, rel: &str) -> Result<(), Failure> {
    let from = main.join(rel);
    if !from.exists() {
        return Err(fail(format!(
            "copy: `{rel}` does not exist in the main checkout {}; create it there or remove it from `copy`",
            main.display()
        )));
    }
    if !wt.is_ignored(rel)? {
        return Err(fail(format!(
            "copy: `{rel}` is not ignored by git, so the task's commits would carry it; add it to the repository's .gitignore or remove it from `copy`"
        )));
    }
    let to = wt.path.join(rel);
    copy_tree(&from, &to).map_err(|e| {
        fail(format!(
            "copy: cannot copy `{rel}` into the worktree {}: {e}",
            wt.path.display()
        ))
    })
}

/// A file copied, or a directory copied whole; a symbolic link inside a directory
/// stays a link (its target is not copied).
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent)?;
    }
    if !from.is_dir() {
        std::fs::copy(from, to)?;
        return Ok(());
    }
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if entry.file_type()?.is_symlink() {
            let target = std::fs::read_link(&src)?;
            let _ = std::fs::remove_file(&dst);
            std::os::unix::fs::symlink(target, &dst)?;
        } else {
            copy_tree(&src, &dst)?;
        }
    }
    Ok(())
}

/// A TCP port free on loopback now: the kernel picks it, so two tasks set up at the
/// same moment do not get the same one.
fn free_port() -> Result<u16, Failure> {
    std::net::TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| fail(format!("cannot find a free port for GAFFER_PORT: {e}")))
}
