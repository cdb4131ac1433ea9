//! `gaffer schedules add|remove`: schedules kept in the journal's database, beside
//! the config's `[[schedules]]` (see gaffer-app's `add_schedule`). Like the other
//! commands, straight on the journal: running schedulers read the change within
//! seconds.

use crate::cli::{Global, ScheduleAddArgs, ScheduleRemoveArgs};
use crate::commands::approvals::{app_error, open_app};
use crate::error::{CliError, Result};
use crate::output;
use gaffer_app::AppError;
use gaffer_config::ScheduleSpec;
use std::process::ExitCode;

pub async fn add(global: &Global, args: &ScheduleAddArgs) -> Result<ExitCode> {
    let (config, _, app) = open_app(global).await?;
    let added = app
        .add_schedule(
            ScheduleSpec {
                name: args.name.clone(),
                cron: args.cron.clone(),
                tz: args.tz.clone(),
                project: args.project.clone(),
                request: args.request.clone(),
                agent: args.agent.clone(),
                missed: Some(args.missed.clone()),
            },
            &config.schedules,
            crate::setup::cli_actor(),
        )
        .await
        .map_err(option_error)?;
    let view = app
        .schedule_view(&added.schedule, Some(&added.record), gaffer_store::now_ms())
        .await
        .map_err(app_error)?;
    if args.json {
        output::json(&view)?;
    } else {
        outln!(
            "added schedule {} ({} {}): {} in {}",
            view.name,
            view.cron,
            view.tz,
            output::one_line(&view.request, 60),
            view.project
        );
        match &view.next_slot {
            Some(next) => outln!("next slot: {next}; every running `gaffer serve` or `gaffer worker` picks it up within seconds"),
            None => outln!("its cron expression has no slot left: it will never run"),
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn remove(global: &Global, args: &ScheduleRemoveArgs) -> Result<ExitCode> {
    let (config, _, app) = open_app(global).await?;
    let removed = app
        .remove_schedule(&args.name, &config.schedules, crate::setup::cli_actor())
        .await
        .map_err(|e| match e {
            AppError::NotFound { .. } => CliError::failed(format!(
                "no schedule added at run time is named `{}` (or it was removed already)",
                args.name
            )),
            other => app_error(other),
        })?;
    if args.json {
        output::json(&serde_json::json!({
            "removed": removed.name,
            "removed_by": removed.removed_by,
            "removed_at": removed.removed_at,
        }))?;
    } else {
        outln!(
            "removed schedule {}: no slot of it runs from now on (the tasks it made stay)",
            removed.name
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// A refused field, named as the option that gave it (exit 2). The service's
/// message names the field as the API does (`` `cron` `nope` has…``): the option
/// already says which, so the field's name is not said twice.
fn option_error(e: AppError) -> CliError {
    match e {
        AppError::Invalid { field, message } => {
            let option = if field == "name" {
                "NAME".to_owned()
            } else {
                format!("--{field}")
            };
            let message = message
                .strip_prefix(&format!("`{field}` "))
                .unwrap_or(&message);
            CliError::usage(format!("{option}: {message}"))
        }
        other => app_error(other),
    }
}
