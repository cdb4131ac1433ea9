//! `gaffer service install|uninstall|status`: `gaffer serve` (or `gaffer worker`)
//! as a systemd unit that restarts on failure with a growing delay, but never on
//! exit 78 (a configuration or precondition error a restart cannot fix), reads
//! its secrets from an environment file, and logs to journald. Without systemd
//! the unit is printed for the user to install by other means.

use crate::cli::{Global, ServiceArgs};
use crate::error::{CliError, Result, EXIT_CONFIG, EXIT_FAILED};
use crate::output;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// What the unit runs and where its files go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitPlan {
    /// `gaffer-serve` or `gaffer-worker`.
    pub name: &'static str,
    /// A user unit (`systemctl --user`) rather than a system one.
    pub user: bool,
    /// The command line: the gaffer binary and its arguments.
    pub exec: Vec<String>,
    /// The environment file (secrets, `GAFFER_DATABASE_URL`), optional at start.
    pub env_file: PathBuf,
    /// The account a system unit runs as (`User=`); user units run as their user.
    pub run_as: Option<String>,
}

impl UnitPlan {
    fn service(&self) -> String {
        format!("{}.service", self.name)
    }
}

/// A command line word for `ExecStart=`: quoted, with systemd's specifiers
/// (`%`) and variable expansion (`$`) escaped.
fn exec_word(word: &str) -> String {
    let escaped = word
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('%', "%%")
        .replace('$', "$$");
    format!("\"{escaped}\"")
}

/// A path for a `Key=PATH` line (no quoting there; specifiers still expand).
fn unit_path(path: &Path) -> String {
    path.display().to_string().replace('%', "%%")
}

/// The unit file's text.
pub fn unit_text(plan: &UnitPlan) -> String {
    let what = if plan.name == "gaffer-worker" {
        "gaffer worker: runs queued tasks (leases them from the shared journal)"
    } else {
        "gaffer serve: HTTP API, web page and workers"
    };
    let exec: Vec<String> = plan.exec.iter().map(|w| exec_word(w)).collect();
    let user = match &plan.run_as {
        Some(name) if !plan.user => format!("User={name}\n"),
        _ => String::new(),
    };
    let target = if plan.user {
        "default.target"
    } else {
        "multi-user.target"
    };
    format!(
        "# Written by `gaffer service install`; `gaffer service uninstall` removes it.
[Unit]
Description={what}
Documentation=man:gaffer(1) man:gaffer-serve(1)
After=network-online.target
Wants=network-online.target
# Restarting stops after 10 failures within 30 minutes (the unit is then failed).
StartLimitIntervalSec=30min
StartLimitBurst=10

[Service]
Type=exec
ExecStart={exec}
{user}# Secrets and overrides (API keys, GAFFER_DATABASE_URL), one NAME=value a line.
EnvironmentFile=-{env}
# A crash or a lost database restarts it, 5 s then longer up to 5 min
# (RestartSteps needs systemd 254; older ones wait 5 s each time).
Restart=on-failure
RestartSec=5s
RestartSteps=8
RestartMaxDelaySec=5min
# Exit 78 is a configuration or precondition error (a bad config, a journal from
# a newer gaffer): restarting cannot fix it, so it stays stopped until fixed.
RestartPreventExitStatus=78
# SIGTERM stops it cleanly: running agents are stopped, leases released.
KillMode=mixed
TimeoutStopSec=60s
StandardOutput=journal
StandardError=journal
SyslogIdentifier={name}
Environment=NO_COLOR=1

[Install]
WantedBy={target}
",
        exec = exec.join(" "),
        env = unit_path(&plan.env_file),
        name = plan.name,
    )
}

/// Where the unit file goes.
fn unit_file(plan: &UnitPlan) -> Result<PathBuf> {
    if plan.user {
        let config = std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
            .ok_or_else(|| {
                CliError::config(
                    "neither XDG_CONFIG_HOME nor HOME is set: cannot place a user unit",
                )
            })?;
        Ok(config.join("systemd/user").join(plan.service()))
    } else {
        Ok(PathBuf::from("/etc/systemd/system").join(plan.service()))
    }
}

/// The plan for this machine: this very binary, the config and data dir named
/// (absolute), never a database URL (it may hold a password: it belongs
/// in the environment file, which only its owner may read).
fn plan(global: &Global, args: &ServiceArgs) -> Result<UnitPlan> {
    let exe = std::env::current_exe()
        .and_then(|p| p.canonicalize())
        .map_err(|e| CliError::failed(format!("cannot find the gaffer binary: {e}")))?;
    let mut exec = vec![exe.display().to_string()];
    let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_owned());
    // A config or data dir named here (flag or environment) is named in the unit
    // too; the defaults resolve the same way under the same account.
    let (config, named) = crate::setup::config_file(global);
    if named {
        exec.push("--config".into());
        exec.push(absolute(&config).display().to_string());
    }
    if let Some(data) = &global.data_dir {
        exec.push("--data-dir".into());
        exec.push(absolute(data).display().to_string());
    }
    exec.push(if args.worker { "worker" } else { "serve" }.into());
    let env_file = absolute(&config)
        .parent()
        .map(|d| d.join("env"))
        .unwrap_or_else(|| PathBuf::from("/etc/gaffer/env"));
    let run_as = std::env::var("SUDO_USER")
        .or_else(|_| std::env::var("USER"))
        .ok()
        .filter(|u| !u.is_empty());
    Ok(UnitPlan {
        name: if args.worker {
            "gaffer-worker"
        } else {
            "gaffer-serve"
        },
        user: args.user,
        exec,
        env_file,
        run_as,
    })
}

/// systemd manages this machine (`sd_booted()`: the directory it creates at boot).
fn systemd_running() -> bool {
    Path::new("/run/systemd/system").is_dir()
}

#[derive(Debug, Serialize)]
struct Report {
    action: &'static str,
    unit: String,
    unit_path: String,
    env_file: String,
    systemd: bool,
    done: bool,
    /// Installed: the unit file's text.
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    active_state: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sub_state: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_exit_status: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    restarts: Option<i64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    last_errors: Vec<String>,
    note: String,
}

impl Report {
    /// What `action` reports about `plan`'s unit at `path`, before anything is done.
    fn new(action: &'static str, plan: &UnitPlan, path: &Path) -> Self {
        Self {
            action,
            unit: plan.service(),
            unit_path: path.display().to_string(),
            env_file: plan.env_file.display().to_string(),
            systemd: systemd_running(),
            done: false,
            text: None,
            active_state: None,
            sub_state: None,
            last_exit_status: None,
            restarts: None,
            last_errors: vec![],
            note: String::new(),
        }
    }
}

fn systemctl(plan: &UnitPlan, args: &[&str]) -> Result<String> {
    let mut cmd = Command::new("systemctl");
    if plan.user {
        cmd.arg("--user");
    }
    let out = cmd
        .args(args)
        .output()
        .map_err(|e| CliError::failed(format!("running systemctl: {e}")))?;
    if !out.status.success() {
        return Err(CliError::failed(format!(
            "`systemctl {}{}` failed: {}",
            if plan.user { "--user " } else { "" },
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Write `text` to `path` readable by its owner only, creating its directory.
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(text.as_bytes())
}

const ENV_TEMPLATE: &str =
    "# Environment of gaffer's systemd unit: one NAME=value a line, no quotes needed.
# Only its owner may read this file; keep secrets here, not in the unit.
# ANTHROPIC_API_KEY=
# OPENAI_API_KEY=
# GAFFER_DATABASE_URL=postgres://gaffer:PASSWORD@db.example:5432/gaffer
# GAFFER_LOG=info
";

fn finish(report: &Report, json: bool, code: u8) -> Result<ExitCode> {
    if json {
        output::json(report)?;
    } else if let Some(text) = report.text.as_deref().filter(|_| !report.systemd) {
        // No systemd: the unit is the output, the explanation goes to stderr.
        errln!("{}", report.note);
        outln!("{}", text.trim_end());
    } else {
        outln!("{}", report.note);
        for e in &report.last_errors {
            outln!("  {e}");
        }
    }
    Ok(ExitCode::from(code))
}

pub async fn install(global: &Global, args: &ServiceArgs) -> Result<ExitCode> {
    let plan = plan(global, args)?;
    let text = unit_text(&plan);
    let path = unit_file(&plan)?;
    let mut report = Report {
        text: Some(text.clone()),
        ..Report::new("install", &plan, &path)
    };
    if !report.systemd {
        report.note = format!(
            "systemd is not running on this machine (no /run/systemd/system): nothing was installed. The unit for {} is below: save it as {} where systemd runs, put secrets in {} (mode 600), then `systemctl {}daemon-reload && systemctl {}enable --now {}`. Elsewhere, run `{}` under your own supervisor and do not restart it when it exits 78.",
            plan.name,
            report.unit_path,
            report.env_file,
            if plan.user { "--user " } else { "" },
            if plan.user { "--user " } else { "" },
            report.unit,
            plan.exec.join(" ")
        );
        return finish(&report, args.json, EXIT_CONFIG);
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| CliError::config(format!("cannot create {}: {e}", dir.display())))?;
    }
    std::fs::write(&path, &text).map_err(|e| {
        CliError::config(format!(
            "cannot write {}: {e}{}",
            path.display(),
            if plan.user {
                ""
            } else {
                "; a system unit needs root (sudo), or use --user"
            }
        ))
    })?;
    let mut env = ENV_TEMPLATE.to_owned();
    if let Some(db) = &global.db {
        env.push_str(&format!("GAFFER_DATABASE_URL={db}\n"));
    }
    match write_private(&plan.env_file, &env) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => {
            return Err(CliError::config(format!(
                "cannot write {}: {e}",
                plan.env_file.display()
            )))
        }
    }
    systemctl(&plan, &["daemon-reload"])?;
    systemctl(&plan, &["enable", "--now", &report.unit])?;
    report.done = true;
    report.note = format!(
        "installed and started {} ({}); secrets go in {}; `gaffer service status{}` shows it{}",
        report.unit,
        report.unit_path,
        report.env_file,
        if plan.user { " --user" } else { "" },
        if plan.user {
            "; `loginctl enable-linger` keeps it running when you are logged out"
        } else {
            ""
        }
    );
    finish(&report, args.json, 0)
}

pub async fn uninstall(global: &Global, args: &ServiceArgs) -> Result<ExitCode> {
    let plan = plan(global, args)?;
    let path = unit_file(&plan)?;
    let systemd = systemd_running();
    let exists = path.exists();
    if systemd && exists {
        systemctl(&plan, &["disable", "--now", &plan.service()])?;
    }
    if exists {
        std::fs::remove_file(&path)
            .map_err(|e| CliError::config(format!("cannot remove {}: {e}", path.display())))?;
        if systemd {
            systemctl(&plan, &["daemon-reload"])?;
        }
    }
    let report = Report {
        systemd,
        done: exists,
        note: if exists {
            format!(
                "stopped and removed {}; {} (secrets) is kept: delete it yourself if you no longer need it",
                path.display(),
                plan.env_file.display()
            )
        } else {
            format!(
                "{} is not installed ({} does not exist)",
                plan.service(),
                path.display()
            )
        },
        ..Report::new("uninstall", &plan, &path)
    };
    finish(&report, args.json, if exists { 0 } else { EXIT_CONFIG })
}

pub async fn status(global: &Global, args: &ServiceArgs) -> Result<ExitCode> {
    let plan = plan(global, args)?;
    let path = unit_file(&plan)?;
    let mut report = Report {
        done: path.exists(),
        ..Report::new("status", &plan, &path)
    };
    if !report.systemd {
        report.note = format!(
            "systemd is not running on this machine: {} cannot run here ({} {})",
            report.unit,
            report.unit_path,
            if report.done {
                "exists"
            } else {
                "does not exist"
            }
        );
        return finish(&report, args.json, EXIT_CONFIG);
    }
    if !report.done {
        report.note = format!(
            "{} is not installed; `gaffer service install{}{}` installs it",
            report.unit,
            if plan.user { " --user" } else { "" },
            if args.worker { " --worker" } else { "" }
        );
        return finish(&report, args.json, EXIT_CONFIG);
    }
    let shown = systemctl(
        &plan,
        &[
            "show",
            "--property=ActiveState,SubState,ExecMainStatus,NRestarts",
            &report.unit,
        ],
    )?;
    let prop = |key: &str| {
        shown
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .map(str::to_owned)
    };
    report.active_state = prop("ActiveState");
    report.sub_state = prop("SubState");
    report.last_exit_status = prop("ExecMainStatus").and_then(|v| v.parse().ok());
    report.restarts = prop("NRestarts").and_then(|v| v.parse().ok());
    let mut journal = Command::new("journalctl");
    if plan.user {
        journal.arg("--user");
    }
    if let Ok(out) = journal
        .args(["--unit", &report.unit, "--priority=warning", "--lines=10"])
        .args(["--no-pager", "--output=short-iso"])
        .output()
    {
        report.last_errors = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.starts_with("-- "))
            .map(|l| crate::term::line(l).into_owned())
            .collect();
    }
    let active = report.active_state.as_deref() == Some("active");
    report.note = format!(
        "{}: {} ({}), last exit status {}, {} restarts{}",
        report.unit,
        report.active_state.as_deref().unwrap_or("unknown"),
        report.sub_state.as_deref().unwrap_or("unknown"),
        report
            .last_exit_status
            .map_or("none".into(), |s| s.to_string()),
        report.restarts.unwrap_or(0),
        if report.last_errors.is_empty() {
            String::new()
        } else {
            "; last warnings and errors:".into()
        }
    );
    finish(&report, args.json, if active { 0 } else { EXIT_FAILED })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_words_escape_what_systemd_would_expand() {
        assert_eq!(exec_word("/opt/my gaffer/bin"), "\"/opt/my gaffer/bin\"");
        assert_eq!(exec_word("50%$HOME\"x"), "\"50%%$$HOME\\\"x\"");
    }
}
