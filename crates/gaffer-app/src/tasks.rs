//! Tasks: requests queued for the engine.

use crate::error::{AppError, Result};
use crate::{convert, new_id, App};
use gaffer_core::{Actor, ActorKind, Event, ProjectId, Stage, StreamId, TaskId, TaskOptions};
use gaffer_protocol::api;
use gaffer_store::{NewEvent, ProjectRow, StoreError, TaskFilter};
use std::collections::HashMap;
use std::path::Path;

/// Longest request accepted, in bytes.
pub const MAX_REQUEST_BYTES: usize = 64 * 1024;

/// What [`App::create_task`] needs.
#[derive(Debug, Clone, Default)]
pub struct NewTask {
    /// Project name or id.
    pub project: String,
    /// What to do.
    pub request: String,
    /// Which agent, if not the configured one.
    pub agent: Option<String>,
    /// Branch to start from, if not the project's default branch.
    pub base: Option<String>,
    /// Approve the plan and every permission request by policy (`gaffer run --yes`).
    pub auto_approve: bool,
    /// The forge issue the request came from; shipping comments on it with the PR link.
    pub issue: Option<String>,
    /// Create the task once for this origin key (see [`App::create_task_once`]).
    pub key: Option<String>,
    /// Ids of tasks of the same project it runs after: it waits until each is done.
    pub after: Vec<String>,
}

/// What [`App::create_task_once`] did.
#[derive(Debug, Clone, PartialEq)]
pub struct CreatedTask {
    /// The task: the new one, or the one its key created before.
    pub task: api::Task,
    /// The key had created it before; nothing was stored now.
    pub existing: bool,
}

/// Longest origin key accepted, in bytes.
pub const MAX_KEY_BYTES: usize = 200;

/// Origin-key namespaces gaffer itself creates tasks under (a schedule's slot, an
/// intake's issue). Only gaffer (a system actor) may use them: a person's or a
/// client's key there would claim a slot or an issue before gaffer does, and the
/// scheduler would take a made-up future slot for its last run and stop firing.
pub const SYSTEM_KEY_PREFIXES: [&str; 2] = ["schedule:", "intake:"];

/// Whether a task may be stored at all; gaffer-engine implements it with each
/// project's privacy (a `local-only` project whose roles, fallbacks or panel name a
/// cloud agent is refused before anything is stored).
pub trait TaskAdmission: Send + Sync {
    /// `Err(why)`, naming what refuses it and what to change, when a task of project
    /// `project` (by name), every role played by `agent` when given, may not run.
    fn admit(&self, project: &str, agent: Option<&str>) -> std::result::Result<(), String>;
}

/// Reads forge issues into task requests (`POST /api/tasks {"issue"}`, `gaffer run
/// --issue`); gaffer-engine implements it with each project's configured forge.
#[async_trait::async_trait]
pub trait IssueReader: Send + Sync {
    /// The issue `reference` (a URL, `OWNER/REPO#N` or `N`) of project `name`, whose
    /// repository is at `path`. Errors: [`AppError::Invalid`] on `issue` (a
    /// reference that names no issue), [`AppError::NotFound`], [`AppError::Conflict`]
    /// `no_forge` / `forge_config` (the project has no usable forge configured),
    /// [`AppError::Upstream`] (the forge failed or refused).
    async fn read_issue(&self, name: &str, path: &Path, reference: &str) -> Result<IssueRequest>;
}

/// A task request read from a forge issue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssueRequest {
    /// The issue's title and body.
    pub request: String,
    /// The issue's URL (shipping comments the pull request link on it).
    pub url: String,
}

/// Filters for [`App::tasks`].
#[derive(Debug, Clone, Default)]
pub struct TaskQuery {
    /// Project name or id.
    pub project: Option<String>,
    /// Stage name.
    pub stage: Option<String>,
    /// 1..=500, default 50.
    pub limit: Option<i64>,
    /// Skip this many.
    pub offset: Option<i64>,
}

const AGENTS: &[&str] = &["claude", "codex", "gemini", "openai", "anthropic"];

impl App {
    /// A built-in agent, or `acp:<name>` for an ACP agent the config declares: an
    /// undeclared name would start whatever executable of that name is on PATH.
    pub(crate) fn check_agent(&self, agent: &str) -> Result<()> {
        if AGENTS.contains(&agent) {
            return Ok(());
        }
        match agent.strip_prefix("acp:") {
            Some(name) if self.inner.acp_agents.contains(name) => Ok(()),
            Some(name) => Err(AppError::invalid(
                "agent",
                format!(
                    "`agent` `{agent}` {}",
                    gaffer_config::undeclared_acp(name, self.inner.acp_agents.iter())
                ),
            )),
            None => Err(AppError::invalid(
                "agent",
                format!(
                    "`agent` `{agent}` is unknown; use one of {}, or acp:<name> for an ACP agent the config declares",
                    AGENTS.join(", ")
                ),
            )),
        }
    }

    /// Queue a request in a project (name or id). An empty request, an unknown
    /// project or agent is refused and nothing is stored. With `req.key`, see
    /// [`App::create_task_once`].
    pub async fn create_task(&self, req: NewTask, by: Actor) -> Result<api::Task> {
        self.create_task_once(req, by).await.map(|c| c.task)
    }

    /// [`App::create_task`], telling whether `req.key` had created the task before.
    /// A key names one task across the journal, whoever creates it and however
    /// many do so at once (the store keeps keys unique in the append's own
    /// transaction): a repeat answers the task as first created, with no second
    /// task and no event, even if its request differs. A key is printable ASCII
    /// without spaces, at most [`MAX_KEY_BYTES`]; one already used in another
    /// project is refused (409 `key_taken`).
    pub async fn create_task_once(&self, req: NewTask, by: Actor) -> Result<CreatedTask> {
        if req.project.trim().is_empty() {
            return Err(AppError::invalid("project", "`project` must not be empty"));
        }
        let request = req.request.trim();
        if request.is_empty() {
            return Err(AppError::invalid("request", "`request` must not be empty"));
        }
        if request.len() > MAX_REQUEST_BYTES {
            return Err(AppError::invalid(
                "request",
                format!("`request` is longer than {MAX_REQUEST_BYTES} bytes"),
            ));
        }
        if let Some(agent) = &req.agent {
            self.check_agent(agent)?;
        }
        if let Some(key) = &req.key {
            self.check_key(key, &by)?;
        }
        let project = self.requested_project(&req.project).await?;
        if let Some(found) = self.keyed_task(req.key.as_deref(), &project).await? {
            return Ok(found);
        }
        if let Some(admission) = self.inner.admission.get() {
            admission
                .admit(&project.name, req.agent.as_deref())
                .map_err(|why| AppError::conflict("privacy_refused", why))?;
        }
        let id = TaskId(new_id("t"));
        let after: Vec<TaskId> = req
            .after
            .iter()
            .map(|a| TaskId(a.trim().to_owned()))
            .collect();
        let deps = self
            .checked_after(&id, &ProjectId(project.id.clone()), &after)
            .await?;
        let event = Event::TaskCreated {
            task_id: id.clone(),
            project_id: ProjectId(project.id.clone()),
            // A pasted key must not reach the journal, the stream, the page or an agent.
            request: self.redacted(request),
            by,
            options: TaskOptions {
                agent: req.agent.clone(),
                base: req.base.clone(),
                auto_approve: req.auto_approve,
                issue: req.issue.clone(),
                key: req.key.clone(),
                after,
            },
        };
        let events = Self::creation_events(event, &deps)?;
        let appended = self
            .journal()
            .append(
                &StreamId::from(&id),
                0,
                events.into_iter().map(NewEvent::now).collect(),
            )
            .await;
        match appended {
            Ok(_) => {}
            // Another creator took the key between the look-up and this append.
            Err(StoreError::Constraint(m)) => {
                return match self.keyed_task(req.key.as_deref(), &project).await? {
                    Some(found) => Ok(found),
                    None => Err(StoreError::Constraint(m).into()),
                }
            }
            Err(e) => return Err(e.into()),
        }
        Ok(CreatedTask {
            task: self.task(id.as_str()).await?.task,
            existing: false,
        })
    }

    /// An origin key as [`App::create_task_once`] accepts it, or why not.
    fn check_key(&self, key: &str, by: &Actor) -> Result<()> {
        if key.is_empty() || key.len() > MAX_KEY_BYTES {
            return Err(AppError::invalid(
                "key",
                format!("`key` must be 1 to {MAX_KEY_BYTES} bytes long"),
            ));
        }
        if !key.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(AppError::invalid(
                "key",
                "`key` must be printable ASCII without spaces (like `deploy-2026-01-01`)",
            ));
        }
        if by.kind != ActorKind::System {
            if let Some(prefix) = SYSTEM_KEY_PREFIXES.iter().find(|p| key.starts_with(*p)) {
                return Err(AppError::invalid(
                    "key",
                    format!("`key` may not start with `{prefix}`: gaffer's scheduler and issue intake create tasks under it; choose another key"),
                ));
            }
        }
        if self.redacted(key) != key {
            return Err(AppError::invalid(
                "key",
                "`key` looks like it holds a secret; use an id that does not",
            ));
        }
        Ok(())
    }

    /// The task `key` created before, if any; refused (409 `key_taken`) when that
    /// task is in another project than `project`.
    async fn keyed_task(
        &self,
        key: Option<&str>,
        project: &ProjectRow,
    ) -> Result<Option<CreatedTask>> {
        let Some(key) = key else { return Ok(None) };
        let Some(row) = self.journal().task_by_key(key).await? else {
            return Ok(None);
        };
        if row.project_id != project.id {
            return Err(AppError::conflict(
                "key_taken",
                format!(
                    "`key` `{key}` already created task `{}` in another project; use another key",
                    row.id
                ),
            ));
        }
        Ok(Some(CreatedTask {
            task: self.task(&row.id).await?.task,
            existing: true,
        }))
    }

    /// Queue the forge issue `reference` of `req.project` as a task: its title and
    /// body become the request (`req.request` is ignored), and shipping comments the
    /// pull request link on it. Read before anything is stored; `req.key` as in
    /// [`App::create_task_once`].
    pub async fn create_task_from_issue(
        &self,
        reader: &dyn IssueReader,
        reference: &str,
        req: NewTask,
        by: Actor,
    ) -> Result<CreatedTask> {
        if reference.trim().is_empty() {
            return Err(AppError::invalid(
                "issue",
                "`issue` is empty; give an issue URL, OWNER/REPO#N or N",
            ));
        }
        let project = self.requested_project(&req.project).await?;
        let issue = reader
            .read_issue(&project.name, Path::new(&project.path), reference.trim())
            .await?;
        self.create_task_once(
            NewTask {
                request: issue.request,
                issue: Some(issue.url),
                ..req
            },
            by,
        )
        .await
    }

    /// The project a request names, refused naming `project` when it is not registered.
    pub(crate) async fn requested_project(&self, name: &str) -> Result<ProjectRow> {
        match self.project_row(name.trim()).await {
            Err(AppError::NotFound { id, .. }) => Err(AppError::invalid(
                "project",
                format!("`project` `{id}` is not registered; `gaffer project list` (GET /api/projects) lists those that are, `gaffer project add PATH` adds one"),
            )),
            other => other,
        }
    }

    /// Tasks, newest first.
    pub async fn tasks(&self, q: &TaskQuery) -> Result<Vec<api::Task>> {
        let limit = q.limit.unwrap_or(50);
        if !(1..=500).contains(&limit) {
            return Err(AppError::invalid(
                "limit",
                "`limit` must be between 1 and 500",
            ));
        }
        let offset = q.offset.unwrap_or(0);
        if offset < 0 {
            return Err(AppError::invalid("offset", "`offset` must not be negative"));
        }
        if let Some(stage) = &q.stage {
            if !Stage::ALL.iter().any(|s| s.as_str() == stage) {
                return Err(AppError::invalid(
                    "stage",
                    format!(
                        "`stage` `{stage}` is unknown; use one of {}",
                        Stage::ALL.map(|s| s.as_str()).join(", ")
                    ),
                ));
            }
        }
        let projects: HashMap<String, String> = self
            .journal()
            .projects()
            .await?
            .into_iter()
            .map(|p| (p.id, p.name))
            .collect();
        let project_id = match &q.project {
            Some(p) => Some(
                projects
                    .iter()
                    .find(|(id, name)| *id == p || *name == p)
                    .map(|(id, _)| id.clone())
                    .ok_or_else(|| {
                        AppError::invalid("project", format!("`project` `{p}` is not registered"))
                    })?,
            ),
            None => None,
        };
        let rows = self
            .journal()
            .tasks(&TaskFilter {
                project_id,
                stage: q.stage.clone(),
                limit: Some(limit),
                offset: Some(offset),
            })
            .await?;
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            let steps = match self.journal().task(&r.id).await? {
                Some(v) => v.steps,
                None => Vec::new(),
            };
            let name = projects
                .get(&r.project_id)
                .map(String::as_str)
                .unwrap_or("");
            let after = self.dependency_stages(&convert::options(r)).await?;
            out.push(convert::task(r, name, &steps, after));
        }
        Ok(out)
    }

    /// One task with its steps, approvals and sessions.
    pub async fn task(&self, id: &str) -> Result<api::TaskDetail> {
        let view = self.task_view(id).await?;
        let name = self
            .journal()
            .projects()
            .await?
            .into_iter()
            .find(|p| p.id == view.task.project_id)
            .map(|p| p.name)
            .unwrap_or_default();
        let replayed = self.replayed(id).await?;
        Ok(api::TaskDetail {
            task: convert::task(
                &view.task,
                &name,
                &view.steps,
                self.dependency_stages(&convert::options(&view.task))
                    .await?,
            ),
            steps: view.steps.iter().map(convert::step).collect(),
            approvals: view
                .approvals
                .iter()
                .map(|r| api::Approval {
                    project: name.clone(),
                    ..convert::approval(r)
                })
                .collect(),
            sessions: view.sessions.iter().map(convert::session).collect(),
            switches: replayed.as_ref().map(switches).unwrap_or_default(),
            worker: view.lease.as_ref().map(convert::worker),
            spend: convert::role_spend(&view.steps, &view.sessions),
            follow_ups: replayed.as_ref().map(follow_ups).unwrap_or_default(),
            following_ended: replayed.and_then(|t| t.following_ended),
        })
    }

    /// The task's replayed state: what has no table of its own (switches to fallback
    /// agents, follow-ups) comes from it.
    async fn replayed(&self, id: &str) -> Result<Option<gaffer_core::TaskState>> {
        let state = self.journal().state(&StreamId(id.to_owned())).await?;
        Ok(match state {
            Some(gaffer_core::StreamState::Task(task)) => Some(*task),
            _ => None,
        })
    }

    /// Stop a task: `task_cancelled`, which also withdraws its pending approvals.
    /// A task already final is refused (409 `task_finished`).
    pub async fn cancel_task(
        &self,
        id: &str,
        by: Actor,
        reason: Option<String>,
    ) -> Result<api::TaskDetail> {
        let stream = StreamId(id.to_owned());
        let reason = reason.map(|r| self.redacted(&r));
        for _ in 0..32 {
            let view = self.task_view(id).await?;
            if is_final(&view.task.stage) {
                return Err(AppError::conflict(
                    "task_finished",
                    format!("task `{id}` is already {}", view.task.stage),
                ));
            }
            let event = Event::TaskCancelled {
                by: by.clone(),
                reason: reason.clone(),
            };
            match self
                .journal()
                .append(&stream, view.head_seq, vec![NewEvent::now(event)])
                .await
            {
                Ok(_) => return self.task(id).await,
                Err(StoreError::Conflict { .. }) => continue,
                Err(StoreError::Rejected { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(AppError::conflict(
            "conflict",
            "the task is changing too fast; try again",
        ))
    }

    /// Ask again: a new queued task with the same project and request as a
    /// failed, cancelled or blocked one. Refused for a task still running or done.
    /// It still waits for the tasks the old one ran after that have not ended;
    /// one that failed, was cancelled or was blocked is left out (a blocked task
    /// retried runs without the dependency that blocked it).
    pub async fn retry_task(&self, id: &str, by: Actor) -> Result<api::Task> {
        let view = self.task_view(id).await?;
        if !matches!(view.task.stage.as_str(), "failed" | "cancelled" | "blocked") {
            return Err(AppError::conflict(
                "conflict",
                format!(
                    "task `{id}` is {}; only failed, cancelled or blocked tasks can be retried",
                    view.task.stage
                ),
            ));
        }
        let options = convert::options(&view.task);
        let after = self.after_for_retry(&options).await?;
        self.create_task(
            NewTask {
                project: view.task.project_id.clone(),
                request: view.task.request.clone(),
                agent: options.agent,
                base: options.base,
                auto_approve: options.auto_approve,
                issue: options.issue,
                // The retry is a new task: the key stays with the one it created.
                key: None,
                after,
            },
            by,
        )
        .await
    }

    /// The task's worktree diff against its base (committed and uncommitted
    /// changes), its secrets redacted, cut at 512 KiB. 404 (`worktree`) until the
    /// engine made the worktree.
    pub async fn task_diff(&self, id: &str) -> Result<api::TaskDiff> {
        const LIMIT: usize = 512 * 1024;
        let view = self.task_view(id).await?;
        let receipt = view
            .steps
            .iter()
            .find(|s| s.step_id == "worktree")
            .and_then(|s| s.receipt.as_deref())
            .and_then(|r| serde_json::from_str::<serde_json::Value>(r).ok())
            .ok_or_else(|| AppError::NotFound {
                what: "worktree of task",
                id: id.to_owned(),
            })?;
        let field = |k: &str| {
            receipt
                .get(k)
                .and_then(|v| v.as_str())
                .unwrap_or_default()
                .to_owned()
        };
        let (path, branch, base) = (field("path"), field("branch"), field("base"));
        if path.is_empty() || base.is_empty() || !std::path::Path::new(&path).is_dir() {
            return Err(AppError::NotFound {
                what: "worktree of task",
                id: id.to_owned(),
            });
        }
        let unavailable = || {
            AppError::conflict(
                "diff_unavailable",
                format!("cannot diff the worktree of task `{id}` now"),
            )
        };
        // The git dir gaffer recorded, never the worktree's own `.git` (an agent's to
        // rewrite); an older receipt has none: the project repository knows it.
        let git_dir = match receipt.get("git_dir").and_then(|v| v.as_str()) {
            Some(d) => std::path::PathBuf::from(d),
            None => {
                let repo = self
                    .journal()
                    .projects()
                    .await?
                    .into_iter()
                    .find(|p| p.id == view.task.project_id)
                    .map(|p| p.path)
                    .unwrap_or_default();
                gaffer_forge::Repo::open(std::path::Path::new(&repo))
                    .and_then(|r| r.worktree_git_dir(std::path::Path::new(&path)))
                    .map_err(|_| unavailable())?
            }
        };
        let wt = gaffer_forge::Worktree {
            path: path.into(),
            branch: branch.clone(),
            base: base.clone(),
            git_dir,
        };
        let run = tokio::task::spawn_blocking(move || wt.diff());
        let out = match tokio::time::timeout(std::time::Duration::from_secs(10), run).await {
            Ok(Ok(Ok(text))) => text,
            _ => return Err(unavailable()),
        };
        // Redacted whole, then cut: a cut through a secret must not show its first half.
        let full = self.redacted(&out);
        let truncated = full.len() > LIMIT;
        let diff = crate::sanitize::cap(&full, LIMIT);
        Ok(api::TaskDiff {
            branch,
            base,
            diff,
            truncated,
        })
    }

    /// Up to `limit` (1..=5000) of the task's recorded events after `after_seq`,
    /// oldest first, and whether more follow. 404 for an unknown task.
    pub async fn task_events(
        &self,
        id: &str,
        after_seq: i64,
        limit: i64,
    ) -> Result<(Vec<gaffer_store::RecordedEvent>, bool)> {
        if !(1..=5000).contains(&limit) {
            return Err(AppError::invalid(
                "limit",
                "`limit` must be between 1 and 5000",
            ));
        }
        if after_seq < 0 {
            return Err(AppError::invalid("after", "`after` must not be negative"));
        }
        self.task_view(id).await?;
        let mut events = self
            .journal()
            .stream_events(&StreamId(id.to_owned()), after_seq)
            .await?;
        let more = events.len() > limit as usize;
        events.truncate(limit as usize);
        Ok((events, more))
    }

    /// Sessions of one task.
    pub async fn sessions(&self, task_id: &str) -> Result<Vec<api::Session>> {
        Ok(self.task(task_id).await?.sessions)
    }

    /// Token and cost totals over every task.
    pub async fn usage(&self) -> Result<api::Usage> {
        let p = self.journal().projections().await?;
        let spend: gaffer_core::Spend = p.steps.iter().map(convert::step_spend).sum();
        Ok(api::Usage {
            tasks: p.tasks.len() as u64,
            tokens: spend.tokens(),
            cost_usd: spend.cost_usd(),
        })
    }
}

/// The task's switches to fallback agents.
fn switches(task: &gaffer_core::TaskState) -> Vec<api::AgentSwitch> {
    task.switches
        .iter()
        .map(|s| api::AgentSwitch {
            step_id: s.step_id.0.clone(),
            role: s.role.as_str().to_owned(),
            from: s.from.clone(),
            to: s.to.clone(),
            trigger: s.trigger.clone(),
            detail: s.detail.clone(),
            until: s.until,
            effects: s.effects,
            at: s.at,
        })
        .collect()
}

/// What the task's pull request asked after it was done.
fn follow_ups(task: &gaffer_core::TaskState) -> Vec<api::FollowUp> {
    task.follow_ups
        .iter()
        .map(|f| api::FollowUp {
            n: f.n,
            kind: f.kind.clone(),
            keys: f.keys.clone(),
            detail: f.detail.clone(),
            opened_at: f.opened_at,
        })
        .collect()
}

pub(crate) fn is_final(stage: &str) -> bool {
    matches!(stage, "done" | "failed" | "cancelled" | "blocked")
}
