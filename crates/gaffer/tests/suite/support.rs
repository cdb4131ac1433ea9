use assert_cmd::Command;
use gaffer_core::{Actor, ApprovalKind, Decision, Event, Intent, Stage, StreamId};
use gaffer_store::{Durability, Journal, NewEvent, SqliteJournal};
use serde_json::json;
use std::path::PathBuf;

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
            done.extend(step("plan", Intent::ReadOnly, plan_receipt));
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
