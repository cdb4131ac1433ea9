//! The REST shapes Gitea/Forgejo and GitHub share: pull requests, issues, labels and comments.

use reqwest::Method;
use serde_json::Value;

use crate::api::{ApiError, Comment, Forge, Issue, IssueRef, PullRequest};
use crate::http::{enc, Http};
use crate::mergeable::Mergeability;

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
        mergeable: Mergeability::Unknown,
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
        labels: names(v, "labels", "name"),
        assignees: names(v, "assignees", "login"),
    })
}

/// The `key` of each object in the list `v[list]` (label names, assignee logins).
pub(crate) fn names(v: &Value, list: &str, key: &str) -> Vec<String> {
    v.get(list)
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i.get(key).and_then(Value::as_str).map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The open issues `filter` selects, each once, by number (read-only). `queries` are
/// the forge's query strings for a label and for an assignee (without paging);
/// `page_size` its page-size parameter. Pull requests (GitHub lists them as issues,
/// with a `pull_request` key) are left out.
pub(crate) async fn list_open_issues(
    http: &Http,
    owner: &str,
    repo: &str,
    queries: &[String],
    page_size: &str,
) -> Result<Vec<Issue>, ApiError> {
    const SIZE: usize = 50;
    let base = format!("/repos/{}/{}/issues", enc(owner), enc(repo));
    let what = format!("the issues of {owner}/{repo}");
    let mut found: std::collections::BTreeMap<u64, Issue> = Default::default();
    for query in queries {
        for page in 1..=40 {
            let url = format!("{base}?{query}&page={page}&{page_size}={SIZE}");
            let reply = http.send(Method::GET, &url, None, &what).await?;
            let items = reply
                .body
                .as_array()
                .ok_or_else(|| http.decode("the issue list is not a list"))?;
            for v in items {
                if v.get("pull_request").is_some_and(|p| !p.is_null()) {
                    continue;
                }
                let Some(number) = v.get("number").and_then(Value::as_u64) else {
                    return Err(http.decode("an issue without a number"));
                };
                let r = IssueRef {
                    owner: owner.to_owned(),
                    repo: repo.to_owned(),
                    number,
                };
                found.insert(number, issue_from(http, &r, v)?);
            }
            if items.len() < SIZE {
                break;
            }
        }
    }
    Ok(found.into_values().collect())
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
