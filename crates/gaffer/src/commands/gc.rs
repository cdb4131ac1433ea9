//! `gaffer gc`: remove the worktrees of finished tasks (done, cancelled, failed,
//! blocked) older than the retention, prune task branches whose pull request was
//! merged or closed, delete the local branches of tasks that ended without
//! shipping, and say how much disk that gave back. A done task's branch without a
//! pull request is its result and is kept.

use crate::cli::{GcArgs, Global};
use crate::commands::approvals::{app_error, open_app};
use crate::error::{Result, EXIT_FAILED};
use crate::output;
use gaffer_app::App;
use gaffer_config::Config;
use gaffer_engine::Engine;
use gaffer_forge::Repo;
use gaffer_protocol::receipts::PullRequestReceipt;
use gaffer_store::{TaskFilter, TaskView};
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// One worktree removed (or, with `--dry-run`, that would be).
#[derive(Debug, Serialize)]
struct RemovedWorktree {
    task: String,
    path: PathBuf,
    bytes: u64,
}

/// One task branch pruned (or, with `--dry-run`, that would be).
#[derive(Debug, Serialize)]
struct PrunedBranch {
    task: String,
    branch: String,
    /// Its pull request, if it had one.
    pull_request: Option<u64>,
    /// `merged` or `closed`; for a branch without a pull request, how its task
    /// ended (`failed`, `cancelled`, `blocked`).
    pr_state: String,
    /// Deleted on the remote.
    remote: bool,
    /// Deleted in the project's repository.
    local: bool,
}

/// What one collection did (or, with `dry_run`, would do).
#[derive(Debug, Serialize)]
pub struct Report {
    dry_run: bool,
    retention_days: u64,
    worktrees: Vec<RemovedWorktree>,
    branches: Vec<PrunedBranch>,
    bytes_reclaimed: u64,
    /// What could not be cleaned, one line per task.
    pub errors: Vec<String>,
}

const DAY_MS: i64 = 86_400_000;

pub async fn run(global: &Global, args: &GcArgs) -> Result<ExitCode> {
    let (config, _, app) = open_app(global).await?;
    let engine = crate::commands::run::engine(global, &config, &app).await?;
    let report = collect(&config, &app, &engine, args.dry_run).await?;
    if args.json {
        output::json(&report)?;
    } else {
        print(&report);
    }
    Ok(if report.errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAILED)
    })
}

/// Remove what the retention and the pull requests allow (nothing with `dry_run`).
/// Problems with one task are reported in [`Report::errors`]; the rest goes on.
pub async fn collect(config: &Config, app: &App, engine: &Engine, dry_run: bool) -> Result<Report> {
    let projects: HashMap<String, (String, PathBuf)> = app
        .projects()
        .await
        .map_err(app_error)?
        .into_iter()
        .map(|p| (p.id, (p.name, PathBuf::from(p.path))))
        .collect();
    let retention_ms = i64::try_from(config.worktree_retention_days)
        .map_or(i64::MAX, |d| d.saturating_mul(DAY_MS));
    let cutoff = gaffer_store::now_ms().saturating_sub(retention_ms);
    let mut report = Report {
        dry_run,
        retention_days: config.worktree_retention_days,
        worktrees: Vec::new(),
        branches: Vec::new(),
        bytes_reclaimed: 0,
        errors: Vec::new(),
    };
    let tasks = app
        .journal()
        .tasks(&TaskFilter {
            limit: Some(i64::MAX),
            ..TaskFilter::default()
        })
        .await?;
    for row in tasks {
        let Some((name, root)) = projects.get(&row.project_id) else {
            continue;
        };
        if !matches!(
            row.stage.as_str(),
            "done" | "cancelled" | "failed" | "blocked"
        ) {
            continue;
        }
        let expired = row.updated_at <= cutoff;
        let Some(view) = app.journal().task(&row.id).await? else {
            continue;
        };
        let worktree = receipt(&view, "worktree");
        let (Some(path), Some(branch)) = (
            worktree["path"].as_str().map(PathBuf::from),
            worktree["branch"].as_str().map(str::to_owned),
        ) else {
            continue;
        };
        let repo = match Repo::open(root) {
            Ok(r) => r,
            Err(e) => {
                report.errors.push(format!("task {}: {e}", row.id));
                continue;
            }
        };
        let mut worktree_gone = !path.exists();
        if expired && path.exists() {
            let bytes = dir_size(&path);
            let removed = if dry_run {
                Ok(())
            } else {
                repo.remove_worktree(&path)
            };
            match removed {
                Ok(()) => {
                    worktree_gone = true;
                    report.bytes_reclaimed += bytes;
                    report.worktrees.push(RemovedWorktree {
                        task: row.id.clone(),
                        path: path.clone(),
                        bytes,
                    });
                }
                Err(e) => report.errors.push(format!("task {}: {e}", row.id)),
            }
        }
        let pr = PullRequestReceipt::from_receipt(&receipt(&view, PullRequestReceipt::STEP))
            .map(|pr| pr.number);
        if pr.is_none() && row.stage != "done" && expired && worktree_gone {
            // Nothing was shipped from it and its worktree is gone: a leftover.
            let here = repo.rev_exists(&format!("refs/heads/{branch}"));
            let deleted = if dry_run || !here {
                Ok(here)
            } else {
                repo.delete_branch(&branch)
            };
            match deleted {
                Ok(true) => report.branches.push(PrunedBranch {
                    task: row.id.clone(),
                    branch,
                    pull_request: None,
                    pr_state: row.stage.clone(),
                    remote: false,
                    local: true,
                }),
                Ok(false) => {}
                Err(e) => report
                    .errors
                    .push(format!("task {} (branch {branch}): {e}", row.id)),
            }
            continue;
        }
        if let Some(number) = pr {
            match prune(
                engine,
                &repo,
                name,
                root,
                &branch,
                number,
                worktree_gone,
                dry_run,
            )
            .await
            {
                Ok(Some((pr_state, remote, local))) => report.branches.push(PrunedBranch {
                    task: row.id.clone(),
                    branch,
                    pull_request: Some(number),
                    pr_state,
                    remote,
                    local,
                }),
                Ok(None) => {}
                Err(e) => report
                    .errors
                    .push(format!("task {} (branch {branch}): {e}", row.id)),
            }
        }
    }
    Ok(report)
}

/// If the branch's pull request was merged or closed: delete the branch on the
/// remote, and locally once its worktree is gone. Returns the PR's state and what was
/// (or would be) deleted; `None` while the pull request is open.
#[allow(clippy::too_many_arguments)]
async fn prune(
    engine: &Engine,
    repo: &Repo,
    project: &str,
    root: &Path,
    branch: &str,
    number: u64,
    worktree_gone: bool,
    dry_run: bool,
) -> std::result::Result<Option<(String, bool, bool)>, String> {
    let Some(forge) = engine.forge_for(project, root) else {
        return Err(format!(
            "project {project} has no forge configured any more; cannot tell whether pull request #{number} was merged"
        ));
    };
    let pr = forge?
        .pull_request(number)
        .await
        .map_err(|e| e.to_string())?;
    let state = if pr.merged {
        "merged"
    } else if pr.state == "closed" {
        "closed"
    } else {
        return Ok(None);
    };
    let Some((remote, auth)) = engine.push_target(project) else {
        return Ok(None);
    };
    let auth = auth?;
    let (remote_done, local_done) = if dry_run {
        let there = repo
            .remote_branch_sha(&remote, branch, &auth)
            .map_err(|e| e.to_string())?
            .is_some();
        let here = worktree_gone && repo.rev_exists(&format!("refs/heads/{branch}"));
        (there, here)
    } else {
        let there = repo
            .delete_remote_branch(&remote, branch, &auth)
            .map_err(|e| e.to_string())?;
        // A branch checked out in a worktree cannot be deleted: it goes with the
        // worktree, after the retention.
        let here = worktree_gone && repo.delete_branch(branch).map_err(|e| e.to_string())?;
        (there, here)
    };
    if !remote_done && !local_done {
        return Ok(None);
    }
    Ok(Some((state.to_owned(), remote_done, local_done)))
}

fn receipt(view: &TaskView, step: &str) -> Value {
    view.steps
        .iter()
        .find(|s| s.step_id == step)
        .and_then(|s| s.receipt.as_deref())
        .and_then(|r| serde_json::from_str(r).ok())
        .unwrap_or(Value::Null)
}

/// Bytes of the regular files under `dir` (symlinks are not followed).
fn dir_size(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_size(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map_or(0, |m| m.len()),
            _ => 0,
        })
        .sum()
}

fn print(report: &Report) {
    let verb = if report.dry_run {
        "would remove"
    } else {
        "removed"
    };
    for w in &report.worktrees {
        outln!(
            "{verb} worktree {} (task {}, {})",
            w.path.display(),
            w.task,
            human_bytes(w.bytes)
        );
    }
    let verb = if report.dry_run {
        "would prune"
    } else {
        "pruned"
    };
    for b in &report.branches {
        let places = match (b.remote, b.local) {
            (true, true) => "remote and local",
            (true, false) => "remote",
            _ => "local",
        };
        match b.pull_request {
            Some(n) => outln!(
                "{verb} branch {} ({places}; pull request #{n} {})",
                b.branch,
                b.pr_state
            ),
            None => outln!(
                "{verb} branch {} ({places}; its task {} without shipping)",
                b.branch,
                b.pr_state
            ),
        }
    }
    for e in &report.errors {
        errln!("gaffer: {e}");
    }
    outln!(
        "{} {} (worktrees of finished tasks older than {} day{})",
        if report.dry_run {
            "would reclaim"
        } else {
            "reclaimed"
        },
        human_bytes(report.bytes_reclaimed),
        report.retention_days,
        if report.retention_days == 1 { "" } else { "s" }
    );
}

fn human_bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 30 => format!("{:.1} GiB", n as f64 / (1u64 << 30) as f64),
        n if n >= 1 << 20 => format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64),
        n if n >= 1 << 10 => format!("{:.1} KiB", n as f64 / 1024.0),
        n => format!("{n} bytes"),
    }
}
