//! `gaffer say`, `gaffer interrupt` and `gaffer attach`: a person reaching into a
//! task's running agent. Messages and interrupts are recorded in the journal (with
//! the person at this keyboard, via `cli`); the engine running the task, in this or
//! another process, delivers or stops. `attach` follows the task's events from the
//! journal, as `gaffer run` shows its own task, wherever the task runs (`gaffer
//! serve`, a worker, a `gaffer run` in another terminal).

use crate::cli::{AttachArgs, SayArgs, TaskIdArgs};
use crate::commands::approvals::{app_error, open_app};
use crate::error::{CliError, Result};
use crate::live::{Follow, Options};
use crate::output;
use crate::setup::cli_actor;
use crate::term;
use gaffer_app::AppError;
use gaffer_core::{Event, StreamId, TaskId};
use std::io::{BufRead, Write};
use std::process::ExitCode;
use tokio_util::sync::CancellationToken;

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

/// `gaffer attach TASK`: the transcript of the task's current agent session so far,
/// then live; each line typed is sent to the agent as a message. Ctrl-C detaches
/// (exit 0: leaving is the normal end of watching; the task goes on untouched); the
/// task's end ends it too (exit 0).
pub async fn attach(global: &crate::cli::Global, args: &AttachArgs) -> Result<ExitCode> {
    let (config, _, app) = open_app(global).await?;
    crate::setup::follow_others(app.journal().as_ref()).await?;
    let id = crate::ids::task(app.journal().as_ref(), &args.id).await?;
    let events = app
        .journal()
        .stream_events(&StreamId(id.clone()), 0)
        .await?;
    // Ended, unless a follow-up opened the done task again since.
    if let Some(end) = events
        .iter()
        .rev()
        .find(|e| crate::live::ends(&e.event) || matches!(e.event, Event::FollowUpOpened { .. }))
        .filter(|e| crate::live::ends(&e.event))
    {
        return Err(CliError::config(format!(
            "task {id} has ended ({}); `gaffer task show {id}` shows what happened",
            end.event.kind().trim_start_matches("task_")
        )));
    }
    // From the start of the current (newest) agent session, so what it did so far
    // shows, or of the follow-up that opened the task again when that came later.
    let after = events
        .iter()
        .rev()
        .find(|e| {
            matches!(
                e.event,
                Event::SessionStarted { .. } | Event::FollowUpOpened { .. }
            )
        })
        .or(events.last())
        .map_or(0, |e| e.seq - 1);
    if !global.quiet {
        term::note(format_args!(
            "attached to task {id}: type a line and Enter to send it to the agent; Ctrl-C detaches (the task goes on)"
        ));
    }
    let redactor = std::sync::Arc::new(crate::setup::redactor(
        &config,
        crate::setup::configured_token_values(&config),
    ));
    let options = Options {
        json: args.json,
        quiet: global.quiet,
        interactive: false,
    };
    let mut view = Follow::start(
        app.clone(),
        TaskId(id.clone()),
        after,
        options,
        CancellationToken::new(),
        redactor,
    );
    // Typed lines, read on a thread of their own (a blocking read of the terminal).
    let (lines_tx, mut lines) = tokio::sync::mpsc::unbounded_channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { return };
            if lines_tx.send(line).is_err() {
                return;
            }
        }
    });
    let typed = {
        let (app, id) = (app.clone(), id.clone());
        tokio::spawn(async move {
            while let Some(line) = lines.recv().await {
                if line.trim().is_empty() {
                    continue;
                }
                match app.send_message(&id, &line, cli_actor()).await {
                    Ok(m) => term::note(format_args!("sent as message {}", m.id)),
                    Err(e) => term::note(format_args!("not sent: {}", term::text(&e.to_string()))),
                }
            }
        })
    };
    let detached = tokio::select! {
        () = view.ended() => false,
        r = tokio::signal::ctrl_c() => r.is_ok(),
    };
    typed.abort();
    view.finish().await;
    if detached && !global.quiet {
        term::note(format_args!(
            "\ndetached from task {id}; it goes on (`gaffer attach {id}` again, `gaffer task show {id}`)"
        ));
    }
    Ok(ExitCode::SUCCESS)
}
