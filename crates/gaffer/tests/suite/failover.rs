//! Many workers on one PostgreSQL, with crashes: the real binary (`gaffer serve`
//! and `gaffer worker` processes), real git, the fake Claude Code with zero latency.
//!
//! - Failover: 3 workers and 1 server run 100 tasks while a random worker is
//!   SIGKILLed every few seconds and restarted. Every task ends done; the journal
//!   shows no overlapping leases; no non-idempotent effect ran again unless a
//!   person approved the re-run the recovery rules asked for; every commit step
//!   made exactly one commit; `gaffer journal verify` passes.
//! - Fencing: a worker paused (SIGSTOP) past its lease, then resumed, writes
//!   nothing more for its task once another worker took the task over.

use super::support::{fixture_repo, Home, CHECK};
use gaffer_core::{Event, StreamId};
use gaffer_store::{Durability, Journal};
use gaffer_testkit::git::git;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const PROJECTS: usize = 10;
const TASKS: usize = 100;
/// Short leases so a killed worker's tasks are taken over within seconds.
const LEASE_SECS: &str = "3";

/// A gaffer process, killed when dropped.
pub(super) struct Proc(pub(super) Child);

impl Drop for Proc {
    fn drop(&mut self) {
        // A stopped process must be continued to die promptly.
        signal(self.0.id(), "CONT");
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn signal(pid: u32, sig: &str) {
    let _ = Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .stderr(Stdio::null())
        .status();
}

/// Everything the processes share: one database, one data dir (worktrees), the
/// fake agents' scripts and effect log.
pub(super) struct Cluster {
    pub(super) home: Home,
    url: String,
    pub(super) journal: Arc<dyn Journal>,
}

impl Cluster {
    pub(super) async fn new() -> Option<Self> {
        if !gaffer_testkit::postgres::available() {
            return None;
        }
        let url = gaffer_testkit::postgres::fresh_database().await;
        let home = Home::new();
        home.write_config("");
        let scenarios = home.dir.path().join("scenarios");
        std::fs::create_dir_all(&scenarios).unwrap();
        gaffer_testkit::scenario::write_install_section_cycle(&scenarios, 0).unwrap();
        let journal = gaffer_store::open(&url, Durability::Normal).await.unwrap();
        Some(Self { home, url, journal })
    }

    fn dir(&self) -> &Path {
        self.home.dir.path()
    }

    /// A client with the cluster's local secret (its servers share one data dir).
    pub(super) fn http(&self) -> reqwest::Client {
        self.home.http()
    }

    fn effects(&self) -> PathBuf {
        self.dir().join("effects.log")
    }

    /// `gaffer ARGS` with the cluster's environment.
    fn gaffer(&self, args: &[&str]) -> Command {
        let d = self.dir();
        let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("gaffer"));
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", d)
            .env("GAFFER_CONFIG", self.home.config())
            .env("GAFFER_DATA_DIR", self.home.data())
            .env("GAFFER_DATABASE_URL", &self.url)
            .env("GAFFER_WORKERS_LEASE_SECS", LEASE_SECS)
            .env(
                "GAFFER_CLAUDE_BIN",
                gaffer_testkit::bins::fake_bin("fake-claude"),
            )
            .env("GAFFER_FAKE_SCENARIO", d.join("scenarios"))
            .env("GAFFER_FAKE_STATE_DIR", d.join("fake-state"))
            .env("GAFFER_FAKE_LOG", self.effects())
            .env(
                "GAFFER_AGENTS_ENV",
                gaffer_testkit::scenario::FAKE_ENV_NAMES,
            )
            .env("CLAUDE_CONFIG_DIR", d.join("fake-state/claude"))
            .env("GAFFER_SANDBOX_WRITABLE", super::run::fake_writable(d))
            .env("USER", "tester")
            .args(args);
        cmd
    }

    pub(super) fn ok(&self, args: &[&str]) -> String {
        let out = self.gaffer(args).output().unwrap();
        assert!(
            out.status.success(),
            "gaffer {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// A repository with a README and a check that wants an installation section,
    /// registered with auto-approval on (plans need no person).
    pub(super) fn project(&self, name: &str) -> PathBuf {
        let repo = self.dir().join(name);
        fixture_repo(&repo, "# demo\n", CHECK);
        self.ok(&["project", "add", repo.to_str().unwrap(), "--name", name]);
        self.ok(&["auto", "on", "--project", name]);
        repo
    }

    /// Start a process and wait for its first line on stdout (it is up).
    pub(super) fn start(&self, args: &[&str], stderr: Option<&Path>) -> (Proc, String) {
        let mut cmd = self.gaffer(args);
        cmd.stdout(Stdio::piped());
        match stderr {
            Some(path) => cmd.stderr(std::fs::File::create(path).unwrap()),
            None => cmd.stderr(Stdio::null()),
        };
        let mut child = cmd.spawn().unwrap();
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        assert!(!first.is_empty(), "gaffer {args:?} exited at start");
        (Proc(child), first)
    }

    pub(super) fn worker(&self, stderr: Option<&Path>) -> (Proc, String) {
        let (p, first) = self.start(&["worker", "--count", "2"], stderr);
        // "gaffer worker <id> is running …"
        let id = first.split_whitespace().nth(2).unwrap().to_owned();
        (p, id)
    }

    async fn stages(&self) -> BTreeMap<String, String> {
        self.journal
            .tasks(&gaffer_store::TaskFilter {
                limit: Some(10_000),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_iter()
            .map(|t| (t.id, t.stage))
            .collect()
    }
}

/// No overlapping leases: in each task's stream, the lease generation of the
/// events appended under a lease never goes back, each generation belongs to one
/// worker, and each generation's first event is its own `task_leased`.
async fn assert_no_overlapping_leases(journal: &Arc<dyn Journal>, task: &str) -> usize {
    let stream = StreamId::from(task);
    let writers = journal.event_writers(&stream).await.unwrap();
    let events = journal.stream_events(&stream, 0).await.unwrap();
    let mut newest = 0;
    let mut owners: HashMap<i64, String> = HashMap::new();
    for (w, e) in writers.iter().zip(&events) {
        assert_eq!(w.seq, e.seq);
        let (Some(worker), Some(generation)) = (&w.worker_id, w.lease_generation) else {
            continue;
        };
        assert!(
            generation >= newest,
            "task {task} seq {}: generation {generation} wrote after generation {newest}",
            w.seq
        );
        if generation > newest {
            assert_eq!(
                e.event,
                Event::TaskLeased {
                    worker_id: worker.clone(),
                    generation
                },
                "task {task}: generation {generation} began without recording its lease"
            );
            newest = generation;
        }
        let owner = owners.entry(generation).or_insert_with(|| worker.clone());
        assert_eq!(
            owner, worker,
            "task {task}: two workers wrote as generation {generation}"
        );
    }
    owners.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_killed_at_random_lose_no_task_and_repeat_no_effect() {
    let Some(c) = Cluster::new().await else {
        return;
    };
    let repos: Vec<(String, PathBuf)> = (0..PROJECTS)
        .map(|i| {
            let name = format!("p{i}");
            let repo = c.project(&name);
            (name, repo)
        })
        .collect();
    let (_server, first) = c.start(&["serve", "--listen", "127.0.0.1:0"], None);
    let base = format!(
        "http://{}",
        first
            .split("http://")
            .nth(1)
            .unwrap()
            .split('/')
            .next()
            .unwrap()
    );
    let http = c.http();
    let mut workers: Vec<(Proc, String)> = (0..3).map(|_| c.worker(None)).collect();
    for i in 0..TASKS {
        let r = http
            .post(format!("{base}/api/tasks"))
            .json(&json!({"project": repos[i % PROJECTS].0, "request": format!("Add an installation section to README ({i})")}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    }

    // Kill a random worker every few seconds and start a new one in its place,
    // while a person approves what the recovery rules hand to a person.
    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    eprintln!("failover seed {seed}");
    let mut next_kill = Instant::now() + Duration::from_secs(2);
    let deadline = Instant::now() + Duration::from_secs(420);
    let (mut kills, mut approved) = (0, Vec::<String>::new());
    loop {
        let stages = c.stages().await;
        let finished = stages
            .values()
            .filter(|s| ["done", "failed", "cancelled", "blocked"].contains(&s.as_str()))
            .count();
        if finished == TASKS {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{finished} of {TASKS} tasks finished in time: {stages:?}"
        );
        if Instant::now() >= next_kill {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let victim = (seed >> 33) as usize % workers.len();
            let (mut p, id) = workers.remove(victim);
            let _ = p.0.kill();
            let _ = p.0.wait();
            eprintln!("killed worker {id} ({finished} tasks finished)");
            kills += 1;
            workers.push(c.worker(None));
            next_kill = Instant::now() + Duration::from_millis(2500);
        }
        let pending: Value = http
            .get(format!("{base}/api/approvals?state=pending"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        for a in pending.as_array().unwrap() {
            assert_eq!(
                a["kind"], "manual",
                "only crash recovery asks a person: {a}"
            );
            let id = a["id"].as_str().unwrap();
            let r = http
                .post(format!("{base}/api/approvals/{id}/decision"))
                .json(&json!({"decision": "approve", "note": "run it again"}))
                .send()
                .await
                .unwrap();
            assert!(r.status() == 200 || r.status() == 409, "{}", r.status());
            approved.push(a["task_id"].as_str().unwrap().to_owned());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!(
        "{kills} kills; {} re-runs approved by a person",
        approved.len()
    );
    assert!(kills >= 3, "the run was too short to kill workers: {kills}");

    let stages = c.stages().await;
    assert_eq!(stages.len(), TASKS);
    let mut not_done = Vec::new();
    for (id, stage) in stages.iter().filter(|(_, s)| *s != "done") {
        // Why, in the journal's words: the outcome and every failed step's error.
        let view = c.journal.task(id).await.unwrap().unwrap();
        let errors: Vec<String> = view
            .steps
            .iter()
            .filter_map(|s| Some(format!("{}: {}", s.step_id, s.error.as_deref()?)))
            .collect();
        not_done.push(format!("{id} {stage}: {:?} {errors:?}", view.task.outcome));
    }
    assert!(
        not_done.is_empty(),
        "tasks not done:\n{}",
        not_done.join("\n")
    );

    let log = gaffer_testkit::scenario::read_log(&c.effects());
    let mut taken_over = 0;
    for (n, id) in stages.keys().enumerate() {
        if assert_no_overlapping_leases(&c.journal, id).await > 1 {
            taken_over += 1;
        }
        let view = c.journal.task(id).await.unwrap().unwrap();
        // The owner's write is the non-idempotent effect: once, unless a person
        // approved running the interrupted turn again (one more at most per approval).
        let writes = log
            .iter()
            .filter(|l| {
                l.starts_with("fake-claude write README.md") && l.ends_with(&format!("task={id}"))
            })
            .count();
        let reruns = approved.iter().filter(|t| *t == id).count();
        assert!(writes >= 1, "task {id}: the owner never wrote");
        assert!(
            writes <= 1 + reruns,
            "task {id}: {writes} owner writes with {reruns} approved re-runs"
        );
        // Each commit step made exactly one commit on the task's branch.
        let receipt = |step: &str| -> Value {
            let s = view.steps.iter().find(|s| s.step_id == step).unwrap();
            serde_json::from_str(s.receipt.as_deref().unwrap()).unwrap()
        };
        let branch = receipt("worktree")["branch"].as_str().unwrap().to_owned();
        let repo = &repos
            .iter()
            .find(|(_, r)| {
                git(
                    r,
                    &["branch", "--list", &branch, "--format=%(refname:short)"],
                ) == branch
            })
            .unwrap_or_else(|| panic!("task {id}: branch {branch} in no repository"))
            .1;
        let trailers = git(
            repo,
            &[
                "log",
                "--format=%(trailers:key=Gaffer-Step,valueonly)",
                &format!("main..{branch}"),
            ],
        );
        let mut keys: Vec<&str> = trailers.lines().filter(|l| !l.trim().is_empty()).collect();
        keys.sort();
        let mut expected: Vec<String> = view
            .steps
            .iter()
            .filter(|s| s.step_id.starts_with("commit"))
            .map(|s| format!("{id}/{}", s.step_id))
            .collect();
        expected.sort();
        assert_eq!(
            keys, expected,
            "task {id} ({n}): one commit per commit step"
        );
    }
    eprintln!("{taken_over} tasks were taken over by another worker");
    assert!(
        taken_over > 0,
        "no task was ever taken over: the kills tested nothing"
    );

    let verify = c.gaffer(&["journal", "verify"]).output().unwrap();
    assert!(
        verify.status.success(),
        "{}",
        String::from_utf8_lossy(&verify.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_paused_past_its_lease_writes_nothing_more_for_its_task() {
    let Some(c) = Cluster::new().await else {
        return;
    };
    c.project("demo");
    // The owner's turn takes a while: the worker is paused in the middle of it.
    std::fs::write(
        c.dir().join("scenarios/owner.json"),
        json!({ "cycle": true, "turns": [{ "steps": [{ "write_file": { "path": "README.md", "content": "# demo\n\n## Installation\n" } }, { "sleep_ms": 4000 }, { "say": "added" }] }] }).to_string(),
    )
    .unwrap();
    let a_log = c.dir().join("worker-a.err");
    let (a, a_id) = c.worker(Some(&a_log));
    // The task is queued through the app service, as `gaffer serve` would.
    let app = gaffer_app::App::new(c.journal.clone(), gaffer_app::Policy::default());
    let task = app
        .create_task(
            gaffer_app::NewTask {
                project: "demo".into(),
                request: "Add an installation section to README".into(),
                agent: None,
                base: None,
                auto_approve: false,
                issue: None,
                key: None,
                after: Vec::new(),
            },
            gaffer_core::Actor::user("tester", "test"),
        )
        .await
        .unwrap()
        .id;
    // Wait until a worker runs the owner's turn: the fake has written.
    let deadline = Instant::now() + Duration::from_secs(120);
    let runner = loop {
        let log = gaffer_testkit::scenario::read_log(&c.effects());
        if log
            .iter()
            .any(|l| l.starts_with("fake-claude write") && l.ends_with(&format!("task={task}")))
        {
            break c.journal.lease(&task).await.unwrap().unwrap();
        }
        assert!(Instant::now() < deadline, "the owner never started");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(runner.worker_id, a_id, "worker a runs the task");
    signal(a.0.id(), "STOP");
    let (_b, b_id) = c.worker(None);
    // b takes the task over once a's lease has expired.
    let deadline = Instant::now() + Duration::from_secs(60);
    let taken = loop {
        let lease = c.journal.lease(&task).await.unwrap().unwrap();
        if lease.worker_id == b_id {
            break lease;
        }
        assert!(Instant::now() < deadline, "b never took the task over");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(taken.generation, runner.generation + 1);
    // `gaffer workers` shows who holds what: b, live, with the task; a not live.
    let listed: Value = serde_json::from_str(&c.ok(&["workers", "--json"])).unwrap();
    let live: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["id"].as_str().unwrap())
        .collect();
    assert_eq!(live, [b_id.as_str()], "only b is live: {listed}");
    assert_eq!(listed[0]["leases"][0]["task_id"], task.as_str());
    assert_eq!(listed[0]["leases"][0]["generation"], taken.generation);
    let text = c.ok(&["workers", "--all"]);
    assert!(text.contains(&format!("{a_id}  lost")), "{text}");
    assert!(
        text.contains(&format!("    {task}  generation {}", taken.generation)),
        "{text}"
    );
    // The recovery rules: the interrupted owner turn is not re-run blindly; a person is asked.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let view = c.journal.task(&task).await.unwrap().unwrap();
        if view
            .approvals
            .iter()
            .any(|a| a.kind == "manual" && a.state == "pending")
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no manual approval: {:?}",
            view.steps
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let head_before = c
        .journal
        .head(&StreamId::from(task.as_str()))
        .await
        .unwrap();

    // a wakes up after its fake agent finished the turn: it has things to record.
    signal(a.0.id(), "CONT");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&a_log)
        .unwrap_or_default()
        .contains("is no longer held")
    {
        assert!(
            Instant::now() < deadline,
            "worker a never noticed: {}",
            std::fs::read_to_string(&a_log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Give a every chance to write (its turn's outcome, a cancellation) — nothing lands.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let writers = c
        .journal
        .event_writers(&StreamId::from(task.as_str()))
        .await
        .unwrap();
    let events = c
        .journal
        .stream_events(&StreamId::from(task.as_str()), 0)
        .await
        .unwrap();
    let b_leased = events
        .iter()
        .find(|e| {
            e.event
                == Event::TaskLeased {
                    worker_id: b_id.clone(),
                    generation: taken.generation,
                }
        })
        .unwrap()
        .seq;
    let late: Vec<_> = writers
        .iter()
        .filter(|w| w.worker_id.as_deref() == Some(a_id.as_str()) && w.seq > b_leased)
        .collect();
    assert!(
        late.is_empty(),
        "worker a wrote after b took over: {late:?}"
    );
    assert!(writers
        .iter()
        .any(|w| w.worker_id.as_deref() == Some(a_id.as_str())));
    assert_eq!(
        c.journal
            .head(&StreamId::from(task.as_str()))
            .await
            .unwrap(),
        head_before,
        "nothing was appended after a resumed"
    );
    assert_no_overlapping_leases(&c.journal, &task).await;
    drop(a);
}
