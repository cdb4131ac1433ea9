//! Pull request reviews on the fake forge: reviews, comments on lines of the diff,
//! and replies in a thread, in each forge's shapes.
//!
//! GitHub: `GET /repos/{o}/{r}/pulls/{n}/comments` (`path`, `line`, `diff_hunk`,
//! `in_reply_to_id`, `pull_request_review_id`), `GET …/pulls/{n}/reviews` and
//! `POST …/pulls/{n}/comments/{id}/replies` (a reply to a reply is refused with 422,
//! as GitHub does). Gitea: `GET …/pulls/{n}/reviews` and
//! `GET …/pulls/{n}/reviews/{id}/comments` (`path`, `position` as the new line,
//! `diff_hunk`); Gitea has no reply endpoint.

use std::collections::HashMap;

use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::routes::{err, github_validation, html_base, page_window};
use super::{next, FakeForge, Flavor, ForgeState};

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
    /// The line of the new file.
    pub line: u64,
    /// The diff around the line.
    pub diff_hunk: String,
    /// The thread's first comment, for a reply.
    pub in_reply_to: Option<u64>,
}

impl FakeForge {
    /// `author` reviews pull request `pr` with one comment on `path` line `line` (and
    /// `diff_hunk` around it), as a person would in the forge's page. Returns the
    /// comment's id.
    pub fn add_review_comment(
        &self,
        pr: u64,
        author: &str,
        path: &str,
        line: u64,
        diff_hunk: &str,
        body: &str,
    ) -> u64 {
        let review = next(&self.state.next_id);
        let state = match self.state.flavor {
            Flavor::GitHub => "CHANGES_REQUESTED",
            Flavor::Gitea => "REQUEST_CHANGES",
        };
        self.state.reviews.lock().unwrap().push(FakeReview {
            id: review,
            pr,
            author: author.into(),
            body: String::new(),
            state: state.into(),
        });
        let id = next(&self.state.next_id);
        self.state
            .review_comments
            .lock()
            .unwrap()
            .push(FakeReviewComment {
                id,
                pr,
                review,
                author: author.into(),
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
        "user": {"login": r.author},
        "body": r.body,
        "state": r.state,
        "submitted_at": "2026-11-30T00:00:00Z",
        "html_url": format!("{}/{kind}/{}#pullrequestreview-{}", html_base(st), r.pr, r.id),
        "comments_count": count,
    })
}

fn comment_json(st: &ForgeState, c: &FakeReviewComment) -> Value {
    let url = format!("{}/pull/{}#discussion_r{}", html_base(st), c.pr, c.id);
    match st.flavor {
        Flavor::GitHub => json!({
            "id": c.id,
            "pull_request_review_id": c.review,
            "user": {"login": c.author},
            "body": c.body,
            "path": c.path,
            "line": c.line,
            "original_line": c.line,
            "side": "RIGHT",
            "diff_hunk": c.diff_hunk,
            "in_reply_to_id": c.in_reply_to,
            "created_at": "2026-11-30T00:00:00Z",
            "html_url": url,
        }),
        Flavor::Gitea => json!({
            "id": c.id,
            "pull_request_review_id": c.review,
            "user": {"login": c.author},
            "body": c.body,
            "path": c.path,
            "position": c.line,
            "original_position": 0,
            "diff_hunk": c.diff_hunk,
            "created_at": "2026-11-30T00:00:00Z",
            "html_url": url,
        }),
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
