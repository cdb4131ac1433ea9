//! A fake GitLab (`/api/v4`) for one project, on loopback.
//!
//! It speaks the v4 endpoints, JSON shapes, headers and status codes gaffer uses:
//! the project by its URL-encoded path (`acme%2Ftools%2Fdemo`, sub-groups included);
//! merge requests (list with `state`/`source_branch` and `x-next-page` paging, get,
//! create, `PUT` with `add_labels`; a second open MR for the same branches is 409
//! "Another open merge request already exists for this source branch: !N"); the
//! commit's statuses (`/repository/commits/:sha/statuses`, the jobs of its pipelines
//! and external statuses), `/pipelines?sha=`, `/pipelines/:id/jobs` and
//! `/jobs/:id/trace` (plain text); issues (one, or the list by `state`, `labels`
//! and `assignee_username`) and their notes; merge request discussions (diff notes on
//! new or removed lines, system notes, replies). An open MR's `detailed_merge_status`
//! and `has_conflicts` come from the attached remote (`git merge-tree`); a draft
//! ([`FakeGitLab::mark_draft`]) says `draft_status`, GitLab's first failing check,
//! even when it also conflicts. Webhook
//! deliveries: [`FakeGitLab::issue_hook`], [`FakeGitLab::mr_note_hook`] (signed
//! with `X-Gitlab-Token`). The token is accepted in
//! `PRIVATE-TOKEN` or `Authorization: Bearer`; a wrong one is 401 `{"message":"401
//! Unauthorized"}`; an unknown project, MR, issue or job 404; a missing field 400
//! `{"error":"title is missing"}`; rate limits 429 `Retry later` with `Retry-After`
//! and `RateLimit-*`. A create's answer can be made to hang or be cut off after the
//! MR was made.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::Router;
use serde::{Deserialize, Serialize};

use super::{next, serve, BareRemote, FakeComment};

mod discussions;
mod hooks;
mod routes;

pub use discussions::{FakeDiscussion, FakeNote};

/// A merge request the fake holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FakeMr {
    /// Its number in the project (`!iid`).
    pub iid: u64,
    /// Title.
    pub title: String,
    /// Description (Markdown).
    pub description: String,
    /// The branch with the change.
    pub source_branch: String,
    /// The branch it merges into.
    pub target_branch: String,
    /// The source branch's commit when it was made (from the [`BareRemote`]).
    pub sha: String,
    /// `opened`, `closed` or `merged`.
    pub state: String,
    /// Label names.
    pub labels: Vec<String>,
    /// The project the source branch is in (another one for a fork's MR).
    pub source_project_id: u64,
    /// A draft (see [`FakeGitLab::mark_draft`]).
    #[serde(default)]
    pub draft: bool,
}

#[derive(Debug, Clone)]
struct FakeIssue {
    iid: u64,
    title: String,
    description: String,
    /// `opened` or `closed`.
    state: String,
    labels: Vec<String>,
    /// Usernames.
    assignees: Vec<String>,
}

/// A job of a pipeline, or an external CI's commit status (no trace).
#[derive(Debug, Clone)]
struct FakeJob {
    id: u64,
    pipeline: u64,
    name: String,
    status: String,
    allow_failure: bool,
    description: Option<String>,
    /// `None`: an external status, which has no job page and no trace.
    trace: Option<String>,
}

#[derive(Debug, Clone)]
struct FakePipeline {
    id: u64,
    iid: u64,
    sha: String,
    jobs: Vec<FakeJob>,
}

#[derive(Debug, Clone)]
struct RateLimit {
    hits: u32,
    retry_after: u64,
}

/// The project's numeric id (the fake serves one project).
const PROJECT_ID: u64 = 42;

struct LabState {
    /// `group/sub/project`.
    path: String,
    token: String,
    addr: Mutex<Option<SocketAddr>>,
    remote: Mutex<Option<PathBuf>>,
    next_mr: Mutex<u64>,
    next_issue: Mutex<u64>,
    next_pipeline: Mutex<u64>,
    next_id: Mutex<u64>,
    mrs: Mutex<Vec<FakeMr>>,
    issues: Mutex<Vec<FakeIssue>>,
    notes: Mutex<Vec<FakeComment>>,
    discussions: Mutex<Vec<FakeDiscussion>>,
    pipelines: Mutex<Vec<FakePipeline>>,
    requests: Mutex<Vec<String>>,
    rate_limit: Mutex<Option<RateLimit>>,
    hang_next_create: Mutex<bool>,
    hang_next_note: Mutex<bool>,
    cut_next_create: Mutex<bool>,
    refuse_mrs: Mutex<Option<(u16, String)>>,
    ci_for_every_commit: Mutex<Option<(String, String)>>,
}

/// A fake GitLab serving one project. Dropping it stops it.
pub struct FakeGitLab {
    addr: SocketAddr,
    state: Arc<LabState>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeGitLab {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeGitLab {
    /// Start a fake for the project `namespace/project` (the namespace may hold
    /// sub-groups: `acme/tools`) that accepts only `token`.
    pub async fn start(namespace: &str, project: &str, token: &str) -> anyhow::Result<Self> {
        let state = Arc::new(LabState {
            path: format!("{namespace}/{project}"),
            token: token.into(),
            addr: Mutex::new(None),
            remote: Mutex::new(None),
            next_mr: Mutex::new(0),
            next_issue: Mutex::new(0),
            next_pipeline: Mutex::new(0),
            next_id: Mutex::new(3000),
            mrs: Mutex::default(),
            issues: Mutex::default(),
            notes: Mutex::default(),
            discussions: Mutex::default(),
            pipelines: Mutex::default(),
            requests: Mutex::default(),
            rate_limit: Mutex::new(None),
            hang_next_create: Mutex::new(false),
            hang_next_note: Mutex::new(false),
            cut_next_create: Mutex::new(false),
            refuse_mrs: Mutex::new(None),
            ci_for_every_commit: Mutex::new(None),
        });
        let router = Router::new()
            .fallback(routes::handle)
            .with_state(state.clone());
        let (addr, task) = serve(router).await?;
        *state.addr.lock().unwrap() = Some(addr);
        Ok(Self { addr, state, task })
    }

    /// The instance URL to configure (the client adds `/api/v4`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The project's web page, `http://ADDR/group/sub/project`.
    pub fn web_url(&self) -> String {
        format!("http://{}/{}", self.addr, self.state.path)
    }

    /// Check merge requests' source branches against this bare repository (a missing
    /// branch is refused) and take their commits from it.
    pub fn attach_remote(&self, remote: &BareRemote) {
        *self.state.remote.lock().unwrap() = Some(remote.path().to_owned());
    }

    /// Add an issue; returns its iid.
    pub fn add_issue(&self, title: &str, description: &str) -> u64 {
        let iid = next(&self.state.next_issue);
        self.state.issues.lock().unwrap().push(FakeIssue {
            iid,
            title: title.into(),
            description: description.into(),
            state: "opened".into(),
            labels: Vec::new(),
            assignees: Vec::new(),
        });
        iid
    }

    fn change_issue(&self, iid: u64, change: impl FnOnce(&mut FakeIssue)) {
        let mut issues = self.state.issues.lock().unwrap();
        if let Some(i) = issues.iter_mut().find(|i| i.iid == iid) {
            change(i);
        }
    }

    /// Put `label` on issue `iid`, as a person would.
    pub fn label_issue(&self, iid: u64, label: &str) {
        self.change_issue(iid, |i| {
            if !i.labels.iter().any(|l| l == label) {
                i.labels.push(label.into());
            }
        });
    }

    /// Assign issue `iid` to `username`, as a person would.
    pub fn assign_issue(&self, iid: u64, username: &str) {
        self.change_issue(iid, |i| {
            if !i.assignees.iter().any(|a| a == username) {
                i.assignees.push(username.into());
            }
        });
    }

    /// Close issue `iid`.
    pub fn close_issue(&self, iid: u64) {
        self.change_issue(iid, |i| i.state = "closed".into());
    }

    /// A person's note on issue `iid`; returns its id.
    pub fn add_note(&self, iid: u64, body: &str) -> u64 {
        let id = next(&self.state.next_id);
        self.state.notes.lock().unwrap().push(FakeComment {
            id,
            issue: iid,
            body: body.into(),
            author: "someone".into(),
        });
        id
    }

    /// Set job `name` of the newest pipeline for `sha` (a pipeline is made when the
    /// commit has none) to `status` (`created`, `pending`, `running`, `success`,
    /// `failed`, `canceled`, `skipped`, `manual`), with `trace` as its log. The same
    /// name again updates that job, as a job that goes from running to failed.
    /// Returns the job's id.
    pub fn set_job(&self, sha: &str, name: &str, status: &str, trace: Option<&str>) -> u64 {
        self.put_job(
            sha,
            name,
            status,
            false,
            None,
            Some(trace.unwrap_or_default()),
        )
    }

    /// Like [`FakeGitLab::set_job`], for a job with `allow_failure: true`.
    pub fn set_optional_job(&self, sha: &str, name: &str, status: &str) -> u64 {
        self.put_job(sha, name, status, true, None, Some(""))
    }

    /// A new pipeline for `sha` (as a retry or a new run makes): later jobs go there.
    pub fn new_pipeline(&self, sha: &str) -> u64 {
        new_pipeline(&self.state, sha)
    }

    /// An external CI's status (`POST /projects/:id/statuses/:sha`): a status
    /// without a job page or trace.
    pub fn set_external_status(&self, sha: &str, name: &str, status: &str, description: &str) {
        self.put_job(sha, name, status, false, Some(description), None);
    }

    fn put_job(
        &self,
        sha: &str,
        name: &str,
        status: &str,
        allow_failure: bool,
        description: Option<&str>,
        trace: Option<&str>,
    ) -> u64 {
        put_job(
            &self.state,
            sha,
            FakeJob {
                id: 0,
                pipeline: 0,
                name: name.into(),
                status: status.into(),
                allow_failure,
                description: description.map(str::to_owned),
                trace: trace.map(str::to_owned),
            },
        )
    }

    /// A CI that runs one job, `test`, ending in `status` with `trace`, for every
    /// commit nobody set jobs for, as soon as it is asked: for runs that cannot know
    /// the pushed commit in advance.
    pub fn report_ci_for_every_commit(&self, status: &str, trace: &str) {
        *self.state.ci_for_every_commit.lock().unwrap() = Some((status.into(), trace.into()));
    }

    /// The next `hits` authenticated requests are answered 429 with `Retry-After:
    /// retry_after` and `RateLimit-*` headers.
    pub fn rate_limit_next(&self, hits: u32, retry_after: u64) {
        *self.state.rate_limit.lock().unwrap() = Some(RateLimit { hits, retry_after });
    }

    /// The next MR create is recorded, and then the answer never comes (as if gaffer
    /// crashed before reading it).
    pub fn hang_next_mr_create(&self) {
        *self.state.hang_next_create.lock().unwrap() = true;
    }

    /// The next note on an issue is recorded, and then the answer never comes.
    pub fn hang_next_note(&self) {
        *self.state.hang_next_note.lock().unwrap() = true;
    }

    /// The next MR create is recorded, and then its answer is lost: the connection is
    /// cut after the status line. The client sees an error although the MR exists.
    pub fn cut_next_mr_create_answer(&self) {
        *self.state.cut_next_create.lock().unwrap() = true;
    }

    /// Refuse every MR create with `status` and `message`, or stop with `None`.
    pub fn refuse_mrs(&self, refusal: Option<(u16, &str)>) {
        *self.state.refuse_mrs.lock().unwrap() = refusal.map(|(s, m)| (s, m.to_owned()));
    }

    /// An open MR from a fork (another project) with this source branch, as anyone
    /// may open; returns its iid.
    pub fn add_fork_mr(&self, source_branch: &str, target_branch: &str) -> u64 {
        let iid = next(&self.state.next_mr);
        self.state.mrs.lock().unwrap().push(FakeMr {
            iid,
            title: "A fork's change".into(),
            description: String::new(),
            source_branch: source_branch.into(),
            target_branch: target_branch.into(),
            sha: "0".repeat(40),
            state: "opened".into(),
            labels: Vec::new(),
            source_project_id: PROJECT_ID + 1,
            draft: false,
        });
        iid
    }

    /// Mark an MR a draft (or ready), as a person would. A draft's
    /// `detailed_merge_status` is `draft_status` whatever else holds it back:
    /// GitLab names only the first failing check, so a conflict then shows only
    /// in `has_conflicts` and `merge_status`.
    pub fn mark_draft(&self, iid: u64, draft: bool) {
        for mr in self.state.mrs.lock().unwrap().iter_mut() {
            if mr.iid == iid {
                mr.draft = draft;
            }
        }
    }

    /// Merge an MR, as a person would.
    pub fn merge_mr(&self, iid: u64) {
        self.set_mr_state(iid, "merged");
    }

    /// Close an MR, as a person would.
    pub fn close_mr(&self, iid: u64) {
        self.set_mr_state(iid, "closed");
    }

    fn set_mr_state(&self, iid: u64, state: &str) {
        for mr in self.state.mrs.lock().unwrap().iter_mut() {
            if mr.iid == iid {
                mr.state = state.into();
            }
        }
    }

    /// Every merge request, in order.
    pub fn mrs(&self) -> Vec<FakeMr> {
        self.state.mrs.lock().unwrap().clone()
    }

    /// Every note on an issue, in order (`issue` is the issue's iid).
    pub fn notes(&self) -> Vec<FakeComment> {
        self.state.notes.lock().unwrap().clone()
    }

    /// `METHOD /path?query -> status` of every answered request, in order.
    pub fn requests(&self) -> Vec<String> {
        self.state.requests.lock().unwrap().clone()
    }

    /// How many requests were answered 401.
    pub fn unauthorized_count(&self) -> usize {
        self.requests()
            .iter()
            .filter(|r| r.ends_with(" -> 401"))
            .count()
    }
}

fn new_pipeline(st: &LabState, sha: &str) -> u64 {
    let iid = next(&st.next_pipeline);
    let id = iid + 700;
    st.pipelines.lock().unwrap().push(FakePipeline {
        id,
        iid,
        sha: sha.into(),
        jobs: Vec::new(),
    });
    id
}

/// Put `job` (by name) into the newest pipeline of `sha`; returns its id.
fn put_job(st: &LabState, sha: &str, mut job: FakeJob) -> u64 {
    if !st.pipelines.lock().unwrap().iter().any(|p| p.sha == sha) {
        new_pipeline(st, sha);
    }
    let mut pipelines = st.pipelines.lock().unwrap();
    let Some(pipeline) = pipelines.iter_mut().rev().find(|p| p.sha == sha) else {
        return 0;
    };
    match pipeline.jobs.iter_mut().find(|j| j.name == job.name) {
        Some(existing) => {
            job.id = existing.id;
            job.pipeline = pipeline.id;
            *existing = job;
            existing.id
        }
        None => {
            job.id = next(&st.next_id);
            job.pipeline = pipeline.id;
            let id = job.id;
            pipeline.jobs.push(job);
            id
        }
    }
}
