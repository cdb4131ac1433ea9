//! `ci/n`: the CI wait on the pushed commit, every change journaled; a failure's logs go to the owner.

use super::text_of;
use crate::failure::{fail, Failure};
use crate::pipeline::{receipt_of as receipt, StepKind};
use crate::{prompts, Engine, Result};
use gaffer_core::{Event, Step, StepId, TaskState};
use gaffer_forge::{ApiError, CiStatus, CiWait, Forge};
use gaffer_protocol::receipts::{short_sha, CiReceipt, FailingCheck};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

impl Engine {
    /// `ci/n`: wait for CI on the commit of `push/n`, journaling every change; on a
    /// failure, the failing checks' logs go into the receipt for the owner.
    pub(crate) async fn ci(
        &self,
        task: &TaskState,
        step: &Step,
        n: u32,
        cancel: &CancellationToken,
    ) -> std::result::Result<Value, Failure> {
        let project = self.project(task).await?;
        let ship = self.shipping(&project)?;
        let sha = text_of(receipt(task, StepKind::Push(n)), "sha");
        if sha.is_empty() {
            return Err(fail(format!("push/{n} has no commit in its receipt")));
        }
        let mut round = 0;
        let (forge, status) = loop {
            let result = match self.forge(ship, &project) {
                Ok(forge) => match self
                    .wait_journaled(task, &step.id, forge.as_ref(), &sha, &ship.ci, cancel)
                    .await?
                {
                    Ok(status) => Ok((forge, status)),
                    Err(e) => Err(e.to_string()),
                },
                Err(e) => Err(e),
            };
            match result {
                Ok(found) => break found,
                Err(e) => {
                    round += 1;
                    let what = format!("waiting for CI on {}", short_sha(&sha));
                    self.retry_or_give_up(task, step, round, &what, &e).await?;
                }
            }
        };
        let mut failing = Vec::new();
        for check in status.failing() {
            let mut log = match forge.failing_log(check).await {
                Ok(log) => FailingCheck {
                    check: log.check,
                    is_log: log.is_log,
                    url: log.url,
                    text: log.text,
                },
                Err(e) => FailingCheck {
                    check: check.name.clone(),
                    is_log: false,
                    url: check.target_url.clone(),
                    text: format!(
                        "{} reported {} ({}); its log could not be read: {e}",
                        check.name, check.raw_state, check.description
                    ),
                },
            };
            // Redact the whole log before cutting it: a tail could split a secret the
            // redactor would otherwise recognise.
            log.text = prompts::tail(&self.settings.redactor.redact(&log.text), 6000);
            failing.push(log);
        }
        let mut checks = json!(status.checks);
        self.settings.redactor.redact_json(&mut checks);
        let ci = CiReceipt {
            sha: status.sha,
            state: json!(status.state).as_str().unwrap_or("error").to_owned(),
            checks: checks.as_array().cloned().unwrap_or_default(),
            failing,
        };
        Ok(json!(ci))
    }

    /// [`gaffer_forge::wait_for_ci`], with a `ci_status_changed` event for the first
    /// state and every change. The outer error is the engine's; the inner, the forge's.
    async fn wait_journaled(
        &self,
        task: &TaskState,
        step_id: &StepId,
        forge: &dyn Forge,
        sha: &str,
        wait: &CiWait,
        cancel: &CancellationToken,
    ) -> std::result::Result<std::result::Result<CiStatus, ApiError>, Failure> {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<CiStatus>();
        let waiting = gaffer_forge::wait_for_ci(forge, sha, wait, move |s| {
            let _ = tx.send(s.clone());
        });
        tokio::pin!(waiting);
        let result = loop {
            tokio::select! {
                r = &mut waiting => break r,
                Some(s) = rx.recv() => self.record_ci(task, step_id, &s).await?,
                () = cancel.cancelled() => return Err(Failure::Cancelled),
            }
        };
        while let Ok(s) = rx.try_recv() {
            self.record_ci(task, step_id, &s).await?;
        }
        Ok(result)
    }

    async fn record_ci(&self, task: &TaskState, step_id: &StepId, s: &CiStatus) -> Result<()> {
        let mut checks = json!(s.checks);
        self.settings.redactor.redact_json(&mut checks);
        let state = json!(s.state).as_str().unwrap_or("pending").to_owned();
        self.append(
            &task.id,
            vec![Event::CiStatusChanged {
                step_id: step_id.clone(),
                sha: s.sha.clone(),
                state,
                checks,
            }],
        )
        .await
    }
}

/// The owner's assignment after a CI failure, from the `ci/n` receipt.
pub(crate) fn ci_fix_assignment(detail: &Value) -> String {
    let Some(ci) = CiReceipt::from_receipt(detail) else {
        return format!("CI failed on the pushed commit; what it reported:\n{detail}\n\nFind and fix the cause; your fix is committed and pushed, and CI runs again.");
    };
    let mut text = format!(
        "CI failed on the pushed commit {} (overall: {}). The failing checks and the end of their logs:\n",
        ci.sha, ci.state
    );
    for f in &ci.failing {
        text.push_str(&format!(
            "\n### {}{}\n```\n{}\n```\n",
            f.check,
            f.url
                .as_deref()
                .map(|u| format!(" ({u})"))
                .unwrap_or_default(),
            f.text
        ));
    }
    text.push_str("\nFind and fix the cause; your fix is committed and pushed, and CI runs again.");
    text
}
