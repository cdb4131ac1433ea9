//! `gaffer memory show|edit|add PROJECT`: what a project's people keep for every
//! task's agents (see `gaffer_app::memory`).

use crate::cli::{Global, MemoryAddArgs, MemoryArgs};
use crate::commands::approvals::{app_error, open_app};
use crate::error::{CliError, Result};
use crate::output;
use gaffer_app::memory::{self, MemoryError, MEMORY_MAX_BYTES};
use std::path::PathBuf;
use std::process::ExitCode;

/// The data dir, after checking that `project` is registered.
async fn data_dir_of(global: &Global, project: &str) -> Result<PathBuf> {
    let (config, _, app) = open_app(global).await?;
    let projects = app.projects().await.map_err(app_error)?;
    if !projects.iter().any(|p| p.name == project) {
        let known: Vec<&str> = projects.iter().map(|p| p.name.as_str()).collect();
        return Err(CliError::usage(format!(
            "no project named `{project}` (registered: {}); `gaffer project list` shows them",
            if known.is_empty() {
                "none".to_owned()
            } else {
                known.join(", ")
            }
        )));
    }
    Ok(config.data_dir)
}

fn memory_error(e: MemoryError) -> CliError {
    match e {
        MemoryError::Io { .. } => CliError::failed(e.to_string()),
        MemoryError::Full { .. } => CliError::config(e.to_string()),
        MemoryError::Empty => CliError::usage(e.to_string()),
    }
}

/// The memory as `--json` prints it.
fn shown(dir: &std::path::Path, project: &str) -> Result<serde_json::Value> {
    let text = memory::read(dir, project).map_err(memory_error)?;
    Ok(serde_json::json!({
        "project": project,
        "path": memory::path(dir, project),
        "bytes": text.len(),
        "limit": MEMORY_MAX_BYTES,
        "text": text,
    }))
}

pub async fn show(global: &Global, args: &MemoryArgs) -> Result<ExitCode> {
    let dir = data_dir_of(global, &args.project).await?;
    let v = shown(&dir, &args.project)?;
    if args.json {
        output::json(&v)?;
    } else if v["bytes"] == 0 {
        crate::term::note(format_args!(
            "project `{}` has no memory yet; `gaffer memory add {} TEXT` starts it",
            args.project, args.project
        ));
    } else {
        outln!("{}", v["text"].as_str().unwrap_or_default().trim_end());
        crate::term::note(format_args!(
            "{} of {MEMORY_MAX_BYTES} bytes, in {}",
            v["bytes"],
            v["path"].as_str().unwrap_or_default()
        ));
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn add(global: &Global, args: &MemoryAddArgs) -> Result<ExitCode> {
    let dir = data_dir_of(global, &args.project).await?;
    let added = memory::add(&dir, &args.project, &args.text).map_err(memory_error)?;
    if args.json {
        output::json(&shown(&dir, &args.project)?)?;
    } else if added {
        outln!("added to {}'s memory", args.project);
    } else {
        outln!("{}'s memory already says that", args.project);
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn edit(global: &Global, args: &MemoryArgs) -> Result<ExitCode> {
    let dir = data_dir_of(global, &args.project).await?;
    let before = memory::read(&dir, &args.project).map_err(memory_error)?;
    // Edited in a copy beside it: the memory changes only once the editor exits 0
    // with a text within the limit.
    let draft = memory::path(&dir, &args.project).with_extension("md.edit");
    if let Some(parent) = draft.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(&draft, &before)?;
    let editor = std::env::var("VISUAL")
        .or_else(|_| std::env::var("EDITOR"))
        .unwrap_or_else(|_| "vi".into());
    let mut words = editor.split_whitespace();
    let program = words.next().unwrap_or("vi");
    let status = std::process::Command::new(program)
        .args(words)
        .arg(&draft)
        .status()
        .map_err(|e| {
            CliError::config(format!(
                "cannot start the editor `{editor}` ($VISUAL / $EDITOR): {e}"
            ))
        })?;
    if !status.success() {
        let _ = std::fs::remove_file(&draft);
        return Err(CliError::failed(format!(
            "the editor `{editor}` exited {status}; the memory is unchanged"
        )));
    }
    let after = std::fs::read_to_string(&draft)?;
    if after.len() > MEMORY_MAX_BYTES {
        return Err(CliError::config(format!(
            "the edited memory is {} bytes, over the {MEMORY_MAX_BYTES}-byte limit; it is unchanged (your text is in {})",
            after.len(),
            draft.display()
        )));
    }
    std::fs::remove_file(&draft)?;
    if after == before {
        outln!("{}'s memory is unchanged", args.project);
    } else {
        memory::write(&dir, &args.project, &after).map_err(memory_error)?;
        outln!("{}'s memory saved ({} bytes)", args.project, after.len());
    }
    Ok(ExitCode::SUCCESS)
}
