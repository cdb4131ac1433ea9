//! The planner's turn (read-only) and the plan's approval by a person.

use crate::failure::{fail, fail_spent, Failure};
use crate::pipeline::{challenge_history, plan_of};
use crate::steps::challenge::challenges_text;
use crate::{prompts, Engine};
use gaffer_agents::Mode;
use gaffer_app::Subject;
use gaffer_core::{ApprovalKind, Role, Step, TaskState};
use gaffer_protocol::contracts::{Challenge, Plan};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

impl Engine {
    pub(crate) async fn plan(
        &self,
        task: &TaskState,
        step: &Step,
        cancel: &CancellationToken,
    ) -> Result<Value, Failure> {
        let wt = self.worktree(task).await?;
        let project = self.project(task).await?;
        let privacy = self.role_privacy(task, &project.name, Role::Planner);
        // A masked planner (a cloud model of a masked project) gets the pack, the
        // request and people's messages masked with one table, kept in memory for this
        // step only (registered while its turn runs, for the messages); its plan is
        // unmasked before anything else reads it.
        let (prompt, masker) = if privacy.masked {
            let mut masker = gaffer_index::Masker::new();
            let prompt = self
                .masked_planner_prompt(task, step, &wt, &mut masker)
                .await?;
            (
                prompt,
                Some(self.masks.register(&task.id, &step.id, masker)),
            )
        } else {
            let context = self
                .repo_context(task, step, Role::Planner, &wt, &task.request, None)
                .await?;
            let prompt = prompts::fill(
                prompts::PLANNER,
                &[("request", &task.request), ("context", &context)],
            );
            (prompt, None)
        };
        let turn = self
            .agent_turn(
                task,
                step,
                Role::Planner,
                Mode::ReadOnly,
                &wt,
                prompt,
                cancel,
                |text| Plan::parse(text).map(|p| json!(p)),
            )
            .await?;
        // Whether a challenger reads the plan, and for how many rounds: decided once,
        // here, so `decide` reads it from the journal.
        let challenger = self
            .roles_of(&project.name)
            .challenger
            .as_ref()
            .map(|c| json!({ "max_rounds": c.max_challenge_rounds }));
        // The table with what the turn's messages added to it.
        let masker = masker.as_ref().map(crate::masks::Registered::lock);
        let unmask = |text: &str| masker.as_ref().map_or(text.to_owned(), |m| m.unmask(text));
        let mut applied = privacy.to_json();
        applied["placeholders"] = json!(masker.as_ref().map_or(0, |m| m.len()));
        match turn.parsed {
            Ok(plan) => {
                let plan = masker
                    .as_ref()
                    .map_or(plan.clone(), |m| m.unmask_json(&plan));
                Ok(
                    json!({ "plan": plan, "usage": turn.usage, "text": prompts::head(&unmask(&turn.text), 4000), "challenger": challenger, "privacy": applied }),
                )
            }
            Err(e) => Err(fail_spent(
                format!(
                    "the planner's answer is not a valid plan after a retry: {}",
                    e.brief()
                ),
                &turn.usage,
            )),
        }
    }

    /// The planner's prompt with the request and the pack masked by `masker`, and the
    /// note saying what the placeholders are.
    async fn masked_planner_prompt(
        &self,
        task: &TaskState,
        step: &Step,
        wt: &gaffer_forge::Worktree,
        masker: &mut gaffer_index::Masker,
    ) -> Result<String, Failure> {
        // The pack first: the request's words that are names in it are masked too. The
        // journal (local) records the real pack, as for any role.
        let pack = match self.select_context(task, wt, &task.request, None).await {
            Some(selection) => {
                self.record_pack(task, step, Role::Planner, &selection)
                    .await?;
                if selection.files.is_empty() {
                    String::new()
                } else {
                    masker.mask_pack(&selection)
                }
            }
            None => String::new(),
        };
        let request = masker.mask_prose(&task.request);
        let context = format!(
            "{}\nFiles gaffer's context manager picked, masked:\n\n{pack}",
            crate::privacy::MASKED_NOTE
        );
        Ok(prompts::fill(
            prompts::PLANNER,
            &[("request", &request), ("context", &context)],
        ))
    }

    pub(crate) async fn plan_approval(
        &self,
        task: &TaskState,
        step: &Step,
    ) -> Result<Value, Failure> {
        let plan = plan_of(task).ok_or_else(|| fail("the plan is missing"))?;
        let challenged = challenge_history(task);
        let open: Vec<Challenge> =
            serde_json::from_value(challenged["open_challenges"].clone()).unwrap_or_default();
        let revisions = challenged["revisions"].as_array().map_or(0, Vec::len);
        let mut summary = format!(
            "Approve the plan ({} subtask{}{}) for: {}",
            plan.subtasks.len(),
            if plan.subtasks.len() == 1 { "" } else { "s" },
            if revisions > 1 {
                format!(", revision {revisions}")
            } else {
                String::new()
            },
            prompts::head(&task.request, 200)
        );
        if !open.is_empty() {
            summary.push_str(&format!(
                " ({} challenge{} left open)",
                open.len(),
                if open.len() == 1 { "" } else { "s" }
            ));
        }
        let mut details = json!({ "plan": plan, "text": approval_text(&plan, &challenged, &open) });
        if let (Value::Object(d), Value::Object(c)) = (&mut details, challenged) {
            d.extend(c);
        }
        let resolution = self
            .ask(
                task,
                step,
                1,
                ApprovalKind::Plan,
                summary,
                details,
                Subject::default(),
            )
            .await?;
        crate::gate::answered(&resolution)
            .map_err(|reason| fail(format!("the plan was not approved ({reason})")))
    }
}

/// The plan approval as text (the terminal, Discord): challenges left open first, so
/// a cut keeps them, then the plan, then what each revision changed and answered.
fn approval_text(plan: &Plan, challenged: &Value, open: &[Challenge]) -> String {
    let mut parts = Vec::new();
    if !open.is_empty() {
        parts.push(format!(
            "Left open by the challenger:\n{}",
            challenges_text(open)
        ));
    }
    parts.push(prompts::plan_text(plan));
    for r in challenged["revisions"]
        .as_array()
        .into_iter()
        .flatten()
        .skip(1)
    {
        let mut lines = vec![format!(
            "Revision {} changed:",
            r["revision"].as_u64().unwrap_or(0)
        )];
        let changes: Vec<&str> = r["changes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        if changes.is_empty() {
            lines.push("  (no subtask changed)".into());
        }
        lines.extend(changes.iter().map(|c| format!("  {c}")));
        for a in r["answers"].as_array().into_iter().flatten() {
            lines.push(format!(
                "  [{}] {}: {}",
                a["id"].as_str().unwrap_or("?"),
                a["decision"].as_str().unwrap_or("?"),
                a["reason"].as_str().unwrap_or("")
            ));
        }
        parts.push(lines.join("\n"));
    }
    parts.join("\n\n")
}
