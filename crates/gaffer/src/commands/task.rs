//! `gaffer task list|show`.

use crate::cli::{Global, TaskListArgs, TaskShowArgs};
use crate::error::{CliError, Result};
use crate::output;
use crate::setup::{load_config, open_journal};
use gaffer_store::{now_ms, LeaseState, TaskFilter, TaskRow};
use serde::Serialize;
use serde_json::Value;
use std::io::Write;
use std::process::ExitCode;

/// A row as JSON, with its JSON-text columns turned back into JSON.
fn row_json<T: Serialize>(row: &T, json_columns: &[&str]) -> Value {
    let mut value = serde_json::to_value(row).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut value {
        for column in json_columns {
            if let Some(Value::String(text)) = map.get(*column) {
                if let Ok(parsed) = serde_json::from_str(text) {
                    map.insert((*column).to_owned(), parsed);
                }
            }
        }
    }
    value
}

fn task_json(task: &TaskRow) -> Value {
    row_json(task, &["created_by", "outcome"])
}

pub async fn list(global: &Global, args: &TaskListArgs) -> Result<ExitCode> {
    let config = load_config(global)?;
    let journal = open_journal(&config).await?;
    let tasks = journal
        .tasks(&TaskFilter {
            project_id: args.project.clone(),
            stage: args.stage.clone(),
            limit: Some(args.limit),
            offset: None,
        })
        .await?;
    journal.shutdown().await;
    if args.json {
        output::json(&tasks.iter().map(task_json).collect::<Vec<_>>())?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut out = std::io::stdout().lock();
    if tasks.is_empty() {
        writeln!(out, "no tasks yet")?;
        return Ok(ExitCode::SUCCESS);
    }
    let now = now_ms();
    writeln!(
        out,
        "{:<28} {:<24} {:<12} {:<9} REQUEST",
        "ID", "STAGE", "PROJECT", "AGE"
    )?;
    for t in &tasks {
        writeln!(
            out,
            "{:<28} {:<24} {:<12} {:<9} {}",
            t.id,
            t.stage,
            output::one_line(&t.project_id, 12),
            output::age(t.created_at, now),
            output::one_line(&t.request, 60)
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn show(global: &Global, args: &TaskShowArgs) -> Result<ExitCode> {
    let config = load_config(global)?;
    let journal = open_journal(&config).await?;
    let view = journal.task(&args.id).await?;
    journal.shutdown().await;
    let Some(view) = view else {
        return Err(CliError::failed(format!(
            "no task with id `{}`; `gaffer task list` shows the tasks there are",
            args.id
        )));
    };
    if args.json {
        output::json(&serde_json::json!({
            "task": task_json(&view.task),
            "head_seq": view.head_seq,
            "steps": view.steps.iter().map(|s| row_json(s, &["depends_on", "input", "receipt"])).collect::<Vec<_>>(),
            "approvals": view.approvals.iter().map(|a| row_json(a, &["details", "decided_by"])).collect::<Vec<_>>(),
            "sessions": view.sessions.iter().map(|s| row_json(s, &[])).collect::<Vec<_>>(),
            "worker": view.lease,
        }))?;
        return Ok(ExitCode::SUCCESS);
    }
    let t = &view.task;
    let mut out = std::io::stdout().lock();
    writeln!(out, "task     {}", t.id)?;
    writeln!(out, "project  {}", t.project_id)?;
    writeln!(out, "stage    {}", t.stage)?;
    writeln!(out, "request  {}", output::one_line(&t.request, 200))?;
    writeln!(
        out,
        "age      {} ({} events)",
        output::age(t.created_at, now_ms()),
        view.head_seq
    )?;
    if let Some(outcome) = &t.outcome {
        writeln!(out, "outcome  {outcome}")?;
    }
    if let Some(l) = &view.lease {
        let state = match l.state {
            LeaseState::Held => "runs it now",
            LeaseState::Released => "ran it, released",
            LeaseState::Expired => "stopped renewing its lease; the next worker takes it over",
        };
        writeln!(
            out,
            "worker   {} ({state}; lease generation {})",
            l.lease.worker_id, l.lease.generation
        )?;
    }
    if !view.steps.is_empty() {
        writeln!(out, "\nsteps")?;
        for s in &view.steps {
            let error = s
                .error
                .as_deref()
                .map(|e| format!(" — {}", output::one_line(e, 80)))
                .unwrap_or_default();
            writeln!(
                out,
                "  {:<20} {:<16} {:<15} attempt {}{error}",
                s.step_id, s.state, s.intent, s.attempt
            )?;
        }
    }
    if !view.approvals.is_empty() {
        writeln!(out, "\napprovals")?;
        for a in &view.approvals {
            writeln!(
                out,
                "  {:<28} {:<10} {:<10} {}",
                a.id,
                a.kind,
                a.state,
                output::one_line(&a.summary, 60)
            )?;
        }
    }
    if !view.sessions.is_empty() {
        writeln!(out, "\nsessions")?;
        for s in &view.sessions {
            let verified = if s.verified { "verified" } else { "unverified" };
            writeln!(
                out,
                "  {:<28} {:<9} {:<10} {verified}",
                s.id, s.role, s.agent
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
