//! What the SQLite and PostgreSQL journals share: the writer cache, the follower's
//! bookkeeping, and (through [`journal_backend!`]) every SQL statement and the whole
//! [`crate::Journal`] implementation. The SQL is written once with `$N`
//! placeholders, which both drivers accept; each backend supplies only how a write
//! transaction begins, how a read snapshot begins, and how a commit is announced.

use crate::journal::{NewEvent, RecordedEvent};
use crate::{Result, StoreError};
use gaffer_core::{StreamId, StreamState};
use std::future::Future;
use tokio::sync::broadcast;

/// Begin a transaction on a task of its own, so the caller can be dropped at any
/// await (a `select!`, a timeout, a cancelled worker) without cutting a `BEGIN` in
/// half: sqlx counts a transaction only once its `BEGIN` is answered, so a begin
/// dropped in flight hands the pool a connection still inside that transaction
/// (SQLite: the next `BEGIN IMMEDIATE` on it fails and it holds the file's write
/// lock; PostgreSQL: a later write on it runs inside a stale, maybe read-only,
/// transaction). Finished here, a transaction nobody waits for any more is
/// dropped whole, which rolls it back.
pub(crate) async fn begin_whole<DB: sqlx::Database>(
    pool: &sqlx::Pool<DB>,
    statement: Option<&'static str>,
) -> Result<sqlx::Transaction<'static, DB>> {
    let pool = pool.clone();
    let begun = tokio::spawn(async move {
        match statement {
            Some(statement) => pool.begin_with(statement).await,
            None => pool.begin().await,
        }
    });
    match begun.await {
        Ok(tx) => Ok(tx?),
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        // Cancelled: only when the runtime shuts down, which closes the pool too.
        Err(_) => Err(sqlx::Error::PoolClosed.into()),
    }
}

/// A write transaction that reports how long it waited for the journal's write
/// lock and how long it held it (`gaffer_store::lock` at debug; a wait or a hold
/// of [`SLOW_LOCK`] or more is a warning naming what waited or held). Derefs to
/// the connection, like the transaction it wraps.
pub(crate) struct WriteTx<DB: sqlx::Database> {
    tx: sqlx::Transaction<'static, DB>,
    hold: Hold,
}

/// A wait for, or a hold of, the write lock this long is a warning.
pub(crate) const SLOW_LOCK: std::time::Duration = std::time::Duration::from_secs(1);

/// One hold of the write lock, reported when it ends (also when dropped unfinished:
/// the transaction then rolls back as it drops).
struct Hold {
    what: &'static str,
    acquired: std::time::Instant,
    ended: bool,
}

impl Hold {
    fn end(&mut self, how: &'static str) {
        self.ended = true;
        let held = self.acquired.elapsed();
        let held_ms = held.as_millis() as u64;
        let what = self.what;
        if held >= SLOW_LOCK {
            tracing::warn!(target: "gaffer_store::lock", what, held_ms, how, "held the journal's write lock {held_ms} ms");
        } else {
            tracing::debug!(target: "gaffer_store::lock", what, held_ms, how, "write lock released");
        }
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        if !self.ended {
            self.end("dropped");
        }
    }
}

impl<DB: sqlx::Database> WriteTx<DB> {
    /// `begin` the transaction for `what`; `asked` is when the caller began to
    /// wait (before any lock of its own).
    pub(crate) async fn begin(
        what: &'static str,
        asked: std::time::Instant,
        begin: impl Future<Output = Result<sqlx::Transaction<'static, DB>>>,
    ) -> Result<Self> {
        let tx = begin.await;
        let acquired = std::time::Instant::now();
        let wait = acquired - asked;
        let wait_ms = wait.as_millis() as u64;
        match &tx {
            Err(e) => {
                tracing::warn!(target: "gaffer_store::lock", what, wait_ms, "could not take the journal's write lock: {e}")
            }
            Ok(_) if wait >= SLOW_LOCK => {
                tracing::warn!(target: "gaffer_store::lock", what, wait_ms, "waited {wait_ms} ms for the journal's write lock")
            }
            Ok(_) => {
                tracing::debug!(target: "gaffer_store::lock", what, wait_ms, "write lock taken")
            }
        }
        Ok(Self {
            tx: tx?,
            hold: Hold {
                what,
                acquired,
                ended: false,
            },
        })
    }

    /// Commit, and report the hold.
    pub(crate) async fn commit(self) -> Result<()> {
        let Self { tx, mut hold } = self;
        let done = tx.commit().await;
        hold.end(if done.is_ok() {
            "committed"
        } else {
            "commit failed"
        });
        Ok(done?)
    }

    /// Roll back, and report the hold.
    pub(crate) async fn rollback(self) {
        let Self { tx, mut hold } = self;
        let _ = tx.rollback().await;
        hold.end("rolled back");
    }
}

impl<DB: sqlx::Database> std::ops::Deref for WriteTx<DB> {
    type Target = DB::Connection;
    fn deref(&self) -> &Self::Target {
        &self.tx
    }
}

impl<DB: sqlx::Database> std::ops::DerefMut for WriteTx<DB> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.tx
    }
}

/// Most streams a writer keeps replayed in memory.
pub(crate) const CACHE_LIMIT: usize = 4096;

/// A stream's replayed state at its head, kept by the writer.
pub(crate) struct Cached {
    pub(crate) seq: i64,
    pub(crate) hash: String,
    pub(crate) state: StreamState,
}

/// Events of other processes are delivered once: own appends are marked before
/// they commit, and the follower skips them as it passes.
#[derive(Default)]
pub(crate) struct Follow {
    /// Every event at or below this position has been delivered (or skipped).
    pub(crate) cursor: i64,
    /// Positions this process appended, not yet passed by the follower.
    pub(crate) own: std::collections::BTreeSet<i64>,
    /// Whether a follower runs (otherwise nothing is tracked).
    pub(crate) active: bool,
    /// Which of the other processes' events to deliver (all without one).
    pub(crate) wanted: Option<crate::WantedEvents>,
}

impl Follow {
    /// Whether a commit that announced `kinds` on `stream` holds anything wanted.
    pub(crate) fn wants_any<'k>(
        &self,
        stream: &str,
        mut kinds: impl Iterator<Item = &'k str>,
    ) -> bool {
        match &self.wanted {
            None => true,
            Some(wanted) => kinds.any(|kind| wanted(stream, kind)),
        }
    }
}

pub(crate) type FollowState = std::sync::Arc<std::sync::Mutex<Follow>>;

/// The sanitizer appends go through, once one is set ([`crate::Journal::sanitize_appends`]).
pub(crate) type SanitizerSlot = std::sync::RwLock<Option<crate::Sanitizer>>;

/// `events` through the sanitizer in `slot`, if any.
pub(crate) fn sanitize(
    slot: &SanitizerSlot,
    stream: &StreamId,
    events: Vec<NewEvent>,
) -> Result<Vec<NewEvent>> {
    let Some(sanitizer) = slot.read().unwrap_or_else(|e| e.into_inner()).clone() else {
        return Ok(events);
    };
    events
        .into_iter()
        .enumerate()
        .map(|(index, mut new)| {
            new.event = sanitizer(new.event).map_err(|problem| {
                StoreError::Constraint(format!(
                    "event {index} for `{stream}` cannot be stored: {problem}"
                ))
            })?;
            Ok(new)
        })
        .collect()
}

/// Lock the follower's bookkeeping (a poisoned lock still holds valid data).
pub(crate) fn lock(follow: &std::sync::Mutex<Follow>) -> std::sync::MutexGuard<'_, Follow> {
    follow.lock().unwrap_or_else(|e| e.into_inner())
}

/// How many events a follower reads at once.
pub(crate) const FOLLOW_BATCH: i64 = 500;

/// Broadcast every committed event past the cursor that this process did not append.
/// `fetch(after)` reads the next committed events in position order, at most
/// [`FOLLOW_BATCH`], each as its position and, if wanted, the event; a shorter batch
/// was all there was, so no read is spent to find nothing (every worker follows
/// every append: each read counts).
pub(crate) async fn deliver_foreign<F, Fut>(
    fetch: F,
    follow: &std::sync::Mutex<Follow>,
    events: &broadcast::Sender<RecordedEvent>,
) -> Result<()>
where
    F: Fn(i64) -> Fut,
    Fut: Future<Output = Result<Vec<(i64, Option<RecordedEvent>)>>>,
{
    loop {
        let cursor = lock(follow).cursor;
        let batch = fetch(cursor).await?;
        let more = batch.len() as i64 >= FOLLOW_BATCH;
        for (pos, event) in batch {
            let own = {
                let mut f = lock(follow);
                f.cursor = pos;
                f.own.remove(&pos)
            };
            if let Some(e) = event.filter(|_| !own) {
                let _ = events.send(e);
            }
        }
        if !more {
            return Ok(());
        }
    }
}

/// Whether a database may be opened, from its tables and the schema version they
/// record: refused if newer than `supported` or if it has tables but no gaffer
/// schema. `version` reads the recorded version; it runs only when there is one.
/// Returns the version found (`None` for an empty database).
pub(crate) async fn schema_verdict<Fut>(
    shown: &str,
    tables: &[String],
    supported: i64,
    version: Fut,
) -> Result<Option<i64>>
where
    Fut: Future<Output = Result<Option<i64>>>,
{
    if tables.iter().any(|t| t == "_sqlx_migrations") {
        match version.await? {
            Some(found) if found > supported => Err(StoreError::NewerSchema {
                path: shown.to_owned(),
                found,
                supported,
            }),
            other => Ok(other),
        }
    } else if tables.is_empty() {
        Ok(None)
    } else {
        Err(StoreError::Foreign {
            path: shown.to_owned(),
        })
    }
}

/// The newest version recorded by sqlx's migrator.
pub(crate) const SCHEMA_VERSION_SQL: &str =
    "SELECT MAX(version) FROM _sqlx_migrations WHERE success";

pub(crate) fn corrupt(stream: &str, seq: i64, problem: impl ToString) -> StoreError {
    StoreError::Corrupt {
        stream: stream.to_owned(),
        seq,
        problem: problem.to_string(),
    }
}

/// A unique-key or foreign-key refusal, in words.
pub(crate) fn constraint(e: sqlx::Error, what: &str) -> StoreError {
    match &e {
        sqlx::Error::Database(db) if db.is_unique_violation() => {
            StoreError::Constraint(format!("{what} already exists"))
        }
        sqlx::Error::Database(db) if db.is_foreign_key_violation() => {
            StoreError::Constraint(format!("{what} refers to something that does not exist"))
        }
        _ => StoreError::Db(e),
    }
}

/// The SQL and the [`crate::Journal`] implementation for one backend.
///
/// `$J` is the journal type, with fields `pool`, `writer`, `events`, `follow`;
/// `$DB` the sqlx database, `$Conn` its connection, `$Row` its row. The module
/// that invokes it defines:
/// - `async fn begin_write(pool) -> Result<Transaction<'static, $DB>>`: a writing
///   transaction (SQLite: the one writer; PostgreSQL: row locks only);
/// - `async fn lock_positions(tx) -> Result<()>`: taken by an append right before it
///   inserts its events, held to its commit, so positions commit in order;
/// - `async fn lock_for_rebuild(tx) -> Result<()>`: keeps appends out while a rebuild
///   rewrites the projections;
/// - `async fn allow_long_transaction(tx) -> Result<()>`: lets a transaction that
///   replays every event stay open as long as that takes;
/// - `async fn begin_read(pool) -> Result<Transaction<'static, $DB>>`: one consistent snapshot;
/// - `async fn storage_problems(conn) -> Result<Vec<String>>`: the database's own
///   sanity check for `verify` (empty when sound);
/// - `async fn announce(tx, stream, kinds) -> Result<()>`: called before an append commits
///   (PostgreSQL notifies other nodes; SQLite does nothing);
/// - `async fn db_now(conn) -> Result<i64>`: the clock leases expire by (ms), one for
///   every process sharing the database;
/// - `const CLAIM_LOCK: &str`: appended to the candidate query of a claim of any
///   task (PostgreSQL: `FOR UPDATE OF t SKIP LOCKED`), and `const CLAIM_ONE_LOCK:
///   &str` to that of a claim of one named task (PostgreSQL: `FOR UPDATE OF t`,
///   which waits for an append in flight instead of skipping the task);
/// - `const NOTIFY_CLAIM_LOCK: &str`: appended to the candidate query of a claim of
///   notifications (PostgreSQL: `FOR UPDATE SKIP LOCKED`);
/// - `async fn follow(&self) -> Result<()>` and `async fn close_pool(&self)` on `$J`;
/// - `fn announce_committed(&self)` on `$J`: called once an append has committed
///   (SQLite wakes other processes' file watchers only now, when they can read it).
macro_rules! journal_backend {
    ($J:ty, $DB:ty, $Conn:ty, $Row:ty) => {
        use $crate::hash::{event_hash, GENESIS_HASH};
        use $crate::journal::{
            ApprovalFilter, Appended, Broken, DiscordMessage, Journal, NewEvent, NotifyItem, RecordedEvent,
            TaskFilter, TaskView, VerifyReport,
        };
        use $crate::projection::{
            approval_row, project_row, session_row, step_row, task_row, ApprovalRow, ProjectRow,
            Projections, SessionRow, StepRow, TaskRow,
        };
        use $crate::lease::{
            EventWriter, Lease, LeaseEnd, LeaseRow, TaskLease, WorkerInfo, WorkerRow,
        };
        use $crate::shared::{constraint, corrupt, Cached, CACHE_LIMIT};
        use gaffer_core::{Event, StreamId, StreamState, TaskState, Touched};
        use sqlx::Row as _;
        use std::collections::HashMap;

        /// Binds what delivering a notification changes, and its id, as `$1` to `$6` (id,
        /// attempts, next_at, state, delivered_at, last_error): what enqueueing and
        /// recording an attempt both write.
        fn bind_delivery<'q>(
            q: sqlx::query::Query<'q, $DB, <$DB as sqlx::Database>::Arguments<'q>>,
            i: &'q NotifyItem,
        ) -> sqlx::query::Query<'q, $DB, <$DB as sqlx::Database>::Arguments<'q>> {
            q.bind(&i.id)
                .bind(i.attempts)
                .bind(i.next_at)
                .bind(&i.state)
                .bind(i.delivered_at)
                .bind(&i.last_error)
        }

        /// The columns [`notify_item`] reads.
        const NOTIFY_COLUMNS: &str =
            "id, target, payload, created_at, attempts, next_at, state, delivered_at, last_error";

        fn notify_item(r: &$Row) -> Result<NotifyItem> {
            Ok(NotifyItem {
                id: r.try_get("id")?,
                target: r.try_get("target")?,
                payload: r.try_get("payload")?,
                created_at: r.try_get("created_at")?,
                attempts: r.try_get("attempts")?,
                next_at: r.try_get("next_at")?,
                state: r.try_get("state")?,
                delivered_at: r.try_get("delivered_at")?,
                last_error: r.try_get("last_error")?,
            })
        }

        /// The last seq and hash of a stream, `(0, GENESIS_HASH)` if it has no events.
        async fn read_head(conn: &mut $Conn, stream: &str) -> Result<(i64, String)> {
            let head = sqlx::query_as(
                "SELECT seq, hash FROM events WHERE stream_id = $1 ORDER BY seq DESC LIMIT 1",
            )
            .bind(stream)
            .fetch_optional(&mut *conn)
            .await?;
            Ok(head.unwrap_or((0, GENESIS_HASH.to_owned())))
        }

        /// Refuse an append under `lease` unless the task's lease still has its worker
        /// and generation. Read in the append's transaction after it has written the
        /// task's row: a takeover locks that row (`claim_task`), so it either
        /// committed before this read, which then sees it, or waits for this append
        /// to end (on PostgreSQL it skips the task; on SQLite there is one writer).
        async fn check_lease(conn: &mut $Conn, stream: &StreamId, lease: &Lease) -> Result<()> {
            let holder: Option<(String, i64)> = sqlx::query_as(
                "SELECT worker_id, generation FROM task_leases WHERE task_id = $1",
            )
            .bind(stream.as_str())
            .fetch_optional(&mut *conn)
            .await?;
            match holder {
                Some((w, g)) if w == lease.worker_id && g == lease.generation => Ok(()),
                holder => Err(StoreError::LeaseLost {
                    task: stream.0.clone(),
                    worker: lease.worker_id.clone(),
                    generation: lease.generation,
                    holder,
                }),
            }
        }

        async fn load_state(conn: &mut $Conn, stream: &str) -> Result<Option<StreamState>> {
            let rows =
                sqlx::query("SELECT seq, at, payload FROM events WHERE stream_id = $1 ORDER BY seq")
                    .bind(stream)
                    .fetch_all(&mut *conn)
                    .await?;
            let mut state: Option<StreamState> = None;
            for row in rows {
                let seq: i64 = row.get(0);
                let at: i64 = row.get(1);
                let payload: &str = row.get(2);
                let event: Event =
                    serde_json::from_str(payload).map_err(|e| corrupt(stream, seq, e))?;
                match state.as_mut() {
                    None => {
                        state = Some(
                            StreamState::start(at, &event).map_err(|r| corrupt(stream, seq, r))?,
                        )
                    }
                    Some(s) => s.apply(at, &event).map_err(|r| corrupt(stream, seq, r))?,
                }
            }
            Ok(state)
        }

        /// Committed events after global position `after`, at most `limit`.
        /// What a follower reads: the next events after `after`, each as its position
        /// and, if `wanted` accepts it (or there is no `wanted`), the decoded event.
        async fn read_foreign_after<'e, E>(
            conn: E,
            after: i64,
            wanted: Option<$crate::WantedEvents>,
        ) -> Result<Vec<(i64, Option<RecordedEvent>)>>
        where
            E: sqlx::Executor<'e, Database = $DB>,
        {
            let rows = sqlx::query(
                "SELECT pos, stream_id, seq, at, type, payload, hash FROM events
                 WHERE pos > $1 ORDER BY pos LIMIT $2",
            )
            .bind(after)
            .bind($crate::shared::FOLLOW_BATCH)
            .fetch_all(conn)
            .await?;
            rows.iter()
                .map(|row| {
                    let take = wanted.as_ref().is_none_or(|w| {
                        w(row.get::<&str, _>("stream_id"), row.get::<&str, _>("type"))
                    });
                    Ok((row.get("pos"), if take { Some(recorded(row)?) } else { None }))
                })
                .collect()
        }

        async fn read_events_after<'e, E>(conn: E, after: i64, limit: i64) -> Result<Vec<RecordedEvent>>
        where
            E: sqlx::Executor<'e, Database = $DB>,
        {
            let rows = sqlx::query(
                "SELECT pos, stream_id, seq, at, payload, hash FROM events
                 WHERE pos > $1 ORDER BY pos LIMIT $2",
            )
            .bind(after)
            .bind(limit)
            .fetch_all(conn)
            .await?;
            rows.iter().map(recorded).collect()
        }

        async fn upsert_project(tx: &mut $Conn, r: &ProjectRow) -> Result<()> {
            sqlx::query(
                "INSERT INTO projects (id, name, path, check_command, auto_approve, created_at, updated_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)
                 ON CONFLICT (id) DO UPDATE SET name = excluded.name, path = excluded.path,
                   check_command = excluded.check_command, auto_approve = excluded.auto_approve,
                   updated_at = excluded.updated_at",
            )
            .bind(&r.id)
            .bind(&r.name)
            .bind(&r.path)
            .bind(&r.check_command)
            .bind(r.auto_approve)
            .bind(r.created_at)
            .bind(r.updated_at)
            .execute(&mut *tx)
            .await
            .map_err(|e| constraint(e, &format!("a project named `{}` or at {}", r.name, r.path)))?;
            Ok(())
        }

        async fn upsert_task(tx: &mut $Conn, r: &TaskRow) -> Result<()> {
            sqlx::query(
                "INSERT INTO tasks (id, project_id, request, stage, created_by, options, outcome, created_at,
                   updated_at, origin_key)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
                 ON CONFLICT (id) DO UPDATE SET stage = excluded.stage, outcome = excluded.outcome,
                   updated_at = excluded.updated_at",
            )
            .bind(&r.id)
            .bind(&r.project_id)
            .bind(&r.request)
            .bind(&r.stage)
            .bind(&r.created_by)
            .bind(&r.options)
            .bind(&r.outcome)
            .bind(r.created_at)
            .bind(r.updated_at)
            .bind(&r.origin_key)
            .execute(&mut *tx)
            .await
            .map_err(|e| match &r.origin_key {
                Some(key) => constraint(e, &format!("task `{}` or a task for key `{key}`", r.id)),
                None => constraint(e, &format!("task `{}` (project `{}`)", r.id, r.project_id)),
            })?;
            Ok(())
        }

        async fn upsert_step(tx: &mut $Conn, r: &StepRow) -> Result<()> {
            sqlx::query(
                "INSERT INTO steps (task_id, step_id, ord, name, intent, state, attempt, depends_on, input,
                   receipt, error, recorded_at, updated_at, context)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
                 ON CONFLICT (task_id, step_id) DO UPDATE SET state = excluded.state,
                   attempt = excluded.attempt, receipt = excluded.receipt, error = excluded.error,
                   updated_at = excluded.updated_at, context = excluded.context",
            )
            .bind(&r.task_id)
            .bind(&r.step_id)
            .bind(r.ord)
            .bind(&r.name)
            .bind(&r.intent)
            .bind(&r.state)
            .bind(r.attempt)
            .bind(&r.depends_on)
            .bind(&r.input)
            .bind(&r.receipt)
            .bind(&r.error)
            .bind(r.recorded_at)
            .bind(r.updated_at)
            .bind(&r.context)
            .execute(&mut *tx)
            .await
            .map_err(|e| constraint(e, &format!("step `{}`", r.step_id)))?;
            Ok(())
        }

        async fn upsert_approval(tx: &mut $Conn, r: &ApprovalRow) -> Result<()> {
            let done = sqlx::query(
                "INSERT INTO approvals (id, task_id, project_id, step_id, attempt, kind, summary, details,
                   state, decided_by, note, requested_at, decided_at, for_task)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
                 ON CONFLICT (id) DO UPDATE SET state = excluded.state, decided_by = excluded.decided_by,
                   note = excluded.note, decided_at = excluded.decided_at, for_task = excluded.for_task
                 WHERE approvals.task_id = excluded.task_id",
            )
            .bind(&r.id)
            .bind(&r.task_id)
            .bind(&r.project_id)
            .bind(&r.step_id)
            .bind(r.attempt)
            .bind(&r.kind)
            .bind(&r.summary)
            .bind(&r.details)
            .bind(&r.state)
            .bind(&r.decided_by)
            .bind(&r.note)
            .bind(r.requested_at)
            .bind(r.decided_at)
            .bind(r.for_task)
            .execute(&mut *tx)
            .await
            .map_err(|e| constraint(e, &format!("approval `{}`", r.id)))?;
            // The guarded upsert skips a row owned by another task: ids are journal-wide.
            if done.rows_affected() == 0 {
                return Err(StoreError::Constraint(format!(
                    "approval `{}` already exists in another task",
                    r.id
                )));
            }
            Ok(())
        }

        async fn upsert_session(tx: &mut $Conn, r: &SessionRow) -> Result<()> {
            let done = sqlx::query(
                "INSERT INTO sessions (id, task_id, agent, role, workspace_key, agent_session_id, verified,
                   step_id, ended, started_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
                 ON CONFLICT (id) DO UPDATE SET agent_session_id = excluded.agent_session_id,
                   verified = excluded.verified, ended = excluded.ended
                 WHERE sessions.task_id = excluded.task_id",
            )
            .bind(&r.id)
            .bind(&r.task_id)
            .bind(&r.agent)
            .bind(&r.role)
            .bind(&r.workspace_key)
            .bind(&r.agent_session_id)
            .bind(r.verified)
            .bind(&r.step_id)
            .bind(&r.ended)
            .bind(r.started_at)
            .execute(&mut *tx)
            .await
            .map_err(|e| constraint(e, &format!("session `{}`", r.id)))?;
            if done.rows_affected() == 0 {
                return Err(StoreError::Constraint(format!(
                    "session `{}` already exists in another task",
                    r.id
                )));
            }
            Ok(())
        }

        /// Write the rows an append changed, from the state after it.
        async fn write_touched(
            tx: &mut $Conn,
            state: &StreamState,
            touched: &[Touched],
        ) -> Result<()> {
            match state {
                StreamState::Project(p) => upsert_project(tx, &project_row(p)).await,
                StreamState::Task(t) => {
                    upsert_task(tx, &task_row(t)).await?;
                    for touch in touched {
                        write_task_part(tx, t, touch).await?;
                    }
                    Ok(())
                }
            }
        }

        async fn write_task_part(tx: &mut $Conn, t: &TaskState, touch: &Touched) -> Result<()> {
            match touch {
                Touched::Project | Touched::Task => {}
                Touched::Step(id) => {
                    if let Some(s) = t.steps.get(id) {
                        upsert_step(tx, &step_row(t, s)).await?;
                    }
                }
                Touched::Approval(id) => {
                    if let Some(a) = t.approvals.get(id) {
                        upsert_approval(tx, &approval_row(t, a)).await?;
                    }
                }
                Touched::Session(id) => {
                    if let Some(s) = t.sessions.get(id) {
                        upsert_session(tx, &session_row(t, s)).await?;
                    }
                }
                Touched::TaskAndApprovals => {
                    for a in t.approvals.values() {
                        upsert_approval(tx, &approval_row(t, a)).await?;
                    }
                }
            }
            Ok(())
        }

        fn recorded(row: &$Row) -> Result<RecordedEvent> {
            let stream_id: String = row.get("stream_id");
            let seq: i64 = row.get("seq");
            let payload: &str = row.get("payload");
            let event = serde_json::from_str(payload).map_err(|e| corrupt(&stream_id, seq, e))?;
            Ok(RecordedEvent {
                pos: row.get("pos"),
                seq,
                at: row.get("at"),
                hash: row.get("hash"),
                stream_id,
                event,
            })
        }

        async fn write_projections(tx: &mut $Conn, p: &Projections) -> Result<()> {
            for r in &p.projects {
                upsert_project(tx, r).await?;
            }
            for r in &p.tasks {
                upsert_task(tx, r).await?;
            }
            for r in &p.steps {
                upsert_step(tx, r).await?;
            }
            for r in &p.approvals {
                upsert_approval(tx, r).await?;
            }
            for r in &p.sessions {
                upsert_session(tx, r).await?;
            }
            Ok(())
        }

        async fn read_projections(conn: &mut $Conn) -> Result<Projections> {
            let mut p = Projections {
                projects: sqlx::query_as("SELECT * FROM projects")
                    .fetch_all(&mut *conn)
                    .await?,
                tasks: sqlx::query_as("SELECT * FROM tasks")
                    .fetch_all(&mut *conn)
                    .await?,
                steps: sqlx::query_as("SELECT * FROM steps")
                    .fetch_all(&mut *conn)
                    .await?,
                approvals: sqlx::query_as("SELECT * FROM approvals")
                    .fetch_all(&mut *conn)
                    .await?,
                sessions: sqlx::query_as("SELECT * FROM sessions")
                    .fetch_all(&mut *conn)
                    .await?,
            };
            p.sort();
            Ok(p)
        }

        /// Replays every event in global order into projections, checking links as it goes
        /// when `check` is set. Returns the projections, the event count, the first break,
        /// and the number of streams.
        async fn replay_all(
            conn: &mut $Conn,
            check: bool,
        ) -> Result<(Projections, usize, Option<Broken>, usize)> {
            use futures::TryStreamExt;
            struct Head {
                seq: i64,
                hash: String,
                state: Option<StreamState>,
            }
            let mut heads: HashMap<String, Head> = HashMap::new();
            let mut order: Vec<String> = Vec::new();
            let mut broken: Option<Broken> = None;
            let mut count = 0usize;
            {
                let mut rows = sqlx::query(
                    "SELECT stream_id, seq, at, payload, prev_hash, hash, type, pos FROM events ORDER BY pos",
                )
                .fetch(&mut *conn);
                while let Some(row) = rows.try_next().await? {
                    count += 1;
                    let stream: String = row.get(0);
                    let seq: i64 = row.get(1);
                    let at: i64 = row.get(2);
                    let payload: String = row.get(3);
                    let prev_hash: String = row.get(4);
                    let hash: String = row.get(5);
                    let kind: String = row.get(6);
                    let pos: i64 = row.get(7);
                    let head = heads.entry(stream.clone()).or_insert_with(|| {
                        order.push(stream.clone());
                        Head {
                            seq: 0,
                            hash: GENESIS_HASH.to_owned(),
                            state: None,
                        }
                    });
                    let mut fail = |column: &str, problem: String| {
                        if broken
                            .as_ref()
                            .is_none_or(|b| (b.stream.as_str(), b.seq) > (stream.as_str(), seq))
                        {
                            broken = Some(Broken {
                                stream: stream.clone(),
                                seq,
                                pos: Some(pos),
                                column: Some(column.to_owned()),
                                problem,
                            });
                        }
                    };
                    // `pos` is checked by order: the stream's seqs must follow each
                    // other in position order. Every other column is checked for what
                    // it must hold: the hash covers stream_id, seq, at and payload.
                    if check {
                        if seq != head.seq + 1 {
                            fail("seq", format!("seq {seq} follows {}", head.seq));
                        } else if prev_hash != head.hash {
                            fail("prev_hash", "prev_hash does not match the previous event's hash".into());
                        } else if event_hash(&prev_hash, &stream, seq, at, &payload) != hash {
                            fail(
                                "hash",
                                "hash does not match the event's content (changed after it was written)"
                                    .into(),
                            );
                        }
                    }
                    match serde_json::from_str::<Event>(&payload) {
                        Err(e) => {
                            if !check {
                                return Err(corrupt(&stream, seq, e));
                            }
                            fail("payload", format!("payload is not an event: {e}"));
                        }
                        Ok(event) if check && event.kind() != kind => {
                            fail(
                                "type",
                                format!(
                                    "type column says `{kind}` but the payload is a `{}` event",
                                    event.kind()
                                ),
                            );
                        }
                        Ok(event) => {
                            let applied = match head.state.as_mut() {
                                None => StreamState::start(at, &event).map(|s| head.state = Some(s)),
                                Some(s) => s.apply(at, &event),
                            };
                            if let Err(r) = applied {
                                if !check {
                                    return Err(corrupt(&stream, seq, r));
                                }
                                fail("payload", format!("the reducer refuses it on replay: {r}"));
                            }
                        }
                    }
                    head.seq = seq;
                    head.hash = hash;
                }
            }
            let mut projections = Projections::default();
            for stream in &order {
                if let Some(Head {
                    state: Some(state), ..
                }) = heads.remove(stream)
                {
                    projections.add_stream(&state);
                }
            }
            Ok((projections, count, broken, order.len()))
        }

        impl $J {
            /// Mark the follower active with its cursor at the journal's end; false if
            /// a follower already runs.
            async fn start_following(&self) -> Result<bool> {
                let cursor: Option<i64> = sqlx::query_scalar("SELECT MAX(pos) FROM events")
                    .fetch_one(&self.pool)
                    .await?;
                let mut f = $crate::shared::lock(&self.follow);
                if f.active {
                    return Ok(false);
                }
                f.active = true;
                f.cursor = cursor.unwrap_or(0);
                Ok(true)
            }

            /// Cached values for `keys`, in order (`None` where absent). The cache is not part
            /// of the journal: it holds derived data keyed by content hash.
            pub async fn blobs_get(&self, keys: &[String]) -> Result<Vec<Option<Vec<u8>>>> {
                let mut found: HashMap<String, Vec<u8>> = HashMap::with_capacity(keys.len());
                for chunk in keys.chunks(500) {
                    let mut q = sqlx::QueryBuilder::<$DB>::new(
                        "SELECT key, value FROM blobs WHERE key IN (",
                    );
                    let mut list = q.separated(", ");
                    for k in chunk {
                        list.push_bind(k.clone());
                    }
                    q.push(")");
                    for row in q.build().fetch_all(&self.pool).await? {
                        found.insert(row.get(0), row.get(1));
                    }
                }
                Ok(keys.iter().map(|k| found.remove(k)).collect())
            }

            /// Store (or replace) cached values, in one transaction.
            pub async fn blobs_put(&self, entries: &[(String, Vec<u8>)]) -> Result<()> {
                let mut tx = $crate::shared::WriteTx::begin("blobs_put", std::time::Instant::now(), begin_write(&self.pool)).await?;
                for (key, value) in entries {
                    sqlx::query(
                        "INSERT INTO blobs (key, value) VALUES ($1, $2)
                         ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    )
                    .bind(key)
                    .bind(value)
                    .execute(&mut *tx)
                    .await?;
                }
                tx.commit().await?;
                Ok(())
            }

            /// The count of `key` on `day`; 0 when absent.
            pub async fn counter_get(&self, key: &str, day: &str) -> Result<u64> {
                let count: Option<i64> =
                    sqlx::query_scalar("SELECT count FROM rate_counters WHERE key = $1 AND day = $2")
                        .bind(key)
                        .bind(day)
                        .fetch_optional(&self.pool)
                        .await?;
                Ok(count.unwrap_or(0).max(0) as u64)
            }

            /// Add `by` to the count of `key` on `day` in one statement (atomic against
            /// every other process) and return the new count.
            pub async fn counter_add(&self, key: &str, day: &str, by: u64) -> Result<u64> {
                let count: i64 = sqlx::query_scalar(
                    "INSERT INTO rate_counters (key, day, count) VALUES ($1, $2, $3)
                     ON CONFLICT (key, day) DO UPDATE SET count = rate_counters.count + excluded.count
                     RETURNING count",
                )
                .bind(key)
                .bind(day)
                .bind(i64::try_from(by).unwrap_or(i64::MAX))
                .fetch_one(&self.pool)
                .await?;
                Ok(count.max(0) as u64)
            }

            /// See [`Journal::discord_message`].
            pub async fn discord_message(
                &self,
                kind: &str,
                gaffer_id: &str,
            ) -> Result<Option<DiscordMessage>> {
                let row: Option<(String, String, String)> = sqlx::query_as(
                    "SELECT channel_id, message_id, rendered FROM discord_messages
                     WHERE kind = $1 AND gaffer_id = $2",
                )
                .bind(kind)
                .bind(gaffer_id)
                .fetch_optional(&self.pool)
                .await?;
                Ok(row.map(|(channel_id, message_id, rendered)| DiscordMessage {
                    kind: kind.to_owned(),
                    gaffer_id: gaffer_id.to_owned(),
                    channel_id,
                    message_id,
                    rendered,
                }))
            }

            /// See [`Journal::discord_message_in`].
            pub async fn discord_message_in(
                &self,
                kind: &str,
                channel_id: &str,
            ) -> Result<Option<DiscordMessage>> {
                let row: Option<(String, String, String)> = sqlx::query_as(
                    "SELECT gaffer_id, message_id, rendered FROM discord_messages
                     WHERE kind = $1 AND channel_id = $2 ORDER BY gaffer_id LIMIT 1",
                )
                .bind(kind)
                .bind(channel_id)
                .fetch_optional(&self.pool)
                .await?;
                Ok(row.map(|(gaffer_id, message_id, rendered)| DiscordMessage {
                    kind: kind.to_owned(),
                    gaffer_id,
                    channel_id: channel_id.to_owned(),
                    message_id,
                    rendered,
                }))
            }

            /// See [`Journal::discord_messages`].
            pub async fn discord_messages(&self) -> Result<Vec<DiscordMessage>> {
                let rows: Vec<(String, String, String, String, String)> = sqlx::query_as(
                    "SELECT kind, gaffer_id, channel_id, message_id, rendered FROM discord_messages
                     ORDER BY kind, gaffer_id",
                )
                .fetch_all(&self.pool)
                .await?;
                Ok(rows
                    .into_iter()
                    .map(|(kind, gaffer_id, channel_id, message_id, rendered)| DiscordMessage {
                        kind,
                        gaffer_id,
                        channel_id,
                        message_id,
                        rendered,
                    })
                    .collect())
            }

            /// See [`Journal::discord_message_put`].
            pub async fn discord_message_put(&self, m: &DiscordMessage) -> Result<()> {
                let mut tx = $crate::shared::WriteTx::begin("discord_message_put", std::time::Instant::now(), begin_write(&self.pool)).await?;
                sqlx::query(
                    "INSERT INTO discord_messages
                       (kind, gaffer_id, channel_id, message_id, rendered, updated_at)
                     VALUES ($1, $2, $3, $4, $5, $6)
                     ON CONFLICT (kind, gaffer_id) DO UPDATE SET
                       channel_id = excluded.channel_id, message_id = excluded.message_id,
                       rendered = excluded.rendered, updated_at = excluded.updated_at",
                )
                .bind(&m.kind)
                .bind(&m.gaffer_id)
                .bind(&m.channel_id)
                .bind(&m.message_id)
                .bind(&m.rendered)
                .bind($crate::journal::now_ms())
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok(())
            }

            /// See [`Journal::notify_enqueue`].
            pub async fn notify_enqueue(&self, items: &[NotifyItem], cursor: Option<i64>) -> Result<usize> {
                let mut tx = $crate::shared::WriteTx::begin("notify_enqueue", std::time::Instant::now(), begin_write(&self.pool)).await?;
                let mut added = 0;
                for i in items {
                    let insert = sqlx::query(
                        "INSERT INTO notify_outbox
                           (id, attempts, next_at, state, delivered_at, last_error, target, payload, created_at)
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
                         ON CONFLICT (id) DO NOTHING",
                    );
                    let done = bind_delivery(insert, i)
                        .bind(&i.target)
                        .bind(&i.payload)
                        .bind(i.created_at)
                        .execute(&mut *tx)
                        .await?;
                    added += done.rows_affected() as usize;
                }
                if let Some(pos) = cursor {
                    sqlx::query(
                        // Forward only: two followers (two processes) never move it back.
                        "INSERT INTO notify_cursor (id, pos) VALUES (1, $1)
                         ON CONFLICT (id) DO UPDATE SET pos = excluded.pos
                         WHERE notify_cursor.pos < excluded.pos",
                    )
                    .bind(pos)
                    .execute(&mut *tx)
                    .await?;
                }
                tx.commit().await?;
                Ok(added)
            }

            /// See [`Journal::notify_cursor`].
            pub async fn notify_cursor(&self) -> Result<i64> {
                let found: Option<i64> = sqlx::query_scalar("SELECT pos FROM notify_cursor WHERE id = 1")
                    .fetch_optional(&self.pool)
                    .await?;
                if let Some(pos) = found {
                    return Ok(pos);
                }
                let mut tx = $crate::shared::WriteTx::begin("notify_cursor", std::time::Instant::now(), begin_write(&self.pool)).await?;
                sqlx::query(
                    "INSERT INTO notify_cursor (id, pos)
                     SELECT 1, COALESCE(MAX(pos), 0) FROM events WHERE true
                     ON CONFLICT (id) DO NOTHING",
                )
                .execute(&mut *tx)
                .await?;
                let pos: i64 = sqlx::query_scalar("SELECT pos FROM notify_cursor WHERE id = 1")
                    .fetch_one(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(pos)
            }

            /// See [`Journal::notify_claim`].
            pub async fn notify_claim(&self, lease_ms: i64, limit: i64) -> Result<Vec<NotifyItem>> {
                let mut tx = $crate::shared::WriteTx::begin("notify_claim", std::time::Instant::now(), begin_write(&self.pool)).await?;
                let now = db_now(&mut tx).await?;
                let until = now.saturating_add(lease_ms);
                let sql = format!(
                    "SELECT {NOTIFY_COLUMNS} FROM notify_outbox WHERE state = 'pending' AND next_at <= $1
                     ORDER BY next_at, created_at, id LIMIT $2{NOTIFY_CLAIM_LOCK}"
                );
                let rows = sqlx::query(&sql).bind(now).bind(limit).fetch_all(&mut *tx).await?;
                let mut claimed = Vec::with_capacity(rows.len());
                for row in &rows {
                    let mut item = notify_item(row)?;
                    // Conditional: a row another claim moved meanwhile is not taken.
                    let taken = sqlx::query(
                        "UPDATE notify_outbox SET next_at = $2
                         WHERE id = $1 AND state = 'pending' AND next_at = $3",
                    )
                    .bind(&item.id)
                    .bind(until)
                    .bind(item.next_at)
                    .execute(&mut *tx)
                    .await?;
                    if taken.rows_affected() == 1 {
                        item.next_at = until;
                        claimed.push(item);
                    }
                }
                tx.commit().await?;
                Ok(claimed)
            }

            /// See [`Journal::notify_next_at`].
            pub async fn notify_next_at(&self) -> Result<Option<i64>> {
                Ok(sqlx::query_scalar("SELECT MIN(next_at) FROM notify_outbox WHERE state = 'pending'")
                    .fetch_one(&self.pool)
                    .await?)
            }

            /// See [`Journal::notify_outbox`].
            pub async fn notify_outbox(&self, limit: i64) -> Result<Vec<NotifyItem>> {
                let sql = format!(
                    "SELECT {NOTIFY_COLUMNS} FROM notify_outbox ORDER BY created_at DESC, id DESC LIMIT $1"
                );
                let rows = sqlx::query(&sql)
                .bind(limit)
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(notify_item).collect()
            }

            /// See [`Journal::notify_update`].
            pub async fn notify_update(&self, i: &NotifyItem, claimed_until: i64) -> Result<bool> {
                let mut tx = $crate::shared::WriteTx::begin("notify_update", std::time::Instant::now(), begin_write(&self.pool)).await?;
                let update = sqlx::query(
                    "UPDATE notify_outbox SET attempts = $2, next_at = $3, state = $4,
                       delivered_at = $5, last_error = $6
                     WHERE id = $1 AND state = 'pending' AND next_at = $7",
                );
                let done = bind_delivery(update, i).bind(claimed_until).execute(&mut *tx).await?;
                tx.commit().await?;
                Ok(done.rows_affected() == 1)
            }

            /// Append, fenced by `lease` when one is given (see [`Journal::append_fenced`]).
            async fn append_as(
                &self,
                stream: &StreamId,
                expected_head: i64,
                events: Vec<NewEvent>,
                lease: Option<&Lease>,
            ) -> Result<Appended> {
                let events = $crate::shared::sanitize(&self.sanitizer, stream, events)?;
                let asked = std::time::Instant::now();
                let mut cache = self.writer.lock().await;
                let mut tx = $crate::shared::WriteTx::begin("append", asked, begin_write(&self.pool)).await?;
                // A cached state at the expected head saves reading the head: if another
                // process appended meanwhile, the (stream_id, seq) key refuses our insert.
                let cached = cache
                    .remove(stream.as_str())
                    .filter(|c| c.seq == expected_head);
                let (head_seq, head_hash, mut state) = match cached {
                    Some(c) => (c.seq, c.hash, Some(c.state)),
                    None => {
                        let (seq, hash) = read_head(&mut tx, stream.as_str()).await?;
                        if seq != expected_head {
                            return Err(StoreError::Conflict {
                                stream: stream.clone(),
                                expected: expected_head,
                                actual: seq,
                            });
                        }
                        (seq, hash, load_state(&mut tx, stream.as_str()).await?)
                    }
                };
                if events.is_empty() {
                    if let Some(lease) = lease {
                        check_lease(&mut tx, stream, lease).await?;
                    }
                    return Ok(Appended {
                        head_seq,
                        head_hash,
                    });
                }
                // Everything but the inserts happens first, outside the positions lock.
                let mut touched = Vec::with_capacity(events.len());
                let mut kinds: Vec<&str> = Vec::new();
                let mut rows = Vec::with_capacity(events.len());
                let (mut seq, mut prev) = (head_seq, head_hash);
                for (index, new) in events.into_iter().enumerate() {
                    let rejected = |reason| StoreError::Rejected {
                        stream: stream.clone(),
                        index,
                        reason,
                    };
                    match state.as_mut() {
                        None => {
                            state = Some(StreamState::start(new.at, &new.event).map_err(rejected)?)
                        }
                        Some(s) => s.apply(new.at, &new.event).map_err(rejected)?,
                    }
                    seq += 1;
                    let payload = serde_json::to_string(&new.event)
                        .map_err(|e| corrupt(stream.as_str(), seq, e))?;
                    let hash = event_hash(&prev, stream.as_str(), seq, new.at, &payload);
                    let touch = new.event.touched();
                    if !touched.contains(&touch) {
                        touched.push(touch);
                    }
                    if !kinds.contains(&new.event.kind()) {
                        kinds.push(new.event.kind());
                    }
                    rows.push((seq, payload, new, std::mem::replace(&mut prev, hash.clone()), hash));
                }
                let Some(state) = state else {
                    return Err(corrupt(stream.as_str(), seq, "no state after append"));
                };
                write_touched(&mut tx, &state, &touched).await?;
                if let Some(lease) = lease {
                    check_lease(&mut tx, stream, lease).await?;
                }
                announce(&mut tx, stream, &kinds.join(",")).await?;
                lock_positions(&mut tx).await?;
                let mut written = Vec::with_capacity(rows.len());
                for (seq, payload, new, prev_hash, hash) in rows {
                    let pos: i64 = sqlx::query_scalar(
                        "INSERT INTO events (stream_id, seq, at, type, payload, prev_hash, hash,
                           worker_id, lease_generation)
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING pos",
                    )
                    .bind(stream.as_str())
                    .bind(seq)
                    .bind(new.at)
                    .bind(new.event.kind())
                    .bind(&payload)
                    .bind(&prev_hash)
                    .bind(&hash)
                    .bind(lease.map(|l| l.worker_id.as_str()))
                    .bind(lease.map(|l| l.generation))
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(|e| match &e {
                        sqlx::Error::Database(db) if db.is_unique_violation() => {
                            StoreError::Conflict {
                                stream: stream.clone(),
                                expected: expected_head,
                                actual: seq,
                            }
                        }
                        _ => StoreError::Db(e),
                    })?;
                    written.push(RecordedEvent {
                        pos,
                        stream_id: stream.0.clone(),
                        seq,
                        at: new.at,
                        event: new.event,
                        hash,
                    });
                }
                // Mark our events before they become visible, so a follower never delivers them twice.
                let following = {
                    let mut f = $crate::shared::lock(&self.follow);
                    if f.active {
                        f.own.extend(written.iter().map(|e| e.pos));
                    }
                    f.active
                };
                if let Err(e) = tx.commit().await {
                    if following {
                        let mut f = $crate::shared::lock(&self.follow);
                        for w in &written {
                            f.own.remove(&w.pos);
                        }
                    }
                    return Err(e.into());
                }
                self.announce_committed();
                if cache.len() >= CACHE_LIMIT {
                    cache.clear();
                }
                cache.insert(
                    stream.0.clone(),
                    Cached {
                        seq,
                        hash: prev.clone(),
                        state,
                    },
                );
                drop(cache);
                for e in written {
                    // Nobody listening is fine: subscribers are woken, not required.
                    let _ = self.events.send(e);
                }
                Ok(Appended {
                    head_seq: seq,
                    head_hash: prev,
                })
            }
        }

        $crate::schedules::schedule_sql!($J, $Row);

        #[async_trait::async_trait]
        impl Journal for $J {
            async fn append(
                &self,
                stream: &StreamId,
                expected_head: i64,
                events: Vec<NewEvent>,
            ) -> Result<Appended> {
                self.append_as(stream, expected_head, events, None).await
            }

            async fn append_fenced(
                &self,
                stream: &StreamId,
                expected_head: i64,
                events: Vec<NewEvent>,
                lease: &Lease,
            ) -> Result<Appended> {
                self.append_as(stream, expected_head, events, Some(lease)).await
            }

            async fn register_worker(&self, worker: &WorkerInfo) -> Result<()> {
                let mut tx = $crate::shared::WriteTx::begin("register_worker", std::time::Instant::now(), begin_write(&self.pool)).await?;
                let now = db_now(&mut tx).await?;
                sqlx::query(
                    "INSERT INTO workers (id, host, pid, lease_ms, started_at, heartbeat_at)
                     VALUES ($1, $2, $3, $4, $5, $5)",
                )
                .bind(&worker.id)
                .bind(&worker.host)
                .bind(worker.pid)
                .bind(worker.lease_ms)
                .bind(now)
                .execute(&mut *tx)
                .await
                .map_err(|e| constraint(e, &format!("worker `{}`", worker.id)))?;
                tx.commit().await?;
                Ok(())
            }

            async fn claim_task(
                &self,
                worker: &WorkerInfo,
                skip: &[String],
                only_task: Option<&str>,
            ) -> Result<Option<Lease>> {
                let mut tx = $crate::shared::WriteTx::begin("claim_task", std::time::Instant::now(), begin_write(&self.pool)).await?;
                let now = db_now(&mut tx).await?;
                let mut q = sqlx::QueryBuilder::<$DB>::new(
                    "SELECT t.id, t.project_id, COALESCE(l.generation, 0) FROM tasks t
                     LEFT JOIN task_leases l ON l.task_id = t.id
                     WHERE t.stage NOT IN ('waiting', 'done', 'failed', 'cancelled', 'blocked')
                     AND (l.task_id IS NULL OR l.expires_at < ",
                );
                q.push_bind(now).push(")");
                // Task and project ids cannot collide (`t-…`, `p-…`): one list serves both.
                for column in ["t.project_id", "t.id"] {
                    if !skip.is_empty() {
                        q.push(format!(" AND {column} NOT IN ("));
                        let mut list = q.separated(", ");
                        for id in skip {
                            list.push_bind(id.clone());
                        }
                        q.push(")");
                    }
                }
                if let Some(task) = only_task {
                    q.push(" AND t.id = ").push_bind(task.to_owned());
                }
                q.push(" ORDER BY t.created_at, t.id LIMIT 8");
                q.push(if only_task.is_some() { CLAIM_ONE_LOCK } else { CLAIM_LOCK });
                let candidates: Vec<(String, String, i64)> =
                    q.build_query_as().fetch_all(&mut *tx).await?;
                for (task_id, project_id, seen) in candidates {
                    // Taken only if the lease is still the expired one we saw: the
                    // upsert re-reads the newest row, so two claimers never both win.
                    let taken = sqlx::query(
                        "INSERT INTO task_leases (task_id, worker_id, generation, acquired_at, expires_at)
                         VALUES ($1, $2, $3, $4, $5)
                         ON CONFLICT (task_id) DO UPDATE SET worker_id = excluded.worker_id,
                           generation = excluded.generation, acquired_at = excluded.acquired_at,
                           expires_at = excluded.expires_at
                         WHERE task_leases.generation = $6 AND task_leases.expires_at < $4",
                    )
                    .bind(&task_id)
                    .bind(&worker.id)
                    .bind(seen + 1)
                    .bind(now)
                    .bind(now + worker.lease_ms)
                    .bind(seen)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                    if taken == 1 {
                        tx.commit().await?;
                        return Ok(Some(Lease {
                            task_id,
                            project_id,
                            worker_id: worker.id.clone(),
                            generation: seen + 1,
                        }));
                    }
                }
                tx.rollback().await;
                Ok(None)
            }

            async fn heartbeat(&self, worker: &WorkerInfo, held: &[Lease]) -> Result<Vec<String>> {
                let mut tx = $crate::shared::WriteTx::begin("heartbeat", std::time::Instant::now(), begin_write(&self.pool)).await?;
                let now = db_now(&mut tx).await?;
                sqlx::query("UPDATE workers SET heartbeat_at = $1 WHERE id = $2")
                    .bind(now)
                    .bind(&worker.id)
                    .execute(&mut *tx)
                    .await?;
                let mut lost = Vec::new();
                for lease in held {
                    // Renewed while nobody took it over, even if it lapsed meanwhile:
                    // the generation, not the clock, is the fence.
                    let renewed = sqlx::query(
                        "UPDATE task_leases SET expires_at = $1
                         WHERE task_id = $2 AND worker_id = $3 AND generation = $4",
                    )
                    .bind(now + worker.lease_ms)
                    .bind(&lease.task_id)
                    .bind(&lease.worker_id)
                    .bind(lease.generation)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                    if renewed == 0 {
                        lost.push(lease.task_id.clone());
                    }
                }
                tx.commit().await?;
                Ok(lost)
            }

            async fn release_lease(&self, lease: &Lease, end: LeaseEnd) -> Result<()> {
                let mut tx = $crate::shared::WriteTx::begin("release_lease", std::time::Instant::now(), begin_write(&self.pool)).await?;
                sqlx::query(
                    "UPDATE task_leases SET expires_at = 0
                     WHERE task_id = $1 AND worker_id = $2 AND generation = $3",
                )
                .bind(&lease.task_id)
                .bind(&lease.worker_id)
                .bind(lease.generation)
                .execute(&mut *tx)
                .await?;
                let (run, failed) = match end {
                    LeaseEnd::Finished => (1i64, 0i64),
                    LeaseEnd::Failed => (1, 1),
                    LeaseEnd::Handed => (0, 0),
                };
                sqlx::query(
                    "UPDATE workers SET tasks_run = tasks_run + $1, failures = failures + $2 WHERE id = $3",
                )
                .bind(run)
                .bind(failed)
                .bind(&lease.worker_id)
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok(())
            }

            async fn stop_worker(&self, worker_id: &str) -> Result<()> {
                let mut tx = $crate::shared::WriteTx::begin("stop_worker", std::time::Instant::now(), begin_write(&self.pool)).await?;
                let now = db_now(&mut tx).await?;
                sqlx::query("UPDATE workers SET stopped_at = $1 WHERE id = $2")
                    .bind(now)
                    .bind(worker_id)
                    .execute(&mut *tx)
                    .await?;
                sqlx::query("UPDATE task_leases SET expires_at = 0 WHERE worker_id = $1")
                    .bind(worker_id)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(())
            }

            async fn workers(&self) -> Result<Vec<WorkerRow>> {
                let mut conn = self.pool.acquire().await?;
                let now = db_now(&mut conn).await?;
                let mut workers: Vec<WorkerRow> = sqlx::query_as(
                    "SELECT id, host, pid, lease_ms, started_at, heartbeat_at, stopped_at, tasks_run,
                       failures, (stopped_at IS NULL AND heartbeat_at + lease_ms >= $1) AS alive
                     FROM workers ORDER BY started_at, id",
                )
                .bind(now)
                .fetch_all(&mut *conn)
                .await?;
                let leases: Vec<LeaseRow> = sqlx::query_as(
                    "SELECT * FROM task_leases WHERE expires_at >= $1 ORDER BY acquired_at, task_id",
                )
                .bind(now)
                .fetch_all(&mut *conn)
                .await?;
                for lease in leases {
                    if let Some(w) = workers.iter_mut().find(|w| w.id == lease.worker_id) {
                        w.leases.push(lease);
                    }
                }
                Ok(workers)
            }

            async fn lease(&self, task_id: &str) -> Result<Option<LeaseRow>> {
                Ok(sqlx::query_as("SELECT * FROM task_leases WHERE task_id = $1")
                    .bind(task_id)
                    .fetch_optional(&self.pool)
                    .await?)
            }

            async fn event_writers(&self, stream: &StreamId) -> Result<Vec<EventWriter>> {
                Ok(sqlx::query_as(
                    "SELECT seq, worker_id, lease_generation FROM events WHERE stream_id = $1 ORDER BY seq",
                )
                .bind(stream.as_str())
                .fetch_all(&self.pool)
                .await?)
            }

            async fn head(&self, stream: &StreamId) -> Result<i64> {
                let mut conn = self.pool.acquire().await?;
                Ok(read_head(&mut conn, stream.as_str()).await?.0)
            }

            async fn state(&self, stream: &StreamId) -> Result<Option<StreamState>> {
                let mut conn = self.pool.acquire().await?;
                load_state(&mut conn, stream.as_str()).await
            }

            async fn stream_events(
                &self,
                stream: &StreamId,
                after_seq: i64,
            ) -> Result<Vec<RecordedEvent>> {
                let rows = sqlx::query(
                    "SELECT pos, stream_id, seq, at, payload, hash FROM events
                     WHERE stream_id = $1 AND seq > $2 ORDER BY seq",
                )
                .bind(stream.as_str())
                .bind(after_seq)
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(recorded).collect()
            }

            async fn events_after(&self, after_pos: i64, limit: i64) -> Result<Vec<RecordedEvent>> {
                read_events_after(&self.pool, after_pos, limit).await
            }

            async fn stream_events_after(
                &self,
                stream: &StreamId,
                after_pos: i64,
                limit: i64,
            ) -> Result<Vec<RecordedEvent>> {
                // A stream's positions grow with its seqs: walking the (stream_id, seq)
                // index needs no sort.
                let rows = sqlx::query(
                    "SELECT pos, stream_id, seq, at, payload, hash FROM events
                     WHERE stream_id = $1 AND pos > $2 ORDER BY seq LIMIT $3",
                )
                .bind(stream.as_str())
                .bind(after_pos)
                .bind(limit)
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(recorded).collect()
            }

            fn subscribe(&self) -> tokio::sync::broadcast::Receiver<RecordedEvent> {
                self.events.subscribe()
            }

            async fn task(&self, id: &str) -> Result<Option<TaskView>> {
                let mut conn = self.pool.acquire().await?;
                let Some(task) = sqlx::query_as::<_, TaskRow>("SELECT * FROM tasks WHERE id = $1")
                    .bind(id)
                    .fetch_optional(&mut *conn)
                    .await?
                else {
                    return Ok(None);
                };
                let steps = sqlx::query_as("SELECT * FROM steps WHERE task_id = $1 ORDER BY ord")
                    .bind(id)
                    .fetch_all(&mut *conn)
                    .await?;
                let approvals = sqlx::query_as(
                    "SELECT * FROM approvals WHERE task_id = $1 ORDER BY requested_at, id",
                )
                .bind(id)
                .fetch_all(&mut *conn)
                .await?;
                let sessions = sqlx::query_as(
                    "SELECT * FROM sessions WHERE task_id = $1 ORDER BY started_at, id",
                )
                .bind(id)
                .fetch_all(&mut *conn)
                .await?;
                let (head_seq, _) = read_head(&mut conn, id).await?;
                // The lease with its worker's host and pid, in one read.
                type Row = (String, String, i64, i64, i64, Option<String>, Option<i64>);
                let row: Option<Row> = sqlx::query_as(
                    "SELECT l.task_id, l.worker_id, l.generation, l.acquired_at, l.expires_at, w.host, w.pid
                     FROM task_leases l LEFT JOIN workers w ON w.id = l.worker_id
                     WHERE l.task_id = $1",
                )
                .bind(id)
                .fetch_optional(&mut *conn)
                .await?;
                let lease = match row {
                    Some((task_id, worker_id, generation, acquired_at, expires_at, host, pid)) => {
                        let lease = LeaseRow { task_id, worker_id, generation, acquired_at, expires_at };
                        Some(TaskLease::at(lease, host, pid, db_now(&mut conn).await?))
                    }
                    None => None,
                };
                Ok(Some(TaskView {
                    task,
                    steps,
                    approvals,
                    sessions,
                    head_seq,
                    lease,
                }))
            }

            async fn task_by_key(&self, key: &str) -> Result<Option<TaskRow>> {
                Ok(sqlx::query_as("SELECT * FROM tasks WHERE origin_key = $1")
                    .bind(key)
                    .fetch_optional(&self.pool)
                    .await?)
            }

            async fn newest_task_with_key_prefix(&self, prefix: &str) -> Result<Option<TaskRow>> {
                // Keys are printable ASCII, and the keys of one prefix differ only
                // after it: any collation orders them alike.
                Ok(sqlx::query_as(
                    "SELECT * FROM tasks WHERE substr(origin_key, 1, length($1)) = $1
                     ORDER BY origin_key DESC LIMIT 1",
                )
                .bind(prefix)
                .fetch_optional(&self.pool)
                .await?)
            }

            async fn tasks(&self, filter: &TaskFilter) -> Result<Vec<TaskRow>> {
                let mut q = sqlx::QueryBuilder::<$DB>::new("SELECT * FROM tasks WHERE 1 = 1");
                if let Some(p) = &filter.project_id {
                    q.push(" AND project_id = ").push_bind(p.clone());
                }
                if let Some(s) = &filter.stage {
                    q.push(" AND stage = ").push_bind(s.clone());
                }
                q.push(" ORDER BY created_at DESC, id DESC LIMIT ")
                    .push_bind(filter.limit.unwrap_or(100))
                    .push(" OFFSET ")
                    .push_bind(filter.offset.unwrap_or(0));
                Ok(q.build_query_as().fetch_all(&self.pool).await?)
            }

            async fn project_receipts_since(&self, project_id: &str, since: gaffer_core::Timestamp) -> Result<Vec<String>> {
                // A step changed since then changed its task too: the tasks' index
                // by project narrows the steps to read.
                Ok(sqlx::query_scalar(
                    "SELECT s.receipt FROM tasks t JOIN steps s ON s.task_id = t.id
                     WHERE t.project_id = $1 AND t.updated_at >= $2
                       AND s.updated_at >= $2 AND s.receipt IS NOT NULL
                     ORDER BY t.id, s.ord",
                )
                .bind(project_id)
                .bind(since)
                .fetch_all(&self.pool)
                .await?)
            }

            async fn followed_tasks(&self, pull_request_step: &str) -> Result<Vec<String>> {
                let ended = gaffer_core::Event::FollowingEnded {
                    reason: String::new(),
                };
                Ok(sqlx::query_scalar(
                    "SELECT t.id FROM tasks t
                     WHERE t.stage = $1
                       AND EXISTS (SELECT 1 FROM steps s WHERE s.task_id = t.id
                                   AND s.step_id = $2 AND s.receipt IS NOT NULL)
                       AND (SELECT e.type FROM events e WHERE e.stream_id = t.id
                            ORDER BY e.seq DESC LIMIT 1) <> $3
                     ORDER BY t.created_at, t.id",
                )
                .bind(gaffer_core::Stage::Done.as_str())
                .bind(pull_request_step)
                .bind(ended.kind())
                .fetch_all(&self.pool)
                .await?)
            }

            async fn approvals(&self, filter: &ApprovalFilter) -> Result<Vec<ApprovalRow>> {
                let mut q = sqlx::QueryBuilder::<$DB>::new("SELECT * FROM approvals WHERE 1 = 1");
                if let Some(s) = &filter.state {
                    q.push(" AND state = ").push_bind(s.clone());
                }
                if let Some(id) = &filter.id {
                    q.push(" AND id = ").push_bind(id.clone());
                }
                q.push(" ORDER BY requested_at DESC, id DESC");
                Ok(q.build_query_as().fetch_all(&self.pool).await?)
            }

            async fn projects(&self) -> Result<Vec<ProjectRow>> {
                Ok(sqlx::query_as("SELECT * FROM projects ORDER BY name")
                    .fetch_all(&self.pool)
                    .await?)
            }

            async fn projections(&self) -> Result<Projections> {
                let mut conn = self.pool.acquire().await?;
                read_projections(&mut conn).await
            }

            async fn rebuild(&self) -> Result<usize> {
                let asked = std::time::Instant::now();
                let mut cache = self.writer.lock().await;
                let mut tx = $crate::shared::WriteTx::begin("rebuild", asked, begin_write(&self.pool)).await?;
                lock_for_rebuild(&mut tx).await?;
                let (projections, count, _, _) = replay_all(&mut tx, false).await?;
                for table in ["sessions", "approvals", "steps", "tasks", "projects"] {
                    sqlx::query(&format!("DELETE FROM {table}"))
                        .execute(&mut *tx)
                        .await?;
                }
                write_projections(&mut tx, &projections).await?;
                tx.commit().await?;
                cache.clear();
                Ok(count)
            }

            async fn verify(&self) -> Result<VerifyReport> {
                // One read transaction: the events and the projections come from one snapshot.
                let mut tx = begin_read(&self.pool).await?;
                allow_long_transaction(&mut tx).await?;
                // The database's own check first: on a damaged file, what replay
                // reads cannot be trusted.
                let damage = storage_problems(&mut tx).await?;
                if !damage.is_empty() {
                    tx.rollback().await.ok();
                    return Ok(VerifyReport {
                        streams: 0,
                        events: 0,
                        broken: Some(Broken {
                            stream: "storage".into(),
                            seq: 0,
                            pos: None,
                            column: None,
                            problem: damage.join("; "),
                        }),
                    });
                }
                let (mut rebuilt, events, broken, streams) = replay_all(&mut tx, true).await?;
                let broken = match broken {
                    Some(b) => Some(b),
                    None => {
                        rebuilt.sort();
                        let live = read_projections(&mut tx).await?;
                        live.first_difference(&rebuilt).map(|problem| Broken {
                            stream: "projections".into(),
                            seq: 0,
                            pos: None,
                            column: None,
                            problem,
                        })
                    }
                };
                tx.rollback().await.ok();
                Ok(VerifyReport {
                    streams,
                    events,
                    broken,
                })
            }

            async fn blobs_get(&self, keys: &[String]) -> Result<Vec<Option<Vec<u8>>>> {
                <$J>::blobs_get(self, keys).await
            }

            async fn blobs_put(&self, entries: &[(String, Vec<u8>)]) -> Result<()> {
                <$J>::blobs_put(self, entries).await
            }

            async fn counter_get(&self, key: &str, day: &str) -> Result<u64> {
                <$J>::counter_get(self, key, day).await
            }

            async fn counter_add(&self, key: &str, day: &str, by: u64) -> Result<u64> {
                <$J>::counter_add(self, key, day, by).await
            }

            async fn discord_message(
                &self,
                kind: &str,
                gaffer_id: &str,
            ) -> Result<Option<DiscordMessage>> {
                <$J>::discord_message(self, kind, gaffer_id).await
            }

            async fn discord_message_in(
                &self,
                kind: &str,
                channel_id: &str,
            ) -> Result<Option<DiscordMessage>> {
                <$J>::discord_message_in(self, kind, channel_id).await
            }

            async fn discord_message_put(&self, m: &DiscordMessage) -> Result<()> {
                <$J>::discord_message_put(self, m).await
            }

            async fn discord_messages(&self) -> Result<Vec<DiscordMessage>> {
                <$J>::discord_messages(self).await
            }

            async fn schedule_add(&self, s: &$crate::StoredSchedule) -> Result<$crate::StoredSchedule> {
                <$J>::schedule_add(self, s).await
            }

            async fn schedule_remove(
                &self,
                name: &str,
                by: &gaffer_core::Actor,
                at: i64,
            ) -> Result<Option<$crate::StoredSchedule>> {
                <$J>::schedule_remove(self, name, by, at).await
            }

            async fn schedules(&self, with_removed: bool) -> Result<Vec<$crate::StoredSchedule>> {
                <$J>::schedules(self, with_removed).await
            }

            async fn notify_enqueue(&self, items: &[NotifyItem], cursor: Option<i64>) -> Result<usize> {
                <$J>::notify_enqueue(self, items, cursor).await
            }

            async fn notify_cursor(&self) -> Result<i64> {
                <$J>::notify_cursor(self).await
            }

            async fn notify_claim(&self, lease_ms: i64, limit: i64) -> Result<Vec<NotifyItem>> {
                <$J>::notify_claim(self, lease_ms, limit).await
            }

            async fn notify_next_at(&self) -> Result<Option<i64>> {
                <$J>::notify_next_at(self).await
            }

            async fn notify_update(&self, item: &NotifyItem, claimed_until: i64) -> Result<bool> {
                <$J>::notify_update(self, item, claimed_until).await
            }

            async fn notify_outbox(&self, limit: i64) -> Result<Vec<NotifyItem>> {
                <$J>::notify_outbox(self, limit).await
            }

            async fn follow_other_processes(&self) -> Result<()> {
                <$J>::follow_other_processes(self).await
            }

            fn follow_only(&self, wanted: $crate::WantedEvents) {
                $crate::shared::lock(&self.follow).wanted = Some(wanted);
            }

            fn sanitize_appends(&self, sanitizer: $crate::Sanitizer) {
                *self.sanitizer.write().unwrap_or_else(|e| e.into_inner()) = Some(sanitizer);
            }

            fn location(&self) -> String {
                <$J>::location(self)
            }

            fn schema_version(&self) -> i64 {
                <$J>::supported_schema_version()
            }

            async fn shutdown(&self) {
                self.close_pool().await
            }
        }
    };
}

pub(crate) use journal_backend;
