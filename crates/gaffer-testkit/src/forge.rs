//! Fake Gitea/Forgejo, GitHub and Vikunja servers on loopback, and a bare git
//! repository to push to.
//!
//! The HTTP fakes speak the real endpoints, JSON shapes and status codes (as far as
//! gaffer uses them):
//!
//! * [`FakeForge`] with [`Flavor::Gitea`] (under `/api/v1`, `Authorization: token …`) or
//!   [`Flavor::GitHub`] (`Authorization: Bearer …`): pull requests (list with
//!   `state`/`head`/paging, create; a duplicate head is 409 on Gitea and 422 on GitHub),
//!   issues and comments, labels, commit statuses (`POST /repos/{o}/{r}/statuses/{sha}`,
//!   `GET /repos/{o}/{r}/statuses/{sha}`, combined `GET …/commits/{ref}/status`),
//!   GitHub check runs (`GET …/commits/{ref}/check-runs`) and Actions job logs
//!   (`GET …/actions/jobs/{id}/logs` → 302 to a plain-text log). A wrong token is 401;
//!   an unknown repository, issue or branch 404; rate limits are 403/429 with
//!   `Retry-After` / `X-RateLimit-*`. A create's answer can be made to hang
//!   ([`FakeForge::hang_next_pr_create`]) or be cut off
//!   ([`FakeForge::cut_next_pr_create_answer`]) after the PR was made.
//! * [`FakeVikunja`]: `PUT /api/v1/projects/{id}/tasks`, `GET|POST /api/v1/tasks/{id}`,
//!   `GET /api/v1/tasks?s=…` (search).
//! * [`BareRemote`]: `git init --bare`, optionally with a `pre-receive` hook that
//!   refuses pushes to protected branches.
//!
//! Tests read what a fake saw with [`FakeForge::prs`], [`FakeForge::comments`],
//! [`FakeForge::requests`], [`FakeVikunja::tasks`].

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// Which forge a [`FakeForge`] imitates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// Gitea / Forgejo.
    Gitea,
    /// GitHub.
    GitHub,
}

/// A pull request the fake holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FakePr {
    /// Number (shared with issues).
    pub number: u64,
    /// Title.
    pub title: String,
    /// Body.
    pub body: String,
    /// Head branch.
    pub head: String,
    /// Head commit (from the [`BareRemote`] when one is attached).
    pub head_sha: String,
    /// Base branch.
    pub base: String,
    /// `open` or `closed`.
    pub state: String,
    /// Label names.
    pub labels: Vec<String>,
    /// Merged (see [`FakeForge::merge_pr`]).
    #[serde(default)]
    pub merged: bool,
}

/// A comment the fake received.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FakeComment {
    /// Its id.
    pub id: u64,
    /// The issue or PR number.
    pub issue: u64,
    /// Text.
    pub body: String,
}

#[derive(Debug, Clone)]
struct FakeIssue {
    number: u64,
    title: String,
    body: String,
    state: String,
}

#[derive(Debug, Clone)]
struct FakeStatus {
    id: u64,
    context: String,
    state: String,
    description: String,
    target_url: String,
}

#[derive(Debug, Clone)]
struct FakeRun {
    id: u64,
    name: String,
    status: String,
    conclusion: Option<String>,
    log: Option<String>,
}

#[derive(Debug, Clone)]
struct RateLimit {
    hits: u32,
    status: u16,
    retry_after: Option<u64>,
    reset_in: Option<u64>,
}

struct ForgeState {
    flavor: Flavor,
    owner: String,
    repo: String,
    token: String,
    addr: Mutex<Option<SocketAddr>>,
    remote: Mutex<Option<PathBuf>>,
    git_served: Mutex<bool>,
    next_number: Mutex<u64>,
    next_id: Mutex<u64>,
    prs: Mutex<Vec<FakePr>>,
    issues: Mutex<Vec<FakeIssue>>,
    comments: Mutex<Vec<FakeComment>>,
    statuses: Mutex<HashMap<String, Vec<FakeStatus>>>,
    runs: Mutex<HashMap<String, Vec<FakeRun>>>,
    requests: Mutex<Vec<String>>,
    rate_limit: Mutex<Option<RateLimit>>,
    hang_next_create: Mutex<bool>,
    cut_next_create: Mutex<bool>,
    refuse_prs: Mutex<Option<(u16, String)>>,
    ci_for_every_commit: Mutex<Option<String>>,
}

/// A fake Gitea or GitHub for one repository. Dropping it stops it.
pub struct FakeForge {
    addr: SocketAddr,
    state: Arc<ForgeState>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeForge {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(router: Router) -> anyhow::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
    let addr = listener.local_addr()?;
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    Ok((addr, task))
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

impl FakeForge {
    /// Start a fake for `owner/repo` that accepts only `token`.
    pub async fn start(
        flavor: Flavor,
        owner: &str,
        repo: &str,
        token: &str,
    ) -> anyhow::Result<Self> {
        let state = Arc::new(ForgeState {
            flavor,
            owner: owner.into(),
            repo: repo.into(),
            token: token.into(),
            addr: Mutex::new(None),
            remote: Mutex::new(None),
            git_served: Mutex::new(false),
            next_number: Mutex::new(0),
            next_id: Mutex::new(1000),
            prs: Mutex::default(),
            issues: Mutex::default(),
            comments: Mutex::default(),
            statuses: Mutex::default(),
            runs: Mutex::default(),
            requests: Mutex::default(),
            rate_limit: Mutex::new(None),
            hang_next_create: Mutex::new(false),
            cut_next_create: Mutex::new(false),
            refuse_prs: Mutex::new(None),
            ci_for_every_commit: Mutex::new(None),
        });
        let router = Router::new().fallback(handle).with_state(state.clone());
        let (addr, task) = serve(router).await?;
        *state.addr.lock().unwrap() = Some(addr);
        Ok(Self { addr, state, task })
    }

    /// The URL to configure: Gitea's instance URL (the client adds `/api/v1`), or
    /// GitHub's API URL.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Check PR heads against this bare repository (a missing head branch is refused
    /// the way the forge refuses it) and take head commits from it.
    pub fn attach_remote(&self, remote: &BareRemote) {
        *self.state.remote.lock().unwrap() = Some(remote.path().to_owned());
    }

    /// Also serve the attached remote (see [`FakeForge::attach_remote`]) over git's
    /// smart HTTP at [`FakeForge::git_url`], through `git http-backend`, asking for HTTP
    /// Basic credentials (401 with `WWW-Authenticate`) and accepting any user name with
    /// the token as the password, as Gitea and GitHub do. Hooks (branch protection) run.
    pub fn serve_git(&self, remote: &BareRemote) {
        self.attach_remote(remote);
        *self.state.git_served.lock().unwrap() = true;
    }

    /// `http://ADDR/OWNER/REPO.git`, the clone URL when [`FakeForge::serve_git`] is on.
    pub fn git_url(&self) -> String {
        format!(
            "http://{}/{}/{}.git",
            self.addr, self.state.owner, self.state.repo
        )
    }

    /// Add an issue; returns its number.
    pub fn add_issue(&self, title: &str, body: &str) -> u64 {
        let number = next(&self.state.next_number);
        self.state.issues.lock().unwrap().push(FakeIssue {
            number,
            title: title.into(),
            body: body.into(),
            state: "open".into(),
        });
        number
    }

    /// Set (add) a commit status, as Woodpecker or Gitea Actions would.
    pub fn set_status(
        &self,
        sha: &str,
        context: &str,
        state: &str,
        description: &str,
        target_url: &str,
    ) {
        let id = next(&self.state.next_id);
        let mut all = self.state.statuses.lock().unwrap();
        all.entry(sha.into()).or_default().push(FakeStatus {
            id,
            context: context.into(),
            state: state.into(),
            description: description.into(),
            target_url: target_url.into(),
        });
    }

    /// Set a GitHub check run (by name, replacing an earlier run of that name for the
    /// commit); `log` is what the Actions job-log endpoint serves. Returns its id (the
    /// job id).
    pub fn set_check_run(
        &self,
        sha: &str,
        name: &str,
        status: &str,
        conclusion: Option<&str>,
        log: Option<&str>,
    ) -> u64 {
        let mut all = self.state.runs.lock().unwrap();
        let runs = all.entry(sha.into()).or_default();
        let id = match runs.iter().find(|r| r.name == name) {
            Some(r) => r.id,
            None => next(&self.state.next_id),
        };
        runs.retain(|r| r.name != name);
        runs.push(FakeRun {
            id,
            name: name.into(),
            status: status.into(),
            conclusion: conclusion.map(str::to_owned),
            log: log.map(str::to_owned),
        });
        id
    }

    /// The next `hits` authenticated requests are rate limited: GitHub answers 403 with
    /// `X-RateLimit-Remaining: 0` and `X-RateLimit-Reset` (or 429 with `Retry-After` when
    /// `retry_after` is given); Gitea answers 429 with `Retry-After`.
    pub fn rate_limit_next(&self, hits: u32, retry_after: Option<u64>, reset_in: Option<u64>) {
        let status = match (self.state.flavor, retry_after) {
            (Flavor::GitHub, None) => 403,
            _ => 429,
        };
        *self.state.rate_limit.lock().unwrap() = Some(RateLimit {
            hits,
            status,
            retry_after,
            reset_in,
        });
    }

    /// The next PR create is recorded, and then the answer never comes (as if gaffer
    /// crashed before reading it).
    pub fn hang_next_pr_create(&self) {
        *self.state.hang_next_create.lock().unwrap() = true;
    }

    /// The next PR create is recorded, and then its answer is lost: the connection
    /// is cut after the status line, as a proxy or a network that gives up does. The
    /// client sees an error although the PR exists.
    pub fn cut_next_pr_create_answer(&self) {
        *self.state.cut_next_create.lock().unwrap() = true;
    }

    /// Refuse every PR create with `status` and `message` (e.g. 422 for a protected
    /// base branch), or stop refusing with `None`.
    pub fn refuse_prs(&self, refusal: Option<(u16, &str)>) {
        *self.state.refuse_prs.lock().unwrap() = refusal.map(|(s, m)| (s, m.to_owned()));
    }

    /// A CI that reports `state` (`success`, `failure`, …) as the `ci/fake` status of
    /// every commit nobody set a status for, as soon as it is asked: for runs that
    /// cannot know the pushed commit in advance (the `gaffer` binary under test).
    pub fn report_ci_for_every_commit(&self, state: &str) {
        *self.state.ci_for_every_commit.lock().unwrap() = Some(state.to_owned());
    }

    /// Close a PR (as a merge or a human would).
    pub fn close_pr(&self, number: u64) {
        for pr in self.state.prs.lock().unwrap().iter_mut() {
            if pr.number == number {
                pr.state = "closed".into();
            }
        }
    }

    /// Merge a PR (it becomes `closed` with `merged: true`), as a human would.
    pub fn merge_pr(&self, number: u64) {
        for pr in self.state.prs.lock().unwrap().iter_mut() {
            if pr.number == number {
                pr.state = "closed".into();
                pr.merged = true;
            }
        }
    }

    /// Every pull request created, in order.
    pub fn prs(&self) -> Vec<FakePr> {
        self.state.prs.lock().unwrap().clone()
    }

    /// Every comment posted, in order.
    pub fn comments(&self) -> Vec<FakeComment> {
        self.state.comments.lock().unwrap().clone()
    }

    /// `METHOD /path?query` of every request, in order (including refused ones).
    pub fn requests(&self) -> Vec<String> {
        self.state.requests.lock().unwrap().clone()
    }

    /// Every `Authorization` header value seen is checked against the token; this
    /// returns nothing secret, just the number of 401 answers given.
    pub fn unauthorized_count(&self) -> usize {
        self.state
            .requests
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.ends_with(" -> 401"))
            .count()
    }
}

fn next(counter: &Mutex<u64>) -> u64 {
    let mut n = counter.lock().unwrap();
    *n += 1;
    *n
}

fn err(st: &ForgeState, status: u16, message: &str) -> Response {
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

fn github_validation(errors: Value) -> Response {
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

fn query(uri: &Uri) -> HashMap<String, String> {
    uri.query()
        .unwrap_or_default()
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_owned(), decode(v)))
        .collect()
}

fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(if b[i] == b'+' { b' ' } else { b[i] });
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn authorized(st: &ForgeState, headers: &HeaderMap) -> bool {
    let Some(v) = headers.get("authorization").and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let (scheme, token) = v.split_once(' ').unwrap_or(("", ""));
    matches!(scheme.to_ascii_lowercase().as_str(), "token" | "bearer") && token == st.token
}

fn html_base(st: &ForgeState) -> String {
    format!("http://{}/{}/{}", addr(st), st.owner, st.repo)
}

fn pr_json(st: &ForgeState, pr: &FakePr) -> Value {
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
    json!({
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
    })
}

fn issue_json(st: &ForgeState, i: &FakeIssue) -> Value {
    json!({
        "id": i.number + 9000,
        "number": i.number,
        "title": i.title,
        "body": i.body,
        "state": i.state,
        "html_url": format!("{}/issues/{}", html_base(st), i.number),
        "user": {"login": "someone"},
        "labels": [],
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

fn rev_parse(git_dir: &Path, rev: &str) -> Option<String> {
    let out = Command::new("git")
        .arg("--git-dir")
        .arg(git_dir)
        .args(["rev-parse", "--verify", "--quiet", rev])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

async fn handle(
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
            return git_http(st, method, uri, headers, body, rest).await;
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
        (Method::GET, ["pulls"]) => list_prs(st, &q),
        (Method::POST, ["pulls"]) => create_pr(st, &json_body).await,
        (Method::GET, ["pulls", n]) => {
            let n: u64 = n.parse().unwrap_or_default();
            match st.prs.lock().unwrap().iter().find(|p| p.number == n) {
                Some(p) => Json(pr_json(st, p)).into_response(),
                None => err(st, 404, "Not Found"),
            }
        }
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
            });
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
            let list: Vec<Value> = st
                .comments
                .lock()
                .unwrap()
                .iter()
                .filter(|c| c.issue == n)
                .skip((page - 1) * size)
                .take(size)
                .map(|c| {
                    json!({
                        "id": c.id, "body": c.body,
                        "html_url": format!("{}/issues/{n}#issuecomment-{}", html_base(st), c.id),
                        "user": {"login": "gaffer"},
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
        let cut = futures::stream::once(async {
            Err::<Bytes, _>(std::io::Error::new(
                std::io::ErrorKind::ConnectionReset,
                "the answer was lost",
            ))
        });
        return (StatusCode::CREATED, axum::body::Body::from_stream(cut)).into_response();
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

/// A task the fake Vikunja holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FakeTask {
    /// Id.
    pub id: u64,
    /// Project.
    pub project_id: u64,
    /// Title.
    pub title: String,
    /// Description.
    pub description: String,
    /// Done?
    pub done: bool,
}

struct VikunjaState {
    token: String,
    projects: Vec<u64>,
    tasks: Mutex<Vec<FakeTask>>,
    requests: Mutex<Vec<String>>,
}

/// A fake Vikunja (`/api/v1`, `Authorization: Bearer …`). Dropping it stops it.
pub struct FakeVikunja {
    addr: SocketAddr,
    state: Arc<VikunjaState>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeVikunja {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeVikunja {
    /// Start with these project ids, accepting only `token`.
    pub async fn start(token: &str, projects: &[u64]) -> anyhow::Result<Self> {
        let state = Arc::new(VikunjaState {
            token: token.into(),
            projects: projects.to_vec(),
            tasks: Mutex::default(),
            requests: Mutex::default(),
        });
        let router = Router::new().fallback(vikunja).with_state(state.clone());
        let (addr, task) = serve(router).await?;
        Ok(Self { addr, state, task })
    }

    /// The instance URL (the client adds `/api/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every task, in creation order.
    pub fn tasks(&self) -> Vec<FakeTask> {
        self.state.tasks.lock().unwrap().clone()
    }

    /// `METHOD /path -> status` of every request.
    pub fn requests(&self) -> Vec<String> {
        self.state.requests.lock().unwrap().clone()
    }
}

fn vikunja_task_json(t: &FakeTask) -> Value {
    json!({
        "id": t.id, "title": t.title, "description": t.description, "done": t.done,
        "done_at": if t.done { "2026-11-30T00:00:00Z" } else { "0001-01-01T00:00:00Z" },
        "project_id": t.project_id, "identifier": format!("#{}", t.id), "index": t.id,
        "priority": 0, "labels": null, "assignees": null,
        "created": "2026-11-30T00:00:00Z", "updated": "2026-11-30T00:00:00Z",
    })
}

fn verr(status: StatusCode, code: u32, message: &str) -> Response {
    (status, Json(json!({"code": code, "message": message}))).into_response()
}

async fn vikunja(
    State(st): State<Arc<VikunjaState>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let resp = vikunja_route(&st, &method, &uri, &headers, &body);
    st.requests.lock().unwrap().push(format!(
        "{method} {} -> {}",
        uri.path(),
        resp.status().as_u16()
    ));
    resp
}

fn vikunja_route(
    st: &VikunjaState,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &Bytes,
) -> Response {
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if auth.strip_prefix("Bearer ") != Some(st.token.as_str()) {
        return verr(
            StatusCode::UNAUTHORIZED,
            11,
            "missing, malformed, expired or otherwise invalid token provided",
        );
    }
    let Some(rel) = uri.path().strip_prefix("/api/v1") else {
        return verr(StatusCode::NOT_FOUND, 0, "Not Found");
    };
    let segs: Vec<&str> = rel.split('/').filter(|s| !s.is_empty()).collect();
    let b: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let s = |k: &str| {
        b.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    match (method.clone(), segs.as_slice()) {
        (Method::PUT, ["projects", pid, "tasks"]) => {
            let pid: u64 = pid.parse().unwrap_or_default();
            if !st.projects.contains(&pid) {
                return verr(StatusCode::NOT_FOUND, 3001, "The project does not exist.");
            }
            if s("title").trim().is_empty() {
                return verr(
                    StatusCode::BAD_REQUEST,
                    4001,
                    "You must provide at least a title for the task.",
                );
            }
            let mut tasks = st.tasks.lock().unwrap();
            let t = FakeTask {
                id: tasks.len() as u64 + 1,
                project_id: pid,
                title: s("title"),
                description: s("description"),
                done: b.get("done").and_then(Value::as_bool).unwrap_or(false),
            };
            tasks.push(t.clone());
            (StatusCode::CREATED, Json(vikunja_task_json(&t))).into_response()
        }
        (Method::GET, ["tasks"]) | (Method::GET, ["tasks", "all"]) => {
            let q = query(uri);
            let needle = q.get("s").cloned().unwrap_or_default().to_lowercase();
            let tasks = st.tasks.lock().unwrap();
            let found: Vec<Value> = tasks
                .iter()
                .filter(|t| {
                    t.title.to_lowercase().contains(&needle)
                        || t.description.to_lowercase().contains(&needle)
                })
                .map(vikunja_task_json)
                .collect();
            Json(Value::Array(found)).into_response()
        }
        (Method::GET, ["tasks", id]) => {
            let id: u64 = id.parse().unwrap_or_default();
            match st.tasks.lock().unwrap().iter().find(|t| t.id == id) {
                Some(t) => Json(vikunja_task_json(t)).into_response(),
                None => verr(StatusCode::NOT_FOUND, 4002, "The task does not exist."),
            }
        }
        (Method::POST, ["tasks", id]) => {
            let id: u64 = id.parse().unwrap_or_default();
            let mut tasks = st.tasks.lock().unwrap();
            let Some(t) = tasks.iter_mut().find(|t| t.id == id) else {
                return verr(StatusCode::NOT_FOUND, 4002, "The task does not exist.");
            };
            if s("title").trim().is_empty() {
                return verr(
                    StatusCode::BAD_REQUEST,
                    4001,
                    "You must provide at least a title for the task.",
                );
            }
            // Vikunja replaces the whole task with what is sent.
            t.title = s("title");
            t.description = s("description");
            t.done = b.get("done").and_then(Value::as_bool).unwrap_or(false);
            Json(vikunja_task_json(t)).into_response()
        }
        _ => verr(StatusCode::NOT_FOUND, 0, "Not Found"),
    }
}

/// A bare git repository to push to, in a temporary directory.
pub struct BareRemote {
    dir: tempfile::TempDir,
    path: PathBuf,
}

impl BareRemote {
    /// `git init --bare` with `main` as its default branch.
    pub fn new() -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("remote.git");
        let ok = Command::new("git")
            .args(["init", "-q", "--bare", "-b", "main"])
            .arg(&path)
            .status()?
            .success();
        anyhow::ensure!(ok, "git init --bare failed");
        Ok(Self { dir, path })
    }

    /// The repository's path (usable as a git remote URL).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The path as a string, to pass as a remote.
    pub fn url(&self) -> String {
        self.path.to_string_lossy().into_owned()
    }

    /// Refuse pushes to these branches with a `pre-receive` hook, the way a forge's
    /// branch protection does. A name may be a shell pattern (`gaffer/*`); an empty
    /// list lifts the protection.
    pub fn protect(&self, branches: &[&str]) -> anyhow::Result<()> {
        let hook = self.path.join("hooks/pre-receive");
        let list = branches.join(" ");
        let script = format!(
            "#!/bin/sh\nset -f\nwhile read old new ref; do\n  for b in {list}; do\n    case \"$ref\" in\n      refs/heads/$b)\n        echo \"Gitea: branch ${{ref#refs/heads/}} is protected from force push and direct pushes\" >&2\n        exit 1;;\n    esac\n  done\ndone\nexit 0\n"
        );
        std::fs::write(&hook, script)?;
        let ok = Command::new("chmod")
            .arg("+x")
            .arg(&hook)
            .status()?
            .success();
        anyhow::ensure!(ok, "chmod failed");
        Ok(())
    }

    /// The commit `branch` points at, if it exists.
    pub fn branch_sha(&self, branch: &str) -> Option<String> {
        rev_parse(&self.path, &format!("refs/heads/{branch}"))
    }

    /// The temporary directory holding the repository.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

fn basic_password(headers: &HeaderMap) -> Option<String> {
    let v = headers.get("authorization")?.to_str().ok()?;
    let b64 = v
        .strip_prefix("Basic ")
        .or_else(|| v.strip_prefix("basic "))?;
    let decoded = base64_decode(b64.trim())?;
    let text = String::from_utf8(decoded).ok()?;
    text.split_once(':').map(|(_, p)| p.to_owned())
}

fn base64_decode(s: &str) -> Option<Vec<u8>> {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::new();
    let mut acc: u32 = 0;
    let mut bits = 0;
    for c in s.bytes().filter(|c| *c != b'=') {
        let v = ALPHABET.iter().position(|a| *a == c)? as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// git's smart HTTP through `git http-backend` (CGI).
async fn git_http(
    st: &ForgeState,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &Bytes,
    rest: &str,
) -> Response {
    if basic_password(headers).as_deref() != Some(st.token.as_str()) {
        let mut resp = (StatusCode::UNAUTHORIZED, "Unauthorized\n").into_response();
        resp.headers_mut().insert(
            "www-authenticate",
            HeaderValue::from_static("Basic realm=\"Gitea\""),
        );
        return resp;
    }
    let Some(repo) = st.remote.lock().unwrap().clone() else {
        return (StatusCode::NOT_FOUND, "no repository").into_response();
    };
    let (Some(root), Some(name)) = (repo.parent(), repo.file_name()) else {
        return (StatusCode::NOT_FOUND, "no repository").into_response();
    };
    let header = |n: &str| {
        headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let mut cmd = tokio::process::Command::new("git");
    cmd.arg("http-backend")
        .env("GIT_PROJECT_ROOT", root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("PATH_INFO", format!("/{}/{rest}", name.to_string_lossy()))
        .env("REQUEST_METHOD", method.as_str())
        .env("QUERY_STRING", uri.query().unwrap_or_default())
        .env("CONTENT_TYPE", header("content-type"))
        .env("CONTENT_LENGTH", body.len().to_string())
        .env("HTTP_CONTENT_ENCODING", header("content-encoding"))
        .env("GIT_PROTOCOL", header("git-protocol"))
        .env("REMOTE_USER", "gaffer")
        .env("REMOTE_ADDR", "127.0.0.1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let Ok(mut child) = cmd.spawn() else {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            "cannot run git http-backend",
        )
            .into_response();
    };
    if let Some(mut stdin) = child.stdin.take() {
        use tokio::io::AsyncWriteExt;
        let _ = stdin.write_all(body).await;
    }
    let Ok(out) = child.wait_with_output().await else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "git http-backend failed").into_response();
    };
    let raw = out.stdout;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, 4))
        .or_else(|| raw.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2)));
    let Some((end, skip)) = split else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "bad CGI output").into_response();
    };
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let mut resp = Bytes::copy_from_slice(&raw[end + skip..]).into_response();
    for line in head.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let v = v.trim();
        if k.eq_ignore_ascii_case("status") {
            let code = v
                .split(' ')
                .next()
                .and_then(|c| c.parse().ok())
                .unwrap_or(200);
            *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
        } else if let (Ok(name), Ok(value)) = (
            axum::http::HeaderName::from_bytes(k.trim().as_bytes()),
            HeaderValue::from_str(v),
        ) {
            resp.headers_mut().insert(name, value);
        }
    }
    resp
}
