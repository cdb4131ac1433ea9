//! `gaffer doctor`: what is in place, what is missing, and what to do about it.

mod intake;

use crate::cli::Global;
use crate::error::{Result, EXIT_CONFIG};
use crate::output;
use crate::setup::{config_file, durability, load_config};
use gaffer_store::{Journal, Location, TaskFilter};
use serde::Serialize;
use std::process::ExitCode;

#[derive(Debug, Serialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum Status {
    Ok,
    Warn,
    Fail,
}

#[derive(Debug, Serialize)]
struct Check {
    name: String,
    status: Status,
    detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    hint: Option<String>,
}

fn check(name: &str, status: Status, detail: impl Into<String>, hint: Option<&str>) -> Check {
    Check {
        name: name.into(),
        status,
        detail: detail.into(),
        hint: hint.map(str::to_owned),
    }
}

/// API keys of the built-in agent. Only their presence is ever shown.
const API_KEYS: &[(&str, &str, &str)] = &[
    (
        "openai",
        "OPENAI_API_KEY",
        "for `--agent openai` (or any OpenAI-compatible server with OPENAI_BASE_URL)",
    ),
    ("anthropic", "ANTHROPIC_API_KEY", "for `--agent anthropic`"),
];

/// Each agent CLI and API key, then whether any task can run at all and whether
/// the configured roles can.
fn agent_checks(config: Option<&gaffer_config::Config>) -> Vec<Check> {
    use gaffer_engine::agents::{agent_cli_path, agent_ready, AGENT_CLIS};
    use gaffer_engine::AgentFactory;
    let mut checks = Vec::new();
    let mut usable = Vec::new();
    for cli in &AGENT_CLIS {
        let set = std::env::var_os(cli.env_var).is_some_and(|v| !v.is_empty());
        checks.push(match agent_cli_path(cli) {
            Ok(path) => {
                usable.push(cli.agent);
                let from = if set {
                    format!(" (from {})", cli.env_var)
                } else {
                    String::new()
                };
                check(
                    cli.agent,
                    Status::Ok,
                    format!("{}{from}", path.display()),
                    None,
                )
            }
            Err(why) if set => check(
                cli.agent,
                Status::Fail,
                why,
                Some("point it at the agent's executable, or unset it to search PATH"),
            ),
            Err(_) => check(
                cli.agent,
                Status::Warn,
                "not found on PATH",
                Some(cli.install),
            ),
        });
    }
    for (agent, var, what) in API_KEYS {
        checks.push(match agent_ready(agent) {
            Ok(()) => {
                usable.push(agent);
                let how = if std::env::var_os(var).is_some_and(|v| !v.is_empty()) {
                    "set"
                } else {
                    "not set; OPENAI_BASE_URL names a server that needs none"
                };
                check(var, Status::Ok, how, None)
            }
            Err(_) => check(
                var,
                Status::Warn,
                "not set",
                Some(&format!("export {var}=… {what}")),
            ),
        });
    }
    if usable.is_empty() {
        checks.push(check(
            "agents",
            Status::Fail,
            "no agent CLI and no API key: no task can run",
            Some("install one agent CLI above or set an API key, then run `gaffer doctor` again"),
        ));
        return checks;
    }
    let Some(config) = config else {
        return checks;
    };
    // The agents the configured roles use, each once, with the roles using it.
    let mut roles: Vec<(String, Vec<String>)> = Vec::new();
    let all = std::iter::once(("roles".to_owned(), &config.roles)).chain(
        config
            .project_roles
            .iter()
            .map(|(p, r)| (format!("projects.{p}.roles"), r)),
    );
    for (prefix, r) in all.clone() {
        let panel = r.panel.iter().flat_map(|p| &p.members);
        let players = r
            .each()
            .into_iter()
            .flat_map(|(role, cfg)| {
                let field = format!("{prefix}.{role}");
                cfg.chain().into_iter().map(move |a| (field.clone(), a))
            })
            .chain(panel.map(|m| (format!("{prefix}.arbiter.panel"), m.agent.as_str())));
        for (field, agent) in players {
            match roles.iter_mut().find(|(a, _)| a == agent) {
                Some((_, fields)) if fields.contains(&field) => {}
                Some((_, fields)) => fields.push(field),
                None => roles.push((agent.to_owned(), vec![field])),
            }
        }
    }
    // Each role with fallbacks: its chain, in the order the agents are tried.
    for (prefix, r) in all {
        for (role, cfg) in r.each() {
            if !cfg.fallback.is_empty() {
                checks.push(check(
                    &format!("chain: {prefix}.{role}"),
                    Status::Ok,
                    format!(
                        "{}; an agent that is out is tried again after {} s",
                        cfg.chain().join(" → "),
                        config.fallback.cooldown_secs
                    ),
                    None,
                ));
            }
        }
    }
    let backends =
        gaffer_engine::Backends::new(Default::default()).with_acp_agents(config.acp_agents.clone());
    for (agent, fields) in roles {
        let name = format!("roles: {agent}");
        let used = fields.join(", ");
        checks.push(match backends.ready(&agent) {
            Ok(()) => check(&name, Status::Ok, format!("plays {used}"), None),
            Err(e) => Check {
                name,
                status: Status::Warn,
                detail: format!("plays {used}, but cannot start: {e}"),
                hint: Some(format!(
                    "`gaffer run` needs --agent {} until it is installed, or set those roles to an agent that is",
                    usable[0]
                )),
            },
        });
    }
    checks
}

/// Each configured project's privacy mode, where each role's model runs, and whether
/// the roles comply (a role that does not makes its tasks refused).
fn privacy_checks(config: &gaffer_config::Config) -> Vec<Check> {
    let settings = gaffer_engine::privacy::PrivacySettings::from_config(config);
    config
        .project_roles
        .iter()
        .map(|(project, roles)| {
            let applied = gaffer_engine::privacy::project_privacy(
                project,
                roles,
                None,
                &settings,
                &gaffer_engine::privacy::Process,
            );
            let mode = settings.mode(project);
            let roles: Vec<String> = applied
                .iter()
                .map(|r| {
                    let place = if r.endpoint.local { "local" } else { "cloud" };
                    let how = match (&r.refusal, r.masked) {
                        (Some(_), _) => ", REFUSED",
                        (None, true) => ", sees a masked pack",
                        (None, false) => "",
                    };
                    format!("{} {} ({place}{how})", r.role, r.agent)
                })
                .collect();
            let refusal = applied.iter().find_map(|r| r.refusal.clone());
            let status = if refusal.is_some() {
                Status::Fail
            } else {
                Status::Ok
            };
            Check {
                name: format!("privacy: {project}"),
                status,
                detail: format!("{}: {}", mode.as_str(), roles.join(", ")),
                hint: refusal,
            }
        })
        .collect()
}

fn git_check() -> Check {
    match std::process::Command::new("git").arg("--version").output() {
        Ok(out) if out.status.success() => check(
            "git",
            Status::Ok,
            String::from_utf8_lossy(&out.stdout).trim().to_owned(),
            None,
        ),
        _ => check(
            "git",
            Status::Fail,
            "git is not on PATH",
            Some("install git 2.20 or newer (e.g. `apt-get install git`); gaffer uses it for worktrees and pushes"),
        ),
    }
}

/// The projects a journal has registered, by (name, id); `None`: no journal to ask.
type Registered = Option<Vec<(String, String)>>;

/// The journal, opened only if it exists: the doctor creates nothing.
async fn journal_check(config: &gaffer_config::Config) -> (Check, Registered) {
    let location = config.database_location();
    if let Ok(Location::Sqlite(path)) = Location::parse(&location) {
        if !path.exists() {
            let c = check(
                "database",
                Status::Ok,
                format!(
                    "{} (not created yet: the first task or project creates it)",
                    path.display()
                ),
                None,
            );
            return (c, None);
        }
    }
    let open_err = |e| {
        Check {
        name: "database".into(),
        status: Status::Fail,
        detail: crate::error::CliError::from(e).message().to_owned(),
        hint: Some("fix --db, GAFFER_DATABASE_URL or database.url (or --data-dir for the default file), or move the file away".into()),
    }
    };
    // Opening migrates: an older schema is reported, not opened.
    match gaffer_store::schema_found(&location).await {
        Ok(schema) if schema.pending() > 0 => {
            let c = Check {
                name: "database".into(),
                status: Status::Warn,
                detail: format!(
                    "{} is at schema v{}; this gaffer migrates it to v{} ({} pending migration{}) when it next opens it",
                    Location::parse(&location).map(|l| l.shown()).unwrap_or_default(),
                    schema.found.unwrap_or_default(),
                    schema.supported,
                    schema.pending(),
                    if schema.pending() == 1 { "" } else { "s" }
                ),
                hint: Some("back it up first (`gaffer backup PATH`, or pg_dump for PostgreSQL): an older gaffer cannot open it once migrated".into()),
            };
            return (c, None);
        }
        Ok(_) => {}
        Err(e) => return (open_err(e), None),
    }
    match gaffer_store::open(&location, durability(config)).await {
        Ok(journal) => {
            let c = database_check(journal.as_ref()).await;
            let registered = journal
                .projects()
                .await
                .ok()
                .map(|ps| ps.into_iter().map(|p| (p.name, p.id)).collect());
            journal.shutdown().await;
            (c, registered)
        }
        Err(e) => (open_err(e), None),
    }
}

async fn database_check(journal: &dyn Journal) -> Check {
    let tasks = journal
        .tasks(&TaskFilter {
            limit: Some(i64::MAX),
            ..TaskFilter::default()
        })
        .await
        .map(|t| t.len())
        .unwrap_or(0);
    check(
        "database",
        Status::Ok,
        format!(
            "{} (schema v{}, {tasks} tasks)",
            journal.location(),
            journal.schema_version()
        ),
        None,
    )
}

/// What the kernel's Landlock offers against what `[sandbox]` asks, the rules this
/// machine cannot apply, and what agents and checks may read.
fn sandbox_checks(
    global: &Global,
    config: &gaffer_config::Config,
    support: gaffer_agents::sandbox::Support,
) -> Vec<Check> {
    use gaffer_agents::sandbox::{base_readable, decide, preflight, SandboxMode};
    let sandbox = crate::commands::run::agent_sandbox(global, config);
    let detail = format!("mode {}: {}", sandbox.mode.as_str(), support.describe());
    let problems: Vec<String> = preflight(&sandbox, support)
        .iter()
        .map(ToString::to_string)
        .collect();
    let main = match decide(sandbox.mode, sandbox.network, support) {
        Err(why) => check(
            "sandbox",
            Status::Fail,
            why,
            Some("agents will not be started; boot a kernel with Landlock (lsm=landlock) or set [sandbox] mode = \"auto\""),
        ),
        Ok(_) if sandbox.mode == SandboxMode::Required && !problems.is_empty() => Check {
            name: "sandbox".into(),
            status: Status::Fail,
            detail: format!("{detail}; cannot apply: {}", problems.join("; ")),
            hint: Some("gaffer will not start agents; fix the rules named, or set [sandbox] mode = \"auto\" to run with what the kernel allows".into()),
        },
        Ok(false) if sandbox.mode == SandboxMode::Auto => check(
            "sandbox",
            Status::Warn,
            detail,
            Some("agents run unconfined; boot a kernel with Landlock (lsm=landlock), or set [sandbox] mode = \"required\" to refuse"),
        ),
        Ok(false) => check(
            "sandbox",
            Status::Warn,
            detail,
            Some("agents run unconfined: [sandbox] mode = \"off\""),
        ),
        Ok(true) if !problems.is_empty() => Check {
            name: "sandbox".into(),
            status: Status::Warn,
            detail: format!("{detail}; not applied: {}", problems.join("; ")),
            hint: Some("fix the rules named, or accept them not applying".into()),
        },
        Ok(true) => check("sandbox", Status::Ok, detail, None),
    };
    let mut checks = vec![main];
    if sandbox.mode != SandboxMode::Off {
        let readable: Vec<String> = base_readable(&sandbox)
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        checks.push(check(
            "sandbox reads",
            Status::Ok,
            format!(
                "agents and checks may read {}, the repository and its worktree, their own state and temp dirs; not gaffer's data dir, config or policy, ~/.ssh or other dotfiles",
                readable.join(", ")
            ),
            Some("add directories with [sandbox] readable (GAFFER_SANDBOX_READABLE)"),
        ));
    }
    checks
}

/// What a forge's token must be allowed to do.
pub(crate) fn token_scopes(kind: &str) -> &'static str {
    match kind {
        "github" => "GitHub: contents, pull requests, issues write",
        "gitlab" => {
            "GitLab: a project or personal access token with the api scope, Developer role or above"
        }
        _ => "Gitea/Forgejo: write:repository, write:issue",
    }
}

/// Each project's forge and tracker: where it ships and whether its token is there
/// (only presence is shown; nothing is sent to the forge).
fn shipping_checks(config: &gaffer_config::Config) -> Vec<Check> {
    let present = |var: &str| std::env::var(var).is_ok_and(|v| !v.trim().is_empty());
    let mut checks = Vec::new();
    for (name, f) in &config.forges {
        let name = format!("forge {name}");
        let at = format!("{} at {}, pushing to `{}`", f.kind, f.base_url, f.remote);
        checks.push(match &f.token_env {
            Some(var) if present(var) => {
                check(&name, Status::Ok, format!("{at}; token in {var}"), None)
            }
            Some(var) => Check {
                name,
                status: Status::Warn,
                detail: format!("{at}; {var} is not set"),
                hint: Some(format!(
                    "put an API token in {var} before shipping ({})",
                    token_scopes(&f.kind)
                )),
            },
            None => check(
                &name,
                Status::Ok,
                format!("{at}; token from your git credential helper"),
                None,
            ),
        });
    }
    for (name, t) in &config.trackers {
        let name = format!("tracker {name}");
        let at = format!("vikunja at {}, project {}", t.base_url, t.project_id);
        checks.push(if present(&t.token_env) {
            check(
                &name,
                Status::Ok,
                format!("{at}; token in {}", t.token_env),
                None,
            )
        } else {
            Check {
                name,
                status: Status::Warn,
                detail: format!("{at}; {} is not set", t.token_env),
                hint: Some(format!("put a Vikunja API token in {}", t.token_env)),
            }
        });
    }
    checks
}

/// Each `[[notify]]` target: where it sends, what, to whom, and which variable
/// holds its secret (never the secret, never a URL's query).
fn notify_checks(config: &gaffer_config::Config) -> Vec<Check> {
    config
        .notify
        .iter()
        .map(|t| {
            let url = t.url().split(['?', '#']).next().unwrap_or_default();
            let events: Vec<&str> = t.events.iter().map(|e| e.as_str()).collect();
            let links = match &t.person {
                Some(p) => format!("one-tap links for {p}"),
                None => "no links (no person)".into(),
            };
            let secret = match &t.secret_env {
                Some(var) => format!("; secret in {var} (redacted)"),
                None => String::new(),
            };
            check(
                &format!("notify {}", t.name),
                Status::Ok,
                format!(
                    "{} {url}: {}; {links}{secret}",
                    t.channel(),
                    events.join(", ")
                ),
                None,
            )
        })
        .collect()
}

pub async fn run(global: &Global, json: bool) -> Result<ExitCode> {
    let mut checks = Vec::new();
    let (file, _) = config_file(global);
    match load_config(global) {
        Ok(config) => {
            checks.push(match &config.source {
                Some(path) => check("config", Status::Ok, path.display().to_string(), None),
                None => check(
                    "config",
                    Status::Ok,
                    format!("no file at {}; using defaults", file.display()),
                    Some("`gaffer init` writes a commented config file"),
                ),
            });
            checks.extend(sandbox_checks(
                global,
                &config,
                gaffer_agents::sandbox::support(),
            ));
            let made = if config.data_dir.is_dir() {
                ""
            } else {
                " (not created yet)"
            };
            checks.push(check(
                "data dir",
                Status::Ok,
                format!("{}{made}", config.data_dir.display()),
                None,
            ));
            checks.extend(shipping_checks(&config));
            checks.extend(intake::intake_checks(&config));
            checks.extend(notify_checks(&config));
            let (journal, registered) = journal_check(&config).await;
            checks.push(journal);
            checks.extend(intake::schedule_checks(
                &config,
                registered.as_deref(),
                gaffer_store::now_ms(),
            ));
            checks.extend(agent_checks(Some(&config)));
            checks.extend(privacy_checks(&config));
        }
        Err(e) => {
            checks.push(Check {
                name: "config".into(),
                status: Status::Fail,
                detail: e.message().to_owned(),
                hint: Some(
                    "fix the file, or run `gaffer init --force` to start from the commented defaults"
                        .into(),
                ),
            });
            checks.extend(agent_checks(None));
        }
    }
    checks.push(git_check());

    let failed = checks.iter().any(|c| c.status == Status::Fail);
    if json {
        output::json(&serde_json::json!({ "ok": !failed, "checks": checks }))?;
    } else {
        for c in &checks {
            let mark = match c.status {
                Status::Ok => "ok  ",
                Status::Warn => "warn",
                Status::Fail => "FAIL",
            };
            outln!("{mark}  {:<18} {}", c.name, c.detail);
            if let Some(hint) = &c.hint {
                if c.status != Status::Ok {
                    outln!("      {:<18} → {hint}", "");
                }
            }
        }
    }
    Ok(if failed {
        ExitCode::from(EXIT_CONFIG)
    } else {
        ExitCode::SUCCESS
    })
}
