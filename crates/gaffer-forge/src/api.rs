//! The forge API: pull requests, CI status, issues — shared types, errors and HTTP.

use std::time::Duration;

use async_trait::async_trait;
use reqwest::header::HeaderMap;
use reqwest::{Method, StatusCode};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::secret::{redact, Secret};

/// Which forge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ForgeKind {
    /// Gitea or Forgejo (`/api/v1`, `Authorization: token …`).
    Gitea,
    /// GitHub or GitHub Enterprise (`Authorization: Bearer …`).
    #[serde(rename = "github")]
    GitHub,
}

impl ForgeKind {
    /// Lowercase name, as in the config.
    pub fn name(self) -> &'static str {
        match self {
            ForgeKind::Gitea => "gitea",
            ForgeKind::GitHub => "github",
        }
    }
}

impl std::str::FromStr for ForgeKind {
    type Err = ApiError;

    /// `gitea`, `forgejo` (the same API) or `github`, any case.
    fn from_str(s: &str) -> Result<Self, ApiError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "gitea" | "forgejo" => Ok(ForgeKind::Gitea),
            "github" => Ok(ForgeKind::GitHub),
            other => Err(ApiError::BadInput(format!(
                "unknown forge kind `{other}`; use \"gitea\" (also Forgejo) or \"github\""
            ))),
        }
    }
}

/// Owner and name of a repository, read from a git remote URL
/// (`https://host/owner/repo(.git)`, `ssh://git@host:port/owner/repo.git`,
/// `git@host:owner/repo.git`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteRepo {
    /// Host (no port, no credentials).
    pub host: String,
    /// Owner (the path before the name; sub-groups joined with `/`).
    pub owner: String,
    /// Repository name, without `.git`.
    pub repo: String,
}

impl RemoteRepo {
    /// Parse a remote URL; `None` for a local path or a URL without owner and name.
    pub fn parse(url: &str) -> Option<Self> {
        let url = url.trim();
        let (host_part, path) = if let Some((_, rest)) = url.split_once("://") {
            rest.split_once('/')?
        } else {
            // scp-like: [user@]host:path
            let (h, p) = url.split_once(':')?;
            if h.contains('/') {
                return None;
            }
            (h, p)
        };
        let host = host_part.rsplit('@').next()?;
        let host = host.split(':').next()?.to_owned();
        let path = path.trim_matches('/');
        let path = path.strip_suffix(".git").unwrap_or(path);
        let (owner, repo) = path.rsplit_once('/')?;
        (!host.is_empty() && !owner.is_empty() && !repo.is_empty()).then(|| Self {
            host,
            owner: owner.to_owned(),
            repo: repo.to_owned(),
        })
    }
}

/// How to reach one repository on a forge.
#[derive(Debug, Clone)]
pub struct ForgeConfig {
    /// Gitea/Forgejo or GitHub.
    pub kind: ForgeKind,
    /// Gitea: the instance URL (`https://git.example.com`; `/api/v1` is added).
    /// GitHub: the API URL (`https://api.github.com`, or `https://HOST/api/v3`).
    pub base_url: String,
    /// Repository owner (user or organisation).
    pub owner: String,
    /// Repository name.
    pub repo: String,
    /// The API token.
    pub token: Secret,
    /// Where the token came from (an environment variable name), for error hints.
    pub token_source: String,
    /// Per-request time limit (default 30 s).
    pub request_timeout: Duration,
    /// Longest wait gaffer sleeps by itself when rate limited before retrying a
    /// request (default 60 s); longer waits are returned as [`ApiError::RateLimited`].
    pub max_rate_limit_wait: Duration,
}

impl ForgeConfig {
    /// A config with default limits.
    pub fn new(
        kind: ForgeKind,
        base_url: impl Into<String>,
        owner: impl Into<String>,
        repo: impl Into<String>,
        token: Secret,
        token_source: impl Into<String>,
    ) -> Self {
        Self {
            kind,
            base_url: base_url.into().trim_end_matches('/').to_owned(),
            owner: owner.into(),
            repo: repo.into(),
            token,
            token_source: token_source.into(),
            request_timeout: Duration::from_secs(30),
            max_rate_limit_wait: Duration::from_secs(60),
        }
    }

    /// A config whose token is read from the environment variable `token_env`; a
    /// missing or empty variable is a clear error naming it.
    pub fn from_env(
        kind: ForgeKind,
        base_url: impl Into<String>,
        owner: impl Into<String>,
        repo: impl Into<String>,
        token_env: &str,
    ) -> Result<Self, ApiError> {
        let token = Secret::from_env(token_env).ok_or_else(|| {
            ApiError::BadInput(format!(
                "the environment variable {token_env} is not set or empty; put a {} API token in it",
                kind.name()
            ))
        })?;
        Ok(Self::new(kind, base_url, owner, repo, token, token_env))
    }
}

/// A pull request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PullRequest {
    /// Its number (index) in the repository.
    pub number: u64,
    /// The web page.
    pub url: String,
    /// `open` or `closed`.
    pub state: String,
    /// Title.
    pub title: String,
    /// Head branch.
    pub head: String,
    /// Head commit.
    pub head_sha: String,
    /// Base branch.
    pub base: String,
    /// Whether it was merged (then `state` is `closed`).
    #[serde(default)]
    pub merged: bool,
    /// Problems after the PR was created (labels that could not be set): the PR exists.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// What to open.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewPullRequest {
    /// Title.
    pub title: String,
    /// Body (Markdown).
    pub body: String,
    /// The task branch.
    pub head: String,
    /// The branch to merge into.
    pub base: String,
    /// Label names (optional; set after creation).
    #[serde(default)]
    pub labels: Vec<String>,
}

/// Normalised CI state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CiState {
    /// Not finished (or nothing reported yet).
    Pending,
    /// Everything passed.
    Success,
    /// A check failed.
    Failure,
    /// A check could not run (cancelled, infrastructure error).
    Error,
}

impl CiState {
    /// Whether waiting is over.
    pub fn is_final(self) -> bool {
        !matches!(self, CiState::Pending)
    }
}

/// One check (a GitHub check run, or a commit status).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CiCheck {
    /// Check run name or status context.
    pub name: String,
    /// Normalised state.
    pub state: CiState,
    /// What the forge reported (`in_progress`, `failure`, `timed_out`, …).
    pub raw_state: String,
    /// Description or output title.
    pub description: String,
    /// Where to see it.
    pub target_url: Option<String>,
    /// GitHub check-run id (equal to the Actions job id), when there is one.
    pub check_run_id: Option<u64>,
}

/// The CI state of one commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CiStatus {
    /// The commit.
    pub sha: String,
    /// The overall state: any failure → failure; else any error → error; else any
    /// pending → pending; else success. No checks at all → pending.
    pub state: CiState,
    /// Every check.
    pub checks: Vec<CiCheck>,
}

impl CiStatus {
    /// Combine checks into an overall state.
    pub fn from_checks(sha: &str, checks: Vec<CiCheck>) -> Self {
        let any = |s| checks.iter().any(|c| c.state == s);
        let state = if any(CiState::Failure) {
            CiState::Failure
        } else if any(CiState::Error) {
            CiState::Error
        } else if checks.is_empty() || any(CiState::Pending) {
            CiState::Pending
        } else {
            CiState::Success
        };
        Self {
            sha: sha.into(),
            state,
            checks,
        }
    }

    /// Checks that failed or errored.
    pub fn failing(&self) -> impl Iterator<Item = &CiCheck> {
        self.checks
            .iter()
            .filter(|c| matches!(c.state, CiState::Failure | CiState::Error))
    }
}

/// A failing check's log, or what the forge offers instead.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailingLog {
    /// The check.
    pub check: String,
    /// The log text (its last 64 KiB), or the check's description and link when the
    /// forge offers no log API.
    pub text: String,
    /// Whether `text` is the job's log (false: only a description).
    pub is_log: bool,
    /// Where to see it.
    pub url: Option<String>,
}

/// An issue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Issue {
    /// Owner of its repository.
    pub owner: String,
    /// Its repository.
    pub repo: String,
    /// Number.
    pub number: u64,
    /// Title.
    pub title: String,
    /// Body.
    pub body: String,
    /// Web page.
    pub url: String,
    /// `open` or `closed`.
    pub state: String,
}

/// A comment that was posted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Comment {
    /// Its id.
    pub id: u64,
    /// Its web page.
    pub url: String,
}

/// What can go wrong talking to a forge or tracker. No variant ever holds a token.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ApiError {
    /// 401.
    #[error("the token for {forge} was refused (401); check that {token_source} holds a valid, unexpired token with access to the repository")]
    Unauthorized {
        /// Which service (`gitea at https://…`).
        forge: String,
        /// Where the token came from.
        token_source: String,
    },
    /// 403 without a rate limit: the token lacks a permission, or a rule refused it.
    #[error("{forge} refused the request (403): {message}; check the token's scopes and the repository's permissions")]
    Forbidden {
        /// Which service.
        forge: String,
        /// The forge's message.
        message: String,
    },
    /// 404.
    #[error("{what} was not found on {forge} (404); check the owner, repository and number, and that the token can see it")]
    NotFound {
        /// What was asked for.
        what: String,
        /// Which service.
        forge: String,
    },
    /// 409 or 422: the forge refused the change (a PR exists, a protected branch, a
    /// validation error).
    #[error("{forge} refused it ({status}): {message}")]
    Rejected {
        /// Which service.
        forge: String,
        /// 409 or 422.
        status: u16,
        /// The forge's message.
        message: String,
    },
    /// 429, or 403 with an exhausted rate limit.
    #[error("{forge} is rate limiting gaffer; retry after {}s{}", retry_after.as_secs(), reset_at.map(|r| format!(" (the limit resets at unix time {r})")).unwrap_or_default())]
    RateLimited {
        /// Which service.
        forge: String,
        /// How long to wait (from `Retry-After` or `X-RateLimit-Reset`).
        retry_after: Duration,
        /// `X-RateLimit-Reset`, when given.
        reset_at: Option<u64>,
    },
    /// Connection refused, DNS, TLS or timeout.
    #[error(
        "cannot reach {url}: {detail}; check the base URL, the network and that the server is up"
    )]
    Unreachable {
        /// The URL (no credentials).
        url: String,
        /// What failed.
        detail: String,
    },
    /// Any other status.
    #[error("{forge} answered {status}: {message}")]
    Http {
        /// Which service.
        forge: String,
        /// The status.
        status: u16,
        /// The forge's message.
        message: String,
    },
    /// The answer did not have the expected shape.
    #[error("{forge} sent an answer gaffer cannot read: {detail}")]
    Decode {
        /// Which service.
        forge: String,
        /// What was wrong.
        detail: String,
    },
    /// A bad argument (an issue URL that names no issue, …).
    #[error("{0}")]
    BadInput(String),
    /// No CI check reported for the commit at all.
    #[error("no CI check reported for {sha} within {}s; the repository may have no CI for this branch (check its CI setup, or turn the CI wait off for the project)", waited.as_secs())]
    NoChecks {
        /// The commit.
        sha: String,
        /// How long gaffer waited.
        waited: Duration,
    },
    /// CI did not finish in time.
    #[error("CI for {sha} did not finish within {}s (last state: {last:?}); look at the checks or raise the limit", waited.as_secs())]
    CiTimedOut {
        /// The commit.
        sha: String,
        /// How long gaffer waited.
        waited: Duration,
        /// The last state seen.
        last: CiState,
    },
}

impl ApiError {
    /// For a non-idempotent call (`create_pr`, `comment_on_issue`, `create_task`):
    /// whether the service may have done it although gaffer got an error — a timeout or
    /// a dropped connection after the request went out, a 5xx, an unreadable answer.
    /// Then the effect is unknown: reconcile (`find_open_pr`) before anything else.
    /// 401/403/404/409/422 and rate limits mean nothing was done.
    pub fn effect_unknown(&self) -> bool {
        match self {
            ApiError::Unreachable { .. } | ApiError::Decode { .. } => true,
            ApiError::Http { status, .. } => *status >= 500,
            _ => false,
        }
    }
}

/// A forge: pull requests, CI, issues.
///
/// Intents: `find_open_pr`, `ci_status`, `failing_log`, `issue` are read-only;
/// `create_pr` and `comment_on_issue` are non-idempotent (look before, reconcile after a
/// crash: `find_open_pr(head)` for a PR).
#[async_trait]
pub trait Forge: Send + Sync {
    /// Which forge.
    fn kind(&self) -> ForgeKind;

    /// The open pull request whose head is `head` (a branch of this repository), if any.
    async fn find_open_pr(&self, head: &str) -> Result<Option<PullRequest>, ApiError>;

    /// A pull request by number, in any state (read-only): whether it was merged or
    /// closed, to prune its branch.
    async fn pull_request(&self, number: u64) -> Result<PullRequest, ApiError>;

    /// Open a pull request. Non-idempotent: call [`Forge::find_open_pr`] first (or
    /// use [`Forge::ensure_pr`]).
    async fn create_pr(&self, pr: &NewPullRequest) -> Result<PullRequest, ApiError>;

    /// Add labels (by name) to pull request `number`; labels it has already are kept.
    /// Idempotent.
    async fn label_pr(&self, number: u64, labels: &[String]) -> Result<(), ApiError>;

    /// The CI state of a commit.
    async fn ci_status(&self, sha: &str) -> Result<CiStatus, ApiError>;

    /// The log of a failing check where the API offers it.
    async fn failing_log(&self, check: &CiCheck) -> Result<FailingLog, ApiError>;

    /// Read an issue: a URL (`https://host/owner/repo/issues/7`), `owner/repo#7`,
    /// `#7` or `7` (the configured repository).
    async fn issue(&self, reference: &str) -> Result<Issue, ApiError>;

    /// Comment on an issue (same references as [`Forge::issue`]). Non-idempotent.
    async fn comment_on_issue(&self, reference: &str, text: &str) -> Result<Comment, ApiError>;

    /// The first comment on the issue whose text contains `marker` (read-only): the
    /// probe that reconciles a `comment_on_issue` interrupted by a crash, when the
    /// caller put a unique marker in the text (an HTML comment such as
    /// `<!-- gaffer:t-1 -->` is invisible on both forges).
    async fn find_comment(
        &self,
        reference: &str,
        marker: &str,
    ) -> Result<Option<Comment>, ApiError>;

    /// The open PR for `pr.head`, or a new one: the find-before-create the engine's
    /// ship step (and its reconciliation after a crash) should use. Returns the PR and
    /// whether it was created now. A create that the forge refuses because a PR for
    /// the head already exists (a race) is answered with that PR. A create whose
    /// answer was lost ([`ApiError::effect_unknown`]: a timeout, a cut connection, a
    /// 5xx) is looked up too: found, it is the PR this call made (labelled now, as
    /// the create would have); not found or unreadable, the create's error stands.
    async fn ensure_pr(&self, pr: &NewPullRequest) -> Result<(PullRequest, bool), ApiError> {
        if let Some(found) = self.find_open_pr(&pr.head).await? {
            return Ok((found, false));
        }
        match self.create_pr(pr).await {
            Ok(created) => Ok((created, true)),
            Err(e @ ApiError::Rejected { .. }) => match self.find_open_pr(&pr.head).await? {
                Some(found) => Ok((found, false)),
                None => Err(e),
            },
            Err(e) if e.effect_unknown() => match self.find_open_pr(&pr.head).await {
                Ok(Some(found)) => Ok((labelled(self, found, &pr.labels).await, true)),
                Ok(None) | Err(_) => Err(e),
            },
            Err(e) => Err(e),
        }
    }
}

/// Build the client for `config`.
pub fn connect(config: ForgeConfig) -> Result<Box<dyn Forge>, ApiError> {
    Ok(match config.kind {
        ForgeKind::Gitea => Box::new(crate::gitea::Gitea::new(config)?),
        ForgeKind::GitHub => Box::new(crate::github::GitHub::new(config)?),
    })
}

/// An issue reference, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssueRef {
    /// Owner.
    pub owner: String,
    /// Repository.
    pub repo: String,
    /// Number.
    pub number: u64,
}

impl IssueRef {
    /// Parse a URL (`…/owner/repo/issues/7`, also `/pulls/7` and `/pull/7`),
    /// `owner/repo#7`, `#7` or `7`; bare numbers are in `owner/repo`.
    pub fn parse(reference: &str, owner: &str, repo: &str) -> Result<Self, ApiError> {
        let r = reference.trim();
        let bad = || {
            ApiError::BadInput(format!(
                "`{r}` names no issue; give an issue URL (https://HOST/OWNER/REPO/issues/N), OWNER/REPO#N or a number"
            ))
        };
        let number = |s: &str| s.trim_start_matches('#').parse::<u64>().map_err(|_| bad());
        if let Some((_, rest)) = r.split_once("://") {
            let path = rest.split(['?', '#']).next().unwrap_or_default();
            let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
            let i = segs
                .iter()
                .rposition(|s| matches!(*s, "issues" | "pulls" | "pull"))
                .ok_or_else(bad)?;
            if i < 3 || i + 1 >= segs.len() {
                return Err(bad());
            }
            return Ok(Self {
                owner: segs[i - 2].into(),
                repo: segs[i - 1].into(),
                number: number(segs[i + 1])?,
            });
        }
        if let Some((path, n)) = r.split_once('#') {
            if !path.is_empty() {
                let (o, p) = path.split_once('/').ok_or_else(bad)?;
                return Ok(Self {
                    owner: o.into(),
                    repo: p.into(),
                    number: number(n)?,
                });
            }
        }
        Ok(Self {
            owner: owner.into(),
            repo: repo.into(),
            number: number(r)?,
        })
    }
}

/// An HTTP response that was not an error.
pub(crate) struct Reply {
    pub(crate) body: Value,
}

/// The shared HTTP client: auth header, error mapping, rate-limit waits, redaction.
#[derive(Clone)]
pub(crate) struct Http {
    pub(crate) client: reqwest::Client,
    /// API root, no trailing slash.
    pub(crate) api: String,
    pub(crate) token: Secret,
    pub(crate) auth_scheme: &'static str,
    pub(crate) forge: String,
    pub(crate) token_source: String,
    pub(crate) max_rate_limit_wait: Duration,
}

impl std::fmt::Debug for Http {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Http")
            .field("api", &self.api)
            .field("forge", &self.forge)
            .field("token", &self.token)
            .finish()
    }
}

impl Http {
    pub(crate) fn new(
        api: String,
        token: Secret,
        auth_scheme: &'static str,
        forge: String,
        token_source: String,
        timeout: Duration,
        max_rate_limit_wait: Duration,
    ) -> Result<Self, ApiError> {
        let client = reqwest::Client::builder()
            .user_agent(concat!("gaffer/", env!("CARGO_PKG_VERSION")))
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .build()
            .map_err(|e| ApiError::BadInput(format!("cannot build the HTTP client: {e}")))?;
        Ok(Self {
            client,
            api,
            token,
            auth_scheme,
            forge,
            token_source,
            max_rate_limit_wait,
        })
    }

    fn clean(&self, text: &str) -> String {
        redact(text, &[&self.token])
    }

    /// Send a request to `path` (relative to the API root, or an absolute URL).
    /// `what` names the resource for a 404. Rate-limit answers whose wait is within
    /// `max_rate_limit_wait` are waited out and retried (up to 3 times): a 429/403 means
    /// the forge did nothing, so even a create is safe to resend.
    pub(crate) async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        what: &str,
    ) -> Result<Reply, ApiError> {
        let url = if path.starts_with("http://") || path.starts_with("https://") {
            path.to_owned()
        } else {
            format!("{}{path}", self.api)
        };
        let mut attempts = 0;
        loop {
            attempts += 1;
            let github = self.forge.starts_with("github");
            let mut req = self
                .client
                .request(method.clone(), &url)
                .header(
                    reqwest::header::AUTHORIZATION,
                    format!("{} {}", self.auth_scheme, self.token.expose()),
                )
                .header(
                    reqwest::header::ACCEPT,
                    if github {
                        "application/vnd.github+json"
                    } else {
                        "application/json"
                    },
                );
            if github {
                req = req.header("X-GitHub-Api-Version", "2022-11-28");
            }
            if let Some(b) = body {
                req = req.json(b);
            }
            let resp = req.send().await.map_err(|e| self.unreachable(&url, &e))?;
            let status = resp.status();
            let headers = resp.headers().clone();
            let text = resp.text().await.map_err(|e| self.unreachable(&url, &e))?;
            if status.is_success() || status.is_redirection() {
                let body = if text.trim().is_empty() {
                    Value::Null
                } else {
                    serde_json::from_str(&text).unwrap_or(Value::String(text))
                };
                return Ok(Reply { body });
            }
            let err = self.error(status, &headers, &text, what);
            if let ApiError::RateLimited { retry_after, .. } = &err {
                if attempts <= 3 && *retry_after <= self.max_rate_limit_wait {
                    tokio::time::sleep(*retry_after).await;
                    continue;
                }
            }
            return Err(err);
        }
    }

    /// GET returning raw text (logs), following redirects.
    pub(crate) async fn get_text(&self, url: &str, what: &str) -> Result<String, ApiError> {
        let resp = self
            .client
            .get(url)
            .header(
                reqwest::header::AUTHORIZATION,
                format!("{} {}", self.auth_scheme, self.token.expose()),
            )
            .send()
            .await
            .map_err(|e| self.unreachable(url, &e))?;
        let status = resp.status();
        let headers = resp.headers().clone();
        let text = resp.text().await.map_err(|e| self.unreachable(url, &e))?;
        if status.is_success() {
            Ok(self.clean(&text))
        } else {
            Err(self.error(status, &headers, &text, what))
        }
    }

    fn unreachable(&self, url: &str, e: &reqwest::Error) -> ApiError {
        let mut detail = if e.is_timeout() {
            "timed out".to_owned()
        } else if e.is_connect() {
            "connection failed".to_owned()
        } else {
            "request failed".to_owned()
        };
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            detail.push_str(": ");
            detail.push_str(&s.to_string());
            source = s.source();
        }
        ApiError::Unreachable {
            url: self.clean(url),
            detail: self.clean(&detail),
        }
    }

    pub(crate) fn decode(&self, detail: impl std::fmt::Display) -> ApiError {
        ApiError::Decode {
            forge: self.forge.clone(),
            detail: self.clean(&detail.to_string()),
        }
    }

    fn error(&self, status: StatusCode, headers: &HeaderMap, text: &str, what: &str) -> ApiError {
        let forge = self.forge.clone();
        let message = self.clean(&message_of(text));
        let header = |n: &str| {
            headers
                .get(n)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
        };
        let retry_after = header("retry-after");
        let remaining = header("x-ratelimit-remaining");
        let reset = header("x-ratelimit-reset");
        let limited = status == StatusCode::TOO_MANY_REQUESTS
            || (status == StatusCode::FORBIDDEN && (retry_after.is_some() || remaining == Some(0)));
        if limited {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or_default();
            let secs = retry_after
                .or_else(|| reset.map(|r| r.saturating_sub(now)))
                .unwrap_or(60);
            return ApiError::RateLimited {
                forge,
                retry_after: Duration::from_secs(secs),
                reset_at: reset,
            };
        }
        match status.as_u16() {
            401 => ApiError::Unauthorized {
                forge,
                token_source: self.token_source.clone(),
            },
            403 => ApiError::Forbidden { forge, message },
            404 => ApiError::NotFound {
                what: what.into(),
                forge,
            },
            409 | 422 => ApiError::Rejected {
                forge,
                status: status.as_u16(),
                message,
            },
            s => ApiError::Http {
                forge,
                status: s,
                message,
            },
        }
    }
}

/// The human part of an error body: `message`, plus GitHub's `errors[].message`.
fn message_of(text: &str) -> String {
    let Ok(v) = serde_json::from_str::<Value>(text) else {
        let t = text.trim();
        return if t.is_empty() {
            "no message".into()
        } else {
            t.chars().take(300).collect()
        };
    };
    let mut parts: Vec<String> = Vec::new();
    if let Some(m) = v.get("message").and_then(Value::as_str) {
        parts.push(m.to_owned());
    }
    if let Some(errs) = v.get("errors").and_then(Value::as_array) {
        for e in errs {
            let g = |k: &str| e.get(k).and_then(Value::as_str);
            if let Some(m) = g("message") {
                parts.push(m.to_owned());
            } else if let Some(m) = e.as_str() {
                parts.push(m.to_owned());
            } else if let Some(code) = g("code") {
                // GitHub: {"resource":"PullRequest","field":"head","code":"invalid"}
                let field = g("field").unwrap_or_default();
                let resource = g("resource").unwrap_or_default();
                parts.push(format!("{resource} {field} is {code}").replace("  ", " "));
            }
        }
    }
    if parts.is_empty() {
        v.to_string().chars().take(300).collect()
    } else {
        parts.join(": ")
    }
}

/// Read a PR object (Gitea and GitHub share the shape we use).
pub(crate) fn pr_from(http: &Http, v: &Value) -> Result<PullRequest, ApiError> {
    let s = |p: &str| v.pointer(p).and_then(Value::as_str).map(str::to_owned);
    Ok(PullRequest {
        number: v
            .get("number")
            .and_then(Value::as_u64)
            .ok_or_else(|| http.decode("a pull request without a number"))?,
        url: s("/html_url").unwrap_or_default(),
        state: s("/state").unwrap_or_else(|| "open".into()),
        title: s("/title").unwrap_or_default(),
        head: s("/head/ref").unwrap_or_default(),
        head_sha: s("/head/sha").unwrap_or_default(),
        base: s("/base/ref").unwrap_or_default(),
        merged: v.get("merged").and_then(Value::as_bool).unwrap_or(false)
            || v.get("merged_at").is_some_and(|m| !m.is_null()),
        warnings: Vec::new(),
    })
}

/// Read an issue object.
/// Where an issue and its comments live, and how to name it in errors. Gitea's issue
/// API copies GitHub's, so both forges use the calls below.
fn issue_paths(r: &IssueRef) -> (String, String) {
    let path = format!(
        "/repos/{}/{}/issues/{}",
        enc(&r.owner),
        enc(&r.repo),
        r.number
    );
    let what = format!("the issue {}/{}#{}", r.owner, r.repo, r.number);
    (path, what)
}

/// Read an issue (read-only).
pub(crate) async fn get_issue(
    http: &Http,
    owner: &str,
    repo: &str,
    reference: &str,
) -> Result<Issue, ApiError> {
    let r = IssueRef::parse(reference, owner, repo)?;
    let (path, what) = issue_paths(&r);
    let reply = http.send(Method::GET, &path, None, &what).await?;
    issue_from(http, &r, &reply.body)
}

/// `pr` with `labels` added; a failure is a warning on it, not an error: the pull
/// request exists either way.
pub(crate) async fn labelled<F: Forge + ?Sized>(
    forge: &F,
    mut pr: PullRequest,
    labels: &[String],
) -> PullRequest {
    if !labels.is_empty() {
        if let Err(e) = forge.label_pr(pr.number, labels).await {
            pr.warnings.push(format!("labels not set: {e}"));
        }
    }
    pr
}

/// Add labels to pull request `number` (its issue, on both forges).
pub(crate) async fn label_pr(
    http: &Http,
    owner: &str,
    repo: &str,
    number: u64,
    labels: &[String],
) -> Result<(), ApiError> {
    let path = format!("/repos/{}/{}/issues/{number}/labels", enc(owner), enc(repo));
    let body = serde_json::json!({ "labels": labels });
    http.send(
        Method::POST,
        &path,
        Some(&body),
        "the pull request's labels",
    )
    .await
    .map(drop)
}

/// Comment on an issue (non-idempotent: reconcile with [`find_issue_comment`]).
pub(crate) async fn comment_on_issue(
    http: &Http,
    owner: &str,
    repo: &str,
    reference: &str,
    text: &str,
) -> Result<Comment, ApiError> {
    let r = IssueRef::parse(reference, owner, repo)?;
    let (path, what) = issue_paths(&r);
    let body = serde_json::json!({ "body": text });
    let reply = http
        .send(
            Method::POST,
            &format!("{path}/comments"),
            Some(&body),
            &what,
        )
        .await?;
    comment_from(http, &reply.body)
}

/// The comment on an issue that carries `marker`, if any (read-only). `page_size` is
/// the forge's page-size query parameter (`limit` on Gitea, `per_page` on GitHub).
pub(crate) async fn find_issue_comment(
    http: &Http,
    owner: &str,
    repo: &str,
    reference: &str,
    marker: &str,
    page_size: &str,
) -> Result<Option<Comment>, ApiError> {
    let r = IssueRef::parse(reference, owner, repo)?;
    let (path, what) = issue_paths(&r);
    find_comment_in(http, &format!("{path}/comments"), page_size, &what, marker).await
}

pub(crate) fn issue_from(http: &Http, r: &IssueRef, v: &Value) -> Result<Issue, ApiError> {
    let s = |p: &str| {
        v.get(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    if v.get("number").and_then(Value::as_u64).is_none() {
        return Err(http.decode("an issue without a number"));
    }
    Ok(Issue {
        owner: r.owner.clone(),
        repo: r.repo.clone(),
        number: r.number,
        title: s("title"),
        body: s("body"),
        url: s("html_url"),
        state: s("state"),
    })
}

/// Read a comment object.
pub(crate) fn comment_from(http: &Http, v: &Value) -> Result<Comment, ApiError> {
    Ok(Comment {
        id: v
            .get("id")
            .and_then(Value::as_u64)
            .ok_or_else(|| http.decode("a comment without an id"))?,
        url: v
            .get("html_url")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
    })
}

/// Page through `GET {path}` (a list of comments) for one whose body contains `marker`.
pub(crate) async fn find_comment_in(
    http: &Http,
    path: &str,
    size_param: &str,
    what: &str,
    marker: &str,
) -> Result<Option<Comment>, ApiError> {
    const SIZE: usize = 50;
    for page in 1..=40 {
        let url = format!("{path}?page={page}&{size_param}={SIZE}");
        let reply = http.send(Method::GET, &url, None, what).await?;
        let items = reply
            .body
            .as_array()
            .ok_or_else(|| http.decode("the comment list is not a list"))?;
        for v in items {
            if v.get("body")
                .and_then(Value::as_str)
                .is_some_and(|b| b.contains(marker))
            {
                return Ok(Some(comment_from(http, v)?));
            }
        }
        if items.len() < SIZE {
            break;
        }
    }
    Ok(None)
}

/// Keep the last `max` bytes of a log (on a char boundary).
pub(crate) fn tail(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("[… earlier lines cut …]\n{}", &text[start..])
}

/// Percent-encode one path segment or query value.
pub(crate) fn enc(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
