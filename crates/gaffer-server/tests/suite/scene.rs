//! Tasks as the engine records them, for the page's tests and its benchmark: the
//! same journal events a real run appends (stages, steps, sessions, agent
//! activity with tool calls and diffs, approvals through the app), without agents.

use gaffer_app::{App, ApprovalRequest, NewTask, Subject};
use gaffer_core::{
    Actor, ApprovalKind, ContextPack, Event, Intent, PackMode, PackedFile, Role, SessionId, Stage,
    StepId, StreamId, TaskId,
};
use gaffer_protocol::api;
use gaffer_store::NewEvent;
use serde_json::{json, Value};

pub struct Scene {
    pub app: App,
    pub task: String,
    stream: StreamId,
}

impl Scene {
    pub async fn new(app: &App, project: &str, request: &str) -> Self {
        let task = app
            .create_task(
                NewTask {
                    project: project.into(),
                    request: request.into(),
                    ..NewTask::default()
                },
                Actor::user("ana", "web"),
            )
            .await
            .unwrap()
            .id;
        Self {
            app: app.clone(),
            stream: StreamId(task.clone()),
            task,
        }
    }

    /// A task that already exists.
    pub fn attach(app: &App, task: &str) -> Self {
        Self {
            app: app.clone(),
            task: task.into(),
            stream: StreamId(task.into()),
        }
    }

    pub async fn push(&self, events: Vec<Event>) {
        let head = self.app.journal().head(&self.stream).await.unwrap();
        self.app
            .journal()
            .append(
                &self.stream,
                head,
                events.into_iter().map(NewEvent::now).collect(),
            )
            .await
            .unwrap();
    }

    pub async fn stage(&self, stage: Stage) {
        self.push(vec![Event::TaskStageEntered { stage }]).await;
    }

    /// Record and start a step.
    pub async fn step(&self, id: &str, intent: Intent) {
        self.push(vec![
            Event::StepIntentRecorded {
                step_id: StepId(id.into()),
                name: id.into(),
                intent,
                depends_on: vec![],
                input: Value::Null,
            },
            Event::StepStarted {
                step_id: StepId(id.into()),
            },
        ])
        .await;
    }

    /// An agent step: recorded, started, with its session.
    pub async fn agent_step(&self, id: &str, role: Role, agent: &str) {
        self.step(id, Intent::NonIdempotent).await;
        self.push(vec![Event::SessionStarted {
            session_id: SessionId(format!("s-{}-{id}", self.task)),
            agent: agent.into(),
            role,
            workspace_key: "/work/demo".into(),
            agent_session_id: Some("5f0c1a".into()),
            step_id: Some(StepId(id.into())),
        }])
        .await;
    }

    /// The context a running agent step was given: `(path, full?, tokens)` in rank order.
    pub async fn packed(&self, step: &str, role: Role, budget: u64, files: &[(&str, bool, u64)]) {
        self.push(vec![Event::StepContextPacked {
            step_id: StepId(step.into()),
            role,
            pack: ContextPack {
                budget,
                used: files.iter().map(|f| f.2).sum(),
                files: files
                    .iter()
                    .map(|(path, full, tokens)| PackedFile {
                        path: (*path).into(),
                        mode: if *full {
                            PackMode::Full
                        } else {
                            PackMode::Skeleton
                        },
                        tokens: *tokens,
                    })
                    .collect(),
            },
        }])
        .await;
    }

    pub async fn act(&self, step: &str, activity: Value) {
        self.push(vec![Event::AgentActivity {
            step_id: StepId(step.into()),
            activity,
        }])
        .await;
    }

    /// Many activities of one step in one append (a long session, quickly).
    pub async fn acts(&self, step: &str, activities: Vec<Value>) {
        self.push(
            activities
                .into_iter()
                .map(|activity| Event::AgentActivity {
                    step_id: StepId(step.into()),
                    activity,
                })
                .collect(),
        )
        .await;
    }

    pub async fn say(&self, step: &str, text: &str) {
        self.act(step, json!({"type": "assistant_text", "text": text}))
            .await;
    }

    /// A tool call and its result.
    pub async fn tool(&self, step: &str, call: &str, name: &str, input: Value, output: &str) {
        self.act(
            step,
            json!({"type": "tool_call", "call_id": call, "name": name, "input": input}),
        )
        .await;
        self.act(
            step,
            json!({"type": "tool_result", "call_id": call, "output": output, "is_error": false}),
        )
        .await;
    }

    pub async fn complete(&self, step: &str, receipt: Value) {
        self.push(vec![Event::StepCompleted {
            step_id: StepId(step.into()),
            receipt,
        }])
        .await;
    }

    /// What the engine does to ask: record the step, then request through the app.
    pub async fn ask(
        &self,
        step: &str,
        kind: ApprovalKind,
        summary: &str,
        details: Value,
        command: Option<&str>,
    ) -> api::Approval {
        let known = self
            .app
            .task(&self.task)
            .await
            .unwrap()
            .steps
            .iter()
            .any(|s| s.id == step);
        if !known {
            self.push(vec![Event::StepIntentRecorded {
                step_id: StepId(step.into()),
                name: step.into(),
                intent: Intent::NonIdempotent,
                depends_on: vec![],
                input: Value::Null,
            }])
            .await;
        }
        self.app
            .request_approval(ApprovalRequest {
                task_id: TaskId(self.task.clone()),
                step_id: StepId(step.into()),
                attempt: 1,
                kind,
                summary: summary.into(),
                details,
                subject: Subject {
                    tool: command.map(|_| "Bash".to_owned()),
                    command: command.map(str::to_owned),
                    ..Subject::default()
                },
            })
            .await
            .unwrap()
    }
}

pub fn usage(input: u64, output: u64, cost: f64) -> Value {
    json!({"input_tokens": input, "output_tokens": output, "cached_input_tokens": 0, "cost_usd": cost})
}

pub const PLAN: &str = r#"{"subtasks":[{"title":"Parse a --json flag","description":"Add the flag to the list command's arguments.","files":["src/cli.rs"],"acceptance":"`demo list --json` is accepted"},{"title":"Print rows as JSON","description":"Serialize the rows with serde_json when the flag is set.","files":["src/list.rs"],"acceptance":"the output parses as a JSON array"}]}"#;

pub const EDIT_DIFF: &str = "diff --git a/src/list.rs b/src/list.rs\n--- a/src/list.rs\n+++ b/src/list.rs\n@@ -1,5 +1,9 @@\n-pub fn list(rows: &[Row]) {\n+pub fn list(rows: &[Row], json: bool) {\n+    if json {\n+        println!(\"{}\", serde_json::to_string(rows).unwrap());\n+        return;\n+    }\n     for r in rows {\n         println!(\"{}\", r.name);\n     }\n }\n";

/// A task as far as its review: planner, approved plan, owner with tool calls and
/// an edit, a review asking for changes, a fix, a passing review, and the check.
pub async fn conversation(app: &App, project: &str) -> Scene {
    let s = Scene::new(
        app,
        project,
        "Add a --json flag to the list command\n\nScripts parse our output; give them JSON.",
    )
    .await;
    s.stage(Stage::Planning).await;
    s.step("worktree", Intent::Idempotent).await;
    s.complete("worktree", json!({"path": "/work/wt/t-demo", "branch": "gaffer/add-json-flag", "base": "8c1e2f4a9b", "base_ref": "main"})).await;
    s.agent_step("plan", Role::Planner, "claude").await;
    s.packed(
        "plan",
        Role::Planner,
        8000,
        &[
            ("src/list.rs", true, 412),
            ("src/cli.rs", true, 2875),
            ("src/main.rs", false, 96),
            (
                "src/output/table_formatting_for_wide_terminals.rs",
                false,
                1430,
            ),
            ("tests/list.rs", false, 188),
        ],
    )
    .await;
    s.say(
        "plan",
        "Let me look at how the list command prints its rows.",
    )
    .await;
    s.tool(
        "plan",
        "c1",
        "Grep",
        json!({"pattern": "fn list", "path": "src"}),
        "src/list.rs:1:pub fn list(rows: &[Row]) {",
    )
    .await;
    s.tool("plan", "c2", "Read", json!({"file_path": "src/list.rs"}), "pub fn list(rows: &[Row]) {\n    for r in rows {\n        println!(\"{}\", r.name);\n    }\n}").await;
    s.say(
        "plan",
        &format!(
            "Two small steps: parse the flag, then print the rows as JSON.\n\n```json\n{PLAN}\n```"
        ),
    )
    .await;
    s.act(
        "plan",
        json!({"type": "usage", "usage": usage(5200, 410, 0.0231)}),
    )
    .await;
    s.complete("plan", json!({"plan": serde_json::from_str::<Value>(PLAN).unwrap(), "usage": usage(5200, 410, 0.0231)})).await;
    s.stage(Stage::AwaitingPlanApproval).await;
    let plan = s
        .ask(
            "plan-approval",
            ApprovalKind::Plan,
            "Approve the plan (2 subtasks) for: Add a --json flag to the list command",
            json!({"plan": serde_json::from_str::<Value>(PLAN).unwrap()}),
            None,
        )
        .await;
    app.decide(
        &plan.id,
        gaffer_core::Decision::Approve,
        Actor::user("ana", "web"),
        Some("looks right".into()),
        Default::default(),
    )
    .await
    .unwrap();
    s.push(vec![
        Event::StepStarted {
            step_id: StepId("plan-approval".into()),
        },
        Event::StepCompleted {
            step_id: StepId("plan-approval".into()),
            receipt: json!({"approval": plan.id, "decision": "approve"}),
        },
        Event::TaskStageEntered {
            stage: Stage::Coding,
        },
    ])
    .await;
    s.agent_step("code/1", Role::Owner, "claude").await;
    s.say("code/1", "I'll add the flag and branch on it in `list`.")
        .await;
    s.tool("code/1", "c3", "Edit", json!({"file_path": "src/list.rs", "old_string": "pub fn list(rows: &[Row]) {", "new_string": "pub fn list(rows: &[Row], json: bool) {\n    if json {\n        println!(\"{}\", serde_json::to_string(rows).unwrap());\n        return;\n    }"}), "The file src/list.rs has been updated.").await;
    s.act(
        "code/1",
        json!({"type": "file_change", "path": "src/list.rs", "kind": "update", "diff": EDIT_DIFF}),
    )
    .await;
    s.tool(
        "code/1",
        "c4",
        "Bash",
        json!({"command": "cargo test --quiet list", "description": "Run the list tests"}),
        "running 3 tests\n...\ntest result: ok. 3 passed; 0 failed; 0 ignored",
    )
    .await;
    s.say(
        "code/1",
        "Done: `demo list --json` prints the rows as a JSON array, and the tests pass.",
    )
    .await;
    s.complete("code/1", json!({"summary": "added --json", "changed_files": ["src/list.rs", "src/cli.rs"], "usage": usage(18400, 2210, 0.0892)})).await;
    s.step("commit/1", Intent::Idempotent).await;
    s.complete("commit/1", json!({"sha": "3f9a0c7d21", "created": true}))
        .await;
    s.stage(Stage::Reviewing).await;
    s.agent_step("review/1", Role::Reviewer, "codex").await;
    s.tool(
        "review/1",
        "c5",
        "Read",
        json!({"file_path": "src/list.rs"}),
        "…",
    )
    .await;
    s.say("review/1", "```json\n{\"verdict\":\"changes_requested\",\"feedback\":\"`unwrap()` panics on a row that cannot be serialized; return the error instead.\"}\n```").await;
    s.complete("review/1", json!({"verdict": {"verdict": "changes_requested", "feedback": "`unwrap()` panics on a row that cannot be serialized; return the error instead."}, "usage": usage(9100, 300, 0.0211)})).await;
    s.stage(Stage::Coding).await;
    s.agent_step("fix/1", Role::Owner, "claude").await;
    s.tool("fix/1", "c6", "Edit", json!({"file_path": "src/list.rs", "old_string": "        serde_json::to_string(rows).unwrap()\n", "new_string": "        serde_json::to_string(rows)?\n"}), "ok").await;
    s.complete("fix/1", json!({"summary": "fixed", "changed_files": ["src/list.rs"], "usage": usage(6100, 520, 0.0188)})).await;
    s.stage(Stage::Reviewing).await;
    s.agent_step("review/2", Role::Reviewer, "codex").await;
    s.say("review/2", "```json\n{\"verdict\":\"done\"}\n```")
        .await;
    s.complete(
        "review/2",
        json!({"verdict": {"verdict": "done"}, "usage": usage(8800, 90, 0.0174)}),
    )
    .await;
    s.stage(Stage::Testing).await;
    s.step("check/1", Intent::ReadOnly).await;
    s.complete("check/1", json!({"passed": true, "command": "cargo test", "exit_code": 0, "output_tail": "running 12 tests\ntest result: ok. 12 passed; 0 failed", "duration_ms": 4210})).await;
    s
}

/// Tasks in every column of the board.
pub async fn board(app: &App, project: &str) -> Vec<String> {
    let mut ids = Vec::new();
    let queued = Scene::new(
        app,
        project,
        "Bump the MSRV to 1.85 and fix the new clippy lints",
    )
    .await;
    ids.push(queued.task.clone());
    let planning = Scene::new(app, project, "Document the config file's [server] section").await;
    planning.stage(Stage::Planning).await;
    ids.push(planning.task.clone());
    let waiting = Scene::new(
        app,
        project,
        "Retry HTTP 429 responses with backoff in the forge client",
    )
    .await;
    waiting.stage(Stage::Planning).await;
    waiting.stage(Stage::AwaitingPlanApproval).await;
    ids.push(waiting.task.clone());
    let failed = Scene::new(app, project, "Make the index build incremental").await;
    failed.stage(Stage::Planning).await;
    failed
        .push(vec![Event::TaskFailed {
            reason: "the planner's answer is not a valid plan after a retry: `subtasks` is missing"
                .into(),
        }])
        .await;
    ids.push(failed.task.clone());
    let cancelled = Scene::new(app, project, "Rewrite the README intro").await;
    cancelled
        .app
        .cancel_task(
            &cancelled.task,
            Actor::user("bob", "cli"),
            Some("not needed any more".into()),
        )
        .await
        .unwrap();
    ids.push(cancelled.task.clone());
    ids
}
