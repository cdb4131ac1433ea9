//! What people say on a pull request: review comments on lines of the diff, review
//! summaries and conversation comments ([`PrComment`]), read the same way on every
//! forge, and the replies gaffer posts to them.
//!
//! Gitea/Forgejo: `GET /repos/{o}/{r}/pulls/{n}/reviews`, each review's
//! `GET …/reviews/{id}/comments` (`path`, `position`: the line in the new file,
//! `diff_hunk`) and `GET /repos/{o}/{r}/issues/{n}/comments`; a reply is a
//! conversation comment quoting the one it answers (Gitea's API cannot reply inside
//! a review thread). GitHub: `GET /repos/{o}/{r}/pulls/{n}/comments` (`path`,
//! `line`, `diff_hunk`, `in_reply_to_id`), `GET …/pulls/{n}/reviews` and the issue
//! comments; a review comment is answered in its thread
//! (`POST …/pulls/{n}/comments/{id}/replies`), anything else by a quoting comment.
//! GitLab (in `gitlab.rs`): the merge request's discussions, each note with its
//! `position` (`new_path`, `new_line`); a reply goes into the note's discussion.

use reqwest::Method;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::api::{ApiError, Comment};
use crate::http::Http;
use crate::rest::comment_from;

/// Where on the pull request a comment was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PrCommentKind {
    /// On a line of the diff (it has a path, usually a line and a diff hunk).
    ReviewComment,
    /// The text of a submitted review (approve / request changes / comment).
    Review,
    /// In the conversation (an issue comment on the pull request).
    Conversation,
}

impl PrCommentKind {
    pub(crate) fn prefix(self) -> &'static str {
        match self {
            PrCommentKind::ReviewComment => "review-comment",
            PrCommentKind::Review => "review",
            PrCommentKind::Conversation => "comment",
        }
    }
}

/// One comment on a pull request, as every forge gives it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrComment {
    /// `review-comment:ID`, `review:ID` or `comment:ID`: unique on the pull request
    /// (the three kinds are numbered apart).
    pub key: String,
    /// The forge's id of the comment (or review).
    pub id: u64,
    /// Where it was made.
    pub kind: PrCommentKind,
    /// Who wrote it (login).
    pub author: String,
    /// Its text (Markdown).
    pub body: String,
    /// The file it is about (review comments).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The line of the new file it is about, when the forge says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    /// The part of the diff it was made on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff_hunk: Option<String>,
    /// The comment it answers in its thread (GitHub; GitLab: the thread's first note).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_reply_to: Option<u64>,
    /// The thread a reply goes into (GitLab: the discussion's id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread: Option<String>,
    /// Its web page.
    #[serde(default)]
    pub url: String,
    /// When it was made (the forge's timestamp).
    #[serde(default)]
    pub created_at: String,
}

impl PrComment {
    /// Read one comment object of `kind` (the shapes Gitea and GitHub share; the
    /// line is GitHub's `line`, or Gitea's `position`).
    pub(crate) fn from_json(http: &Http, kind: PrCommentKind, v: &Value) -> Result<Self, ApiError> {
        let id = v
            .get("id")
            .and_then(Value::as_u64)
            .ok_or_else(|| http.decode("a pull request comment without an id"))?;
        let s = |p: &str| v.pointer(p).and_then(Value::as_str).map(str::to_owned);
        let n = |k: &str| v.get(k).and_then(Value::as_u64).filter(|n| *n > 0);
        Ok(Self {
            key: format!("{}:{id}", kind.prefix()),
            id,
            kind,
            author: s("/user/login").unwrap_or_default(),
            body: s("/body").unwrap_or_default(),
            path: s("/path").filter(|p| !p.is_empty()),
            line: n("line")
                .or_else(|| n("position"))
                .or_else(|| n("original_line")),
            diff_hunk: s("/diff_hunk").filter(|h| !h.is_empty()),
            in_reply_to: n("in_reply_to_id"),
            thread: None,
            url: s("/html_url").unwrap_or_default(),
            created_at: s("/created_at")
                .or_else(|| s("/submitted_at"))
                .unwrap_or_default(),
        })
    }

    /// The text of a reply that answers this comment outside its thread: a quote of
    /// its first lines, then `text`.
    pub fn quoting_reply(&self, text: &str) -> String {
        let quoted: Vec<String> = self
            .body
            .lines()
            .take(4)
            .map(|l| format!("> {l}"))
            .collect();
        let place = match (&self.path, self.line) {
            (Some(p), Some(l)) => format!(" on `{p}` line {l}"),
            (Some(p), None) => format!(" on `{p}`"),
            _ => String::new(),
        };
        format!("@{}{place}:\n{}\n\n{text}", self.author, quoted.join("\n"))
    }
}

/// `GET path` as a list of `kind` comments; `page_size` is the forge's page-size
/// parameter. Pages until a short page (at most 40 pages of 50).
pub(crate) async fn list(
    http: &Http,
    path: &str,
    page_size: &str,
    what: &str,
    kind: PrCommentKind,
) -> Result<Vec<PrComment>, ApiError> {
    const SIZE: usize = 50;
    let mut all = Vec::new();
    for page in 1..=40 {
        let sep = if path.contains('?') { '&' } else { '?' };
        let url = format!("{path}{sep}page={page}&{page_size}={SIZE}");
        let reply = http.send(Method::GET, &url, None, what).await?;
        let items = reply
            .body
            .as_array()
            .ok_or_else(|| http.decode(format!("{what} is not a list")))?;
        for v in items {
            all.push(PrComment::from_json(http, kind, v)?);
        }
        if items.len() < SIZE {
            break;
        }
    }
    Ok(all)
}

/// Reviews with something written in them (an approval without text asks nothing).
pub(crate) fn with_text(reviews: Vec<PrComment>) -> Vec<PrComment> {
    reviews
        .into_iter()
        .filter(|r| !r.body.trim().is_empty())
        .collect()
}

/// `POST path {"body": text}`, a comment.
pub(crate) async fn post(
    http: &Http,
    path: &str,
    text: &str,
    what: &str,
) -> Result<Comment, ApiError> {
    let reply = http
        .send(Method::POST, path, Some(&json!({ "body": text })), what)
        .await?;
    comment_from(http, &reply.body)
}
