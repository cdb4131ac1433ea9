//! `cargo bench -p gaffer-store`: journal append throughput against raw SQLite
//! inserts of the same bytes (same file, same transaction and sync mode,
//! interleaved in one run), and replay (rebuild) speed over 100,000 events.
//!
//! Target: append throughput ≥ 0.5× raw inserts.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gaffer_core::{Actor, Event, Intent, StreamId};
use gaffer_store::{event_hash, Durability, Journal, NewEvent, SqliteJournal, GENESIS_HASH};
use serde_json::json;
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

async fn open(dir: &std::path::Path, durability: Durability) -> SqliteJournal {
    let j = SqliteJournal::open(&dir.join("journal.db"), durability)
        .await
        .unwrap();
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
    sqlx::query("CREATE TABLE raw_events (pos INTEGER PRIMARY KEY AUTOINCREMENT, stream_id TEXT NOT NULL,
                 seq INTEGER NOT NULL, at INTEGER NOT NULL, type TEXT NOT NULL, payload TEXT NOT NULL,
                 prev_hash TEXT NOT NULL, hash TEXT NOT NULL, UNIQUE (stream_id, seq))")
        .execute(j.pool())
        .await
        .unwrap();
    j
}

/// Appends `per_task` events to each of `tasks` tasks, one event per transaction,
/// alternating journal appends and raw inserts of the same bytes in rounds.
async fn append_vs_raw(durability: Durability, tasks: usize, per_task: usize) -> (f64, f64) {
    let dir = tempfile::tempdir().unwrap();
    let j = open(dir.path(), durability).await;
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
            let mut tx = j.pool().begin_with("BEGIN IMMEDIATE").await.unwrap();
            sqlx::query(
                "INSERT INTO raw_events (stream_id, seq, at, type, payload, prev_hash, hash)
                         VALUES (?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(&stream)
            .bind(seq)
            .bind(1i64)
            .bind(events[k].kind())
            .bind(&payload)
            .bind(&raw_prev[i])
            .bind(&hash)
            .execute(&mut *tx)
            .await
            .unwrap();
            tx.commit().await.unwrap();
            raw_prev[i] = hash;
        }
        raw_time += start.elapsed();
        count += tasks;
    }
    (
        count as f64 / journal_time.as_secs_f64(),
        count as f64 / raw_time.as_secs_f64(),
    )
}

async fn replay(events: usize) -> (f64, f64) {
    let dir = tempfile::tempdir().unwrap();
    let j = open(dir.path(), Durability::Normal).await;
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
    (rebuild_rate, verify_rate)
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing: run small then.
    let quick = !std::env::args().any(|a| a == "--bench");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        for (durability, name, tasks, per_task) in [
            (Durability::Normal, "synchronous=NORMAL", 20, 200),
            (Durability::Full, "synchronous=FULL (default)", 10, 60),
        ] {
            let (tasks, per_task) = if quick { (2, 5) } else { (tasks, per_task) };
            let (journal, raw) = append_vs_raw(durability, tasks, per_task).await;
            println!(
                "append [{name}]: journal {journal:>8.0} events/s, raw inserts {raw:>8.0} events/s, ratio {:.2} (target >= 0.50)",
                journal / raw
            );
        }
        let n = if quick { 1_000 } else { 100_000 };
        let (rebuild, verify) = replay(n).await;
        println!("replay: rebuild of {n} events at {rebuild:.0} events/s; verify at {verify:.0} events/s");
    });
}
