//! Load: 200 concurrent SSE clients on `/api/events` plus a steady REST load
//! (task list, pending approvals, task creation) for 30 s on loopback, from a
//! Rust load generator. Prints request p50/p99 per route, errors, and whether
//! every SSE client received every event appended during the run.
//!
//! `cargo bench -p gaffer-server --bench load` runs 30 s; without `--bench` (as
//! `cargo test --benches` runs it) a quick 2 s with 20 SSE clients.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use futures::StreamExt;
use gaffer_app::{AddProject, App, Policy};
use gaffer_core::Actor;
use gaffer_server::{LocalSecret, Server, ServerConfig};
use gaffer_store::{Durability, SqliteJournal};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn pct(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize].as_secs_f64() * 1e3
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (secs, sse_clients, workers) = if full { (30, 200, 8) } else { (2, 20, 4) };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let dir = tempfile::tempdir().unwrap();
        let journal = SqliteJournal::open(&dir.path().join("gaffer.db"), Durability::Full).await.unwrap();
        let app = App::new(Arc::new(journal), Policy::default());
        let repo = dir.path().join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        std::process::Command::new("git").args(["init", "-q"]).current_dir(&repo).status().unwrap();
        app.add_project(AddProject { path: repo.to_string_lossy().into_owned(), name: Some("load".into()), check: None }, Actor::user("b", "bench"))
            .await
            .unwrap();
        let local = LocalSecret::generate("bench");
        let mut auth = reqwest::header::HeaderMap::new();
        auth.insert(reqwest::header::AUTHORIZATION, format!("Bearer {}", local.expose()).parse().unwrap());
        let server = Server::bind(app.clone(), ServerConfig::new("127.0.0.1:0".parse().unwrap(), local)).await.unwrap();
        let base = format!("http://{}", server.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(server.run(async move {
            let _ = stopped.await;
        }));

        // SSE clients: count events (frames with an id) and remember the last id.
        let sse_errors = Arc::new(AtomicU64::new(0));
        let running = Arc::new(AtomicBool::new(true));
        let mut sse = Vec::new();
        // Set to the last journal position once the load stops: readers end there.
        let (end_tx, end_rx) = tokio::sync::watch::channel(None::<i64>);
        let sse_http = reqwest::Client::builder().pool_max_idle_per_host(0).default_headers(auth.clone()).build().unwrap();
        for _ in 0..sse_clients {
            let r = sse_http.get(format!("{base}/api/events")).send().await.unwrap();
            assert_eq!(r.status(), 200);
            let errors = sse_errors.clone();
            let mut end = end_rx.clone();
            sse.push(tokio::spawn(async move {
                let mut body = r.bytes_stream();
                let mut buf = String::new();
                let mut ids: Vec<i64> = Vec::new();
                loop {
                    let last = *end.borrow_and_update();
                    if let (Some(last), Some(seen)) = (last, ids.last()) {
                        if *seen >= last {
                            return ids;
                        }
                    }
                    tokio::select! {
                        got = tokio::time::timeout(Duration::from_secs(10), body.next()) => match got {
                            Ok(Some(Ok(chunk))) => {
                                buf.push_str(&String::from_utf8_lossy(&chunk));
                                while let Some(i) = buf.find("\n\n") {
                                    let frame: String = buf.drain(..i + 2).collect();
                                    if let Some(id) = frame.lines().find_map(|l| l.strip_prefix("id:")) {
                                        ids.push(id.trim().parse().unwrap());
                                    }
                                }
                            }
                            Ok(Some(Err(_))) | Ok(None) | Err(_) => {
                                errors.fetch_add(1, Ordering::Relaxed);
                                return ids;
                            }
                        },
                        _ = end.changed() => {}
                    }
                }
            }));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;

        // REST workers in a closed loop: 1 create per 4 requests.
        let http = reqwest::Client::builder().default_headers(auth).build().unwrap();
        let mut rest = Vec::new();
        let started = Instant::now();
        for w in 0..workers {
            let http = http.clone();
            let base = base.clone();
            let running = running.clone();
            rest.push(tokio::spawn(async move {
                let mut lat: BTreeMap<&'static str, Vec<Duration>> = BTreeMap::new();
                let mut errors = 0u64;
                let mut i = 0u64;
                while running.load(Ordering::Relaxed) {
                    i += 1;
                    let t = Instant::now();
                    let (route, ok) = match i % 4 {
                        0 => ("POST /api/tasks", http.post(format!("{base}/api/tasks")).json(&serde_json::json!({"project": "load", "request": format!("w{w} #{i}")})).send().await.map(|r| r.status() == 201)),
                        1 => ("GET /api/tasks?limit=20", http.get(format!("{base}/api/tasks?limit=20")).send().await.map(|r| r.status() == 200)),
                        2 => ("GET /api/approvals?state=pending", http.get(format!("{base}/api/approvals?state=pending")).send().await.map(|r| r.status() == 200)),
                        _ => ("GET /healthz", http.get(format!("{base}/healthz")).send().await.map(|r| r.status() == 200)),
                    };
                    if !matches!(ok, Ok(true)) {
                        errors += 1;
                    }
                    lat.entry(route).or_default().push(t.elapsed());
                }
                (lat, errors)
            }));
        }
        tokio::time::sleep(Duration::from_secs(secs)).await;
        running.store(false, Ordering::Relaxed);
        let mut all: BTreeMap<&'static str, Vec<Duration>> = BTreeMap::new();
        let mut rest_errors = 0;
        for r in rest {
            let (lat, errors) = r.await.unwrap();
            rest_errors += errors;
            for (k, v) in lat {
                all.entry(k).or_default().extend(v);
            }
        }
        let elapsed = started.elapsed().as_secs_f64();
        let appended = app.journal().events_after(0, 10_000_000).await.unwrap();
        let during: Vec<i64> = appended.iter().map(|e| e.pos).filter(|p| *p > 1).collect();
        let _ = end_tx.send(during.last().copied());
        let mut complete = 0;
        for s in sse {
            let ids = s.await.unwrap();
            if ids == during {
                complete += 1;
            }
        }
        let mut total = Vec::new();
        println!("load: {sse_clients} SSE clients + {workers} REST workers for {elapsed:.1} s on loopback (synchronous=FULL)");
        for (route, mut v) in all {
            v.sort();
            println!("  {route:<34} {:>6} req  p50 {:>7.2} ms  p99 {:>7.2} ms", v.len(), pct(&v, 0.5), pct(&v, 0.99));
            total.extend(v);
        }
        total.sort();
        println!(
            "  all requests: {} ({:.0}/s), p50 {:.2} ms, p99 {:.2} ms, errors {rest_errors}",
            total.len(),
            total.len() as f64 / elapsed,
            pct(&total, 0.5),
            pct(&total, 0.99)
        );
        println!(
            "  SSE: {complete}/{sse_clients} clients received all {} events in order, stream errors {}",
            during.len(),
            sse_errors.load(Ordering::Relaxed)
        );
        let _ = stop.send(());
        assert_eq!(rest_errors, 0, "REST errors");
        assert_eq!(complete, sse_clients, "an SSE client missed events");
    });
}
