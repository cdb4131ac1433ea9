//! Streams 100,000 normalized events from a fake agent (fake-claude, stream-json) through
//! the production Claude backend and prints events/s and per-event overhead (the pipeline
//! time per event minus the time to merely read the same lines from the fake's stdout).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark program: failing loudly is right

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use gaffer_agents::claude::{claude_args, ClaudeBackend, ClaudeConfig};
use gaffer_agents::{AgentBackend, AgentEvent, AllowAll, Mode, StartOptions};
use gaffer_testkit::bins::fake_bin;
use gaffer_testkit::scenario::{Scenario, Step, Turn};
use tokio::io::AsyncBufReadExt;
use tokio::io::AsyncWriteExt;

/// Events per run under `cargo bench`; `cargo test --benches` (no `--bench` argument)
/// runs a quick smoke version.
fn n_events() -> (u64, usize) {
    if std::env::args().any(|a| a == "--bench") {
        (100_000, 3)
    } else {
        (2_000, 1)
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(run());
}

async fn run() {
    let (n_total, rounds) = n_events();
    let bin = fake_bin("fake-claude");
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let scenario = Scenario {
        turns: vec![Turn {
            steps: vec![Step::Flood {
                count: n_total,
                text: "a normalized event of ordinary length, with a few words".into(),
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let sc = tmp.path().join("scenario.json");
    scenario.write_to(&sc).unwrap();
    let mut env = BTreeMap::new();
    env.insert("GAFFER_FAKE_SCENARIO".to_string(), sc.display().to_string());
    env.insert(
        "CLAUDE_CONFIG_DIR".to_string(),
        tmp.path().join("claude").display().to_string(),
    );
    let opts = StartOptions {
        workspace: ws.clone(),
        role: "owner".into(),
        mode: Mode::ReadWrite,
        env: env.clone(),
        ..Default::default()
    };

    // Baseline: the fake writing and the pipe, read line by line, no parsing.
    let mut best_base = f64::MAX;
    for _ in 0..rounds {
        let args = claude_args(&opts, &uuid::Uuid::new_v4().to_string(), false, &[]);
        let mut child = tokio::process::Command::new(&bin)
            .args(&args)
            .current_dir(&ws)
            .envs(&env)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let mut lines =
            tokio::io::BufReader::with_capacity(64 * 1024, child.stdout.take().unwrap()).lines();
        let t = Instant::now();
        stdin
            .write_all(b"{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"go\"}}\n")
            .await
            .unwrap();
        let mut n = 0u64;
        while let Some(l) = lines.next_line().await.unwrap() {
            if l.contains("\"type\":\"result\"") {
                break;
            }
            n += 1;
        }
        best_base = best_base.min(t.elapsed().as_secs_f64());
        assert!(n >= n_total);
        drop(stdin);
        let _ = child.wait().await;
    }

    // The pipeline: parse, normalize, redact, channel, consume.
    let backend = ClaudeBackend::new(ClaudeConfig {
        bin: Some(bin.clone()),
        ..Default::default()
    });
    let mut best = f64::MAX;
    for _ in 0..rounds {
        let mut s = backend
            .start(opts.clone(), Arc::new(AllowAll))
            .await
            .unwrap();
        let t = Instant::now();
        s.send_turn("go").await.unwrap();
        let mut n = 0u64;
        while let Some(ev) = s.next_event().await {
            match ev.unwrap() {
                AgentEvent::TurnCompleted { .. } => break,
                AgentEvent::AssistantText { .. } => n += 1,
                _ => {}
            }
        }
        best = best.min(t.elapsed().as_secs_f64());
        assert_eq!(n, n_total);
        s.shutdown().await.unwrap();
    }
    let per_event = best / n_total as f64;
    let overhead = (best - best_base).max(0.0) / n_total as f64;
    println!("stream bench: {n_total} normalized events from fake-claude (best of {rounds})");
    println!(
        "  raw line read (baseline): {:.3} s  ({:.0} lines/s)",
        best_base,
        n_total as f64 / best_base
    );
    println!(
        "  event pipeline:           {:.3} s  ({:.0} events/s, {:.2} µs/event)",
        best,
        n_total as f64 / best,
        per_event * 1e6
    );
    println!(
        "  per-event overhead of parse+normalize+redact+channel: {:.2} µs",
        overhead * 1e6
    );
}
