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
//!   `Retry-After` / `X-RateLimit-*`. Pull request reviews ([`FakeForge::add_review`]
//!   with a [`Verdict`]), review comments on lines of the diff, removed lines and
//!   outdated ones ([`FakeForge::add_review_comment_on`] with a [`DiffLine`]), replies
//!   to them, users as each forge embeds them (bots included: a GitHub login ending in
//!   `[bot]`, Gitea's `gitea-actions`), and the webhook a submitted review sends
//!   ([`FakeForge::review_hook`]). A create's answer can be made to hang
//!   ([`FakeForge::hang_next_pr_create`]) or be cut off
//!   ([`FakeForge::cut_next_pr_create_answer`]) after the PR was made.
//! * Issue intake: the open-issue list (`GET /repos/{o}/{r}/issues` with `state`,
//!   `labels`, Gitea's `type`/`assigned_by`, GitHub's `assignee`; GitHub lists pull
//!   requests too, with a `pull_request` key), labels and assignees set by tests
//!   ([`FakeForge::label_issue`], …), and the webhook deliveries the forge would send
//!   for them ([`FakeForge::issue_hook`], signed by [`HookDelivery::signed`]).
//! * [`FakeVikunja`]: `PUT /api/v1/projects/{id}/tasks`, `GET|POST /api/v1/tasks/{id}`,
//!   `GET /api/v1/tasks?s=…` (search).
//! * [`BareRemote`]: `git init --bare`, optionally with a `pre-receive` hook that
//!   refuses pushes to protected branches.
//!
//! An open pull request's `mergeable` (and GitHub's `mergeable_state`) is computed
//! from the attached remote, as the forges do: `git merge-tree --write-tree` of the
//! base and the head branch, so moving the base in a test makes a PR conflict (see
//! [`FakeForge::require_up_to_date`], [`FakeForge::compute_mergeability_later`]).
//!
//! Tests read what a fake saw with [`FakeForge::prs`], [`FakeForge::comments`],
//! [`FakeForge::requests`], [`FakeVikunja::tasks`].

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::http::Uri;
use axum::Router;
use serde::{Deserialize, Serialize};

mod gitlab;
mod issues;
mod mergeable;
mod remote;
mod reviews;
mod routes;
mod vikunja;

pub use gitlab::{FakeDiscussion, FakeGitLab, FakeMr, FakeNote};
pub use issues::HookDelivery;
pub use remote::BareRemote;
pub use reviews::{DiffLine, FakeReview, FakeReviewComment, Verdict};
use routes::handle;
pub use vikunja::{FakeTask, FakeVikunja};

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
    /// Who wrote it: `gaffer` (the token's user) for comments posted through the API.
    pub author: String,
}

#[derive(Debug, Clone)]
struct FakeIssue {
    number: u64,
    title: String,
    body: String,
    state: String,
    labels: Vec<String>,
    assignees: Vec<String>,
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
    reviews: Mutex<Vec<FakeReview>>,
    review_comments: Mutex<Vec<FakeReviewComment>>,
    statuses: Mutex<HashMap<String, Vec<FakeStatus>>>,
    runs: Mutex<HashMap<String, Vec<FakeRun>>>,
    requests: Mutex<Vec<String>>,
    rate_limit: Mutex<Option<RateLimit>>,
    hang_next_create: Mutex<bool>,
    hang_next_comment: Mutex<bool>,
    cut_next_create: Mutex<bool>,
    refuse_prs: Mutex<Option<(u16, String)>>,
    ci_for_every_commit: Mutex<Option<String>>,
    mergeability: Mutex<mergeable::Settings>,
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

pub(crate) async fn serve(
    router: Router,
) -> anyhow::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
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
            reviews: Mutex::default(),
            review_comments: Mutex::default(),
            statuses: Mutex::default(),
            runs: Mutex::default(),
            requests: Mutex::default(),
            rate_limit: Mutex::new(None),
            hang_next_create: Mutex::new(false),
            hang_next_comment: Mutex::new(false),
            cut_next_create: Mutex::new(false),
            refuse_prs: Mutex::new(None),
            ci_for_every_commit: Mutex::new(None),
            mergeability: Mutex::default(),
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
            labels: Vec::new(),
            assignees: Vec::new(),
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

    /// The next comment posted (on an issue or pull request, or a reply in a review
    /// thread) is recorded, and then the answer never comes (as if gaffer crashed
    /// before reading it).
    pub fn hang_next_comment(&self) {
        *self.state.hang_next_comment.lock().unwrap() = true;
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

/// A `201 Created` whose body never arrives: the connection is cut after the status
/// line, as a proxy or a network that gives up does.
fn lost_answer() -> axum::response::Response {
    use axum::response::IntoResponse;
    let cut = futures::stream::once(async {
        Err::<axum::body::Bytes, _>(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "the answer was lost",
        ))
    });
    (
        axum::http::StatusCode::CREATED,
        axum::body::Body::from_stream(cut),
    )
        .into_response()
}

/// Never answer when [`FakeForge::hang_next_comment`] asked for it (once).
async fn hang_if_asked(st: &ForgeState) {
    if std::mem::take(&mut *st.hang_next_comment.lock().unwrap()) {
        tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
    }
}

fn next(counter: &Mutex<u64>) -> u64 {
    let mut n = counter.lock().unwrap();
    *n += 1;
    *n
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
