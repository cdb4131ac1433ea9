use gaffer_app::{AddProject, App, ApprovalRequest, NewTask, Policy, Subject};
use gaffer_core::{Actor, ApprovalKind, Event, Intent, StepId, StreamId, TaskId};
use gaffer_discord::Settings;
use gaffer_store::{Durability, Journal, NewEvent, SqliteJournal};
use gaffer_testkit::discord::{FakeDiscord, FakeMessage, FakeUser};
use gaffer_testkit::git::git;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

pub const TOKEN: &str = "bot-token-for-tests";
pub const APP_ID: &str = "4242";
/// The room of project `demo`.
pub const ROOM: &str = "100";
/// Generous: the machine running the tests may be busy.
pub const WAIT: Duration = Duration::from_secs(60);

/// An approver by user id.
pub fn ana() -> FakeUser {
    FakeUser::new("7", "ana", &[])
}
/// An approver by role.
pub fn bob() -> FakeUser {
    FakeUser::new("9", "bob", &["8"])
}
/// Not an approver.
pub fn eve() -> FakeUser {
    FakeUser::new("6", "eve", &["5"])
}

/// A journal with project `demo`, a fake Discord, and the adapter running against it.
pub struct World {
    pub dir: tempfile::TempDir,
    pub journal: Arc<SqliteJournal>,
    pub app: App,
    pub discord: FakeDiscord,
    adapter: Option<(
        CancellationToken,
        tokio::task::JoinHandle<gaffer_discord::Result<()>>,
    )>,
}

impl World {
    pub async fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("demo");
        std::fs::create_dir_all(&repo).unwrap();
        git(&repo, &["init", "-q", "-b", "main"]);
        std::fs::write(repo.join("README.md"), "# demo\n\nA demo project.\n").unwrap();
        git(&repo, &["add", "."]);
        git(&repo, &["commit", "-q", "-m", "init"]);
        let journal = Arc::new(
            SqliteJournal::open(&dir.path().join("gaffer.db"), Durability::Normal)
                .await
                .unwrap(),
        );
        let app = App::new(journal.clone() as Arc<dyn Journal>, Policy::default());
        app.add_project(
            AddProject {
                path: repo.display().to_string(),
                name: Some("demo".into()),
                check: Some("grep -q '^## Installation' README.md".into()),
            },
            Actor::user("test", "test"),
        )
        .await
        .unwrap();
        let discord = FakeDiscord::start(TOKEN, APP_ID, Duration::from_millis(800)).await;
        let mut w = Self {
            dir,
            journal,
            app,
            discord,
            adapter: None,
        };
        w.start_adapter().await;
        w
    }

    pub fn settings(&self) -> Settings {
        Settings {
            token: TOKEN.into(),
            application_id: Some(APP_ID.into()),
            api_url: self.discord.api_url(),
            gateway_url: None,
            approver_users: vec!["7".into()],
            approver_roles: vec!["8".into()],
            rooms: [(ROOM.to_owned(), "demo".to_owned())].into_iter().collect(),
        }
    }

    /// Start the adapter and wait until it is logged in to the gateway.
    pub async fn start_adapter(&mut self) {
        let stop = CancellationToken::new();
        let handle = tokio::spawn(gaffer_discord::run(
            self.app.clone(),
            self.settings(),
            stop.clone(),
        ));
        let login = self.discord.wait_for("the adapter to log in", WAIT, |d| {
            d.connected().then_some(())
        });
        tokio::pin!(login);
        let mut handle = handle;
        tokio::select! {
            () = &mut login => {}
            ended = &mut handle => panic!("the adapter stopped before logging in: {ended:?}"),
        }
        self.adapter = Some((stop, handle));
    }

    /// Stop the adapter as a shutdown would.
    pub async fn stop_adapter(&mut self) {
        if let Some((stop, handle)) = self.adapter.take() {
            stop.cancel();
            handle.await.unwrap().unwrap();
        }
        self.discord
            .wait_for("the adapter to disconnect", WAIT, |d| {
                (!d.connected()).then_some(())
            })
            .await;
    }

    /// Kill the adapter where it stands, as a crash would: its future is dropped
    /// at whatever it was awaiting (a post Discord has made but not answered),
    /// so nothing after that await runs.
    pub async fn crash_adapter(&mut self) {
        if let Some((_, handle)) = self.adapter.take() {
            handle.abort();
            assert!(handle.await.unwrap_err().is_cancelled());
        }
        self.discord
            .wait_for("the crashed adapter to disconnect", WAIT, |d| {
                (!d.connected()).then_some(())
            })
            .await;
    }

    pub async fn task(&self, request: &str) -> String {
        self.app
            .create_task(
                NewTask {
                    project: "demo".into(),
                    request: request.into(),
                    ..NewTask::default()
                },
                Actor::user("cli-user", "cli"),
            )
            .await
            .unwrap()
            .id
    }

    /// A pending tool approval to run `cargo publish` for `task`.
    pub async fn approval(
        &self,
        task: &str,
        step: &str,
        attempt: u32,
    ) -> gaffer_protocol::api::Approval {
        self.approval_to_run(task, step, attempt, "cargo publish")
            .await
    }

    /// A tool approval to run `command` for `task` (its step recorded first, as
    /// the engine does).
    pub async fn approval_to_run(
        &self,
        task: &str,
        step: &str,
        attempt: u32,
        command: &str,
    ) -> gaffer_protocol::api::Approval {
        let stream = StreamId(task.into());
        if self
            .app
            .task(task)
            .await
            .unwrap()
            .steps
            .iter()
            .all(|s| s.id != step)
        {
            let head = self.journal.head(&stream).await.unwrap();
            self.journal
                .append(
                    &stream,
                    head,
                    vec![NewEvent::now(Event::StepIntentRecorded {
                        step_id: StepId(step.into()),
                        name: step.into(),
                        intent: Intent::NonIdempotent,
                        depends_on: vec![],
                        input: Value::Null,
                    })],
                )
                .await
                .unwrap();
        }
        self.app
            .request_approval(ApprovalRequest {
                task_id: TaskId(task.into()),
                step_id: StepId(step.into()),
                attempt,
                kind: ApprovalKind::Tool,
                summary: format!("Run `{command}` for {step}?"),
                details: json!({ "tool": "Bash", "input": { "command": command } }),
                subject: Subject {
                    tool: Some("Bash".into()),
                    command: Some(command.into()),
                    ..Subject::default()
                },
            })
            .await
            .unwrap()
    }

    /// The thread of the one task started in the room.
    pub async fn thread_of(&self, task: &str) -> String {
        let task = task.to_owned();
        self.discord
            .wait_for("the task's thread", WAIT, |d| {
                let header = d
                    .messages(ROOM)
                    .into_iter()
                    .find(|m| m.content.contains(&task))?;
                d.threads().contains_key(&header.id).then_some(header.id)
            })
            .await
    }

    /// The room message of the task asked with `request`, once the adapter posted it.
    pub async fn header_with(&self, request: &str) -> FakeMessage {
        let request = request.to_owned();
        self.discord
            .wait_for("the task's header in the room", WAIT, |d| {
                d.messages(ROOM)
                    .into_iter()
                    .find(|m| m.content.contains(&request))
            })
            .await
    }

    /// The message of approval `id` once it shows in `thread`.
    pub async fn approval_message(&self, thread: &str, id: &str) -> FakeMessage {
        let (thread, id) = (thread.to_owned(), id.to_owned());
        self.discord
            .wait_for("the approval's message", WAIT, |d| {
                d.messages(&thread)
                    .into_iter()
                    .find(|m| m.content.contains(&id))
            })
            .await
    }

    /// The first message in `thread` that starts with `start`, once there is one.
    pub async fn note_starting(&self, thread: &str, start: &str) -> FakeMessage {
        let (thread, start) = (thread.to_owned(), start.to_owned());
        self.discord
            .wait_for("the note", WAIT, |d| {
                d.messages(&thread)
                    .into_iter()
                    .find(|m| m.content.starts_with(&start))
            })
            .await
    }

    /// Every message in `channel` whose text contains `needle`.
    pub fn count(&self, channel: &str, needle: &str) -> usize {
        self.discord
            .messages(channel)
            .iter()
            .filter(|m| m.content.contains(needle))
            .count()
    }
}

/// A fake agent turn that says `text`.
pub fn say(text: &str) -> Value {
    json!({ "steps": [{ "say": text }] })
}

/// Script one role's turns for the fake agents.
pub fn script(dir: &std::path::Path, role: &str, turns: Vec<Value>) {
    std::fs::write(
        dir.join(format!("{role}.json")),
        json!({ "turns": turns }).to_string(),
    )
    .unwrap();
}

/// A planner that plans one subtask: an installation section in the README.
pub fn script_plan(dir: &std::path::Path) {
    let plan = json!({ "subtasks": [{ "title": "Add an installation section", "description": "write it",
        "files": ["README.md"], "acceptance": "README has an Installation section" }] });
    script(
        dir,
        "planner",
        vec![say(&format!("Plan:\n```json\n{plan}\n```"))],
    );
}

/// The real engine with the fake Claude Code, with settings changed by `tune`;
/// and the directory its agents' scripts go in.
pub fn engine(
    w: &World,
    tune: impl FnOnce(&mut gaffer_engine::Settings),
) -> (gaffer_engine::Engine, std::path::PathBuf) {
    let scenarios = w.dir.path().join("scenarios");
    std::fs::create_dir_all(&scenarios).unwrap();
    let state = w.dir.path().join("fake-state");
    let mut settings = gaffer_engine::Settings::new(w.dir.path().join("data"));
    settings.agent_env = [
        ("GAFFER_FAKE_SCENARIO", scenarios.display().to_string()),
        ("GAFFER_FAKE_STATE_DIR", state.display().to_string()),
        (
            "GAFFER_FAKE_LOG",
            w.dir.path().join("effects.log").display().to_string(),
        ),
        (
            "CLAUDE_CONFIG_DIR",
            state.join("claude").display().to_string(),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    tune(&mut settings);
    let agents = Arc::new(
        gaffer_engine::Backends::new(settings.redactor.clone())
            .with_bins(Some(gaffer_testkit::bins::fake_bin("fake-claude")), None),
    );
    (
        gaffer_engine::Engine::new(w.app.clone(), agents, settings),
        scenarios,
    )
}
