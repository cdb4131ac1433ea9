//! `gaffer serve`: workers, the HTTP API, SSE and the web page on one port.
//!
//! Workers: at start every unfinished task is recovered (its interrupted steps
//! marked) and queued; afterwards each `task_created` event queues the new task.
//! At most `workers.count` tasks run at once; a task waiting for an approval
//! holds its worker until the decision wakes it. Stopping the server does not
//! cancel running tasks: the next start recovers and resumes them.

use crate::cli::Global;
use crate::commands::approvals::open_app;
use crate::error::{CliError, Result};
use gaffer_app::App;
use gaffer_core::{Event, TaskId};
use gaffer_engine::Engine;
use gaffer_server::{Server, ServerConfig, ServerError};
use std::collections::{HashSet, VecDeque};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{mpsc, Semaphore};
use tokio_util::sync::CancellationToken;

pub async fn run(global: &Global, listen: Option<String>) -> Result<ExitCode> {
    let (config, policy, app) = open_app(global).await?;
    let addr: SocketAddr = match listen {
        Some(l) => l.parse().map_err(|e| {
            CliError::config(format!(
                "--listen {l}: {e}; give an address like 127.0.0.1:7777"
            ))
        })?,
        None => config.listen,
    };
    let env = |name: &str| std::env::var(name).ok();
    let server_config = ServerConfig::new(addr)
        .with_policy_tokens(&policy, &env)
        .map_err(|e| CliError::config(e.to_string()))?;
    let server = Server::bind(app.clone(), server_config)
        .await
        .map_err(|e| match e {
            ServerError::Config(m) => CliError::config(m),
            ServerError::Bind { .. } => {
                CliError::config(format!("{e}; is another gaffer serving there?"))
            }
        })?;
    let bound = server.local_addr()?;
    let engine = Arc::new(crate::commands::run::engine(&config, &app));
    let stop = CancellationToken::new();
    let pool = tokio::spawn(workers(engine, app, config.workers.max(1), stop.clone()));
    println!(
        "gaffer is serving on http://{bound}/  (API: http://{bound}/api/openapi.json, {} worker{})",
        config.workers.max(1),
        if config.workers.max(1) == 1 { "" } else { "s" }
    );
    let result = server
        .run(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await;
    // Stop taking tasks; running ones end with the process and resume on the next start.
    stop.cancel();
    let _ = pool.await;
    result?;
    Ok(ExitCode::SUCCESS)
}

/// Run queued tasks, `count` at a time, until `stop`.
async fn workers(engine: Arc<Engine>, app: App, count: usize, stop: CancellationToken) {
    // Subscribe before recovering, so a task created meanwhile is not missed.
    let mut events = app.journal().subscribe();
    let mut queue: VecDeque<TaskId> = match engine.recover().await {
        Ok(unfinished) => unfinished.into_iter().rev().collect(),
        Err(e) => {
            tracing::error!(error = %e, "recovery failed; no task will run");
            return;
        }
    };
    let mut known: HashSet<String> = queue.iter().map(|t| t.0.clone()).collect();
    let permits = Arc::new(Semaphore::new(count));
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<()>();
    loop {
        while !queue.is_empty() {
            let Ok(permit) = permits.clone().try_acquire_owned() else {
                break;
            };
            let Some(id) = queue.pop_front() else { break };
            let engine = engine.clone();
            // Not tied to `stop`: shutting the server down must not cancel a task;
            // the next start recovers and resumes it from the journal.
            let cancel = CancellationToken::new();
            let done = done_tx.clone();
            tokio::spawn(async move {
                match engine.run_task(&id, cancel).await {
                    Ok(stage) => tracing::info!(task = %id, %stage, "task finished"),
                    Err(e) => tracing::error!(task = %id, error = %e, "task stopped"),
                }
                drop(permit);
                let _ = done.send(());
            });
        }
        tokio::select! {
            got = events.recv() => match got {
                Ok(e) => {
                    if let Event::TaskCreated { task_id, .. } = &e.event {
                        if known.insert(task_id.0.clone()) {
                            queue.push_back(task_id.clone());
                        }
                    }
                }
                Err(RecvError::Lagged(_)) => {
                    // Missed events: whatever is still queued in the journal is picked up.
                    if let Ok(tasks) = app
                        .tasks(&gaffer_app::TaskQuery {
                            stage: Some("queued".into()),
                            limit: Some(500),
                            ..Default::default()
                        })
                        .await
                    {
                        for t in tasks.into_iter().rev() {
                            if known.insert(t.id.clone()) {
                                queue.push_back(TaskId(t.id));
                            }
                        }
                    }
                }
                Err(RecvError::Closed) => break,
            },
            _ = done_rx.recv() => {}
            () = stop.cancelled() => break,
        }
    }
}
