//! `gaffer doctor`: what is in place, what is missing, and what to do about it.

use crate::cli::Global;
use crate::error::{Result, EXIT_CONFIG};
use crate::output;
use crate::setup::{config_file, load_config, open_journal};
use gaffer_store::{Journal, TaskFilter};
use serde::Serialize;
use std::path::{Path, PathBuf};
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

/// The agent CLIs gaffer drives: name, override variable, how to install.
const AGENT_CLIS: &[(&str, &str, &str)] = &[
    (
        "claude",
        "GAFFER_CLAUDE_BIN",
        "npm install -g @anthropic-ai/claude-code",
    ),
    ("codex", "GAFFER_CODEX_BIN", "npm install -g @openai/codex"),
    (
        "gemini",
        "GAFFER_GEMINI_BIN",
        "npm install -g @google/gemini-cli",
    ),
];

/// API keys of the built-in agent. Only their presence is ever shown.
const API_KEYS: &[(&str, &str)] = &[
    (
        "OPENAI_API_KEY",
        "for `--agent openai` (or any OpenAI-compatible server with OPENAI_BASE_URL)",
    ),
    ("ANTHROPIC_API_KEY", "for `--agent anthropic`"),
];

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// The first executable `name` on PATH.
fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

fn agent_checks() -> Vec<Check> {
    let mut checks = Vec::new();
    for (name, var, install) in AGENT_CLIS {
        let c = match std::env::var_os(var) {
            Some(bin) if is_executable(Path::new(&bin)) => check(
                name,
                Status::Ok,
                format!("{} (from {var})", Path::new(&bin).display()),
                None,
            ),
            Some(bin) => check(
                name,
                Status::Fail,
                format!(
                    "{var} names {}, which is not an executable file",
                    Path::new(&bin).display()
                ),
                Some("point it at the agent's executable, or unset it to search PATH"),
            ),
            None => match on_path(name) {
                Some(p) => check(name, Status::Ok, p.display().to_string(), None),
                None => check(name, Status::Warn, "not found on PATH", Some(install)),
            },
        };
        checks.push(c);
    }
    for (var, what) in API_KEYS {
        checks.push(match std::env::var_os(var) {
            Some(v) if !v.is_empty() => check(var, Status::Ok, "set", None),
            _ => check(
                var,
                Status::Warn,
                "not set",
                Some(&format!("export {var}=… {what}")),
            ),
        });
    }
    let usable = checks.iter().any(|c| c.status == Status::Ok);
    if !usable {
        checks.push(check(
            "agents",
            Status::Warn,
            "no agent CLI and no API key: tasks cannot run",
            Some("install one agent CLI above or set an API key"),
        ));
    }
    checks
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

/// What the kernel's Landlock offers against what `[sandbox]` asks.
fn sandbox_check(
    config: &gaffer_config::SandboxConfig,
    support: gaffer_agents::sandbox::Support,
) -> Check {
    use gaffer_config::SandboxMode;
    let mode = match config.mode {
        SandboxMode::Auto => "auto",
        SandboxMode::Required => "required",
        SandboxMode::Off => "off",
    };
    let detail = format!("mode {mode}: {}", support.describe());
    let decision = gaffer_agents::sandbox::decide(
        gaffer_engine::sandbox_from_config(config).mode,
        config.network,
        support,
    );
    match decision {
        Err(why) => check(
            "sandbox",
            Status::Fail,
            why,
            Some("agents will not be started; boot a kernel with Landlock (lsm=landlock) or set [sandbox] mode = \"auto\""),
        ),
        Ok(false) if config.mode == SandboxMode::Auto => check(
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
        Ok(true) if !config.network && !support.network() => check(
            "sandbox",
            Status::Warn,
            detail,
            Some("network = \"off\" cannot be enforced by this kernel"),
        ),
        Ok(true) => check("sandbox", Status::Ok, detail, None),
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
            Some(var) if present(var) => check(&name, Status::Ok, format!("{at}; token in {var}"), None),
            Some(var) => Check {
                name,
                status: Status::Warn,
                detail: format!("{at}; {var} is not set"),
                hint: Some(format!("put an API token in {var} before shipping (Gitea: write:repository, write:issue; GitHub: contents, pull requests, issues write)")),
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
            checks.push(sandbox_check(
                &config.sandbox,
                gaffer_agents::sandbox::support(),
            ));
            checks.push(check(
                "data dir",
                Status::Ok,
                config.data_dir.display().to_string(),
                None,
            ));
            checks.extend(shipping_checks(&config));
            match open_journal(&config).await {
                Ok(journal) => {
                    checks.push(database_check(journal.as_ref()).await);
                    journal.shutdown().await;
                }
                Err(e) => checks.push(Check {
                    name: "database".into(),
                    status: Status::Fail,
                    detail: e.message().to_owned(),
                    hint: Some("fix --db, GAFFER_DATABASE_URL or database.url (or --data-dir for the default file), or move the file away".into()),
                }),
            }
        }
        Err(e) => checks.push(Check {
            name: "config".into(),
            status: Status::Fail,
            detail: e.message().to_owned(),
            hint: Some(
                "fix the file, or run `gaffer init --force` to start from the commented defaults"
                    .into(),
            ),
        }),
    }
    checks.push(git_check());
    checks.extend(agent_checks());

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
            println!("{mark}  {:<18} {}", c.name, c.detail);
            if let Some(hint) = &c.hint {
                if c.status != Status::Ok {
                    println!("      {:<18} → {hint}", "");
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
