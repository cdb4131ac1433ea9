//! The arbiter: a fresh read-only session that rules when owner and reviewer
//! disagree (with its panel's opinions in front of it, when it has one:
//! `steps::panel`), and the escalation of its ruling to a person.

use crate::failure::{fail, Failure};
use crate::pipeline::plan_of;
use crate::steps::panel;
use crate::{prompts, Engine};
use gaffer_agents::Mode;
use gaffer_app::Subject;
use gaffer_core::{ApprovalKind, Role, Step, TaskState};
use gaffer_protocol::contracts::Ruling;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

impl Engine {
    pub(crate) async fn arbitrate(
        &self,
        task: &TaskState,
        step: &Step,
        cancel: &CancellationToken,
    ) -> Result<Value, Failure> {
        let wt = self.worktree(task).await?;
        let plan = plan_of(task)
            .map(|p| prompts::plan_text(&p))
            .unwrap_or_default();
        let diff = prompts::head(&wt.diff()?, 60_000);
        let trigger = step.input.to_string();
        let history = self.history(task);
        let fields = [
            ("request", task.request.as_str()),
            ("plan", &plan),
            ("diff", &diff),
            ("history", &history),
            ("trigger", &trigger),
        ];
        let project = self.project(task).await?;
        let opinions = match self.roles_of(&project.name).panel.clone() {
            Some(panel) => {
                // Members are told what the project's people keep, as every role is.
                let asked = crate::memory::with_memory(
                    self.project_memory(&project.name),
                    prompts::fill(prompts::PANELIST, &fields),
                );
                self.consult_panel(task, step, &panel, &wt, &asked, cancel)
                    .await?
            }
            None => Vec::new(),
        };
        let heard = panel::opinions_text(&opinions);
        let mut fields = fields.to_vec();
        fields.push(("opinions", &heard));
        let prompt = prompts::fill(prompts::ARBITER, &fields);
        let turn = self
            .agent_turn(
                task,
                step,
                Role::Arbiter,
                Mode::ReadOnly,
                &wt,
                prompt,
                cancel,
                |text| Ruling::parse(text).map(|r| json!(r)),
            )
            .await?;
        let ruling = turn.parsed.unwrap_or_else(|e| {
            json!(Ruling::Escalate {
                reason: format!(
                    "the arbiter's ruling could not be read after a retry: {}",
                    e.brief()
                )
            })
        });
        if opinions.is_empty() {
            return Ok(json!({ "ruling": ruling, "usage": turn.usage }));
        }
        // The step's spend is the ruling's and every member's.
        let mut usage = turn.usage;
        for o in &opinions {
            usage += o.usage;
        }
        Ok(
            json!({ "ruling": ruling, "usage": usage, "ruling_usage": turn.usage, "panel": opinions }),
        )
    }

    pub(crate) async fn escalation(&self, task: &TaskState, step: &Step) -> Result<Value, Failure> {
        let reason = step
            .input
            .get("reason")
            .and_then(Value::as_str)
            .unwrap_or("the arbiter asks a human");
        let summary = format!(
            "The arbiter escalates: {}. Approve to go on to the checks; deny to block the task.",
            prompts::head(reason, 300)
        );
        let diff = self
            .worktree(task)
            .await
            .ok()
            .and_then(|wt| wt.diff().ok())
            .unwrap_or_default();
        // Redacted whole, then cut: a cut through a secret must not keep half of it.
        let diff = self.settings.redactor.redact(&diff);
        let details = json!({ "reason": reason, "diff": prompts::head(&diff, 8000) });
        let resolution = self
            .ask(
                task,
                step,
                1,
                ApprovalKind::Escalation,
                summary,
                details,
                Subject::default(),
            )
            .await?;
        crate::gate::answered(&resolution).map_err(fail)
    }
}
