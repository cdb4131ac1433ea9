//! gaffer's HTTP server: the `/api` routes (a stable contract, described by the
//! OpenAPI document at `/api/openapi.json`), server-sent journal events,
//! the embedded web page, `/healthz` and Prometheus `/metrics`.
//!
//! The server holds no state outside the store: every handler calls the app
//! service ([`gaffer_app::App`]); live updates come from the journal's
//! committed-event broadcast. See `README.md` in this crate for the routes,
//! authentication and the approval semantics (200 for the decision that was
//! recorded, 409 `already_decided` with the recorded approval for every other).

#![deny(missing_docs)]

pub mod auth;
mod body;
pub mod error;
pub mod guard;
pub mod hooks;
pub mod link;
pub mod local;
pub mod metrics;
pub mod routes;
pub mod schedule_changes;
pub mod schedules;
pub mod serve;
pub mod sse;
mod tally;
mod web;

use auth::{Role, Token};
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use axum::Router;
use gaffer_app::{App, Policy};
pub use hooks::HookSink;
pub use local::LocalSecret;
pub use serve::Limits;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

/// Largest request body accepted (bytes).
pub const DEFAULT_BODY_LIMIT: usize = 256 * 1024;

/// How to serve.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Where to listen. Anything but loopback needs at least one token.
    pub listen: SocketAddr,
    /// API tokens; empty means loopback clients only.
    pub tokens: Vec<Token>,
    /// The local secret: the credential of the person running gaffer (see [`local`]).
    pub local: LocalSecret,
    /// Host names answered besides loopback names and IP addresses (see [`guard`]).
    pub public_names: Vec<String>,
    /// Largest request body (bytes).
    pub body_limit: usize,
    /// Where `POST /api/tasks {"issue"}` reads issues from (the projects' forges);
    /// `None`: such requests are refused naming `issue`.
    pub issues: Option<IssueSource>,
    /// Where `POST /api/hooks/{forge}` deliveries go (issue intake); `None`: every
    /// delivery is refused (401).
    pub hooks: Option<HookSink>,
    /// How long the server waits on a client (see [`serve`]).
    pub limits: Limits,
    /// The commit the binary was built from (`gaffer_build_info{commit}`);
    /// `unknown` when it was not built in a git checkout.
    pub commit: String,
    /// One-tap links from notifications (see [`link`]); `None`: refused.
    pub links: Option<gaffer_notify::Links>,
    /// The config's `[[schedules]]`, shown by `GET /api/schedules` and the page;
    /// their names are not free for added schedules, and only the config file
    /// changes them.
    pub schedules: Vec<gaffer_config::Schedule>,
}

/// The issue reader a server uses (see [`ServerConfig::issues`]).
#[derive(Clone)]
pub struct IssueSource(pub Arc<dyn gaffer_app::IssueReader>);

impl std::fmt::Debug for IssueSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IssueSource")
    }
}

/// What can stop the server from starting.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// Configuration is unsafe or wrong (exit 78 in the CLI).
    #[error("{0}")]
    Config(String),
    /// The socket could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

impl ServerConfig {
    /// Defaults at `listen` with no tokens: only `local`'s holder gets in.
    pub fn new(listen: SocketAddr, local: LocalSecret) -> Self {
        Self {
            listen,
            tokens: Vec::new(),
            local,
            public_names: Vec::new(),
            body_limit: DEFAULT_BODY_LIMIT,
            issues: None,
            hooks: None,
            limits: Limits::default(),
            commit: "unknown".into(),
            links: None,
            schedules: Vec::new(),
        }
    }

    /// Tokens from the policy file's `[[tokens]]`: `secret_sha256`, or `secret_env` read
    /// through `env`. A plaintext `secret` is refused.
    pub fn with_policy_tokens(
        mut self,
        policy: &Policy,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, ServerError> {
        for t in &policy.tokens {
            let role = Role::parse(&t.role).ok_or_else(|| {
                ServerError::Config(format!("token `{}`: unknown role `{}`", t.name, t.role))
            })?;
            let token = match (&t.secret_sha256, &t.secret_env, &t.secret) {
                (Some(hash), None, None) => Token::from_sha256(&t.name, role, hash).ok_or_else(|| {
                    ServerError::Config(format!(
                        "token `{}`: secret_sha256 must be 64 hex digits (the SHA-256 that `gaffer token new` prints)",
                        t.name
                    ))
                })?,
                (None, Some(var), None) => {
                    let secret = env(var).ok_or_else(|| {
                        ServerError::Config(format!(
                            "token `{}`: environment variable {var} is not set",
                            t.name
                        ))
                    })?;
                    if secret.len() < 16 {
                        return Err(ServerError::Config(format!(
                            "token `{}` is shorter than 16 characters; use a long random secret (`gaffer token new`)",
                            t.name
                        )));
                    }
                    Token::new(&t.name, role, &secret)
                }
                (None, None, Some(secret)) => {
                    return Err(ServerError::Config(format!(
                        "token `{}`: a plaintext `secret` in policy.toml is refused (the file would hold a live credential); replace it with secret_sha256 = \"{}\", or keep the secret in an environment variable named by secret_env",
                        t.name,
                        auth::token_sha256(secret)
                    )))
                }
                _ => {
                    return Err(ServerError::Config(format!(
                        "token `{}` needs exactly one of secret_sha256 (from `gaffer token new`) or secret_env",
                        t.name
                    )))
                }
            };
            self.tokens.push(token);
        }
        Ok(self)
    }
}

/// What every handler gets.
#[derive(Clone)]
pub struct ServerState {
    /// The app service.
    pub app: App,
    pub(crate) tokens: Arc<Vec<Token>>,
    pub(crate) local: LocalSecret,
    pub(crate) public_names: Arc<Vec<String>>,
    pub(crate) csrf: Arc<str>,
    pub(crate) metrics: Arc<metrics::Metrics>,
    pub(crate) issues: Option<IssueSource>,
    pub(crate) hooks: Option<HookSink>,
    pub(crate) links: Option<Arc<gaffer_notify::Links>>,
    pub(crate) schedules: Arc<[gaffer_config::Schedule]>,
}

/// The whole router: API, SSE, web page, health and metrics, with auth, body
/// limit and metrics layers.
pub fn router(app: App, config: &ServerConfig) -> Router {
    let state = ServerState {
        app,
        tokens: Arc::new(config.tokens.clone()),
        local: config.local.clone(),
        public_names: Arc::new(config.public_names.clone()),
        csrf: Arc::from(config.local.csrf()),
        metrics: Arc::new(metrics::Metrics::new(&config.commit)),
        issues: config.issues.clone(),
        hooks: config.hooks.clone(),
        links: config.links.clone().map(Arc::new),
        schedules: config.schedules.clone().into(),
    };
    use routes as r;
    Router::new()
        .route("/healthz", get(r::healthz))
        .route("/metrics", get(r::metrics))
        .route("/api/openapi.json", get(r::openapi_json))
        .route("/api/projects", get(r::list_projects).post(r::add_project))
        .route("/api/projects/{id}", get(r::get_project))
        .route("/api/projects/{id}/auto", post(r::set_auto))
        .route("/api/tasks", get(r::list_tasks).post(r::create_task))
        .route("/api/tasks/{id}", get(r::get_task))
        .route("/api/tasks/{id}/cancel", post(r::cancel_task))
        .route("/api/tasks/{id}/retry", post(r::retry_task))
        .route(
            "/api/tasks/{id}/messages",
            get(r::list_messages).post(r::send_message),
        )
        .route("/api/tasks/{id}/interrupt", post(r::interrupt_task))
        .route("/api/tasks/{id}/sessions", get(r::task_sessions))
        .route("/api/tasks/{id}/diff", get(r::task_diff))
        .route("/api/tasks/{id}/events", get(sse::task_events))
        .route("/api/tasks/{id}/history", get(r::task_history))
        .route("/api/events", get(sse::all_events))
        .route("/api/approvals", get(r::list_approvals))
        .route("/api/approvals/{id}", get(r::get_approval))
        .route("/api/approvals/{id}/decision", post(r::decide))
        .route("/api/usage", get(r::usage))
        .route(
            "/api/schedules",
            get(schedules::list).post(schedule_changes::add_schedule),
        )
        .route(
            "/api/schedules/{name}",
            axum::routing::delete(schedule_changes::remove_schedule),
        )
        .route("/api/hooks/{forge}", post(hooks::receive))
        .route("/", get(web::page))
        .route("/approvals", get(web::page))
        .route("/schedules", get(web::page))
        .route("/tasks/{id}", get(web::page))
        .route("/assets/{*name}", get(web::asset))
        .route("/favicon.ico", get(web::favicon))
        .route("/login", get(web::login_page).post(web::login))
        .route("/link/{token}", get(link::confirm_page).post(link::decide))
        .fallback(|| async { error::ApiError::not_found("no such route; see /api/openapi.json") })
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::middleware,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            guard::middleware,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            metrics::middleware,
        ))
        .layer(axum::middleware::from_fn_with_state(
            config.limits.request,
            serve::request_timeout,
        ))
        .layer(DefaultBodyLimit::max(config.body_limit))
        .layer(axum::middleware::from_fn(guard::headers))
        .with_state(state)
}

/// A bound server, ready to run.
pub struct Server {
    listener: tokio::net::TcpListener,
    app: App,
    router: Router,
    limits: Limits,
}

impl Server {
    /// Check the config and bind. Refuses a non-loopback address without a token.
    pub async fn bind(app: App, config: ServerConfig) -> Result<Self, ServerError> {
        if !config.listen.ip().is_loopback() && config.tokens.is_empty() {
            return Err(ServerError::Config(format!(
                "{} is not a loopback address; configure a token ([[tokens]] in policy.toml) before listening on it",
                config.listen
            )));
        }
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|source| ServerError::Bind {
                addr: config.listen,
                source,
            })?;
        let router = router(app.clone(), &config);
        Ok(Self {
            listener,
            app,
            router,
            limits: config.limits,
        })
    }

    /// The bound address (useful with port 0).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serve until `shutdown` resolves. Also expires approvals at their deadlines.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let app = self.app.clone();
        let expiry = tokio::spawn(async move {
            if let Err(e) = app.run_expiry().await {
                tracing::error!(error = %e, "approval expiry stopped");
            }
        });
        serve::serve(self.listener, self.router, self.limits, shutdown).await;
        expiry.abort();
        Ok(())
    }
}
