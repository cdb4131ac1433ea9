//! The task's worktree: made once (idempotent), read back from its receipt, and
//! committed to once per subtask or fix (found again by its trailer after a crash),
//! after the secret scan ([`crate::steps::scan`]) let the change through.

use crate::failure::{fail, Failure};
use crate::pipeline::{plan_of, StepKind};
use crate::{prompts, Engine};
use gaffer_core::{Step, TaskState};
use gaffer_forge::{slug, Repo, Worktree};
use serde_json::{json, Value};
use std::path::PathBuf;

impl Engine {
    /// The task's worktree as the `worktree` step recorded it: its path, branch, base
    /// and git dir (for a receipt from before gaffer recorded the git dir, found from the
    /// project repository's own records, never from the worktree's `.git`).
    pub(crate) async fn worktree(&self, task: &TaskState) -> Result<Worktree, Failure> {
        let receipt = self.worktree_receipt(task)?;
        let field = |k: &str| {
            receipt
                .get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let path = PathBuf::from(field("path"));
        let git_dir = match receipt.get("git_dir").and_then(Value::as_str) {
            Some(d) => PathBuf::from(d),
            None => {
                let project = self.project(task).await?;
                Repo::open(std::path::Path::new(&project.path))?.worktree_git_dir(&path)?
            }
        };
        // A branch updated onto its moved base is measured against that base.
        let base = crate::steps::sync::updated_base(task).unwrap_or_else(|| field("base"));
        Ok(Worktree {
            path,
            branch: field("branch"),
            base,
            git_dir,
        })
    }

    /// Where the task's worktree is, once the `worktree` step made it.
    pub(crate) fn worktree_path(&self, task: &TaskState) -> Result<PathBuf, Failure> {
        let receipt = self.worktree_receipt(task)?;
        Ok(PathBuf::from(
            receipt
                .get("path")
                .and_then(Value::as_str)
                .unwrap_or_default(),
        ))
    }

    fn worktree_receipt<'t>(&self, task: &'t TaskState) -> Result<&'t Value, Failure> {
        task.steps
            .get(&StepKind::Worktree.id())
            .and_then(|s| s.receipt.as_ref())
            .ok_or_else(|| fail("the worktree step has no receipt"))
    }

    pub(crate) async fn make_worktree(&self, task: &TaskState) -> Result<Value, Failure> {
        let project = self.project(task).await?;
        let repo = Repo::open(std::path::Path::new(&project.path))?;
        let base = match &task.options.base {
            Some(b) => b.clone(),
            None => repo.default_branch()?,
        };
        repo.ensure_clean(&base)?;
        let dir = self
            .settings
            .data_dir
            .join("worktrees")
            .join(task.id.as_str());
        let branch = format!("gaffer/{}-{}", task.id, slug(&task.request));
        let wt = repo.ensure_worktree(&dir, &branch, &base)?;
        // Whether the plan's subtasks become tracker tasks: decided once, here, so
        // `decide` reads it from the journal.
        let tracker = self.settings.trackers.contains_key(&project.name);
        // Whether a `setup` step follows: decided here too, for the same reason.
        let setup = self.settings.worktree_setup.contains_key(&project.name);
        // Whether a tester writes tests before review: decided here too.
        let tester = self.roles_of(&project.name).tester.is_some();
        Ok(
            json!({ "path": wt.path, "branch": wt.branch, "base": wt.base, "git_dir": wt.git_dir, "base_ref": base, "tracker": tracker, "setup": setup, "tester": tester }),
        )
    }

    pub(crate) async fn commit(
        &self,
        task: &TaskState,
        step: &Step,
        title: &str,
    ) -> Result<Value, Failure> {
        let wt = self.worktree(task).await?;
        let key = format!("{}/{}", task.id, step.id);
        // What would be committed is scanned first; a commit found again after a
        // crash was scanned before it was made.
        if wt.find_step_commit(&key)?.is_none() {
            self.clear_secrets(task, step, ("commit", "committed"), || {
                wt.staged_additions()
            })
            .await?;
        }
        // The request is the user's own text and may quote a secret: the message is
        // pushed and shown by the forge, and goes to git on its command line.
        let message = self.settings.redactor.redact(&format!(
            "{title}\n\ngaffer task {}: {}",
            task.id,
            prompts::head(&task.request, 500)
        ));
        let out = wt.commit_step(&message, &key)?;
        Ok(json!({ "sha": out.sha, "created": out.created }))
    }

    /// `commit/N`: the subtask's change, titled after the subtask.
    pub(crate) async fn commit_subtask(
        &self,
        task: &TaskState,
        step: &Step,
        n: u32,
    ) -> Result<Value, Failure> {
        let plan = plan_of(task).ok_or_else(|| fail("the plan is missing"))?;
        let title = plan
            .subtasks
            .get(n as usize - 1)
            .map_or_else(|| format!("subtask {n}"), |s| s.title.clone());
        self.commit(task, step, &title).await
    }

    /// `commit-fix/N`: the fix's change, titled after what asked for it.
    pub(crate) async fn commit_fix(
        &self,
        task: &TaskState,
        step: &Step,
        n: u32,
    ) -> Result<Value, Failure> {
        let reason = task
            .steps
            .get(&StepKind::Fix(n).id())
            .and_then(|s| s.input.get("reason"))
            .and_then(Value::as_str)
            .unwrap_or("review");
        self.commit(task, step, &format!("Address {reason} feedback ({n})"))
            .await
    }
}
