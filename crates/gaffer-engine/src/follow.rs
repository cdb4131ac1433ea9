//! The follower: after a task is done, its pull request is still read, and what
//! people ask there opens the task again ([`gaffer_core::FollowUp`]).
//!
//! Every process that runs workers (`gaffer serve`, `gaffer worker`) runs
//! [`Engine::follow`]: every `follow_interval_secs` (the shortest of the projects'),
//! or at once when [`Engine::wake_follower`] is called (the webhook handler calls
//! it when a forge says a pull request got a comment), it reads each followed
//! task's pull request ([`Engine::follow_once`]):
//!
//! - merged or closed → `following_ended`: the task is not read again;
//! - the forge says it no longer merges (a conflict with its moved base, or a base
//!   it must be up to date with) at a head no follow-up answered yet → one
//!   `follow_up_opened` of kind `merge_conflict`, keyed by that head commit
//!   ([`pipeline::merge_conflict_follow_up`]; GitHub's "still computing" opens
//!   nothing until it knows); comments wait for the next pass;
//! - comments from people that no follow-up of the task has answered yet → one
//!   `follow_up_opened` of kind `review_comments`, keyed by the comments' ids, with
//!   each comment's file, line and diff hunk. gaffer's own comments are never
//!   taken (they carry [`OWN_MARKER`], and the configured bot user is skipped).
//!
//! The append is made at the head the follower read: should another follower (another
//! process, or a restart) have opened the same follow-up meanwhile, the store's
//! head check or the reducer's key check refuses the second, so each comment is
//! answered once. A follower only reads the forge and appends; the workers run
//! the reopened task like any other.
//!
//! Only tasks shipped by a gaffer that follows (their `ship` receipt records
//! `review_fix_attempts`) are followed: comments on pull requests shipped before
//! never start work on their own.

use crate::error::Result;
use crate::pipeline::{self, follow_up, receipt_of, StepKind};
use crate::steps::follow_up::OWN_MARKER;
use crate::Engine;
use gaffer_core::{Event, TaskId, TaskState};
use gaffer_forge::PrComment;
use gaffer_protocol::receipts::PullRequestReceipt;
use serde_json::{json, Value};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// What one pass of the follower did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FollowPass {
    /// Tasks whose pull request was read.
    pub read: usize,
    /// Follow-ups opened (tasks reopened).
    pub opened: Vec<String>,
    /// Tasks no longer followed (merged or closed).
    pub ended: Vec<String>,
}

impl Engine {
    /// Wake the follower now: a webhook says a pull request changed (a comment, a
    /// review). Cheap, and safe to call for any event: the follower reads what is
    /// on the forge, never what the webhook said.
    pub fn wake_follower(&self) {
        self.follow_wake.notify_one();
    }

    /// The follower's pace: the shortest interval of the projects that follow, or
    /// `None` when none does.
    pub fn follow_interval(&self) -> Option<Duration> {
        self.settings
            .shipping
            .values()
            .filter_map(|s| s.follow.as_ref().map(|f| f.every))
            .min()
    }

    /// Run the follower until `shutdown`: a pass at each interval, or when woken.
    /// A failed pass is logged and tried again at the next.
    pub async fn follow(&self, shutdown: CancellationToken) {
        let Some(every) = self.follow_interval() else {
            return;
        };
        loop {
            match self.follow_once().await {
                Ok(pass) if !pass.opened.is_empty() || !pass.ended.is_empty() => {
                    tracing::info!(opened = ?pass.opened, ended = ?pass.ended, "followed the pull requests")
                }
                Ok(_) => {}
                Err(e) => tracing::warn!("following the pull requests: {e}"),
            }
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(every) => {}
                () = self.follow_wake.notified() => {}
            }
        }
    }

    /// One pass over every followed task: the store names them (done, with a pull
    /// request, following not ended), so done tasks that are not followed are never
    /// read, however many the journal holds.
    pub async fn follow_once(&self) -> Result<FollowPass> {
        let mut pass = FollowPass::default();
        let followed = self
            .journal()
            .followed_tasks(PullRequestReceipt::STEP)
            .await?;
        for id in followed {
            match self.follow_task(&TaskId(id.clone())).await {
                Ok(Followed::Not) => {}
                Ok(Followed::Read) => pass.read += 1,
                Ok(Followed::Opened) => {
                    pass.read += 1;
                    pass.opened.push(id);
                }
                Ok(Followed::Ended) => {
                    pass.read += 1;
                    pass.ended.push(id);
                }
                // One pull request that cannot be read does not stop the others.
                Err(e) => tracing::warn!(task = %id, "following its pull request: {e}"),
            }
        }
        Ok(pass)
    }

    async fn follow_task(&self, id: &TaskId) -> Result<Followed> {
        let Some((task, head)) = self.load(id).await? else {
            return Ok(Followed::Not);
        };
        if !task.is_followed() || !shipped_by_a_follower(&task) {
            return Ok(Followed::Not);
        }
        let Some(pr) =
            receipt_of(&task, StepKind::PullRequest).and_then(PullRequestReceipt::from_receipt)
        else {
            return Ok(Followed::Not);
        };
        let project = self.project(&task).await?;
        let Some(ship) = self.settings.shipping.get(&project.name) else {
            return Ok(Followed::Not);
        };
        let Some(following) = &ship.follow else {
            return Ok(Followed::Not);
        };
        let forge = self
            .forge(ship, &project)
            .map_err(crate::EngineError::Invalid)?;
        let upstream = |e: gaffer_forge::ApiError| {
            crate::EngineError::Invalid(self.settings.redactor.redact(&e.to_string()))
        };
        let state = forge.pull_request(pr.number).await.map_err(upstream)?;
        if state.merged || state.state != "open" {
            let reason = format!(
                "the pull request {} was {}",
                pr.url,
                if state.merged { "merged" } else { "closed" }
            );
            let ended = self
                .append_at(id, head, &[Event::FollowingEnded { reason }])
                .await?;
            return Ok(if ended {
                Followed::Ended
            } else {
                Followed::Read
            });
        }
        if let Some((kind, keys, detail)) = pipeline::merge_conflict_follow_up(&state)
            .filter(|(_, keys, _)| !keys.iter().any(|k| task.has_follow_up_key(k)))
        {
            let opened = Event::FollowUpOpened { kind, keys, detail };
            return self.open(id, head, opened).await;
        }
        let comments = forge.pr_comments(pr.number).await.map_err(upstream)?;
        let new: Vec<PrComment> = comments
            .into_iter()
            .filter(|c| from_a_person(c, following.bot_user.as_deref()))
            .filter(|c| !task.has_follow_up_key(&c.key))
            .map(|mut c| {
                c.body = self.settings.redactor.redact(&c.body);
                c.diff_hunk = c.diff_hunk.map(|h| self.settings.redactor.redact(&h));
                c
            })
            .collect();
        if new.is_empty() {
            return Ok(Followed::Read);
        }
        let opened = Event::FollowUpOpened {
            kind: follow_up::review::KIND.into(),
            keys: new.iter().map(|c| c.key.clone()).collect(),
            detail: json!({ "pull_request": pr.number, "url": pr.url, "comments": new }),
        };
        self.open(id, head, opened).await
    }

    /// Append follow-up `opened` at `head`, the head the follower read.
    async fn open(&self, id: &TaskId, head: i64, opened: Event) -> Result<Followed> {
        Ok(match self.append_at(id, head, &[opened]).await {
            Ok(true) => Followed::Opened,
            // Another writer came first: the next pass reads the task again.
            Ok(false) => Followed::Read,
            Err(crate::EngineError::Store(gaffer_store::StoreError::Rejected { .. })) => {
                Followed::Read
            }
            Err(e) => return Err(e),
        })
    }
}

enum Followed {
    Not,
    Read,
    Opened,
    Ended,
}

/// Whether the task was shipped by a gaffer that follows pull requests.
fn shipped_by_a_follower(task: &TaskState) -> bool {
    receipt_of(task, StepKind::Ship)
        .and_then(|r| r.pointer("/forge/review_fix_attempts"))
        .is_some_and(Value::is_u64)
}

/// Whether a comment is a person's: not gaffer's own (its marker, the bot user),
/// nor a bot account's (CI reports, coverage bots: the forge marks them, see
/// [`PrComment::bot`]).
fn from_a_person(c: &PrComment, bot_user: Option<&str>) -> bool {
    !c.body.contains(OWN_MARKER)
        && !c.bot
        && !c.author.is_empty()
        && bot_user.is_none_or(|bot| !c.author.eq_ignore_ascii_case(bot))
}
