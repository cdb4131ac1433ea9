//! `gaffer say` and `gaffer interrupt`: a person reaching into a task's running agent.
//! Both are recorded in the journal (with the person at this keyboard, via `cli`);
//! the engine running the task, in this or another process, delivers or stops.

use crate::cli::{SayArgs, TaskIdArgs};
use crate::commands::approvals::{app_error, open_app};
use crate::error::{CliError, Result};
use crate::output;
use crate::setup::cli_actor;
use crate::term;
use gaffer_app::AppError;
use std::io::Write;
use std::process::ExitCode;

/// A refusal because of where the task is (nothing runs, it is over) is a
/// precondition (78): try again when an agent runs.
fn live_error(e: AppError) -> CliError {
    match e {
        AppError::Conflict { message, .. } => CliError::config(message),
        other => app_error(other),
    }
}

pub async fn say(global: &crate::cli::Global, args: &SayArgs) -> Result<ExitCode> {
    let (_, _, app) = open_app(global).await?;
    let id = crate::ids::task(app.journal().as_ref(), &args.id).await?;
    let text = args.text.join(" ");
    let m = app
        .send_message(&id, &text, cli_actor())
        .await
        .map_err(live_error)?;
    if args.json {
        output::json(&m)?;
    } else {
        writeln!(
            term::stdout(),
            "message {} recorded for task {}; the running agent gets it in its current turn (or its next one)",
            m.id,
            m.task_id
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn interrupt(global: &crate::cli::Global, args: &TaskIdArgs) -> Result<ExitCode> {
    let (_, _, app) = open_app(global).await?;
    let id = crate::ids::task(app.journal().as_ref(), &args.id).await?;
    let i = app.interrupt(&id, cli_actor()).await.map_err(live_error)?;
    if args.json {
        output::json(&i)?;
    } else {
        writeln!(
            term::stdout(),
            "task {}: the agent stops its turn and waits; `gaffer say {} TEXT` starts its next turn (`gaffer say {} continue` to just go on), `gaffer task cancel {}` stops the task",
            i.task_id, i.task_id, i.task_id, i.task_id
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
