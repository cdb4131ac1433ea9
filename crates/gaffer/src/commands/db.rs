//! `gaffer db copy`: move a journal to another database.

use crate::cli::{DbCopyArgs, Global};
use crate::error::Result;
use crate::output;
use crate::setup::{durability, load_config};
use gaffer_store::Location;
use std::process::ExitCode;

pub async fn copy(global: &Global, args: &DbCopyArgs) -> Result<ExitCode> {
    let config = load_config(global)?;
    let durability = durability(&config);
    if let Ok(Location::Sqlite(path)) = Location::parse(&args.from) {
        // Opening a missing SQLite file would create an empty journal and copy nothing.
        if !path.exists() {
            return Err(crate::error::CliError::config(format!(
                "--from {}: no such file; give the path of an existing journal",
                path.display()
            )));
        }
    }
    let from = gaffer_store::open(&args.from, durability).await?;
    let to = gaffer_store::open(&args.to, durability).await?;
    if !args.json {
        errln!("copying {} to {} …", from.location(), to.location());
    }
    let result = gaffer_store::copy_journal(from.as_ref(), to.as_ref()).await;
    from.shutdown().await;
    to.shutdown().await;
    let copied = result?;
    if args.json {
        output::json(&copied)?;
    } else {
        outln!(
            "ok: {} events in {} streams copied and verified, {} Discord message ids and {} schedules added at run time",
            copied.events,
            copied.streams,
            copied.discord_messages,
            copied.schedules
        );
    }
    Ok(ExitCode::SUCCESS)
}
