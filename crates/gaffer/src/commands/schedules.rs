//! `gaffer schedules`: the configured `[[schedules]]`, each with its next run in
//! local time and the task its last run made (what `GET /api/schedules` answers).

use crate::cli::Global;
use crate::commands::approvals::{app_error, open_app};
use crate::error::Result;
use crate::output::{self, one_line};
use crate::setup::{config_file, load_config};
use crate::{ids, term};
use gaffer_protocol::api;
use gaffer_store::now_ms;
use std::io::Write;
use std::process::ExitCode;

pub async fn run(global: &Global, json: bool) -> Result<ExitCode> {
    let config = load_config(global)?;
    // Schedules added at run time live in the journal: list from it when it exists,
    // but never create one just to say there is nothing.
    let no_journal = matches!(
        gaffer_store::Location::parse(&config.database_location()),
        Ok(gaffer_store::Location::Sqlite(path)) if !path.exists()
    );
    let now = now_ms();
    let opened = if config.schedules.is_empty() && no_journal {
        None
    } else {
        let (config, _, app) = open_app(global).await?;
        let schedules = app
            .schedules(&config.schedules, now)
            .await
            .map_err(app_error)?;
        Some((app, schedules))
    };
    let Some((app, schedules)) = opened.filter(|(_, s)| !s.is_empty()) else {
        if json {
            output::json(&Vec::<api::Schedule>::new())?;
        } else {
            let (file, _) = config_file(global);
            let file = config.source.as_deref().unwrap_or(&file);
            let mut out = term::stdout();
            writeln!(
                out,
                "No schedule is configured in {} or added with `gaffer schedules add`.\nTo queue a request on a schedule, add to that file:\n",
                file.display()
            )?;
            for line in crate::cli::SCHEDULE_EXAMPLE.lines() {
                writeln!(out, "  {line}")?;
            }
            writeln!(
                out,
                "\nthen restart `gaffer serve` (or `gaffer worker`), which run schedules; or add one while they run with `gaffer schedules add NAME --cron … --project … --request …`. `gaffer init` writes a config file with every field explained."
            )?;
        }
        return Ok(ExitCode::SUCCESS);
    };
    if json {
        output::json(&schedules)?;
        return Ok(ExitCode::SUCCESS);
    }
    let all = ids::all_tasks(app.journal().as_ref()).await?;
    let short = ids::shorten(all.iter().map(String::as_str));
    let zone = jiff::tz::TimeZone::system();
    let rows: Vec<Vec<String>> = schedules
        .iter()
        .map(|s| {
            let cron = match s.tz.as_str() {
                "UTC" => s.cron.clone(),
                tz => format!("{} {tz}", s.cron),
            };
            let last = match &s.last_task {
                Some(t) => format!(
                    "{} {}",
                    short.get(&t.id).map_or(t.id.as_str(), String::as_str),
                    t.stage
                ),
                None => "none yet".to_owned(),
            };
            vec![
                one_line(&s.name, 64),
                one_line(&cron, 48),
                one_line(&s.project, 24),
                next_run(s.next_at, now, &zone),
                last,
            ]
        })
        .collect();
    let mut out = term::stdout();
    let header = ["NAME", "CRON", "PROJECT", "NEXT RUN", "LAST TASK"];
    for line in output::table(&header, &rows, term::stdout_width()) {
        writeln!(out, "{line}")?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `Thu 2026-12-03 04:00 CET (in 13h)`: a slot in local time and how soon it is.
fn next_run(at_ms: Option<i64>, now_ms: i64, zone: &jiff::tz::TimeZone) -> String {
    let Some(at) = at_ms.and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok()) else {
        return "never (the expression has no slot left)".to_owned();
    };
    let local = at.to_zoned(zone.clone()).strftime("%a %Y-%m-%d %H:%M %Z");
    let secs = (at.as_millisecond() - now_ms).max(0) / 1000;
    format!("{local} (in {})", output::span(secs))
}
