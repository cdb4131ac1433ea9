//! The steps of a review follow-up (see [`crate::pipeline::follow_up`]):
//! `follow-up-approval/n` (a round past the limit asks a person),
//! `push-approval/n` (the ship approval rules for the fix's push), `reply/n` (each
//! comment answered once), and the owner's instructions for the fix.
//!
//! `reply/n` is idempotent by construction: every reply carries a marker naming the
//! task and the comment (`<!-- gaffer:reply:TASK:KEY -->`), and the step reads the
//! pull request's comments before it posts, so running it again after a crash
//! posts only the replies that are not there yet.

use crate::failure::{fail, Failure};
use crate::pipeline::follow_up::follow_up_of;
use crate::pipeline::{receipt_of as receipt, StepKind};
use crate::{text, Engine};
use gaffer_app::Subject;
use gaffer_core::{ApprovalKind, FollowUp, Step, TaskState};
use gaffer_forge::{PrComment, PrCommentKind};
use gaffer_protocol::receipts::{short_sha, PullRequestReceipt};
use serde_json::{json, Value};

/// What every comment gaffer posts on a pull request holds, so the follower never
/// takes gaffer's own words for a person's.
pub const OWN_MARKER: &str = "<!-- gaffer:";

/// The marker of gaffer's reply to comment `key` of `task`.
pub(crate) fn reply_marker(task: &str, key: &str) -> String {
    format!("{OWN_MARKER}reply:{task}:{key} -->")
}

/// The comments a review follow-up carries (as the follower recorded them).
pub(crate) fn comments_of(f: &FollowUp) -> Vec<PrComment> {
    serde_json::from_value(f.detail.get("comments").cloned().unwrap_or(Value::Null))
        .unwrap_or_default()
}

/// The owner's instructions for a fix answering review comments.
pub(crate) fn review_fix_assignment(detail: &Value) -> String {
    let comments: Vec<PrComment> =
        serde_json::from_value(detail.get("comments").cloned().unwrap_or(Value::Null))
            .unwrap_or_default();
    let mut text = String::from(
        "People reviewing the pull request left these comments. Change the code so that each is answered (or, if one asks for something wrong, leave the code and say why in your answer):\n",
    );
    for (i, c) in comments.iter().enumerate() {
        let place = c.place();
        let kind = match c.kind {
            PrCommentKind::ReviewComment => "review comment",
            PrCommentKind::Review => "review",
            PrCommentKind::Conversation => "comment",
        };
        text.push_str(&format!(
            "\n{}. {kind} by {}{place}:\n{}\n",
            i + 1,
            c.author,
            c.body.trim()
        ));
        if let Some(hunk) = &c.diff_hunk {
            text.push_str(&format!(
                "The diff there:\n```diff\n{}\n```\n",
                hunk.trim_end()
            ));
        }
    }
    text
}

impl Engine {
    fn follow_up_of_step(
        &self,
        task: &TaskState,
        step: &Step,
    ) -> std::result::Result<FollowUp, Failure> {
        let n = follow_up_of(step)
            .ok_or_else(|| fail(format!("`{}` names no follow-up in its input", step.id)))?;
        task.follow_ups
            .iter()
            .find(|f| f.n == n)
            .cloned()
            .ok_or_else(|| fail(format!("the task has no follow-up {n}")))
    }

    /// `follow-up-approval/n`: review comments came again past the project's
    /// `review_fix_attempts`: a person allows one more round, or stops following.
    /// A `manual` approval: no rule approves it.
    pub(crate) async fn follow_up_approval(
        &self,
        task: &TaskState,
        step: &Step,
    ) -> std::result::Result<Value, Failure> {
        let f = self.follow_up_of_step(task, step)?;
        let comments = comments_of(&f);
        let pr = receipt(task, StepKind::PullRequest)
            .and_then(PullRequestReceipt::from_receipt)
            .map_or_else(|| "the pull request".to_owned(), |p| p.url);
        let summary = format!(
            "{pr} got {} new review comment{} (round {} of review fixes; {} allowed). Approve to let the owner answer them, deny to stop following the pull request.",
            comments.len(),
            if comments.len() == 1 { "" } else { "s" },
            step.input["round"],
            step.input["limit"],
        );
        let details = json!({
            "follow_up": f.n,
            "comments": comments.iter().map(|c| json!({
                "author": c.author, "path": c.path, "line": c.line,
                "body": text::one_line(&c.body, 500), "url": c.url,
            })).collect::<Vec<_>>(),
        });
        let resolution = self
            .ask(
                task,
                step,
                1,
                ApprovalKind::Manual,
                summary,
                details,
                Subject::default(),
            )
            .await?;
        crate::gate::answered(&resolution).map_err(fail)
    }

    /// `push-approval/n`: the ship approval rules for pushing the fix (or, for a
    /// merge-conflict follow-up, the updated branch).
    pub(crate) async fn push_approval(
        &self,
        task: &TaskState,
        step: &Step,
    ) -> std::result::Result<Value, Failure> {
        let f = self.follow_up_of_step(task, step)?;
        let wt = self.worktree(task).await?;
        let summary = if f.kind == crate::pipeline::MERGE_CONFLICT {
            super::sync::push_summary(task, step, &wt)
        } else {
            format!(
                "Push the fix for {} review comment{} to `{}` (new commits on the open pull request, never forced)?",
                f.keys.len(),
                if f.keys.len() == 1 { "" } else { "s" },
                wt.branch,
            )
        };
        self.ask_to_push(task, step, summary).await
    }

    /// `reply/n`: answer each comment of follow-up n with what was done (the fix's
    /// commit and the owner's summary), skipping those already answered.
    pub(crate) async fn reply(
        &self,
        task: &TaskState,
        step: &Step,
    ) -> std::result::Result<Value, Failure> {
        let f = self.follow_up_of_step(task, step)?;
        let project = self.project(task).await?;
        let ship = self.shipping(&project)?;
        let pr = receipt(task, StepKind::PullRequest)
            .and_then(PullRequestReceipt::from_receipt)
            .ok_or_else(|| fail("the task has no pull request to reply on"))?;
        let text = self.reply_text(task, &f);
        let mut round = 0;
        loop {
            let result = match self.forge(ship, &project) {
                Ok(forge) => {
                    self.post_replies(forge.as_ref(), task, &f, pr.number, &text)
                        .await
                }
                Err(e) => Err(e),
            };
            match result {
                Ok(replies) => return Ok(json!({ "follow_up": f.n, "replies": replies })),
                Err(e) => {
                    round += 1;
                    self.retry_or_give_up(task, step, round, "replying to the review comments", &e)
                        .await?;
                }
            }
        }
    }

    async fn post_replies(
        &self,
        forge: &dyn gaffer_forge::Forge,
        task: &TaskState,
        f: &FollowUp,
        number: u64,
        text: &str,
    ) -> std::result::Result<Vec<Value>, String> {
        let present = forge.pr_comments(number).await.map_err(|e| e.to_string())?;
        let mut replies = Vec::new();
        for c in comments_of(f) {
            let marker = reply_marker(task.id.as_str(), &c.key);
            if let Some(found) = present.iter().find(|p| p.body.contains(&marker)) {
                replies
                    .push(json!({ "to": c.key, "id": found.id, "url": found.url, "found": true }));
                continue;
            }
            let body = format!("{text}\n\n{marker}");
            let posted = forge
                .reply_to_comment(number, &c, &body)
                .await
                .map_err(|e| e.to_string())?;
            replies
                .push(json!({ "to": c.key, "id": posted.id, "url": posted.url, "found": false }));
        }
        Ok(replies)
    }

    /// What a reply says: the commit that answers, and the owner's own summary.
    fn reply_text(&self, task: &TaskState, f: &FollowUp) -> String {
        let fix = task.steps_in_order().into_iter().rfind(|s| {
            follow_up_of(s) == Some(f.n) && matches!(StepKind::of(&s.id), Some(StepKind::Fix(_)))
        });
        let summary = fix
            .and_then(|s| s.receipt.as_ref())
            .and_then(|r| r.get("summary"))
            .and_then(Value::as_str)
            .map(|s| text::one_line(s, 600))
            .unwrap_or_default();
        let sha = task
            .steps_in_order()
            .into_iter()
            .rev()
            .find(|s| matches!(StepKind::of(&s.id), Some(StepKind::Push(_))))
            .and_then(|s| s.receipt.as_ref())
            .and_then(|r| r.get("sha"))
            .and_then(Value::as_str)
            .map(short_sha)
            .unwrap_or_default();
        let redacted = self.settings.redactor.redact(&summary);
        format!("gaffer addressed this in {sha}: {redacted}")
    }
}
