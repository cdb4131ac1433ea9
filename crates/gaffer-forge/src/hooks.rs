//! Forge webhooks: whether a delivery comes from the forge ([`verify`]: its signature
//! over the raw body, checked in constant time before anything reads the body) and
//! the events gaffer acts on ([`parse`]).
//!
//! | sender | signature | event header |
//! |---|---|---|
//! | Gitea / Forgejo | `X-Gitea-Signature` / `X-Forgejo-Signature`: hex HMAC-SHA256 of the body | `X-Gitea-Event` / `X-Forgejo-Event` (`issues`, `issue_comment`, and for a submitted review `pull_request_approved`, `pull_request_rejected` or `pull_request_comment`, …) |
//! | GitHub | `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>` | `X-GitHub-Event` (`issues`, `issue_comment`, `pull_request_review`, `pull_request_review_comment`, `ping`, …) |
//! | GitLab | `X-Gitlab-Token`: the shared secret itself | `X-Gitlab-Event` (`Issue Hook`, `Note Hook`, …) and the body's `object_kind` |

use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::api::{ApiError, ForgeKind, Issue};
use crate::rest::names;

/// Who sends a webhook: the `{forge}` of `POST /api/hooks/{forge}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookSender {
    /// Gitea or Forgejo.
    Gitea,
    /// GitHub or GitHub Enterprise.
    GitHub,
    /// GitLab (gitlab.com or self-hosted).
    GitLab,
}

impl std::str::FromStr for HookSender {
    type Err = ApiError;

    /// `gitea`, `forgejo`, `github` or `gitlab`.
    fn from_str(s: &str) -> Result<Self, ApiError> {
        match s {
            "gitea" | "forgejo" => Ok(Self::Gitea),
            "github" => Ok(Self::GitHub),
            "gitlab" => Ok(Self::GitLab),
            other => Err(ApiError::BadInput(format!(
                "`{other}` is not a forge gaffer takes webhooks from; use gitea, forgejo, github or gitlab"
            ))),
        }
    }
}

impl HookSender {
    /// Whether a project whose forge is `kind` takes this sender's webhooks.
    pub fn serves(self, kind: ForgeKind) -> bool {
        matches!(
            (self, kind),
            (Self::Gitea, ForgeKind::Gitea)
                | (Self::GitHub, ForgeKind::GitHub)
                | (Self::GitLab, ForgeKind::GitLab)
        )
    }
}

/// Whether `body` was signed with `secret` as `sender` signs (see the module docs).
/// `header` reads a request header by its lower-case name. Constant time in the
/// signature; an empty secret verifies nothing.
pub fn verify(
    sender: HookSender,
    header: &dyn Fn(&str) -> Option<String>,
    body: &[u8],
    secret: &[u8],
) -> bool {
    if secret.is_empty() {
        return false;
    }
    let hmac_matches = |hex_sig: &str| {
        let Ok(sig) = hex::decode(hex_sig.trim()) else {
            return false;
        };
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret) else {
            return false;
        };
        mac.update(body);
        mac.verify_slice(&sig).is_ok()
    };
    match sender {
        HookSender::Gitea => header("x-forgejo-signature")
            .or_else(|| header("x-gitea-signature"))
            .is_some_and(|s| hmac_matches(&s)),
        HookSender::GitHub => header("x-hub-signature-256")
            .and_then(|s| s.trim().strip_prefix("sha256=").map(str::to_owned))
            .is_some_and(|s| hmac_matches(&s)),
        // Digests of equal length, compared in constant time: neither the secret's
        // bytes nor its length leak through timing.
        HookSender::GitLab => header("x-gitlab-token").is_some_and(|token| {
            let given = Sha256::digest(token.as_bytes());
            let want = Sha256::digest(secret);
            bool::from(given.ct_eq(&want))
        }),
    }
}

/// The hex HMAC-SHA256 of `body` with `secret`: what Gitea and Forgejo send as
/// `X-Gitea-Signature` (GitHub prefixes it with `sha256=`).
pub fn signature(secret: &[u8], body: &[u8]) -> String {
    // HMAC takes keys of any length: this cannot fail.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret) else {
        return String::new();
    };
    mac.update(body);
    hex::encode(mac.finalize().into_bytes())
}

/// What a (verified) delivery says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookEvent {
    /// An issue was opened, reopened, labelled or assigned (`action`, as the forge
    /// names it); `issue` is its state after the change, its repository in
    /// `issue.owner` / `issue.repo`.
    Issue {
        /// The forge's action name.
        action: String,
        /// The issue after the change.
        issue: Issue,
    },
    /// Someone commented on pull request `number` of `owner/repo`, or submitted a
    /// review of it (approving, requesting changes or commenting).
    PullRequestComment {
        /// Repository owner (GitLab: the namespace path).
        owner: String,
        /// Repository name.
        repo: String,
        /// The pull (merge) request's number.
        number: u64,
    },
    /// Anything else: the event and action, for the answer (`issues/closed`, `push`).
    Other(String),
}

/// Read a verified delivery. A body that is not the JSON the forge sends is an
/// [`ApiError::BadInput`] naming what is missing.
pub fn parse(
    sender: HookSender,
    header: &dyn Fn(&str) -> Option<String>,
    body: &[u8],
) -> Result<HookEvent, ApiError> {
    let v = payload(header, body)?;
    match sender {
        HookSender::Gitea => {
            let event = header("x-forgejo-event")
                .or_else(|| header("x-gitea-event"))
                .unwrap_or_default();
            gitea_or_github(
                &v,
                &event,
                &["opened", "reopened", "label_updated", "assigned"],
            )
        }
        HookSender::GitHub => {
            let event = header("x-github-event").unwrap_or_default();
            gitea_or_github(&v, &event, &["opened", "reopened", "labeled", "assigned"])
        }
        HookSender::GitLab => gitlab(&v),
    }
}

/// The delivery's JSON. GitHub's and Gitea's hooks may also be set to the form
/// content type (GitHub's default for a hook made through its API): the JSON is
/// then the `payload` field of an `application/x-www-form-urlencoded` body. The
/// signature covers the body as sent, so it was checked before this.
fn payload(header: &dyn Fn(&str) -> Option<String>, body: &[u8]) -> Result<Value, ApiError> {
    let form = header("content-type").is_some_and(|t| {
        t.trim()
            .to_ascii_lowercase()
            .starts_with("application/x-www-form-urlencoded")
    });
    if !form {
        return serde_json::from_slice(body)
            .map_err(|e| ApiError::BadInput(format!("the webhook body is not JSON: {e}")));
    }
    let json = form_urlencoded::parse(body)
        .find(|(k, _)| k == "payload")
        .map(|(_, v)| v.into_owned())
        .ok_or_else(|| {
            ApiError::BadInput(
                "the webhook's form body has no `payload` field; set the hook's content type to application/json".into(),
            )
        })?;
    serde_json::from_str(&json)
        .map_err(|e| ApiError::BadInput(format!("the webhook's form `payload` is not JSON: {e}")))
}

fn text(v: &Value, pointer: &str) -> String {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn bad(what: &str) -> ApiError {
    ApiError::BadInput(format!("the webhook body has no {what}"))
}

/// `owner/name` split at its last `/` (GitLab namespaces hold sub-groups).
fn split_repo(full: &str) -> Result<(String, String), ApiError> {
    full.rsplit_once('/')
        .filter(|(o, r)| !o.is_empty() && !r.is_empty())
        .map(|(o, r)| (o.to_owned(), r.to_owned()))
        .ok_or_else(|| bad("repository full name (owner/name)"))
}

/// Gitea's payloads copy GitHub's for issues and comments.
fn gitea_or_github(v: &Value, event: &str, handled: &[&str]) -> Result<HookEvent, ApiError> {
    let action = text(v, "/action");
    let is_pull = |v: &Value| {
        v.pointer("/issue/pull_request")
            .is_some_and(|p| !p.is_null())
            || v.get("is_pull").and_then(Value::as_bool) == Some(true)
    };
    match event {
        "issues" if handled.contains(&action.as_str()) && !is_pull(v) => {
            let (owner, repo) = split_repo(&text(v, "/repository/full_name"))?;
            let i = v.get("issue").ok_or_else(|| bad("issue"))?;
            let number = i
                .get("number")
                .and_then(Value::as_u64)
                .ok_or_else(|| bad("issue number"))?;
            Ok(HookEvent::Issue {
                action,
                issue: Issue {
                    owner,
                    repo,
                    number,
                    title: text(i, "/title"),
                    body: text(i, "/body"),
                    url: text(i, "/html_url"),
                    state: text(i, "/state"),
                    labels: names(i, "labels", "name"),
                    assignees: names(i, "assignees", "login"),
                },
            })
        }
        // GitHub: `pull_request_review(_comment)`. Gitea and Forgejo name a review by
        // its verdict (`HookEventType::Event()`: `pull_request_review_approved` is
        // sent as `pull_request_approved`, `…_rejected` as `pull_request_rejected`,
        // `…_comment` as `pull_request_comment`; a conversation comment on a pull
        // request is `issue_comment`).
        "issue_comment"
        | "pull_request_review_comment"
        | "pull_request_review"
        | "pull_request_approved"
        | "pull_request_rejected"
        | "pull_request_comment"
            if is_pull(v) || v.get("pull_request").is_some() =>
        {
            let (owner, repo) = split_repo(&text(v, "/repository/full_name"))?;
            let number = v
                .pointer("/issue/number")
                .or_else(|| v.pointer("/pull_request/number"))
                .and_then(Value::as_u64)
                .ok_or_else(|| bad("pull request number"))?;
            Ok(HookEvent::PullRequestComment {
                owner,
                repo,
                number,
            })
        }
        _ if action.is_empty() => Ok(HookEvent::Other(event.to_owned())),
        _ => Ok(HookEvent::Other(format!("{event}/{action}"))),
    }
}

fn gitlab(v: &Value) -> Result<HookEvent, ApiError> {
    let kind = text(v, "/object_kind");
    let action = text(v, "/object_attributes/action");
    match kind.as_str() {
        // Label and assignee changes arrive as `update`, with the issue's state after it.
        "issue" if matches!(action.as_str(), "open" | "reopen" | "update") => {
            let (owner, repo) = split_repo(&text(v, "/project/path_with_namespace"))?;
            let a = v
                .get("object_attributes")
                .ok_or_else(|| bad("object_attributes"))?;
            let number = a
                .get("iid")
                .and_then(Value::as_u64)
                .ok_or_else(|| bad("issue iid"))?;
            let state = match text(a, "/state").as_str() {
                "opened" => "open".to_owned(),
                other => other.to_owned(),
            };
            Ok(HookEvent::Issue {
                action,
                issue: Issue {
                    owner,
                    repo,
                    number,
                    title: text(a, "/title"),
                    body: text(a, "/description"),
                    url: text(a, "/url"),
                    state,
                    labels: names(v, "labels", "title"),
                    assignees: names(v, "assignees", "username"),
                },
            })
        }
        "note" if text(v, "/object_attributes/noteable_type") == "MergeRequest" => {
            let (owner, repo) = split_repo(&text(v, "/project/path_with_namespace"))?;
            let number = v
                .pointer("/merge_request/iid")
                .and_then(Value::as_u64)
                .ok_or_else(|| bad("merge request iid"))?;
            Ok(HookEvent::PullRequestComment {
                owner,
                repo,
                number,
            })
        }
        _ if action.is_empty() => Ok(HookEvent::Other(kind)),
        _ => Ok(HookEvent::Other(format!("{kind}/{action}"))),
    }
}
