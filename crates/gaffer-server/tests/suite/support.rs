use gaffer_app::{App, ApprovalRequest, NewTask, Policy, Subject};
use gaffer_core::{Actor, ApprovalKind, Event, Intent, StepId, StreamId, TaskId};
use gaffer_protocol::api;
use gaffer_server::auth::{Role, Token};
use gaffer_server::{LocalSecret, Server, ServerConfig};
use gaffer_store::{Durability, NewEvent, SqliteJournal};
use std::sync::Arc;

pub const ADMIN: &str = "admin-secret-0123456789";
pub const APPROVER: &str = "approver-secret-0123456789";
pub const VIEWER: &str = "viewer-secret-0123456789";

pub struct Harness {
    pub dir: tempfile::TempDir,
    pub app: App,
    pub base: String,
    /// The person's local secret (admin).
    pub local: LocalSecret,
    /// Without tokens: a client sending the local secret as its bearer credential;
    /// with tokens: one without a credential (each request names its token).
    pub http: reqwest::Client,
    /// A client without any credential.
    pub anonymous: reqwest::Client,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for Harness {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

pub async fn start(with_tokens: bool) -> Harness {
    start_with(with_tokens, "").await
}

pub async fn start_with(with_tokens: bool, policy: &str) -> Harness {
    start_configured(with_tokens, policy, |_| {}).await
}

/// A server without tokens that waits on its clients only as long as `limits` says.
pub async fn start_limited(limits: gaffer_server::Limits) -> Harness {
    start_configured(false, "", |c| c.limits = limits).await
}

/// A server with tokens whose config file has `schedules`.
pub async fn start_with_schedules(schedules: Vec<gaffer_config::Schedule>) -> Harness {
    start_configured(true, "", |c| c.schedules = schedules).await
}

/// A server without tokens whose config has the `[[schedules]]` of `toml`.
pub async fn start_scheduled(toml: &str) -> Harness {
    let schedules = schedules(toml);
    start_configured(false, "", |c| c.schedules = schedules).await
}

/// The `[[schedules]]` of a config file holding `toml`, as `gaffer serve` reads them.
pub fn schedules(toml: &str) -> Vec<gaffer_config::Schedule> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    std::fs::write(&path, toml).unwrap();
    let env = |_: &str| None;
    gaffer_config::load(&gaffer_config::Sources {
        file: Some((path, true)),
        data_dir_flag: None,
        database_flag: None,
        default_data_dir: dir.path().join("data"),
        env: &env,
    })
    .unwrap()
    .schedules
}

async fn start_configured(
    with_tokens: bool,
    policy: &str,
    configure: impl FnOnce(&mut ServerConfig),
) -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let journal = SqliteJournal::open(&dir.path().join("gaffer.db"), Durability::Normal)
        .await
        .unwrap();
    let app = App::new(Arc::new(journal), Policy::parse(policy).unwrap());
    let local = LocalSecret::load_or_create(dir.path(), "ana").unwrap();
    let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap(), local.clone());
    if with_tokens {
        config.tokens = vec![
            Token::new("root", Role::Admin, ADMIN),
            Token::new("ann", Role::Approver, APPROVER),
            Token::new("vic", Role::Viewer, VIEWER),
        ];
    }
    config.body_limit = 64 * 1024;
    configure(&mut config);
    let server = Server::bind(app.clone(), config).await.unwrap();
    let base = format!("http://{}", server.local_addr().unwrap());
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(server.run(async move {
        let _ = rx.await;
    }));
    Harness {
        dir,
        app,
        base,
        http: if with_tokens {
            reqwest::Client::new()
        } else {
            authorized(&local)
        },
        anonymous: reqwest::Client::new(),
        local,
        stop: Some(tx),
    }
}

/// A client that sends `local`'s secret with every request.
pub fn authorized(local: &LocalSecret) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        reqwest::header::AUTHORIZATION,
        format!("Bearer {}", local.expose()).parse().unwrap(),
    );
    reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .unwrap()
}

impl Harness {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The port the server listens on.
    pub fn port(&self) -> u16 {
        self.base.rsplit(':').next().unwrap().parse().unwrap()
    }

    /// A client without a credential that shows redirects instead of following them.
    pub fn anonymous_no_redirects(&self) -> reqwest::Client {
        reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap()
    }

    /// A fresh login link for the web page.
    pub fn login_link(&self) -> String {
        self.local.login_link(&self.base, gaffer_store::now_ms())
    }

    pub async fn project(&self, name: &str) -> api::Project {
        let path = self.dir.path().join(name);
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
                    name: Some(name.into()),
                    check: None,
                },
                Actor::user("t", "test"),
            )
            .await
            .unwrap()
    }

    pub async fn task(&self, project: &str) -> String {
        self.app
            .create_task(
                NewTask {
                    project: project.into(),
                    request: "make it faster".into(),
                    agent: None,
                    ..Default::default()
                },
                Actor::user("t", "test"),
            )
            .await
            .unwrap()
            .id
    }

    /// What the engine does: record a step, then ask.
    pub async fn ask(
        &self,
        task: &str,
        step: &str,
        kind: ApprovalKind,
        command: &str,
    ) -> api::Approval {
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
        self.app
            .request_approval(ApprovalRequest {
                task_id: TaskId(task.into()),
                step_id: StepId(step.into()),
                attempt: 1,
                kind,
                summary: format!("run `{command}`"),
                details: serde_json::json!({"reason": "the agent wants it"}),
                subject: Subject {
                    tool: Some("shell".into()),
                    command: Some(command.into()),
                    ..Subject::default()
                },
            })
            .await
            .unwrap()
    }

    pub async fn event_count(&self) -> usize {
        self.app
            .journal()
            .events_after(0, 1_000_000)
            .await
            .unwrap()
            .len()
    }
}
