//! `gaffer run`, `gaffer task cancel|retry|resume`: one task in the foreground,
//! with live progress and approvals asked on the terminal.

use crate::cli::{Global, RunArgs, TaskIdArgs};
use crate::commands::approvals::{app_error, open_app};
use crate::commands::project::repo_root;
use crate::error::{CliError, Result, EXIT_FAILED};
use crate::output;
use crate::setup::cli_actor;
use gaffer_agents::ratelimit::RateLimits;
use gaffer_app::{AddProject, App, NewTask, Scope};
use gaffer_config::Config;
use gaffer_core::{Decision, Event, Stage, TaskId};
use gaffer_engine::{Backends, Credential, Engine, JournalCounters, Settings, Shipping, Tracker};
use gaffer_forge::{CiWait, ForgeKind};
use gaffer_protocol::receipts::PullRequestReceipt;
use gaffer_store::{RecordedEvent, TaskView};
use serde_json::{json, Value};
use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// The engine as configured: roles, data dir, redaction of every secret in the
/// environment, the project index cached in the journal's database.
pub async fn engine(config: &Config, app: &App) -> Result<Engine> {
    let mut settings = Settings::new(config.data_dir.clone());
    settings.roles = config.roles.clone();
    settings.project_roles = config.project_roles.clone();
    settings.limits.review_rounds = config.review_rounds;
    settings.check_timeout = std::time::Duration::from_secs(config.check_timeout_secs);
    let mut tokens = crate::setup::configured_token_values(config);
    tokens.extend(shipping(config, &mut settings)?);
    settings.sandbox = gaffer_engine::sandbox_from_config(&config.sandbox);
    warn_if_unconfined(&settings.sandbox);
    let redactor = Arc::new(crate::setup::redactor(config, tokens));
    settings.redactor = redactor.clone();
    // Every event stored from now on is redacted with this redactor, which also knows
    // the tokens the git credential helper holds.
    let app = &{
        let r = redactor.clone();
        app.with_redaction(Arc::new(move |text: &str| r.redact(text)))
    };
    settings.index_cache = Arc::new(crate::commands::index::StoreCache::new(
        app.journal().clone(),
        redactor.clone(),
    ));
    Ok(Engine::new(
        app.clone(),
        Arc::new(
            Backends::new(redactor)
                .with_rate_limits(
                    Arc::new(JournalCounters(app.journal().clone())),
                    RateLimits {
                        rpm: config.requests_per_minute,
                        rpd: u64::from(config.requests_per_day),
                        tpm: None,
                    },
                )
                .with_acp_agents(config.acp_agents.clone()),
        ),
        settings,
    ))
}

/// Each project's forge and tracker from the config into `settings`. Tokens are read
/// when a step needs them; the tokens the git credential helper holds now for the
/// forges without a `token_env` are returned so every log and error redacts them.
fn shipping(config: &Config, settings: &mut Settings) -> Result<Vec<String>> {
    let mut helper_tokens = Vec::new();
    for (name, f) in &config.forges {
        let kind = f
            .kind
            .parse::<ForgeKind>()
            .map_err(|e| CliError::config(format!("projects.{name}.forge.kind: {e}")))?;
        let token = match &f.token_env {
            Some(var) => Credential::Env(var.clone()),
            None => {
                // The helper is asked again when a step needs the token; the value it
                // holds now is redacted from everything this process records.
                if let Some(t) = gaffer_forge::token_from_git_credentials(&f.base_url) {
                    helper_tokens.push(t.expose().to_owned());
                }
                Credential::GitCredentials
            }
        };
        settings.shipping.insert(
            name.clone(),
            Shipping {
                kind,
                base_url: f.base_url.clone(),
                owner: f.owner.clone(),
                repo: f.repo.clone(),
                remote: f.remote.clone(),
                token,
                push_with_token: f.push_with_token,
                labels: f.labels.clone(),
                ci: CiWait {
                    timeout: std::time::Duration::from_secs(f.ci_timeout_secs),
                    ..CiWait::default()
                },
                ci_fix_attempts: f.ci_fix_attempts,
                wait_for_ci: f.wait_for_ci,
            },
        );
    }
    for (name, t) in &config.trackers {
        settings.trackers.insert(
            name.clone(),
            Tracker {
                base_url: t.base_url.clone(),
                project_id: t.project_id,
                token: Credential::Env(t.token_env.clone()),
            },
        );
    }
    Ok(helper_tokens)
}

/// The request and the issue's URL from `gaffer run --issue`, read through the
/// project's forge before anything is stored.
async fn read_issue(
    engine: &Engine,
    project: &str,
    root: &std::path::Path,
    reference: &str,
) -> Result<(String, String)> {
    use gaffer_app::{AppError, IssueReader};
    let issue = engine
        .read_issue(project, root, reference)
        .await
        .map_err(|e| match e {
            AppError::Conflict { message, .. } => CliError::config(format!("--issue: {message}")),
            other => CliError::failed(format!("cannot read the issue {reference}: {other}")),
        })?;
    Ok((issue.request, issue.url))
}

/// Say at start, not at the first agent, that agents will run unconfined.
fn warn_if_unconfined(sandbox: &gaffer_agents::sandbox::Sandbox) {
    use gaffer_agents::sandbox::{support, SandboxMode};
    let s = support();
    if sandbox.mode == SandboxMode::Auto && !s.filesystem() {
        eprintln!(
            "gaffer: warning: {}; agents run unconfined. Set [sandbox] mode = \"required\" to refuse instead.",
            s.describe()
        );
    }
}

pub async fn run(global: &Global, args: &RunArgs) -> Result<ExitCode> {
    let given = args.request.clone().unwrap_or_default();
    if args.issue.is_none() && given.trim().is_empty() {
        eprintln!("gaffer: the request is empty; say what to do, e.g. gaffer run \"add an installation section to README\"");
        return Ok(ExitCode::from(2));
    }
    let (config, _, app) = open_app(global).await?;
    // Everything that can be refused is checked before anything is stored.
    let (known, root) = match &args.project {
        Some(name) => {
            let p = app.project(name).await.map_err(|e| {
                CliError::failed(format!(
                    "{e}; `gaffer project list` shows the registered projects"
                ))
            })?;
            let root = std::path::PathBuf::from(&p.path);
            (Some(p), root)
        }
        None => {
            let root = repo_root(&args.repo)?;
            let path = root.display().to_string();
            let known = app.projects().await.map_err(app_error)?;
            (known.into_iter().find(|p| p.path == path), root)
        }
    };
    let repo = gaffer_forge::Repo::open(&root).map_err(|e| CliError::config(e.to_string()))?;
    let base = match &args.base {
        Some(b) => {
            repo.resolve(b)
                .map_err(|e| CliError::config(e.to_string()))?;
            b.clone()
        }
        None => repo
            .default_branch()
            .map_err(|e| CliError::config(e.to_string()))?,
    };
    repo.ensure_clean(&base)
        .map_err(|e| CliError::config(e.to_string()))?;
    // Made before anything is stored: from here on every event is redacted with
    // every secret the engine knows (the credential helper's tokens too).
    let engine = engine(&config, &app).await?;
    if let Some(agent) = &args.agent {
        engine
            .check_agent(agent)
            .map_err(|e| CliError::config(format!("--agent {agent}: {e}")))?;
    }
    let (request, issue) = match &args.issue {
        None => (given, None),
        Some(reference) => {
            let name = match &known {
                Some(p) => p.name.clone(),
                None => root
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            };
            let (request, url) = read_issue(&engine, &name, &root, reference).await?;
            (request, Some(url))
        }
    };
    let project = match known {
        Some(p) => p,
        None => {
            let p = app
                .add_project(
                    AddProject {
                        path: root.display().to_string(),
                        name: None,
                        check: None,
                    },
                    cli_actor(),
                )
                .await
                .map_err(|e| CliError::config(e.to_string()))?;
            eprintln!(
                "registered project {} at {} (check: {})",
                p.name,
                p.path,
                p.check_command.as_deref().unwrap_or("none")
            );
            p
        }
    };
    let task = app
        .create_task(
            NewTask {
                project: project.id.clone(),
                request: request.clone(),
                agent: args.agent.clone(),
                base: args.base.clone(),
                auto_approve: args.yes,
                issue,
            },
            cli_actor(),
        )
        .await
        .map_err(|e| match e {
            gaffer_app::AppError::Invalid { .. } => CliError::config(e.to_string()),
            other => app_error(other),
        })?;
    if !args.json {
        eprintln!(
            "task {} in {}: {}",
            task.id,
            project.name,
            output::one_line(&request, 80)
        );
    }
    drive(&config, &app, &TaskId(task.id), args.json).await
}

pub async fn resume(global: &Global, args: &TaskIdArgs) -> Result<ExitCode> {
    let (config, _, app) = open_app(global).await?;
    let id = TaskId(args.id.clone());
    let view = app.journal().task(id.as_str()).await?.ok_or_else(|| {
        CliError::failed(format!(
            "task `{id}` does not exist; `gaffer task list` shows the tasks"
        ))
    })?;
    // Already over (it finished just before the crash): show how it ended.
    let stage = serde_json::from_value::<Stage>(Value::String(view.task.stage.clone()));
    if stage.is_ok_and(Stage::is_final) {
        eprintln!("task {id} has already ended; `gaffer task retry {id}` queues it again")
    }
    // Taking the lease marks what a crashed run left running as interrupted.
    drive(&config, &app, &id, args.json).await
}

pub async fn cancel(global: &Global, args: &TaskIdArgs) -> Result<ExitCode> {
    let (_, _, app) = open_app(global).await?;
    let detail = app
        .cancel_task(
            &args.id,
            cli_actor(),
            Some("cancelled from the command line".into()),
        )
        .await
        .map_err(app_error)?;
    if args.json {
        output::json(&detail.task)?;
    } else {
        println!("task {} is {}", detail.task.id, detail.task.stage);
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn retry(global: &Global, args: &TaskIdArgs) -> Result<ExitCode> {
    let (_, _, app) = open_app(global).await?;
    let task = app
        .retry_task(&args.id, cli_actor())
        .await
        .map_err(app_error)?;
    if args.json {
        output::json(&task)?;
    } else {
        println!("queued again as task {}; `gaffer task resume {}` runs it here, or a running `gaffer serve` picks it up", task.id, task.id);
    }
    Ok(ExitCode::SUCCESS)
}

/// Run the task here until it ends, showing progress; Ctrl-C cancels it cleanly.
async fn drive(config: &Config, app: &App, id: &TaskId, json_out: bool) -> Result<ExitCode> {
    let engine = engine(config, app).await?;
    let cancel = CancellationToken::new();
    let ctrl_c = {
        let token = cancel.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!("\ngaffer: stopping (the worktree is kept)…");
                token.cancel();
            }
        })
    };
    let renderer = tokio::spawn(render(app.clone(), id.clone(), !json_out));
    // This process is a worker for this one task: it holds the task's lease while
    // it runs, so no other worker runs it at the same time.
    let outcome = engine
        .run_one(id, &crate::commands::worker::me(config), cancel)
        .await;
    ctrl_c.abort();
    renderer.abort();
    let stage = match outcome {
        Ok(Some(stage)) => stage,
        Ok(None) => {
            let holder = app.journal().lease(id.as_str()).await?.map_or_else(
                || "another worker".to_owned(),
                |l| format!("worker {}", l.worker_id),
            );
            return Err(CliError::failed(format!(
                "task `{id}` is being run by {holder}; `gaffer workers` lists the workers, `gaffer task show {id}` shows its progress"
            )));
        }
        Err(e) => return Err(CliError::failed(e.to_string())),
    };
    let view = app
        .journal()
        .task(id.as_str())
        .await?
        .ok_or_else(|| CliError::failed(format!("task `{id}` vanished")))?;
    let summary = summary(&view);
    if json_out {
        output::json(&summary)?;
    } else {
        print_summary(&view, &summary);
    }
    Ok(if stage == Stage::Done {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAILED)
    })
}

/// `{"task_id","state","branch","commits":[…],"tokens","cost_usd"}` from the journal.
fn summary(view: &TaskView) -> Value {
    let receipt = |s: &gaffer_store::StepRow| -> Value {
        s.receipt
            .as_deref()
            .and_then(|r| serde_json::from_str(r).ok())
            .unwrap_or(Value::Null)
    };
    let mut branch = Value::Null;
    let mut commits = Vec::new();
    let mut spend = gaffer_core::Spend::default();
    for s in &view.steps {
        let r = receipt(s);
        spend += gaffer_core::Spend::of_receipt(&r);
        if s.step_id == "worktree" {
            branch = r["branch"].clone();
        }
        if s.step_id.starts_with("commit") {
            if let Some(sha) = r["sha"].as_str() {
                if !commits.iter().any(|c: &Value| c == sha) {
                    commits.push(json!(sha));
                }
            }
        }
    }
    let outcome: Value = view
        .task
        .outcome
        .as_deref()
        .and_then(|o| serde_json::from_str(o).ok())
        .unwrap_or(Value::Null);
    json!({
        "task_id": view.task.id,
        "state": view.task.stage,
        "branch": branch,
        "commits": commits,
        "tokens": { "input": spend.input_tokens, "output": spend.output_tokens, "cached_input": spend.cached_input_tokens },
        "cost_usd": spend.cost_usd(),
        "pull_request": PullRequestReceipt::from_summary(&outcome).map(|pr| pr.url),
        "note": outcome.get("note"),
        "reason": outcome.get("reason"),
    })
}

fn print_summary(view: &TaskView, summary: &Value) {
    println!();
    println!("task    {} — {}", view.task.id, view.task.stage);
    if let Some(b) = summary["branch"].as_str() {
        println!("branch  {b}");
    }
    for c in summary["commits"].as_array().into_iter().flatten() {
        println!("commit  {}", c.as_str().unwrap_or_default());
    }
    if let Some(pr) = summary["pull_request"].as_str() {
        println!("pr      {pr}");
    }
    if let Some(r) = summary["reason"].as_str() {
        println!("reason  {r}");
    }
    println!(
        "tokens  {} in, {} out ({} cached) · {}",
        summary["tokens"]["input"],
        summary["tokens"]["output"],
        summary["tokens"]["cached_input"],
        gaffer_core::format_usd(summary["cost_usd"].as_f64().unwrap_or(0.0))
    );
    if view.task.stage == "done" && summary["pull_request"].is_string() {
        println!("\nShipped: the pull request above waits for a review.");
    } else if view.task.stage == "done" {
        if let Some(note) = summary["note"].as_str() {
            println!("note    {note}");
        }
        println!(
            "\nThe branch is ready: review it with `git log -p {}`.",
            summary["branch"].as_str().unwrap_or("")
        );
    }
}

/// Print the task's events as they are committed; ask pending approvals on a terminal.
async fn render(app: App, id: TaskId, show: bool) {
    let mut rx = app.journal().subscribe();
    let started = Instant::now();
    let interactive = std::io::stdin().is_terminal();
    let (mut tokens_in, mut tokens_out) = (0u64, 0u64);
    loop {
        let e: RecordedEvent = match rx.recv().await {
            Ok(e) => e,
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
            Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
        };
        if e.stream_id != id.0 {
            continue;
        }
        let t = started.elapsed().as_secs();
        let line = match &e.event {
            Event::TaskStageEntered { stage } => Some(format!("[{t:>4}s] ▸ {stage}")),
            Event::StepStarted { step_id } => Some(format!("[{t:>4}s]   • {step_id}")),
            Event::StepCompleted { step_id, receipt } => {
                Some(format!("[{t:>4}s]   ✓ {step_id}{}", receipt_note(receipt)))
            }
            Event::StepFailed { step_id, error } => Some(format!(
                "[{t:>4}s]   ✗ {step_id}: {}",
                output::one_line(error, 160)
            )),
            Event::CiStatusChanged { sha, state, .. } => Some(format!(
                "[{t:>4}s]       CI {state} on {}",
                &sha[..sha.len().min(10)]
            )),
            Event::StepManualRequired { step_id, reason } => Some(format!(
                "[{t:>4}s]   ! {step_id}: {}",
                output::one_line(reason, 200)
            )),
            Event::AgentActivity { activity, .. } if activity["type"] == "usage" => {
                tokens_in += activity["usage"]["input_tokens"].as_u64().unwrap_or(0);
                tokens_out += activity["usage"]["output_tokens"].as_u64().unwrap_or(0);
                Some(format!(
                    "[{t:>4}s]       tokens so far: {tokens_in} in, {tokens_out} out"
                ))
            }
            Event::AgentActivity { activity, .. } => {
                activity_line(activity).map(|l| format!("[{t:>4}s]       {l}"))
            }
            Event::ApprovalDecided {
                approval_id,
                decision,
                by,
                ..
            } => Some(format!(
                "[{t:>4}s]   approval {approval_id}: {decision:?} by {} ({})",
                by.name, by.via
            )),
            Event::ApprovalRequested {
                approval_id,
                summary,
                ..
            } => {
                let pending = app
                    .approval(approval_id.as_str())
                    .await
                    .map(|a| a.state == "pending")
                    .unwrap_or(false);
                // Questions go to stderr, so `--json` keeps stdout for the result.
                if pending {
                    eprintln!("[{t:>4}s]   ? {summary}");
                    if interactive {
                        ask(&app, approval_id.as_str()).await;
                    } else {
                        eprintln!("         decide with `gaffer approve {approval_id}` or `gaffer deny {approval_id} --note …`");
                    }
                }
                None
            }
            Event::TaskDone { .. }
            | Event::TaskFailed { .. }
            | Event::TaskCancelled { .. }
            | Event::TaskBlocked { .. } => None,
            _ => None,
        };
        if let (true, Some(line)) = (show, line) {
            println!("{line}");
        }
    }
}

async fn ask(app: &App, approval: &str) {
    eprint!("         approve? [y]es / [n]o, then an optional note: ");
    let _ = std::io::Write::flush(&mut std::io::stderr());
    let line = tokio::task::spawn_blocking(|| {
        let mut s = String::new();
        std::io::stdin().read_line(&mut s).map(|_| s)
    })
    .await;
    let Ok(Ok(line)) = line else { return };
    let line = line.trim();
    let (word, note) = line.split_once(' ').unwrap_or((line, ""));
    let decision = match word.to_ascii_lowercase().as_str() {
        "y" | "yes" => Decision::Approve,
        _ => Decision::Deny,
    };
    let note = (!note.trim().is_empty()).then(|| note.trim().to_owned());
    match app
        .decide(approval, decision, cli_actor(), note, Scope::default())
        .await
    {
        Ok(d) if !d.applied => eprintln!("         already {} by someone else", d.approval.state),
        Ok(_) => {}
        Err(e) => eprintln!("         could not record the decision: {e}"),
    }
}

fn receipt_note(receipt: &Value) -> String {
    if let Some(sha) = receipt["sha"].as_str() {
        return format!(" {}", &sha[..sha.len().min(10)]);
    }
    if let Some(v) = receipt.get("verdict") {
        return format!(" verdict: {}", v["verdict"].as_str().unwrap_or("?"));
    }
    if let Some(r) = receipt.get("ruling") {
        return format!(" ruling: {}", r["ruling"].as_str().unwrap_or("?"));
    }
    if let Some(p) = receipt["passed"].as_bool() {
        return if p {
            " check passed".into()
        } else {
            " check failed".into()
        };
    }
    if let Some(n) = receipt["plan"]["subtasks"].as_array().map(Vec::len) {
        return format!(" {n} subtask(s)");
    }
    String::new()
}

fn activity_line(a: &Value) -> Option<String> {
    match a["type"].as_str()? {
        "tool_call" => Some(format!(
            "↳ {} {}",
            a["name"].as_str().unwrap_or("tool"),
            output::one_line(&a["input"].to_string(), 100)
        )),
        "file_change" => Some(format!(
            "✎ {} ({})",
            a["path"].as_str().unwrap_or("?"),
            a["kind"].as_str().unwrap_or("edit")
        )),
        "rate_limited" => Some(format!(
            "⏸ rate limited until {}",
            a["until"].as_str().unwrap_or("?")
        )),
        "assistant_text" => Some(format!(
            "“{}”",
            output::one_line(a["text"].as_str().unwrap_or(""), 100)
        )),
        _ => None,
    }
}
