//! The fake GitLab's HTTP routes (`/api/v4`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::super::mergeable::{merge_of, Merge};
use super::super::{decode, lost_answer, now, query, rev_parse};
use super::*;

pub(super) const CREATED_AT: &str = "2026-11-30T00:00:00.000Z";

/// GitLab's error body: `{"message": …}` (a text, or a list of texts).
pub(super) fn err(status: u16, message: Value) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (code, Json(json!({ "message": message }))).into_response()
}

/// Grape's answer to a missing or invalid parameter: 400 `{"error": …}`.
pub(super) fn missing(field: &str) -> Response {
    (
        StatusCode::BAD_REQUEST,
        Json(json!({ "error": format!("{field} is missing") })),
    )
        .into_response()
}

pub(super) fn web(st: &LabState) -> String {
    let addr = st.addr.lock().unwrap().map(|a| a.to_string());
    format!("http://{}/{}", addr.unwrap_or_default(), st.path)
}

fn authorized(st: &LabState, headers: &HeaderMap) -> bool {
    let header = |n: &str| headers.get(n).and_then(|v| v.to_str().ok());
    if let Some(t) = header("private-token") {
        return t == st.token;
    }
    header("authorization")
        .and_then(|v| v.split_once(' '))
        .is_some_and(|(scheme, t)| scheme.eq_ignore_ascii_case("bearer") && t == st.token)
}

fn author() -> Value {
    user("gaffer-bot")
}

/// A user object, as GitLab embeds it (`author`, `assignees`).
pub(super) fn user(username: &str) -> Value {
    json!({"id": 7, "username": username, "name": username, "state": "active",
           "avatar_url": null, "web_url": format!("https://gitlab.example/{username}")})
}

fn branch_sha(st: &LabState, branch: &str) -> Result<String, ()> {
    let remote = st.remote.lock().unwrap().clone();
    match remote {
        None => Ok(String::new()),
        Some(path) => rev_parse(&path, &format!("refs/heads/{branch}")).ok_or(()),
    }
}

fn mr_json(st: &LabState, mr: &FakeMr) -> Value {
    // An open MR follows its branch on the attached remote.
    let sha = match branch_sha(st, &mr.source_branch) {
        Ok(s) if !s.is_empty() && mr.state == "opened" => s,
        _ => mr.sha.clone(),
    };
    let open = mr.state == "opened";
    let remote = st.remote.lock().unwrap().clone();
    let conflict = match (&remote, open) {
        (Some(r), true) => matches!(
            merge_of(r, &mr.target_branch, &mr.source_branch),
            Some(Merge::Conflict)
        ),
        _ => false,
    };
    json!({
        "id": mr.iid + 7000,
        "iid": mr.iid,
        "project_id": PROJECT_ID,
        "title": mr.title,
        "description": mr.description,
        "state": mr.state,
        "created_at": CREATED_AT,
        "updated_at": CREATED_AT,
        "merged_at": if mr.state == "merged" { json!(CREATED_AT) } else { Value::Null },
        "closed_at": if mr.state == "closed" { json!(CREATED_AT) } else { Value::Null },
        "target_branch": mr.target_branch,
        "source_branch": mr.source_branch,
        "source_project_id": mr.source_project_id,
        "target_project_id": PROJECT_ID,
        "author": author(),
        "labels": mr.labels,
        "draft": mr.draft,
        "work_in_progress": mr.draft,
        "merge_status": if open && !conflict { "can_be_merged" } else { "cannot_be_merged" },
        // The first failing check, in GitLab's order.
        "detailed_merge_status": match (open, mr.draft, conflict) {
            (false, ..) => "not_open",
            (true, true, _) => "draft_status",
            (true, false, true) => "conflict",
            (true, false, false) => "mergeable",
        },
        "has_conflicts": conflict,
        "sha": sha,
        "merge_commit_sha": Value::Null,
        "references": {"short": format!("!{}", mr.iid), "full": format!("{}!{}", st.path, mr.iid)},
        "web_url": format!("{}/-/merge_requests/{}", web(st), mr.iid),
    })
}

fn issue_json(st: &LabState, i: &FakeIssue) -> Value {
    json!({
        "id": i.iid + 9000,
        "iid": i.iid,
        "project_id": PROJECT_ID,
        "title": i.title,
        "description": i.description,
        "state": i.state,
        "type": "ISSUE",
        "labels": i.labels,
        "assignees": i.assignees.iter().map(|u| json!({"id": 100, "username": u, "name": u})).collect::<Vec<_>>(),
        "author": {"id": 9, "username": "someone", "name": "Someone"},
        "created_at": CREATED_AT,
        "references": {"short": format!("#{}", i.iid), "full": format!("{}#{}", st.path, i.iid)},
        "web_url": format!("{}/-/issues/{}", web(st), i.iid),
    })
}

fn note_json(n: &FakeComment) -> Value {
    json!({
        "id": n.id, "type": null, "body": n.body, "author": user(&n.author),
        "created_at": CREATED_AT, "updated_at": CREATED_AT, "system": false,
        "noteable_id": n.issue + 9000, "noteable_type": "Issue", "noteable_iid": n.issue,
        "project_id": PROJECT_ID, "resolvable": false, "confidential": false, "internal": false,
    })
}

/// A job, as the commit-statuses list shows it.
fn status_json(st: &LabState, p: &FakePipeline, j: &FakeJob) -> Value {
    json!({
        "id": j.id, "sha": p.sha, "ref": "", "status": j.status, "name": j.name,
        "target_url": if j.trace.is_some() { format!("{}/-/jobs/{}", web(st), j.id) } else { String::new() },
        "description": j.description, "created_at": CREATED_AT, "started_at": null, "finished_at": null,
        "allow_failure": j.allow_failure, "coverage": null, "pipeline_id": p.id, "author": author(),
    })
}

fn job_json(st: &LabState, p: &FakePipeline, j: &FakeJob) -> Value {
    json!({
        "id": j.id, "name": j.name, "stage": "test", "status": j.status, "ref": "",
        "allow_failure": j.allow_failure, "failure_reason": if j.status == "failed" { json!("script_failure") } else { Value::Null },
        "created_at": CREATED_AT, "web_url": format!("{}/-/jobs/{}", web(st), j.id),
        "pipeline": {"id": p.id, "iid": p.iid, "project_id": PROJECT_ID, "sha": p.sha, "status": pipeline_status(p)},
        "commit": {"id": p.sha}, "user": author(),
    })
}

/// A pipeline's status from its jobs.
fn pipeline_status(p: &FakePipeline) -> &'static str {
    let any = |s: &str| p.jobs.iter().any(|j| j.status == s);
    if any("running") {
        "running"
    } else if any("pending") || any("created") || p.jobs.is_empty() {
        "pending"
    } else if p
        .jobs
        .iter()
        .any(|j| j.status == "failed" && !j.allow_failure)
    {
        "failed"
    } else if any("canceled") {
        "canceled"
    } else if any("manual") {
        "manual"
    } else {
        "success"
    }
}

/// One page of `items`, with GitLab's paging headers.
pub(super) fn paged(items: Vec<Value>, q: &HashMap<String, String>) -> Response {
    let page = q
        .get("page")
        .and_then(|p| p.parse().ok())
        .unwrap_or(1usize)
        .max(1);
    let size = q
        .get("per_page")
        .and_then(|p| p.parse().ok())
        .unwrap_or(20usize)
        .clamp(1, 100);
    let total = items.len();
    let pages = total.div_ceil(size).max(1);
    let list: Vec<Value> = items
        .into_iter()
        .skip((page - 1) * size)
        .take(size)
        .collect();
    let mut resp = Json(Value::Array(list)).into_response();
    let h = resp.headers_mut();
    let mut set = |k: &'static str, v: String| {
        if let Ok(v) = HeaderValue::from_str(&v) {
            h.insert(k, v);
        }
    };
    set("x-page", page.to_string());
    set("x-per-page", size.to_string());
    set("x-total", total.to_string());
    set("x-total-pages", pages.to_string());
    set(
        "x-next-page",
        if page < pages {
            (page + 1).to_string()
        } else {
            String::new()
        },
    );
    set(
        "x-prev-page",
        if page > 1 {
            (page - 1).to_string()
        } else {
            String::new()
        },
    );
    resp
}

pub(super) async fn handle(
    State(st): State<Arc<LabState>>,
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

fn rate_limited(st: &LabState) -> Option<Response> {
    let mut guard = st.rate_limit.lock().unwrap();
    let rl = guard.as_mut()?;
    if rl.hits == 0 {
        *guard = None;
        return None;
    }
    rl.hits -= 1;
    // Rack::Attack's answer: plain text, with the wait in the headers.
    let mut resp = (StatusCode::TOO_MANY_REQUESTS, "Retry later\n").into_response();
    let h = resp.headers_mut();
    let reset = now() + rl.retry_after;
    for (k, v) in [
        ("retry-after", rl.retry_after.to_string()),
        ("ratelimit-limit", "2000".into()),
        ("ratelimit-observed", "2001".into()),
        ("ratelimit-remaining", "0".into()),
        ("ratelimit-reset", reset.to_string()),
        ("ratelimit-name", "throttle_authenticated_api".into()),
    ] {
        if let Ok(v) = HeaderValue::from_str(&v) {
            h.insert(k, v);
        }
    }
    Some(resp)
}

async fn route(
    st: &LabState,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &Bytes,
) -> Response {
    let Some(rel) = uri.path().strip_prefix("/api/v4/") else {
        return err(404, json!("404 Not Found"));
    };
    if !authorized(st, headers) {
        return err(401, json!("401 Unauthorized"));
    }
    if let Some(resp) = rate_limited(st) {
        return resp;
    }
    let segs: Vec<&str> = rel.split('/').filter(|s| !s.is_empty()).collect();
    if segs.len() < 2 || segs[0] != "projects" {
        return err(404, json!("404 Not Found"));
    }
    // The project by its URL-encoded path (any case) or its numeric id.
    let id = decode(segs[1]);
    if !(id.eq_ignore_ascii_case(&st.path) || id == PROJECT_ID.to_string()) {
        return err(404, json!("404 Project Not Found"));
    }
    let json_body: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let q = query(uri);
    let number = |s: &str| s.parse::<u64>().unwrap_or_default();
    match (method.clone(), &segs[2..]) {
        (Method::GET, []) => Json(json!({
            "id": PROJECT_ID, "path_with_namespace": st.path, "default_branch": "main",
            "web_url": web(st),
        }))
        .into_response(),
        (Method::GET, ["merge_requests"]) => {
            let state = q.get("state").map(String::as_str).unwrap_or("all");
            let source = q.get("source_branch");
            let list = st
                .mrs
                .lock()
                .unwrap()
                .iter()
                .rev()
                .filter(|m| state == "all" || m.state == state)
                .filter(|m| source.is_none_or(|b| &m.source_branch == b))
                .map(|m| mr_json(st, m))
                .collect();
            paged(list, &q)
        }
        (Method::POST, ["merge_requests"]) => create_mr(st, &json_body).await,
        (_, ["merge_requests", iid, "discussions", rest @ ..]) => {
            super::discussions::route(st, method, number(iid), rest, &q, &json_body)
        }
        (Method::GET, ["merge_requests", iid]) => {
            let mrs = st.mrs.lock().unwrap();
            match mrs.iter().find(|m| m.iid == number(iid)) {
                Some(m) => Json(mr_json(st, m)).into_response(),
                None => err(404, json!("404 Not found")),
            }
        }
        (Method::PUT, ["merge_requests", iid]) => {
            let list = |k: &str| -> Vec<String> {
                json_body
                    .get(k)
                    .and_then(Value::as_str)
                    .map(|s| {
                        s.split(',')
                            .map(str::trim)
                            .filter(|l| !l.is_empty())
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default()
            };
            let mut mrs = st.mrs.lock().unwrap();
            let Some(m) = mrs.iter_mut().find(|m| m.iid == number(iid)) else {
                return err(404, json!("404 Not found"));
            };
            if json_body.get("labels").is_some() {
                m.labels = list("labels");
            }
            for l in list("add_labels") {
                if !m.labels.contains(&l) {
                    m.labels.push(l);
                }
            }
            m.labels.retain(|l| !list("remove_labels").contains(l));
            if let Some(t) = json_body.get("title").and_then(Value::as_str) {
                m.title = t.into();
            }
            Json(mr_json(st, m)).into_response()
        }
        (Method::GET, ["repository", "commits", sha, "statuses"]) => {
            ci_for(st, sha);
            let pipelines = st.pipelines.lock().unwrap();
            let list = pipelines
                .iter()
                .filter(|p| p.sha == *sha)
                .flat_map(|p| p.jobs.iter().map(move |j| (p, j)))
                .map(|(p, j)| status_json(st, p, j))
                .collect();
            paged(list, &q)
        }
        (Method::GET, ["pipelines"]) => {
            if let Some(sha) = q.get("sha") {
                ci_for(st, sha);
            }
            let pipelines = st.pipelines.lock().unwrap();
            let list = pipelines
                .iter()
                .rev()
                .filter(|p| q.get("sha").is_none_or(|s| &p.sha == s))
                .map(|p| {
                    json!({"id": p.id, "iid": p.iid, "project_id": PROJECT_ID, "sha": p.sha,
                           "ref": "", "status": pipeline_status(p), "source": "push",
                           "created_at": CREATED_AT, "updated_at": CREATED_AT,
                           "web_url": format!("{}/-/pipelines/{}", web(st), p.id)})
                })
                .collect();
            paged(list, &q)
        }
        (Method::GET, ["pipelines", id, "jobs"]) => {
            let pipelines = st.pipelines.lock().unwrap();
            match pipelines.iter().find(|p| p.id == number(id)) {
                Some(p) => {
                    let list = p
                        .jobs
                        .iter()
                        .filter(|j| j.trace.is_some())
                        .map(|j| job_json(st, p, j))
                        .collect();
                    paged(list, &q)
                }
                None => err(404, json!("404 Not found")),
            }
        }
        (Method::GET, ["jobs", id, "trace"]) => {
            let pipelines = st.pipelines.lock().unwrap();
            let trace = pipelines
                .iter()
                .flat_map(|p| &p.jobs)
                .find(|j| j.id == number(id))
                .and_then(|j| j.trace.clone());
            match trace {
                Some(t) => (StatusCode::OK, [("content-type", "text/plain")], t).into_response(),
                None => err(404, json!("404 Not found")),
            }
        }
        (Method::GET, ["issues"]) => {
            let state = q.get("state").map(String::as_str).unwrap_or("all");
            let labels: Vec<&str> = q
                .get("labels")
                .map(|l| l.split(',').filter(|s| !s.is_empty()).collect())
                .unwrap_or_default();
            let assignee = q.get("assignee_username");
            let list = st
                .issues
                .lock()
                .unwrap()
                .iter()
                .rev()
                .filter(|i| state == "all" || i.state == state)
                .filter(|i| labels.iter().all(|l| i.labels.iter().any(|h| h == l)))
                .filter(|i| assignee.is_none_or(|a| i.assignees.contains(a)))
                .map(|i| issue_json(st, i))
                .collect();
            paged(list, &q)
        }
        (Method::GET, ["issues", iid]) => {
            let issues = st.issues.lock().unwrap();
            match issues.iter().find(|i| i.iid == number(iid)) {
                Some(i) => Json(issue_json(st, i)).into_response(),
                None => err(404, json!("404 Not found")),
            }
        }
        (Method::GET, ["issues", iid, "notes"]) => {
            if !st
                .issues
                .lock()
                .unwrap()
                .iter()
                .any(|i| i.iid == number(iid))
            {
                return err(404, json!("404 Not found"));
            }
            let mut list: Vec<Value> = st
                .notes
                .lock()
                .unwrap()
                .iter()
                .filter(|n| n.issue == number(iid))
                .map(note_json)
                .collect();
            // Newest first unless asked otherwise, as GitLab lists notes.
            if q.get("sort").map(String::as_str) != Some("asc") {
                list.reverse();
            }
            paged(list, &q)
        }
        (Method::POST, ["issues", iid, "notes"]) => {
            if !st
                .issues
                .lock()
                .unwrap()
                .iter()
                .any(|i| i.iid == number(iid))
            {
                return err(404, json!("404 Not found"));
            }
            let Some(text) = json_body.get("body").and_then(Value::as_str) else {
                return missing("body");
            };
            let note = FakeComment {
                id: next(&st.next_id),
                issue: number(iid),
                body: text.into(),
                author: "gaffer-bot".into(),
            };
            st.notes.lock().unwrap().push(note.clone());
            if std::mem::take(&mut *st.hang_next_note.lock().unwrap()) {
                tokio::time::sleep(Duration::from_secs(3600)).await;
            }
            (StatusCode::CREATED, Json(note_json(&note))).into_response()
        }
        _ => err(404, json!("404 Not Found")),
    }
}

/// The CI every commit gets (see `report_ci_for_every_commit`), made when first asked.
fn ci_for(st: &LabState, sha: &str) {
    let Some((status, trace)) = st.ci_for_every_commit.lock().unwrap().clone() else {
        return;
    };
    if st.pipelines.lock().unwrap().iter().any(|p| p.sha == sha) {
        return;
    }
    put_job(
        st,
        sha,
        FakeJob {
            id: 0,
            pipeline: 0,
            name: "test".into(),
            status,
            allow_failure: false,
            description: None,
            trace: Some(trace),
        },
    );
}

async fn create_mr(st: &LabState, body: &Value) -> Response {
    let g = |k: &str| {
        body.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let (source, target, title) = (g("source_branch"), g("target_branch"), g("title"));
    for (field, value) in [
        ("source_branch", &source),
        ("target_branch", &target),
        ("title", &title),
    ] {
        if value.trim().is_empty() {
            return missing(field);
        }
    }
    if let Some((status, message)) = st.refuse_mrs.lock().unwrap().clone() {
        return err(status, json!([message]));
    }
    if source == target {
        return err(
            422,
            json!(["You can't use same project/branch for source and target"]),
        );
    }
    let Ok(sha) = branch_sha(st, &source) else {
        return err(
            400,
            json!({"base": [format!("Source branch \"{source}\" does not exist")]}),
        );
    };
    if let Some(existing) = st.mrs.lock().unwrap().iter().find(|m| {
        m.state == "opened"
            && m.source_project_id == PROJECT_ID
            && m.source_branch == source
            && m.target_branch == target
    }) {
        return err(
            409,
            json!([format!(
                "Another open merge request already exists for this source branch: !{}",
                existing.iid
            )]),
        );
    }
    let labels = g("labels")
        .split(',')
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect();
    let mr = FakeMr {
        iid: next(&st.next_mr),
        title,
        description: g("description"),
        source_branch: source,
        target_branch: target,
        sha,
        state: "opened".into(),
        labels,
        source_project_id: PROJECT_ID,
        draft: false,
    };
    st.mrs.lock().unwrap().push(mr.clone());
    if std::mem::take(&mut *st.hang_next_create.lock().unwrap()) {
        tokio::time::sleep(Duration::from_secs(3600)).await;
    }
    if std::mem::take(&mut *st.cut_next_create.lock().unwrap()) {
        return lost_answer();
    }
    (StatusCode::CREATED, Json(mr_json(st, &mr))).into_response()
}
