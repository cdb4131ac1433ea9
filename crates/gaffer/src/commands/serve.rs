//! `gaffer serve`: workers, the HTTP API, SSE and the web page on one port.
//!
//! Notifications: `[[notify]]` targets are told about approvals and finished tasks
//! (see `gaffer-notify` and `notifications`); their one-tap links point at
//! `[server] public_url`, else at this server, and are signed with a key derived
//! from the local secret.
//!
//! Discord: when the environment variable `discord.token_env` names holds a bot
//! token, the Discord adapter runs beside the server (see `gaffer-discord`); a
//! room naming an unregistered project is refused at start (exit 78).
//!
//! Workers, as `gaffer worker` runs them: tasks are leased from the journal, so
//! servers and workers on other machines share the work. At most `--workers` /
//! `workers.count` tasks run at once here (`workers.per_project` in one project;
//! `--workers 0`: none, the API and page only); a task waiting
//! for an approval holds its lease until the decision wakes it. Stopping the
//! server does not cancel running tasks: their leases are released and another
//! worker (or the next start) resumes them.
//!
//! Cleanup: every hour (and at start) the server does what `gaffer gc` does: the
//! worktrees of shipped and cancelled tasks past the retention are removed, and task
//! branches whose pull request was merged or closed are pruned.
//!
//! The address it listens on (which `--listen` may have chosen, port 0 included) is
//! recorded in the data dir while it runs (`serve.json`), so that `gaffer login-link`
//! links to the server that is actually there.

use crate::cli::{Global, LoginLinkArgs, ServeArgs};
use crate::commands::approvals::open_app;
use crate::commands::notifications;
use crate::commands::worker;
use crate::error::{CliError, Result};
use gaffer_server::{IssueSource, LocalSecret, Server, ServerConfig, ServerError};
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How often the server cleans up worktrees and branches.
const GC_INTERVAL: std::time::Duration = std::time::Duration::from_secs(3600);

pub async fn run(global: &Global, args: ServeArgs) -> Result<ExitCode> {
    let (mut config, policy, app) = open_app(global).await?;
    // The page, the API and the workers hear what other processes append.
    crate::setup::follow_others(app.journal().as_ref()).await?;
    let stop = CancellationToken::new();
    // Before anything runs: a room naming an unknown project is refused here.
    let discord = start_discord(&config, &app, &stop).await?;
    // Schedules run where workers run; one naming an unknown project is refused here.
    let scheduler = match args.workers {
        Some(0) => None,
        _ => Some(worker::start_scheduler(&config, &app, &stop).await?),
    };
    let addr = listen_address(args.listen.as_deref(), &config)?;
    // The port agents must not reach is the one served here.
    config.listen = addr;
    crate::commands::run::check_sandbox(global, &config)?;
    let local = local_secret(&config)?;
    let env = |name: &str| std::env::var(name).ok();
    let engine = crate::commands::run::engine(global, &config, &app).await?;
    let mut server_config = ServerConfig::new(addr, local.clone())
        .with_policy_tokens(&policy, &env)
        .map_err(|e| CliError::config(e.to_string()))?;
    server_config.public_names = config.public_names.clone();
    server_config.commit = env!("GAFFER_COMMIT_ID").into();
    let link_key = gaffer_notify::LinkKey::new(local.derived_key("notify-link"));
    server_config.links = Some(gaffer_notify::Links::new(link_key.clone(), &config.notify));
    // `POST /api/tasks {"issue"}` reads issues through the projects' forges.
    server_config.issues = Some(IssueSource(std::sync::Arc::new(engine.clone())));
    // `POST /api/hooks/{forge}` makes issues tasks (`[projects.<name>.intake]`).
    server_config.hooks = Some(gaffer_server::HookSink(std::sync::Arc::new(engine.clone())));
    // `GET /api/schedules` and the page show them, whichever process runs them.
    server_config.schedules = config.schedules.clone();
    let server = Server::bind(app.clone(), server_config)
        .await
        .map_err(|e| match e {
            ServerError::Config(m) => CliError::config(m),
            ServerError::Bind { .. } => {
                CliError::config(format!("{e}; is another gaffer serving there?"))
            }
        })?;
    let bound = server.local_addr()?;
    let _recorded = RecordedAddress::write(&config.data_dir, bound);
    let base = config
        .public_url
        .clone()
        .unwrap_or_else(|| page_base(bound));
    let notifier = notifications::start(
        global,
        &config,
        &app,
        link_key,
        gaffer_notify::ServerUrl::fixed(&base),
        &stop,
    )?;
    let limits = worker::limits(&config, args.workers, None);
    let cleaner = {
        let (stop, engine, app, config) =
            (stop.clone(), engine.clone(), app.clone(), config.clone());
        tokio::spawn(async move {
            let mut every = tokio::time::interval(GC_INTERVAL);
            loop {
                tokio::select! {
                    () = stop.cancelled() => return,
                    _ = every.tick() => {}
                }
                match crate::commands::gc::collect(&config, &app, &engine, false).await {
                    Ok(r) => {
                        for e in &r.errors {
                            tracing::warn!(error = %e, "cleanup");
                        }
                    }
                    Err(e) => tracing::warn!(error = %e.message(), "cleanup failed"),
                }
            }
        })
    };
    let pool = (args.workers != Some(0))
        .then(|| worker::spawn_workers(engine, worker::me(&config), limits, stop.clone()));
    let runs = match pool {
        Some(_) => format!(
            "runs {} task{} at once",
            limits.workers,
            if limits.workers == 1 { "" } else { "s" }
        ),
        None => "runs no tasks: `gaffer worker` processes do".to_owned(),
    };
    outln!("gaffer is serving on http://{bound}/  (API: http://{bound}/api/openapi.json; {runs})");

    // A reader that stopped reading (closed the pipe after the address) does not
    // stop the server: the lines after it are best effort.
    if discord.is_some() {
        let rooms = config.discord.rooms.len();
        let _ = writeln!(
            std::io::stdout(),
            "Discord: on, {rooms} room{}",
            if rooms == 1 { "" } else { "s" }
        );
    }
    if scheduler.is_some() && !config.schedules.is_empty() {
        let _ = writeln!(
            std::io::stdout(),
            "Schedules: {}",
            worker::schedule_names(&config)
        );
    }
    if notifier.is_some() {
        let _ = writeln!(
            std::io::stdout(),
            "Notifications: on, to {}",
            notifications::targets(&config)
        );
    }
    // Printed once: whoever can read this terminal is the person the page acts as.
    let _ = writeln!(
        std::io::stdout(),
        "open the web page (logs you in as {}; works once, within 24 h; `gaffer login-link` prints another):\n  {}",
        local.person(),
        local.login_link(&page_base(bound), gaffer_store::now_ms())
    );
    let result = server.run(worker::stop_signal()).await;
    // Stop taking tasks; running ones end with the process and resume on the next start.
    stop.cancel();
    if let Some(pool) = pool {
        let _ = pool.await;
    }
    let _ = cleaner.await;
    if let Some(s) = scheduler {
        let _ = s.await;
    }
    if let Some(d) = discord {
        let _ = d.await;
    }
    if let Some(n) = notifier {
        n.stop().await;
    }
    result?;
    Ok(ExitCode::SUCCESS)
}

/// `--listen`, else `server.listen`.
fn listen_address(flag: Option<&str>, config: &gaffer_config::Config) -> Result<SocketAddr> {
    match flag {
        Some(l) => l.parse().map_err(|e| {
            CliError::config(format!(
                "--listen {l}: {e}; give an address like 127.0.0.1:7777"
            ))
        }),
        None => Ok(config.listen),
    }
}

/// The local secret in the data dir (made on first use), standing for the person
/// running this command.
pub(super) fn local_secret(config: &gaffer_config::Config) -> Result<LocalSecret> {
    LocalSecret::load_or_create(&config.data_dir, &crate::setup::cli_actor().name)
        .map_err(|e| CliError::config(format!("the local secret: {e}")))
}

/// Where a browser on this machine reaches a server bound to `addr` (an unspecified
/// address is reached on loopback).
fn reachable(addr: SocketAddr) -> SocketAddr {
    let ip = match addr.ip() {
        std::net::IpAddr::V4(v4) if v4.is_unspecified() => std::net::Ipv4Addr::LOCALHOST.into(),
        std::net::IpAddr::V6(v6) if v6.is_unspecified() => std::net::Ipv6Addr::LOCALHOST.into(),
        ip => ip,
    };
    SocketAddr::new(ip, addr.port())
}

pub(super) fn page_base(addr: SocketAddr) -> String {
    format!("http://{}", reachable(addr))
}

/// The file in the data dir holding the address of the running `gaffer serve`.
const ADDRESS_FILE: &str = "serve.json";

/// The address this `gaffer serve` listens on, recorded in the data dir while it
/// runs; removed when it stops (unless another server has recorded its own since).
struct RecordedAddress {
    path: PathBuf,
    pid: u32,
}

impl RecordedAddress {
    fn write(data_dir: &Path, addr: SocketAddr) -> Option<Self> {
        let path = data_dir.join(ADDRESS_FILE);
        let pid = std::process::id();
        let text = serde_json::json!({ "listen": addr.to_string(), "pid": pid }).to_string();
        // Written aside and renamed: a reader never sees half of it.
        let aside = data_dir.join(format!(".{ADDRESS_FILE}.{pid}"));
        match std::fs::write(&aside, text).and_then(|()| std::fs::rename(&aside, &path)) {
            Ok(()) => Some(Self { path, pid }),
            Err(e) => {
                tracing::warn!(error = %e, file = %path.display(), "cannot record the address served; `gaffer login-link` will link to server.listen");
                None
            }
        }
    }
}

impl Drop for RecordedAddress {
    fn drop(&mut self) {
        let ours = std::fs::read_to_string(&self.path)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .is_some_and(|v| v["pid"] == self.pid);
        if ours {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// The address a `gaffer serve` of this data dir recorded, if a server still
/// answers there (one killed outright leaves its file behind).
pub(super) fn served_address(data_dir: &Path) -> Option<SocketAddr> {
    let text = std::fs::read_to_string(data_dir.join(ADDRESS_FILE)).ok()?;
    let recorded: serde_json::Value = serde_json::from_str(&text).ok()?;
    let addr: SocketAddr = recorded["listen"].as_str()?.parse().ok()?;
    std::net::TcpStream::connect_timeout(&reachable(addr), Duration::from_millis(500)).ok()?;
    Some(addr)
}

/// `gaffer login-link`: a new login link for the page of the server at `--listen`,
/// else of the `gaffer serve` running on this data dir, else at `server.listen`.
pub fn login_link(global: &Global, args: &LoginLinkArgs) -> Result<ExitCode> {
    let config = crate::setup::load_config(global)?;
    let addr = match args.listen.as_deref() {
        Some(_) => listen_address(args.listen.as_deref(), &config)?,
        None => served_address(&config.data_dir).unwrap_or_else(|| {
            errln!(
                "gaffer: no `gaffer serve` of this data dir is running; the link is for server.listen ({})",
                config.listen
            );
            config.listen
        }),
    };
    let local = local_secret(&config)?;
    let now = gaffer_store::now_ms();
    let link = local.login_link(&page_base(addr), now);
    if args.json {
        crate::output::json(&serde_json::json!({
            "link": link,
            "expires_at": now + gaffer_server::local::LINK_LIFETIME_MS,
            "secret_file": config.data_dir.join(gaffer_server::local::FILE_NAME),
        }))?;
    } else {
        outln!(
            "open this link to log in to the web page as {} (works once, within 24 h):\n  {link}",
            local.person()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Start the Discord adapter if a bot token is in the environment.
async fn start_discord(
    config: &gaffer_config::Config,
    app: &gaffer_app::App,
    stop: &CancellationToken,
) -> Result<Option<tokio::task::JoinHandle<()>>> {
    let d = &config.discord;
    let Some(token) = std::env::var(&d.token_env)
        .ok()
        .filter(|t| !t.trim().is_empty())
    else {
        if !d.rooms.is_empty() {
            errln!(
                "gaffer: discord.rooms is set but ${} holds no bot token; Discord is off",
                d.token_env
            );
        }
        return Ok(None);
    };
    for (channel, project) in &d.rooms {
        app.project(project).await.map_err(|_| {
            CliError::config(format!(
                "discord.rooms.{channel} names project `{project}`, which is not registered; `gaffer project add PATH --name {project}` or fix the room"
            ))
        })?;
    }
    let settings = gaffer_discord::Settings {
        token: token.trim().to_owned(),
        application_id: d.application_id.clone(),
        api_url: d.api_url.clone(),
        gateway_url: d.gateway_url.clone(),
        approver_users: d.approver_users.clone(),
        approver_roles: d.approver_roles.clone(),
        rooms: d.rooms.clone(),
    };
    let (app, stop) = (app.clone(), stop.clone());
    Ok(Some(tokio::spawn(async move {
        if let Err(e) = gaffer_discord::run(app, settings, stop).await {
            errln!("gaffer: the Discord adapter stopped: {e}");
        }
    })))
}
