//! Worker leases: many workers (on many machines) share one journal, and a task is
//! run by at most one of them at a time.
//!
//! A worker claims a task it finds unleased or whose lease expired
//! ([`crate::Journal::claim_task`]; `FOR UPDATE SKIP LOCKED` on PostgreSQL, one
//! `BEGIN IMMEDIATE` writer on SQLite) and gets the next **generation** of that
//! task's lease. It renews its leases by heartbeat ([`crate::Journal::heartbeat`]).
//! Every append it makes for the task carries the lease
//! ([`crate::Journal::append_fenced`], or through [`FencedJournal`]): in the same
//! transaction as the append, the store checks that the task's lease still has
//! that worker and generation, and refuses with [`crate::StoreError::LeaseLost`]
//! otherwise. A worker paused past its lease, whose task another worker took
//! over, thus writes nothing more for it. Times are the database's clock, so
//! machines with skewed clocks agree on expiry.

use crate::journal::{
    Appended, ApprovalFilter, Journal, NewEvent, RecordedEvent, TaskFilter, TaskView, VerifyReport,
};
use crate::projection::{ApprovalRow, ProjectRow, Projections, TaskRow};
use crate::Result;
use gaffer_core::{StreamId, StreamState, Timestamp};
use serde::Serialize;
use std::sync::Arc;
use tokio::sync::broadcast;

/// A lease a worker holds on a task: the fence its appends carry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Lease {
    /// The task.
    pub task_id: String,
    /// The task's project (for per-project limits).
    pub project_id: String,
    /// The holder.
    pub worker_id: String,
    /// 1 for the task's first lease, +1 for each takeover.
    pub generation: i64,
}

/// A worker process as it registers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerInfo {
    /// Unique among every worker that ever ran on this journal (`host/pid/random`).
    pub id: String,
    /// Its host name.
    pub host: String,
    /// Its process id.
    pub pid: i64,
    /// How long its leases last without a heartbeat (ms).
    pub lease_ms: i64,
}

/// One row of `task_leases`: the newest lease of a task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct LeaseRow {
    /// The task.
    pub task_id: String,
    /// Who holds (or last held) it.
    pub worker_id: String,
    /// Its generation.
    pub generation: i64,
    /// When it was acquired (ms, database clock).
    pub acquired_at: i64,
    /// When it expires unless renewed (ms, database clock; 0 once released).
    pub expires_at: i64,
}

/// Whether a task's newest lease is held, as a task's page shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LeaseState {
    /// The worker holds it and renews it by heartbeat: the task runs there.
    Held,
    /// The worker let it go (the task ended, or the worker shut down cleanly).
    Released,
    /// The worker stopped renewing it (crashed, paused, cut off): the next worker
    /// to claim the task takes it over.
    Expired,
}

impl LeaseState {
    /// `held`, `released` or `expired`, as the API and `task show --json` say it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Held => "held",
            Self::Released => "released",
            Self::Expired => "expired",
        }
    }
}

/// A task's newest lease with its worker, for a task's page (`Journal::task`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TaskLease {
    /// The lease row.
    #[serde(flatten)]
    pub lease: LeaseRow,
    /// The worker's host, if the worker is registered.
    pub host: Option<String>,
    /// The worker's process id, if the worker is registered.
    pub pid: Option<i64>,
    /// Held, released or expired, by the database's clock when read.
    pub state: LeaseState,
}

impl TaskLease {
    /// `lease` seen at `now` (ms, database clock) with its worker's host and pid.
    pub fn at(lease: LeaseRow, host: Option<String>, pid: Option<i64>, now: i64) -> Self {
        let state = if lease.expires_at == 0 {
            LeaseState::Released
        } else if lease.expires_at >= now {
            LeaseState::Held
        } else {
            LeaseState::Expired
        };
        Self {
            lease,
            host,
            pid,
            state,
        }
    }
}

/// A registered worker, as `gaffer workers` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct WorkerRow {
    /// Its id.
    pub id: String,
    /// Its host.
    pub host: String,
    /// Its process id.
    pub pid: i64,
    /// Its lease length (ms).
    pub lease_ms: i64,
    /// Registered at (ms, database clock).
    pub started_at: i64,
    /// Last heartbeat (ms, database clock).
    pub heartbeat_at: i64,
    /// When it shut down cleanly, if it did.
    pub stopped_at: Option<i64>,
    /// Tasks it ran to an end (or lost).
    pub tasks_run: i64,
    /// Of those, how many ended failed or blocked, or stopped on an error.
    pub failures: i64,
    /// Whether it is live: not stopped, and its last heartbeat is within its lease length.
    pub alive: bool,
    /// Its unexpired leases.
    #[sqlx(skip)]
    pub leases: Vec<LeaseRow>,
}

/// Under which lease an event was appended (`None` for appends without one: a
/// person's decision, the CLI, a single-process run).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct EventWriter {
    /// The event's seq in its stream.
    pub seq: i64,
    /// The worker.
    pub worker_id: Option<String>,
    /// Its lease generation.
    pub lease_generation: Option<i64>,
}

/// How a leased task ended for the worker, for its counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseEnd {
    /// Ran to done or cancelled.
    Finished,
    /// Ended failed or blocked, or the run stopped on an error.
    Failed,
    /// The worker stops (shutdown); the task is left for another worker.
    Handed,
}

/// A journal whose appends to the leased task carry the lease: hand it to
/// everything that works on that task (the engine and the app service), and every
/// append they make is fenced. Appends to other streams and every read pass through.
pub struct FencedJournal {
    inner: Arc<dyn Journal>,
    lease: Lease,
}

impl FencedJournal {
    /// Fence appends to `lease.task_id` with `lease`.
    pub fn new(inner: Arc<dyn Journal>, lease: Lease) -> Self {
        Self { inner, lease }
    }

    /// The lease its appends carry.
    pub fn lease(&self) -> &Lease {
        &self.lease
    }
}

#[async_trait::async_trait]
impl Journal for FencedJournal {
    async fn append(
        &self,
        stream: &StreamId,
        expected_head: i64,
        events: Vec<NewEvent>,
    ) -> Result<Appended> {
        if stream.as_str() == self.lease.task_id {
            self.inner
                .append_fenced(stream, expected_head, events, &self.lease)
                .await
        } else {
            self.inner.append(stream, expected_head, events).await
        }
    }
    async fn append_fenced(
        &self,
        stream: &StreamId,
        expected_head: i64,
        events: Vec<NewEvent>,
        lease: &Lease,
    ) -> Result<Appended> {
        self.inner
            .append_fenced(stream, expected_head, events, lease)
            .await
    }
    async fn head(&self, stream: &StreamId) -> Result<i64> {
        self.inner.head(stream).await
    }
    async fn task_by_key(&self, key: &str) -> Result<Option<TaskRow>> {
        self.inner.task_by_key(key).await
    }
    async fn newest_task_with_key_prefix(&self, prefix: &str) -> Result<Option<TaskRow>> {
        self.inner.newest_task_with_key_prefix(prefix).await
    }
    async fn state(&self, stream: &StreamId) -> Result<Option<StreamState>> {
        self.inner.state(stream).await
    }
    async fn stream_events(&self, stream: &StreamId, after_seq: i64) -> Result<Vec<RecordedEvent>> {
        self.inner.stream_events(stream, after_seq).await
    }
    async fn events_after(&self, after_pos: i64, limit: i64) -> Result<Vec<RecordedEvent>> {
        self.inner.events_after(after_pos, limit).await
    }
    async fn stream_events_after(
        &self,
        stream: &StreamId,
        after_pos: i64,
        limit: i64,
    ) -> Result<Vec<RecordedEvent>> {
        self.inner
            .stream_events_after(stream, after_pos, limit)
            .await
    }
    fn subscribe(&self) -> broadcast::Receiver<RecordedEvent> {
        self.inner.subscribe()
    }
    async fn task(&self, id: &str) -> Result<Option<TaskView>> {
        self.inner.task(id).await
    }
    async fn tasks(&self, filter: &TaskFilter) -> Result<Vec<TaskRow>> {
        self.inner.tasks(filter).await
    }
    async fn project_receipts_since(
        &self,
        project_id: &str,
        since: Timestamp,
    ) -> Result<Vec<String>> {
        self.inner.project_receipts_since(project_id, since).await
    }
    async fn followed_tasks(&self, pull_request_step: &str) -> Result<Vec<String>> {
        self.inner.followed_tasks(pull_request_step).await
    }
    async fn approvals(&self, filter: &ApprovalFilter) -> Result<Vec<ApprovalRow>> {
        self.inner.approvals(filter).await
    }
    async fn projects(&self) -> Result<Vec<ProjectRow>> {
        self.inner.projects().await
    }
    async fn projections(&self) -> Result<Projections> {
        self.inner.projections().await
    }
    async fn rebuild(&self) -> Result<usize> {
        self.inner.rebuild().await
    }
    async fn verify(&self) -> Result<VerifyReport> {
        self.inner.verify().await
    }
    async fn blobs_get(&self, keys: &[String]) -> Result<Vec<Option<Vec<u8>>>> {
        self.inner.blobs_get(keys).await
    }
    async fn blobs_put(&self, entries: &[(String, Vec<u8>)]) -> Result<()> {
        self.inner.blobs_put(entries).await
    }
    async fn counter_get(&self, key: &str, day: &str) -> Result<u64> {
        self.inner.counter_get(key, day).await
    }
    async fn counter_add(&self, key: &str, day: &str, by: u64) -> Result<u64> {
        self.inner.counter_add(key, day, by).await
    }
    async fn discord_message(
        &self,
        kind: &str,
        gaffer_id: &str,
    ) -> Result<Option<crate::DiscordMessage>> {
        self.inner.discord_message(kind, gaffer_id).await
    }
    async fn discord_message_in(
        &self,
        kind: &str,
        channel_id: &str,
    ) -> Result<Option<crate::DiscordMessage>> {
        self.inner.discord_message_in(kind, channel_id).await
    }
    async fn discord_message_put(&self, m: &crate::DiscordMessage) -> Result<()> {
        self.inner.discord_message_put(m).await
    }
    async fn discord_messages(&self) -> Result<Vec<crate::DiscordMessage>> {
        self.inner.discord_messages().await
    }
    async fn schedule_add(&self, s: &crate::StoredSchedule) -> Result<crate::StoredSchedule> {
        self.inner.schedule_add(s).await
    }
    async fn schedule_remove(
        &self,
        name: &str,
        by: &gaffer_core::Actor,
        at: i64,
    ) -> Result<Option<crate::StoredSchedule>> {
        self.inner.schedule_remove(name, by, at).await
    }
    async fn schedules(&self, with_removed: bool) -> Result<Vec<crate::StoredSchedule>> {
        self.inner.schedules(with_removed).await
    }
    async fn notify_enqueue(
        &self,
        items: &[crate::NotifyItem],
        cursor: Option<i64>,
    ) -> Result<usize> {
        self.inner.notify_enqueue(items, cursor).await
    }
    async fn notify_cursor(&self) -> Result<i64> {
        self.inner.notify_cursor().await
    }
    async fn notify_claim(&self, lease_ms: i64, limit: i64) -> Result<Vec<crate::NotifyItem>> {
        self.inner.notify_claim(lease_ms, limit).await
    }
    async fn notify_update(&self, item: &crate::NotifyItem, claimed_until: i64) -> Result<bool> {
        self.inner.notify_update(item, claimed_until).await
    }
    async fn notify_next_at(&self) -> Result<Option<i64>> {
        self.inner.notify_next_at().await
    }
    async fn notify_outbox(&self, limit: i64) -> Result<Vec<crate::NotifyItem>> {
        self.inner.notify_outbox(limit).await
    }
    async fn follow_other_processes(&self) -> Result<()> {
        self.inner.follow_other_processes().await
    }
    fn follow_only(&self, wanted: crate::WantedEvents) {
        self.inner.follow_only(wanted)
    }
    async fn register_worker(&self, worker: &WorkerInfo) -> Result<()> {
        self.inner.register_worker(worker).await
    }
    async fn claim_task(
        &self,
        worker: &WorkerInfo,
        skip: &[String],
        only_task: Option<&str>,
    ) -> Result<Option<Lease>> {
        self.inner.claim_task(worker, skip, only_task).await
    }
    async fn heartbeat(&self, worker: &WorkerInfo, held: &[Lease]) -> Result<Vec<String>> {
        self.inner.heartbeat(worker, held).await
    }
    async fn release_lease(&self, lease: &Lease, end: LeaseEnd) -> Result<()> {
        self.inner.release_lease(lease, end).await
    }
    async fn stop_worker(&self, worker_id: &str) -> Result<()> {
        self.inner.stop_worker(worker_id).await
    }
    async fn workers(&self) -> Result<Vec<WorkerRow>> {
        self.inner.workers().await
    }
    async fn lease(&self, task_id: &str) -> Result<Option<LeaseRow>> {
        self.inner.lease(task_id).await
    }
    async fn event_writers(&self, stream: &StreamId) -> Result<Vec<EventWriter>> {
        self.inner.event_writers(stream).await
    }
    fn sanitize_appends(&self, sanitizer: crate::Sanitizer) {
        self.inner.sanitize_appends(sanitizer)
    }
    fn location(&self) -> String {
        self.inner.location()
    }
    fn schema_version(&self) -> i64 {
        self.inner.schema_version()
    }
    /// Nothing: the fenced view does not own the journal it wraps.
    async fn shutdown(&self) {}
}
