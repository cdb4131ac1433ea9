//! `gaffer journal verify|rebuild`.

use crate::cli::Global;
use crate::error::Result;
use crate::output;
use crate::setup::{load_config, open_journal};
use std::process::ExitCode;

pub async fn verify(global: &Global, json: bool) -> Result<ExitCode> {
    let config = load_config(global)?;
    let journal = open_journal(&config).await?;
    let report = journal.verify().await?;
    journal.shutdown().await;
    if json {
        output::json(&report)?;
    } else {
        match &report.broken {
            None => outln!(
                "ok: {} events in {} streams verified; projections equal a rebuild",
                report.events, report.streams
            ),
            Some(b) if b.stream == "projections" => errln!(
                "broken: the stored projections differ from a rebuild ({}); `gaffer journal rebuild` recomputes them from the events",
                b.problem
            ),
            Some(b) if b.stream == "storage" => errln!(
                "broken: the database itself is damaged ({}); restore it from a backup (or `sqlite3 .recover` a copy) before gaffer writes to it again",
                b.problem
            ),
            Some(b) => errln!(
                "broken: stream {} seq {}{}{}: {}",
                b.stream,
                b.seq,
                b.pos.map(|p| format!(" (position {p})")).unwrap_or_default(),
                b.column
                    .as_deref()
                    .map(|c| format!(", column {c}"))
                    .unwrap_or_default(),
                b.problem
            ),
        }
    }
    Ok(if report.broken.is_some() {
        ExitCode::from(crate::error::EXIT_FAILED)
    } else {
        ExitCode::SUCCESS
    })
}

pub async fn rebuild(global: &Global, json: bool) -> Result<ExitCode> {
    let config = load_config(global)?;
    let journal = open_journal(&config).await?;
    let events = journal.rebuild().await?;
    journal.shutdown().await;
    if json {
        output::json(&serde_json::json!({ "events": events }))?;
    } else {
        outln!("rebuilt every projection from {events} events");
    }
    Ok(ExitCode::SUCCESS)
}
