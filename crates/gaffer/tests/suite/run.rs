//! `gaffer run` end to end: the real binary, real git, the fake Claude Code, and
//! SIGKILL at every stage boundary and in the middle of an agent turn.
use super::support::{fixture_repo, Home, CHECK};
use gaffer_store::{Durability, Journal, SqliteJournal};
use gaffer_testkit::git::git;
use predicates::prelude::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub const REQUEST: &str = "Add an installation section to README";
pub const README_DONE: &str =
    "# demo\n\nA demo project.\n\n## Installation\n\n    cargo install demo\n";

/// A home with a fixture repository (check: README has an Installation section)
/// and a scenario directory for the fake agents.
pub struct Bench {
    pub home: Home,
    pub repo: PathBuf,
}

impl Bench {
    pub fn new() -> Self {
        let home = Home::new();
        home.write_config("");
        let repo = home.dir.path().join("demo");
        fixture_repo(
            &repo,
            "# demo\n\nA demo project.\n",
            &format!("sleep 0.2; {CHECK}"),
        );
        std::fs::create_dir_all(home.dir.path().join("scenarios")).unwrap();
        std::fs::create_dir_all(home.dir.path().join("tmp")).unwrap();
        Self { home, repo }
    }

    /// The temp dir of every gaffer this bench starts (agents get private dirs in it).
    fn tmp(&self) -> PathBuf {
        self.home.dir.path().join("tmp")
    }

    /// The agents' private temp dirs (`gaffer-<agent>-<uuid>`) in [`Bench::tmp`].
    fn private_temp_dirs(&self) -> Vec<PathBuf> {
        std::fs::read_dir(self.tmp())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("gaffer-"))
            .map(|e| e.path())
            .collect()
    }

    pub fn script(&self, role: &str, turns: Vec<Value>) {
        let path = self
            .home
            .dir
            .path()
            .join("scenarios")
            .join(format!("{role}.json"));
        std::fs::write(path, json!({ "turns": turns }).to_string()).unwrap();
    }

    /// The usual three roles; every turn a little slow so a crash can land inside it.
    pub fn script_all(&self) {
        let plan = json!({ "subtasks": [{ "title": "Add an installation section", "description": "write it", "files": ["README.md"], "acceptance": "README has ## Installation" }] });
        let planner =
            json!({ "steps": [{ "sleep_ms": 300 }, { "say": format!("```json\n{plan}\n```") }] });
        self.script("planner", vec![planner.clone(), planner.clone(), planner]);
        let owner = json!({ "steps": [{ "write_file": { "path": "README.md", "content": README_DONE } }, { "sleep_ms": 400 }, { "say": "added the section" }] });
        self.script("owner", vec![owner.clone(), owner]);
        let review = json!({ "steps": [{ "sleep_ms": 300 }, { "say": "```json\n{\"verdict\":\"done\"}\n```" }] });
        self.script("reviewer", vec![review.clone(), review.clone(), review]);
    }

    /// One turn per role, each reporting what it spent: the planner 1200 input and
    /// 300 output tokens for $0.4123, the owner 2000, 500 and 1000 cached for $0.50,
    /// the reviewer 800 and 100 for $0.10 (5900 tokens, $1.0123 in all).
    pub fn script_priced(&self) {
        let plan = json!({ "subtasks": [{ "title": "Add an installation section", "description": "write it", "files": ["README.md"], "acceptance": "README has ## Installation" }] });
        let usage = |i: u64, o: u64, c: u64| json!({ "input_tokens": i, "output_tokens": o, "cached_input_tokens": c });
        self.script(
        "planner",
        vec![json!({ "steps": [{ "say": format!("```json\n{plan}\n```") }], "usage": usage(1200, 300, 0), "cost_usd": 0.4123 })],
    );
        self.script(
        "owner",
        vec![json!({ "steps": [{ "write_file": { "path": "README.md", "content": README_DONE } }, { "say": "added" }], "usage": usage(2000, 500, 1000), "cost_usd": 0.5 })],
    );
        self.script(
        "reviewer",
        vec![json!({ "steps": [{ "say": "```json\n{\"verdict\":\"done\"}\n```" }], "usage": usage(800, 100, 0), "cost_usd": 0.1 })],
    );
    }

    pub fn log(&self) -> PathBuf {
        self.home.dir.path().join("effects.log")
    }

    pub fn gaffer_std(&self) -> Command {
        let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("gaffer"));
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.home.dir.path())
            .env("GAFFER_CONFIG", self.home.config())
            .env("GAFFER_DATA_DIR", self.home.data())
            .env("TMPDIR", self.tmp());
        self.fake_env(&mut cmd);
        cmd
    }

    fn fake_env(&self, cmd: &mut Command) {
        let d = self.home.dir.path();
        cmd.env(
            "GAFFER_CLAUDE_BIN",
            gaffer_testkit::bins::fake_bin("fake-claude"),
        )
        .env("GAFFER_FAKE_SCENARIO", d.join("scenarios"))
        .env("GAFFER_FAKE_STATE_DIR", d.join("fake-state"))
        .env("GAFFER_FAKE_LOG", self.log())
        .env(
            "GAFFER_AGENTS_ENV",
            gaffer_testkit::scenario::FAKE_ENV_NAMES,
        )
        .env("CLAUDE_CONFIG_DIR", d.join("fake-state/claude"))
        .env("USER", "tester")
        .env("GAFFER_SANDBOX_WRITABLE", fake_writable(d));
    }

    fn owner_spawns(&self) -> usize {
        std::fs::read_to_string(self.log())
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("spawn role=owner"))
            .count()
    }
}

/// What the fake agents write besides the worktree (scenario cursors, their state,
/// the effect log), so they keep working inside gaffer's sandbox.
pub fn fake_writable(d: &Path) -> std::ffi::OsString {
    for dir in ["scenarios", "fake-state"] {
        std::fs::create_dir_all(d.join(dir)).unwrap();
    }
    let log = d.join("effects.log");
    if !log.exists() {
        std::fs::write(&log, "").unwrap();
    }
    std::env::join_paths([d.join("scenarios"), d.join("fake-state"), log]).unwrap()
}

/// The JSON a command printed, after checking that it exited 0 (else its stderr).
pub fn success_json(out: &std::process::Output) -> Value {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    json_of(out)
}

/// What a command printed as JSON: the document, or for JSON Lines (`gaffer run
/// --json`, whose last line is the summary) the last line.
pub fn json_of(out: &std::process::Output) -> Value {
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(&text)
        .or_else(|_| serde_json::from_str(text.trim_end().lines().last().unwrap_or_default()))
        .unwrap_or_else(|e| {
            panic!(
                "not JSON ({e}): stdout={text} stderr={}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
}

#[test]
fn run_adds_an_installation_section_and_prints_a_json_summary() {
    let b = Bench::new();
    b.script_all();
    let out = b
        .gaffer_std()
        .args(["run", REQUEST, "--repo"])
        .arg(&b.repo)
        .args(["--yes", "--json", "--agent", "claude"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let s = success_json(&out);
    assert_eq!(s["state"], "done");
    let branch = s["branch"].as_str().unwrap();
    assert!(branch.starts_with("gaffer/t-"), "{branch}");
    assert_eq!(s["commits"].as_array().unwrap().len(), 1);
    assert!(
        s["tokens"]["input"].is_u64() && s["cost_usd"].is_number(),
        "{s}"
    );
    assert!(s["task_id"].as_str().unwrap().starts_with("t-"), "{s}");
    assert!(git(&b.repo, &["show", &format!("{branch}:README.md")]).contains("## Installation"));
    // `run` was the task's worker, and let the task go once it ended.
    let shown = success_json(
        &b.gaffer_std()
            .args(["task", "show", s["task_id"].as_str().unwrap(), "--json"])
            .output()
            .unwrap(),
    );
    let worker = &shown["worker"];
    assert_eq!(
        (&worker["state"], &worker["generation"]),
        (&json!("released"), &json!(1)),
        "{shown}"
    );
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    assert_eq!(worker["host"], json!(host.trim()), "{shown}");
    let id = format!("{}/{}/", host.trim(), worker["pid"]);
    assert!(
        worker["worker_id"].as_str().unwrap().starts_with(&id),
        "{shown}"
    );
    // The check command was detected from the Makefile and shown.
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("make check"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn run_shows_live_progress_as_text() {
    let b = Bench::new();
    b.script_all();
    let out = b
        .gaffer_std()
        .args(["run", REQUEST, "--repo"])
        .arg(&b.repo)
        .arg("--yes")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Progress on stderr, the summary on stdout.
    let progress = String::from_utf8_lossy(&out.stderr);
    for expected in [
        "▸ planning",
        "▸ coding",
        "✓ commit/1",
        "verdict: done",
        "check passed",
        "■ done",
    ] {
        assert!(
            progress.contains(expected),
            "missing {expected:?} in:\n{progress}"
        );
    }
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(summary.contains("branch  gaffer/"), "{summary}");
    assert!(!summary.contains("▸ planning"), "{summary}");
    // Not a terminal: no colour, no cursor movement, in either.
    assert!(
        !out.stderr.contains(&0x1b) && !out.stdout.contains(&0x1b),
        "escape sequences written to a pipe:\n{progress}"
    );
}

/// The running count of tokens and money ends where the summary and `task show`
/// do: the finished steps' receipts, money rounded the same way everywhere.
#[test]
fn the_running_spend_ends_at_the_summarys_total() {
    let b = Bench::new();
    b.script_priced();
    let out = b
        .gaffer_std()
        .args(["run", REQUEST, "--repo"])
        .arg(&b.repo)
        .arg("--yes")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let progress = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{progress}");
    let last = progress
        .lines()
        .filter_map(|l| l.split_once("tokens so far: ").map(|(_, rest)| rest))
        .next_back()
        .unwrap_or_else(|| panic!("no running count:\n{progress}"));
    // 5900 tokens, cached ones included; $1.0123 spent, shown in cents from a
    // dollar up.
    assert_eq!(last, "5900 · $1.01", "{progress}");
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(
        summary.contains("tokens  4000 in, 900 out (1000 cached) · $1.01"),
        "{summary}"
    );
    let listed = json_of(
        &b.gaffer_std()
            .args(["task", "list", "--json"])
            .output()
            .unwrap(),
    );
    let out = b
        .gaffer_std()
        .args(["task", "show", listed[0]["id"].as_str().unwrap()])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("usage    5900 tokens · $1.01"), "{shown}");
}

#[test]
fn run_json_streams_one_object_per_event_then_the_summary() {
    let b = Bench::new();
    b.script_all();
    let out = b
        .gaffer_std()
        .args(["run", REQUEST, "--repo"])
        .arg(&b.repo)
        .args(["--yes", "--json"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let (summary, events) = lines.split_last().unwrap();
    assert_eq!(summary["type"], "summary");
    assert_eq!(summary["state"], "done");
    let id = summary["task_id"].as_str().unwrap();
    // Every event of the task, in order, each once, in the API's stream shape.
    let seqs: Vec<i64> = events.iter().map(|e| e["seq"].as_i64().unwrap()).collect();
    assert_eq!(seqs, (1..=seqs.len() as i64).collect::<Vec<_>>());
    assert!(events.iter().all(|e| e["stream_id"] == id));
    assert_eq!(events[0]["type"], "task_created");
    assert_eq!(events[0]["event"]["request"], REQUEST);
    assert_eq!(events.last().unwrap()["type"], "task_done");
    assert!(events.iter().any(|e| e["type"] == "approval_decided"));
}

/// `gaffer run … --json | head -1`: the reader leaves after the first line; the
/// run goes on to the end (progress still on stderr), exits with the task's code,
/// and never panics.
#[test]
fn run_piped_into_head_goes_on_and_ends_quietly() {
    use std::io::BufRead;
    let b = Bench::new();
    b.script_all();
    let mut child = b
        .gaffer_std()
        .args(["run", REQUEST, "--repo"])
        .arg(&b.repo)
        .args(["--yes", "--json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    // The reader is gone: every later write meets a closed pipe.
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
        "{stderr}"
    );
    assert!(stderr.contains("■ done"), "{stderr}");
    let event: Value = serde_json::from_str(&first).unwrap();
    assert_eq!(event["type"], "task_created");
    let listed = json_of(
        &b.gaffer_std()
            .args(["task", "list", "--json"])
            .output()
            .unwrap(),
    );
    assert_eq!(listed[0]["stage"], "done", "{listed}");
}

fn no_tasks(b: &Bench) {
    let out = b
        .gaffer_std()
        .args(["task", "list", "--json"])
        .output()
        .unwrap();
    assert_eq!(json_of(&out), json!([]), "something was stored");
}

#[test]
fn bad_input_is_refused_and_nothing_is_stored() {
    let b = Bench::new();
    let plain = b.home.dir.path().join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    let out = b
        .gaffer_std()
        .args(["run", REQUEST, "--repo"])
        .arg(&plain)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(78));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a git repository"));

    let out = b
        .gaffer_std()
        .args(["run", "   ", "--repo"])
        .arg(&b.repo)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("the request is empty"));

    let out = b
        .gaffer_std()
        .args(["run", REQUEST, "--project", "nope"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("gaffer project list"));

    let out = b
        .gaffer_std()
        .args(["run", REQUEST, "--repo"])
        .arg(&b.repo)
        .args(["--agent", "gpt"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(78));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown agent"));

    // A missing API key or agent CLI is found before anything is stored, naming
    // the variable or the executable to provide.
    let out = b
        .gaffer_std()
        .args(["run", REQUEST, "--repo"])
        .arg(&b.repo)
        .args(["--agent", "anthropic"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(78));
    assert!(String::from_utf8_lossy(&out.stderr).contains("ANTHROPIC_API_KEY is not set"));
    let only_git = b.home.dir.path().join("only-git");
    std::fs::create_dir_all(&only_git).unwrap();
    let git_bin = String::from_utf8(
        Command::new("sh")
            .args(["-c", "command -v git"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    std::os::unix::fs::symlink(git_bin.trim(), only_git.join("git")).unwrap();
    let out = b
        .gaffer_std()
        .env_remove("GAFFER_CLAUDE_BIN")
        .env("PATH", &only_git)
        .args(["run", REQUEST, "--repo"])
        .arg(&b.repo)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(78));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for says in [
        "`claude` is not installed",
        "GAFFER_CLAUDE_BIN",
        "npm install -g @anthropic-ai/claude-code",
        "--agent",
    ] {
        assert!(stderr.contains(says), "{says:?} in {stderr}");
    }
    let out = b
        .gaffer_std()
        .env(
            "GAFFER_CLAUDE_BIN",
            b.home.dir.path().join("no-such-claude"),
        )
        .args(["run", REQUEST, "--repo"])
        .arg(&b.repo)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(78));
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("no-such-claude, which is not an executable file"));

    std::fs::write(b.repo.join("README.md"), "local edit\n").unwrap();
    let out = b
        .gaffer_std()
        .args(["run", REQUEST, "--repo"])
        .arg(&b.repo)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(78));
    assert!(String::from_utf8_lossy(&out.stderr).contains("uncommitted changes"));
    no_tasks(&b);
    assert!(
        !b.home.data().join("worktrees").exists(),
        "a worktree was made"
    );
    assert_eq!(
        git(&b.repo, &["branch", "--list", "gaffer/*"]),
        "",
        "a branch was made"
    );
    let out = b
        .gaffer_std()
        .args(["project", "list", "--json"])
        .output()
        .unwrap();
    assert_eq!(
        json_of(&out),
        json!([]),
        "a project was registered by a refused run"
    );
}

#[test]
fn project_add_detects_the_check_and_refuses_non_repos() {
    let b = Bench::new();
    b.gaffer_std()
        .args(["project", "add"])
        .arg(b.repo.join("."))
        .args(["--name", "demo"])
        .assert_ok_contains("make check");
    let out = b
        .gaffer_std()
        .args(["project", "add"])
        .arg(b.home.dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(78));
    let out = b
        .gaffer_std()
        .args(["project", "list", "--json"])
        .output()
        .unwrap();
    let list = json_of(&out);
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(list[0]["check_command"], "make check");
}

trait AssertOk {
    fn assert_ok_contains(&mut self, text: &str);
}

impl AssertOk for Command {
    fn assert_ok_contains(&mut self, text: &str) {
        let out = self.output().unwrap();
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success() && all.contains(text), "{all}");
    }
}

/// Wait until the journal shows step `step` started (or later) for the only task.
pub fn wait_for_step(
    db: &Path,
    step: &str,
    child: &mut std::process::Child,
    rt: &tokio::runtime::Runtime,
) -> String {
    let deadline = Instant::now() + Duration::from_secs(180);
    let journal = loop {
        if db.exists() {
            if let Ok(j) = rt.block_on(SqliteJournal::open(db, Durability::Normal)) {
                break j;
            }
        }
        assert!(Instant::now() < deadline, "the journal never appeared");
        std::thread::sleep(Duration::from_millis(10));
    };
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("gaffer run exited ({status}) before step {step} started");
        }
        assert!(Instant::now() < deadline, "step {step} never started");
        let found = rt.block_on(async {
            let tasks = journal.tasks(&Default::default()).await.ok()?;
            let t = tasks.first()?;
            let view = journal.task(&t.id).await.ok()??;
            view.steps
                .iter()
                .any(|s| s.step_id == step && s.state != "intent_recorded")
                .then(|| t.id.clone())
        });
        if let Some(id) = found {
            return id;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn crash_and_resume(point: &str) {
    let b = Bench::new();
    b.script_all();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut child = b
        .gaffer_std()
        .args(["run", REQUEST, "--repo"])
        .arg(&b.repo)
        .args(["--yes", "--json"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let id = wait_for_step(&b.home.db(), point, &mut child, &rt);
    if point == "code/1" {
        // Inside the owner's turn: it has written, and is still working (the step
        // starts well before its agent on a busy machine: wait for the write).
        let deadline = Instant::now() + Duration::from_secs(60);
        while !std::fs::read_to_string(b.log())
            .unwrap_or_default()
            .contains("fake-claude write README.md")
        {
            assert!(Instant::now() < deadline, "the owner never wrote");
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    // The killed run's agents' private temp dirs are left: once their processes are
    // gone (nothing holds their locks) and they are old, the next start removes them.
    let left = b.private_temp_dirs();
    for dir in &left {
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::fs::File::open(dir).is_ok_and(|d| d.try_lock().is_err()) {
            assert!(
                Instant::now() < deadline,
                "{} is still held after its gaffer was killed",
                dir.display()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        if let Ok(d) = std::fs::File::open(dir) {
            d.set_modified(std::time::SystemTime::now() - Duration::from_secs(3600))
                .unwrap();
        }
    }
    if point == "code/1" {
        assert!(!left.is_empty(), "the owner's turn had no private temp dir");
    }

    // Restart. Whatever was in flight: an interrupted owner turn needs a human,
    // who approves it from another process; nothing else may ask.
    let mut resume = b
        .gaffer_std()
        .args(["task", "resume", &id, "--json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(180);
    let mut approved = Vec::new();
    while resume.try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < deadline,
            "resume after a crash at {point} never finished"
        );
        let out = b
            .gaffer_std()
            .args(["approvals", "--json"])
            .output()
            .unwrap();
        for a in json_of(&out).as_array().unwrap() {
            assert_eq!(
                a["kind"], "manual",
                "only a crashed owner turn may ask a human: {a}"
            );
            let id = a["id"].as_str().unwrap().to_owned();
            let out = b
                .gaffer_std()
                .args(["approve", &id, "--note", "run it again"])
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            approved.push(id);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = resume.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "resume after a crash at {point}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = json_of(&out);
    assert_eq!(s["state"], "done", "{s}");
    let branch = s["branch"].as_str().unwrap();
    assert_eq!(
        git(
            &b.repo,
            &["rev-list", "--count", &format!("main..{branch}")]
        ),
        "1",
        "exactly one commit per subtask (crash at {point})"
    );
    // An owner turn ran again only when a human said so.
    assert_eq!(
        b.owner_spawns(),
        1 + approved.len(),
        "crash at {point}: owner turns vs. approvals {approved:?}"
    );
    if point == "code/1" {
        assert_eq!(
            approved.len(),
            1,
            "a crash inside the owner's turn must ask a human"
        );
    }
    b.gaffer_std()
        .args(["journal", "verify"])
        .assert_ok_contains("ok:");
    assert_eq!(
        b.private_temp_dirs(),
        Vec::<PathBuf>::new(),
        "private temp dirs left after a crash at {point} and a resume"
    );
}

#[test]
fn crash_while_creating_the_worktree() {
    crash_and_resume("worktree");
}

#[test]
fn crash_during_planning() {
    crash_and_resume("plan");
}

#[test]
fn crash_at_plan_approval() {
    crash_and_resume("plan-approval");
}

#[test]
fn crash_mid_owner_turn_needs_a_human_and_is_not_repeated_silently() {
    crash_and_resume("code/1");
}

#[test]
fn crash_while_committing() {
    crash_and_resume("commit/1");
}

#[test]
fn crash_during_review() {
    crash_and_resume("review/1");
}

#[test]
fn crash_during_the_check() {
    crash_and_resume("check/1");
}

#[test]
fn crash_while_shipping() {
    crash_and_resume("ship");
}

#[test]
fn task_cancel_of_an_unknown_task_is_a_clear_error() {
    let b = Bench::new();
    let out = b
        .gaffer_std()
        .args(["task", "cancel", "t-nope"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(predicate::str::contains("t-nope").eval(&String::from_utf8_lossy(&out.stderr)));
}

#[test]
fn ctrl_c_mid_turn_stops_the_agent_keeps_the_worktree_and_cancels_the_task() {
    let b = Bench::new();
    b.script_all();
    b.script("owner", vec![json!({ "steps": [{ "write_file": { "path": "WIP.md", "content": "half" } }, { "sleep_ms": 60000 }] })]);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut child = b
        .gaffer_std()
        .args(["run", REQUEST, "--repo"])
        .arg(&b.repo)
        .args(["--yes", "--json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let id = wait_for_step(&b.home.db(), "code/1", &mut child, &rt);
    let wt = b.home.data().join("worktrees").join(&id);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !wt.join("WIP.md").exists() {
        assert!(Instant::now() < deadline, "the owner never started writing");
        std::thread::sleep(Duration::from_millis(10));
    }
    let ok = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(json_of(&out)["state"], "cancelled");
    assert!(wt.join("WIP.md").exists(), "the worktree was not kept");
    std::thread::sleep(Duration::from_millis(200));
    let left: Vec<_> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            std::fs::read_link(e.path().join("cwd"))
                .map(|p| p.starts_with(&wt))
                .unwrap_or(false)
        })
        .collect();
    assert!(left.is_empty(), "agent processes outlived Ctrl-C: {left:?}");
}

/// An agent that writes garbage mid-turn (bytes that are not UTF-8, then a line that
/// is not JSON) fails the task with an error naming the agent, the line and the problem,
/// and the command says so; nothing panics and nothing hangs.
#[test]
fn agent_garbage_mid_stream_fails_the_task_with_a_clear_error() {
    let b = Bench::new();
    let garbage = json!({ "steps": [
        { "say": "thinking" },
        { "raw_bytes": b"\xff\xfe\x00garbage\n".to_vec() },
        { "say": "never read" }
    ] });
    b.script("planner", vec![garbage.clone(), garbage.clone(), garbage]);
    let (s, shown) = run_to_failure(&b);
    let plan_step = shown["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|st| st["step_id"] == "plan")
        .unwrap();
    assert_eq!(plan_step["state"], "failed", "{shown:#}");
    for (what, text) in [
        ("the command's reason", &s["reason"]),
        ("the task's outcome", &shown["task"]["outcome"]["reason"]),
        ("the planner step", &plan_step["error"]),
    ] {
        let text = text.as_str().unwrap_or_default();
        // With `--replay-user-messages` Claude Code echoes the prompt as one more
        // line before the garbage: it is line 5.
        for says in [
            "claude sent a malformed line 5",
            "not UTF-8 (invalid byte at offset 0)",
            "garbage",
        ] {
            assert!(text.contains(says), "{what} names {says:?}: {text}");
        }
    }
}

/// #10 through the whole pipeline: with `sandbox.mode = "required"` an owner that
/// writes to `~/.ssh` is refused by the kernel, the task fails saying so (its
/// outcome and the owner's step name the sandbox), and nothing is written.
#[test]
fn an_owner_writing_to_home_ssh_fails_the_task_saying_the_sandbox_refused() {
    owner_write_is_refused(|b| {
        let ssh = b.home.dir.path().join(".ssh");
        std::fs::create_dir_all(&ssh).unwrap();
        ssh.join("authorized_keys")
    });
}

/// The project's memory lives in gaffer's data dir, outside the worktree: an owner
/// writing it directly (instead of proposing an addition a person approves) is
/// refused by the kernel, and the file keeps what people wrote.
#[test]
fn an_owner_writing_the_project_memory_directly_is_refused_by_the_sandbox() {
    owner_write_is_refused(|b| {
        let file = gaffer_app::memory::path(&b.home.data(), "demo");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        file
    });
}

/// With `sandbox.mode = "required"`, an owner writing to the file `target` names
/// (outside the worktree) is refused by the kernel, the task fails saying so (its
/// outcome and the owner's step name the sandbox), and the file is not written.
fn owner_write_is_refused(target: impl Fn(&Bench) -> PathBuf) {
    let support = gaffer_agents::sandbox::support();
    if !support.filesystem() {
        eprintln!("skipping: {}", support.describe());
        return;
    }
    let b = Bench::new();
    b.home.write_config("[sandbox]\nmode = \"required\"\n");
    b.script_all();
    let file = target(&b);
    let escape = json!({ "steps": [
        { "say": "writing outside" },
        { "write_file": { "path": file.display().to_string(), "content": "attacker" } },
        { "say": "done" }
    ] });
    b.script("owner", vec![escape.clone(), escape.clone(), escape]);
    let (_, shown) = run_to_failure(&b);
    let failed_step = shown["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|st| st["state"] == "failed")
        .unwrap_or_else(|| panic!("no failed step: {shown:#}"));
    for (what, text) in [
        ("the task's outcome", &shown["task"]["outcome"]["reason"]),
        ("the failed step", &failed_step["error"]),
    ] {
        let text = text.as_str().unwrap_or_default();
        for says in ["Permission denied", "sandbox (Landlock)"] {
            assert!(text.contains(says), "{what} names {says:?}: {text}");
        }
    }
    assert!(!file.exists(), "the kernel let the write through");
    assert_eq!(
        std::fs::read_dir(file.parent().unwrap()).unwrap().count(),
        0
    );
}

/// #15 "bad input": a sandbox rule this machine cannot apply refuses the run under
/// `mode = "required"` before anything is stored (exit 78, naming the rule), and is a
/// warning under `auto`, where the task runs.
#[test]
fn a_sandbox_rule_that_cannot_be_applied_refuses_under_required_and_warns_under_auto() {
    let support = gaffer_agents::sandbox::support();
    if !support.filesystem() {
        eprintln!("skipping: {}", support.describe());
        return;
    }
    let b = Bench::new();
    b.script_all();
    let missing = b.home.dir.path().join("no-such-dir");
    let config = |mode: &str| {
        format!(
            "[sandbox]\nmode = \"{mode}\"\nreadable = [\"{}\"]\n",
            missing.display()
        )
    };
    let run = || {
        b.gaffer_std()
            .args(["run", REQUEST, "--repo"])
            .arg(&b.repo)
            .args(["--yes", "--json", "--agent", "claude"])
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    b.home.write_config(&config("required"));
    let out = run();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{stderr}");
    assert!(
        stderr.contains("sandbox.readable") && stderr.contains("no-such-dir"),
        "{stderr}"
    );
    let list = b
        .gaffer_std()
        .args(["task", "list", "--json"])
        .output()
        .unwrap();
    let tasks: Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(tasks, Value::Array(vec![]), "a refused run stored a task");

    b.home.write_config(&config("auto"));
    let out = run();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("warning: sandbox: sandbox.readable"),
        "{stderr}"
    );
    assert_eq!(json_of(&out)["state"], "done");
}

/// `gaffer run --yes --json` of [`REQUEST`], which must fail (exit 1, state
/// `failed`): what it printed, and what `gaffer task show --json` shows then.
pub fn run_to_failure(b: &Bench) -> (Value, Value) {
    let out = b
        .gaffer_std()
        .args(["run", REQUEST, "--repo"])
        .arg(&b.repo)
        .args(["--yes", "--json", "--agent", "claude"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let s = json_of(&out);
    assert_eq!(s["state"], "failed", "{s}");
    let id = s["task_id"].as_str().unwrap();
    let shown = json_of(
        &b.gaffer_std()
            .args(["task", "show", id, "--json"])
            .output()
            .unwrap(),
    );
    (s, shown)
}

#[test]
fn json_logs_name_the_task_and_step_of_each_line() {
    let b = Bench::new();
    b.script_all();
    let out = b
        .gaffer_std()
        .args(["-v", "--log-format", "json", "run", REQUEST, "--repo"])
        .arg(&b.repo)
        .args(["--yes", "--json", "--agent", "claude"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let task = success_json(&out)["task_id"].as_str().unwrap().to_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let logs: Vec<Value> = stderr
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let finished: Vec<&Value> = logs
        .iter()
        .filter(|l| l["message"] == "step finished")
        .collect();
    assert!(!finished.is_empty(), "{stderr}");
    for line in &finished {
        assert!(
            line["timestamp"].is_string() && line["level"] == "INFO",
            "{line}"
        );
        assert_eq!(
            line["spans"],
            json!([
                {"name": "task", "task_id": task},
                {"name": "step", "step_id": line["step"]},
            ]),
            "{line}"
        );
    }
    let steps: Vec<&str> = finished
        .iter()
        .map(|l| l["step"].as_str().unwrap())
        .collect();
    assert!(
        steps.contains(&"plan") && steps.contains(&"worktree"),
        "{steps:?}"
    );
}
