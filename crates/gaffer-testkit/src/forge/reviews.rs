//! Pull request reviews on the fake forge: reviews, comments on lines of the diff,
//! and replies in a thread, in each forge's shapes.
//!
//! GitHub: `GET /repos/{o}/{r}/pulls/{n}/comments` (`path`, `line` and `side`
//! (`LEFT` for a removed line), `line: null` with `original_line` once outdated,
//! `position` as the offset in the diff, `diff_hunk`, `in_reply_to_id`,
//! `pull_request_review_id`), `GET …/pulls/{n}/reviews` and
//! `POST …/pulls/{n}/comments/{id}/replies` (a reply to a reply is refused with 422,
//! as GitHub does). Gitea: `GET …/pulls/{n}/reviews` and
//! `GET …/pulls/{n}/reviews/{id}/comments` (`path`, `position` as the new line or
//! `original_position` as the old one, the other `0`; `diff_hunk`; the whole list
//! whatever page is asked for, as Gitea answers); Gitea has no reply endpoint.
//!
//! Users are as each forge embeds them: on GitHub a login ending in `[bot]` is an
//! app's bot (`type: "Bot"`, as `github-actions[bot]`); on Gitea `gitea-actions`
//! and `forgejo-actions` are the Actions user (id `-2`). [`FakeForge::review_hook`]
//! is the delivery the forge sends for a submitted review.

use std::collections::HashMap;

use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::routes::{err, github_validation, html_base, page_window};
use super::{next, FakeForge, Flavor, ForgeState, HookDelivery};

/// A submitted review.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FakeReview {
    /// Its id.
    pub id: u64,
    /// The pull request.
    pub pr: u64,
    /// Who reviewed.
    pub author: String,
    /// Its text (may be empty).
    pub body: String,
    /// `COMMENTED`, `CHANGES_REQUESTED` (GitHub) / `REQUEST_CHANGES` (Gitea), `APPROVED`.
    pub state: String,
}

/// Where on the diff a line comment is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DiffLine {
    /// Line `n` of the new file (an added or unchanged line).
    New(u64),
    /// Line `n` of the old file: a line the change removes.
    Old(u64),
    /// Line `n` of the new file when the comment was made; the branch has changed it
    /// since (GitHub then says `line: null`, `original_line: n`).
    Outdated(u64),
}

/// What a submitted review says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Approve.
    Approve,
    /// Request changes.
    RequestChanges,
    /// Comment only.
    Comment,
}

impl Verdict {
    /// The review's `state` as `flavor` names it.
    fn state(self, flavor: Flavor) -> &'static str {
        match (self, flavor) {
            (Self::Approve, _) => "APPROVED",
            (Self::RequestChanges, Flavor::GitHub) => "CHANGES_REQUESTED",
            (Self::RequestChanges, Flavor::Gitea) => "REQUEST_CHANGES",
            (Self::Comment, Flavor::GitHub) => "COMMENTED",
            (Self::Comment, Flavor::Gitea) => "COMMENT",
        }
    }
}

/// A user object as the fake forge embeds it (`user`, `sender`): see the module docs.
pub(super) fn user_json(flavor: Flavor, login: &str) -> Value {
    // A stable id per login, as a forge's.
    let id = 1000 + login.bytes().map(u64::from).sum::<u64>();
    match flavor {
        Flavor::GitHub => {
            let bot = login.ends_with("[bot]");
            json!({"login": login, "id": id, "type": if bot { "Bot" } else { "User" },
                   "site_admin": false})
        }
        Flavor::Gitea => {
            let id = match login {
                "gitea-actions" | "forgejo-actions" => -2,
                _ => id as i64,
            };
            json!({"id": id, "login": login, "username": login, "full_name": "",
                   "is_admin": false, "active": true})
        }
    }
}

/// A comment on a line of the diff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FakeReviewComment {
    /// Its id.
    pub id: u64,
    /// The pull request.
    pub pr: u64,
    /// The review it belongs to.
    pub review: u64,
    /// Who wrote it: a person, or `gaffer` for a reply posted through the API.
    pub author: String,
    /// Text.
    pub body: String,
    /// The file.
    pub path: String,
    /// Where on the diff.
    pub line: DiffLine,
    /// The diff around the line.
    pub diff_hunk: String,
    /// The thread's first comment, for a reply.
    pub in_reply_to: Option<u64>,
}

impl FakeForge {
    /// `author` reviews pull request `pr` with one comment on `path` line `line` of
    /// the new file (and `diff_hunk` around it), as a person would in the forge's
    /// page. Returns the comment's id.
    pub fn add_review_comment(
        &self,
        pr: u64,
        author: &str,
        path: &str,
        line: u64,
        diff_hunk: &str,
        body: &str,
    ) -> u64 {
        self.add_review_comment_on(pr, author, path, DiffLine::New(line), diff_hunk, body)
    }

    /// Like [`Self::add_review_comment`], on a line that may be a removed one or
    /// one the branch has changed since.
    pub fn add_review_comment_on(
        &self,
        pr: u64,
        author: &str,
        path: &str,
        line: DiffLine,
        diff_hunk: &str,
        body: &str,
    ) -> u64 {
        let review = self.add_review(pr, author, Verdict::RequestChanges, "");
        self.add_comment_to_review(review, path, line, diff_hunk, body)
    }

    /// `author` submits a review of pull request `pr` with `body` (may be empty).
    /// Returns the review's id.
    pub fn add_review(&self, pr: u64, author: &str, verdict: Verdict, body: &str) -> u64 {
        let id = next(&self.state.next_id);
        self.state.reviews.lock().unwrap().push(FakeReview {
            id,
            pr,
            author: author.into(),
            body: body.into(),
            state: verdict.state(self.state.flavor).into(),
        });
        id
    }

    /// One more comment on a line in review `review`, by its reviewer. Returns the
    /// comment's id.
    ///
    /// # Panics
    /// When the fake holds no review `review` (a mistake in the test).
    pub fn add_comment_to_review(
        &self,
        review: u64,
        path: &str,
        line: DiffLine,
        diff_hunk: &str,
        body: &str,
    ) -> u64 {
        let (pr, author) = self
            .state
            .reviews
            .lock()
            .unwrap()
            .iter()
            .find(|r| r.id == review)
            .map(|r| (r.pr, r.author.clone()))
            .expect("a review the test made");
        let id = next(&self.state.next_id);
        self.state
            .review_comments
            .lock()
            .unwrap()
            .push(FakeReviewComment {
                id,
                pr,
                review,
                author,
                body: body.into(),
                path: path.into(),
                line,
                diff_hunk: diff_hunk.into(),
                in_reply_to: None,
            });
        id
    }

    /// `author` comments in the pull request's conversation. Returns the comment's id.
    pub fn add_pr_comment(&self, pr: u64, author: &str, body: &str) -> u64 {
        let id = next(&self.state.next_id);
        self.state
            .comments
            .lock()
            .unwrap()
            .push(super::FakeComment {
                id,
                issue: pr,
                body: body.into(),
                author: author.into(),
            });
        id
    }

    /// The delivery the forge sends when review `review` is submitted (`None` for
    /// an unknown review or pull request). GitHub: `X-GitHub-Event:
    /// pull_request_review`, `action: "submitted"` with the review and the pull
    /// request. Gitea and Forgejo name the event by the verdict (their
    /// `HookEventType::Event()`): `X-Gitea-Event: pull_request_approved`,
    /// `pull_request_rejected` or `pull_request_comment` (with `X-Gitea-Event-Type:
    /// pull_request_review_approved`, …), `action: "reviewed"`, the pull request
    /// and `review: {type, content}`.
    pub fn review_hook(&self, review: u64) -> Option<HookDelivery> {
        let st = &self.state;
        let r = st
            .reviews
            .lock()
            .unwrap()
            .iter()
            .find(|r| r.id == review)
            .cloned()?;
        let pr = st
            .prs
            .lock()
            .unwrap()
            .iter()
            .find(|p| p.number == r.pr)
            .cloned()?;
        let sender = user_json(st.flavor, &r.author);
        Some(match st.flavor {
            Flavor::GitHub => {
                let payload = json!({
                    "action": "submitted",
                    "review": review_json(st, &r),
                    "pull_request": super::routes::pr_json(st, &pr),
                    "repository": self.repository_json(),
                    "sender": sender,
                });
                self.delivery("pull_request_review", "", &payload)
            }
            Flavor::Gitea => {
                let (event, event_type) = match r.state.as_str() {
                    "APPROVED" => ("pull_request_approved", "pull_request_review_approved"),
                    "REQUEST_CHANGES" => ("pull_request_rejected", "pull_request_review_rejected"),
                    _ => ("pull_request_comment", "pull_request_review_comment"),
                };
                let payload = json!({
                    "action": "reviewed",
                    "number": pr.number,
                    "pull_request": super::routes::pr_json(st, &pr),
                    "requested_reviewer": sender,
                    "repository": self.repository_json(),
                    "sender": sender,
                    "review": {"type": event_type, "content": r.body},
                });
                self.delivery(event, event_type, &payload)
            }
        })
    }

    /// Every comment on a line of the diff, replies included, in order.
    pub fn review_comments(&self) -> Vec<FakeReviewComment> {
        self.state.review_comments.lock().unwrap().clone()
    }
}

fn review_json(st: &ForgeState, r: &FakeReview) -> Value {
    let count = st
        .review_comments
        .lock()
        .unwrap()
        .iter()
        .filter(|c| c.review == r.id)
        .count();
    let kind = match st.flavor {
        Flavor::Gitea => "pulls",
        Flavor::GitHub => "pull",
    };
    json!({
        "id": r.id,
        "user": user_json(st.flavor, &r.author),
        "body": r.body,
        "state": r.state,
        "submitted_at": "2026-11-30T00:00:00Z",
        "html_url": format!("{}/{kind}/{}#pullrequestreview-{}", html_base(st), r.pr, r.id),
        "comments_count": count,
    })
}

fn comment_json(st: &ForgeState, c: &FakeReviewComment) -> Value {
    let url = format!("{}/pull/{}#discussion_r{}", html_base(st), c.pr, c.id);
    let user = user_json(st.flavor, &c.author);
    match st.flavor {
        Flavor::GitHub => {
            // `position`: the commented line's offset below the hunk's `@@` header
            // (the hunk ends at that line); `null` once outdated.
            let offset = c.diff_hunk.lines().count().saturating_sub(1).max(1);
            let (line, original, side, position) = match c.line {
                DiffLine::New(n) => (json!(n), n, "RIGHT", json!(offset)),
                DiffLine::Old(n) => (json!(n), n, "LEFT", json!(offset)),
                DiffLine::Outdated(n) => (Value::Null, n, "RIGHT", Value::Null),
            };
            json!({
                "id": c.id,
                "pull_request_review_id": c.review,
                "user": user,
                "body": c.body,
                "path": c.path,
                "subject_type": "line",
                "line": line,
                "original_line": original,
                "side": side,
                "position": position,
                "original_position": offset,
                "diff_hunk": c.diff_hunk,
                "in_reply_to_id": c.in_reply_to,
                "created_at": "2026-11-30T00:00:00Z",
                "html_url": url,
            })
        }
        Flavor::Gitea => {
            // Gitea keeps a comment's line when the branch changes.
            let (position, original_position) = match c.line {
                DiffLine::New(n) | DiffLine::Outdated(n) => (n, 0),
                DiffLine::Old(n) => (0, n),
            };
            json!({
                "id": c.id,
                "pull_request_review_id": c.review,
                "user": user,
                "resolver": null,
                "body": c.body,
                "path": c.path,
                "position": position,
                "original_position": original_position,
                "diff_hunk": c.diff_hunk,
                "created_at": "2026-11-30T00:00:00Z",
                "html_url": url,
            })
        }
    }
}

/// `… /pulls/{n}/{rest…}`.
pub(super) async fn route(
    st: &ForgeState,
    method: &Method,
    n: &str,
    rest: &[&str],
    q: &HashMap<String, String>,
    body: &Value,
) -> Response {
    let Ok(pr) = n.parse::<u64>() else {
        return err(st, 404, "Not Found");
    };
    if !st.prs.lock().unwrap().iter().any(|p| p.number == pr) {
        return err(st, 404, "Not Found");
    }
    let (skip, size) = page_window(st, q);
    match (method.clone(), rest, st.flavor) {
        (Method::GET, ["reviews"], _) => {
            let list: Vec<Value> = st
                .reviews
                .lock()
                .unwrap()
                .iter()
                .filter(|r| r.pr == pr)
                .skip(skip)
                .take(size)
                .map(|r| review_json(st, r))
                .collect();
            Json(list).into_response()
        }
        (Method::GET, ["reviews", id, "comments"], Flavor::Gitea) => {
            let id: u64 = id.parse().unwrap_or_default();
            if !st.reviews.lock().unwrap().iter().any(|r| r.id == id) {
                return err(st, 404, "The target couldn't be found.");
            }
            // Gitea answers the whole list (no paging on this endpoint).
            let list: Vec<Value> = st
                .review_comments
                .lock()
                .unwrap()
                .iter()
                .filter(|c| c.review == id)
                .map(|c| comment_json(st, c))
                .collect();
            Json(list).into_response()
        }
        (Method::GET, ["comments"], Flavor::GitHub) => {
            let list: Vec<Value> = st
                .review_comments
                .lock()
                .unwrap()
                .iter()
                .filter(|c| c.pr == pr)
                .skip(skip)
                .take(size)
                .map(|c| comment_json(st, c))
                .collect();
            Json(list).into_response()
        }
        (Method::POST, ["comments", id, "replies"], Flavor::GitHub) => {
            let id: u64 = id.parse().unwrap_or_default();
            let Some(to) = st
                .review_comments
                .lock()
                .unwrap()
                .iter()
                .find(|c| c.id == id && c.pr == pr)
                .cloned()
            else {
                return err(st, 404, "Not Found");
            };
            if to.in_reply_to.is_some() {
                return github_validation(
                    json!([{"resource": "PullRequestReviewComment", "code": "custom", "message": "Replies to replies are not supported."}]),
                );
            }
            let Some(text) = body.get("body").and_then(Value::as_str) else {
                return github_validation(
                    json!([{"resource": "PullRequestReviewComment", "code": "missing_field", "field": "body"}]),
                );
            };
            let reply = FakeReviewComment {
                id: next(&st.next_id),
                pr,
                review: next(&st.next_id),
                author: "gaffer".into(),
                body: text.into(),
                path: to.path.clone(),
                line: to.line,
                diff_hunk: to.diff_hunk.clone(),
                in_reply_to: Some(to.id),
            };
            let answer = comment_json(st, &reply);
            st.review_comments.lock().unwrap().push(reply);
            super::hang_if_asked(st).await;
            (StatusCode::CREATED, Json(answer)).into_response()
        }
        _ => err(st, 404, "Not Found"),
    }
}
