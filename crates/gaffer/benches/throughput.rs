//! Pipeline throughput on many workers: tasks per second through the whole
//! pipeline (worktree → plan → owner → commit → review → check → report; plans
//! approved by policy, no forge, so nothing waits for a person) with 1, 2 and 4
//! workers, on SQLite and on PostgreSQL, side by side.
//!
//! Each worker is its own `gaffer worker --count 1` process: its own worker id,
//! lease, connection pool and wake-ups through the database (file-system
//! notifications on SQLite, `LISTEN/NOTIFY` on PostgreSQL), as on many machines.
//! Agents are the testkit's fake Claude Code with zero latency; git, worktrees and
//! the project's check command are real. A second series has every agent turn
//! take 100 ms, as if the model answered instantly but the agent CLI did not:
//! there the workers spend part of their time waiting, not computing, which shows
//! how the pipeline scales when the machine's cores are not the limit. Every worker is up before the clock
//! starts; it starts when the first task is queued (from this process, on its own
//! connection) and stops when the last task is done.
//!
//! Besides tasks per second it prints the CPU seconds per task spent by the workers
//! and everything they ran (agents, git, checks), and how busy the machine's CPUs
//! were: with both near their limit, more workers cannot go faster.
//!
//! Both backends commit without waiting for the disk (`durability = "normal"`;
//! the testkit's throwaway PostgreSQL runs with `fsync=off`), so the comparison is
//! of the journals, not of the disk.
//!
//! `cargo bench -p gaffer --bench throughput` runs 48 tasks per configuration;
//! without `--bench` (as `cargo test --benches` runs it) 4 tasks with 1 and 2
//! workers and zero-latency agents only. Either way every task must end done with exactly one owner write.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use gaffer_app::{AddProject, App, NewTask, Policy};
use gaffer_core::{Actor, Event};
use gaffer_store::{Durability, Journal, TaskFilter};
use gaffer_testkit::git::git;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tokio::sync::broadcast::error::RecvError;

/// Repositories the tasks are spread over (round robin), so concurrent tasks
/// rarely share one repository's git locks.
const PROJECTS: usize = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    fn name(self) -> &'static str {
        match self {
            Self::Sqlite => "SQLite",
            Self::Postgres => "PostgreSQL",
        }
    }
}

/// One configuration's result.
struct Measured {
    tasks_per_sec: f64,
    /// CPU seconds per task: the `gaffer worker` processes themselves, what they
    /// ran (fake agents, git, checks), and the PostgreSQL server.
    cpu: Cpu,
    /// Share of the machine's CPU time that was busy during the run (anyone's).
    machine_busy: f64,
    /// Median time from queued to done.
    latency_p50: Duration,
    /// How many tasks each worker ran, most first.
    spread: Vec<usize>,
}

/// A `gaffer worker` process, killed when dropped.
struct Worker(Child);

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One run's temp dir: the fake agents' scripts, state and effect log, the data dir.
struct Site {
    dir: tempfile::TempDir,
    url: String,
}

impl Site {
    /// Every agent turn first sleeps `agent_ms`.
    fn new(url: Option<String>, agent_ms: u64) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for sub in ["scenarios", "fake-state", "data"] {
            std::fs::create_dir_all(d.join(sub)).unwrap();
        }
        std::fs::write(d.join("effects.log"), "").unwrap();
        std::fs::write(d.join("config.toml"), "").unwrap();
        gaffer_testkit::scenario::write_install_section_cycle(&d.join("scenarios"), agent_ms)
            .unwrap();
        let url = url.unwrap_or_else(|| d.join("data/gaffer.db").display().to_string());
        Self { dir, url }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `gaffer worker --count 1` with this site's environment and nothing else.
    fn worker(&self, n: usize) -> (Worker, String) {
        let d = self.path();
        let writable = std::env::join_paths([
            d.join("scenarios"),
            d.join("fake-state"),
            d.join("effects.log"),
        ])
        .unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_gaffer"))
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", d)
            .env("USER", "bench")
            .env("GAFFER_CONFIG", d.join("config.toml"))
            .env("GAFFER_DATA_DIR", d.join("data"))
            .env("GAFFER_DATABASE_URL", &self.url)
            .env("GAFFER_DATABASE_DURABILITY", "normal")
            .env(
                "GAFFER_CLAUDE_BIN",
                gaffer_testkit::bins::fake_bin("fake-claude"),
            )
            .env("GAFFER_FAKE_SCENARIO", d.join("scenarios"))
            .env("GAFFER_FAKE_STATE_DIR", d.join("fake-state"))
            .env("GAFFER_FAKE_LOG", d.join("effects.log"))
            .env(
                "GAFFER_AGENTS_ENV",
                gaffer_testkit::scenario::FAKE_ENV_NAMES,
            )
            .env("CLAUDE_CONFIG_DIR", d.join("fake-state/claude"))
            .env("GAFFER_SANDBOX_WRITABLE", writable)
            .args(["worker", "--count", "1"])
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(d.join(format!("worker-{n}.err"))).unwrap())
            .spawn()
            .unwrap();
        // "gaffer worker <id> is running …": warmed up, it registers and claims next.
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        let id = first.split_whitespace().nth(2).map(str::to_owned);
        let worker = Worker(child);
        match id {
            Some(id) => (worker, id),
            None => panic!(
                "gaffer worker exited at start: {}",
                std::fs::read_to_string(d.join(format!("worker-{n}.err"))).unwrap_or_default()
            ),
        }
    }

    /// What the workers wrote to stderr, for a failure message.
    fn worker_logs(&self) -> String {
        let mut out = String::new();
        for e in std::fs::read_dir(self.path()).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.ends_with(".err") {
                let text = std::fs::read_to_string(e.path()).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(20).collect();
                out.push_str(&format!("--- {name}\n"));
                for l in tail.into_iter().rev() {
                    out.push_str(l);
                    out.push('\n');
                }
            }
        }
        out
    }
}

/// A repository with a README and no installation section yet.
fn repo(dir: &Path, name: &str) -> PathBuf {
    let repo = dir.join(name);
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("README.md"), "# demo\n").unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "init"]);
    repo
}

/// CPU seconds, by who spent them.
#[derive(Debug, Clone, Copy, Default)]
struct Cpu {
    gaffer: f64,
    children: f64,
    postgres: f64,
}

impl Cpu {
    fn total(self) -> f64 {
        self.gaffer + self.children + self.postgres
    }

    fn minus(self, before: Cpu, per: f64) -> Cpu {
        Cpu {
            gaffer: (self.gaffer - before.gaffer) / per,
            children: (self.children - before.children) / per,
            postgres: (self.postgres - before.postgres) / per,
        }
    }
}

/// `/proc/PID/stat` after the command name: state is field 0, ppid 1, utime 11,
/// stime 12, cutime 13 (reaped children), cstime 14; in clock ticks.
fn proc_stat(pid: u32) -> Vec<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').map(|(_, rest)| rest.to_owned()))
        .map(|rest| {
            rest.split_whitespace()
                .map(|f| f.parse().unwrap_or(0))
                .collect()
        })
        .unwrap_or_default()
}

fn ticks(stat: &[u64], fields: &[usize]) -> u64 {
    fields
        .iter()
        .map(|i| stat.get(*i).copied().unwrap_or(0))
        .sum()
}

/// The PostgreSQL server listening on `url`'s port: its postmaster's pid.
fn postmaster(url: &str) -> Option<u32> {
    let port = url.rsplit_once(':')?.1.split('/').next()?.to_owned();
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let args: Vec<&[u8]> = cmd.split(|b| *b == 0).collect();
        let is_server = args.first()?.ends_with(b"postgres")
            && args
                .windows(2)
                .any(|w| w[0] == b"-p" && w[1] == port.as_bytes());
        is_server.then_some(pid)
    })
}

/// CPU seconds so far of the workers (themselves, and the processes they ran and
/// reaped) and of the PostgreSQL server (the postmaster, its reaped backends and
/// its live ones).
fn cpu_now(workers: &[u32], postgres: Option<u32>, hz: f64) -> Cpu {
    let mut cpu = Cpu::default();
    for pid in workers {
        let st = proc_stat(*pid);
        cpu.gaffer += ticks(&st, &[11, 12]) as f64 / hz;
        cpu.children += ticks(&st, &[13, 14]) as f64 / hz;
    }
    if let Some(pm) = postgres {
        let mut t = ticks(&proc_stat(pm), &[11, 12, 13, 14]);
        for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            if let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) {
                let st = proc_stat(pid);
                if st.get(1) == Some(&u64::from(pm)) {
                    t += ticks(&st, &[11, 12]);
                }
            }
        }
        cpu.postgres = t as f64 / hz;
    }
    cpu
}

/// The machine's busy and total CPU time (every process's), in ticks.
fn machine_ticks() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let cpu: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    let total: u64 = cpu.iter().take(8).sum();
    let idle = cpu.get(3).copied().unwrap_or(0) + cpu.get(4).copied().unwrap_or(0);
    (total - idle, total)
}

fn ticks_per_sec() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

async fn measure(backend: Backend, workers: usize, tasks: usize, agent_ms: u64) -> Measured {
    let url = match backend {
        Backend::Sqlite => None,
        Backend::Postgres => Some(gaffer_testkit::postgres::fresh_database().await),
    };
    let site = Site::new(url, agent_ms);
    let journal = gaffer_store::open(&site.url, Durability::Normal)
        .await
        .unwrap();
    journal.follow_other_processes().await.unwrap();
    let app = App::new(journal.clone(), Policy::default());
    let by = Actor::user("bench", "bench");
    for p in 0..PROJECTS {
        let name = format!("p{p}");
        let path = repo(site.path(), &name);
        app.add_project(
            AddProject {
                path: path.display().to_string(),
                name: Some(name),
                check: Some("grep -q '^## Installation' README.md".into()),
            },
            by.clone(),
        )
        .await
        .unwrap();
    }
    let procs: Vec<(Worker, String)> = (0..workers).map(|n| site.worker(n)).collect();

    let pids: Vec<u32> = procs.iter().map(|(w, _)| w.0.id()).collect();
    let server = match backend {
        Backend::Sqlite => None,
        Backend::Postgres => postmaster(&site.url),
    };
    let hz = ticks_per_sec();
    let mut events = journal.subscribe();
    let cpu_before = cpu_now(&pids, server, hz);
    let (busy_before, total_before) = machine_ticks();
    let started = Instant::now();
    let mut queued_at = BTreeMap::new();
    for i in 0..tasks {
        let t = app
            .create_task(
                NewTask {
                    project: format!("p{}", i % PROJECTS),
                    request: format!("Add an installation section to README ({i})"),
                    auto_approve: true,
                    ..NewTask::default()
                },
                by.clone(),
            )
            .await
            .unwrap();
        queued_at.insert(t.id, started.elapsed());
    }
    // Every task's end, as the workers append it (seen here through the database).
    let mut ended: BTreeMap<String, Duration> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(60 + 30 * tasks as u64);
    while ended.len() < tasks {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, events.recv()).await {
            Ok(Ok(e)) => {
                let end = matches!(
                    e.event,
                    Event::TaskDone { .. }
                        | Event::TaskFailed { .. }
                        | Event::TaskBlocked { .. }
                        | Event::TaskDependencyFailed { .. }
                        | Event::TaskCancelled { .. }
                );
                if end && queued_at.contains_key(&e.stream_id) {
                    ended
                        .entry(e.stream_id.clone())
                        .or_insert(started.elapsed());
                }
            }
            // Missed some: the projection says which tasks have ended.
            Ok(Err(RecvError::Lagged(_))) => {
                for t in all_tasks(&*journal).await {
                    if is_final(&t.stage) {
                        ended.entry(t.id).or_insert(started.elapsed());
                    }
                }
            }
            Ok(Err(RecvError::Closed)) => panic!("the journal closed"),
            Err(_) => panic!(
                "{} of {tasks} tasks ended in time ({} workers on {})\n{}",
                ended.len(),
                workers,
                backend.name(),
                site.worker_logs()
            ),
        }
    }
    let elapsed = started.elapsed();
    let cpu = cpu_now(&pids, server, hz).minus(cpu_before, tasks as f64);
    let (busy_after, total_after) = machine_ticks();
    let ids: Vec<String> = procs.iter().map(|(_, id)| id.clone()).collect();
    drop(procs);

    // Every task done, its owner's write made once, run under one lease.
    let rows = all_tasks(&*journal).await;
    let not_done: Vec<_> = rows
        .iter()
        .filter(|t| t.stage != "done")
        .map(|t| (&t.id, &t.stage))
        .collect();
    assert!(
        rows.len() == tasks && not_done.is_empty(),
        "{} tasks, not done: {not_done:?}\n{}",
        rows.len(),
        site.worker_logs()
    );
    let log = gaffer_testkit::scenario::read_log(&site.path().join("effects.log"));
    let mut per_worker: BTreeMap<String, usize> = ids.iter().map(|id| (id.clone(), 0)).collect();
    for id in queued_at.keys() {
        let writes = log
            .iter()
            .filter(|l| {
                l.starts_with("fake-claude write README.md") && l.ends_with(&format!("task={id}"))
            })
            .count();
        assert_eq!(writes, 1, "task {id}: {writes} owner writes");
        let leases: Vec<String> = journal
            .stream_events(&id.as_str().into(), 0)
            .await
            .unwrap()
            .into_iter()
            .filter_map(|e| match e.event {
                Event::TaskLeased { worker_id, .. } => Some(worker_id),
                _ => None,
            })
            .collect();
        assert_eq!(leases.len(), 1, "task {id} was leased {leases:?}");
        *per_worker.get_mut(&leases[0]).unwrap() += 1;
    }
    let mut latency: Vec<Duration> = ended.iter().map(|(id, at)| *at - queued_at[id]).collect();
    latency.sort();
    let mut spread: Vec<usize> = per_worker.into_values().collect();
    spread.sort_by(|a, b| b.cmp(a));
    journal.shutdown().await;
    let busy = (busy_after - busy_before) as f64;
    Measured {
        tasks_per_sec: tasks as f64 / elapsed.as_secs_f64(),
        cpu,
        machine_busy: busy / (total_after - total_before).max(1) as f64,
        latency_p50: latency[latency.len() / 2],
        spread,
    }
}

async fn all_tasks(journal: &dyn Journal) -> Vec<gaffer_store::TaskRow> {
    journal
        .tasks(&TaskFilter {
            limit: Some(100_000),
            ..Default::default()
        })
        .await
        .unwrap()
}

fn is_final(stage: &str) -> bool {
    ["done", "failed", "cancelled", "blocked"].contains(&stage)
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (tasks, counts, agent_ms): (usize, &[usize], &[u64]) = if full {
        (48, &[1, 2, 4], &[0, 100])
    } else {
        (4, &[1, 2], &[0])
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut backends = vec![Backend::Sqlite];
        if gaffer_testkit::postgres::available() {
            backends.push(Backend::Postgres);
        }
        for &ms in agent_ms {
            let mut results: BTreeMap<(Backend, usize), Measured> = BTreeMap::new();
            for &workers in counts {
                for &backend in &backends {
                    let m = measure(backend, workers, tasks, ms).await;
                    eprintln!(
                        "{} worker(s) on {}, agents {ms} ms: {:.2} tasks/s",
                        workers,
                        backend.name(),
                        m.tasks_per_sec
                    );
                    results.insert((backend, workers), m);
                }
            }
            report(tasks, counts, &backends, &results, ms);
            println!();
        }
    });
}

fn report(
    tasks: usize,
    counts: &[usize],
    backends: &[Backend],
    results: &BTreeMap<(Backend, usize), Measured>,
    agent_ms: u64,
) {
    let agents = if agent_ms == 0 {
        "zero-latency fake agents".to_owned()
    } else {
        format!("fake agents taking {agent_ms} ms a turn")
    };
    println!(
        "pipeline throughput: {tasks} tasks per run, each worker a `gaffer worker --count 1` process, {agents}; load average {}",
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    print!("{:>9}", "workers");
    for b in backends {
        print!(" | {:>18}", format!("{} tasks/s", b.name()));
    }
    println!();
    for &n in counts {
        print!("{n:>9}");
        for &b in backends {
            print!(" | {:>18.2}", results[&(b, n)].tasks_per_sec);
        }
        println!();
    }
    let (first, last) = (counts[0], counts[counts.len() - 1]);
    print!("{:>9}", format!("{first}→{last}"));
    for &b in backends {
        let ratio = results[&(b, last)].tasks_per_sec / results[&(b, first)].tasks_per_sec;
        print!(" | {:>17.2}×", ratio);
    }
    if agent_ms == 0 {
        println!("   (target on PostgreSQL, 1→4: ≥ 2.5×)");
    } else {
        println!();
    }
    // With every core busy on the pipeline, throughput is at most cores / CPU per
    // task: the most any number of workers could reach on this machine.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    print!("{:>9}", "ceiling");
    for &b in backends {
        let one = &results[&(b, first)];
        let ceiling = cores / one.cpu.total();
        print!(
            " | {:>18}",
            format!("{ceiling:.2} = {:.2}×", ceiling / one.tasks_per_sec)
        );
    }
    println!("   ({cores} cores all for the pipeline ÷ CPU seconds per task with {first} worker)");
    println!();
    println!(
        "{:<22} {:>7} {:>7} {:>9} {:>7}  {:>5}  {:>7}  tasks per worker",
        "CPU seconds per task", "gaffer", "agents", "postgres", "total", "busy", "p50"
    );
    for &b in backends {
        for &n in counts {
            let m = &results[&(b, n)];
            let c = m.cpu;
            println!(
                "{:<22} {:>7.3} {:>7.3} {:>9.3} {:>7.3}  {:>4.0}%  {:>5.0}ms  {:?}",
                format!("{} × {n}", b.name()),
                c.gaffer,
                c.children,
                c.postgres,
                c.total(),
                m.machine_busy * 100.0,
                m.latency_p50.as_secs_f64() * 1e3,
                m.spread
            );
        }
    }
    println!(
        "(gaffer: the worker processes; agents: what they ran — fake agents, git, checks; busy: the whole machine's CPUs, anyone's; p50: queued → done)"
    );
}
