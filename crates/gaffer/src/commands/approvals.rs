//! `gaffer approvals`, `gaffer approve|deny ID`, `gaffer auto on|off`.

use crate::cli::{ApprovalShowArgs, DecideArgs, Global};
use crate::error::{CliError, Result};
use crate::output::{self, one_line};
use crate::setup::{cli_actor, config_file, load_config, open_journal};
use crate::{ids, render};
use gaffer_app::{App, AppError, Policy, Scope};
use gaffer_config::Config;
use gaffer_core::Decision;
use gaffer_store::now_ms;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// The approval policy file: `GAFFER_POLICY`, else `policy.toml` next to the config file.
pub fn policy_file(global: &Global) -> PathBuf {
    if let Some(p) = std::env::var_os("GAFFER_POLICY") {
        return PathBuf::from(p);
    }
    let (config, _) = config_file(global);
    config
        .parent()
        .map(|d| d.join("policy.toml"))
        .unwrap_or_else(|| PathBuf::from("policy.toml"))
}

/// Config, policy and the app service over the configured journal, redacting the
/// configured secrets from what people send it (requests, notes, reasons).
pub async fn open_app(global: &Global) -> Result<(Config, Policy, App)> {
    let config = load_config(global)?;
    let policy = Policy::load(&policy_file(global)).map_err(|e| CliError::config(e.to_string()))?;
    let journal = open_journal(&config).await?;
    let redactor = crate::setup::redactor(&config, crate::setup::configured_token_values(&config));
    let app = App::new(journal, policy.clone())
        .with_redaction(std::sync::Arc::new(move |text: &str| redactor.redact(text)))
        .with_acp_agents(config.acp_agents.keys().cloned());
    Ok((config, policy, app))
}

pub(crate) fn app_error(e: AppError) -> CliError {
    match e {
        AppError::Store(s) => s.into(),
        other => CliError::failed(other.to_string()),
    }
}

pub async fn list(global: &Global, json: bool, all: bool) -> Result<ExitCode> {
    let (_, _, app) = open_app(global).await?;
    let approvals = app
        .approvals(if all { None } else { Some("pending") })
        .await
        .map_err(app_error)?;
    if json {
        output::json(&approvals)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut out = crate::term::stdout();
    if approvals.is_empty() {
        writeln!(
            out,
            "{}",
            if all {
                "no approvals yet"
            } else {
                "nothing waits for a decision"
            }
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    let journal = app.journal().as_ref();
    let approval_ids = ids::all_approvals(journal).await?;
    let short = ids::shorten(approval_ids.iter().map(String::as_str));
    let task_ids = ids::all_tasks(journal).await?;
    let short_task = ids::shorten(task_ids.iter().map(String::as_str));
    let now = now_ms();
    let rows: Vec<Vec<String>> = approvals
        .iter()
        .map(|a| {
            let state = match (a.state.as_str(), a.expires_at) {
                ("pending", Some(at)) => {
                    format!("pending, {} left", output::span((at - now).max(0) / 1000))
                }
                (state, _) => state.to_owned(),
            };
            vec![
                short.get(&a.id).cloned().unwrap_or_else(|| a.id.clone()),
                a.kind.clone(),
                state,
                short_task
                    .get(&a.task_id)
                    .cloned()
                    .unwrap_or_else(|| a.task_id.clone()),
                output::age(a.requested_at, now),
                one_line(&a.summary, 400),
            ]
        })
        .collect();
    let header = ["ID", "KIND", "STATE", "TASK", "ASKED", "SUMMARY"];
    for line in output::table(&header, &rows, crate::term::stdout_width()) {
        writeln!(out, "{line}")?;
    }
    if !all {
        writeln!(
            out,
            "\n`gaffer approval show ID` shows what is asked; decide with `gaffer approve ID [--note …]` or `gaffer deny ID [--note …]`"
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `gaffer approval show ID`: what is asked, its state, who decided, its expiry.
pub async fn show(global: &Global, args: &ApprovalShowArgs) -> Result<ExitCode> {
    let (_, _, app) = open_app(global).await?;
    let journal = app.journal().as_ref();
    let id = ids::approval(journal, &args.id).await?;
    let mut approval = app.approval(&id).await.map_err(app_error)?;
    if let Ok(p) = app.project(&approval.project_id).await {
        approval.project = p.name;
    }
    if args.json {
        output::json(&approval)?;
        return Ok(ExitCode::SUCCESS);
    }
    let all = ids::all_approvals(journal).await?;
    let short = ids::shorten(all.iter().map(String::as_str))
        .remove(&id)
        .unwrap_or_else(|| id.clone());
    let mut out = crate::term::stdout();
    for line in render::approval(&approval, &short, now_ms()) {
        writeln!(out, "{line}")?;
    }
    Ok(ExitCode::SUCCESS)
}

/// What `gaffer approve|deny` records.
#[derive(Debug, Clone, Copy)]
pub enum Verdict {
    /// Approve or deny this request only.
    Once(Decision),
    /// Approve, and the same command for the rest of the task (`approve --for-task`).
    AllowForTask,
}

/// Decide. Exit 0 when this call recorded the decision; exit 1 naming the recorded
/// one when another decision came first (nothing changes).
pub async fn decide(global: &Global, args: &DecideArgs, verdict: Verdict) -> Result<ExitCode> {
    let (_, _, app) = open_app(global).await?;
    let id = &ids::approval(app.journal().as_ref(), &args.id).await?;
    let (note, json) = (args.note.clone(), args.json);
    let d = match verdict {
        Verdict::Once(decision) => {
            app.decide(id, decision, cli_actor(), note, Scope::default())
                .await
        }
        Verdict::AllowForTask => {
            app.allow_for_task(id, cli_actor(), note, Scope::default())
                .await
        }
    }
    .map_err(app_error)?;
    if json {
        output::json(&d.approval)?;
    }
    let a = &d.approval;
    if d.applied {
        if !json {
            let scope = if a.for_task {
                " for this task (the same command is approved again in this task)"
            } else {
                ""
            };
            writeln!(
                crate::term::stdout(),
                "{}{scope} {}: {}",
                a.state,
                a.id,
                one_line(&a.summary, 300)
            )?;
        }
        Ok(ExitCode::SUCCESS)
    } else {
        let by = a
            .decided_by
            .as_ref()
            .map(|b| format!(" by {} ({})", b.name, b.via))
            .unwrap_or_default();
        Err(CliError::failed(format!(
            "approval {} is already {}{by}; the first decision stands and nothing changed",
            a.id, a.state
        )))
    }
}

pub async fn auto(
    global: &Global,
    on: bool,
    project: Option<String>,
    json: bool,
) -> Result<ExitCode> {
    let (_, _, app) = open_app(global).await?;
    let project = match project {
        Some(p) => p,
        None => {
            let all = app.projects().await.map_err(app_error)?;
            match all.as_slice() {
                [only] => only.name.clone(),
                [] => return Err(CliError::config("no project is registered yet")),
                many => {
                    return Err(CliError::usage(format!(
                        "name the project with --project (one of: {})",
                        many.iter()
                            .map(|p| p.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )))
                }
            }
        }
    };
    let p = app
        .set_auto_approve(&project, on, cli_actor())
        .await
        .map_err(app_error)?;
    if json {
        output::json(&p)?;
    } else {
        writeln!(
            crate::term::stdout(),
            "auto-approve is {} for project {} (applies to approvals asked from now on; manual, escalation, stall and budget approvals always need a person)",
            if p.auto_approve { "on" } else { "off" },
            p.name
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
