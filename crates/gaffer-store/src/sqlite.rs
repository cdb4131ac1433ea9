//! The SQLite journal: WAL, `busy_timeout`, foreign keys, one writer path.

use crate::shared::{
    deliver_foreign, journal_backend, schema_verdict, FollowState, SCHEMA_VERSION_SQL,
};
use crate::{Result, StoreError};
use sqlx::migrate::Migrator;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow,
    SqliteSynchronous,
};
use sqlx::{Connection, Sqlite, SqliteConnection, Transaction};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::sync::{broadcast, Mutex};

static MIGRATOR: Migrator = sqlx::migrate!("./migrations/sqlite");

/// How hard a commit waits for the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// fsync on every commit: survives power loss. The default.
    #[default]
    Full,
    /// fsync at checkpoints only: survives a process crash, may lose the last
    /// commits on power loss.
    Normal,
}

/// The journal in one SQLite file.
pub struct SqliteJournal {
    path: PathBuf,
    pool: SqlitePool,
    /// The one writer path: appends and rebuilds take it, with the replayed
    /// state of recently written streams.
    writer: Mutex<HashMap<String, Cached>>,
    events: broadcast::Sender<RecordedEvent>,
    /// What [`SqliteJournal::follow_other_processes`] has delivered.
    follow: FollowState,
    watcher: std::sync::Mutex<Option<notify::RecommendedWatcher>>,
    /// The task delivering other processes' events, stopped before the pool closes.
    follower: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// `<file>-notify`, touched after each committed append: see [`SqliteJournal::follow_other_processes`].
    committed: Option<std::fs::File>,
    /// What every append goes through first.
    sanitizer: crate::shared::SanitizerSlot,
}

/// What follows the database file's name in the name of the file touched after
/// each committed append.
pub(crate) const COMMITTED_SUFFIX: &str = "-notify";

impl SqliteJournal {
    /// Open (or create) the journal at `path`, migrating it to this build's schema.
    /// A database from a newer gaffer, or not from gaffer at all, is refused
    /// before anything in it is changed.
    pub async fn open(path: &Path, durability: Durability) -> Result<Self> {
        let shown = path.display().to_string();
        // Migrating takes the write lock; a database already at this schema skips it,
        // so starting a command never waits behind another process's write.
        let current = if path.exists() {
            check_schema_read_only(path).await? == Some(Self::supported_schema_version())
        } else {
            false
        };
        // Creating the file, switching it to WAL (an exclusive lock SQLite cannot
        // wait for) and migrating conflict between processes opening a new
        // database at once, so those that may do any of it take turns.
        let turn = if current {
            None
        } else {
            take_turn_to_create(path).await
        };
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .busy_timeout(Duration::from_millis(5000))
            .foreign_keys(true)
            .synchronous(match durability {
                Durability::Full => SqliteSynchronous::Full,
                Durability::Normal => SqliteSynchronous::Normal,
            });
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options)
            .await
            .map_err(|source| StoreError::Open {
                path: shown.clone(),
                source,
            })?;
        if !current {
            migrate(&pool, path).await?;
        }
        drop(turn);
        let (events, _) = broadcast::channel(1024);
        let signal = sibling(path, COMMITTED_SUFFIX);
        let committed = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&signal)
            .map_err(|e| {
                tracing::warn!(
                    "cannot open {}: other processes learn of this one's events only from the WAL: {e}",
                    signal.display()
                )
            })
            .ok();
        Ok(Self {
            path: path.to_owned(),
            pool,
            writer: Mutex::new(HashMap::new()),
            events,
            follow: FollowState::default(),
            sanitizer: Default::default(),
            watcher: std::sync::Mutex::new(None),
            follower: std::sync::Mutex::new(None),
            committed,
        })
    }

    /// Deliver events that other processes append (a `gaffer approve` in another
    /// terminal, a second server) to this process's subscribers too. Woken by
    /// file-system notifications on the database files, not by polling. Needs a
    /// running tokio runtime; without notifications it logs a warning and only
    /// this process's own events are delivered.
    ///
    /// The WAL is written before its commit is visible to readers (with
    /// `synchronous=FULL` there is an fsync in between), and making it visible
    /// changes only the memory-mapped `-shm` index, which raises no notification: a
    /// reader woken by the WAL alone may find nothing new and then never be woken
    /// for that commit. So every append touches `<file>-notify` once it has
    /// committed, and that wakes the followers.
    pub async fn follow_other_processes(&self) -> Result<()> {
        if !self.start_following().await? {
            return Ok(());
        }
        let (wake, mut woken) = tokio::sync::mpsc::unbounded_channel::<()>();
        let file = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let names = [
            format!("{file}-wal"),
            format!("{file}{COMMITTED_SUFFIX}"),
            file,
        ];
        let watched = move |p: &Path| {
            p.file_name()
                .is_some_and(|n| names.iter().any(|w| n.to_string_lossy() == *w))
        };
        use notify::Watcher;
        let mut watcher =
            match notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
                if let Ok(ev) = res {
                    if ev.kind.is_modify() && ev.paths.iter().any(|p| watched(p)) {
                        let _ = wake.send(());
                    }
                }
            }) {
                Ok(w) => w,
                Err(e) => {
                    tracing::warn!("cannot watch the journal for other processes' events: {e}");
                    return Ok(());
                }
            };
        let dir = self
            .path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        if let Err(e) = watcher.watch(dir, notify::RecursiveMode::NonRecursive) {
            tracing::warn!(
                "cannot watch {} for other processes' events: {e}",
                dir.display()
            );
            return Ok(());
        }
        *self.watcher.lock().unwrap_or_else(|e| e.into_inner()) = Some(watcher);
        let (pool, follow, events) = (self.pool.clone(), self.follow.clone(), self.events.clone());
        let follower = tokio::spawn(async move {
            while woken.recv().await.is_some() {
                while woken.try_recv().is_ok() {}
                let wanted = crate::shared::lock(&follow).wanted.clone();
                let fetch = |after| read_foreign_after(&pool, after, wanted.clone());
                if let Err(e) = deliver_foreign(fetch, &follow, &events).await {
                    tracing::warn!("reading other processes' events: {e}");
                }
            }
        });
        *self.follower.lock().unwrap_or_else(|e| e.into_inner()) = Some(follower);
        Ok(())
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The schema version of the file at `path` (`None`: no such file, or no tables
    /// yet), read without changing anything; a newer or foreign schema is refused as
    /// by [`SqliteJournal::open`].
    pub async fn schema_found(path: &Path) -> Result<Option<i64>> {
        if !path.exists() {
            return Ok(None);
        }
        check_schema_read_only(path).await
    }

    /// The newest schema version this build knows.
    pub fn supported_schema_version() -> i64 {
        MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0)
    }

    /// Stop following other processes and close every connection.
    pub async fn close(self) {
        self.close_pool().await;
    }

    /// The follower stops first: woken by the file changes the closing itself makes,
    /// it would read from a closed pool. The checkpoint is `PASSIVE`: it copies
    /// what it can into the main file and waits for nobody. One that waits for
    /// other processes' readers (`TRUNCATE`, as before) held the write lock while
    /// it waited, so every other process's writes stood still behind a read-only
    /// command's exit, up to the busy timeout (issue #17).
    async fn close_pool(&self) {
        drop(
            self.watcher
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take(),
        );
        let follower = self
            .follower
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(follower) = follower {
            follower.abort();
            let _ = follower.await;
        }
        // Best effort: what it leaves in the WAL, the next open replays.
        let _ = sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
            .execute(&self.pool)
            .await;
        self.pool.close().await;
    }

    fn location(&self) -> String {
        self.path.display().to_string()
    }

    /// Wake other processes' followers: the append is committed, so they can read it.
    fn announce_committed(&self) {
        if let Some(file) = &self.committed {
            if let Err(e) = file.set_modified(std::time::SystemTime::now()) {
                tracing::warn!("touching {}{COMMITTED_SUFFIX}: {e}", self.path.display());
            }
        }
    }

    /// The underlying pool, for benchmarks that compare against raw inserts.
    #[doc(hidden)]
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }
}

/// `path` with `suffix` added to its file name (`gaffer.db` → `gaffer.db-notify`).
pub(crate) fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// An exclusive advisory lock on `<file>-notify`, held until the returned file
/// is dropped. Where the file system has no locks, opening goes on without one
/// and relies on [`migrate`]'s retries.
async fn take_turn_to_create(path: &Path) -> Option<std::fs::File> {
    let lock_path = sibling(path, COMMITTED_SUFFIX);
    let shown = lock_path.display().to_string();
    let locked = tokio::task::spawn_blocking(move || {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)?;
        file.lock()?;
        Ok::<_, std::io::Error>(file)
    })
    .await;
    match locked {
        Ok(Ok(file)) => Some(file),
        Ok(Err(e)) => {
            tracing::warn!("cannot lock {shown} to create the database alone: {e}");
            None
        }
        Err(e) => {
            tracing::warn!("locking {shown}: {e}");
            None
        }
    }
}

/// Migrate to this build's schema. Two processes opening a new database at once
/// both try; the loser fails on what the winner created. So a failure is retried,
/// and is no failure at all once the schema is current, whoever finished it.
async fn migrate(pool: &SqlitePool, path: &Path) -> Result<()> {
    let mut tries = 0u64;
    loop {
        match MIGRATOR.run(pool).await {
            Ok(()) => return Ok(()),
            Err(e) => {
                let now = check_schema_read_only(path).await.ok().flatten();
                if now == Some(SqliteJournal::supported_schema_version()) {
                    return Ok(());
                }
                tries += 1;
                if tries >= 10 {
                    return Err(e.into());
                }
                tokio::time::sleep(Duration::from_millis(20 * tries)).await;
            }
        }
    }
}

/// A read-only connection to the SQLite file at `path`, which must exist: whatever
/// is done on it changes nothing in the file.
pub(crate) async fn connect_read_only(path: &Path) -> Result<SqliteConnection> {
    let options = SqliteConnectOptions::new()
        .filename(path)
        .read_only(true)
        .create_if_missing(false)
        .busy_timeout(Duration::from_millis(5000));
    SqliteConnection::connect_with(&options)
        .await
        .map_err(|source| StoreError::Open {
            path: path.display().to_string(),
            source,
        })
}

/// Refuse a newer or foreign database using a read-only connection, so a refusal changes nothing.
/// Returns the schema version found (`None` for an empty database).
pub(crate) async fn check_schema_read_only(path: &Path) -> Result<Option<i64>> {
    let shown = path.display().to_string();
    let open_err = |source| StoreError::Open {
        path: shown.clone(),
        source,
    };
    let mut conn = connect_read_only(path).await?;
    let tables: Vec<String> =
        sqlx::query_scalar("SELECT name FROM sqlite_master WHERE type = 'table'")
            .fetch_all(&mut conn)
            .await
            .map_err(open_err)?;
    let version = async {
        Ok(sqlx::query_scalar(SCHEMA_VERSION_SQL)
            .fetch_one(&mut conn)
            .await?)
    };
    let verdict = schema_verdict(
        &shown,
        &tables,
        SqliteJournal::supported_schema_version(),
        version,
    )
    .await;
    conn.close().await.ok();
    verdict
}

async fn begin_write(pool: &SqlitePool) -> Result<Transaction<'static, Sqlite>> {
    // IMMEDIATE takes the write lock up front, so a second process waits
    // (busy_timeout) instead of failing on a stale snapshot.
    crate::shared::begin_whole(pool, Some("BEGIN IMMEDIATE")).await
}

async fn begin_read(pool: &SqlitePool) -> Result<Transaction<'static, Sqlite>> {
    crate::shared::begin_whole(pool, None).await
}

/// Nothing more to take: `BEGIN IMMEDIATE` already made this the only writer.
async fn lock_positions(_tx: &mut SqliteConnection) -> Result<()> {
    Ok(())
}

/// Nothing more to take: `BEGIN IMMEDIATE` already made this the only writer.
async fn lock_for_rebuild(_tx: &mut SqliteConnection) -> Result<()> {
    Ok(())
}

/// SQLite's `quick_check` (every page, b-tree and freelist is well formed; the
/// cheaper half of `integrity_check`, without comparing each index to its table),
/// and the triggers that keep events append-only.
async fn storage_problems(conn: &mut SqliteConnection) -> Result<Vec<String>> {
    let checked: Vec<String> = sqlx::query_scalar("PRAGMA quick_check")
        .fetch_all(&mut *conn)
        .await?;
    let mut problems: Vec<String> = checked
        .iter()
        .flat_map(|row| row.lines())
        .filter(|line| *line != "ok" && !line.starts_with("*** in database"))
        .map(|line| format!("SQLite quick_check: {line}"))
        .collect();
    let triggers: Vec<String> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'events'",
    )
    .fetch_all(&mut *conn)
    .await?;
    problems.extend(
        ["events_no_update", "events_no_delete"]
            .into_iter()
            .filter(|t| !triggers.iter().any(|have| have == t))
            .map(|t| format!("trigger {t} is missing: events could be changed in place")),
    );
    Ok(problems)
}

/// SQLite ends no transaction for being idle.
async fn allow_long_transaction(_tx: &mut SqliteConnection) -> Result<()> {
    Ok(())
}

/// One machine shares a SQLite file: its clock is everyone's.
async fn db_now(_conn: &mut SqliteConnection) -> Result<i64> {
    Ok(crate::now_ms())
}

/// The claim runs in the writer's `BEGIN IMMEDIATE`: one claimer at a time, after
/// every append in flight.
const CLAIM_LOCK: &str = "";
const CLAIM_ONE_LOCK: &str = "";
const NOTIFY_CLAIM_LOCK: &str = "";

/// Nothing to announce: other processes on this file follow it by file-system notifications.
async fn announce(_tx: &mut SqliteConnection, _stream: &StreamId, _kinds: &str) -> Result<()> {
    Ok(())
}

journal_backend!(SqliteJournal, Sqlite, SqliteConnection, SqliteRow);
