//! `cargo bench -p gaffer-store`: journal append throughput against raw SQLite
//! inserts of the same bytes (same file, same transaction and sync mode,
//! interleaved in one run), and replay (rebuild) speed over 100,000 events.
//!
//! Target: append throughput ≥ 0.5× raw inserts.
//!
//! With `GAFFER_BENCH_POSTGRES_URL` (or `GAFFER_TEST_POSTGRES_URL`) naming a role that
//! may create databases, the same figures are printed for PostgreSQL, in a database
//! created for the run (and dropped after).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gaffer_core::{Actor, Event, Intent, StreamId};
use gaffer_store::{
    event_hash, Durability, Journal, NewEvent, PgJournal, SqliteJournal, GENESIS_HASH,
};
use serde_json::json;
use sqlx::Connection;
use std::time::{Duration, Instant};

/// A valid event sequence for task `i`: created, then intent/start/complete per step.
fn task_events(i: usize, n: usize) -> Vec<Event> {
    let id = format!("t-{i}");
    let mut out = vec![Event::TaskCreated {
        task_id: id.as_str().into(),
        project_id: "p".into(),
        request: format!("task {i}: add an installation section to the README"),
        by: Actor::user("bench", "cli"),
        options: Default::default(),
    }];
    let mut k = 0;
    while out.len() < n {
        let s = format!("s{k}");
        out.push(Event::StepIntentRecorded {
            step_id: s.as_str().into(),
            name: "owner turn".into(),
            intent: Intent::NonIdempotent,
            depends_on: vec![],
            input: json!({"prompt": "edit README.md", "k": k}),
        });
        out.push(Event::StepStarted {
            step_id: s.as_str().into(),
        });
        out.push(Event::StepCompleted {
            step_id: s.as_str().into(),
            receipt: json!({"commit": format!("{k:040x}"), "files": ["README.md"]}),
        });
        k += 1;
    }
    out.truncate(n);
    out
}

/// A table like `events`, in each dialect.
const RAW_COLUMNS: &str = "stream_id TEXT NOT NULL, seq BIGINT NOT NULL, at BIGINT NOT NULL,
    type TEXT NOT NULL, payload TEXT NOT NULL, prev_hash TEXT NOT NULL, hash TEXT NOT NULL,
    UNIQUE (stream_id, seq)";

/// Raw inserts of the same bytes into a table like `events`, one per transaction.
enum Raw {
    Sqlite(sqlx::SqlitePool),
    Postgres(sqlx::PgPool),
}

impl Raw {
    async fn create(&self) {
        match self {
            Raw::Sqlite(p) => {
                let sql = format!("CREATE TABLE raw_events (pos INTEGER PRIMARY KEY AUTOINCREMENT, {RAW_COLUMNS})");
                sqlx::query(&sql).execute(p).await.unwrap();
            }
            Raw::Postgres(p) => {
                let sql = format!("CREATE TABLE raw_events (pos BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, {RAW_COLUMNS})");
                sqlx::query(&sql).execute(p).await.unwrap();
            }
        }
    }

    async fn insert(&self, row: (&str, i64, &str, &str, &str, &str)) {
        let sql = "INSERT INTO raw_events (stream_id, seq, at, type, payload, prev_hash, hash)
                   VALUES ($1, $2, 1, $3, $4, $5, $6)";
        let (stream, seq, kind, payload, prev, hash) = row;
        macro_rules! run {
            ($tx:expr) => {{
                let mut tx = $tx;
                sqlx::query(sql)
                    .bind(stream)
                    .bind(seq)
                    .bind(kind)
                    .bind(payload)
                    .bind(prev)
                    .bind(hash)
                    .execute(&mut *tx)
                    .await
                    .unwrap();
                tx.commit().await.unwrap();
            }};
        }
        match self {
            Raw::Sqlite(p) => run!(p.begin_with("BEGIN IMMEDIATE").await.unwrap()),
            Raw::Postgres(p) => run!(p.begin().await.unwrap()),
        }
    }
}

/// A journal with project `p` registered, and a raw table next to its events.
async fn with_project(j: Box<dyn Journal>, raw: Raw) -> (Box<dyn Journal>, Raw) {
    j.append(
        &"p".into(),
        0,
        vec![NewEvent::now(Event::ProjectRegistered {
            project_id: "p".into(),
            name: "bench".into(),
            path: "/bench".into(),
            check_command: None,
        })],
    )
    .await
    .unwrap();
    raw.create().await;
    (j, raw)
}

/// Where a run's journal lives.
enum Place {
    Sqlite(tempfile::TempDir),
    /// The server URL (without a database) and the database made for this run.
    Postgres(String, String),
}

impl Place {
    async fn new(pg: Option<&str>) -> Place {
        match pg {
            None => Place::Sqlite(tempfile::tempdir().unwrap()),
            Some(server) => {
                let name = format!(
                    "gaffer_bench_{}_{:08x}",
                    std::process::id(),
                    rand::random::<u32>()
                );
                let mut conn = sqlx::PgConnection::connect(&format!("{server}/postgres"))
                    .await
                    .unwrap();
                sqlx::query(&format!("CREATE DATABASE {name}"))
                    .execute(&mut conn)
                    .await
                    .unwrap();
                conn.close().await.unwrap();
                Place::Postgres(server.to_owned(), name)
            }
        }
    }

    async fn open(&self, durability: Durability) -> (Box<dyn Journal>, Raw) {
        match self {
            Place::Sqlite(dir) => {
                let j = SqliteJournal::open(&dir.path().join("journal.db"), durability)
                    .await
                    .unwrap();
                let raw = Raw::Sqlite(j.pool().clone());
                with_project(Box::new(j), raw).await
            }
            Place::Postgres(server, name) => {
                let j = PgJournal::open(&format!("{server}/{name}"), durability)
                    .await
                    .unwrap();
                let raw = Raw::Postgres(j.pool().clone());
                with_project(Box::new(j), raw).await
            }
        }
    }

    async fn drop_database(self) {
        if let Place::Postgres(server, name) = self {
            let mut conn = sqlx::PgConnection::connect(&format!("{server}/postgres"))
                .await
                .unwrap();
            sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                .execute(&mut conn)
                .await
                .ok();
            conn.close().await.ok();
        }
    }
}

/// Appends `per_task` events to each of `tasks` tasks, one event per transaction,
/// alternating journal appends and raw inserts of the same bytes in rounds.
async fn append_vs_raw(
    pg: Option<&str>,
    durability: Durability,
    tasks: usize,
    per_task: usize,
) -> (f64, f64) {
    let place = Place::new(pg).await;
    let (j, raw) = place.open(durability).await;
    let streams: Vec<Vec<Event>> = (0..tasks).map(|i| task_events(i, per_task)).collect();
    let (mut journal_time, mut raw_time) = (Duration::ZERO, Duration::ZERO);
    let mut count = 0usize;
    let mut raw_prev: Vec<String> = vec![GENESIS_HASH.to_owned(); tasks];
    for k in 0..per_task {
        // One round: event k of every task, through the journal, then raw.
        let start = Instant::now();
        for (i, events) in streams.iter().enumerate() {
            let stream = StreamId::from(format!("t-{i}"));
            j.append(
                &stream,
                k as i64,
                vec![NewEvent {
                    at: 1,
                    event: events[k].clone(),
                }],
            )
            .await
            .unwrap();
        }
        journal_time += start.elapsed();
        let start = Instant::now();
        for (i, events) in streams.iter().enumerate() {
            let stream = format!("t-{i}");
            let payload = serde_json::to_string(&events[k]).unwrap();
            let seq = k as i64 + 1;
            let hash = event_hash(&raw_prev[i], &stream, seq, 1, &payload);
            raw.insert((
                &stream,
                seq,
                events[k].kind(),
                &payload,
                &raw_prev[i],
                &hash,
            ))
            .await;
            raw_prev[i] = hash;
        }
        raw_time += start.elapsed();
        count += tasks;
    }
    j.shutdown().await;
    place.drop_database().await;
    (
        count as f64 / journal_time.as_secs_f64(),
        count as f64 / raw_time.as_secs_f64(),
    )
}

async fn replay(pg: Option<&str>, events: usize) -> (f64, f64) {
    let place = Place::new(pg).await;
    let (j, _) = place.open(Durability::Normal).await;
    let per_task = 100;
    for i in 0..events / per_task {
        let batch = task_events(i, per_task)
            .into_iter()
            .map(|event| NewEvent { at: 1, event })
            .collect();
        j.append(&StreamId::from(format!("t-{i}")), 0, batch)
            .await
            .unwrap();
    }
    let start = Instant::now();
    let replayed = j.rebuild().await.unwrap();
    let rebuild_rate = replayed as f64 / start.elapsed().as_secs_f64();
    let start = Instant::now();
    let report = j.verify().await.unwrap();
    assert!(report.broken.is_none());
    let verify_rate = report.events as f64 / start.elapsed().as_secs_f64();
    j.shutdown().await;
    place.drop_database().await;
    (rebuild_rate, verify_rate)
}

/// The PostgreSQL server to measure, without a database path, if one is named.
fn postgres_server() -> Option<String> {
    let url = std::env::var("GAFFER_BENCH_POSTGRES_URL")
        .or_else(|_| std::env::var("GAFFER_TEST_POSTGRES_URL"))
        .ok()?;
    let rest = url.find("://")? + 3;
    Some(match url[rest..].find(['/', '?']) {
        Some(i) => url[..rest + i].to_owned(),
        None => url,
    })
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing: run small then.
    let quick = !std::env::args().any(|a| a == "--bench");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = postgres_server();
    rt.block_on(async {
        let mut backends = vec![("sqlite", None)];
        if let Some(server) = &server {
            backends.push(("postgres", Some(server.as_str())));
        } else {
            println!("postgres: skipped (set GAFFER_BENCH_POSTGRES_URL or GAFFER_TEST_POSTGRES_URL)");
        }
        for (backend, pg) in backends {
            for (durability, name, tasks, per_task) in [
                (Durability::Normal, "durability normal", 20, 200),
                (Durability::Full, "durability full (default)", 10, 60),
            ] {
                let (tasks, per_task) = if quick { (2, 5) } else { (tasks, per_task) };
                let (journal, raw) = append_vs_raw(pg, durability, tasks, per_task).await;
                println!(
                    "{backend} append [{name}]: journal {journal:>8.0} events/s, raw inserts {raw:>8.0} events/s, ratio {:.2} (target >= 0.50)",
                    journal / raw
                );
            }
            let n = if quick { 1_000 } else { 100_000 };
            let (rebuild, verify) = replay(pg, n).await;
            println!("{backend} replay: rebuild of {n} events at {rebuild:.0} events/s; verify at {verify:.0} events/s");
        }
    });
}
