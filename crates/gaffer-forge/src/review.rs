//! What people say on a pull request: review comments on lines of the diff, review
//! summaries and conversation comments ([`PrComment`]), read the same way on every
//! forge, and the replies gaffer posts to them.
//!
//! Gitea/Forgejo: `GET /repos/{o}/{r}/pulls/{n}/reviews`, each review's
//! `GET …/reviews/{id}/comments` (one answer: Gitea does not page it; `path`,
//! `position`: the line of the new file, or `original_position`: the line of the old
//! file for a comment on a removed line, the other one `0`; `diff_hunk`) and
//! `GET /repos/{o}/{r}/issues/{n}/comments`; a reply is a conversation comment
//! quoting the one it answers (Gitea's API cannot reply inside a review thread).
//! GitHub: `GET /repos/{o}/{r}/pulls/{n}/comments` (`path`, `line` with its `side`,
//! `null` once the branch changed the line, then `original_line`; `diff_hunk`,
//! `in_reply_to_id`), `GET …/pulls/{n}/reviews` and the issue comments; a review
//! comment is answered in its thread (`POST …/pulls/{n}/comments/{id}/replies`),
//! anything else by a quoting comment.
//! GitLab (in `gitlab.rs`): the merge request's discussions, each note with its
//! `position` (`new_path`/`new_line`, or `old_path`/`old_line` for a removed line:
//! the other line is `null`); a reply goes into the note's discussion.
//!
//! Who wrote a comment: a bot account's words ([`PrComment::bot`]) never ask for a
//! fix: GitHub's `user.type: "Bot"` (apps such as `github-actions[bot]`,
//! `codecov[bot]`), GitLab's `author.bot` where the API gives it and the users of
//! project and group access tokens (`project_{id}_bot_…`, `group_{id}_bot_…`), and
//! Gitea's/Forgejo's Actions user (id `-2`; Gitea's API has no user type).
//!
//! A submitted review's own text asks for something only when the review comments
//! or requests changes: an approval approves what is there, even when it says
//! "LGTM, maybe rename x later" (its comments on lines are read like any other), and
//! a dismissed, pending (unsubmitted) or merely requested review asks nothing.

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
    /// The line it is about, when the forge says; which file's line is [`Self::line_of`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    /// Which file [`Self::line`] is a line of.
    #[serde(default, skip_serializing_if = "LineOf::is_new_file")]
    pub line_of: LineOf,
    /// The part of the diff it was made on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff_hunk: Option<String>,
    /// The comment it answers in its thread (GitHub; GitLab: the thread's first note).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_reply_to: Option<u64>,
    /// The thread a reply goes into (GitLab: the discussion's id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread: Option<String>,
    /// Written by a bot account, not a person (see the module docs).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub bot: bool,
    /// Its web page.
    #[serde(default)]
    pub url: String,
    /// When it was made (the forge's timestamp).
    #[serde(default)]
    pub created_at: String,
}

/// Which file a comment's line number counts in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LineOf {
    /// The file as the pull request has it (an added or unchanged line).
    #[default]
    NewFile,
    /// The base's file: the comment is on a line the pull request removes.
    OldFile,
    /// The file at the commit the comment was made on: the branch has changed that
    /// part since (GitHub's outdated comments: `line: null`, `original_line`).
    EarlierCommit,
}

impl LineOf {
    fn is_new_file(&self) -> bool {
        *self == Self::NewFile
    }
}

impl PrComment {
    /// What every forge's comment object says alike; the line is left to the
    /// forge's reader.
    fn common(http: &Http, kind: PrCommentKind, v: &Value) -> Result<Self, ApiError> {
        let id = v
            .get("id")
            .and_then(Value::as_u64)
            .ok_or_else(|| http.decode("a pull request comment without an id"))?;
        let s = |p: &str| v.pointer(p).and_then(Value::as_str).map(str::to_owned);
        Ok(Self {
            key: format!("{}:{id}", kind.prefix()),
            id,
            kind,
            author: s("/user/login").unwrap_or_default(),
            body: s("/body").unwrap_or_default(),
            path: s("/path").filter(|p| !p.is_empty()),
            line: None,
            line_of: LineOf::NewFile,
            diff_hunk: s("/diff_hunk").filter(|h| !h.is_empty()),
            in_reply_to: positive(v, "in_reply_to_id"),
            thread: None,
            bot: false,
            url: s("/html_url").unwrap_or_default(),
            created_at: s("/created_at")
                .or_else(|| s("/submitted_at"))
                .unwrap_or_default(),
        })
    }

    /// Read a GitHub comment or review object: `line` (on the `LEFT` side, the old
    /// file's), or, once the branch changed the line (`line: null`), the
    /// `original_line`. `position` is an offset in the diff, not a line: never read.
    pub(crate) fn from_github(
        http: &Http,
        kind: PrCommentKind,
        v: &Value,
    ) -> Result<Self, ApiError> {
        let mut c = Self::common(http, kind, v)?;
        let left = v.get("side").and_then(Value::as_str) == Some("LEFT");
        (c.line, c.line_of) = match (positive(v, "line"), positive(v, "original_line")) {
            (Some(l), _) if left => (Some(l), LineOf::OldFile),
            (Some(l), _) => (Some(l), LineOf::NewFile),
            (None, Some(l)) => (Some(l), LineOf::EarlierCommit),
            (None, None) => (None, LineOf::NewFile),
        };
        c.bot = v.pointer("/user/type").and_then(Value::as_str) == Some("Bot");
        Ok(c)
    }

    /// Read a Gitea/Forgejo comment or review object: `position` is the new file's
    /// line, `original_position` the old file's (a removed line); the unused one is
    /// `0`.
    pub(crate) fn from_gitea(
        http: &Http,
        kind: PrCommentKind,
        v: &Value,
    ) -> Result<Self, ApiError> {
        let mut c = Self::common(http, kind, v)?;
        (c.line, c.line_of) = match (positive(v, "position"), positive(v, "original_position")) {
            (Some(l), _) => (Some(l), LineOf::NewFile),
            (None, Some(l)) => (Some(l), LineOf::OldFile),
            (None, None) => (None, LineOf::NewFile),
        };
        c.bot = v.pointer("/user/id").and_then(Value::as_i64) == Some(GITEA_ACTIONS_USER_ID);
        Ok(c)
    }

    /// Where the comment was made, for a sentence: `` on `src/a.rs` line 4``, with
    /// which file's line when it is not the new one; empty for a conversation comment.
    pub fn place(&self) -> String {
        match (&self.path, self.line, self.line_of) {
            (Some(p), Some(l), LineOf::NewFile) => format!(" on `{p}` line {l}"),
            (Some(p), Some(l), LineOf::OldFile) => {
                format!(" on `{p}` line {l} of the old file (a line the change removes)")
            }
            (Some(p), Some(l), LineOf::EarlierCommit) => format!(
                " on `{p}` line {l} as it was when commented (the branch has changed it since)"
            ),
            (Some(p), None, _) => format!(" on `{p}`"),
            (None, ..) => String::new(),
        }
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
        format!(
            "@{}{}:\n{}\n\n{text}",
            self.author,
            self.place(),
            quoted.join("\n")
        )
    }
}

/// Gitea's and Forgejo's Actions user (`gitea-actions`, `forgejo-actions`): the
/// only bot their API can tell apart (it has no user type).
const GITEA_ACTIONS_USER_ID: i64 = -2;

/// A positive number at `key` (`0` and `null` say "none" on these forges).
fn positive(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64).filter(|n| *n > 0)
}

/// `GET path` once: the whole list, for an endpoint that does not page (Gitea's
/// review comments: asking it for page 2 answers the same list again).
pub(crate) async fn list_once(http: &Http, path: &str, what: &str) -> Result<Vec<Value>, ApiError> {
    let reply = http.send(Method::GET, path, None, what).await?;
    match reply.body {
        Value::Array(items) => Ok(items),
        _ => Err(http.decode(format!("{what} is not a list"))),
    }
}

/// `GET path` page by page; `page_size` is the forge's page-size parameter. Pages
/// until a short page (at most 40 pages of 50).
pub(crate) async fn list(
    http: &Http,
    path: &str,
    page_size: &str,
    what: &str,
) -> Result<Vec<Value>, ApiError> {
    const SIZE: usize = 50;
    let mut all = Vec::new();
    for page in 1..=40 {
        let sep = if path.contains('?') { '&' } else { '?' };
        let url = format!("{path}{sep}page={page}&{page_size}={SIZE}");
        let items = list_once(http, &url, what).await?;
        let short = items.len() < SIZE;
        all.extend(items);
        if short {
            break;
        }
    }
    Ok(all)
}

/// Read each of `items` with `read` as `kind` comments.
pub(crate) fn read_all(
    http: &Http,
    items: &[Value],
    kind: PrCommentKind,
    read: fn(&Http, PrCommentKind, &Value) -> Result<PrComment, ApiError>,
) -> Result<Vec<PrComment>, ApiError> {
    items.iter().map(|v| read(http, kind, v)).collect()
}

/// Whether a submitted review's own text asks for something: it has text, and it
/// comments (GitHub `COMMENTED`, Gitea `COMMENT`) or requests changes
/// (`CHANGES_REQUESTED`, `REQUEST_CHANGES`), and was not dismissed. An approval,
/// a pending (unsubmitted) review and a review request ask nothing.
pub(crate) fn review_asks(review: &Value) -> bool {
    let state = review
        .get("state")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let has_text = review
        .get("body")
        .and_then(Value::as_str)
        .is_some_and(|b| !b.trim().is_empty());
    let dismissed = review.get("dismissed").and_then(Value::as_bool) == Some(true);
    has_text
        && !dismissed
        && matches!(
            state,
            "COMMENTED" | "COMMENT" | "CHANGES_REQUESTED" | "REQUEST_CHANGES"
        )
}

/// Whether a review's comments on lines are there for others to read: submitted,
/// not a pending draft or a mere review request (Gitea lists both among reviews).
pub(crate) fn review_submitted(review: &Value) -> bool {
    !matches!(
        review.get("state").and_then(Value::as_str),
        Some("PENDING" | "REQUEST_REVIEW")
    )
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
