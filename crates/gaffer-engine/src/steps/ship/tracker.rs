//! `tracker-open` and `report`: one tracker task per plan subtask, and the closing report on the tracker and the issue.

use super::Tracker;
use crate::failure::{fail, Failure};
use crate::pipeline::{plan_of, receipt_of as receipt, StepKind};
use crate::{prompts, Engine};
use gaffer_core::TaskState;
use gaffer_forge::Vikunja;
use gaffer_protocol::receipts::PullRequestReceipt;
use serde_json::{json, Value};

impl Engine {
    fn vikunja(tracker: &Tracker) -> std::result::Result<Vikunja, String> {
        let (token, source) = tracker.token.resolve(&tracker.base_url)?;
        Vikunja::new(&tracker.base_url, token, &source, tracker.project_id)
            .map_err(|e| e.to_string())
    }

    /// `tracker-open`: one Vikunja task per plan subtask. A task whose marker is
    /// already there is reused (a re-run after a crash makes no second). A tracker that
    /// cannot be reached is a warning, never a reason to stop the work.
    pub(crate) async fn tracker_open(
        &self,
        task: &TaskState,
    ) -> std::result::Result<Value, Failure> {
        let project = self.project(task).await?;
        let Some(tracker) = self.tracker(&project) else {
            return Ok(json!({ "tasks": [], "warnings": ["no tracker configured any more"] }));
        };
        let plan = plan_of(task).ok_or_else(|| fail("the plan is missing"))?;
        let mut tasks = Vec::new();
        let mut warnings = Vec::new();
        match Self::vikunja(tracker) {
            Err(e) => warnings.push(e),
            Ok(v) => {
                for (i, sub) in plan.subtasks.iter().enumerate() {
                    let marker = format!("[gaffer {}/{}]", task.id, i + 1);
                    let found = match v.find_task(&marker).await {
                        Ok(Some(t)) => Ok(t),
                        Ok(None) => {
                            let description = format!(
                                "{}\n\nDone when: {}\n\nFrom: {}",
                                sub.description,
                                sub.acceptance,
                                prompts::head(&task.request, 500)
                            );
                            v.create_task(
                                &format!("{} {marker}", sub.title),
                                &self.settings.redactor.redact(&description),
                            )
                            .await
                        }
                        Err(e) => Err(e),
                    };
                    match found {
                        Ok(t) => {
                            tasks.push(json!({ "subtask": i + 1, "id": t.id, "title": t.title }))
                        }
                        Err(e) => warnings.push(format!("subtask {}: {e}", i + 1)),
                    }
                }
            }
        }
        let warnings: Vec<String> = warnings
            .iter()
            .map(|w| self.settings.redactor.redact(w))
            .collect();
        Ok(json!({ "tasks": tasks, "warnings": warnings }))
    }

    /// `report`: tracker tasks done, a comment with the pull request's link on the
    /// issue the task came from (marked, looked up first: never posted twice).
    /// Failures are warnings in the summary: the pull request is already open.
    pub(crate) async fn report(&self, task: &TaskState) -> std::result::Result<Value, Failure> {
        let project = self.project(task).await?;
        let mut warnings = Vec::new();
        let mut done = Vec::new();
        let opened = receipt(task, StepKind::TrackerOpen)
            .and_then(|r| r.get("tasks"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if let (Some(tracker), false) = (self.tracker(&project), opened.is_empty()) {
            match Self::vikunja(tracker) {
                Err(e) => warnings.push(e),
                Ok(v) => {
                    for t in &opened {
                        let Some(id) = t["id"].as_u64() else { continue };
                        match v.mark_done(id).await {
                            Ok(t) => done.push(t.id),
                            Err(e) => warnings.push(format!("tracker task {id}: {e}")),
                        }
                    }
                }
            }
        }
        let mut comment = Value::Null;
        if let Some(issue) = &task.options.issue {
            let pr = receipt(task, StepKind::PullRequest)
                .and_then(PullRequestReceipt::from_receipt)
                .map(|pr| pr.url)
                .unwrap_or_default();
            let marker = format!("<!-- gaffer:{} -->", task.id);
            let text = format!(
                "gaffer opened a pull request for this issue: {}\n\nCI passed on the last pushed commit. (task {})\n\n{marker}",
                pr,
                task.id
            );
            let result = match self.shipping(&project) {
                Err(Failure::Step(e)) => Err(e.0),
                Err(other) => return Err(other),
                Ok(ship) => match self.forge(ship, &project) {
                    Err(e) => Err(e),
                    Ok(forge) => match forge.find_comment(issue, &marker).await {
                        Ok(Some(c)) => Ok((c, false)),
                        Ok(None) => forge
                            .comment_on_issue(issue, &text)
                            .await
                            .map(|c| (c, true))
                            .map_err(|e| e.to_string()),
                        Err(e) => Err(e.to_string()),
                    },
                },
            };
            match result {
                Ok((c, posted)) => {
                    comment = json!({ "issue": issue, "id": c.id, "url": c.url, "posted": posted })
                }
                Err(e) => warnings.push(format!("comment on {issue}: {e}")),
            }
        }
        let warnings: Vec<String> = warnings
            .iter()
            .map(|w| self.settings.redactor.redact(w))
            .collect();
        Ok(json!({ "tracker_done": done, "issue_comment": comment, "warnings": warnings }))
    }
}
