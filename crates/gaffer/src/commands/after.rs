//! `--after`: a task that runs after others, checked before anything is stored
//! and waited for in the foreground.

use crate::commands::approvals::app_error;
use crate::error::{CliError, Result};
use crate::output::one_line;
use crate::setup::cli_actor;
use crate::term;
use gaffer_app::App;
use gaffer_core::{Stage, TaskId};
use gaffer_engine::Engine;
use tokio_util::sync::CancellationToken;

/// The tasks `--after` names, resolved from unique starts of their ids and checked
/// against the project (`known`, when registered) before anything is stored: a
/// bad one is a usage error (exit 2).
pub async fn checked(
    app: &App,
    known: Option<&gaffer_protocol::api::Project>,
    given: &[String],
) -> Result<Vec<String>> {
    let mut after = Vec::with_capacity(given.len());
    for g in given {
        let id = crate::ids::task(app.journal().as_ref(), g)
            .await
            .map_err(|e| CliError::usage(format!("--after {g}: {}", e.message())))?;
        after.push(id);
    }
    if after.is_empty() {
        return Ok(after);
    }
    let Some(project) = known else {
        // The repository is not registered yet, so every task is in another project.
        return Err(CliError::usage(format!(
            "--after {}: that task is in another project; a task runs only after tasks of its own project",
            after[0]
        )));
    };
    app.check_after(&project.id, &after)
        .await
        .map_err(|e| match e {
            gaffer_app::AppError::Invalid { .. } => CliError::usage(format!("--after: {e}")),
            other => app_error(other),
        })?;
    Ok(after)
}

/// While task `id` waits for the tasks it runs after, say what it waits for and
/// wait (settling it as they end). The task's stage once it no longer waits;
/// `None` when Ctrl-C came first: then the task is cancelled, as a running one is.
pub async fn wait_to_start(
    app: &App,
    engine: &Engine,
    id: &TaskId,
    cancel: &CancellationToken,
) -> Result<Option<Stage>> {
    let detail = app.task(id.as_str()).await.map_err(app_error)?;
    if detail.task.stage != Stage::Waiting.as_str() {
        return Ok(Some(Stage::Queued));
    }
    let waits: Vec<String> = detail
        .task
        .after
        .iter()
        .filter(|d| d.stage != Stage::Done.as_str())
        .map(|d| format!("{} ({})", d.id, d.stage))
        .collect();
    term::note(format_args!(
        "task {id} waits for {}; it starts when they are done (Ctrl-C cancels it)",
        one_line(&waits.join(", "), 400)
    ));
    match engine.wait_for_dependencies(id, cancel).await {
        Ok(Some(stage)) => Ok(Some(stage)),
        Ok(None) => {
            app.cancel_task(
                id.as_str(),
                cli_actor(),
                Some("cancelled from the command line while it waited".into()),
            )
            .await
            .map_err(app_error)?;
            Ok(None)
        }
        Err(e) => Err(CliError::failed(e.to_string())),
    }
}
