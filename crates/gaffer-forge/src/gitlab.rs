//! GitLab, gitlab.com or self-hosted (`/api/v4`): merge requests, pipelines' jobs,
//! issues and their notes.
//!
//! A project is addressed by its URL-encoded path (`group%2Fsub%2Frepo`), so the owner
//! may be a group with sub-groups. The token goes in the `PRIVATE-TOKEN` header.
//! Lists are paged with `x-next-page`.

use async_trait::async_trait;
use reqwest::Method;
use serde_json::{json, Value};

use crate::api::{
    ApiError, CiCheck, CiState, CiStatus, Comment, FailingLog, Forge, ForgeConfig, ForgeKind,
    Issue, IssueFilter, IssueRef, NewPullRequest, PullRequest,
};
use crate::http::{enc, tail, Auth, Http, LOG_TAIL};
use crate::mergeable::Mergeability;
use crate::rest::{labelled, names};
use crate::review::{LineOf, PrComment, PrCommentKind};

/// A GitLab project.
#[derive(Debug, Clone)]
pub struct GitLab {
    http: Http,
    /// The instance's web URL (no trailing slash), for links the API does not give.
    web: String,
    owner: String,
    repo: String,
}

/// Items per page, and the most pages read of one list.
const PAGE: u32 = 100;
const MAX_PAGES: u32 = 40;

impl GitLab {
    /// A client for the project `config.owner/config.repo` at `config.base_url` (the
    /// instance URL, `https://gitlab.com`; `/api/v4` is added, and accepted if given).
    pub fn new(config: ForgeConfig) -> Result<Self, ApiError> {
        let trimmed = config.base_url.trim_end_matches('/');
        let web = trimmed
            .strip_suffix("/api/v4")
            .unwrap_or(trimmed)
            .to_owned();
        Ok(Self {
            http: Http::new(
                format!("{web}/api/v4"),
                config.token,
                Auth::PrivateToken,
                format!("gitlab at {web}"),
                config.token_source,
                config.request_timeout,
                config.max_rate_limit_wait,
            )?,
            web,
            owner: config.owner,
            repo: config.repo,
        })
    }

    /// `/projects/:id` of `owner/repo`, its path URL-encoded.
    fn project_of(owner: &str, repo: &str) -> String {
        format!("/projects/{}", enc(&format!("{owner}/{repo}")))
    }

    fn project(&self) -> String {
        Self::project_of(&self.owner, &self.repo)
    }

    fn project_what(&self) -> String {
        format!("the project {}/{}", self.owner, self.repo)
    }

    /// Every item of a paged list (`path` may carry a query), following `x-next-page`.
    async fn list(&self, path: &str, what: &str) -> Result<Vec<Value>, ApiError> {
        let sep = if path.contains('?') { '&' } else { '?' };
        let mut all = Vec::new();
        let mut page = 1;
        for _ in 0..MAX_PAGES {
            let url = format!("{path}{sep}per_page={PAGE}&page={page}");
            let reply = self.http.send(Method::GET, &url, None, what).await?;
            let Value::Array(items) = reply.body else {
                return Err(self.http.decode(format!("{what}: the list is not a list")));
            };
            all.extend(items);
            match reply.next_page {
                Some(n) if n > page => page = n,
                _ => break,
            }
        }
        Ok(all)
    }

    /// Parse an issue reference: a URL (`https://HOST/group/sub/repo/-/issues/7`, also
    /// `/-/work_items/7`), `group/sub/repo#7`, `#7` or `7`.
    fn issue_ref(&self, reference: &str) -> Result<IssueRef, ApiError> {
        let r = reference.trim();
        let bad = || {
            ApiError::BadInput(format!(
                "`{r}` names no GitLab issue; give an issue URL (https://HOST/GROUP/PROJECT/-/issues/N), GROUP/PROJECT#N or a number"
            ))
        };
        let number = |s: &str| s.trim_start_matches('#').parse::<u64>().map_err(|_| bad());
        let split = |project: &str, n: &str| match project.trim_matches('/').rsplit_once('/') {
            Some((owner, repo)) if !owner.is_empty() && !repo.is_empty() => Ok(IssueRef {
                owner: owner.to_owned(),
                repo: repo.to_owned(),
                number: number(n)?,
            }),
            _ => Err(bad()),
        };
        if let Some((_, rest)) = r.split_once("://") {
            let path = rest.split(['?', '#']).next().unwrap_or_default();
            let path = path.split_once('/').map(|(_, p)| p).unwrap_or_default();
            // A self-hosted GitLab under a path (`https://host/gitlab`): drop it.
            let prefix = self
                .web
                .split_once("://")
                .and_then(|(_, h)| h.split_once('/'))
                .map(|(_, p)| format!("{}/", p.trim_matches('/')));
            let path = match &prefix {
                Some(p) => path.strip_prefix(p.as_str()).unwrap_or(path),
                None => path,
            };
            let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
            let i = segs
                .iter()
                .rposition(|s| matches!(*s, "issues" | "work_items"))
                .filter(|&i| i + 1 < segs.len())
                .ok_or_else(bad)?;
            let end = if i > 0 && segs[i - 1] == "-" {
                i - 1
            } else {
                i
            };
            return split(&segs[..end].join("/"), segs[i + 1]);
        }
        match r.split_once('#') {
            Some((project, n)) if !project.is_empty() => split(project, n),
            _ => IssueRef::parse(r, &self.owner, &self.repo),
        }
    }

    /// `/projects/:id/issues/:iid`, and how to name it.
    fn issue_path(r: &IssueRef) -> (String, String) {
        (
            format!(
                "{}/issues/{}",
                Self::project_of(&r.owner, &r.repo),
                r.number
            ),
            format!("the issue {}/{}#{}", r.owner, r.repo, r.number),
        )
    }

    /// A note's page: the issue's, with the note's anchor.
    fn note_from(&self, r: &IssueRef, v: &Value) -> Result<Comment, ApiError> {
        let id = v
            .get("id")
            .and_then(Value::as_u64)
            .ok_or_else(|| self.http.decode("a note without an id"))?;
        Ok(Comment {
            id,
            url: format!(
                "{}/{}/{}/-/issues/{}#note_{id}",
                self.web, r.owner, r.repo, r.number
            ),
        })
    }

    /// Read an issue object (`iid`, `description`, `state: opened`, labels as names,
    /// assignees as users).
    fn issue_from(&self, r: IssueRef, v: &Value) -> Result<Issue, ApiError> {
        if v.get("iid").and_then(Value::as_u64).is_none() {
            return Err(self.http.decode("an issue without an iid"));
        }
        let s = |k: &str| {
            v.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let state = s("state");
        Ok(Issue {
            owner: r.owner,
            repo: r.repo,
            number: r.number,
            title: s("title"),
            body: s("description"),
            url: s("web_url"),
            state: if state == "opened" {
                "open".into()
            } else {
                state
            },
            labels: v
                .get("labels")
                .and_then(Value::as_array)
                .map(|l| {
                    l.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default(),
            assignees: names(v, "assignees", "username"),
        })
    }

    fn mr_from(&self, v: &Value) -> Result<PullRequest, ApiError> {
        mr_from(v).ok_or_else(|| self.http.decode("a merge request without an iid"))
    }
}

/// Read a merge request object. `opened` (and `locked`, being merged) is `open`;
/// `merged` is `closed` with `merged`.
fn mr_from(v: &Value) -> Option<PullRequest> {
    let s = |k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let state = s("state");
    Some(PullRequest {
        number: v.get("iid").and_then(Value::as_u64)?,
        url: s("web_url"),
        state: if matches!(state.as_str(), "opened" | "locked") {
            "open".into()
        } else {
            "closed".into()
        },
        title: s("title"),
        head: s("source_branch"),
        head_sha: s("sha"),
        base: s("target_branch"),
        merged: state == "merged",
        mergeable: Mergeability::from_gitlab(v),
        warnings: Vec::new(),
    })
}

/// Whether a note's author is a bot: `bot: true` where GitLab says it, or the
/// user of a project or group access token (`project_{id}_bot_{random}`,
/// `group_{id}_bot_{random}`; before GitLab 16 `project_{id}_bot{n}`), whom GitLab
/// makes for each such token and does not mark in a note's author.
fn is_bot(author: Option<&Value>) -> bool {
    let Some(a) = author else { return false };
    if a.get("bot").and_then(Value::as_bool) == Some(true) {
        return true;
    }
    let name = a
        .get("username")
        .and_then(Value::as_str)
        .unwrap_or_default();
    ["project_", "group_"].iter().any(|kind| {
        name.strip_prefix(kind).is_some_and(|rest| {
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            digits > 0 && rest[digits..].starts_with("_bot")
        })
    })
}

/// A job's or commit status's state. A failure of a job allowed to fail, a skipped
/// job and an optional manual one do not hold the change back; a manual job that
/// is not allowed to fail blocks the pipeline (pending until someone runs it).
fn job_state(status: &str, allow_failure: bool) -> CiState {
    match status {
        "success" | "skipped" => CiState::Success,
        "failed" if allow_failure => CiState::Success,
        "failed" => CiState::Failure,
        "canceled" | "canceling" => CiState::Error,
        "manual" if allow_failure => CiState::Success,
        _ => CiState::Pending,
    }
}

/// A job's trace without terminal colours and GitLab's collapsible-section markers
/// (`section_start:1700000000:name\r\x1b[0K`), which are noise in a prompt.
fn plain_trace(trace: &str) -> String {
    let mut unmarked = String::with_capacity(trace.len());
    let mut rest = trace;
    while let Some(i) = rest.find("section_") {
        let at = &rest[i..];
        if !(at.starts_with("section_start:") || at.starts_with("section_end:")) {
            unmarked.push_str(&rest[..i + "section_".len()]);
            rest = &rest[i + "section_".len()..];
            continue;
        }
        unmarked.push_str(&rest[..i]);
        // The marker ends at its `\r` (dropped) or the line's end (kept).
        rest = match at.find(['\r', '\n']) {
            Some(end) if at[end..].starts_with('\r') => &at[end + 1..],
            Some(end) => &at[end..],
            None => "",
        };
    }
    unmarked.push_str(rest);
    let mut out = String::with_capacity(unmarked.len());
    let mut chars = unmarked.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            // A CSI sequence ends with a character in @..~.
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) {
                    break;
                }
            }
        } else if c != '\r' {
            out.push(c);
        }
    }
    out
}

#[async_trait]
impl Forge for GitLab {
    fn kind(&self) -> ForgeKind {
        ForgeKind::GitLab
    }

    async fn find_open_pr(&self, head: &str) -> Result<Option<PullRequest>, ApiError> {
        let path = format!(
            "{}/merge_requests?state=opened&source_branch={}",
            self.project(),
            enc(head)
        );
        let items = self.list(&path, &self.project_what()).await?;
        // A fork's merge request into this project may use the same branch name.
        let own = |v: &Value| match (v.get("source_project_id"), v.get("target_project_id")) {
            (Some(s), Some(t)) => s == t,
            _ => true,
        };
        items
            .iter()
            .find(|v| v.get("source_branch").and_then(Value::as_str) == Some(head) && own(v))
            .map(|v| self.mr_from(v))
            .transpose()
    }

    async fn pull_request(&self, number: u64) -> Result<PullRequest, ApiError> {
        let path = format!("{}/merge_requests/{number}", self.project());
        let what = format!("the merge request {}/{}!{number}", self.owner, self.repo);
        let reply = self.http.send(Method::GET, &path, None, &what).await?;
        self.mr_from(&reply.body)
    }

    async fn create_pr(&self, pr: &NewPullRequest) -> Result<PullRequest, ApiError> {
        let body = json!({
            "source_branch": pr.head,
            "target_branch": pr.base,
            "title": pr.title,
            "description": pr.body,
        });
        let path = format!("{}/merge_requests", self.project());
        let what = format!(
            "the project {}/{} or its branch `{}` or `{}` (push the branch first)",
            self.owner, self.repo, pr.head, pr.base
        );
        let reply = self
            .http
            .send(Method::POST, &path, Some(&body), &what)
            .await?;
        let created = self.mr_from(&reply.body)?;
        Ok(labelled(self, created, &pr.labels).await)
    }

    async fn label_pr(&self, number: u64, labels: &[String]) -> Result<(), ApiError> {
        // `add_labels` keeps the labels the merge request has, and makes missing ones.
        let path = format!("{}/merge_requests/{number}", self.project());
        let body = json!({ "add_labels": labels.join(",") });
        self.http
            .send(
                Method::PUT,
                &path,
                Some(&body),
                "the merge request's labels",
            )
            .await
            .map(drop)
    }

    async fn ci_status(&self, sha: &str) -> Result<CiStatus, ApiError> {
        // The commit's statuses are its pipelines' jobs and external CI's statuses.
        let path = format!(
            "{}/repository/commits/{}/statuses",
            self.project(),
            enc(sha)
        );
        let what = format!("the commit {sha} in {}/{}", self.owner, self.repo);
        let items = self.list(&path, &what).await?;
        // A job run again (or a newer pipeline for the same commit) is the one that counts.
        let mut latest: Vec<&Value> = Vec::new();
        for v in &items {
            let name = v.get("name");
            let id = v.get("id").and_then(Value::as_u64);
            match latest.iter_mut().find(|l| l.get("name") == name) {
                Some(l) if l.get("id").and_then(Value::as_u64) < id => *l = v,
                Some(_) => {}
                None => latest.push(v),
            }
        }
        let checks = latest
            .into_iter()
            .map(|v| {
                let g = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default();
                let allow_failure = v
                    .get("allow_failure")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                let mut description = g("description").to_owned();
                if allow_failure && g("status") == "failed" {
                    description = format!("allowed to fail {description}").trim().to_owned();
                }
                CiCheck {
                    name: g("name").to_owned(),
                    state: job_state(g("status"), allow_failure),
                    raw_state: g("status").to_owned(),
                    description,
                    target_url: Some(g("target_url").to_owned()).filter(|u| !u.is_empty()),
                    check_run_id: v.get("id").and_then(Value::as_u64),
                }
            })
            .collect();
        Ok(CiStatus::from_checks(sha, checks))
    }

    async fn failing_log(&self, check: &CiCheck) -> Result<FailingLog, ApiError> {
        let Some(id) = check.check_run_id else {
            return Ok(FailingLog::described(check));
        };
        let url = format!("{}{}/jobs/{id}/trace", self.http.api, self.project());
        match self
            .http
            .get_text(&url, &format!("the trace of job {id}"))
            .await
        {
            Ok(text) => Ok(FailingLog {
                check: check.name.clone(),
                text: tail(&plain_trace(&text), LOG_TAIL),
                is_log: true,
                url: check.target_url.clone(),
            }),
            // An external CI's status (not a job), or an erased trace: say what we know.
            Err(ApiError::NotFound { .. }) => Ok(FailingLog::described(check)),
            Err(e) => Err(e),
        }
    }

    async fn issue(&self, reference: &str) -> Result<Issue, ApiError> {
        let r = self.issue_ref(reference)?;
        let (path, what) = Self::issue_path(&r);
        let v = self.http.send(Method::GET, &path, None, &what).await?.body;
        self.issue_from(r, &v)
    }

    async fn open_issues(&self, filter: &IssueFilter) -> Result<Vec<Issue>, ApiError> {
        let mut queries = Vec::new();
        if let Some(label) = &filter.label {
            queries.push(format!("labels={}", enc(label)));
        }
        if let Some(user) = &filter.assignee {
            queries.push(format!("assignee_username={}", enc(user)));
        }
        let what = format!("the issues of {}/{}", self.owner, self.repo);
        let mut found = std::collections::BTreeMap::new();
        for query in queries {
            let path = format!("{}/issues?state=opened&{query}", self.project());
            for v in self.list(&path, &what).await? {
                let Some(number) = v.get("iid").and_then(Value::as_u64) else {
                    return Err(self.http.decode("an issue without an iid"));
                };
                let r = IssueRef {
                    owner: self.owner.clone(),
                    repo: self.repo.clone(),
                    number,
                };
                found.insert(number, self.issue_from(r, &v)?);
            }
        }
        Ok(found.into_values().collect())
    }

    async fn comment_on_issue(&self, reference: &str, text: &str) -> Result<Comment, ApiError> {
        let r = self.issue_ref(reference)?;
        let (path, what) = Self::issue_path(&r);
        let body = json!({ "body": text });
        let reply = self
            .http
            .send(Method::POST, &format!("{path}/notes"), Some(&body), &what)
            .await?;
        self.note_from(&r, &reply.body)
    }

    async fn find_comment(
        &self,
        reference: &str,
        marker: &str,
    ) -> Result<Option<Comment>, ApiError> {
        let r = self.issue_ref(reference)?;
        let (path, what) = Self::issue_path(&r);
        let notes = self
            .list(&format!("{path}/notes?sort=asc&order_by=created_at"), &what)
            .await?;
        notes
            .iter()
            // System notes ("changed the description") quote nobody's text.
            .filter(|n| n.get("system").and_then(Value::as_bool) != Some(true))
            .find(|n| {
                n.get("body")
                    .and_then(Value::as_str)
                    .is_some_and(|b| b.contains(marker))
            })
            .map(|n| self.note_from(&r, n))
            .transpose()
    }

    async fn pr_comments(&self, number: u64) -> Result<Vec<PrComment>, ApiError> {
        let what = format!("the discussions of {}!{number}", self.project_what());
        let path = format!("{}/merge_requests/{number}/discussions", self.project());
        let mut all = Vec::new();
        for d in self.list(&path, &what).await? {
            let thread = d.get("id").and_then(Value::as_str).map(str::to_owned);
            let notes = d
                .get("notes")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let first = notes
                .first()
                .and_then(|n| n.get("id"))
                .and_then(Value::as_u64);
            // System notes ("added 1 commit") are nobody's words.
            for n in notes
                .iter()
                .filter(|n| n.get("system").and_then(Value::as_bool) != Some(true))
            {
                all.push(self.mr_note(number, n, thread.clone(), first)?);
            }
        }
        Ok(all)
    }

    async fn reply_to_comment(
        &self,
        number: u64,
        to: &PrComment,
        text: &str,
    ) -> Result<Comment, ApiError> {
        let what = format!("{}!{number}", self.project_what());
        let mr = format!("{}/merge_requests/{number}", self.project());
        let (path, body) = match &to.thread {
            Some(d) => (
                format!("{mr}/discussions/{}/notes", enc(d)),
                text.to_owned(),
            ),
            None => (format!("{mr}/notes"), to.quoting_reply(text)),
        };
        let reply = self
            .http
            .send(Method::POST, &path, Some(&json!({ "body": body })), &what)
            .await?;
        let id = reply
            .body
            .get("id")
            .and_then(Value::as_u64)
            .ok_or_else(|| self.http.decode("a note without an id"))?;
        Ok(Comment {
            id,
            url: self.mr_note_url(number, id),
        })
    }
}

impl GitLab {
    fn mr_note_url(&self, number: u64, id: u64) -> String {
        format!(
            "{}/{}/{}/-/merge_requests/{number}#note_{id}",
            self.web, self.owner, self.repo
        )
    }

    /// A merge request note: a diff note (with a `position`) or a comment.
    fn mr_note(
        &self,
        number: u64,
        n: &Value,
        thread: Option<String>,
        first: Option<u64>,
    ) -> Result<PrComment, ApiError> {
        let id = n
            .get("id")
            .and_then(Value::as_u64)
            .ok_or_else(|| self.http.decode("a note without an id"))?;
        let s = |p: &str| n.pointer(p).and_then(Value::as_str).map(str::to_owned);
        let position = n.get("position").filter(|p| p.is_object());
        let kind = if position.is_some() {
            PrCommentKind::ReviewComment
        } else {
            PrCommentKind::Conversation
        };
        // A removed line has `new_line: null` and its `old_line`; an added one the
        // reverse; an unchanged one both (the new file's counts).
        let field = |k: &str| position.and_then(|p| p.get(k)).filter(|v| !v.is_null());
        let (line, line_of) = match (
            field("new_line").and_then(Value::as_u64),
            field("old_line").and_then(Value::as_u64),
        ) {
            (Some(l), _) => (Some(l), LineOf::NewFile),
            (None, Some(l)) => (Some(l), LineOf::OldFile),
            (None, None) => (None, LineOf::NewFile),
        };
        let path = match line_of {
            LineOf::OldFile => field("old_path").or_else(|| field("new_path")),
            _ => field("new_path").or_else(|| field("old_path")),
        };
        Ok(PrComment {
            key: format!("{}:{id}", kind.prefix()),
            id,
            kind,
            author: s("/author/username").unwrap_or_default(),
            body: s("/body").unwrap_or_default(),
            path: path.and_then(Value::as_str).map(str::to_owned),
            line,
            line_of,
            bot: is_bot(n.get("author")),
            diff_hunk: None,
            in_reply_to: first.filter(|f| *f != id),
            thread,
            url: self.mr_note_url(number, id),
            created_at: s("/created_at").unwrap_or_default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Secret;

    fn client(base: &str) -> GitLab {
        GitLab::new(ForgeConfig::new(
            ForgeKind::GitLab,
            base,
            "acme/tools",
            "demo",
            Secret::new("t"),
            "T",
        ))
        .unwrap()
    }

    #[test]
    fn issue_references_name_the_project_with_its_sub_groups() {
        let gl = client("https://git.example.com/gitlab/");
        let r = |s: &str| {
            gl.issue_ref(s)
                .map(|r| (r.owner, r.repo, r.number))
                .map_err(|e| e.to_string())
        };
        let own = Ok(("acme/tools".to_owned(), "demo".to_owned(), 7));
        assert_eq!(r("7"), own);
        assert_eq!(r("#7"), own);
        assert_eq!(
            r("https://git.example.com/gitlab/acme/tools/demo/-/issues/7#note_3"),
            own
        );
        assert_eq!(r("https://gitlab.com/acme/tools/demo/-/work_items/7"), own);
        assert_eq!(
            r("other/deep/sub/app#12"),
            Ok(("other/deep/sub".to_owned(), "app".to_owned(), 12))
        );
        for bad in [
            "https://gitlab.com/acme/demo/-/merge_requests/3",
            "https://gitlab.com/demo/-/issues/3",
            "acme/demo#x",
            "seven",
        ] {
            let e = r(bad).unwrap_err().to_string();
            assert!(e.contains(bad), "{bad}: {e}");
        }
        assert_eq!(gl.http.api, "https://git.example.com/gitlab/api/v4");
        assert_eq!(
            client("https://gitlab.com/api/v4").http.api,
            "https://gitlab.com/api/v4"
        );
        assert_eq!(gl.project(), "/projects/acme%2Ftools%2Fdemo");
    }

    #[test]
    fn access_token_users_and_marked_bots_are_bots() {
        let author = |v: Value| is_bot(Some(&v));
        for bot in [
            "project_123_bot_4ffca233d8298ea1",
            "group_7_bot_0a1b2c3d4e5f6a7b",
            "project_123_bot",
            "project_123_bot2",
        ] {
            assert!(author(json!({"username": bot})), "{bot}");
        }
        assert!(author(json!({"username": "renovate", "bot": true})));
        for person in [
            "ana",
            "project_manager",
            "project__bot_x",
            "group_x_bot_1",
            "my_project_1_bot",
        ] {
            assert!(
                !author(json!({"username": person, "bot": false})),
                "{person}"
            );
        }
        assert!(!is_bot(None));
    }

    #[test]
    fn job_states_follow_allow_failure_and_manual_jobs() {
        assert_eq!(job_state("failed", false), CiState::Failure);
        assert_eq!(job_state("failed", true), CiState::Success);
        assert_eq!(job_state("manual", false), CiState::Pending);
        assert_eq!(job_state("manual", true), CiState::Success);
        assert_eq!(job_state("canceled", false), CiState::Error);
        for pending in [
            "created",
            "pending",
            "running",
            "waiting_for_resource",
            "scheduled",
        ] {
            assert_eq!(job_state(pending, false), CiState::Pending, "{pending}");
        }
    }

    #[test]
    fn traces_lose_colours_and_section_markers() {
        let trace = "\u{1b}[0KRunning with gitlab-runner 17.0\r\n\
            section_start:1700000000:step_script\r\u{1b}[0K\u{1b}[0K\u{1b}[36;1mExecuting \"step_script\"\u{1b}[0;m\n\
            $ cargo test\n\u{1b}[31;1mtest readme ... FAILED\u{1b}[0;m\n\
            section_end:1700000009:step_script\r\u{1b}[0K\n";
        assert_eq!(
            plain_trace(trace),
            "Running with gitlab-runner 17.0\nExecuting \"step_script\"\n$ cargo test\ntest readme ... FAILED\n\n"
        );
    }
}
