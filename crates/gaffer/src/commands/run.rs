//! `gaffer run`, `gaffer task cancel|retry|resume`: one task in the foreground,
//! with live progress and approvals asked on the terminal.

use crate::cli::{Global, RunArgs, TaskIdArgs};
use crate::commands::after;
use crate::commands::approvals::{app_error, open_app};
use crate::commands::project::repo_root;
use crate::error::{CliError, Result, EXIT_FAILED, EXIT_INTERRUPTED};
use crate::live::{Follow, Options};
use crate::output::{self, one_line};
use crate::setup::cli_actor;
use crate::term;
use gaffer_agents::ratelimit::RateLimits;
use gaffer_app::{AddProject, App, NewTask};
use gaffer_config::Config;
use gaffer_core::{Stage, TaskId};
use gaffer_engine::{Backends, Credential, Engine, JournalCounters, Settings, Shipping, Tracker};
use gaffer_forge::{CiWait, ForgeKind};
use gaffer_protocol::receipts::PullRequestReceipt;
use gaffer_store::TaskView;
use serde_json::{json, Value};
use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The engine as configured: roles, data dir, redaction of every secret in the
/// environment, the project index cached in the journal's database.
pub async fn engine(global: &Global, config: &Config, app: &App) -> Result<Engine> {
    // What agents of gaffer processes killed with `kill -9` left behind.
    let removed = gaffer_agents::sandbox::remove_dead_temp_dirs();
    if removed > 0 {
        tracing::info!("removed {removed} private temp dirs of gaffer processes that are gone");
    }
    let mut settings = Settings::new(config.data_dir.clone());
    settings.roles = config.roles.clone();
    settings.project_roles = config.project_roles.clone();
    settings.limits.review_rounds = config.review_rounds;
    settings.check_timeout = std::time::Duration::from_secs(config.check_timeout_secs);
    let mut tokens = crate::setup::configured_token_values(config);
    tokens.extend(shipping(config, &mut settings)?);
    tokens.extend(crate::commands::intake::intake(config, &mut settings)?);
    settings.sandbox = agent_sandbox(global, config);
    settings.worktree_setup = config.worktree_setup.clone();
    settings.watchdog = config.watchdog;
    settings.project_watchdog = config.project_watchdog.clone();
    settings.budget = config.budget;
    settings.project_budget = config.project_budget.clone();
    settings.privacy = gaffer_engine::privacy::PrivacySettings::from_config(config);
    settings.fallback = config.fallback;
    settings.agent_env = from_environment(&config.agent_env);
    settings.check_env = config
        .check_env
        .iter()
        .map(|(project, names)| (project.clone(), from_environment(names)))
        .collect();
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
    let engine = Engine::new(
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
                .with_acp_agents(config.acp_agents.clone())
                .with_prices(gaffer_engine::prices_from_config(config)),
        ),
        settings,
    );
    // Every task this process stores, from any entry (the API, Discord, this command),
    // is refused first when the project's privacy forbids an agent it may start.
    app.admit_tasks_with(Arc::new(engine.admission()));
    Ok(engine)
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
                conflict_strategy: conflict_strategy(f.conflict_strategy),
                review_fix_attempts: f.review_fix_attempts,
                follow: f.follow.then(|| gaffer_engine::Following {
                    every: std::time::Duration::from_secs(f.follow_interval_secs),
                    bot_user: f.bot_user.clone(),
                }),
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

/// Before anything is stored or any agent runs: when `token_env` says where the
/// project's forge token is, it must be there, or the task would do all its work and
/// stop at the push. Without `token_env` the git credential helper is asked when the
/// token is needed.
fn check_forge_token(config: &Config, project: &str) -> Result<()> {
    let Some(forge) = config.forges.get(project) else {
        return Ok(());
    };
    let Some(var) = &forge.token_env else {
        return Ok(());
    };
    if gaffer_forge::Secret::from_env(var).is_some() {
        return Ok(());
    }
    Err(CliError::config(format!(
        "projects.{project}.forge.token_env: {var} is not set or empty; put the {} API token for {} in it ({}), or remove token_env to use your git credential helper",
        forge.kind,
        forge.base_url,
        crate::commands::doctor::token_scopes(&forge.kind)
    )))
}

/// The request and the issue's URL from `gaffer run --issue`, read through the
/// project's forge before anything is stored.
/// The forge's conflict strategy for the config's: the config parsed the setting
/// (its one parser), and this match stays exhaustive, so no spelling the config
/// accepts can become another strategy here.
fn conflict_strategy(s: gaffer_config::ConflictStrategy) -> gaffer_forge::ConflictStrategy {
    match s {
        gaffer_config::ConflictStrategy::Rebase => gaffer_forge::ConflictStrategy::Rebase,
        gaffer_config::ConflictStrategy::Merge => gaffer_forge::ConflictStrategy::Merge,
    }
}

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

/// The sandbox of agents and checks as configured, with gaffer's policy file among
/// what no agent may read.
pub fn agent_sandbox(global: &Global, config: &Config) -> gaffer_agents::sandbox::Sandbox {
    gaffer_engine::sandbox_from_config(config, &[crate::commands::approvals::policy_file(global)])
}

/// The values of the variables `names` in gaffer's environment (unset ones skipped).
fn from_environment(names: &[String]) -> std::collections::BTreeMap<String, String> {
    names
        .iter()
        .filter_map(|n| std::env::var(n).ok().map(|v| (n.clone(), v)))
        .collect()
}

/// Before any agent runs: a sandbox rule this machine cannot apply refuses to start
/// under `mode = "required"` (exit 78, naming the rule) and is a warning under `auto`.
pub fn check_sandbox(global: &Global, config: &Config) -> Result<()> {
    use gaffer_agents::sandbox::{preflight, support, SandboxMode};
    let sandbox = agent_sandbox(global, config);
    let problems = preflight(&sandbox, support());
    match sandbox.mode {
        SandboxMode::Required if !problems.is_empty() => {
            let list: Vec<String> = problems.iter().map(ToString::to_string).collect();
            Err(CliError::config(format!(
                "[sandbox] mode = \"required\" but a rule cannot be applied: {}",
                list.join("; ")
            )))
        }
        SandboxMode::Auto => {
            for p in &problems {
                term::note(format_args!("gaffer: warning: sandbox: {p}"));
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

pub async fn run(global: &Global, args: &RunArgs) -> Result<ExitCode> {
    let given = args.request.clone().unwrap_or_default();
    if args.issue.is_none() && given.trim().is_empty() {
        return Err(CliError::usage(
            "the request is empty; say what to do, e.g. gaffer run \"add an installation section to README\"",
        ));
    }
    let (config, _, app) = open_app(global).await?;
    // Everything that can be refused is checked before anything is stored.
    check_sandbox(global, &config)?;
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
    let name = match &known {
        Some(p) => p.name.clone(),
        None => root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
    };
    // Made before anything is stored: from here on every event is redacted with
    // every secret the engine knows (the credential helper's tokens too).
    let engine = engine(global, &config, &app).await?;
    // A role the project's privacy forbids (a cloud model for a local-only project)
    // and a missing agent CLI or API key are found now, before anything is stored.
    engine
        .check_privacy(&name, args.agent.as_deref())
        .map_err(CliError::config)?;
    engine
        .check_roles(&name, args.agent.as_deref())
        .map_err(|e| match &args.agent {
            Some(agent) => CliError::config(format!("--agent {agent}: {e}")),
            None => CliError::config(format!(
                "{e}; or pick an agent that is installed with --agent (`gaffer doctor` lists them)"
            )),
        })?;
    check_forge_token(&config, &name)?;
    let after = after::checked(&app, known.as_ref(), &args.after).await?;
    let (request, issue) = match &args.issue {
        None => (given, None),
        Some(reference) => {
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
            term::note(format_args!(
                "registered project {} at {} (check: {})",
                one_line(&p.name, 60),
                one_line(&p.path, 200),
                one_line(p.check_command.as_deref().unwrap_or("none"), 100)
            ));
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
                key: None,
                after,
            },
            cli_actor(),
        )
        .await
        .map_err(|e| match e {
            gaffer_app::AppError::Invalid { ref field, .. } if field == "after" => {
                CliError::usage(format!("--after: {e}"))
            }
            gaffer_app::AppError::Invalid { .. } => CliError::config(e.to_string()),
            other => app_error(other),
        })?;
    if !global.quiet {
        term::note(format_args!(
            "task {} in {}: {}",
            task.id,
            one_line(&project.name, 60),
            one_line(&engine.redactor().redact(&task.request), 80)
        ));
    }
    let shown = Options::for_terminal(args.json, global.quiet);
    drive(global, &app, &engine, &config, &TaskId(task.id), 0, shown).await
}

pub async fn resume(global: &Global, args: &TaskIdArgs) -> Result<ExitCode> {
    let (config, _, app) = open_app(global).await?;
    check_sandbox(global, &config)?;
    let id = TaskId(crate::ids::task(app.journal().as_ref(), &args.id).await?);
    let view = app.journal().task(id.as_str()).await?.ok_or_else(|| {
        CliError::failed(format!(
            "task `{id}` does not exist; `gaffer task list` shows the tasks"
        ))
    })?;
    let engine = engine(global, &config, &app).await?;
    // Already over (it finished just before the crash): show how it ended.
    let stage = serde_json::from_value::<Stage>(Value::String(view.task.stage.clone()));
    if stage.is_ok_and(Stage::is_final) {
        term::note(format_args!(
            "task {id} has already ended; `gaffer task retry {id}` queues it again"
        ));
    } else if !global.quiet {
        term::note(format_args!(
            "resuming task {id} at {}: {}",
            view.task.stage,
            one_line(&engine.redactor().redact(&view.task.request), 80)
        ));
    }
    let project = app
        .journal()
        .projects()
        .await?
        .into_iter()
        .find(|p| p.id == view.task.project_id)
        .map(|p| p.name)
        .unwrap_or_default();
    let agent = serde_json::from_str::<Value>(&view.task.options)
        .ok()
        .and_then(|o| o["agent"].as_str().map(str::to_owned));
    engine
        .check_privacy(&project, agent.as_deref())
        .map_err(CliError::config)?;
    engine
        .check_roles(&project, agent.as_deref())
        .map_err(CliError::config)?;
    check_forge_token(&config, &project)?;
    // Taking the lease marks what a crashed run left running as interrupted.
    let shown = Options::for_terminal(args.json, global.quiet);
    drive(global, &app, &engine, &config, &id, view.head_seq, shown).await
}

pub async fn cancel(global: &Global, args: &TaskIdArgs) -> Result<ExitCode> {
    let (_, _, app) = open_app(global).await?;
    let id = crate::ids::task(app.journal().as_ref(), &args.id).await?;
    let detail = app
        .cancel_task(
            &id,
            cli_actor(),
            Some("cancelled from the command line".into()),
        )
        .await
        .map_err(app_error)?;
    if args.json {
        output::json(&detail.task)?;
    } else {
        writeln!(
            term::stdout(),
            "task {} is {}",
            detail.task.id,
            detail.task.stage
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn retry(global: &Global, args: &TaskIdArgs) -> Result<ExitCode> {
    let (_, _, app) = open_app(global).await?;
    let id = crate::ids::task(app.journal().as_ref(), &args.id).await?;
    let task = app.retry_task(&id, cli_actor()).await.map_err(app_error)?;
    if args.json {
        output::json(&task)?;
    } else {
        writeln!(
            term::stdout(),
            "queued again as task {}; `gaffer task resume {}` runs it here, or a running `gaffer serve` picks it up",
            task.id,
            task.id
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Run the task here until it ends, showing it live from after its event
/// `after_seq`. Ctrl-C cancels it cleanly (exit 130); a second Ctrl-C quits at once.
async fn drive(
    global: &Global,
    app: &App,
    engine: &Engine,
    config: &Config,
    id: &TaskId,
    after_seq: i64,
    shown: Options,
) -> Result<ExitCode> {
    // Decisions and cancellations made elsewhere reach the run.
    crate::setup::follow_others(app.journal().as_ref()).await?;
    let cancel = CancellationToken::new();
    // A person who walks away hears about the approvals (and the end) on their phone.
    let notifier = crate::commands::notifications::start_beside(
        global,
        config,
        app,
        &CancellationToken::new(),
    )?;
    let interrupted = Arc::new(AtomicBool::new(false));
    let ctrl_c = tokio::spawn(stop_on_ctrl_c(cancel.clone(), interrupted.clone()));
    let redactor = engine.redactor().clone();
    let view = Follow::start(
        app.clone(),
        id.clone(),
        after_seq,
        shown,
        cancel.clone(),
        redactor.clone(),
    );
    // A task that runs after others waits here (settling it as they end) until
    // the last is done, or one ends otherwise and blocks it.
    if after::wait_to_start(app, engine, id, &cancel)
        .await?
        .is_none()
    {
        view.finish().await;
        ctrl_c.abort();
        return Ok(ExitCode::from(EXIT_INTERRUPTED));
    }
    // This process is a worker for this one task: it holds the task's lease while
    // it runs, so no other worker runs it at the same time.
    let mut outcome = engine
        .run_one(id, &crate::commands::worker::me(config), cancel.clone())
        .await;
    if let Ok(None) = outcome {
        // Another worker on this journal (a `gaffer serve` or `gaffer worker`) took
        // the task first: it runs there, and this shows it to its end.
        let holder = app.journal().lease(id.as_str()).await?.map_or_else(
            || "another worker".to_owned(),
            |l| format!("worker {}", l.worker_id),
        );
        term::note(format_args!(
            "task {id} is run by {holder}; following it here (Ctrl-C stops following, the task runs on there)"
        ));
        outcome = Ok(ended(app, id, &cancel).await?);
    }
    view.finish().await;
    let stage = match outcome {
        Ok(Some(stage)) => stage,
        Ok(None) => {
            ctrl_c.abort();
            if let Some(n) = notifier {
                n.stop().await;
            }
            return Ok(ExitCode::from(EXIT_INTERRUPTED));
        }
        Err(e) => {
            ctrl_c.abort();
            if let Some(n) = notifier {
                n.stop().await;
            }
            return Err(CliError::failed(e.to_string()));
        }
    };
    let view = app
        .journal()
        .task(id.as_str())
        .await?
        .ok_or_else(|| CliError::failed(format!("task `{id}` vanished")))?;
    let mut summary = summary(&view);
    redactor.redact_json(&mut summary);
    // The task is over; a closed stdout (`| head -1`) changes nothing about how.
    let _ = if shown.json {
        writeln!(std::io::stdout().lock(), "{summary}")
    } else {
        print_summary(&view, &summary)
    };
    // After the summary: the task's end is sent before the process goes.
    if let Some(n) = notifier {
        n.finish().await;
    }
    ctrl_c.abort();
    Ok(if interrupted.load(Ordering::SeqCst) {
        ExitCode::from(EXIT_INTERRUPTED)
    } else if stage == Stage::Done {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAILED)
    })
}

/// Wait for the task to end, wherever it runs: its final stage, or `None` when
/// `cancel` (Ctrl-C) came first.
async fn ended(app: &App, id: &TaskId, cancel: &CancellationToken) -> Result<Option<Stage>> {
    let mut events = app.journal().subscribe();
    loop {
        let view = app
            .journal()
            .task(id.as_str())
            .await?
            .ok_or_else(|| CliError::failed(format!("task `{id}` vanished")))?;
        let over = serde_json::from_value::<Stage>(Value::String(view.task.stage))
            .ok()
            .filter(|s| s.is_final());
        if over.is_some() {
            return Ok(over);
        }
        tokio::select! {
            () = cancel.cancelled() => return Ok(None),
            _ = events.recv() => {}
            // Events of other processes are followed; this only bounds a missed one.
            () = tokio::time::sleep(std::time::Duration::from_secs(2)) => {}
        }
    }
}

/// The first Ctrl-C stops the run cleanly (the task is cancelled, its worktree
/// kept, nothing decided); a second one quits at once.
async fn stop_on_ctrl_c(cancel: CancellationToken, interrupted: Arc<AtomicBool>) {
    if tokio::signal::ctrl_c().await.is_err() {
        return;
    }
    interrupted.store(true, Ordering::SeqCst);
    term::note("\ngaffer: stopping the agents and cancelling the task; the worktree is kept (Ctrl-C again quits at once)");
    cancel.cancel();
    if tokio::signal::ctrl_c().await.is_ok() {
        term::note("gaffer: quit; `gaffer task show` tells where the task stands");
        std::process::exit(i32::from(EXIT_INTERRUPTED));
    }
}

/// `{"type":"summary","task_id","state","branch","commits":[…],"tokens","cost_usd",…}`
/// from the journal.
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
        "type": "summary",
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

/// The forge the task shipped to, as its `ship` step recorded it.
fn shipped_to(view: &TaskView) -> Option<ForgeKind> {
    let ship = view.steps.iter().find(|s| s.step_id == "ship")?;
    let receipt: Value = serde_json::from_str(ship.receipt.as_deref()?).ok()?;
    receipt.pointer("/forge/kind")?.as_str()?.parse().ok()
}

/// The summary for a person, on stdout.
fn print_summary(view: &TaskView, summary: &Value) -> std::io::Result<()> {
    let mut out = term::stdout();
    writeln!(out)?;
    writeln!(out, "task    {} — {}", view.task.id, view.task.stage)?;
    if let Some(b) = summary["branch"].as_str() {
        writeln!(out, "branch  {b}")?;
    }
    for c in summary["commits"].as_array().into_iter().flatten() {
        writeln!(out, "commit  {}", c.as_str().unwrap_or_default())?;
    }
    let change = shipped_to(view).map_or("pull request", ForgeKind::change_request);
    if let Some(pr) = summary["pull_request"].as_str() {
        let label = if change == "merge request" {
            "mr"
        } else {
            "pr"
        };
        writeln!(out, "{label:<8}{pr}")?;
    }
    if let Some(r) = summary["reason"].as_str() {
        // Reasons run over several lines (a check's output): shown as such.
        let mut lines = r.trim_end().lines();
        writeln!(out, "reason  {}", lines.next().unwrap_or_default())?;
        for line in lines {
            writeln!(out, "        {line}")?;
        }
    }
    writeln!(
        out,
        "tokens  {} in, {} out ({} cached) · {}",
        summary["tokens"]["input"],
        summary["tokens"]["output"],
        summary["tokens"]["cached_input"],
        gaffer_core::format_cost(summary["cost_usd"].as_f64())
    )?;
    if view.task.stage == "done" && summary["pull_request"].is_string() {
        writeln!(out, "\nShipped: the {change} above waits for a review.")?;
    } else if view.task.stage == "done" {
        if let Some(note) = summary["note"].as_str() {
            writeln!(out, "note    {note}")?;
        }
        writeln!(
            out,
            "\nThe branch is ready: review it with `git log -p {}`.",
            summary["branch"].as_str().unwrap_or("")
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use gaffer_forge::ConflictStrategy::{Merge, Rebase};

    /// The strategy each project ships with, from config `text` and environment `env`.
    fn shipped(text: &str, env: &[(&str, &str)]) -> Vec<(String, gaffer_forge::ConflictStrategy)> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, text).unwrap();
        let env: std::collections::HashMap<String, String> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let lookup = move |k: &str| env.get(k).cloned();
        let config = gaffer_config::load(&gaffer_config::Sources {
            file: Some((path, true)),
            data_dir_flag: None,
            database_flag: None,
            default_data_dir: dir.path().join("data"),
            env: &lookup,
        })
        .unwrap();
        let mut settings = Settings::new(dir.path().join("data"));
        shipping(&config, &mut settings).unwrap();
        settings
            .shipping
            .iter()
            .map(|(name, s)| (name.clone(), s.conflict_strategy))
            .collect()
    }

    fn forge(name: &str, strategy: Option<&str>) -> String {
        let line = strategy.map_or_else(String::new, |s| format!("conflict_strategy = \"{s}\"\n"));
        format!("[projects.{name}.forge]\nkind = \"gitea\"\nbase_url = \"https://git.example.com\"\ntoken_env = \"GITEA_TOKEN\"\n{line}\n")
    }

    #[test]
    fn every_conflict_strategy_spelling_the_config_accepts_ships_as_that_strategy() {
        let spellings = [
            ("a", None, Rebase),
            ("b", Some("rebase"), Rebase),
            ("c", Some("Rebase"), Rebase),
            ("d", Some(" REBASE "), Rebase),
            ("e", Some("merge"), Merge),
            ("f", Some("Merge"), Merge),
            ("g", Some(" MERGE "), Merge),
        ];
        let text: String = spellings.iter().map(|(n, s, _)| forge(n, *s)).collect();
        let want: Vec<_> = spellings
            .iter()
            .map(|(n, _, strategy)| ((*n).to_owned(), *strategy))
            .collect();
        assert_eq!(shipped(&text, &[]), want);
        // The environment's spelling goes through the same parser.
        let over = shipped(
            &forge("a", Some("rebase")),
            &[("GAFFER_PROJECT_A_FORGE_CONFLICT_STRATEGY", "Merge")],
        );
        assert_eq!(over, vec![("a".to_owned(), Merge)]);
    }
}
