//! `gaffer backup PATH` and `gaffer restore PATH`: a SQLite journal copied as of
//! one commit while gaffer runs, and restored (verified) into a journal that holds
//! nothing yet. PostgreSQL journals are backed up with PostgreSQL's own tools.

use crate::cli::{BackupArgs, Global};
use crate::error::{CliError, Result};
use crate::output;
use crate::setup::{durability, load_config};
use gaffer_store::{mask_url, Location};
use std::path::PathBuf;
use std::process::ExitCode;

/// The configured journal's SQLite file, or a refusal that says what to use for
/// PostgreSQL (`pg_tool`'s command line for this URL).
fn sqlite_journal(location: &str, pg_advice: impl Fn(&str) -> String) -> Result<PathBuf> {
    match Location::parse(location).map_err(CliError::config)? {
        Location::Sqlite(path) => Ok(path),
        Location::Postgres(url) => Err(CliError::config(pg_advice(&mask_url(&url)))),
    }
}

pub async fn backup(global: &Global, args: &BackupArgs) -> Result<ExitCode> {
    let config = load_config(global)?;
    let from = sqlite_journal(&config.database_location(), |url| {
        format!(
            "the journal is on PostgreSQL ({url}): back it up with PostgreSQL's own tool, e.g. `pg_dump --format=custom --file={} '{url}'` (see docs/operations.md, \"Backups\")",
            args.path.display()
        )
    })?;
    if !args.json {
        errln!("backing up {} to {} …", from.display(), args.path.display());
    }
    let b = gaffer_store::backup_sqlite(&from, &args.path).await?;
    if args.json {
        output::json(&b)?;
    } else {
        outln!(
            "ok: {} events in {} streams (schema v{}, {} bytes) written to {}; `gaffer restore {}` restores it",
            b.events,
            b.streams,
            b.schema_version,
            b.bytes,
            b.path,
            b.path
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn restore(global: &Global, args: &BackupArgs) -> Result<ExitCode> {
    let config = load_config(global)?;
    let to = sqlite_journal(&config.database_location(), |url| {
        format!(
            "the journal is on PostgreSQL ({url}): restore a pg_dump archive with `pg_restore --dbname='{url}' ARCHIVE`, or copy a gaffer backup file into it with `gaffer db copy --from {} --to '{url}'` (see docs/operations.md, \"Backups\")",
            args.path.display()
        )
    })?;
    if let Some(parent) = to.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| {
            CliError::config(format!(
                "cannot create {} for the journal: {e}; set --data-dir or --db to a writable place",
                parent.display()
            ))
        })?;
    }
    if !args.json {
        errln!("restoring {} into {} …", args.path.display(), to.display());
    }
    let r = gaffer_store::restore_sqlite(&args.path, &to, durability(&config)).await?;
    if args.json {
        output::json(&r)?;
    } else {
        let migrated = if r.backup_schema_version < r.schema_version {
            format!(
                ", migrated from schema v{} to v{}",
                r.backup_schema_version, r.schema_version
            )
        } else {
            String::new()
        };
        outln!(
            "ok: {} events in {} streams restored into {} and verified{migrated}",
            r.events,
            r.streams,
            r.path
        );
    }
    Ok(ExitCode::SUCCESS)
}
