//! The PostgreSQL journal: the same schema, SQL and semantics as SQLite's, for
//! many gaffer processes on many machines sharing one database.
//!
//! Appends write with row locks: the `(stream_id, seq)` key refuses a fork, and the
//! task's projection row orders an append and a takeover of the task (see
//! `append_as`). Only the inserts and the commit hold one transaction-scoped
//! advisory lock, so global positions commit in order. Each append sends a
//! `NOTIFY` that is delivered only if it commits; [`PgJournal::follow_other_processes`]
//! listens and hands other processes' events to this process's subscribers once.

use crate::shared::{
    deliver_foreign, journal_backend, lock, schema_verdict, FollowState, SCHEMA_VERSION_SQL,
};
use crate::sqlite::Durability;
use crate::{Result, StoreError};
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgListener, PgPool, PgPoolOptions, PgRow};
use sqlx::{ConnectOptions, Connection, PgConnection, Postgres, Transaction};
use std::str::FromStr;
use std::time::Duration;
use tokio::sync::{broadcast, Mutex};

static MIGRATOR: Migrator = sqlx::migrate!("./migrations/postgres");

/// The `LISTEN/NOTIFY` channel committed appends are announced on.
/// How long opening waits for the server before giving up.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

pub const NOTIFY_CHANNEL: &str = "gaffer_events";

/// How long a transaction of this journal may sit idle before the server ends it
/// (unless the URL's `options` set `idle_in_transaction_session_timeout`). Only a
/// stopped or hung process leaves one idle, and the row locks it holds would keep
/// its task from being taken over: a takeover skips a locked task.
const IDLE_IN_TRANSACTION: &str = "60s";

/// The advisory lock key that orders positions ("gaffer" in ASCII).
const POSITIONS_LOCK: i64 = 0x6761_6666_6572;

/// The journal in a PostgreSQL database (its current schema, normally `public`).
pub struct PgJournal {
    shown: String,
    pool: PgPool,
    /// Replayed state of recently written streams; appends of this process take it.
    writer: Mutex<HashMap<String, Cached>>,
    events: broadcast::Sender<RecordedEvent>,
    follow: FollowState,
    listener: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// What every append goes through first.
    sanitizer: crate::shared::SanitizerSlot,
}

/// `url` with any password replaced by `***`, for messages and logs.
pub fn mask_url(url: &str) -> String {
    let mut out = url.to_owned();
    if let Some(scheme_end) = out.find("://") {
        let rest = scheme_end + 3;
        let authority_end = out[rest..]
            .find(['/', '?', '#'])
            .map_or(out.len(), |i| rest + i);
        if let Some(at) = out[rest..authority_end].rfind('@') {
            let userinfo = &out[rest..rest + at];
            if let Some(colon) = userinfo.find(':') {
                out.replace_range(rest + colon + 1..rest + at, "***");
            }
        }
    }
    // `?password=…` in the query string.
    if let Some(q) = out.find('?') {
        let (base, query) = out.split_at(q + 1);
        let masked: Vec<String> = query
            .split('&')
            .map(|kv| match kv.split_once('=') {
                Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                _ => kv.to_owned(),
            })
            .collect();
        out = format!("{base}{}", masked.join("&"));
    }
    out
}

impl PgJournal {
    /// Connect to the database at `url` (`postgres://user:password@host:port/db`) and
    /// migrate it to this build's schema. A database from a newer gaffer, or with
    /// other tables and no gaffer schema, is refused before anything in it is changed.
    /// `Durability::Normal` turns `synchronous_commit` off for this journal's sessions.
    pub async fn open(url: &str, durability: Durability) -> Result<Self> {
        let shown = mask_url(url);
        let open_err = |source| StoreError::Open {
            path: shown.clone(),
            source,
        };
        let mut options = PgConnectOptions::from_str(url)
            .map_err(open_err)?
            .log_statements(tracing::log::LevelFilter::Debug);
        if durability == Durability::Normal {
            options = options.options([("synchronous_commit", "off")]);
        }
        let idle_set = options
            .get_options()
            .is_some_and(|o| o.contains("idle_in_transaction_session_timeout"));
        if !idle_set {
            options =
                options.options([("idle_in_transaction_session_timeout", IDLE_IN_TRANSACTION)]);
        }
        let current = {
            let mut conn = connect_one(&options, &shown).await?;
            let verdict = check_schema(&mut conn, &shown).await;
            conn.close().await.ok();
            verdict? == Some(Self::supported_schema_version())
        };
        let pool = PgPoolOptions::new()
            .max_connections(8)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options)
            .await
            .map_err(open_err)?;
        if !current {
            MIGRATOR.run(&pool).await?;
        }
        let (events, _) = broadcast::channel(1024);
        Ok(Self {
            shown,
            pool,
            writer: Mutex::new(HashMap::new()),
            events,
            follow: FollowState::default(),
            sanitizer: Default::default(),
            listener: std::sync::Mutex::new(None),
        })
    }

    /// Deliver events that other processes append (on this machine or another) to
    /// this process's subscribers too, once each, woken by `LISTEN/NOTIFY`. A lost
    /// connection is re-established and whatever was missed is delivered then.
    pub async fn follow_other_processes(&self) -> Result<()> {
        if lock(&self.follow).active {
            return Ok(());
        }
        let mut listener = PgListener::connect_with(&self.pool).await?;
        listener.listen(NOTIFY_CHANNEL).await?;
        // Listening before reading the cursor: nothing committed in between is missed.
        if !self.start_following().await? {
            return Ok(());
        }
        let (pool, follow, events) = (self.pool.clone(), self.follow.clone(), self.events.clone());
        let task = tokio::spawn(async move {
            loop {
                match listener.try_recv().await {
                    // A notification, or a lost connection (re-established by the next
                    // call): either way, deliver whatever committed past the cursor.
                    Ok(first) => {
                        // Notifications that arrived meanwhile are answered by this one
                        // read, which is skipped when none of them holds a wanted event.
                        // A lost connection (no notification) may have missed any.
                        let wanted = |n: &Option<sqlx::postgres::PgNotification>| {
                            let f = lock(&follow);
                            match n.as_ref().and_then(|n| n.payload().split_once(' ')) {
                                Some((stream, kinds)) => f.wants_any(stream, kinds.split(',')),
                                None => true,
                            }
                        };
                        let mut read = wanted(&first);
                        while let Some(n) = listener.next_buffered() {
                            read |= wanted(&Some(n));
                        }
                        if !read {
                            continue;
                        }
                        let only = lock(&follow).wanted.clone();
                        let fetch = |after| read_foreign_after(&pool, after, only.clone());
                        if let Err(e) = deliver_foreign(fetch, &follow, &events).await {
                            tracing::warn!("reading other processes' events: {e}");
                        }
                    }
                    Err(e) => {
                        if pool.is_closed() {
                            return;
                        }
                        tracing::warn!("listening for other processes' events: {e}");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
            }
        });
        *self.listener.lock().unwrap_or_else(|e| e.into_inner()) = Some(task);
        Ok(())
    }

    /// The URL, with its password masked.
    pub fn url(&self) -> &str {
        &self.shown
    }

    fn location(&self) -> String {
        self.shown.clone()
    }

    /// The schema version of the database at `url` (`None`: it holds no tables yet),
    /// read without changing anything; a newer or foreign schema is refused as by
    /// [`PgJournal::open`].
    pub async fn schema_found(url: &str) -> Result<Option<i64>> {
        let shown = mask_url(url);
        let options = PgConnectOptions::from_str(url).map_err(|source| StoreError::Open {
            path: shown.clone(),
            source,
        })?;
        let mut conn = connect_one(&options, &shown).await?;
        let verdict = check_schema(&mut conn, &shown).await;
        conn.close().await.ok();
        verdict
    }

    /// The newest schema version this build knows.
    pub fn supported_schema_version() -> i64 {
        MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0)
    }

    /// Stop following and close every connection.
    pub async fn close(self) {
        self.close_pool().await;
    }

    async fn close_pool(&self) {
        self.stop_listening();
        self.pool.close().await;
    }

    fn stop_listening(&self) {
        let task = self
            .listener
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(task) = task {
            task.abort();
        }
    }

    /// Nothing more to do: the append's `NOTIFY` is delivered when it commits.
    fn announce_committed(&self) {}

    /// The underlying pool, for tests and benchmarks.
    #[doc(hidden)]
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }
}

impl Drop for PgJournal {
    fn drop(&mut self) {
        self.stop_listening();
    }
}

/// One connection, given up after [`CONNECT_TIMEOUT`]: an unreachable host would
/// otherwise wait for the system's TCP timeout.
async fn connect_one(options: &PgConnectOptions, shown: &str) -> Result<PgConnection> {
    let open_err = |source| StoreError::Open {
        path: shown.to_owned(),
        source,
    };
    tokio::time::timeout(CONNECT_TIMEOUT, PgConnection::connect_with(options))
        .await
        .map_err(|_| {
            open_err(sqlx::Error::Io(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("no answer within {} s", CONNECT_TIMEOUT.as_secs()),
            )))
        })?
        .map_err(open_err)
}

/// Refuse a newer or foreign schema, reading only; the version found.
async fn check_schema(conn: &mut PgConnection, shown: &str) -> Result<Option<i64>> {
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables
         WHERE table_schema = current_schema()",
    )
    .fetch_all(&mut *conn)
    .await?;
    let version = async {
        Ok(sqlx::query_scalar(SCHEMA_VERSION_SQL)
            .fetch_one(&mut *conn)
            .await?)
    };
    schema_verdict(
        shown,
        &tables,
        PgJournal::supported_schema_version(),
        version,
    )
    .await
}

/// A transaction that writes with row locks only: appends to different tasks,
/// claims (`SKIP LOCKED`) and heartbeats pass each other.
async fn begin_write(pool: &PgPool) -> Result<Transaction<'static, Postgres>> {
    crate::shared::begin_whole(pool, None).await
}

async fn begin_read(pool: &PgPool) -> Result<Transaction<'static, Postgres>> {
    crate::shared::begin_whole(
        pool,
        Some("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"),
    )
    .await
}

/// Taken right before an append inserts its events and held to its commit, so
/// positions commit in order (a reader of `events_after` never skips an event
/// that commits later with a smaller position). Only the inserts and the commit
/// happen under it: everything else an append does comes before.
async fn lock_positions(tx: &mut PgConnection) -> Result<()> {
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(POSITIONS_LOCK)
        .execute(&mut *tx)
        .await?;
    Ok(())
}

/// A rebuild rewrites every projection from every event: first wait for the
/// appends writing projections and keep new ones out, then take the positions.
/// In this order, because appends take them in this order.
async fn lock_for_rebuild(tx: &mut PgConnection) -> Result<()> {
    allow_long_transaction(tx).await?;
    sqlx::query("LOCK TABLE projects, tasks, steps, approvals, sessions IN EXCLUSIVE MODE")
        .execute(&mut *tx)
        .await?;
    lock_positions(tx).await
}

/// A rebuild or a verify replays every event between its statements: exempt its
/// transaction from [`IDLE_IN_TRANSACTION`].
async fn allow_long_transaction(tx: &mut PgConnection) -> Result<()> {
    sqlx::query("SET LOCAL idle_in_transaction_session_timeout = 0")
        .execute(&mut *tx)
        .await?;
    Ok(())
}

/// PostgreSQL's counterpart of SQLite's `quick_check` that needs no extension or
/// superuser: every index of gaffer's tables is valid and ready (a failed
/// concurrent build or a corrupted catalog leaves one that is not), the triggers
/// that keep events append-only exist and are enabled, and the identity sequence
/// of `pos` is past every stored position (a reset one would collide or reorder).
/// The replay that follows reads every event and projection row.
async fn storage_problems(conn: &mut PgConnection) -> Result<Vec<String>> {
    let mut problems = Vec::new();
    let invalid: Vec<String> = sqlx::query_scalar(
        "SELECT c.relname::TEXT FROM pg_index i
         JOIN pg_class c ON c.oid = i.indexrelid
         JOIN pg_class t ON t.oid = i.indrelid
         WHERE t.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema())
           AND NOT (i.indisvalid AND i.indisready AND i.indislive)",
    )
    .fetch_all(&mut *conn)
    .await?;
    problems.extend(
        invalid
            .into_iter()
            .map(|i| format!("index {i} is not valid; REINDEX it")),
    );
    let triggers: Vec<(String, String)> = sqlx::query_as(
        "SELECT tgname::TEXT, tgenabled::TEXT FROM pg_trigger
         WHERE tgrelid = 'events'::regclass AND NOT tgisinternal",
    )
    .fetch_all(&mut *conn)
    .await?;
    for wanted in ["events_no_update_or_delete", "events_no_truncate"] {
        match triggers.iter().find(|(name, _)| name == wanted) {
            None => problems.push(format!(
                "trigger {wanted} is missing: events could be changed in place"
            )),
            Some((_, enabled)) if enabled == "D" => problems.push(format!(
                "trigger {wanted} is disabled: events could be changed in place"
            )),
            Some(_) => {}
        }
    }
    let (last, max): (Option<i64>, Option<i64>) = sqlx::query_as(
        "SELECT pg_sequence_last_value(pg_get_serial_sequence('events', 'pos')), (SELECT MAX(pos) FROM events)",
    )
    .fetch_one(&mut *conn)
    .await?;
    if let Some(max) = max {
        if last.is_none_or(|last| last < max) {
            problems.push(format!(
                "the sequence of events.pos is at {} but positions go up to {max}: the next append would reuse one",
                last.map_or_else(|| "its start".to_owned(), |l| l.to_string())
            ));
        }
    }
    Ok(problems)
}

/// The database server's clock: every machine judges lease expiry by the same one.
async fn db_now(conn: &mut PgConnection) -> Result<i64> {
    Ok(
        sqlx::query_scalar("SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT")
            .fetch_one(&mut *conn)
            .await?,
    )
}

/// A claim of any task skips a task whose row is locked this instant (another
/// worker claiming it, or an append to it in flight): another task will do, and
/// this one is seen again at the next look.
const CLAIM_LOCK: &str = " FOR UPDATE OF t SKIP LOCKED";

/// A claim of one named task waits for its row instead: a lock there is an append
/// or a claim in flight, not a holder, and ends with its transaction. Skipping it
/// would call the task held by another worker when none holds it.
const CLAIM_ONE_LOCK: &str = " FOR UPDATE OF t";

/// A claim of notifications skips the rows another deliverer is claiming this
/// instant: it takes the others, and no row is claimed twice.
const NOTIFY_CLAIM_LOCK: &str = " FOR UPDATE SKIP LOCKED";

/// Wake other processes' followers; PostgreSQL delivers it only if the append
/// commits, and only after. Followers read from their cursor; the payload,
/// `<stream> <kind>,<kind>…`, lets one that wants only some events skip the read.
async fn announce(tx: &mut PgConnection, stream: &StreamId, kinds: &str) -> Result<()> {
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(NOTIFY_CHANNEL)
        .bind(format!("{stream} {kinds}"))
        .execute(&mut *tx)
        .await?;
    Ok(())
}

journal_backend!(PgJournal, Postgres, PgConnection, PgRow);
