//! The fake forge's HTTP routes: pull requests, issues, comments, statuses, check runs.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::*;

pub(super) fn err(st: &ForgeState, status: u16, message: &str) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = match st.flavor {
        Flavor::GitHub => json!({
            "message": message,
            "documentation_url": "https://docs.github.com/rest",
            "status": status.to_string(),
        }),
        Flavor::Gitea => {
            json!({"message": message, "url": format!("http://{}/api/swagger", addr(st))})
        }
    };
    (code, Json(body)).into_response()
}

pub(super) fn github_validation(errors: Value) -> Response {
    (
        StatusCode::UNPROCESSABLE_ENTITY,
        Json(json!({
            "message": "Validation Failed",
            "errors": errors,
            "documentation_url": "https://docs.github.com/rest/pulls/pulls#create-a-pull-request",
            "status": "422",
        })),
    )
        .into_response()
}

fn addr(st: &ForgeState) -> String {
    st.addr
        .lock()
        .unwrap()
        .map(|a| a.to_string())
        .unwrap_or_default()
}

fn authorized(st: &ForgeState, headers: &HeaderMap) -> bool {
    let Some(v) = headers.get("authorization").and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let (scheme, token) = v.split_once(' ').unwrap_or(("", ""));
    matches!(scheme.to_ascii_lowercase().as_str(), "token" | "bearer") && token == st.token
}

/// Which items of a list a request's `page` and page size (`limit` on Gitea,
/// `per_page` on GitHub; 30 by default, at most 100) ask for: how many to skip, how
/// many to give.
pub(super) fn page_window(st: &ForgeState, q: &HashMap<String, String>) -> (usize, usize) {
    let size_key = match st.flavor {
        Flavor::Gitea => "limit",
        Flavor::GitHub => "per_page",
    };
    let page = q
        .get("page")
        .and_then(|p| p.parse().ok())
        .unwrap_or(1usize)
        .max(1);
    let size = q
        .get(size_key)
        .and_then(|p| p.parse().ok())
        .unwrap_or(30usize)
        .clamp(1, 100);
    ((page - 1) * size, size)
}

pub(super) fn html_base(st: &ForgeState) -> String {
    format!("http://{}/{}/{}", addr(st), st.owner, st.repo)
}

pub(super) fn pr_json(st: &ForgeState, pr: &FakePr) -> Value {
    let full = format!("{}/{}", st.owner, st.repo);
    // An open PR follows its branch on the attached remote.
    let sha = match head_sha(st, &pr.head) {
        Ok(s) if !s.is_empty() && pr.state == "open" => s,
        _ => pr.head_sha.clone(),
    };
    let kind = match st.flavor {
        Flavor::Gitea => "pulls",
        Flavor::GitHub => "pull",
    };
    let mut v = json!({
        "id": pr.number + 5000,
        "number": pr.number,
        "title": pr.title,
        "body": pr.body,
        "state": pr.state,
        "html_url": format!("{}/{kind}/{}", html_base(st), pr.number),
        "labels": pr.labels.iter().map(|l| json!({"name": l})).collect::<Vec<_>>(),
        "merged": pr.merged,
        "merged_at": if pr.merged { json!("2026-11-30T00:00:00Z") } else { Value::Null },
        "draft": false,
        "head": {"ref": pr.head, "sha": sha, "label": format!("{}:{}", st.owner, pr.head), "repo": {"full_name": full}},
        "base": {"ref": pr.base, "label": format!("{}:{}", st.owner, pr.base), "repo": {"full_name": full}},
        "user": {"login": "gaffer"},
    });
    if let Value::Object(map) = &mut v {
        map.extend(super::mergeable::fields(st, pr));
    }
    v
}

pub(super) fn issue_json(st: &ForgeState, i: &FakeIssue) -> Value {
    json!({
        "id": i.number + 9000,
        "number": i.number,
        "title": i.title,
        "body": i.body,
        "state": i.state,
        "html_url": format!("{}/issues/{}", html_base(st), i.number),
        "user": {"login": "someone"},
        "labels": i.labels.iter().map(|l| json!({"id": 1, "name": l, "color": "e11d21"})).collect::<Vec<_>>(),
        "assignees": i.assignees.iter().map(|a| json!({"login": a})).collect::<Vec<_>>(),
        "assignee": i.assignees.first().map(|a| json!({"login": a})).unwrap_or(Value::Null),
    })
}

fn status_json(st: &ForgeState, s: &FakeStatus) -> Value {
    match st.flavor {
        Flavor::Gitea => json!({
            "id": s.id, "status": s.state, "context": s.context,
            "description": s.description, "target_url": s.target_url,
            "created_at": "2026-11-30T00:00:00Z",
        }),
        Flavor::GitHub => json!({
            "id": s.id, "state": s.state, "context": s.context,
            "description": s.description, "target_url": s.target_url,
            "created_at": "2026-11-30T00:00:00Z",
        }),
    }
}

fn head_sha(st: &ForgeState, branch: &str) -> Result<String, ()> {
    let remote = st.remote.lock().unwrap().clone();
    match remote {
        None => Ok(String::new()),
        Some(path) => rev_parse(&path, &format!("refs/heads/{branch}")).ok_or(()),
    }
}

pub(super) async fn handle(
    State(st): State<Arc<ForgeState>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let resp = route(&st, &method, &uri, &headers, &body).await;
    st.requests.lock().unwrap().push(format!(
        "{method} {} -> {}",
        uri.path_and_query().map(|p| p.as_str()).unwrap_or("/"),
        resp.status().as_u16()
    ));
    resp
}

async fn route(
    st: &ForgeState,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &Bytes,
) -> Response {
    let path = uri.path();
    // The signed log URL GitHub redirects to: no token needed.
    if let Some(id) = path.strip_prefix("/_logs/") {
        let id: u64 = id.parse().unwrap_or_default();
        let runs = st.runs.lock().unwrap();
        let log = runs
            .values()
            .flatten()
            .find(|r| r.id == id)
            .and_then(|r| r.log.clone());
        return match log {
            Some(l) => (StatusCode::OK, [("content-type", "text/plain")], l).into_response(),
            None => (StatusCode::NOT_FOUND, "BlobNotFound").into_response(),
        };
    }
    let git_prefix = format!("/{}/{}.git/", st.owner, st.repo);
    if let Some(rest) = path.strip_prefix(&git_prefix) {
        if *st.git_served.lock().unwrap() {
            return super::remote::git_http(st, method, uri, headers, body, rest).await;
        }
    }
    let rel = match st.flavor {
        Flavor::Gitea => match path.strip_prefix("/api/v1") {
            Some(r) => r,
            None => return err(st, 404, "Not Found"),
        },
        Flavor::GitHub => path,
    };
    if !authorized(st, headers) {
        return match st.flavor {
            Flavor::GitHub => err(st, 401, "Bad credentials"),
            Flavor::Gitea => err(st, 401, "user does not exist [uid: 0, name: ]"),
        };
    }
    if let Some(resp) = rate_limited(st) {
        return resp;
    }
    let segs: Vec<&str> = rel.split('/').filter(|s| !s.is_empty()).collect();
    if segs.len() < 3 || segs[0] != "repos" {
        return err(st, 404, "Not Found");
    }
    if !segs[1].eq_ignore_ascii_case(&st.owner) || !segs[2].eq_ignore_ascii_case(&st.repo) {
        return match st.flavor {
            Flavor::GitHub => err(st, 404, "Not Found"),
            Flavor::Gitea => err(st, 404, "The target couldn't be found."),
        };
    }
    let json_body: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let q = query(uri);
    match (method.clone(), &segs[3..]) {
        (_, ["pulls", n, rest @ ..]) if !rest.is_empty() => {
            super::reviews::route(st, method, n, rest, &q, &json_body).await
        }
        (Method::GET, ["pulls"]) => list_prs(st, &q),
        (Method::POST, ["pulls"]) => create_pr(st, &json_body).await,
        (Method::GET, ["pulls", n]) => {
            let n: u64 = n.parse().unwrap_or_default();
            match st.prs.lock().unwrap().iter().find(|p| p.number == n) {
                Some(p) => Json(pr_json(st, p)).into_response(),
                None => err(st, 404, "Not Found"),
            }
        }
        (Method::GET, ["issues"]) => super::issues::list(st, &q),
        (Method::GET, ["issues", n]) => {
            let n: u64 = n.parse().unwrap_or_default();
            let issue = st
                .issues
                .lock()
                .unwrap()
                .iter()
                .find(|i| i.number == n)
                .cloned();
            match issue {
                Some(i) => Json(issue_json(st, &i)).into_response(),
                None => err(st, 404, "Not Found"),
            }
        }
        (Method::POST, ["issues", n, "comments"]) => {
            let n: u64 = n.parse().unwrap_or_default();
            let exists = st.issues.lock().unwrap().iter().any(|i| i.number == n)
                || st.prs.lock().unwrap().iter().any(|p| p.number == n);
            if !exists {
                return err(st, 404, "Not Found");
            }
            let Some(text) = json_body.get("body").and_then(Value::as_str) else {
                return match st.flavor {
                    Flavor::GitHub => github_validation(
                        json!([{"resource": "IssueComment", "code": "missing_field", "field": "body"}]),
                    ),
                    Flavor::Gitea => err(st, 422, "[Body]: Required"),
                };
            };
            let id = next(&st.next_id);
            st.comments.lock().unwrap().push(FakeComment {
                id,
                issue: n,
                body: text.into(),
                author: "gaffer".into(),
            });
            hang_if_asked(st).await;
            (
                StatusCode::CREATED,
                Json(json!({
                    "id": id, "body": text,
                    "html_url": format!("{}/issues/{n}#issuecomment-{id}", html_base(st)),
                    "user": {"login": "gaffer"}, "created_at": "2026-11-30T00:00:00Z",
                })),
            )
                .into_response()
        }
        (Method::GET, ["issues", n, "comments"]) => {
            let n: u64 = n.parse().unwrap_or_default();
            let exists = st.issues.lock().unwrap().iter().any(|i| i.number == n)
                || st.prs.lock().unwrap().iter().any(|p| p.number == n);
            if !exists {
                return err(st, 404, "Not Found");
            }
            let (skip, size) = page_window(st, &q);
            let list: Vec<Value> = st
                .comments
                .lock()
                .unwrap()
                .iter()
                .filter(|c| c.issue == n)
                .skip(skip)
                .take(size)
                .map(|c| {
                    json!({
                        "id": c.id, "body": c.body,
                        "html_url": format!("{}/issues/{n}#issuecomment-{}", html_base(st), c.id),
                        "user": super::reviews::user_json(st.flavor, &c.author),
                        "created_at": "2026-11-30T00:00:00Z",
                    })
                })
                .collect();
            Json(Value::Array(list)).into_response()
        }
        (Method::POST, ["issues", n, "labels"]) => {
            let n: u64 = n.parse().unwrap_or_default();
            let names: Vec<String> = json_body
                .get("labels")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            let mut prs = st.prs.lock().unwrap();
            match prs.iter_mut().find(|p| p.number == n) {
                Some(p) => {
                    for l in names {
                        if !p.labels.contains(&l) {
                            p.labels.push(l);
                        }
                    }
                    let all: Vec<Value> = p.labels.iter().map(|l| json!({"name": l})).collect();
                    Json(Value::Array(all)).into_response()
                }
                None => err(st, 404, "Not Found"),
            }
        }
        (Method::POST, ["statuses", sha]) => {
            let g = |k: &str| {
                json_body
                    .get(k)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            let state = g("state");
            if !matches!(
                state.as_str(),
                "pending" | "success" | "error" | "failure" | "warning"
            ) {
                return match st.flavor {
                    Flavor::GitHub => github_validation(
                        json!([{"resource": "Status", "code": "custom", "field": "state", "message": "state is not included in the list"}]),
                    ),
                    Flavor::Gitea => err(st, 422, "[State]: invalid"),
                };
            }
            let id = next(&st.next_id);
            let s = FakeStatus {
                id,
                context: if g("context").is_empty() {
                    "default".into()
                } else {
                    g("context")
                },
                state,
                description: g("description"),
                target_url: g("target_url"),
            };
            let out = status_json(st, &s);
            st.statuses
                .lock()
                .unwrap()
                .entry((*sha).to_owned())
                .or_default()
                .push(s);
            (StatusCode::CREATED, Json(out)).into_response()
        }
        (Method::GET, ["statuses", sha]) | (Method::GET, ["commits", sha, "statuses"]) => {
            let all = st.statuses.lock().unwrap();
            let list: Vec<Value> = all
                .get(*sha)
                .map(|v| v.iter().rev().map(|s| status_json(st, s)).collect())
                .unwrap_or_default();
            Json(Value::Array(list)).into_response()
        }
        (Method::GET, ["commits", sha, "status"]) => combined(st, sha),
        (Method::GET, ["commits", sha, "check-runs"]) if st.flavor == Flavor::GitHub => {
            let all = st.runs.lock().unwrap();
            let runs: Vec<Value> = all
                .get(*sha)
                .map(|v| {
                    v.iter()
                        .map(|r| {
                            json!({
                                "id": r.id, "name": r.name, "head_sha": sha,
                                "status": r.status, "conclusion": r.conclusion,
                                "html_url": format!("{}/actions/runs/1/job/{}", html_base(st), r.id),
                                "details_url": format!("{}/actions/runs/1/job/{}", html_base(st), r.id),
                                "output": {"title": r.conclusion.clone().unwrap_or_else(|| r.status.clone()), "summary": ""},
                                "app": {"slug": "github-actions"},
                            })
                        })
                        .collect()
                })
                .unwrap_or_default();
            Json(json!({"total_count": runs.len(), "check_runs": runs})).into_response()
        }
        (Method::GET, ["actions", "jobs", id, "logs"]) if st.flavor == Flavor::GitHub => {
            let id: u64 = id.parse().unwrap_or_default();
            let known = st
                .runs
                .lock()
                .unwrap()
                .values()
                .flatten()
                .any(|r| r.id == id && r.log.is_some());
            if !known {
                return err(st, 404, "Not Found");
            }
            let mut resp = StatusCode::FOUND.into_response();
            if let Ok(v) = HeaderValue::from_str(&format!("http://{}/_logs/{id}", addr(st))) {
                resp.headers_mut().insert("location", v);
            }
            resp
        }
        _ => err(st, 404, "Not Found"),
    }
}

fn rate_limited(st: &ForgeState) -> Option<Response> {
    let mut guard = st.rate_limit.lock().unwrap();
    let rl = guard.as_mut()?;
    if rl.hits == 0 {
        *guard = None;
        return None;
    }
    rl.hits -= 1;
    let code = StatusCode::from_u16(rl.status).unwrap_or(StatusCode::TOO_MANY_REQUESTS);
    let mut resp = err(
        st,
        rl.status,
        "API rate limit exceeded for user. (But here's the good news: Authenticated requests get a higher rate limit.)",
    );
    *resp.status_mut() = code;
    let h = resp.headers_mut();
    if let Some(s) = rl.retry_after {
        if let Ok(v) = HeaderValue::from_str(&s.to_string()) {
            h.insert("retry-after", v);
        }
    }
    if st.flavor == Flavor::GitHub {
        h.insert("x-ratelimit-limit", HeaderValue::from_static("5000"));
        h.insert("x-ratelimit-remaining", HeaderValue::from_static("0"));
        h.insert("x-ratelimit-used", HeaderValue::from_static("5000"));
        h.insert("x-ratelimit-resource", HeaderValue::from_static("core"));
        let reset = now() + rl.reset_in.unwrap_or(60);
        if let Ok(v) = HeaderValue::from_str(&reset.to_string()) {
            h.insert("x-ratelimit-reset", v);
        }
    }
    Some(resp)
}

fn list_prs(st: &ForgeState, q: &HashMap<String, String>) -> Response {
    let state = q.get("state").cloned().unwrap_or_else(|| "open".into());
    let (page, size) = match st.flavor {
        Flavor::Gitea => (
            q.get("page")
                .and_then(|p| p.parse().ok())
                .unwrap_or(1usize)
                .max(1),
            q.get("limit")
                .and_then(|p| p.parse().ok())
                .unwrap_or(30usize)
                .clamp(1, 50),
        ),
        Flavor::GitHub => (
            q.get("page")
                .and_then(|p| p.parse().ok())
                .unwrap_or(1usize)
                .max(1),
            q.get("per_page")
                .and_then(|p| p.parse().ok())
                .unwrap_or(30usize)
                .clamp(1, 100),
        ),
    };
    // GitHub filters by `head=owner:branch`; Gitea has no such filter.
    let head = match st.flavor {
        Flavor::GitHub => q.get("head").cloned(),
        Flavor::Gitea => None,
    };
    let prs = st.prs.lock().unwrap();
    let list: Vec<Value> = prs
        .iter()
        .rev()
        .filter(|p| state == "all" || p.state == state)
        .filter(|p| {
            head.as_ref().is_none_or(|h| match h.split_once(':') {
                Some((o, b)) => o.eq_ignore_ascii_case(&st.owner) && b == p.head,
                None => h.eq_ignore_ascii_case(&st.owner),
            })
        })
        .skip((page - 1) * size)
        .take(size)
        .map(|p| pr_json(st, p))
        .collect();
    Json(Value::Array(list)).into_response()
}

async fn create_pr(st: &ForgeState, body: &Value) -> Response {
    let g = |k: &str| {
        body.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let (title, head, base) = (g("title"), g("head"), g("base"));
    if title.trim().is_empty() || head.is_empty() || base.is_empty() {
        return match st.flavor {
            Flavor::GitHub => github_validation(
                json!([{"resource": "PullRequest", "code": "missing_field", "field": if title.trim().is_empty() { "title" } else if head.is_empty() { "head" } else { "base" }}]),
            ),
            Flavor::Gitea => err(st, 422, "[Title]: Required"),
        };
    }
    if let Some((status, message)) = st.refuse_prs.lock().unwrap().clone() {
        return err(st, status, &message);
    }
    // GitHub also accepts `owner:branch` as head.
    let head = head.rsplit(':').next().unwrap_or_default().to_owned();
    let sha = match head_sha(st, &head) {
        Ok(s) => s,
        Err(()) => {
            return match st.flavor {
                Flavor::GitHub => github_validation(
                    json!([{"resource": "PullRequest", "field": "head", "code": "invalid"}]),
                ),
                Flavor::Gitea => err(st, 404, "The target couldn't be found."),
            }
        }
    };
    {
        let prs = st.prs.lock().unwrap();
        if let Some(existing) = prs
            .iter()
            .find(|p| p.state == "open" && p.head == head && p.base == base)
        {
            return match st.flavor {
                Flavor::GitHub => github_validation(json!([{"resource": "PullRequest", "code": "custom", "message": format!("A pull request already exists for {}:{head}.", st.owner)}])),
                Flavor::Gitea => err(
                    st,
                    409,
                    &format!(
                        "pull request already exists for these targets [id: {}, issue_id: {}, head_repo_id: 1, base_repo_id: 1, head_branch: {head}, base_branch: {base}]",
                        existing.number + 5000,
                        existing.number
                    ),
                ),
            };
        }
    }
    let pr = FakePr {
        number: next(&st.next_number),
        title,
        body: g("body"),
        head,
        head_sha: sha,
        base,
        state: "open".into(),
        labels: Vec::new(),
        merged: false,
    };
    st.prs.lock().unwrap().push(pr.clone());
    let hang = std::mem::take(&mut *st.hang_next_create.lock().unwrap());
    if hang {
        tokio::time::sleep(Duration::from_secs(3600)).await;
    }
    if std::mem::take(&mut *st.cut_next_create.lock().unwrap()) {
        return lost_answer();
    }
    (StatusCode::CREATED, Json(pr_json(st, &pr))).into_response()
}

fn combined(st: &ForgeState, sha: &str) -> Response {
    let mut all = st.statuses.lock().unwrap();
    if let Some(state) = st.ci_for_every_commit.lock().unwrap().clone() {
        if !all.contains_key(sha) {
            let id = next(&st.next_id);
            all.insert(
                sha.to_owned(),
                vec![FakeStatus {
                    id,
                    context: "ci/fake".into(),
                    state,
                    description: "reported by the fake CI".into(),
                    target_url: format!("{}/ci/{id}", html_base(st)),
                }],
            );
        }
    }
    // The latest status per context, as both forges report.
    let mut latest: Vec<FakeStatus> = Vec::new();
    for s in all
        .get(sha)
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .rev()
    {
        if !latest.iter().any(|l| l.context == s.context) {
            latest.push(s.clone());
        }
    }
    let worst = if latest.iter().any(|s| s.state == "error") {
        "error"
    } else if latest.iter().any(|s| s.state == "failure") {
        "failure"
    } else if latest.is_empty() || latest.iter().any(|s| s.state == "pending") {
        "pending"
    } else {
        "success"
    };
    let statuses: Vec<Value> = latest.iter().map(|s| status_json(st, s)).collect();
    Json(json!({
        "state": worst,
        "sha": sha,
        "total_count": statuses.len(),
        "statuses": statuses,
        "repository": {"full_name": format!("{}/{}", st.owner, st.repo)},
        "commit_url": format!("{}/commit/{sha}", html_base(st)),
    }))
    .into_response()
}
