//! `gaffer task list|show`.

use crate::cli::{Global, TaskListArgs, TaskShowArgs};
use crate::commands::approvals::{app_error, open_app};
use crate::error::{CliError, Result};
use crate::output::{self, one_line};
use crate::{ids, render, term};
use gaffer_app::TaskQuery;
use gaffer_core::Stage;
use gaffer_store::{now_ms, TaskFilter, TaskRow};
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
    let (_, _, app) = open_app(global).await?;
    if let Some(stage) = &args.stage {
        if !Stage::ALL.iter().any(|s| s.as_str() == stage) {
            return Err(CliError::usage(format!(
                "--stage `{stage}` is not a stage; use one of {}",
                Stage::ALL.map(|s| s.as_str()).join(", ")
            )));
        }
    }
    let projects = app.projects().await.map_err(app_error)?;
    let project = match &args.project {
        Some(p) => Some(
            projects
                .iter()
                .find(|x| x.name == *p || x.id == *p)
                .ok_or_else(|| {
                    CliError::failed(format!(
                        "no project `{p}`; `gaffer project list` shows the registered projects"
                    ))
                })?,
        ),
        None => None,
    };
    if args.json {
        let rows = app
            .journal()
            .tasks(&TaskFilter {
                project_id: project.map(|p| p.id.clone()),
                stage: args.stage.clone(),
                limit: Some(args.limit),
                offset: None,
            })
            .await?;
        let mut listed: Vec<Value> = Vec::with_capacity(rows.len());
        for t in &rows {
            let mut v = task_json(t);
            let name = projects.iter().find(|p| p.id == t.project_id);
            v["project"] = name.map_or(Value::Null, |p| Value::String(p.name.clone()));
            // What it runs after, with each one's stage now (as the API's `after`).
            let options = serde_json::from_str::<gaffer_core::TaskOptions>(&t.options);
            if options.is_ok_and(|o| !o.after.is_empty()) {
                let detail = app.task(&t.id).await.map_err(app_error)?;
                v["after"] = serde_json::to_value(&detail.task.after).unwrap_or_default();
            }
            listed.push(v);
        }
        output::json(&listed)?;
        return Ok(ExitCode::SUCCESS);
    }
    let tasks = app
        .tasks(&TaskQuery {
            project: project.map(|p| p.id.clone()),
            stage: args.stage.clone(),
            limit: Some(args.limit),
            offset: None,
        })
        .await
        .map_err(app_error)?;
    let mut out = term::stdout();
    if tasks.is_empty() {
        let filtered = args.project.is_some() || args.stage.is_some();
        writeln!(
            out,
            "{}",
            if filtered {
                "no tasks match"
            } else {
                "no tasks yet; `gaffer run \"REQUEST\"` starts one"
            }
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    let all = ids::all_tasks(app.journal().as_ref()).await?;
    let short = ids::shorten(all.iter().map(String::as_str));
    let now = now_ms();
    let rows: Vec<Vec<String>> = tasks
        .iter()
        .map(|t| {
            vec![
                short.get(&t.id).cloned().unwrap_or_else(|| t.id.clone()),
                render::after::stage_cell(t, &short),
                one_line(&t.project, 24),
                output::age(t.created_at, now),
                one_line(&t.request, 400),
            ]
        })
        .collect();
    let header = ["ID", "STAGE", "PROJECT", "AGE", "REQUEST"];
    for line in output::table(&header, &rows, term::stdout_width()) {
        writeln!(out, "{line}")?;
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn show(global: &Global, args: &TaskShowArgs) -> Result<ExitCode> {
    let (_, _, app) = open_app(global).await?;
    let journal = app.journal();
    let id = ids::task(journal.as_ref(), &args.id).await?;
    if args.json {
        let view = journal
            .task(&id)
            .await?
            .ok_or_else(|| CliError::failed(format!("task `{id}` vanished")))?;
        let switches = app.task(&id).await.map_err(app_error)?.switches;
        output::json(&serde_json::json!({
            "task": task_json(&view.task),
            "head_seq": view.head_seq,
            "steps": view.steps.iter().map(|s| row_json(s, &["depends_on", "input", "receipt", "context"])).collect::<Vec<_>>(),
            "approvals": view.approvals.iter().map(|a| row_json(a, &["details", "decided_by"])).collect::<Vec<_>>(),
            "sessions": view.sessions.iter().map(|s| row_json(s, &[])).collect::<Vec<_>>(),
            "worker": view.lease,
            "switches": switches,
        }))?;
        return Ok(ExitCode::SUCCESS);
    }
    let detail = app.task(&id).await.map_err(app_error)?;
    let all = ids::all_tasks(journal.as_ref()).await?;
    let short = ids::shorten(all.iter().map(String::as_str))
        .remove(&id)
        .unwrap_or_else(|| id.clone());
    let mut out = term::stdout();
    for line in render::task(&detail, &short, now_ms()) {
        writeln!(out, "{line}")?;
    }
    Ok(ExitCode::SUCCESS)
}
