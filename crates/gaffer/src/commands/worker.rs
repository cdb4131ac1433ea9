//! `gaffer worker`: run tasks without HTTP, and `gaffer workers`: who runs what.
//!
//! Any number of `gaffer worker` and `gaffer serve` processes, on any number of
//! machines, may share one journal (PostgreSQL for many machines): each claims
//! tasks by lease, renews its leases by heartbeat, and takes over the tasks of a
//! worker that died once their leases expire (`workers.lease_secs`).

use crate::cli::{Global, WorkerArgs, WorkersArgs};
use crate::commands::approvals::open_app;
use crate::error::{CliError, Result};
use crate::output;
use gaffer_config::Config;
use gaffer_engine::{Concurrency, Engine};
use gaffer_store::{now_ms, WorkerRow};
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// This process as a worker, with the configured lease length.
pub fn me(config: &Config) -> gaffer_store::WorkerInfo {
    gaffer_engine::this_process(Duration::from_secs(config.lease_secs))
}

/// How many tasks this process runs at once: flags over the configuration.
pub fn limits(config: &Config, count: Option<usize>, per_project: Option<usize>) -> Concurrency {
    Concurrency {
        workers: count.unwrap_or(config.workers).max(1),
        per_project: per_project.unwrap_or(config.workers_per_project).max(1),
    }
}

/// Run `engine`'s workers as `me` until `stop`, in the background.
pub fn spawn_workers(
    engine: Engine,
    me: gaffer_store::WorkerInfo,
    limits: Concurrency,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        Engine::warm_up().await;
        if let Err(e) = engine.work(&me, limits, stop).await {
            tracing::error!(error = %e, "workers stopped");
        }
    })
}

/// The scheduler of `[[schedules]]` and of the schedules added at run time
/// (`gaffer schedules add`), in the background until `stop`, where workers run. A
/// config schedule naming an unregistered project is refused first (exit 78 naming
/// `schedules.<name>.project`).
pub async fn start_scheduler(
    config: &Config,
    app: &gaffer_app::App,
    stop: &CancellationToken,
) -> Result<tokio::task::JoinHandle<()>> {
    gaffer_engine::schedules::check_projects(app, &config.schedules)
        .await
        .map_err(CliError::config)?;
    let scheduler = gaffer_engine::Scheduler::new(
        app.clone(),
        config.schedules.clone(),
        std::sync::Arc::new(gaffer_engine::SystemClock),
    );
    let stop = stop.clone();
    Ok(tokio::spawn(async move {
        if let Err(e) = scheduler.run(stop).await {
            tracing::error!(error = %e, "the scheduler stopped");
        }
    }))
}

/// Ctrl-C or SIGTERM (a service manager stopping us).
pub async fn stop_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

pub async fn worker(global: &Global, args: &WorkerArgs) -> Result<ExitCode> {
    if args.count == Some(0) || args.per_project == Some(0) {
        return Err(CliError::config(
            "--count and --per-project must be at least 1".to_owned(),
        ));
    }
    let (config, _, app) = open_app(global).await?;
    crate::commands::run::check_sandbox(global, &config)?;
    let engine = crate::commands::run::engine(global, &config, &app).await?;
    let me = me(&config);
    let limits = limits(&config, args.count, args.per_project);
    // This process serves nothing else: it need not read every other worker's events.
    app.journal().follow_only(engine.events_work_needs());
    crate::setup::follow_others(app.journal().as_ref()).await?;
    let stop = CancellationToken::new();
    let scheduler = start_scheduler(&config, &app, &stop).await?;
    Engine::warm_up().await;
    outln!(
        "gaffer worker {} is running up to {} task{} on {} (leases of {}s; Ctrl-C stops it)",
        me.id,
        limits.workers,
        if limits.workers == 1 { "" } else { "s" },
        app.journal().location(),
        config.lease_secs
    );
    let notifier = crate::commands::notifications::start_beside(global, &config, &app, &stop)?;
    // Best effort, as `serve`'s lines after its address: a reader that closed the
    // pipe after the first line (a supervisor, a test) must not stop the worker.
    if !config.schedules.is_empty() {
        let _ = writeln!(std::io::stdout(), "Schedules: {}", schedule_names(&config));
    }
    let work = engine.work(&me, limits, stop.clone());
    tokio::pin!(work);
    let result = tokio::select! {
        // The loop ends by itself only when the journal fails.
        r = &mut work => r,
        () = stop_signal() => {
            stop.cancel();
            work.await
        }
    };
    stop.cancel();
    if let Some(n) = notifier {
        n.stop().await;
    }
    let _ = scheduler.await;
    result.map_err(|e| CliError::failed(format!("worker {} stopped: {e}", me.id)))?;
    Ok(ExitCode::SUCCESS)
}

/// `nightly (0 3 * * * UTC), …`: the schedules this process runs.
pub fn schedule_names(config: &Config) -> String {
    config
        .schedules
        .iter()
        .map(|s| format!("{} ({} {})", s.name, s.cron, s.tz))
        .collect::<Vec<_>>()
        .join(", ")
}

pub async fn workers(global: &Global, args: &WorkersArgs) -> Result<ExitCode> {
    let (_, _, app) = open_app(global).await?;
    let all = app.journal().workers().await?;
    let shown: Vec<&WorkerRow> = all.iter().filter(|w| args.all || w.alive).collect();
    if args.json {
        output::json(&shown)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut out = crate::term::stdout();
    if shown.is_empty() {
        writeln!(
            out,
            "no live workers; start one with `gaffer worker` or `gaffer serve`{}",
            if args.all {
                ""
            } else {
                " (--all shows stopped ones)"
            }
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    let now = now_ms();
    for w in shown {
        let state = match (w.alive, w.stopped_at) {
            (true, _) => "live",
            (false, Some(_)) => "stopped",
            (false, None) => "lost",
        };
        writeln!(
            out,
            "{}  {state}  heartbeat {}  tasks run {}  failures {}",
            w.id,
            output::age(w.heartbeat_at, now),
            w.tasks_run,
            w.failures
        )?;
        for l in &w.leases {
            writeln!(
                out,
                "    {}  generation {}  expires in {}s",
                l.task_id,
                l.generation,
                ((l.expires_at - now).max(0) + 999) / 1000
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
