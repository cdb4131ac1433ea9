use super::run::{json_of, Bench};
use assert_cmd::Command;
use gaffer_core::{
    Actor, ApprovalKind, ContextPack, Decision, Event, Intent, PackMode, PackedFile, Role, Stage,
    StreamId,
};
use gaffer_store::{Durability, Journal, NewEvent, SqliteJournal};
use gaffer_testkit::clis::{Cli, CliHome};
use gaffer_testkit::model::{say, ModelScript, ModelServer};
use gaffer_testkit::scenario::LlmReply;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// A throwaway home for one test: its own config file and data dir.
pub struct Home {
    pub dir: tempfile::TempDir,
}

impl Home {
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn config(&self) -> PathBuf {
        self.dir.path().join("config.toml")
    }

    pub fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    pub fn db(&self) -> PathBuf {
        self.data().join("gaffer.db")
    }

    /// `gaffer` with this home, and nothing from the caller's environment that could leak in.
    pub fn gaffer(&self) -> Command {
        let mut cmd = Command::cargo_bin("gaffer").unwrap();
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.dir.path())
            .env("GAFFER_CONFIG", self.config())
            .env("GAFFER_DATA_DIR", self.data());
        cmd
    }

    /// A client sending this home's local secret (what a person's scripts use against
    /// `gaffer serve`); the server makes the secret before it announces itself.
    pub fn http(&self) -> reqwest::Client {
        local_client(&self.data())
    }

    /// A config file with `text`.
    pub fn write_config(&self, text: &str) {
        std::fs::write(self.config(), text).unwrap();
    }

    /// A journal with one project and two tasks, written through the store.
    pub fn seed(&self) {
        self.write_config("");
        std::fs::create_dir_all(self.data()).unwrap();
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let j = SqliteJournal::open(&self.db(), Durability::Normal)
                .await
                .unwrap();
            let ev = |e| NewEvent {
                at: 1_700_000_000_000,
                event: e,
            };
            j.append(
                &StreamId::from("p-demo"),
                0,
                vec![ev(Event::ProjectRegistered {
                    project_id: "p-demo".into(),
                    name: "demo".into(),
                    path: "/repos/demo".into(),
                    check_command: Some("cargo test".into()),
                })],
            )
            .await
            .unwrap();
            for (id, request) in [
                ("t-one", "add an installation section to README"),
                ("t-two", "fix the flaky retry test"),
            ] {
                j.append(
                    &StreamId::from(id),
                    0,
                    vec![
                        ev(Event::TaskCreated {
                            task_id: id.into(),
                            project_id: "p-demo".into(),
                            request: request.into(),
                            by: Actor::user("ana", "cli"),
                            options: Default::default(),
                        }),
                        ev(Event::StepIntentRecorded {
                            step_id: "plan".into(),
                            name: "plan".into(),
                            intent: Intent::ReadOnly,
                            depends_on: vec![],
                            input: serde_json::json!({"request": request}),
                        }),
                    ],
                )
                .await
                .unwrap();
            }
            j.close().await;
        });
    }
}

/// The check of every fixture repository: README has an installation section.
pub const CHECK: &str = "grep -q '^## Installation' README.md";

/// A git repository at `repo` on `main`, one commit: `readme` as README.md and a
/// Makefile whose `check` target runs `check`.
pub fn fixture_repo(repo: &std::path::Path, readme: &str, check: &str) {
    use gaffer_testkit::git::git;
    std::fs::create_dir_all(repo).unwrap();
    git(repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("README.md"), readme).unwrap();
    std::fs::write(repo.join("Makefile"), format!("check:\n\t{check}\n")).unwrap();
    git(repo, &["add", "."]);
    git(repo, &["commit", "-q", "-m", "init"]);
}

/// The task's events of `kind`, read from the SQLite journal `db`.
pub fn events_of(db: &Path, id: &str, kind: &str) -> Vec<Value> {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let j = SqliteJournal::open(db, Durability::Normal).await.unwrap();
        j.stream_events(&id.into(), 0)
            .await
            .unwrap()
            .into_iter()
            .filter(|e| e.event.kind() == kind)
            .map(|e| serde_json::to_value(&e.event).unwrap())
            .collect()
    })
}

/// A client sending the local secret of the data dir `data` as its bearer credential.
pub fn local_client(data: &std::path::Path) -> reqwest::Client {
    let secret = std::fs::read_to_string(data.join("local-secret")).unwrap();
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        reqwest::header::AUTHORIZATION,
        format!("Bearer {}", secret.trim()).parse().unwrap(),
    );
    reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .unwrap()
}

/// The finished task of [`Home::seed_finished`], and the failed one.
pub const DONE_TASK: &str = "t-019a2b3c4d5e70008000000000000001";
pub const FAILED_TASK: &str = "t-019a2b3c4d5f70008000000000000002";
pub const PLAN_APPROVAL: &str = "ap-019a2b3c4d6070008000000000000003";

impl Home {
    /// A journal with project `demo`, a task that went all the way to done (plan,
    /// approval, commit, review, check) and one that failed with a reason over
    /// several lines, both with what agents and requests may hold (control
    /// sequences), at fixed times.
    pub fn seed_finished(&self) {
        self.write_config("");
        std::fs::create_dir_all(self.data()).unwrap();
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let j = SqliteJournal::open(&self.db(), Durability::Normal)
                .await
                .unwrap();
            let mut at = 1_700_000_000_000;
            let mut ev = |e| {
                at += 1500;
                NewEvent { at, event: e }
            };
            let ana = Actor::user("ana", "cli");
            j.append(
                &StreamId::from("p-demo"),
                0,
                vec![ev(Event::ProjectRegistered {
                    project_id: "p-demo".into(),
                    name: "demo".into(),
                    path: "/repos/demo".into(),
                    check_command: Some("make check".into()),
                })],
            )
            .await
            .unwrap();
            let step = |id: &str, intent: Intent, receipt: serde_json::Value| {
                vec![
                    Event::StepIntentRecorded {
                        step_id: id.into(),
                        name: id.into(),
                        intent,
                        depends_on: vec![],
                        input: json!({}),
                    },
                    Event::StepStarted { step_id: id.into() },
                    Event::StepCompleted {
                        step_id: id.into(),
                        receipt,
                    },
                ]
            };
            let stage = |s| vec![Event::TaskStageEntered { stage: s }];
            let branch = format!("gaffer/{DONE_TASK}-add-an-installation-section");
            let plan = json!({ "subtasks": [
                { "title": "Add an installation section", "description": "Say how to install with cargo.\nKeep it short.", "files": ["README.md"], "acceptance": "README has ## Installation" },
                { "title": "Link it from the intro", "description": "one line", "files": ["README.md"], "acceptance": "the intro links it" },
            ] });
            let sha = "8031bcad9a1ec97432cc7222794885fb7c5935d1";
            let usage = |i: u64, o: u64, c: f64| json!({ "usage": { "input_tokens": i, "output_tokens": o, "cost_usd": c } });
            let mut done: Vec<Event> = vec![Event::TaskCreated {
                task_id: DONE_TASK.into(),
                project_id: "p-demo".into(),
                request: "Add an installation section to README".into(),
                by: ana.clone(),
                options: Default::default(),
            }];
            done.extend(stage(Stage::Planning));
            done.extend(step("worktree", Intent::Idempotent, json!({ "path": format!("/data/worktrees/{DONE_TASK}"), "branch": branch })));
            let mut plan_receipt = usage(1200, 300, 0.012);
            plan_receipt["plan"] = plan.clone();
            let mut planned = step("plan", Intent::ReadOnly, plan_receipt);
            // The planner's context: ten files, so `task show` names eight and counts the rest.
            let files: Vec<PackedFile> = (0..10)
                .map(|i| PackedFile {
                    path: if i == 0 { "README.md".into() } else { format!("src/module_{i}.rs") },
                    mode: if i < 2 { PackMode::Full } else { PackMode::Skeleton },
                    tokens: if i < 2 { 4200 } else { 350 },
                })
                .collect();
            planned.insert(2, Event::StepContextPacked {
                step_id: "plan".into(),
                role: Role::Planner,
                pack: ContextPack { budget: 13_000, used: files.iter().map(|f| f.tokens).sum(), files },
            });
            done.extend(planned);
            done.extend(stage(Stage::AwaitingPlanApproval));
            let mut approval = step("plan-approval", Intent::ReadOnly, json!({ "approval": PLAN_APPROVAL, "decision": "approve" }));
            approval.insert(2, Event::ApprovalRequested {
                approval_id: PLAN_APPROVAL.into(),
                step_id: "plan-approval".into(),
                attempt: 1,
                kind: ApprovalKind::Plan,
                summary: "Approve the plan (2 subtasks) for: Add an installation section to README".into(),
                details: json!({ "plan": plan, "policy": { "expires_at": 1_700_001_800_000i64 } }),
            });
            approval.insert(3, Event::ApprovalDecided {
                approval_id: PLAN_APPROVAL.into(),
                decision: Decision::Approve,
                by: ana.clone(),
                note: Some("looks right".into()),
                for_task: false,
                grant: None,
            });
            done.extend(approval);
            done.extend(stage(Stage::Coding));
            done.extend(step("code/1", Intent::NonIdempotent, usage(3000, 800, 0.03)));
            done.extend(step("commit/1", Intent::Idempotent, json!({ "sha": sha })));
            done.extend(stage(Stage::Reviewing));
            done.extend(step("review/1", Intent::ReadOnly, json!({ "verdict": { "verdict": "done", "feedback": "Clear, and the check passes." } })));
            done.extend(stage(Stage::Testing));
            done.extend(step("check/1", Intent::Idempotent, json!({ "passed": true, "command": "make check", "exit_code": 0 })));
            done.extend(stage(Stage::Shipping));
            done.extend(step("ship", Intent::Idempotent, json!({})));
            done.push(Event::TaskDone {
                summary: json!({
                    "task_id": DONE_TASK, "branch": branch, "base": "main",
                    "commits": [{ "sha": sha, "subject": "Add an installation section" }],
                    "changed_files": ["README.md"],
                    "verdicts": [{ "verdict": "done" }],
                    "check": { "passed": true, "command": "make check", "exit_code": 0 },
                    "tokens": { "input": 4200, "output": 1100, "cached_input": 0 },
                    "cost_usd": 0.042,
                    "note": "no forge is configured for project demo: the branch stays in the repository, unpushed",
                }),
            });
            j.append(&StreamId::from(DONE_TASK), 0, done.into_iter().map(&mut ev).collect())
                .await
                .unwrap();

            let mut failed: Vec<Event> = vec![Event::TaskCreated {
                task_id: FAILED_TASK.into(),
                project_id: "p-demo".into(),
                request: "Fix the flaky retry test\x1b]0;pwned\x07 and\nthe timeout".into(),
                by: ana.clone(),
                options: Default::default(),
            }];
            failed.extend(stage(Stage::Planning));
            failed.extend(step("worktree", Intent::Idempotent, json!({ "path": format!("/data/worktrees/{FAILED_TASK}"), "branch": format!("gaffer/{FAILED_TASK}-fix") })));
            failed.push(Event::StepIntentRecorded {
                step_id: "plan".into(),
                name: "plan".into(),
                intent: Intent::ReadOnly,
                depends_on: vec![],
                input: json!({}),
            });
            failed.push(Event::StepStarted { step_id: "plan".into() });
            failed.push(Event::StepFailed {
                step_id: "plan".into(),
                error: "claude sent a malformed line 4: \x1b[2Jnot JSON".into(),
                usage: None,
            });
            failed.push(Event::TaskFailed {
                reason: "the plan failed twice:\nclaude sent a malformed line 4: \x1b[2Jnot JSON\n\tat the second try".into(),
            });
            j.append(&StreamId::from(FAILED_TASK), 0, failed.into_iter().map(&mut ev).collect())
                .await
                .unwrap();
            j.close().await;
        });
    }
}

// The real agent CLIs (`gaffer_testkit::clis`) against the scripted model server.

/// What an agent is told when its `rm -rf build` is denied ([`RealRun::finish`]).
pub const DENY_NOTE: &str = "never delete the build dir";

/// The planner's one-subtask plan.
pub fn plan_reply() -> LlmReply {
    let plan = json!({ "subtasks": [{ "title": "Add an installation section", "description": "write it", "files": ["README.md"], "acceptance": "README has ## Installation" }] });
    say(&format!("Here is the plan.\n```json\n{plan}\n```"))
}

/// A model reply that comes only after the test is over: the CLI waits on it.
pub fn never() -> LlmReply {
    LlmReply {
        delay_ms: Some(120_000),
        ..say("too late")
    }
}

/// A fixture repository and a gaffer home (review goes to the arbiter after one round
/// of changes), the CLI's own home pointed at the model server.
pub struct RealRun {
    pub bench: Bench,
    pub cli: CliHome,
    pub server: ModelServer,
    _rt: tokio::runtime::Runtime,
}

impl RealRun {
    pub fn new(cli: Cli, script: ModelScript) -> RealRun {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let server = rt.block_on(ModelServer::start(script)).unwrap();
        let bench = Bench::new();
        bench.home.write_config("[review]\nrounds = 1\n");
        let cli = CliHome::new(cli, &server, model(cli)).unwrap();
        RealRun {
            bench,
            cli,
            server,
            _rt: rt,
        }
    }

    /// `gaffer` with only PATH, the CLI's home and what points it at the server.
    pub fn gaffer(&self) -> std::process::Command {
        let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("gaffer"));
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("GAFFER_CONFIG", self.bench.home.config())
            .env("GAFFER_DATA_DIR", self.bench.home.data())
            .env("USER", "tester")
            .env(self.cli.cli.bin_env(), self.cli.cli.bin())
            .envs(&self.cli.env);
        cmd
    }

    pub fn json(&self, args: &[&str]) -> Value {
        json_of(&self.gaffer().args(args).output().unwrap())
    }

    /// `gaffer run` of the request with the CLI as every role's agent, and `extra`.
    pub fn start(&self, extra: &[&str]) -> Child {
        self.gaffer()
            .args(["run", "Add an installation section to README", "--repo"])
            .arg(&self.bench.repo)
            .args(["--json", "--agent", self.cli.cli.agent()])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Wait until `role`'s CLI has asked the model `n` times, `child` running (killed
    /// when it does not come: a failed test leaves no gaffer behind).
    pub fn wait_for(&self, role: &str, child: &mut Child, n: usize) {
        let started = Instant::now();
        while self.server.played(role) < n {
            let ended = child.try_wait().unwrap();
            if ended.is_some() || started.elapsed() > Duration::from_secs(120) {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "no request {n} of the {role} (gaffer ended: {ended:?}):\n{}",
                    self.server.describe()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Wait for `child` (a `gaffer run` or `gaffer task resume`) to end, deciding every
    /// approval as a person would from another terminal: approve, except `rm -rf`
    /// (denied with [`DENY_NOTE`]). It must exit 0: returns its summary and the
    /// approvals decided.
    pub fn finish(&self, mut child: Child) -> (Value, Vec<Value>) {
        let started = Instant::now();
        let mut decided = Vec::new();
        while child.try_wait().unwrap().is_none() {
            assert!(
                started.elapsed() < Duration::from_secs(240),
                "gaffer did not finish; the model saw:\n{}",
                self.server.describe()
            );
            let pending = self.json(&["approvals", "--json"]);
            for a in pending.as_array().cloned().unwrap_or_default() {
                let id = a["id"].as_str().unwrap().to_owned();
                let out = if a.to_string().contains("rm -rf") {
                    self.gaffer()
                        .args(["deny", &id, "--note", DENY_NOTE])
                        .output()
                } else {
                    self.gaffer().args(["approve", &id]).output()
                }
                .unwrap();
                assert!(
                    out.status.success(),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
                decided.push(a);
            }
            std::thread::sleep(Duration::from_millis(300));
        }
        let out = child.wait_with_output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}\nthe model saw:\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.server.describe()
        );
        (json_of(&out), decided)
    }
}

/// Models each CLI knows, so it offers the tools it offers its users.
pub fn model(cli: Cli) -> &'static str {
    match cli {
        Cli::Claude => "claude-sonnet-4-5",
        Cli::Codex => "gpt-5-codex",
        Cli::Gemini => "gemini-2.5-pro",
    }
}

/// The tests of `scenario` with each CLI, named `real_<cli>_…`.
macro_rules! per_cli {
    ($scenario:ident: $claude:ident, $codex:ident, $gemini:ident) => {
        #[test]
        fn $claude() {
            $scenario(Cli::Claude);
        }

        #[test]
        fn $codex() {
            $scenario(Cli::Codex);
        }

        #[test]
        fn $gemini() {
            $scenario(Cli::Gemini);
        }
    };
}
pub(crate) use per_cli;
