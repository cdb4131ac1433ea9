use gaffer_app::{App, ApprovalRequest, NewTask, Policy, Subject};
use gaffer_core::{Actor, ApprovalKind, Event, Intent, StepId, StreamId, TaskId};
use gaffer_protocol::api;
use gaffer_store::{Durability, NewEvent, SqliteJournal};
use std::path::Path;
use std::sync::Arc;

pub struct Env {
    pub dir: tempfile::TempDir,
    pub app: App,
}

pub fn git_repo(path: &Path) {
    std::fs::create_dir_all(path).unwrap();
    let ok = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(path)
        .status()
        .unwrap()
        .success();
    assert!(ok);
}

pub async fn env(policy: &str) -> Env {
    let dir = tempfile::tempdir().unwrap();
    let journal = SqliteJournal::open(&dir.path().join("gaffer.db"), Durability::Normal)
        .await
        .unwrap();
    let app = App::new(Arc::new(journal), Policy::parse(policy).unwrap());
    Env { dir, app }
}

pub fn user(name: &str) -> Actor {
    Actor::user(name, "test")
}

impl Env {
    pub async fn project(&self, name: &str) -> api::Project {
        let path = self.dir.path().join(name);
        git_repo(&path);
        self.app
            .add_project(
                gaffer_app::AddProject {
                    path: path.to_string_lossy().into_owned(),
                    name: Some(name.into()),
                    check: None,
                },
                user("alice"),
            )
            .await
            .unwrap()
    }

    /// A task in `project` with one recorded step `step`.
    pub async fn task_with_step(&self, project: &str, step: &str) -> String {
        let t = self
            .app
            .create_task(
                NewTask {
                    project: project.into(),
                    request: "add a feature".into(),
                    agent: None,
                    ..Default::default()
                },
                user("alice"),
            )
            .await
            .unwrap();
        self.record_step(&t.id, step).await;
        t.id
    }

    pub async fn record_step(&self, task: &str, step: &str) {
        let stream = StreamId(task.into());
        let head = self.app.journal().head(&stream).await.unwrap();
        self.app
            .journal()
            .append(
                &stream,
                head,
                vec![NewEvent::now(Event::StepIntentRecorded {
                    step_id: StepId(step.into()),
                    name: step.into(),
                    intent: Intent::NonIdempotent,
                    depends_on: vec![],
                    input: serde_json::Value::Null,
                })],
            )
            .await
            .unwrap();
    }

    /// Every journal event of a kind about approval `id`.
    pub async fn events_about(&self, id: &str) -> Vec<&'static str> {
        let all = self.app.journal().events_after(0, 1_000_000).await.unwrap();
        all.into_iter()
            .filter_map(|e| match &e.event {
                Event::ApprovalRequested { approval_id, .. }
                | Event::ApprovalDecided { approval_id, .. }
                | Event::ApprovalExpired { approval_id, .. }
                | Event::ApprovalWithdrawn { approval_id, .. }
                    if approval_id.as_str() == id =>
                {
                    Some(e.event.kind())
                }
                _ => None,
            })
            .collect()
    }
}

pub fn tool_request(task: &str, step: &str, attempt: u32, subject: Subject) -> ApprovalRequest {
    ApprovalRequest {
        task_id: TaskId(task.into()),
        step_id: StepId(step.into()),
        attempt,
        kind: ApprovalKind::Tool,
        summary: format!("run {}", subject.command.clone().unwrap_or_default()),
        details: serde_json::json!({"why": "test"}),
        subject,
    }
}

pub fn command(cmd: &str) -> Subject {
    Subject {
        tool: Some("shell".into()),
        command: Some(cmd.into()),
        ..Subject::default()
    }
}
