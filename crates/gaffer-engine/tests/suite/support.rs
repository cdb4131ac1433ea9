use gaffer_app::{AddProject, App, NewTask, Policy};
use gaffer_core::{Actor, TaskId};
use gaffer_engine::{Backends, Engine, Settings};
use gaffer_store::{Durability, Journal};
pub use gaffer_testkit::git::git;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A repository with a README on `main`.
pub fn fixture_repo(dir: &Path) -> PathBuf {
    let repo = dir.join("demo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("README.md"), "# demo\n\nA demo project.\n").unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "init"]);
    repo
}

/// A fake agent turn that says `text`.
pub fn say(text: &str) -> Value {
    json!({ "steps": [{ "say": text }] })
}

/// A fake agent turn that writes `path` and says it did.
pub fn write(path: &str, content: &str) -> Value {
    json!({ "steps": [{ "write_file": { "path": path, "content": content } }, { "say": format!("wrote {path}") }] })
}

pub fn plan_answer(titles: &[&str]) -> Value {
    let subtasks: Vec<Value> = titles
        .iter()
        .map(|t| json!({ "title": t, "description": format!("do: {t}"), "files": ["README.md"], "acceptance": "README has an Installation section" }))
        .collect();
    say(&format!(
        "Here is the plan.\n```json\n{}\n```",
        json!({ "subtasks": subtasks })
    ))
}

/// A step of a fake Claude Code turn: one model call `id` that spent `tokens`
/// input tokens, as Claude Code reports it in its assistant message.
pub fn model_call(id: &str, tokens: u64) -> Value {
    let message = json!({ "type": "assistant", "message": { "id": id, "type": "message",
        "role": "assistant", "model": "claude-sonnet-4-5", "stop_reason": null,
        "content": [{ "type": "text", "text": format!("working ({id})") }],
        "usage": { "input_tokens": tokens, "output_tokens": 0 } },
        "parent_tool_use_id": null, "session_id": null });
    json!({ "raw": message.to_string() })
}

pub fn verdict(v: Value) -> Value {
    say(&format!("My verdict:\n```json\n{v}\n```"))
}

pub const README_DONE: &str =
    "# demo\n\nA demo project.\n\n## Installation\n\n    cargo install demo\n";

/// Everything one pipeline test needs, in its own temp dir.
pub struct World {
    pub dir: tempfile::TempDir,
    pub repo: PathBuf,
    pub scenarios: PathBuf,
    pub log: PathBuf,
    pub journal: Arc<dyn Journal>,
    pub app: App,
    pub engine: Engine,
    pub settings: Settings,
}

/// Where a test's journal lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    /// Whether it can run here (PostgreSQL may be missing outside CI).
    pub fn available(self) -> bool {
        self == Backend::Sqlite || gaffer_testkit::postgres::available()
    }

    /// A new, empty journal: a file in `dir`, or a fresh PostgreSQL database.
    pub async fn journal(self, dir: &Path) -> (Arc<dyn Journal>, String) {
        let url = match self {
            Backend::Sqlite => dir.join("gaffer.db").display().to_string(),
            Backend::Postgres => gaffer_testkit::postgres::fresh_database().await,
        };
        let journal = gaffer_store::open(&url, Durability::Normal).await.unwrap();
        (journal, url)
    }
}

impl World {
    /// A repo whose check passes once README has an Installation section.
    pub async fn new() -> Self {
        Self::with_check("grep -q '^## Installation' README.md").await
    }

    pub async fn with_check(check: &str) -> Self {
        Self::build(check, |_| {}).await
    }

    /// With settings changed by `tune` (roles, limits).
    pub async fn build(check: &str, tune: impl FnOnce(&mut Settings)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let (journal, _) = Backend::Sqlite.journal(dir.path()).await;
        Self::build_on(dir, journal, "demo", check, tune).await
    }

    /// In `dir`, on `journal`, with the project registered as `project`.
    pub async fn build_on(
        dir: tempfile::TempDir,
        journal: Arc<dyn Journal>,
        project: &str,
        check: &str,
        tune: impl FnOnce(&mut Settings),
    ) -> Self {
        let repo = fixture_repo(dir.path());
        let scenarios = dir.path().join("scenarios");
        std::fs::create_dir_all(&scenarios).unwrap();
        let log = dir.path().join("effects.log");
        let app = App::new(journal.clone(), Policy::default());
        app.add_project(
            AddProject {
                path: repo.display().to_string(),
                name: Some(project.into()),
                check: Some(check.into()),
            },
            Actor::user("test", "test"),
        )
        .await
        .unwrap();
        let settings = Self::settings(dir.path(), tune);
        let engine = Engine::new(app.clone(), Self::agents(&settings), settings.clone());
        Self {
            dir,
            repo,
            scenarios,
            log,
            journal,
            app,
            engine,
            settings,
        }
    }

    /// An engine with this world's settings on `journal` (the same journal seen
    /// through a wrapper, say): another process, as far as a task can tell.
    pub fn engine_on(&self, journal: Arc<dyn Journal>) -> Engine {
        let app = App::new(journal, Policy::default());
        Engine::new(app, Self::agents(&self.settings), self.settings.clone())
    }

    /// The agents (the fake Claude Code and Codex) of an engine with `settings`.
    pub fn agents(settings: &Settings) -> Arc<Backends> {
        Arc::new(Backends::new(settings.redactor.clone()).with_bins(
            Some(gaffer_testkit::bins::fake_bin("fake-claude")),
            Some(gaffer_testkit::bins::fake_bin("fake-codex")),
        ))
    }

    /// The engine's settings for a world in `dir`: its data dir, and the fake
    /// agents' scripts, state and effect log there; changed by `tune`.
    pub fn settings(dir: &Path, tune: impl FnOnce(&mut Settings)) -> Settings {
        let scenarios = dir.join("scenarios");
        let state = dir.join("fake-state");
        let log = dir.join("effects.log");
        let mut settings = Settings::new(dir.join("data"));
        settings.agent_env = [
            (
                "GAFFER_CLAUDE_BIN",
                gaffer_testkit::bins::fake_bin("fake-claude")
                    .display()
                    .to_string(),
            ),
            ("GAFFER_FAKE_SCENARIO", scenarios.display().to_string()),
            ("GAFFER_FAKE_STATE_DIR", state.display().to_string()),
            ("GAFFER_FAKE_LOG", log.display().to_string()),
            (
                "CLAUDE_CONFIG_DIR",
                state.join("claude").display().to_string(),
            ),
            // Agents' HOME (and where their private state is seeded from): never the
            // real user's.
            ("HOME", dir.join("home").display().to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        tune(&mut settings);
        settings
    }

    /// Script one role's turns, in order across its sessions.
    pub fn script(&self, role: &str, turns: Vec<Value>) {
        std::fs::write(
            self.scenarios.join(format!("{role}.json")),
            json!({ "turns": turns }).to_string(),
        )
        .unwrap();
    }

    pub async fn task(&self, request: &str, auto_approve: bool) -> TaskId {
        self.task_with_agent(request, auto_approve, Some("claude"))
            .await
    }

    pub async fn task_with_agent(
        &self,
        request: &str,
        auto_approve: bool,
        agent: Option<&str>,
    ) -> TaskId {
        let t = self
            .app
            .create_task(
                NewTask {
                    project: "demo".into(),
                    request: request.into(),
                    agent: agent.map(str::to_owned),
                    auto_approve,
                    ..NewTask::default()
                },
                Actor::user("test", "test"),
            )
            .await
            .unwrap();
        TaskId(t.id)
    }

    /// Run the task to its end here.
    pub async fn run(&self, id: &TaskId) -> gaffer_core::Stage {
        self.engine
            .run_task(id, tokio_util::sync::CancellationToken::new())
            .await
            .unwrap()
    }

    /// Run the task in the background.
    pub fn spawn(
        &self,
        id: &TaskId,
    ) -> tokio::task::JoinHandle<gaffer_engine::Result<gaffer_core::Stage>> {
        let engine = self.engine.clone();
        let id = id.clone();
        tokio::spawn(async move {
            engine
                .run_task(&id, tokio_util::sync::CancellationToken::new())
                .await
        })
    }

    pub async fn view(&self, id: &TaskId) -> gaffer_store::TaskView {
        self.journal.task(id.as_str()).await.unwrap().unwrap()
    }

    pub fn effects(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    pub fn summary(view: &gaffer_store::TaskView) -> Value {
        let outcome: Value =
            serde_json::from_str(view.task.outcome.as_deref().unwrap_or("null")).unwrap();
        outcome
    }
}

/// The ids of a task's steps, in recording order.
pub fn step_ids(view: &gaffer_store::TaskView) -> Vec<&str> {
    view.steps.iter().map(|s| s.step_id.as_str()).collect()
}

/// How the test project ships to a fake forge: the bare repository as the remote,
/// CI polled every few milliseconds.
pub fn shipping(
    kind: gaffer_forge::ForgeKind,
    base_url: &str,
    remote: &str,
    token: &str,
) -> gaffer_engine::Shipping {
    gaffer_engine::Shipping {
        kind,
        base_url: base_url.into(),
        owner: Some("acme".into()),
        repo: Some("demo".into()),
        remote: remote.into(),
        token: gaffer_engine::Credential::Value(gaffer_forge::Secret::new(token)),
        push_with_token: false,
        labels: vec!["gaffer".into()],
        ci: gaffer_forge::CiWait {
            first_interval: std::time::Duration::from_millis(30),
            max_interval: std::time::Duration::from_millis(150),
            timeout: std::time::Duration::from_secs(120),
            max_transient_errors: 5,
            no_checks_after: None,
        },
        ci_fix_attempts: 2,
        conflict_strategy: gaffer_forge::ConflictStrategy::Rebase,
        wait_for_ci: true,
        review_fix_attempts: 3,
        follow: Some(gaffer_engine::Following {
            every: std::time::Duration::from_millis(50),
            bot_user: None,
        }),
    }
}

/// The stage `run` (of task `id`) ends in; a run still going after a minute fails
/// the test with the task's journal, so a hang shows where it stopped.
pub async fn finish(
    w: &World,
    id: &TaskId,
    run: tokio::task::JoinHandle<gaffer_engine::Result<gaffer_core::Stage>>,
) -> gaffer_core::Stage {
    match tokio::time::timeout(std::time::Duration::from_secs(60), run).await {
        Ok(done) => done.unwrap().unwrap(),
        Err(_) => {
            let events = w
                .journal
                .stream_events(&gaffer_core::StreamId(id.0.clone()), 0)
                .await
                .unwrap();
            let kinds: Vec<String> = events
                .iter()
                .map(|e| {
                    format!(
                        "{} {}",
                        e.event.kind(),
                        serde_json::to_string(&e.event)
                            .unwrap_or_default()
                            .chars()
                            .take(300)
                            .collect::<String>()
                    )
                })
                .collect();
            panic!("task {id} still runs after a minute:\n{}", kinds.join("\n"));
        }
    }
}

/// The next approval of `kind` the journal records: its id, summary and details
/// (a minute at most).
pub async fn next_approval(
    events: &mut tokio::sync::broadcast::Receiver<gaffer_store::RecordedEvent>,
    kind: gaffer_core::ApprovalKind,
) -> (String, String, Value) {
    loop {
        let e = tokio::time::timeout(std::time::Duration::from_secs(60), events.recv())
            .await
            .unwrap_or_else(|_| panic!("a {} approval within a minute", kind.as_str()))
            .unwrap();
        if let gaffer_core::Event::ApprovalRequested {
            approval_id,
            kind: k,
            summary,
            details,
            ..
        } = e.event
        {
            if k == kind {
                return (approval_id.0, summary, details);
            }
        }
    }
}

/// `decision` on approval `id`, by ana.
pub async fn decide_as_ana(
    w: &World,
    id: &str,
    decision: gaffer_core::Decision,
    note: Option<&str>,
) {
    w.app
        .decide(
            id,
            decision,
            Actor::user("ana", "test"),
            note.map(str::to_owned),
            gaffer_app::Scope::default(),
        )
        .await
        .unwrap();
}
