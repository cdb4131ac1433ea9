//! The `ship` step: the summary of what the task produced (branch, commits,
//! verdicts, check, tokens, cost) before anything leaves the machine.

use crate::failure::Failure;
use crate::pipeline::StepKind;
use crate::Engine;
use gaffer_core::{Spend, TaskState};
use serde_json::{json, Value};

impl Engine {
    pub(crate) async fn ship(&self, task: &TaskState) -> Result<Value, Failure> {
        let project = self.project(task).await?;
        let forge = self.forge_summary(&project);
        let note = if forge.is_null() {
            format!("no forge is configured for project {}: the branch stays in the repository, unpushed (add [projects.{}.forge] to the config to push it and open a pull request)", project.name, project.name)
        } else {
            format!(
                "shipping to {} after approval: push, pull request, CI",
                forge["kind"].as_str().unwrap_or("the forge")
            )
        };
        let wt = self.worktree(task).await?;
        let commits: Vec<Value> = wt
            .commits()?
            .into_iter()
            .map(|(sha, subject)| json!({ "sha": sha, "subject": subject }))
            .collect();
        let mut usage = Spend::default();
        let mut verdicts = Vec::new();
        let mut check = Value::Null;
        for s in task.steps_in_order() {
            let Some(receipt) = &s.receipt else { continue };
            usage += Spend::of_receipt(receipt);
            if let Some(v) = receipt.get("verdict") {
                verdicts.push(v.clone());
            }
            if matches!(StepKind::of(&s.id), Some(StepKind::Check(_))) {
                check = json!({
                    "passed": receipt.get("passed"),
                    "command": receipt.get("command"),
                    "exit_code": receipt.get("exit_code"),
                });
            }
        }
        Ok(json!({
            "task_id": task.id,
            "branch": wt.branch,
            "worktree": wt.path,
            "base": wt.base,
            "commits": commits,
            "changed_files": wt.changed_files()?,
            "verdicts": verdicts,
            "check": check,
            "tokens": {
                "input": usage.input_tokens,
                "output": usage.output_tokens,
                "cached_input": usage.cached_input_tokens,
            },
            "cost_usd": usage.cost_usd(),
            "forge": forge,
            "note": note,
        }))
    }
}
