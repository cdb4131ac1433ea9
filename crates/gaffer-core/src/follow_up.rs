//! Follow-ups: what a shipped task's pull request asks after the task is done.
//!
//! A done task whose pull request is open is *followed*: a follower (in the engine)
//! reads the pull request and, when people asked for something (review comments)
//! or the pull request needs something (a base that moved), appends
//! [`Event::FollowUpOpened`]. The task opens again (`done` → `shipping`), the
//! pipeline answers the follow-up by its `kind` (an owner fix, a push, CI, replies)
//! and the task is done again, and followed again. [`Event::FollowingEnded`]
//! (merged, closed, a person said stop) ends following for good.
//!
//! Each follow-up has `keys` (for review comments, the comments' ids): a key is
//! answered once. The reducer refuses a follow-up with a key it has seen, so two
//! followers racing, or one restarted, cannot open the same follow-up twice (the
//! journal's optimistic append makes the second one re-read the state, and then it
//! is refused here).

use crate::{Event, Rejected, Stage, TaskState, Timestamp};
use serde::{Deserialize, Serialize};

/// One follow-up of a done task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FollowUp {
    /// 1 for the task's first follow-up, +1 for each next one.
    pub n: u32,
    /// `review_comments`, `merge_conflict`, …
    pub kind: String,
    /// What makes it this follow-up (comment ids); unique across the task.
    pub keys: Vec<String>,
    /// What it is about, as the follower recorded it.
    pub detail: serde_json::Value,
    /// When it was opened.
    pub opened_at: Timestamp,
}

impl FollowUp {
    /// Events a done task still accepts: only follow-ups and the end of following.
    pub fn comes_after_the_end(event: &Event) -> bool {
        matches!(
            event,
            Event::FollowUpOpened { .. } | Event::FollowingEnded { .. }
        )
    }
}

impl TaskState {
    /// The newest follow-up, if the task has had one.
    pub fn last_follow_up(&self) -> Option<&FollowUp> {
        self.follow_ups.last()
    }

    /// Whether the task is done and its pull request still followed.
    pub fn is_followed(&self) -> bool {
        self.stage == Stage::Done && self.following_ended.is_none()
    }

    /// Whether `key` was part of a follow-up already.
    pub fn has_follow_up_key(&self, key: &str) -> bool {
        self.follow_ups
            .iter()
            .any(|f| f.keys.iter().any(|k| k == key))
    }

    /// The reducer for [`Event::FollowUpOpened`] and [`Event::FollowingEnded`].
    pub(crate) fn follow_up(&mut self, at: Timestamp, event: &Event) -> Result<(), Rejected> {
        let refuse = |why: String| Err(Rejected::FollowUp(why));
        if self.stage != Stage::Done {
            return refuse(format!(
                "only a done task is followed; this one is {}",
                self.stage
            ));
        }
        if let Some(reason) = &self.following_ended {
            return refuse(format!("following ended: {reason}"));
        }
        match event {
            Event::FollowUpOpened { kind, keys, detail } => {
                if kind.trim().is_empty() {
                    return Err(Rejected::Empty("kind"));
                }
                if keys.is_empty() || keys.iter().any(|k| k.trim().is_empty()) {
                    return Err(Rejected::Empty("keys"));
                }
                if let Some(k) = keys.iter().find(|k| self.has_follow_up_key(k)) {
                    return refuse(format!("`{k}` was already followed up"));
                }
                let mut unique = keys.clone();
                unique.sort();
                unique.dedup();
                if unique.len() != keys.len() {
                    return refuse("a key is named twice".into());
                }
                self.follow_ups.push(FollowUp {
                    n: self.follow_ups.len() as u32 + 1,
                    kind: kind.clone(),
                    keys: keys.clone(),
                    detail: detail.clone(),
                    opened_at: at,
                });
                self.stage = Stage::Shipping;
                self.outcome = None;
            }
            Event::FollowingEnded { reason } => {
                if reason.trim().is_empty() {
                    return Err(Rejected::Empty("reason"));
                }
                self.following_ended = Some(reason.clone());
            }
            _ => {}
        }
        self.updated_at = at;
        Ok(())
    }
}
