//! The journal trait: what the engine, server and CLI may ask of a store.
//! Backends (SQLite now, PostgreSQL later) implement it with the same meaning.

use crate::lease::{EventWriter, Lease, LeaseEnd, LeaseRow, TaskLease, WorkerInfo, WorkerRow};
use crate::projection::{ApprovalRow, ProjectRow, Projections, SessionRow, StepRow, TaskRow};
use crate::Result;
use gaffer_core::{Event, StreamId, StreamState, Timestamp};
use serde::Serialize;
use tokio::sync::broadcast;

/// An event to append, with the time the edge observed it.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    /// When (ms since the epoch).
    pub at: Timestamp,
    /// What.
    pub event: Event,
}

impl NewEvent {
    /// An event observed now.
    pub fn now(event: Event) -> Self {
        Self {
            at: now_ms(),
            event,
        }
    }
}

/// Milliseconds since the Unix epoch, from the system clock.
pub fn now_ms() -> Timestamp {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default()
}

/// An event as stored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecordedEvent {
    /// Global position: strictly increasing across the journal.
    pub pos: i64,
    /// The stream.
    pub stream_id: String,
    /// Position in the stream, from 1.
    pub seq: i64,
    /// When (ms).
    pub at: Timestamp,
    /// The event.
    pub event: Event,
    /// Hash of this event (chained).
    pub hash: String,
}

/// The head of a stream after an append.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Appended {
    /// The new head seq.
    pub head_seq: i64,
    /// The new head hash.
    pub head_hash: String,
}

/// Filters for listing tasks.
#[derive(Debug, Clone, Default)]
pub struct TaskFilter {
    /// Only this project.
    pub project_id: Option<String>,
    /// Only this stage.
    pub stage: Option<String>,
    /// At most this many (newest first).
    pub limit: Option<i64>,
    /// Skip this many.
    pub offset: Option<i64>,
}

/// Filters for listing approvals.
#[derive(Debug, Clone, Default)]
pub struct ApprovalFilter {
    /// Only in this state (`pending`, `approved`, …).
    pub state: Option<String>,
    /// Only this approval.
    pub id: Option<String>,
}

/// A task with everything that hangs off it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskView {
    /// The task row.
    pub task: TaskRow,
    /// Its steps, in recording order.
    pub steps: Vec<StepRow>,
    /// Its approvals, oldest first.
    pub approvals: Vec<ApprovalRow>,
    /// Its sessions, oldest first.
    pub sessions: Vec<SessionRow>,
    /// Head seq of its stream.
    pub head_seq: i64,
    /// Its newest lease (which worker runs it, or ran it last), if a worker ever took it.
    pub lease: Option<TaskLease>,
}

/// The first broken link found by [`Journal::verify`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Broken {
    /// The stream (task or project id); `projections` when the derived tables differ
    /// from a rebuild; `storage` when the database's own check failed.
    pub stream: String,
    /// The seq of the first bad event (0 for projections and storage).
    pub seq: i64,
    /// The bad event's global position, when an event is bad.
    pub pos: Option<i64>,
    /// The stored column that is wrong (`seq`, `prev_hash`, `hash`, `type`, `payload`),
    /// or the projection table, when known.
    pub column: Option<String>,
    /// What is wrong.
    pub problem: String,
}

/// What [`Journal::verify`] found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VerifyReport {
    /// Streams checked.
    pub streams: usize,
    /// Events checked.
    pub events: usize,
    /// The first problem, if any.
    pub broken: Option<Broken>,
}

/// What the Discord adapter posted for one gaffer record: `kind` says which
/// (`thread`, `status`, `approval`, …), `gaffer_id` which record (a task or
/// approval id). Kept so a restarted adapter edits the same message instead of
/// posting another.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DiscordMessage {
    /// What the message is for.
    pub kind: String,
    /// The task or approval id.
    pub gaffer_id: String,
    /// The channel (or thread) it is in.
    pub channel_id: String,
    /// The message (for a thread: the thread's own id).
    pub message_id: String,
    /// A digest of what it shows now; empty when unknown.
    pub rendered: String,
}

/// One notification in the outbox (see `migrations/*/0008_notify_outbox.sql`): what
/// to tell one `[[notify]]` target, and how delivering it went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NotifyItem {
    /// The idempotency id, unique: `<target>/<what>/<gaffer id>`. Enqueueing it again
    /// changes nothing; receivers see it in the payload.
    pub id: String,
    /// The target's name.
    pub target: String,
    /// What to tell, as JSON.
    pub payload: String,
    /// Enqueued at (ms).
    pub created_at: i64,
    /// Delivery attempts so far.
    pub attempts: i64,
    /// Not tried again before (ms).
    pub next_at: i64,
    /// `pending`, `delivered` or `failed` (gave up).
    pub state: String,
    /// When a receiver took it.
    pub delivered_at: Option<i64>,
    /// Why the last attempt failed (redacted by the caller); empty when none did.
    pub last_error: String,
}

/// Rewrites an event before it is appended (redaction of secrets, caps on sizes), or
/// says why it cannot be stored: see [`Journal::sanitize_appends`].
pub type Sanitizer =
    std::sync::Arc<dyn Fn(Event) -> std::result::Result<Event, String> + Send + Sync>;

/// Which other processes' events a follower delivers: `(stream id, event kind)`.
pub type WantedEvents = std::sync::Arc<dyn Fn(&str, &str) -> bool + Send + Sync>;

/// The journal. Appends are the only writes; everything else is derived.
#[async_trait::async_trait]
pub trait Journal: Send + Sync {
    /// Append `events` to `stream` if its head is still `expected_head` (0 for a new
    /// stream). The reducer checks every event; projections change in the same
    /// transaction. A stale head is [`crate::StoreError::Conflict`], never a fork.
    async fn append(
        &self,
        stream: &StreamId,
        expected_head: i64,
        events: Vec<NewEvent>,
    ) -> Result<Appended>;

    /// [`Journal::append`] for a worker holding `lease` on the task `stream`: in the
    /// same transaction, refused with [`crate::StoreError::LeaseLost`] unless the
    /// task's lease still has that worker and generation. The events are recorded
    /// as written under that lease ([`Journal::event_writers`]).
    async fn append_fenced(
        &self,
        stream: &StreamId,
        expected_head: i64,
        events: Vec<NewEvent>,
        lease: &Lease,
    ) -> Result<Appended>;

    /// The head seq of a stream (0 if it does not exist).
    async fn head(&self, stream: &StreamId) -> Result<i64>;

    /// A stream's state, replayed by the reducer (None if it does not exist).
    async fn state(&self, stream: &StreamId) -> Result<Option<StreamState>>;

    /// A stream's events after `after_seq`.
    async fn stream_events(&self, stream: &StreamId, after_seq: i64) -> Result<Vec<RecordedEvent>>;

    /// Events across the journal after global position `after_pos`, at most `limit`.
    async fn events_after(&self, after_pos: i64, limit: i64) -> Result<Vec<RecordedEvent>>;

    /// A stream's events after global position `after_pos`, at most `limit`: a page
    /// of one stream for readers whose memory must not grow with its length.
    async fn stream_events_after(
        &self,
        stream: &StreamId,
        after_pos: i64,
        limit: i64,
    ) -> Result<Vec<RecordedEvent>>;

    /// Wakes on every committed event of this process's appends.
    fn subscribe(&self) -> broadcast::Receiver<RecordedEvent>;

    /// One task with its steps, approvals and sessions.
    async fn task(&self, id: &str) -> Result<Option<TaskView>>;

    /// The task created for origin key `key` (`TaskOptions::key`), if any. An
    /// append of a second task with a key already taken fails with
    /// [`crate::StoreError::Constraint`] and writes nothing.
    async fn task_by_key(&self, key: &str) -> Result<Option<TaskRow>>;

    /// Of the tasks whose origin key starts with `prefix`, the one with the greatest
    /// key (a schedule's newest slot: `schedule:<name>:<RFC 3339 time>`), if any.
    async fn newest_task_with_key_prefix(&self, prefix: &str) -> Result<Option<TaskRow>>;

    /// Tasks, newest first.
    async fn tasks(&self, filter: &TaskFilter) -> Result<Vec<TaskRow>>;

    /// The receipts, as stored, of every step of project `project_id`'s tasks that
    /// changed at or after `since` (ms): what the project's daily spending cap adds
    /// up, however many tasks the project has (no page limit, unlike
    /// [`Journal::tasks`]).
    async fn project_receipts_since(
        &self,
        project_id: &str,
        since: Timestamp,
    ) -> Result<Vec<String>>;

    /// The ids of the tasks whose pull request is still followed, oldest first: done,
    /// with a receipt for step `pull_request_step` (the engine's step that opened the
    /// pull request), and following not ended. The follower reads only these, however
    /// many done tasks the journal holds. A task whose following ended has
    /// `following_ended` as its last event (the reducer refuses every event after
    /// it), so one index seek per done task decides it, without reading its events.
    async fn followed_tasks(&self, pull_request_step: &str) -> Result<Vec<String>>;

    /// Approvals of every task, newest first, narrowed by `filter`.
    async fn approvals(&self, filter: &ApprovalFilter) -> Result<Vec<ApprovalRow>>;

    /// Every project, by name.
    async fn projects(&self) -> Result<Vec<ProjectRow>>;

    /// Every projection row as stored.
    async fn projections(&self) -> Result<Projections>;

    /// Recompute every projection from events alone, in one transaction.
    /// Returns the number of events replayed.
    async fn rebuild(&self) -> Result<usize>;

    /// Check every hash chain, that every event replays, and that the stored
    /// projections equal a rebuild. Changes nothing.
    async fn verify(&self) -> Result<VerifyReport>;

    /// Cached values for `keys`, in order (`None` where absent). The cache (the
    /// project index's per-file facts) is not part of the journal.
    async fn blobs_get(&self, keys: &[String]) -> Result<Vec<Option<Vec<u8>>>>;

    /// Store (or replace) cached values, in one transaction.
    async fn blobs_put(&self, entries: &[(String, Vec<u8>)]) -> Result<()>;

    /// A persisted counter (requests per day of a provider and model): its value
    /// for `key` on `day`, 0 when absent. Not part of the journal.
    async fn counter_get(&self, key: &str, day: &str) -> Result<u64>;

    /// Add `by` to a persisted counter atomically, across processes; the new value.
    async fn counter_add(&self, key: &str, day: &str, by: u64) -> Result<u64>;

    /// The Discord message recorded for `(kind, gaffer_id)`, if any.
    async fn discord_message(&self, kind: &str, gaffer_id: &str) -> Result<Option<DiscordMessage>>;

    /// The Discord message of `kind` recorded in channel `channel_id` (for a
    /// `thread`: the task whose thread that channel is), if any.
    async fn discord_message_in(
        &self,
        kind: &str,
        channel_id: &str,
    ) -> Result<Option<DiscordMessage>>;

    /// Record a Discord message for `(m.kind, m.gaffer_id)`, replacing what was
    /// recorded for that key.
    async fn discord_message_put(&self, m: &DiscordMessage) -> Result<()>;

    /// Every recorded Discord message, by kind and gaffer id (what `gaffer db
    /// copy` carries over with the events).
    async fn discord_messages(&self) -> Result<Vec<DiscordMessage>>;

    /// Add `items` to the notification outbox (an id already there is left as it
    /// is) and, in the same transaction, move the notifier's journal cursor to
    /// `cursor` when given. Returns how many were new.
    async fn notify_enqueue(&self, items: &[NotifyItem], cursor: Option<i64>) -> Result<usize>;

    /// The notifier's journal cursor; on first use, the journal's last position
    /// (what happened before notifications were on is not sent).
    async fn notify_cursor(&self) -> Result<i64>;

    /// Claim up to `limit` pending notifications due now (oldest first) for
    /// `lease_ms`: each one's `next_at` becomes the end of the lease, so no other
    /// deliverer (of this process or another) takes it before then, and anyone
    /// may once it has passed (its claimer died). PostgreSQL skips rows another
    /// claim holds this instant; SQLite claims in its one writer. The items
    /// returned carry the new `next_at`: the claim [`Journal::notify_update`] needs.
    async fn notify_claim(&self, lease_ms: i64, limit: i64) -> Result<Vec<NotifyItem>>;

    /// Record how delivering `item` went: its attempts, next time, state,
    /// delivery time and last error (the id and payload do not change), if the
    /// claim that ends at `claimed_until` still holds it. `false` when it does not
    /// (the lease passed and another deliverer claimed it): nothing is changed.
    async fn notify_update(&self, item: &NotifyItem, claimed_until: i64) -> Result<bool>;

    /// When the next pending notification comes due (ms): a retry's time or the
    /// end of a claim; `None` when nothing is pending.
    async fn notify_next_at(&self) -> Result<Option<i64>>;

    /// The outbox, newest first, at most `limit`.
    async fn notify_outbox(&self, limit: i64) -> Result<Vec<NotifyItem>>;

    /// Store a schedule added at run time (its `id` is assigned; the rest is
    /// stored as given). A name a schedule not removed has is
    /// [`crate::StoreError::Constraint`] and nothing is written.
    async fn schedule_add(&self, s: &crate::StoredSchedule) -> Result<crate::StoredSchedule>;

    /// Mark the schedule `name` (not removed yet) removed by `by` at `at` (ms): it
    /// stops running, its row stays. `None` when no such schedule runs.
    async fn schedule_remove(
        &self,
        name: &str,
        by: &gaffer_core::Actor,
        at: i64,
    ) -> Result<Option<crate::StoredSchedule>>;

    /// The schedules added at run time, oldest first: those running, or with
    /// `with_removed` every one ever added.
    async fn schedules(&self, with_removed: bool) -> Result<Vec<crate::StoredSchedule>>;

    /// Record a worker process as started (and heartbeating now).
    async fn register_worker(&self, worker: &WorkerInfo) -> Result<()>;

    /// Take the oldest unfinished task (or only `only_task`) that has no lease or
    /// whose lease expired, skipping the tasks and the projects' tasks named in
    /// `skip` (task and project ids) and, on PostgreSQL, tasks whose row another
    /// transaction holds right now (a claim or an append in flight). A claim of
    /// `only_task` waits for such a transaction instead: `None` then means the task
    /// ended or another worker's lease on it is live. The lease lasts
    /// `worker.lease_ms` unless renewed. `None`: nothing to take.
    async fn claim_task(
        &self,
        worker: &WorkerInfo,
        skip: &[String],
        only_task: Option<&str>,
    ) -> Result<Option<Lease>>;

    /// Renew `held` for another `worker.lease_ms` and record the heartbeat. Returns
    /// the tasks of `held` whose lease was lost (another worker took it over): the
    /// worker must stop them at once.
    async fn heartbeat(&self, worker: &WorkerInfo, held: &[Lease]) -> Result<Vec<String>>;

    /// Give a lease up (the task ended, or the worker stops) and count the run in
    /// the worker's metrics. A lease already taken over stays with its new holder;
    /// only the counts change.
    async fn release_lease(&self, lease: &Lease, end: LeaseEnd) -> Result<()>;

    /// A worker shut down cleanly: mark it stopped and release every lease it holds.
    async fn stop_worker(&self, worker_id: &str) -> Result<()>;

    /// Every registered worker, oldest first, with its unexpired leases.
    async fn workers(&self) -> Result<Vec<WorkerRow>>;

    /// A task's newest lease.
    async fn lease(&self, task_id: &str) -> Result<Option<LeaseRow>>;

    /// Under which lease each event of `stream` was appended, in seq order.
    async fn event_writers(&self, stream: &StreamId) -> Result<Vec<EventWriter>>;

    /// Deliver events that other processes (or other machines) append to this
    /// process's subscribers too, once each. Needs a running tokio runtime.
    async fn follow_other_processes(&self) -> Result<()>;

    /// From now on deliver only the other processes' events `wanted` accepts (by
    /// stream id and event kind); the rest are passed over without being decoded
    /// and, on PostgreSQL, without being read when nothing in a commit is wanted.
    /// For a process that only runs tasks: every worker follows every append.
    fn follow_only(&self, wanted: WantedEvents);

    /// From now on pass every event this process appends through `sanitizer` before
    /// the reducer sees it and anything is written, whoever appends (app, engine,
    /// adapters): the one door every stored event goes through. An event it refuses
    /// fails its append with [`crate::StoreError::Constraint`] and nothing is
    /// written. Reads, followers and `gaffer db copy` are unaffected.
    fn sanitize_appends(&self, sanitizer: Sanitizer);

    /// Where the journal lives, for messages: a file path, or a URL with its
    /// password masked.
    fn location(&self) -> String;

    /// The newest schema version this build knows (the database is at it once open).
    fn schema_version(&self) -> i64;

    /// Close every connection (SQLite also checkpoints its WAL). The journal must
    /// not be used afterwards.
    async fn shutdown(&self);
}
