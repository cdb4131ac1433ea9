//! GitHub and GitHub Enterprise.

use async_trait::async_trait;
use reqwest::Method;
use serde_json::{json, Value};

use crate::api::{
    ApiError, CiCheck, CiState, CiStatus, Comment, FailingLog, Forge, ForgeConfig, ForgeKind,
    Issue, IssueFilter, NewPullRequest, PullRequest,
};
use crate::http::{enc, tail, Auth, Http, LOG_TAIL};
use crate::mergeable::Mergeability;
use crate::rest::{
    comment_on_issue, find_issue_comment, get_issue, label_pr, labelled, list_open_issues, pr_from,
};
use crate::review::{self, PrComment, PrCommentKind};

/// A GitHub repository.
#[derive(Debug, Clone)]
pub struct GitHub {
    http: Http,
    owner: String,
    repo: String,
}

impl GitHub {
    /// A client for `config.owner/config.repo`; `config.base_url` is the API URL
    /// (`https://api.github.com` or `https://HOST/api/v3`).
    pub fn new(config: ForgeConfig) -> Result<Self, ApiError> {
        let api = config.base_url.trim_end_matches('/').to_owned();
        let forge = format!("github at {api}");
        Ok(Self {
            http: Http::new(
                api,
                config.token,
                Auth::Scheme("Bearer"),
                forge,
                config.token_source,
                config.request_timeout,
                config.max_rate_limit_wait,
            )?,
            owner: config.owner,
            repo: config.repo,
        })
    }

    fn repo_path(&self) -> String {
        format!("/repos/{}/{}", enc(&self.owner), enc(&self.repo))
    }

    fn repo_what(&self) -> String {
        format!("the repository {}/{}", self.owner, self.repo)
    }
}

fn run_state(status: &str, conclusion: Option<&str>) -> CiState {
    if status != "completed" {
        return CiState::Pending;
    }
    match conclusion.unwrap_or_default() {
        "success" | "neutral" | "skipped" => CiState::Success,
        "cancelled" | "stale" => CiState::Error,
        _ => CiState::Failure,
    }
}

fn status_state(s: &str) -> CiState {
    match s {
        "success" => CiState::Success,
        "failure" => CiState::Failure,
        "error" => CiState::Error,
        _ => CiState::Pending,
    }
}

#[async_trait]
impl Forge for GitHub {
    fn kind(&self) -> ForgeKind {
        ForgeKind::GitHub
    }

    async fn find_open_pr(&self, head: &str) -> Result<Option<PullRequest>, ApiError> {
        let path = format!(
            "{}/pulls?state=open&head={}&per_page=100",
            self.repo_path(),
            enc(&format!("{}:{head}", self.owner))
        );
        let reply = self
            .http
            .send(Method::GET, &path, None, &self.repo_what())
            .await?;
        let items = reply
            .body
            .as_array()
            .ok_or_else(|| self.http.decode("the pull request list is not a list"))?;
        items
            .iter()
            .find(|v| v.pointer("/head/ref").and_then(Value::as_str) == Some(head))
            .map(|v| pr_from(&self.http, v))
            .transpose()
    }

    async fn create_pr(&self, pr: &NewPullRequest) -> Result<PullRequest, ApiError> {
        let body = json!({"head": pr.head, "base": pr.base, "title": pr.title, "body": pr.body});
        let path = format!("{}/pulls", self.repo_path());
        let what = format!(
            "the repository {}/{} or its branch `{}` or `{}` (push the branch first)",
            self.owner, self.repo, pr.head, pr.base
        );
        let reply = self
            .http
            .send(Method::POST, &path, Some(&body), &what)
            .await?;
        let created = pr_from(&self.http, &reply.body)?;
        Ok(labelled(self, created, &pr.labels).await)
    }

    async fn label_pr(&self, number: u64, labels: &[String]) -> Result<(), ApiError> {
        label_pr(&self.http, &self.owner, &self.repo, number, labels).await
    }

    async fn ci_status(&self, sha: &str) -> Result<CiStatus, ApiError> {
        let what = format!("the commit {sha} in {}/{}", self.owner, self.repo);
        let runs = self
            .http
            .send(
                Method::GET,
                &format!(
                    "{}/commits/{}/check-runs?per_page=100",
                    self.repo_path(),
                    enc(sha)
                ),
                None,
                &what,
            )
            .await?;
        let mut checks: Vec<CiCheck> = runs
            .body
            .get("check_runs")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .map(|r| {
                let g = |p: &str| r.pointer(p).and_then(Value::as_str);
                let status = g("/status").unwrap_or("queued");
                let conclusion = g("/conclusion");
                CiCheck {
                    name: g("/name").unwrap_or_default().to_owned(),
                    state: run_state(status, conclusion),
                    raw_state: conclusion.unwrap_or(status).to_owned(),
                    description: g("/output/title")
                        .or(g("/output/summary"))
                        .unwrap_or_default()
                        .to_owned(),
                    target_url: g("/html_url").or(g("/details_url")).map(str::to_owned),
                    check_run_id: r.get("id").and_then(Value::as_u64),
                }
            })
            .collect();
        let combined = self
            .http
            .send(
                Method::GET,
                &format!("{}/commits/{}/status", self.repo_path(), enc(sha)),
                None,
                &what,
            )
            .await?;
        // The combined `state` is "pending" when nothing reported; use the statuses.
        for s in combined
            .body
            .get("statuses")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
        {
            let g = |k: &str| s.get(k).and_then(Value::as_str).unwrap_or_default();
            checks.push(CiCheck {
                name: g("context").to_owned(),
                state: status_state(g("state")),
                raw_state: g("state").to_owned(),
                description: g("description").to_owned(),
                target_url: Some(g("target_url").to_owned()).filter(|u| !u.is_empty()),
                check_run_id: None,
            });
        }
        Ok(CiStatus::from_checks(sha, checks))
    }

    async fn failing_log(&self, check: &CiCheck) -> Result<FailingLog, ApiError> {
        let fallback = || FailingLog::described(check);
        let Some(id) = check.check_run_id else {
            return Ok(fallback());
        };
        // For GitHub Actions the check run id is the job id. The API answers 302 to a
        // short-lived URL on another host (reqwest drops the token on that redirect).
        let url = format!(
            "{}{}/actions/jobs/{id}/logs",
            self.http.api,
            self.repo_path()
        );
        match self
            .http
            .get_text(&url, &format!("the log of job {id}"))
            .await
        {
            Ok(text) => Ok(FailingLog {
                check: check.name.clone(),
                text: tail(&text, LOG_TAIL),
                is_log: true,
                url: check.target_url.clone(),
            }),
            // Not an Actions job (another CI app), or logs expired: say what we know.
            Err(ApiError::NotFound { .. }) | Err(ApiError::Http { status: 410, .. }) => {
                Ok(fallback())
            }
            Err(e) => Err(e),
        }
    }

    async fn issue(&self, reference: &str) -> Result<Issue, ApiError> {
        get_issue(&self.http, &self.owner, &self.repo, reference).await
    }

    async fn open_issues(&self, filter: &IssueFilter) -> Result<Vec<Issue>, ApiError> {
        let mut queries = Vec::new();
        if let Some(label) = &filter.label {
            queries.push(format!("state=open&labels={}", enc(label)));
        }
        if let Some(user) = &filter.assignee {
            queries.push(format!("state=open&assignee={}", enc(user)));
        }
        list_open_issues(&self.http, &self.owner, &self.repo, &queries, "per_page").await
    }

    async fn comment_on_issue(&self, reference: &str, text: &str) -> Result<Comment, ApiError> {
        comment_on_issue(&self.http, &self.owner, &self.repo, reference, text).await
    }

    async fn find_comment(
        &self,
        reference: &str,
        marker: &str,
    ) -> Result<Option<Comment>, ApiError> {
        find_issue_comment(
            &self.http,
            &self.owner,
            &self.repo,
            reference,
            marker,
            "per_page",
        )
        .await
    }

    async fn pull_request(&self, number: u64) -> Result<PullRequest, ApiError> {
        let path = format!("{}/pulls/{number}", self.repo_path());
        let what = format!("the pull request {}/{}#{number}", self.owner, self.repo);
        let reply = self.http.send(Method::GET, &path, None, &what).await?;
        let mut pr = pr_from(&self.http, &reply.body)?;
        pr.mergeable = Mergeability::from_github(&reply.body);
        Ok(pr)
    }

    async fn pr_comments(&self, number: u64) -> Result<Vec<PrComment>, ApiError> {
        let what = format!("the comments of {}/{}#{number}", self.owner, self.repo);
        let pulls = format!("{}/pulls/{number}", self.repo_path());
        let read = |items: &[Value], kind| {
            review::read_all(&self.http, items, kind, PrComment::from_github)
        };
        let on_lines =
            review::list(&self.http, &format!("{pulls}/comments"), "per_page", &what).await?;
        let mut all = read(&on_lines, PrCommentKind::ReviewComment)?;
        let reviews =
            review::list(&self.http, &format!("{pulls}/reviews"), "per_page", &what).await?;
        let asking: Vec<_> = reviews.into_iter().filter(review::review_asks).collect();
        all.extend(read(&asking, PrCommentKind::Review)?);
        let talk = review::list(
            &self.http,
            &format!("{}/issues/{number}/comments", self.repo_path()),
            "per_page",
            &what,
        )
        .await?;
        all.extend(read(&talk, PrCommentKind::Conversation)?);
        Ok(all)
    }

    async fn reply_to_comment(
        &self,
        number: u64,
        to: &PrComment,
        text: &str,
    ) -> Result<Comment, ApiError> {
        let what = format!("the pull request {}/{}#{number}", self.owner, self.repo);
        match to.kind {
            // A reply goes to the thread's first comment (GitHub refuses replies to replies).
            PrCommentKind::ReviewComment => {
                let root = to.in_reply_to.unwrap_or(to.id);
                let path = format!(
                    "{}/pulls/{number}/comments/{root}/replies",
                    self.repo_path()
                );
                review::post(&self.http, &path, text, &what).await
            }
            PrCommentKind::Review | PrCommentKind::Conversation => {
                let path = format!("{}/issues/{number}/comments", self.repo_path());
                review::post(&self.http, &path, &to.quoting_reply(text), &what).await
            }
        }
    }
}
