//! `gaffer project add|list`.

use crate::cli::{Global, ProjectAddArgs};
use crate::commands::approvals::{app_error, open_app};
use crate::error::{CliError, Result};
use crate::output;
use gaffer_app::AddProject;
use std::io::Write;
use std::process::ExitCode;

/// The repository root containing `path` (physical path), or a precondition error.
pub fn repo_root(path: &std::path::Path) -> Result<std::path::PathBuf> {
    gaffer_forge::Repo::open(path)
        .map(|r| r.root().to_owned())
        .map_err(|e| CliError::config(e.to_string()))
}

pub async fn add(global: &Global, args: &ProjectAddArgs) -> Result<ExitCode> {
    let root = repo_root(&args.path)?;
    let (_, _, app) = open_app(global).await?;
    let project = app
        .add_project(
            AddProject {
                path: root.display().to_string(),
                name: args.name.clone(),
                check: args.check.clone(),
            },
            crate::setup::cli_actor(),
        )
        .await
        .map_err(app_error)?;
    if args.json {
        output::json(&project)?;
    } else {
        outln!(
            "registered {} ({}) at {}",
            project.name,
            project.id,
            project.path
        );
        match &project.check_command {
            Some(c) => outln!("check command: {c}"),
            None => outln!(
                "check command: none found; set one with `gaffer project add {} --check \"CMD\"`",
                project.path
            ),
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn list(global: &Global, json: bool) -> Result<ExitCode> {
    let (_, _, app) = open_app(global).await?;
    let projects = app.projects().await.map_err(app_error)?;
    if json {
        output::json(&projects)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut out = crate::term::stdout();
    if projects.is_empty() {
        writeln!(
            out,
            "no projects yet; `gaffer project add PATH` registers one"
        )?;
    }
    for p in &projects {
        writeln!(
            out,
            "{:<16} {:<40} auto={} check={}",
            p.name,
            p.path,
            if p.auto_approve { "on" } else { "off" },
            p.check_command.as_deref().unwrap_or("-")
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
