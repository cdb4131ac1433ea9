//! Approval latency: from the decision request to the waiting agent unblocked.
//!
//! For each approval a waiter (what the engine runs) sits in
//! `App::wait_for_decision`; the clock starts when the decision request is
//! sent and stops when the waiter returns. Prints p50/p99 over 1,000 approvals:
//!
//! - one process (target p99 < 50 ms): the decision over HTTP on loopback, and
//!   in-process through `App::decide`, with the waiter on the same journal;
//! - across nodes (target p99 < 100 ms): the decision over HTTP to a server on one
//!   journal connection, the waiter on another (as on another machine) that only
//!   learns of the decision through the database: `LISTEN/NOTIFY` on PostgreSQL,
//!   file-system notifications on a shared SQLite file.
//!
//! `cargo bench -p gaffer-server --bench approvals` runs the full 1,000; without
//! `--bench` (as `cargo test --benches` runs it) a quick 40.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use gaffer_app::{AddProject, App, ApprovalRequest, NewTask, Policy, Scope, Subject};
use gaffer_core::{Actor, ApprovalKind, Decision, Event, Intent, StepId, StreamId, TaskId};
use gaffer_server::{LocalSecret, Server, ServerConfig};
use gaffer_store::{Durability, Journal, NewEvent, SqliteJournal};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn pct(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// A project and tasks with `approvals` steps to ask about, recorded through `journal`.
async fn setup(
    dir: &std::path::Path,
    approvals: usize,
    journal: Arc<dyn Journal>,
) -> (App, Vec<(String, String)>) {
    let app = App::new(journal, Policy::default());
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(&repo)
        .status()
        .unwrap();
    app.add_project(
        AddProject {
            path: repo.to_string_lossy().into_owned(),
            name: Some("bench".into()),
            check: None,
        },
        Actor::user("b", "bench"),
    )
    .await
    .unwrap();
    // 100 steps per task, recorded in one append per task.
    let mut keys = Vec::new();
    for chunk in 0..approvals.div_ceil(100) {
        let t = app
            .create_task(
                NewTask {
                    project: "bench".into(),
                    request: format!("bench {chunk}"),
                    ..Default::default()
                },
                Actor::user("b", "bench"),
            )
            .await
            .unwrap();
        let n = (approvals - chunk * 100).min(100);
        let events = (0..n)
            .map(|i| {
                NewEvent::now(Event::StepIntentRecorded {
                    step_id: StepId(format!("tool/{i}")),
                    name: "tool call".into(),
                    intent: Intent::NonIdempotent,
                    depends_on: vec![],
                    input: serde_json::Value::Null,
                })
            })
            .collect();
        app.journal()
            .append(&StreamId(t.id.clone()), 1, events)
            .await
            .unwrap();
        keys.extend((0..n).map(|i| (t.id.clone(), format!("tool/{i}"))));
    }
    (app, keys)
}

/// Where a decision is made.
enum Decider<'a> {
    /// `POST /api/approvals/{id}/decision` to the server at this base URL.
    Http(&'a reqwest::Client, &'a str),
    /// `App::decide` on the waiter's own app service.
    InProcess,
}

/// Ask, wait and decide each approval in turn: `app` asks and waits (the engine's
/// side), `decider` decides.
async fn run(app: &App, keys: &[(String, String)], decider: Decider<'_>) -> Vec<Duration> {
    let mut lat = Vec::with_capacity(keys.len());
    for (i, (task, step)) in keys.iter().enumerate() {
        let a = app
            .request_approval(ApprovalRequest {
                task_id: TaskId(task.clone()),
                step_id: StepId(step.clone()),
                attempt: 1,
                kind: ApprovalKind::Tool,
                summary: format!("run tool {i}"),
                details: serde_json::Value::Null,
                subject: Subject::default(),
            })
            .await
            .unwrap();
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let waiter = {
            let app = app.clone();
            let id = a.id.clone();
            tokio::spawn(async move {
                let _ = ready_tx.send(());
                let r = app.wait_for_decision(&id).await.unwrap();
                assert!(r.approved());
                Instant::now()
            })
        };
        ready_rx.await.unwrap();
        // Let the waiter read the approval and go to sleep on the broadcast.
        tokio::time::sleep(Duration::from_millis(2)).await;
        let started = Instant::now();
        match decider {
            Decider::Http(client, base) => {
                let r = client
                    .post(format!("{base}/api/approvals/{}/decision", a.id))
                    .json(&serde_json::json!({"decision": "approve"}))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status(), 200);
            }
            Decider::InProcess => {
                app.decide(
                    &a.id,
                    Decision::Approve,
                    Actor::user("b", "bench"),
                    None,
                    Scope::default(),
                )
                .await
                .unwrap();
            }
        }
        // A waiter never woken fails the run instead of hanging it.
        let woke = tokio::time::timeout(Duration::from_secs(60), waiter)
            .await
            .unwrap_or_else(|_| panic!("approval {i}: the waiter was not woken by the decision"))
            .unwrap();
        lat.push(woke.saturating_duration_since(started));
    }
    lat.sort();
    lat
}

fn report(label: &str, lat: &[Duration], target_ms: u32) {
    println!(
        "approval latency [{label}], {} approvals: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms (target p99 < {target_ms} ms)",
        lat.len(),
        pct(lat, 0.50).as_secs_f64() * 1e3,
        pct(lat, 0.99).as_secs_f64() * 1e3,
        lat[lat.len() - 1].as_secs_f64() * 1e3,
    );
}

/// The person's credential every decision of the bench carries.
fn local() -> LocalSecret {
    static LOCAL: std::sync::OnceLock<LocalSecret> = std::sync::OnceLock::new();
    LOCAL.get_or_init(|| LocalSecret::generate("bench")).clone()
}

/// A client sending the bench's local secret.
fn client() -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        reqwest::header::AUTHORIZATION,
        format!("Bearer {}", local().expose()).parse().unwrap(),
    );
    reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .unwrap()
}

/// A server over its own app service on `journal`, on a free loopback port: its
/// base URL, and the sender that stops it.
async fn serve(journal: Arc<dyn Journal>) -> (String, tokio::sync::oneshot::Sender<()>) {
    let server = Server::bind(
        App::new(journal, Policy::default()),
        ServerConfig::new("127.0.0.1:0".parse().unwrap(), local()),
    )
    .await
    .unwrap();
    let base = format!("http://{}", server.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(server.run(async move {
        let _ = stopped.await;
    }));
    (base, stop)
}

/// The decision through a server on one connection to the journal at `url`, the
/// waiter on a second connection that follows the first only through the database.
async fn cross_node(url: &str, dir: &std::path::Path, n: usize, label: &str) {
    let node_a = gaffer_store::open(url, Durability::Full).await.unwrap();
    let node_b = gaffer_store::open(url, Durability::Full).await.unwrap();
    node_b.follow_other_processes().await.unwrap();
    let (waiter, keys) = setup(dir, n, node_b.clone()).await;
    let (base, stop) = serve(node_a.clone()).await;
    let client = client();
    let lat = run(&waiter, &keys, Decider::Http(&client, &base)).await;
    report(
        &format!("HTTP POST /decision on node A → waiter on node B, {label}"),
        &lat,
        100,
    );
    let _ = stop.send(());
    node_a.shutdown().await;
    node_b.shutdown().await;
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let n = if full { 1000 } else { 40 };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        for (durability, label) in [
            (Durability::Full, "FULL (default)"),
            (Durability::Normal, "NORMAL"),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let journal = SqliteJournal::open(&dir.path().join("gaffer.db"), durability)
                .await
                .unwrap();
            let (app, keys) = setup(dir.path(), n * 2, Arc::new(journal)).await;
            let (base, stop) = serve(app.journal().clone()).await;
            let client = client();
            let lat = run(&app, &keys[..n], Decider::Http(&client, &base)).await;
            report(
                &format!("HTTP POST /decision → waiter, synchronous={label}"),
                &lat,
                50,
            );
            let lat = run(&app, &keys[n..], Decider::InProcess).await;
            report(
                &format!("App::decide → waiter, synchronous={label}"),
                &lat,
                50,
            );
            let _ = stop.send(());
        }
        if gaffer_testkit::postgres::available() {
            let dir = tempfile::tempdir().unwrap();
            let url = gaffer_testkit::postgres::fresh_database().await;
            cross_node(&url, dir.path(), n, "PostgreSQL LISTEN/NOTIFY").await;
        }
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("gaffer.db").display().to_string();
        cross_node(
            &db,
            dir.path(),
            n,
            "one SQLite file, file-system notifications",
        )
        .await;
    });
}
