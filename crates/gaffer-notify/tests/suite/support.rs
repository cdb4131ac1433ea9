//! A gaffer with one project, a task, a server taking one-tap links, and a notifier.

use gaffer_app::{App, ApprovalRequest, NewTask, Policy, Subject};
use gaffer_config::{NotifyEvent, NotifyKind, NotifyTarget, Secret};
use gaffer_core::{Actor, ApprovalKind, Event, Intent, StepId, StreamId, TaskId};
use gaffer_notify::{LinkKey, Links, Notifier, Reach, Retry, ServerUrl};
use gaffer_protocol::api;
use gaffer_server::{LocalSecret, Server, ServerConfig};
use gaffer_store::{Durability, NewEvent, NotifyItem, SqliteJournal};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone, Copy)]
pub enum Backend {
    Sqlite,
    Postgres,
}

pub const SECRET: &str = "whsec-0123456789abcdef";

pub struct Gaffer {
    pub dir: tempfile::TempDir,
    /// The journal's URL (empty: the SQLite file in `dir`).
    url: String,
    pub app: App,
    pub base: String,
    pub key: LinkKey,
    pub targets: Vec<NotifyTarget>,
    stop: CancellationToken,
    server_stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for Gaffer {
    fn drop(&mut self) {
        self.stop.cancel();
        if let Some(s) = self.server_stop.take() {
            let _ = s.send(());
        }
    }
}

/// Retries fast enough for a test.
pub fn quick() -> Retry {
    Retry {
        first: Duration::from_millis(50),
        max: Duration::from_millis(200),
        attempts: 5,
        timeout: Duration::from_secs(2),
        lease: Duration::from_secs(4),
    }
}

pub fn webhook(name: &str, url: &str, person: Option<&str>) -> NotifyTarget {
    NotifyTarget {
        name: name.into(),
        kind: NotifyKind::Webhook {
            url: url.into(),
            secret: secret(SECRET),
        },
        person: person.map(str::to_owned),
        events: NotifyEvent::ALL.to_vec(),
        secret_env: Some("GAFFER_NOTIFY_HOOK_SECRET".into()),
    }
}

pub fn ntfy(name: &str, url: &str, token: Option<&str>, person: Option<&str>) -> NotifyTarget {
    NotifyTarget {
        name: name.into(),
        kind: NotifyKind::Ntfy {
            url: url.into(),
            topic: "gaffer-ana".into(),
            token: token.map(secret),
        },
        person: person.map(str::to_owned),
        events: NotifyEvent::ALL.to_vec(),
        secret_env: None,
    }
}

fn secret(value: &str) -> Secret {
    Secret::new(value)
}

impl Gaffer {
    /// A journal, app and server (taking links for `targets`); no notifier yet.
    pub async fn start(targets: Vec<NotifyTarget>, policy: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let journal = SqliteJournal::open(&dir.path().join("gaffer.db"), Durability::Normal)
            .await
            .unwrap();
        Self::over(dir, Arc::new(journal), targets, policy).await
    }

    /// The same on `backend`'s journal (a fresh PostgreSQL database, or a file).
    pub async fn start_on(backend: Backend, targets: Vec<NotifyTarget>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let url = match backend {
            Backend::Sqlite => dir.path().join("gaffer.db").display().to_string(),
            Backend::Postgres => gaffer_testkit::postgres::fresh_database().await,
        };
        let journal = gaffer_store::open(&url, Durability::Normal).await.unwrap();
        let mut g = Self::over(dir, journal, targets, "").await;
        g.url = url;
        g
    }

    /// The journal's path or URL.
    pub fn journal_url(&self) -> String {
        if self.url.is_empty() {
            self.dir.path().join("gaffer.db").display().to_string()
        } else {
            self.url.clone()
        }
    }

    /// Another process's app on this journal: its own connections and writer.
    pub async fn another_process(&self) -> App {
        let journal = gaffer_store::open(&self.journal_url(), Durability::Normal)
            .await
            .unwrap();
        App::new(journal, Policy::parse("").unwrap())
    }

    async fn over(
        dir: tempfile::TempDir,
        journal: Arc<dyn gaffer_store::Journal>,
        targets: Vec<NotifyTarget>,
        policy: &str,
    ) -> Self {
        let app = App::new(journal, Policy::parse(policy).unwrap());
        let local = LocalSecret::load_or_create(dir.path(), "owner").unwrap();
        let key = LinkKey::new(local.derived_key("notify-link"));
        let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap(), local);
        config.links = Some(Links::new(key.clone(), &targets));
        let server = Server::bind(app.clone(), config).await.unwrap();
        let base = format!("http://{}", server.local_addr().unwrap());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(server.run(async move {
            let _ = rx.await;
        }));
        Self {
            dir,
            url: String::new(),
            app,
            base,
            key,
            targets,
            stop: CancellationToken::new(),
            server_stop: Some(tx),
        }
    }

    /// Start a notifier over this gaffer; it stops with `stop` or the gaffer.
    pub fn notifier(&self, retry: Retry, stop: &CancellationToken) -> tokio::task::JoinHandle<()> {
        self.notifier_reaching(ServerUrl::fixed(&self.base), retry, stop)
    }

    /// Start a notifier whose links lead to what `server` finds.
    pub fn notifier_reaching(
        &self,
        server: ServerUrl,
        retry: Retry,
        stop: &CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        self.notifier_of(self.app.clone(), server, retry, stop)
    }

    /// Start a notifier over `app` (this gaffer's, or another process's).
    pub fn notifier_of(
        &self,
        app: App,
        server: ServerUrl,
        retry: Retry,
        stop: &CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        let reach = Reach {
            links: Some(self.key.clone()),
            server,
            gaffer: "gaffer --config /srv/gaffer.toml".into(),
        };
        let n = Notifier::new(app, self.targets.clone(), reach, retry).unwrap();
        let stop = stop.clone();
        let ours = self.stop.clone();
        tokio::spawn(async move {
            let both = CancellationToken::new();
            let b = both.clone();
            tokio::spawn(async move {
                tokio::select! { () = stop.cancelled() => {}, () = ours.cancelled() => {} }
                b.cancel();
            });
            n.run(both).await.unwrap();
        })
    }

    pub async fn task(&self) -> String {
        let path = self.dir.path().join("app");
        std::fs::create_dir_all(&path).unwrap();
        assert!(std::process::Command::new("git")
            .args(["init", "-q"])
            .current_dir(&path)
            .status()
            .unwrap()
            .success());
        self.app
            .add_project(
                gaffer_app::AddProject {
                    path: path.to_string_lossy().into_owned(),
                    name: Some("app".into()),
                    check: None,
                },
                Actor::user("t", "test"),
            )
            .await
            .unwrap();
        self.app
            .create_task(
                NewTask {
                    project: "app".into(),
                    request: "make the build faster".into(),
                    ..Default::default()
                },
                Actor::user("t", "test"),
            )
            .await
            .unwrap()
            .id
    }

    /// What the engine does: record a step, then ask about `command`.
    pub async fn ask(&self, task: &str, command: &str) -> api::Approval {
        self.ask_in(task, "s1", command).await
    }

    /// Another approval of the same task, in its own step.
    pub async fn ask_again(&self, task: &str, command: &str) -> api::Approval {
        self.ask_in(task, "s2", command).await
    }

    pub async fn ask_in(&self, task: &str, step: &str, command: &str) -> api::Approval {
        let stream = StreamId(task.into());
        let head = self.app.journal().head(&stream).await.unwrap();
        self.app
            .journal()
            .append(
                &stream,
                head,
                vec![NewEvent::now(Event::StepIntentRecorded {
                    step_id: StepId(step.into()),
                    name: "owner".into(),
                    intent: Intent::NonIdempotent,
                    depends_on: vec![],
                    input: serde_json::Value::Null,
                })],
            )
            .await
            .unwrap();
        self.app
            .request_approval(ApprovalRequest {
                task_id: TaskId(task.into()),
                step_id: StepId(step.into()),
                attempt: 1,
                kind: ApprovalKind::Tool,
                summary: format!("run `{command}`"),
                details: serde_json::json!({ "command": command }),
                subject: Subject {
                    tool: Some("shell".into()),
                    command: Some(command.into()),
                    ..Subject::default()
                },
            })
            .await
            .unwrap()
    }

    pub async fn outbox(&self) -> Vec<NotifyItem> {
        self.app.journal().notify_outbox(100).await.unwrap()
    }

    /// Wait (at most 20 s) until `done` holds for the outbox.
    pub async fn until(&self, what: &str, done: impl Fn(&[NotifyItem]) -> bool) -> Vec<NotifyItem> {
        for _ in 0..400 {
            let items = self.outbox().await;
            if done(&items) {
                return items;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{what}: not reached; outbox: {:#?}", self.outbox().await);
    }
}
