//! The plan's challenger (read-only, its own role) and the planner's revisions that
//! answer it ([`crate::pipeline`] orders the rounds). A challenger's or a revision's
//! answer that breaks its contract is sent back once, then fails the step with what
//! was wrong.

use crate::failure::{fail, Failure};
use crate::pipeline::{challenges_of, plan_of, revision_of};
use crate::{prompts, Engine};
use gaffer_agents::Mode;
use gaffer_core::{Role, Step, TaskState};
use gaffer_protocol::contracts::{Challenge, Challenges, Revision};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

impl Engine {
    /// Challenge round `n`: the challenger reads the current plan (revision `n`) and
    /// what earlier rounds said.
    pub(crate) async fn challenge(
        &self,
        task: &TaskState,
        step: &Step,
        n: u32,
        cancel: &CancellationToken,
    ) -> Result<Value, Failure> {
        let wt = self.worktree(task).await?;
        let plan = plan_of(task).ok_or_else(|| fail("the plan is missing"))?;
        let context = self
            .repo_context(task, step, Role::Challenger, &wt, &task.request, None)
            .await?;
        let prompt = prompts::fill(
            prompts::CHALLENGER,
            &[
                ("request", &task.request),
                ("revision", &n.to_string()),
                ("plan", &prompts::plan_text(&plan)),
                ("history", &rounds_text(task, n)),
                ("context", &context),
            ],
        );
        let turn = self
            .agent_turn(
                task,
                step,
                Role::Challenger,
                Mode::ReadOnly,
                &wt,
                prompt,
                cancel,
                |text| Challenges::parse(text).map(|c| json!(c)),
            )
            .await?;
        let challenges = turn.contracted("the challenger's answer")?;
        Ok(json!({
            "challenges": challenges,
            "usage": turn.usage,
            "text": prompts::head(&turn.text, 4000),
        }))
    }

    /// Revision `n`: the planner answers each challenge of round `n` and gives the
    /// whole plan again.
    pub(crate) async fn revise(
        &self,
        task: &TaskState,
        step: &Step,
        n: u32,
        cancel: &CancellationToken,
    ) -> Result<Value, Failure> {
        let wt = self.worktree(task).await?;
        let plan = plan_of(task).ok_or_else(|| fail("the plan is missing"))?;
        let challenges = challenges_of(task, n)
            .ok_or_else(|| fail(format!("challenge round {n} has no challenges")))?
            .challenges;
        let context = self
            .repo_context(task, step, Role::Planner, &wt, &task.request, None)
            .await?;
        let prompt = prompts::fill(
            prompts::REVISE,
            &[
                ("request", &task.request),
                ("revision", &n.to_string()),
                ("plan", &prompts::plan_text(&plan)),
                ("challenges", &challenges_text(&challenges)),
                ("context", &context),
            ],
        );
        let turn = self
            .agent_turn(
                task,
                step,
                Role::Planner,
                Mode::ReadOnly,
                &wt,
                prompt,
                cancel,
                |text| Revision::parse(text, &challenges).map(|r| json!(r)),
            )
            .await?;
        let revision: Revision = serde_json::from_value(turn.contracted("the planner's revision")?)
            .map_err(|e| fail(e.to_string()))?;
        let changes = revision.plan.changes_from(&plan);
        Ok(json!({
            "revision": revision,
            "changes": changes,
            "usage": turn.usage,
            "text": prompts::head(&turn.text, 4000),
        }))
    }
}

/// Challenges as numbered text, for the planner and the approval.
pub(crate) fn challenges_text(challenges: &[Challenge]) -> String {
    challenges
        .iter()
        .map(|c| {
            format!(
                "[{}] ({}) {}\n   evidence: {}",
                c.id,
                c.severity.as_str(),
                c.claim,
                c.evidence
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// What the earlier rounds said, for the challenger of round `n`: its challenges and
/// the planner's answers.
fn rounds_text(task: &TaskState, n: u32) -> String {
    let mut out = Vec::new();
    for round in 1..n {
        let Some(asked) = challenges_of(task, round) else {
            continue;
        };
        out.push(format!(
            "Your challenges in round {round}:\n{}",
            challenges_text(&asked.challenges)
        ));
        if let Some(revision) = revision_of(task, round) {
            let answers = revision
                .answers
                .iter()
                .map(|a| format!("[{}] {}: {}", a.id, a.decision.as_str(), a.reason))
                .collect::<Vec<_>>()
                .join("\n");
            out.push(format!("The planner's answers:\n{answers}"));
        }
    }
    if out.is_empty() {
        String::new()
    } else {
        format!("Earlier rounds:\n\n{}", out.join("\n\n"))
    }
}
