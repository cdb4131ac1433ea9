//! Gitea and Forgejo (`/api/v1`).

use async_trait::async_trait;
use reqwest::Method;
use serde_json::{json, Value};

use crate::api::{
    ApiError, CiCheck, CiState, CiStatus, Comment, FailingLog, Forge, ForgeConfig, ForgeKind,
    Issue, IssueFilter, NewPullRequest, PullRequest,
};
use crate::http::{enc, Auth, Http};
use crate::mergeable::Mergeability;
use crate::rest::{
    comment_on_issue, find_issue_comment, get_issue, label_pr, labelled, list_open_issues, pr_from,
};
use crate::review::{self, PrComment, PrCommentKind};

/// A Gitea or Forgejo repository.
#[derive(Debug, Clone)]
pub struct Gitea {
    http: Http,
    owner: String,
    repo: String,
}

const PAGE: usize = 50;

impl Gitea {
    /// A client for `config.owner/config.repo` at `config.base_url` (the instance URL).
    pub fn new(config: ForgeConfig) -> Result<Self, ApiError> {
        let api = format!("{}/api/v1", config.base_url.trim_end_matches('/'));
        let forge = format!("gitea at {}", config.base_url);
        Ok(Self {
            http: Http::new(
                api,
                config.token,
                Auth::Scheme("token"),
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

fn status_state(s: &str) -> CiState {
    match s {
        "success" | "warning" => CiState::Success,
        "failure" => CiState::Failure,
        "error" => CiState::Error,
        _ => CiState::Pending,
    }
}

#[async_trait]
impl Forge for Gitea {
    fn kind(&self) -> ForgeKind {
        ForgeKind::Gitea
    }

    async fn find_open_pr(&self, head: &str) -> Result<Option<PullRequest>, ApiError> {
        let full = format!("{}/{}", self.owner, self.repo).to_lowercase();
        for page in 1..=40 {
            let path = format!(
                "{}/pulls?state=open&page={page}&limit={PAGE}",
                self.repo_path()
            );
            let reply = self
                .http
                .send(Method::GET, &path, None, &self.repo_what())
                .await?;
            let items = reply
                .body
                .as_array()
                .ok_or_else(|| self.http.decode("the pull request list is not a list"))?;
            for v in items {
                let same_repo = v
                    .pointer("/head/repo/full_name")
                    .and_then(Value::as_str)
                    .is_none_or(|n| n.to_lowercase() == full);
                if v.pointer("/head/ref").and_then(Value::as_str) == Some(head) && same_repo {
                    return Ok(Some(pr_from(&self.http, v)?));
                }
            }
            if items.len() < PAGE {
                break;
            }
        }
        Ok(None)
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
        let path = format!("{}/commits/{}/status", self.repo_path(), enc(sha));
        let reply = self
            .http
            .send(
                Method::GET,
                &path,
                None,
                &format!("the commit {sha} in {}/{}", self.owner, self.repo),
            )
            .await?;
        let statuses = reply
            .body
            .get("statuses")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let checks = statuses
            .iter()
            .map(|s| {
                let g = |k: &str| s.get(k).and_then(Value::as_str).unwrap_or_default();
                // Gitea calls a status's state `status` (and older versions `state`).
                let raw = if g("status").is_empty() {
                    g("state")
                } else {
                    g("status")
                };
                CiCheck {
                    name: g("context").to_owned(),
                    state: status_state(raw),
                    raw_state: raw.to_owned(),
                    description: g("description").to_owned(),
                    target_url: Some(g("target_url").to_owned()).filter(|u| !u.is_empty()),
                    check_run_id: None,
                }
            })
            .collect();
        Ok(CiStatus::from_checks(sha, checks))
    }

    async fn failing_log(&self, check: &CiCheck) -> Result<FailingLog, ApiError> {
        // Gitea's status API carries no log: give the description and where to look.
        Ok(FailingLog::described(check))
    }

    async fn issue(&self, reference: &str) -> Result<Issue, ApiError> {
        get_issue(&self.http, &self.owner, &self.repo, reference).await
    }

    async fn open_issues(&self, filter: &IssueFilter) -> Result<Vec<Issue>, ApiError> {
        // `type=issues` leaves pull requests out; `assigned_by` is Gitea's assignee filter.
        let mut queries = Vec::new();
        if let Some(label) = &filter.label {
            queries.push(format!("state=open&type=issues&labels={}", enc(label)));
        }
        if let Some(user) = &filter.assignee {
            queries.push(format!("state=open&type=issues&assigned_by={}", enc(user)));
        }
        list_open_issues(&self.http, &self.owner, &self.repo, &queries, "limit").await
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
            "limit",
        )
        .await
    }

    async fn pull_request(&self, number: u64) -> Result<PullRequest, ApiError> {
        let path = format!("{}/pulls/{number}", self.repo_path());
        let what = format!("the pull request {}/{}#{number}", self.owner, self.repo);
        let reply = self.http.send(Method::GET, &path, None, &what).await?;
        let mut pr = pr_from(&self.http, &reply.body)?;
        pr.mergeable = Mergeability::from_gitea(&reply.body);
        Ok(pr)
    }

    async fn pr_comments(&self, number: u64) -> Result<Vec<PrComment>, ApiError> {
        let what = format!("the comments of {}/{}#{number}", self.owner, self.repo);
        let reviews_path = format!("{}/pulls/{number}/reviews", self.repo_path());
        let reviews = review::list(&self.http, &reviews_path, "limit", &what).await?;
        // Gitea lists line comments per review, each review's in one answer (that
        // endpoint ignores paging: asking for a second page gives the same list).
        let mut all = Vec::new();
        for r in reviews.iter().filter(|r| {
            review::review_submitted(r)
                && r.get("comments_count").and_then(Value::as_u64) != Some(0)
        }) {
            let id = r
                .get("id")
                .and_then(Value::as_u64)
                .ok_or_else(|| self.http.decode("a review without an id"))?;
            let comments =
                review::list_once(&self.http, &format!("{reviews_path}/{id}/comments"), &what)
                    .await?;
            all.extend(review::read_all(
                &self.http,
                &comments,
                PrCommentKind::ReviewComment,
                PrComment::from_gitea,
            )?);
        }
        let asking: Vec<_> = reviews.into_iter().filter(review::review_asks).collect();
        all.extend(review::read_all(
            &self.http,
            &asking,
            PrCommentKind::Review,
            PrComment::from_gitea,
        )?);
        let talk = review::list(
            &self.http,
            &format!("{}/issues/{number}/comments", self.repo_path()),
            "limit",
            &what,
        )
        .await?;
        all.extend(review::read_all(
            &self.http,
            &talk,
            PrCommentKind::Conversation,
            PrComment::from_gitea,
        )?);
        Ok(all)
    }

    async fn reply_to_comment(
        &self,
        number: u64,
        to: &PrComment,
        text: &str,
    ) -> Result<Comment, ApiError> {
        // Gitea's API has no reply inside a review thread: a quoting comment.
        let what = format!("the pull request {}/{}#{number}", self.owner, self.repo);
        let path = format!("{}/issues/{number}/comments", self.repo_path());
        review::post(&self.http, &path, &to.quoting_reply(text), &what).await
    }
}
