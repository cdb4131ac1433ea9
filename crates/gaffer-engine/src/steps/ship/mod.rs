//! Shipping to a forge: the approval, the push, one pull request, the CI wait, the
//! tracker and the issue comment. [`crate::pipeline::decide`] orders the steps; this
//! module runs them and probes the two that change the forge after a crash.
//!
//! - `push/n` and `pr` are non-idempotent. After a crash mid-step the probe reads the
//!   remote branch (`git ls-remote`) or looks up the open pull request for the task
//!   branch: found → the step is completed with what was found; proven absent → it
//!   runs again (a push of the same commit and a find-then-create cannot do anything
//!   twice); the forge cannot be read → a human decides.
//! - A forge error (a refused token, an unreachable forge, branch protection, CI that
//!   never finishes) does not end the task by itself: a human is asked whether to try
//!   again or give up, and the worktree and its commits stay as they are either way.
//! - Tokens are resolved when a step needs them and never leave `gaffer-forge`'s
//!   `Secret`: errors are redacted there and again by the engine's redactor.

use crate::failure::{fail, Failure};
use crate::pipeline::{plan_of, receipt_of as receipt, StepKind};
use crate::{prompts, text, Engine};
use gaffer_app::{AppError, IssueReader, IssueRequest, Subject};
use gaffer_core::{ApprovalKind, Intent, ProjectState, Step, TaskState};
use gaffer_forge::{
    connect, token_from_git_credentials, ApiError, CiWait, ConflictStrategy, Forge, ForgeConfig,
    ForgeKind, GitAuth, IssueRef, NewPullRequest, PullRequest, RemoteRepo, Repo, Secret,
};
use gaffer_protocol::receipts::{short_sha, PullRequestReceipt};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

mod ci;
mod reconcile;
mod tracker;

pub(crate) use ci::ci_fix_assignment;

/// Where an API token comes from.
#[derive(Clone, Debug)]
pub enum Credential {
    /// This value.
    Value(Secret),
    /// The environment variable with this name, read when a step needs it.
    Env(String),
    /// The password the user's git credential helper holds for the service's host.
    GitCredentials,
}

impl Credential {
    /// The token and where it came from (for error hints), or what to do.
    fn resolve(&self, url: &str) -> std::result::Result<(Secret, String), String> {
        match self {
            Credential::Value(s) => Ok((s.clone(), "the configured token".into())),
            Credential::Env(name) => Secret::from_env(name)
                .map(|s| (s, name.clone()))
                .ok_or_else(|| {
                    format!("the environment variable {name} is not set or empty; put the API token for {url} in it and restart gaffer")
                }),
            Credential::GitCredentials => token_from_git_credentials(url)
                .map(|s| (s, format!("the git credential for {url}")))
                .ok_or_else(|| {
                    format!("no token for {url}: set token_env in the project's forge settings, or store a credential for the host in your git credential helper")
                }),
        }
    }
}

/// How one project ships (its `[projects.<name>.forge]`).
#[derive(Clone, Debug)]
pub struct Shipping {
    /// Gitea/Forgejo or GitHub.
    pub kind: ForgeKind,
    /// Gitea: the instance URL; GitHub: the API URL.
    pub base_url: String,
    /// Repository owner; `None`: from the remote's URL.
    pub owner: Option<String>,
    /// Repository name; `None`: from the remote's URL.
    pub repo: Option<String>,
    /// The git remote (name or URL) to push to.
    pub remote: String,
    /// The API token.
    pub token: Credential,
    /// Push with the token instead of the user's git setup.
    pub push_with_token: bool,
    /// Labels for the pull request.
    pub labels: Vec<String>,
    /// How to wait for CI.
    pub ci: CiWait,
    /// Owner fixes allowed after CI failures.
    pub ci_fix_attempts: u32,
    /// Wait for CI after the pull request (false: the repository has no CI).
    pub wait_for_ci: bool,
    /// How the task branch takes in a base that moved under its pull request.
    pub conflict_strategy: ConflictStrategy,
    /// Review rounds (follow-ups with review comments) answered before a person is
    /// asked whether to allow one more.
    pub review_fix_attempts: u32,
    /// How the done task's pull request is followed; `None`: it is not.
    pub follow: Option<Following>,
}

/// How a project's shipped pull requests are followed after their task is done.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Following {
    /// How often the follower reads each followed pull request (a webhook wakes it
    /// sooner).
    pub every: std::time::Duration,
    /// The forge user gaffer posts as: its comments never ask for a fix (gaffer's
    /// own also carry a marker).
    pub bot_user: Option<String>,
}

/// A project's Vikunja project (its `[projects.<name>.tracker]`).
#[derive(Clone, Debug)]
pub struct Tracker {
    /// The Vikunja URL.
    pub base_url: String,
    /// The Vikunja project the tasks go into.
    pub project_id: u64,
    /// The API token.
    pub token: Credential,
}

/// The branch the task started from (the worktree's `base` is its commit).
pub(crate) fn base_branch(task: &TaskState, wt: &gaffer_forge::Worktree) -> String {
    let name = text_of(receipt(task, StepKind::Worktree), "base_ref");
    if name.is_empty() {
        wt.base.clone()
    } else {
        name
    }
}

fn text_of(v: Option<&Value>, key: &str) -> String {
    v.and_then(|v| v.get(key))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

impl Engine {
    pub(crate) fn shipping(
        &self,
        project: &ProjectState,
    ) -> std::result::Result<&Shipping, Failure> {
        self.settings.shipping.get(&project.name).ok_or_else(|| {
            fail(format!(
                "project `{}` has no forge configured any more; add [projects.{}.forge] again or cancel the task",
                project.name, project.name
            ))
        })
    }

    fn tracker(&self, project: &ProjectState) -> Option<&Tracker> {
        self.settings.trackers.get(&project.name)
    }

    /// What the `ship` receipt says about the forge: `None` keeps the branch local.
    pub(crate) fn forge_summary(&self, project: &ProjectState) -> Value {
        match self.settings.shipping.get(&project.name) {
            Some(s) => json!({
                "kind": s.kind.name(),
                "base_url": s.base_url,
                "remote": gaffer_forge::redact(&s.remote, &[]),
                "ci_fix_attempts": s.ci_fix_attempts,
                "wait_for_ci": s.wait_for_ci,
                "review_fix_attempts": s.review_fix_attempts,
            }),
            None => Value::Null,
        }
    }

    /// The forge client, with the owner and repository from the config or the remote.
    pub(crate) fn forge(
        &self,
        ship: &Shipping,
        project: &ProjectState,
    ) -> std::result::Result<Box<dyn Forge>, String> {
        connect_forge(ship, &project.name, Path::new(&project.path))
    }

    /// The forge of project `name` (its repository at `path`), for reading issues and
    /// pull requests outside a task; `None` when the project has no forge configured.
    pub fn forge_for(
        &self,
        name: &str,
        path: &Path,
    ) -> Option<std::result::Result<Box<dyn Forge>, String>> {
        let ship = self.settings.shipping.get(name)?;
        Some(connect_forge(ship, name, path))
    }

    /// The remote project `name` pushes to and the credentials for it (to prune
    /// branches); `None` when the project has no forge configured.
    pub fn push_target(
        &self,
        name: &str,
    ) -> Option<(String, std::result::Result<GitAuth, String>)> {
        let ship = self.settings.shipping.get(name)?;
        Some((ship.remote.clone(), Self::push_auth(ship)))
    }

    /// A forge call failed: ask a human whether to try again. `Ok(())`: try again;
    /// a denial (or expiry) fails the step with the error. Never auto-approved (a
    /// `manual` approval), so a retry cannot loop without a person.
    pub(crate) async fn retry_or_give_up(
        &self,
        task: &TaskState,
        step: &Step,
        round: u32,
        what: &str,
        error: &str,
    ) -> std::result::Result<(), Failure> {
        let error = self.settings.redactor.redact(error);
        let wt = self.worktree(task).await?;
        let summary = format!(
            "{what} failed: {error}. Approve to try again (after fixing the cause), deny to give up; the worktree {} and branch `{}` are kept either way.",
            wt.path.display(),
            wt.branch
        );
        let details = json!({ "step": step.id, "error": error, "worktree": wt.path, "branch": wt.branch, "round": round });
        let resolution = self
            .ask(
                task,
                step,
                step.attempt * 1000 + round,
                ApprovalKind::Manual,
                summary,
                details,
                Subject::default(),
            )
            .await?;
        if resolution.approved() {
            Ok(())
        } else {
            Err(fail(format!(
                "{what} failed: {error} ({}); the worktree {} and branch `{}` are kept",
                resolution.reason(),
                wt.path.display(),
                wt.branch
            )))
        }
    }

    /// `ship-approval`: one approval of kind `ship` for the pushes and the pull request.
    pub(crate) async fn ship_approval(
        &self,
        task: &TaskState,
        step: &Step,
    ) -> std::result::Result<Value, Failure> {
        let project = self.project(task).await?;
        let ship = self.shipping(&project)?;
        let wt = self.worktree(task).await?;
        let commits = receipt(task, StepKind::Ship)
            .and_then(|r| r.get("commits"))
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        let summary = format!(
            "Push `{}` to `{}` and open a {} into `{}` on {} ({commits} commit{})?",
            wt.branch,
            gaffer_forge::redact(&ship.remote, &[]),
            ship.kind.change_request(),
            base_branch(task, &wt),
            ship.kind.name(),
            if commits == 1 { "" } else { "s" }
        );
        self.ask_to_push(task, step, summary).await
    }

    /// Ask the ship approval (kind `ship`, so the project's rules and a task's
    /// `--yes` decide as for any push) with `summary`, the branch and its diff.
    pub(crate) async fn ask_to_push(
        &self,
        task: &TaskState,
        step: &Step,
        summary: String,
    ) -> std::result::Result<Value, Failure> {
        let project = self.project(task).await?;
        let ship = self.shipping(&project)?;
        let wt = self.worktree(task).await?;
        let summary_receipt = receipt(task, StepKind::Ship);
        let diff = wt.diff().unwrap_or_default();
        let details = json!({
            "branch": wt.branch,
            "base": base_branch(task, &wt),
            "remote": gaffer_forge::redact(&ship.remote, &[]),
            "commits": summary_receipt.and_then(|r| r.get("commits")),
            "changed_files": summary_receipt.and_then(|r| r.get("changed_files")),
            "diff": prompts::head(&self.settings.redactor.redact(&diff), 8000),
        });
        let subject = Subject {
            intent: Some(Intent::NonIdempotent),
            ..Subject::default()
        };
        // Always attempt 1: after a crash the step asks again and gets the same
        // approval back (pending or decided), never a second one.
        let resolution = self
            .ask(task, step, 1, ApprovalKind::Ship, summary, details, subject)
            .await?;
        crate::gate::answered(&resolution).map_err(fail)
    }

    pub(crate) fn push_auth(ship: &Shipping) -> std::result::Result<GitAuth, String> {
        if ship.push_with_token {
            Ok(GitAuth::token(ship.token.resolve(&ship.base_url)?.0))
        } else {
            Ok(GitAuth::default())
        }
    }

    /// `push/n`: push the task branch. Never forced: after a rebase (the step's input
    /// has `lease`, the commit gaffer last pushed) with `--force-with-lease` against
    /// it, so a branch someone else pushed to is never overwritten (a person is asked).
    pub(crate) async fn push(
        &self,
        task: &TaskState,
        step: &Step,
    ) -> std::result::Result<Value, Failure> {
        let project = self.project(task).await?;
        let ship = self.shipping(&project)?.clone();
        let wt = self.worktree(task).await?;
        // Every commit the push would send, messages included, is scanned first.
        self.clear_secrets(task, step, ("push", "pushed"), || wt.branch_additions())
            .await?;
        let what = format!("pushing `{}` to `{}`", wt.branch, ship.remote);
        let mut round = 0;
        let outcome = loop {
            let root = PathBuf::from(&project.path);
            let (remote, branch, ship) = (ship.remote.clone(), wt.branch.clone(), ship.clone());
            let lease = step
                .input
                .get("lease")
                .and_then(Value::as_str)
                .map(str::to_owned);
            let pushed = tokio::task::spawn_blocking(move || {
                let auth = Self::push_auth(&ship)?;
                Repo::open(&root)
                    .and_then(|repo| match &lease {
                        Some(expected) => repo.push_with_lease(&remote, &branch, expected, &auth),
                        None => repo.push(&remote, &branch, &auth),
                    })
                    .map_err(|e| e.to_string())
            })
            .await
            .unwrap_or_else(|e| Err(format!("the push stopped: {e}")));
            match pushed {
                Ok(outcome) => break outcome,
                Err(e) => {
                    round += 1;
                    self.retry_or_give_up(task, step, round, &what, &e).await?;
                }
            }
        };
        let mut receipt = json!({
            "sha": outcome.sha,
            "pushed": outcome.pushed,
            "branch": wt.branch,
            "remote": gaffer_forge::redact(&ship.remote, &[]),
        });
        if let Some(lease) = step.input.get("lease") {
            receipt["lease"] = lease.clone();
        }
        Ok(receipt)
    }

    /// The pull request's title and body: the request, the plan, what changed, the
    /// review verdicts, the check, the cost; for a task from an issue, `Closes #n`
    /// (`Closes owner/repo#n` for an issue of another repository than `repo`, the
    /// project's), so the forge links the two and merging closes the issue.
    fn pull_request_text(
        &self,
        task: &TaskState,
        repo: Option<&(String, String)>,
    ) -> (String, String) {
        let redact = |t: &str| self.settings.redactor.redact(t);
        // The first line that says something, redacted before it is measured.
        let first = task.request.lines().find(|l| !l.trim().is_empty());
        let title = text::one_line(&redact(first.unwrap_or_default()), 72);
        let ship = receipt(task, StepKind::Ship);
        let list = |key: &str| {
            ship.and_then(|r| r.get(key))
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        };
        let mut body = format!("{}\n\n", task.request.trim());
        if let Some(plan) = plan_of(task) {
            body.push_str("## Plan\n\n");
            for (i, s) in plan.subtasks.iter().enumerate() {
                body.push_str(&format!(
                    "{}. **{}** — {}\n",
                    i + 1,
                    text::one_line(&s.title, 200),
                    text::one_line(&s.description, 1000)
                ));
            }
            body.push('\n');
        }
        body.push_str("## What changed\n\n");
        for c in list("commits") {
            body.push_str(&format!(
                "- {} {}\n",
                short_sha(c["sha"].as_str().unwrap_or_default()),
                text::one_line(c["subject"].as_str().unwrap_or_default(), 200)
            ));
        }
        let files: Vec<String> = list("changed_files")
            .iter()
            .filter_map(|f| f.as_str().map(|f| format!("`{f}`")))
            .collect();
        if !files.is_empty() {
            body.push_str(&format!("\nFiles: {}\n", files.join(", ")));
        }
        body.push_str("\n## Review\n\n");
        let verdicts = list("verdicts");
        if verdicts.is_empty() {
            body.push_str("- no review verdict recorded\n");
        }
        for (i, v) in verdicts.iter().enumerate() {
            let detail = v
                .get("feedback")
                .or_else(|| v.get("reason"))
                .and_then(Value::as_str)
                .map(|d| format!(": {}", text::one_line(d, 300)))
                .unwrap_or_default();
            body.push_str(&format!(
                "- round {}: {}{detail}\n",
                i + 1,
                v["verdict"].as_str().unwrap_or("?")
            ));
        }
        let check = ship
            .and_then(|r| r.get("check"))
            .cloned()
            .unwrap_or(Value::Null);
        body.push_str("\n## Check\n\n");
        match check["command"].as_str() {
            Some(cmd) => body.push_str(&format!(
                "`{cmd}` {} (exit code {})\n",
                if check["passed"] == true {
                    "passed"
                } else {
                    "failed"
                },
                check["exit_code"]
            )),
            None => body.push_str("no check command configured\n"),
        }
        let tokens = ship
            .and_then(|r| r.get("tokens"))
            .cloned()
            .unwrap_or(Value::Null);
        body.push_str(&format!(
            "\n## Cost\n\n{} tokens in, {} out ({} cached) · {}\n",
            tokens["input"],
            tokens["output"],
            tokens["cached_input"],
            gaffer_core::format_cost(ship.and_then(|r| r.get("cost_usd")).and_then(Value::as_f64))
        ));
        if let Some(issue) = &task.options.issue {
            if let Some(closes) = closes(issue, repo) {
                body.push_str(&format!("\nCloses {closes}\n"));
            }
            body.push_str(&format!("\nFrom {issue}\n"));
        }
        body.push_str(&format!("\n_gaffer task {}_\n", task.id));
        (title, redact(&body))
    }

    /// `pr`: the open pull request for the branch, or a new one (find before create).
    pub(crate) async fn pull_request(
        &self,
        task: &TaskState,
        step: &Step,
    ) -> std::result::Result<Value, Failure> {
        let project = self.project(task).await?;
        let ship = self.shipping(&project)?;
        let wt = self.worktree(task).await?;
        let repo = forge_repo(ship, &project.name, Path::new(&project.path)).ok();
        let (title, body) = self.pull_request_text(task, repo.as_ref());
        let new = NewPullRequest {
            title,
            body,
            head: wt.branch.clone(),
            base: base_branch(task, &wt),
            labels: ship.labels.clone(),
        };
        let mut round = 0;
        loop {
            let result = match self.forge(ship, &project) {
                Ok(forge) => forge.ensure_pr(&new).await.map_err(|e| e.to_string()),
                Err(e) => Err(e),
            };
            match result {
                Ok((pr, created)) => return Ok(json!(pr_receipt(&pr, created))),
                Err(e) => {
                    round += 1;
                    self.retry_or_give_up(task, step, round, "opening the pull request", &e)
                        .await?;
                }
            }
        }
    }
}

/// The owner and repository project `name` ships to: from its forge settings, else
/// read from the push remote's URL.
pub(crate) fn forge_repo(
    ship: &Shipping,
    name: &str,
    path: &Path,
) -> std::result::Result<(String, String), String> {
    if let (Some(o), Some(r)) = (&ship.owner, &ship.repo) {
        return Ok((o.clone(), r.clone()));
    }
    let url = Repo::open(path)
        .and_then(|repo| repo.remote_url(&ship.remote))
        .map_err(|e| e.to_string())?;
    let parsed = RemoteRepo::parse(&url).ok_or_else(|| {
        format!(
            "cannot tell the forge's owner and repository from the remote `{}` ({url}); set owner and repo in [projects.{name}.forge]",
            ship.remote
        )
    })?;
    Ok((
        ship.owner.clone().unwrap_or(parsed.owner),
        ship.repo.clone().unwrap_or(parsed.repo),
    ))
}

fn connect_forge(
    ship: &Shipping,
    name: &str,
    path: &Path,
) -> std::result::Result<Box<dyn Forge>, String> {
    let (owner, repo) = forge_repo(ship, name, path)?;
    let (token, source) = ship.token.resolve(&ship.base_url)?;
    connect(ForgeConfig::new(
        ship.kind,
        &ship.base_url,
        owner,
        repo,
        token,
        source,
    ))
    .map_err(|e| e.to_string())
}

fn failure_text(f: Failure) -> String {
    match f {
        Failure::Step(s) | Failure::Spent(s, _) => s.0,
        Failure::Cancelled => "cancelled".into(),
        Failure::Engine(e) => e.to_string(),
    }
}

fn pr_receipt(pr: &PullRequest, created: bool) -> PullRequestReceipt {
    PullRequestReceipt {
        number: pr.number,
        url: pr.url.clone(),
        head: pr.head.clone(),
        base: pr.base.clone(),
        created,
        reconciled: false,
        warnings: pr.warnings.clone(),
    }
}

/// Issues are read through the project's forge.
#[async_trait::async_trait]
impl IssueReader for Engine {
    async fn read_issue(
        &self,
        name: &str,
        path: &Path,
        reference: &str,
    ) -> std::result::Result<IssueRequest, AppError> {
        // The server's configuration, not the request, is at fault: 409.
        let unconfigured = |code, message| AppError::Conflict { code, message };
        let forge = self
            .forge_for(name, path)
            .ok_or_else(|| unconfigured("no_forge", format!(
                "project `{name}` has no forge to read issues from: add [projects.{name}.forge] to the config (see `gaffer init`)"
            )))?
            .map_err(|e| unconfigured("forge_config", format!("the forge of project `{name}`: {e}")))?;
        let issue = forge.issue(reference).await.map_err(|e| match e {
            ApiError::NotFound { .. } => AppError::NotFound {
                what: "issue",
                id: reference.to_owned(),
            },
            ApiError::BadInput(message) => AppError::Invalid {
                field: "issue".into(),
                message,
            },
            e => AppError::Upstream(format!("cannot read the issue {reference}: {e}")),
        })?;
        let request = issue_request(&issue);
        let url = if issue.url.is_empty() {
            reference.to_owned()
        } else {
            issue.url
        };
        Ok(IssueRequest { request, url })
    }
}

/// How a pull request of `repo` names `issue` for the forge to close it: `#n`, or
/// `owner/repo#n` for another repository's; `None` for a reference naming no issue.
fn closes(issue: &str, repo: Option<&(String, String)>) -> Option<String> {
    let (owner, name) = repo
        .map(|(o, r)| (o.as_str(), r.as_str()))
        .unwrap_or(("", ""));
    if let Some((project, number)) = gitlab_issue(issue) {
        // The project's path may follow a self-hosted GitLab's own path prefix.
        let ours = format!("{owner}/{name}").to_lowercase();
        let path = project.to_lowercase();
        let same = path == ours || path.ends_with(&format!("/{ours}"));
        return Some(if same {
            format!("#{number}")
        } else {
            format!("{project}#{number}")
        });
    }
    let r = IssueRef::parse(issue, owner, name).ok()?;
    let same = r.owner.eq_ignore_ascii_case(owner) && r.repo.eq_ignore_ascii_case(name);
    Some(match (same, r.owner.is_empty()) {
        (true, _) | (false, true) => format!("#{}", r.number),
        (false, false) => format!("{}/{}#{}", r.owner, r.repo, r.number),
    })
}

/// A GitLab issue URL's project path (groups and sub-groups included) and number:
/// GitLab puts `/-/` between them (`https://HOST/acme/tools/demo/-/issues/7`, also
/// `/-/work_items/7`). `None` for any other reference.
fn gitlab_issue(reference: &str) -> Option<(String, u64)> {
    let (_, rest) = reference.trim().split_once("://")?;
    let path = rest.split(['?', '#']).next()?;
    let (_, path) = path.split_once('/')?;
    let (project, tail) = path.split_once("/-/")?;
    let mut tail = tail.split('/');
    if !matches!(tail.next()?, "issues" | "work_items") {
        return None;
    }
    let number = tail.next()?.parse().ok()?;
    let project = project.trim_matches('/');
    (!project.is_empty()).then(|| (project.to_owned(), number))
}

/// A task's request from an issue: its title and body.
pub(crate) fn issue_request(issue: &gaffer_forge::Issue) -> String {
    format!("{}\n\n{}", issue.title.trim(), issue.body.trim())
        .trim()
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::closes;

    #[test]
    fn a_pull_request_closes_its_issue_in_each_forges_words() {
        let repo = |o: &str, r: &str| Some((o.to_owned(), r.to_owned()));
        let gitlab = repo("acme/tools", "demo");
        for (issue, repo, want) in [
            (
                "https://gitlab.example.com/acme/tools/demo/-/issues/7",
                &gitlab,
                "#7",
            ),
            (
                "https://gitlab.example.com/acme/tools/demo/-/work_items/7?x=1",
                &gitlab,
                "#7",
            ),
            (
                "https://example.com/gitlab/acme/tools/demo/-/issues/7",
                &gitlab,
                "#7",
            ),
            (
                "https://gitlab.example.com/acme/other/-/issues/3",
                &gitlab,
                "acme/other#3",
            ),
            ("https://github.com/o/r/issues/12", &repo("o", "r"), "#12"),
            (
                "https://github.com/x/y/issues/12",
                &repo("o", "r"),
                "x/y#12",
            ),
            ("#5", &repo("o", "r"), "#5"),
        ] {
            assert_eq!(
                closes(issue, repo.as_ref()).as_deref(),
                Some(want),
                "{issue}"
            );
        }
        assert_eq!(
            closes(
                "https://gitlab.example.com/acme/demo/-/merge_requests/2",
                gitlab.as_ref()
            ),
            None
        );
    }
}
