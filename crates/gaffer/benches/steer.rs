//! Latency of a person's message: from `POST /api/tasks/{id}/messages` to the
//! agent reading it on its stdin, through a real `gaffer serve` (HTTP, the app
//! service, the SQLite journal, the engine woken by the append, the Claude Code
//! backend writing stream-json). The agent is the testkit's fake Claude Code, a
//! small process: its planner turn waits for one message after another
//! (`await_message`) and appends each to a log as it reads the line from its
//! stdin. The clock starts before the POST is sent and stops when that log line
//! appears (the log is polled every 200 µs, so a figure is at most 0.2 ms late).
//!
//! The baseline, measured in the same run on the same server and client right
//! before each message: `GET /api/tasks/{id}/messages` (HTTP, auth, a journal
//! read). Prints p50, p99 and the maximum of both, their ratio, and whether the
//! target p99 < 50 ms is met.
//!
//! `cargo bench -p gaffer --bench steer` sends 300 messages; without `--bench` (as
//! `cargo test --benches` runs it) 10. Either way every message must arrive once.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use gaffer_testkit::git::git;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Seek};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Served(Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `gaffer serve` in `d` with the fake Claude Code playing `scenarios`: its address.
fn serve(d: &Path) -> (Served, String) {
    let fake_state = d.join("fake-state");
    std::fs::create_dir_all(&fake_state).unwrap();
    let log = d.join("effects.log");
    std::fs::write(&log, "").unwrap();
    std::fs::write(d.join("config.toml"), "").unwrap();
    let writable =
        std::env::join_paths([d.join("scenarios"), fake_state.clone(), log.clone()]).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_gaffer"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", d)
        .env("GAFFER_CONFIG", d.join("config.toml"))
        .env("GAFFER_DATA_DIR", d.join("data"))
        .env(
            "GAFFER_CLAUDE_BIN",
            gaffer_testkit::bins::fake_bin("fake-claude"),
        )
        .env("GAFFER_FAKE_SCENARIO", d.join("scenarios"))
        .env("GAFFER_FAKE_STATE_DIR", &fake_state)
        .env("GAFFER_FAKE_LOG", &log)
        .env(
            "GAFFER_AGENTS_ENV",
            gaffer_testkit::scenario::FAKE_ENV_NAMES,
        )
        .env("CLAUDE_CONFIG_DIR", fake_state.join("claude"))
        .env("USER", "bench")
        .env("GAFFER_SANDBOX_WRITABLE", writable)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let addr = first
        .split("http://")
        .nth(1)
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    (Served(child), format!("http://{addr}"))
}

/// Wait until the log (read from `from`) has `needle`; the new end of what was read.
fn wait_for(log: &Path, from: u64, needle: &str, deadline: Instant) -> u64 {
    let mut file = std::fs::File::open(log).unwrap();
    let mut seen = String::new();
    let mut at = from;
    loop {
        file.seek(std::io::SeekFrom::Start(at)).unwrap();
        let n = file.read_to_string(&mut seen).unwrap();
        at += n as u64;
        if seen.contains(needle) {
            return at;
        }
        assert!(Instant::now() < deadline, "never seen: {needle}");
        std::thread::sleep(Duration::from_micros(200));
    }
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let messages = if full { 300 } else { 10 };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let repo = d.join("demo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("README.md"), "# demo\n").unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "init"]);
    let scenarios = d.join("scenarios");
    std::fs::create_dir_all(&scenarios).unwrap();
    let mut steps: Vec<Value> = (0..messages)
        .map(|_| json!({ "await_message": null }))
        .collect();
    steps.push(json!({ "say": "```json\n{\"subtasks\":[]}\n```" }));
    std::fs::write(
        scenarios.join("planner.json"),
        json!({ "turns": [{ "steps": steps }] }).to_string(),
    )
    .unwrap();
    let (_served, base) = serve(d);
    let log = d.join("effects.log");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let secret = std::fs::read_to_string(d.join("data/local-secret")).unwrap();
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        reqwest::header::AUTHORIZATION,
        format!("Bearer {}", secret.trim()).parse().unwrap(),
    );
    let http = reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .unwrap();
    let (steer, baseline) = rt.block_on(async {
        let r = http
            .post(format!("{base}/api/projects"))
            .json(&json!({"path": repo}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201);
        let r = http
            .post(format!("{base}/api/tasks"))
            .json(&json!({"project": "demo", "request": "wait for messages"}))
            .send()
            .await
            .unwrap();
        let id = r.json::<Value>().await.unwrap()["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut at = wait_for(&log, 0, "fake-claude turn", deadline);
        // The turn runs: a message is accepted once its session is recorded.
        loop {
            let sessions: Value = http
                .get(format!("{base}/api/tasks/{id}/sessions"))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            if sessions.as_array().is_some_and(|s| !s.is_empty()) {
                break;
            }
            assert!(Instant::now() < deadline, "no session");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let mut steer = Vec::with_capacity(messages);
        let mut baseline = Vec::with_capacity(messages);
        for i in 0..messages {
            let asked = Instant::now();
            let r = http
                .get(format!("{base}/api/tasks/{id}/messages"))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200);
            let listed: Value = r.json().await.unwrap();
            baseline.push(asked.elapsed());
            assert_eq!(listed.as_array().unwrap().len(), i);
            let text = format!("message number {i} of the bench");
            let sent = Instant::now();
            let r = http
                .post(format!("{base}/api/tasks/{id}/messages"))
                .json(&json!({ "text": text }))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 201);
            at = wait_for(
                &log,
                at,
                &format!("{text}\n"),
                Instant::now() + Duration::from_secs(30),
            );
            steer.push(sent.elapsed());
        }
        (steer, baseline)
    });
    let all = std::fs::read_to_string(&log).unwrap();
    for i in 0..messages {
        let text = format!("message number {i} of the bench\n");
        assert_eq!(
            all.matches(&text).count(),
            1,
            "message {i} did not arrive exactly once"
        );
    }
    let (steer, baseline) = (Percentiles::of(steer), Percentiles::of(baseline));
    println!(
        "steer: {messages} messages, POST → the agent reads it on stdin: p50 {} ms, p99 {} ms, max {} ms (target p99 < 50 ms: {})",
        ms(steer.p50),
        ms(steer.p99),
        ms(steer.max),
        if steer.p99 < Duration::from_millis(50) { "met" } else { "NOT met" }
    );
    println!(
        "baseline: GET /api/tasks/{{id}}/messages on the same server: p50 {} ms, p99 {} ms, max {} ms",
        ms(baseline.p50),
        ms(baseline.p99),
        ms(baseline.max)
    );
    println!(
        "ratio steer / baseline: p50 {:.1}x, p99 {:.1}x",
        steer.p50.as_secs_f64() / baseline.p50.as_secs_f64(),
        steer.p99.as_secs_f64() / baseline.p99.as_secs_f64()
    );
}

struct Percentiles {
    p50: Duration,
    p99: Duration,
    max: Duration,
}

impl Percentiles {
    fn of(mut samples: Vec<Duration>) -> Self {
        samples.sort();
        let at = |p: f64| {
            samples[((samples.len() as f64 * p).ceil() as usize).clamp(1, samples.len()) - 1]
        };
        Percentiles {
            p50: at(0.50),
            p99: at(0.99),
            max: *samples.last().unwrap(),
        }
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1000.0)
}
