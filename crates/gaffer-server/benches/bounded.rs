//! Bounded server: what many clients cost the server, measured on a real
//! `gaffer-server` in a child process (this bench re-runs itself as the server,
//! so the numbers are the server's alone).
//!
//! 1. **Replay memory**: 300 SSE clients replay one task's whole history at once,
//!    for a 1 MB and a 10 MB history (each in a fresh server), for up to 90 s (all
//!    of them mid-history at once; on a slow machine not all finish). Prints the
//!    server's peak RSS growth (VmHWM minus VmRSS before the clients) and the ratio
//!    of the two: paged replay keeps it near 1 (independent of history length); the
//!    target is under 300 MB for the 10 MB history. (Loading each client's whole
//!    history, as before, cost ~6 MB per client at once.)
//! 2. **Half-open connections**: 500 connections send half a request and stop.
//!    Prints how many the server closed, and when the last one closed, against its
//!    header-read timeout (10 s by default).
//!
//! `cargo bench -p gaffer-server --bench bounded` runs the full sizes; without
//! `--bench` (as `cargo test --benches` runs it) 20 clients for up to 20 s, 50
//! connections, a 1 MB and 2 MB history and a 1 s header timeout.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use gaffer_app::{AddProject, App, NewTask, Policy};
use gaffer_core::{Actor, Event, Intent, StepId, StreamId};
use gaffer_server::{Limits, LocalSecret, Server, ServerConfig};
use gaffer_store::{Durability, Journal, NewEvent, SqliteJournal};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const SERVE: &str = "GAFFER_BENCH_BOUNDED_SERVE";
const HEADER_READ: &str = "GAFFER_BENCH_BOUNDED_HEADER_READ_MS";

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    if let Ok(dir) = std::env::var(SERVE) {
        rt.block_on(serve(Path::new(&dir)));
        return;
    }
    let full = std::env::args().any(|a| a == "--bench");
    let (mut clients, mut sizes_mb, window, half_open, header_read) = if full {
        (
            300,
            [1, 10],
            Duration::from_secs(90),
            500,
            Limits::default().header_read,
        )
    } else {
        (
            20,
            [1, 2],
            Duration::from_secs(20),
            50,
            Duration::from_secs(1),
        )
    };
    // For exploring: GAFFER_BENCH_CLIENTS=n, GAFFER_BENCH_MB=a,b.
    if let Ok(n) = std::env::var("GAFFER_BENCH_CLIENTS") {
        clients = n.parse().unwrap();
    }
    if let Ok(mb) = std::env::var("GAFFER_BENCH_MB") {
        let (a, b) = mb.split_once(',').unwrap();
        sizes_mb = [a.parse().unwrap(), b.parse().unwrap()];
    }
    rt.block_on(async move {
        let mut growth = Vec::new();
        for mb in sizes_mb {
            let dir = tempfile::tempdir().unwrap();
            let task = history(dir.path(), mb).await;
            let server = Child_::start(dir.path(), header_read);
            let before = server.rss_kb("VmRSS");
            let started = Instant::now();
            let (stop, stopped) = tokio::sync::watch::channel(false);
            let replays: Vec<_> = (0..clients)
                .map(|_| tokio::spawn(replay(server.addr.clone(), server.secret.clone(), task.clone(), stopped.clone())))
                .collect();
            // Peak RSS is the server's VmHWM; the window ends early once every client
            // has the whole history. RSS every 5 s shows whether it keeps growing.
            let mut trace = Vec::new();
            while started.elapsed() < window && replays.iter().any(|r| !r.is_finished()) {
                tokio::time::sleep(Duration::from_millis(200)).await;
                if started.elapsed().as_secs() / 5 > trace.len() as u64 {
                    trace.push(format!("{:.0}", server.rss_kb("VmRSS") as f64 / 1024.0));
                }
            }
            let peak = server.rss_kb("VmHWM");
            let took = started.elapsed();
            stop.send(true).unwrap();
            let (mut bytes, mut whole, mut reconnects) = (0, 0, 0);
            for r in replays {
                let (read, all, again) = r.await.unwrap();
                bytes += read;
                whole += usize::from(all);
                reconnects += again;
            }
            let grew = peak.saturating_sub(before) as f64 / 1024.0;
            println!(
                "sse replay: {clients} clients x {mb} MB history for {:.0} s ({whole} had it all, {:.1} MB each on average, {reconnects} reconnects): server RSS {:.0} MB before, every 5 s [{}] MB, peak growth {grew:.0} MB ({:.2} MB per client)",
                took.as_secs_f64(),
                bytes as f64 / clients as f64 / 1e6,
                before as f64 / 1024.0,
                trace.join(" "),
                grew / clients as f64,
            );
            growth.push(grew);
        }
        println!(
            "sse replay: peak growth with the {} MB history / with the {} MB history = {:.2} (1.0: independent of history length); target < 300 MB: {}",
            sizes_mb[1],
            sizes_mb[0],
            growth[1] / growth[0].max(1.0),
            if growth[1] < 300.0 { "met" } else { "MISSED" }
        );

        let dir = tempfile::tempdir().unwrap();
        history(dir.path(), 0).await;
        let server = Child_::start(dir.path(), header_read);
        let started = Instant::now();
        let mut waits = Vec::new();
        for _ in 0..half_open {
            let mut s = tokio::net::TcpStream::connect(&server.addr).await.unwrap();
            s.write_all(b"GET /api/tasks HTTP/1.1\r\nHost: 127.0.0.1\r\n").await.unwrap();
            waits.push(tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                let closed = tokio::time::timeout(Duration::from_secs(120), async {
                    while !matches!(s.read(&mut buf).await, Ok(0) | Err(_)) {}
                })
                .await;
                closed.is_ok().then(|| started.elapsed())
            }));
        }
        let mut closed = Vec::new();
        for w in waits {
            if let Some(at) = w.await.unwrap() {
                closed.push(at);
            }
        }
        let last = closed.iter().max().copied().unwrap_or_default();
        println!(
            "half-open: {}/{half_open} connections closed by the server, the last after {:.1} s (header-read timeout {:.0} s)",
            closed.len(),
            last.as_secs_f64(),
            header_read.as_secs_f64()
        );
    });
}

/// A journal in `dir` with one task whose history holds about `mb` MB; its id and
/// its last event's position.
async fn history(dir: &Path, mb: usize) -> (String, i64) {
    let journal = SqliteJournal::open(&dir.join("gaffer.db"), Durability::Normal)
        .await
        .unwrap();
    let journal: Arc<dyn Journal> = Arc::new(journal);
    let app = App::new(journal.clone(), Policy::default());
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    Command::new("git")
        .args(["init", "-q"])
        .current_dir(&repo)
        .status()
        .unwrap();
    let project = app
        .add_project(
            AddProject {
                path: repo.to_string_lossy().into_owned(),
                name: Some("bench".into()),
                check: None,
            },
            Actor::user("b", "bench"),
        )
        .await
        .unwrap();
    let task = app
        .create_task(
            NewTask {
                project: project.id,
                request: "replay me".into(),
                ..Default::default()
            },
            Actor::user("b", "bench"),
        )
        .await
        .unwrap()
        .id;
    let stream = StreamId(task.clone());
    let text = "x".repeat(10 * 1024);
    for batch in 0..mb * 10 {
        let head = journal.head(&stream).await.unwrap();
        let events = (0..10)
            .map(|i| {
                NewEvent::now(Event::StepIntentRecorded {
                    step_id: StepId(format!("s-{batch}-{i}")),
                    name: "history".into(),
                    intent: Intent::NonIdempotent,
                    depends_on: vec![],
                    input: serde_json::json!({ "text": text }),
                })
            })
            .collect();
        journal.append(&stream, head, events).await.unwrap();
    }
    let last = journal
        .stream_events_after(&stream, 0, i64::MAX)
        .await
        .unwrap()
        .last()
        .unwrap()
        .pos;
    journal.shutdown().await;
    (task, last)
}

/// One client replaying the task's history, reading as fast as it can until it has
/// the last event or `stop` says so; when the server ends the stream (its journal
/// read timed out under the load) it reconnects with `Last-Event-ID`, as a browser's
/// `EventSource` does. The bytes it read, whether it had it all, and its reconnects.
async fn replay(
    addr: String,
    secret: String,
    (task, last): (String, i64),
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> (usize, bool, usize) {
    let mut seen = 0i64;
    let mut total = 0;
    let mut reconnects = 0;
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
        s.write_all(format!("GET /api/tasks/{task}/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {secret}\r\nLast-Event-ID: {seen}\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut tail: Vec<u8> = Vec::new();
        loop {
            let n = tokio::select! {
                n = s.read(&mut buf) => n.unwrap_or(0),
                _ = stop.changed() => return (total, false, reconnects),
            };
            if n == 0 {
                reconnects += 1;
                break;
            }
            total += n;
            tail.extend_from_slice(&buf[..n]);
            // The last complete `id: N` line so far.
            let text = String::from_utf8_lossy(&tail).into_owned();
            if let Some(id) = text
                .match_indices("id: ")
                .filter_map(|(i, _)| {
                    let rest = &text[i + 4..];
                    let end = rest.find('\n')?;
                    rest[..end].parse::<i64>().ok()
                })
                .max()
            {
                seen = seen.max(id);
            }
            if seen >= last {
                return (total, true, reconnects);
            }
            if tail.len() > 64 {
                tail.drain(..tail.len() - 64);
            }
        }
    }
}

/// The server process: serves the journal in `dir`; says `<addr> <secret>` on
/// stdout, stops when stdin closes.
async fn serve(dir: &Path) {
    let journal = SqliteJournal::open(&dir.join("gaffer.db"), Durability::Normal)
        .await
        .unwrap();
    let app = App::new(Arc::new(journal), Policy::default());
    let local = LocalSecret::generate("bench");
    let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap(), local.clone());
    if let Ok(ms) = std::env::var(HEADER_READ) {
        config.limits.header_read = Duration::from_millis(ms.parse().unwrap());
    }
    let server = Server::bind(app, config).await.unwrap();
    println!("{} {}", server.local_addr().unwrap(), local.expose());
    std::io::stdout().flush().unwrap();
    let stdin_closed = tokio::task::spawn_blocking(|| {
        let mut sink = String::new();
        while std::io::stdin().read_line(&mut sink).unwrap_or(0) > 0 {}
    });
    server
        .run(async move {
            let _ = stdin_closed.await;
        })
        .await
        .unwrap();
}

/// The server child process.
#[allow(non_camel_case_types)]
struct Child_ {
    child: Child,
    addr: String,
    secret: String,
}

impl Child_ {
    fn start(dir: &Path, header_read: Duration) -> Self {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .env(SERVE, dir)
            .env(HEADER_READ, header_read.as_millis().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let (addr, secret) = line.trim().split_once(' ').unwrap();
        Self {
            addr: addr.to_owned(),
            secret: secret.to_owned(),
            child,
        }
    }

    /// A memory line of /proc/<pid>/status, in kB.
    fn rss_kb(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }
}

impl Drop for Child_ {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
