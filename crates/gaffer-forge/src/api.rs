//! The forge API: pull requests, CI status, issues — shared types, errors and the [`Forge`] trait.

use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::mergeable::Mergeability;
use crate::rest::labelled;
use crate::review::PrComment;
use crate::secret::Secret;

/// Which forge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ForgeKind {
    /// Gitea or Forgejo (`/api/v1`, `Authorization: token …`).
    Gitea,
    /// GitHub or GitHub Enterprise (`Authorization: Bearer …`).
    #[serde(rename = "github")]
    GitHub,
    /// GitLab, gitlab.com or self-hosted (`/api/v4`, `PRIVATE-TOKEN: …`).
    #[serde(rename = "gitlab")]
    GitLab,
}

impl ForgeKind {
    /// Lowercase name, as in the config.
    pub fn name(self) -> &'static str {
        match self {
            ForgeKind::Gitea => "gitea",
            ForgeKind::GitHub => "github",
            ForgeKind::GitLab => "gitlab",
        }
    }

    /// What the forge calls a proposed change, as its users say it: a merge request
    /// on GitLab, a pull request elsewhere.
    pub fn change_request(self) -> &'static str {
        match self {
            ForgeKind::GitLab => "merge request",
            ForgeKind::Gitea | ForgeKind::GitHub => "pull request",
        }
    }
}

impl std::str::FromStr for ForgeKind {
    type Err = ApiError;

    /// `gitea`, `forgejo` (the same API), `github` or `gitlab`, any case.
    fn from_str(s: &str) -> Result<Self, ApiError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "gitea" | "forgejo" => Ok(ForgeKind::Gitea),
            "github" => Ok(ForgeKind::GitHub),
            "gitlab" => Ok(ForgeKind::GitLab),
            other => Err(ApiError::BadInput(format!(
                "unknown forge kind `{other}`; use \"gitea\" (also Forgejo), \"github\" or \"gitlab\""
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
    /// GitLab: the instance URL (`https://gitlab.com`; `/api/v4` is added).
    pub base_url: String,
    /// Repository owner (user or organisation; on GitLab a group path with its
    /// sub-groups, `group/sub`).
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
    /// Whether it merges into its base as it stands: read by [`Forge::pull_request`]
    /// only (forges leave it out of lists); `Unknown` elsewhere.
    #[serde(default)]
    pub mergeable: Mergeability,
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
    /// GitHub check-run id (equal to the Actions job id), or GitLab job id, when
    /// there is one.
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

impl FailingLog {
    /// What a forge without a log for `check` can say: its state, description and link.
    pub(crate) fn described(check: &CiCheck) -> Self {
        let mut text = format!("{} reported {}", check.name, check.raw_state);
        if !check.description.is_empty() {
            text.push_str(&format!(": {}", check.description));
        }
        if let Some(u) = &check.target_url {
            text.push_str(&format!("\nDetails: {u}"));
        }
        Self {
            check: check.name.clone(),
            text,
            is_log: false,
            url: check.target_url.clone(),
        }
    }
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
    /// Its label names.
    #[serde(default)]
    pub labels: Vec<String>,
    /// The logins of the users it is assigned to.
    #[serde(default)]
    pub assignees: Vec<String>,
}

/// Which open issues [`Forge::open_issues`] lists: those carrying `label`, and those
/// assigned to `assignee` (either, when both are given).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IssueFilter {
    /// A label name.
    pub label: Option<String>,
    /// A user's login.
    pub assignee: Option<String>,
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
/// Intents: `find_open_pr`, `ci_status`, `failing_log`, `issue`, `open_issues` are read-only;
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

    /// The open issues (never pull requests) of the repository that `filter` selects,
    /// by number, each once (read-only). An empty filter selects none.
    async fn open_issues(&self, filter: &IssueFilter) -> Result<Vec<Issue>, ApiError>;

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

    /// Every comment on pull request `number`, gaffer's own included: review
    /// comments on lines of the diff, reviews with text, conversation comments
    /// (read-only). The caller tells people from gaffer (a marker in gaffer's own
    /// text, the bot user).
    async fn pr_comments(&self, number: u64) -> Result<Vec<PrComment>, ApiError>;

    /// Answer `to` on pull request `number` with `text`: in its thread where the
    /// forge has one, else by a conversation comment quoting it. Non-idempotent: put
    /// a unique marker in `text` and look for it in [`Forge::pr_comments`] first.
    async fn reply_to_comment(
        &self,
        number: u64,
        to: &PrComment,
        text: &str,
    ) -> Result<Comment, ApiError>;

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
        ForgeKind::GitLab => Box::new(crate::gitlab::GitLab::new(config)?),
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
