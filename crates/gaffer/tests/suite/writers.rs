//! SQLite writers never wait blindly (issue #16): four gaffer processes on one
//! SQLite file — two `gaffer run` loops, a `gaffer serve` (its workers' heartbeats)
//! and a `gaffer task list` loop — for two minutes (`GAFFER_STRESS_SECS`). Every
//! write transaction reports how long it waited for the write lock
//! (`gaffer_store::lock`); no append may wait a second or more, and no process may
//! log `database is locked`. Prints the p99 and the max of the waits.

use super::failover::Proc;
use super::run::Bench;
use super::support::{fixture_repo, CHECK};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// A second repository in the bench's home, like its `demo`.
fn second_repo(b: &Bench) -> PathBuf {
    let repo = b.home.dir.path().join("demo2");
    fixture_repo(&repo, "# demo2\n", CHECK);
    repo
}

/// The lock waits (ms) a process logged, by what waited (`append`, `heartbeat`, …).
fn waits(log: &Path) -> Vec<(String, u64)> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .filter(|l| l.contains("gaffer_store::lock"))
        .filter_map(|l| {
            let field = |name: &str| {
                l.split_whitespace()
                    .find_map(|w| w.strip_prefix(name))
                    .map(|v| v.trim_matches('"').to_owned())
            };
            let wait = field("wait_ms=")?.parse().ok()?;
            Some((field("what=")?, wait))
        })
        .collect()
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

#[test]
fn four_processes_on_one_sqlite_file_never_wait_a_second_for_the_write_lock() {
    let secs: u64 = std::env::var("GAFFER_STRESS_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(120);
    let b = Bench::new();
    gaffer_testkit::scenario::write_install_section_cycle(&b.home.dir.path().join("scenarios"), 0)
        .unwrap();
    let repos = [b.repo.clone(), second_repo(&b)];
    let logs = b.home.dir.path().join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let logged = |cmd: &mut std::process::Command, name: &str| {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(logs.join(format!("{name}.log")))
            .unwrap();
        cmd.env("RUST_LOG", "gaffer_store::lock=debug,warn")
            .stdin(Stdio::null())
            .stderr(file);
    };
    // Registered first, so that the runs do not race to register them.
    for repo in &repos {
        let out = b
            .gaffer_std()
            .args(["project", "add"])
            .arg(repo)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    let mut serve = b.gaffer_std();
    serve
        .args(["serve", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped());
    logged(&mut serve, "serve");
    let mut serve = serve.spawn().unwrap();
    let mut first = String::new();
    BufReader::new(serve.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(!first.is_empty(), "gaffer serve exited at start");
    let serve = Proc(serve);

    let until = Instant::now() + Duration::from_secs(secs);
    let (done, lists) = std::thread::scope(|s| {
        let runs: Vec<_> = repos
            .iter()
            .enumerate()
            .map(|(n, repo)| {
                let (b, logged) = (&b, &logged);
                s.spawn(move || {
                    let mut done = 0;
                    while Instant::now() < until {
                        let mut run = b.gaffer_std();
                        run.args(["run", "Add an installation section to README", "--repo"])
                            .arg(repo)
                            .args(["--yes", "--json"])
                            .stdout(Stdio::piped());
                        logged(&mut run, &format!("run{n}"));
                        let out = run.output().unwrap();
                        let stdout = String::from_utf8_lossy(&out.stdout);
                        let last: Vec<&str> = stdout.lines().rev().take(4).collect();
                        assert_eq!(
                            out.status.code(),
                            Some(0),
                            "gaffer run in {} ended with: {last:?}",
                            repo.display(),
                        );
                        done += 1;
                    }
                    done
                })
            })
            .collect();
        let list = s.spawn(|| {
            let mut lists = 0;
            while Instant::now() < until {
                let mut list = b.gaffer_std();
                list.args(["task", "list"]).stdout(Stdio::null());
                logged(&mut list, "list");
                assert!(list.status().unwrap().success());
                lists += 1;
            }
            lists
        });
        let done: usize = runs.into_iter().map(|r| r.join().unwrap()).sum();
        (done, list.join().unwrap())
    });
    drop(serve);

    let mut appends = Vec::new();
    let mut all = Vec::new();
    for entry in std::fs::read_dir(&logs).unwrap().flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap();
        assert!(
            !text.contains("database is locked"),
            "{}: {}",
            entry.path().display(),
            text.lines()
                .filter(|l| l.contains("database is locked"))
                .take(5)
                .collect::<Vec<_>>()
                .join("\n")
        );
        for (what, wait) in waits(&entry.path()) {
            if what == "append" {
                appends.push(wait);
            }
            all.push((what, wait));
        }
    }
    appends.sort_unstable();
    let mut every: Vec<u64> = all.iter().map(|(_, w)| *w).collect();
    every.sort_unstable();
    let worst = all.iter().max_by_key(|(_, w)| *w);
    println!(
        "4 processes on one SQLite file for {secs} s: {done} tasks run to done, {lists} task lists; \
         {} appends waited p50 {} ms, p99 {} ms, max {} ms for the write lock; \
         all {} write transactions: p99 {} ms, max {:?}",
        appends.len(),
        percentile(&appends, 0.5),
        percentile(&appends, 0.99),
        appends.last().copied().unwrap_or(0),
        every.len(),
        percentile(&every, 0.99),
        worst,
    );
    assert!(done >= 2, "the runs did not finish a task each");
    assert!(
        appends.len() > 100,
        "too few appends logged: {}",
        appends.len()
    );
    assert!(
        appends.last().copied().unwrap_or(0) < 1000,
        "an append waited a second or more for the write lock"
    );
}

/// Issue #17: read-only commands warned `closed pool` about half the time (their
/// follower read after the pool closed), and each exit forced a WAL checkpoint that
/// waited for other processes' readers while holding the write lock (`journal
/// verify` logged a 3 s `wal_checkpoint`). Beside a reader that keeps an old
/// snapshot open, they now read and exit without a warning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_commands_beside_a_reader_log_nothing() {
    use sqlx::Connection;
    let b = Bench::new();
    let quiet = |args: &[&str]| {
        let out = b.gaffer_std().args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "gaffer {args:?}: {stderr}");
        assert!(
            !stderr.contains("WARN") && !stderr.contains("closed pool"),
            "gaffer {args:?} logged: {stderr}"
        );
    };
    quiet(&["project", "add", b.repo.to_str().unwrap(), "--name", "one"]);
    // Another process reads from a snapshot older than the next write.
    let mut reader =
        sqlx::SqliteConnection::connect(&format!("sqlite://{}", b.home.db().display()))
            .await
            .unwrap();
    sqlx::query("BEGIN").execute(&mut reader).await.unwrap();
    let (events,): (i64,) = sqlx::query_as("SELECT count(*) FROM events")
        .fetch_one(&mut reader)
        .await
        .unwrap();
    assert!(events > 0);
    quiet(&[
        "project",
        "add",
        second_repo(&b).to_str().unwrap(),
        "--name",
        "two",
    ]);
    for _ in 0..6 {
        quiet(&["task", "list"]);
        quiet(&["journal", "verify"]);
        quiet(&["approvals"]);
    }
    sqlx::query("COMMIT").execute(&mut reader).await.unwrap();
}
