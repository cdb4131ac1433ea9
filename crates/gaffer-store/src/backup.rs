//! Backing up a SQLite journal while gaffer runs, and restoring a backup into a
//! journal that holds nothing yet.
//!
//! A backup is `VACUUM INTO` on a read-only connection: one read transaction, so
//! the copy is the database as of one commit (every stream's chain and every
//! projection as they were together), while writers go on in the WAL. PostgreSQL
//! has its own tool for this (`pg_dump`, see docs/operations.md).

use crate::sqlite::{check_schema_read_only, connect_read_only, sibling, COMMITTED_SUFFIX};
use crate::{Durability, Journal, Result, SqliteJournal, StoreError};
use serde::Serialize;
use sqlx::Connection;
use std::path::Path;

/// What [`backup_sqlite`] wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Backup {
    /// The backup file.
    pub path: String,
    /// Its size.
    pub bytes: u64,
    /// The schema version it holds (the source's).
    pub schema_version: i64,
    /// Streams (tasks and projects) in it.
    pub streams: i64,
    /// Events in it.
    pub events: i64,
}

/// What [`restore_sqlite`] restored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Restored {
    /// The journal restored into.
    pub path: String,
    /// The schema version of the backup.
    pub backup_schema_version: i64,
    /// The schema version of the restored journal (this build's: older backups are migrated).
    pub schema_version: i64,
    /// Streams verified.
    pub streams: usize,
    /// Events verified.
    pub events: usize,
}

/// What follows a file's name while it is being written, until it is complete.
const PARTIAL_SUFFIX: &str = ".partial";

/// Copy the journal in `from` to the new file `to`, as of one commit, while other
/// processes go on writing. `to` must not exist; it appears only once complete
/// (written under `<to>.partial`, synced, then renamed). Nothing in `from` changes.
pub async fn backup_sqlite(from: &Path, to: &Path) -> Result<Backup> {
    let refuse = |m: String| Err(StoreError::Backup(m));
    if !from.is_file() {
        return refuse(format!(
            "{}: no such journal; point --data-dir or --db at the journal to back up",
            from.display()
        ));
    }
    if to.exists() {
        return refuse(format!(
            "{} already exists; name a new file (a backup never overwrites one)",
            to.display()
        ));
    }
    let Some(schema_version) = check_schema_read_only(from).await? else {
        return refuse(format!(
            "{} holds no journal yet: nothing to back up",
            from.display()
        ));
    };
    let partial = sibling(to, PARTIAL_SUFFIX);
    remove_if_present(&partial)?;
    let mut conn = connect_read_only(from).await?;
    let copied = sqlx::query("VACUUM INTO ?")
        .bind(partial.to_string_lossy().into_owned())
        .execute(&mut conn)
        .await;
    conn.close().await.ok();
    if let Err(e) = copied {
        let _ = std::fs::remove_file(&partial);
        return Err(StoreError::Backup(format!(
            "writing {}: {e}; check that its directory exists and has room",
            to.display()
        )));
    }
    // VACUUM INTO does not sync what it wrote: a backup must survive a power cut.
    let written = std::fs::File::open(&partial).and_then(|f| {
        f.sync_all()?;
        f.metadata()
    });
    let bytes = match written {
        Ok(meta) => meta.len(),
        Err(e) => {
            let _ = std::fs::remove_file(&partial);
            return Err(io_error(&partial, e));
        }
    };
    std::fs::rename(&partial, to).map_err(|e| io_error(to, e))?;
    sync_parent(to);
    let (events, streams) = counts(to).await?;
    Ok(Backup {
        path: to.display().to_string(),
        bytes,
        schema_version,
        streams,
        events,
    })
}

/// Restore the backup `backup` as the journal `target`: a copy of it (the backup
/// itself is never changed) is migrated to this build's schema and must verify
/// (every hash chain, every projection) before it takes `target`'s name. A
/// `target` that holds any event is refused; an empty one is replaced.
pub async fn restore_sqlite(
    backup: &Path,
    target: &Path,
    durability: Durability,
) -> Result<Restored> {
    let refuse = |m: String| Err(StoreError::Backup(m));
    if !backup.is_file() {
        return refuse(format!("{}: no such backup file", backup.display()));
    }
    let Some(backup_schema_version) = check_schema_read_only(backup).await? else {
        return refuse(format!(
            "{} is empty: not a gaffer backup",
            backup.display()
        ));
    };
    if SqliteJournal::schema_found(target).await?.is_some() {
        let (events, _) = counts(target).await?;
        if events > 0 {
            return refuse(format!(
                "{} already holds {events} events; restore into a new data dir (--data-dir) or move that journal away first",
                target.display()
            ));
        }
    }
    let restoring = sibling(target, ".restoring");
    remove_with_sidecars(&restoring)?;
    std::fs::copy(backup, &restoring).map_err(|e| io_error(&restoring, e))?;
    let checked = verify_copy(&restoring, durability).await;
    let report = match checked {
        Ok(report) => report,
        Err(e) => {
            let _ = remove_with_sidecars(&restoring);
            return Err(e);
        }
    };
    if let Some(b) = report.broken {
        let _ = remove_with_sidecars(&restoring);
        return refuse(format!(
            "{} does not verify (`{}` seq {}: {}); nothing was restored",
            backup.display(),
            b.stream,
            b.seq,
            b.problem
        ));
    }
    remove_with_sidecars(target)?;
    std::fs::rename(&restoring, target).map_err(|e| io_error(target, e))?;
    remove_with_sidecars(&restoring)?;
    sync_parent(target);
    Ok(Restored {
        path: target.display().to_string(),
        backup_schema_version,
        schema_version: SqliteJournal::supported_schema_version(),
        streams: report.streams,
        events: report.events,
    })
}

/// Open the copy (migrating it), verify it, and fold its WAL into the file so the
/// file alone is the whole journal.
async fn verify_copy(path: &Path, durability: Durability) -> Result<crate::VerifyReport> {
    let journal = SqliteJournal::open(path, durability).await?;
    let report = journal.verify().await;
    let folded = sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
        .fetch_one(journal.pool())
        .await;
    journal.close().await;
    let report = report?;
    let busy: i64 = sqlx::Row::try_get(&folded?, 0)?;
    if busy != 0 {
        return Err(StoreError::Backup(format!(
            "{} is in use by another process; stop it and restore again",
            path.display()
        )));
    }
    Ok(report)
}

/// Events and streams in the journal at `path`, read only.
async fn counts(path: &Path) -> Result<(i64, i64)> {
    let mut conn = connect_read_only(path).await?;
    let counted = sqlx::query_as("SELECT COUNT(*), COUNT(DISTINCT stream_id) FROM events")
        .fetch_one(&mut conn)
        .await;
    conn.close().await.ok();
    Ok(counted?)
}

fn io_error(path: &Path, e: std::io::Error) -> StoreError {
    StoreError::Backup(format!("{}: {e}", path.display()))
}

fn remove_if_present(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io_error(path, e)),
        _ => Ok(()),
    }
}

/// A SQLite file and the files SQLite and gaffer keep beside it.
fn remove_with_sidecars(path: &Path) -> Result<()> {
    for suffix in ["", "-wal", "-shm", "-journal", COMMITTED_SUFFIX] {
        remove_if_present(&sibling(path, suffix))?;
    }
    Ok(())
}

/// Make a rename durable. Best effort: some file systems cannot sync a directory.
fn sync_parent(path: &Path) {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
    }
}
