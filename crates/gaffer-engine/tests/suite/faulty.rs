//! A journal with faults, for tests of what the engine does about them.
//!
//! - A crash right after a chosen write: the fault point of the crash-point
//!   harness. Every write the engine makes for a task (appends, and the lease
//!   writes: register, claim, release, stop) is named by a signature; once the
//!   chosen occurrence of a signature is written, the process "dies": in process,
//!   every later call on the journal waits forever and the run is dropped (its
//!   agent processes killed); or for real, with `kill -9` on this very process.
//! - A write lock like SQLite's: each append holds it a while, and a heartbeat
//!   that cannot take it within a busy timeout fails as SQLite's `database is
//!   locked` does.
use gaffer_core::{Event, StreamId, StreamState};
use gaffer_store::{
    Appended, ApprovalFilter, ApprovalRow, DiscordMessage, EventWriter, Journal, Lease, LeaseEnd,
    LeaseRow, NewEvent, ProjectRow, Projections, RecordedEvent, Result, TaskFilter, TaskRow,
    TaskView, VerifyReport, WantedEvents, WorkerInfo, WorkerRow,
};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{broadcast, watch};

/// The write to die after. Never named by its place among all the run's writes:
/// how many lease writes come first (releasing dead workers) differs between runs.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Point {
    /// The `occurrence`-th (from 1) write named `signature`.
    After {
        signature: String,
        occurrence: usize,
    },
    /// The n-th (from 1) write that is not a lease write: in a resumed run, the
    /// n-th write of its recovery, whatever that recovery found to do.
    Recovery(usize),
    /// Right before the `occurrence`-th write named `signature`, which never
    /// happens: everything the process did since its previous write is done and
    /// unrecorded (an effect run, its receipt not written).
    Before {
        signature: String,
        occurrence: usize,
    },
}

impl std::fmt::Display for Point {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Point::After {
                signature,
                occurrence,
            } => write!(f, "{signature} #{occurrence}"),
            Point::Recovery(n) => write!(f, "recovery write {n}"),
            Point::Before {
                signature,
                occurrence,
            } => write!(f, "before {signature} #{occurrence}"),
        }
    }
}

/// Whether a write is one of the lease writes (not an append).
pub fn is_lease_write(signature: &str) -> bool {
    matches!(
        signature,
        "register_worker" | "claim_task" | "release_lease" | "stop_worker"
    )
}

/// How the process dies at the point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Death {
    /// Nothing more happens in this journal: every call waits forever. The caller
    /// drops the run (which kills its agent processes).
    Freeze,
    /// `kill -9` of this process (a child test process): its agents live on as orphans.
    Kill9,
}

/// What an append is, for a crash point: each event's type and the step it
/// concerns, in order (`step_started(code/1)`, `task_leased+step_interrupted(pr)`).
pub fn append_signature(events: &[NewEvent]) -> String {
    let mut parts: Vec<String> = Vec::new();
    for e in events {
        let step = match &e.event {
            Event::StepIntentRecorded { step_id, .. }
            | Event::StepStarted { step_id }
            | Event::AgentActivity { step_id, .. }
            | Event::CiStatusChanged { step_id, .. }
            | Event::StepCompleted { step_id, .. }
            | Event::StepFailed { step_id, .. }
            | Event::StepInterrupted { step_id }
            | Event::StepReconcileStarted { step_id }
            | Event::StepManualRequired { step_id, .. }
            | Event::StepRetried { step_id }
            | Event::ApprovalRequested { step_id, .. }
            | Event::AgentSwitched { step_id, .. } => Some(step_id.as_str()),
            Event::SessionStarted { step_id, .. } => step_id.as_ref().map(|s| s.as_str()),
            _ => None,
        };
        let part = match step {
            Some(s) => format!("{}({s})", e.event.kind()),
            None => e.event.kind().to_owned(),
        };
        if parts.last() != Some(&part) {
            parts.push(part);
        }
    }
    parts.join("+")
}

/// A journal that dies after `point` (or never, without one), records the
/// signature of every write it passed on, and may emulate a write lock.
pub struct Faulty {
    inner: Arc<dyn Journal>,
    point: Option<Point>,
    death: Death,
    written: Mutex<Vec<String>>,
    /// The streams whose events or state were read, in order.
    read: Mutex<Vec<String>>,
    dead: watch::Sender<bool>,
    /// True once the write at the point has begun: held for writing while it is
    /// set, for reading by [`Faulty::unless_dying`].
    dying: tokio::sync::RwLock<bool>,
    lock: Option<WriteLock>,
}

/// An emulated write lock: appends hold it `hold` (longer than a real append, so
/// that a heartbeat meets one in progress); a heartbeat waits at most `busy`.
struct WriteLock {
    lock: tokio::sync::Mutex<()>,
    hold: Duration,
    busy: Duration,
    heartbeat_failures: AtomicUsize,
}

impl Faulty {
    /// Dies after `point` (never, without one).
    pub fn new(inner: Arc<dyn Journal>, point: Option<Point>, death: Death) -> Arc<Self> {
        Arc::new(Self::build(inner, point, death, None))
    }

    /// Never dies; each append holds a write lock `hold`, heartbeats wait for it at most `busy`.
    pub fn with_write_lock(inner: Arc<dyn Journal>, hold: Duration, busy: Duration) -> Arc<Self> {
        let lock = WriteLock {
            lock: tokio::sync::Mutex::new(()),
            hold,
            busy,
            heartbeat_failures: AtomicUsize::new(0),
        };
        Arc::new(Self::build(inner, None, Death::Freeze, Some(lock)))
    }

    fn build(
        inner: Arc<dyn Journal>,
        point: Option<Point>,
        death: Death,
        lock: Option<WriteLock>,
    ) -> Self {
        Self {
            inner,
            point,
            death,
            written: Mutex::default(),
            read: Mutex::default(),
            dead: watch::channel(false).0,
            dying: tokio::sync::RwLock::new(false),
            lock,
        }
    }

    /// How many heartbeats gave up waiting for the emulated write lock.
    pub fn heartbeat_failures(&self) -> usize {
        self.lock
            .as_ref()
            .map_or(0, |l| l.heartbeat_failures.load(Ordering::SeqCst))
    }

    /// Hold the emulated write lock (if any) around `write`.
    async fn locked<T>(&self, write: impl std::future::Future<Output = T>) -> T {
        let Some(l) = &self.lock else {
            return write.await;
        };
        let _held = l.lock.lock().await;
        let r = write.await;
        tokio::time::sleep(l.hold).await;
        r
    }

    /// The streams read (events or state) since the last call, in order.
    pub fn take_reads(&self) -> Vec<String> {
        std::mem::take(&mut *self.read.lock().unwrap())
    }

    fn reading(&self, stream: &StreamId) {
        self.read.lock().unwrap().push(stream.0.clone());
    }

    /// The signatures of the writes made, in order.
    pub fn written(&self) -> Vec<String> {
        self.written.lock().unwrap().clone()
    }

    /// Resolves once the process died at its point.
    pub async fn died(&self) {
        let mut dead = self.dead.subscribe();
        let _ = dead.wait_for(|d| *d).await;
    }

    /// Run `act` (another process's write, as a person's decision) only if this
    /// process has not begun the write it dies after, and keep that write from
    /// beginning until `act` ends: whatever `act` does happened before the crash,
    /// or it does not happen. `None`: not run.
    pub async fn unless_dying<T>(&self, act: impl std::future::Future<Output = T>) -> Option<T> {
        let dying = self.dying.try_read().ok()?;
        if *dying {
            return None;
        }
        let r = act.await;
        drop(dying);
        Some(r)
    }

    /// Before every call: a dead process does nothing more.
    async fn alive(&self) {
        if *self.dead.borrow() {
            std::future::pending::<()>().await;
        }
    }

    /// Whether a write named `signature`, made now, is the point.
    fn is_point(&self, signature: &str) -> bool {
        let Some(point) = &self.point else {
            return false;
        };
        let written = self.written.lock().unwrap();
        match point {
            Point::After {
                signature: s,
                occurrence,
            }
            | Point::Before {
                signature: s,
                occurrence,
            } => s == signature && *occurrence == 1 + written.iter().filter(|w| *w == s).count(),
            Point::Recovery(n) => {
                !is_lease_write(signature)
                    && *n == 1 + written.iter().filter(|w| !is_lease_write(w)).count()
            }
        }
    }

    /// Before a write: if it is the point, the process is dying from now on, and
    /// dies here if the point is before the write.
    async fn writing(&self, signature: &str) {
        if self.is_point(signature) {
            *self.dying.write().await = true;
            if matches!(self.point, Some(Point::Before { .. })) {
                self.die().await;
            }
        }
    }

    /// After a write that succeeded: record it, and die if it is the point.
    async fn wrote(&self, signature: String) {
        let here = self.is_point(&signature);
        self.written.lock().unwrap().push(signature);
        if here {
            self.die().await;
        }
    }

    /// Nothing more happens in this process.
    async fn die(&self) {
        if self.death == Death::Kill9 {
            let me = std::process::id().to_string();
            let _ = std::process::Command::new("kill")
                .args(["-9", &me])
                .status();
        }
        self.dead.send_replace(true);
        std::future::pending::<()>().await;
    }

    async fn written_if<T>(
        &self,
        result: Result<T>,
        signature: impl FnOnce() -> String,
    ) -> Result<T> {
        if result.is_ok() {
            self.wrote(signature()).await;
        }
        result
    }
}

#[async_trait::async_trait]
impl Journal for Faulty {
    async fn append(
        &self,
        stream: &StreamId,
        expected_head: i64,
        events: Vec<NewEvent>,
    ) -> Result<Appended> {
        self.alive().await;
        let signature = append_signature(&events);
        self.writing(&signature).await;
        let r = self
            .locked(self.inner.append(stream, expected_head, events))
            .await;
        self.written_if(r, || signature).await
    }
    async fn append_fenced(
        &self,
        stream: &StreamId,
        expected_head: i64,
        events: Vec<NewEvent>,
        lease: &Lease,
    ) -> Result<Appended> {
        self.alive().await;
        let signature = append_signature(&events);
        self.writing(&signature).await;
        let r = self
            .locked(
                self.inner
                    .append_fenced(stream, expected_head, events, lease),
            )
            .await;
        self.written_if(r, || signature).await
    }
    async fn register_worker(&self, worker: &WorkerInfo) -> Result<()> {
        self.alive().await;
        self.writing("register_worker").await;
        let r = self.inner.register_worker(worker).await;
        self.written_if(r, || "register_worker".into()).await
    }
    async fn claim_task(
        &self,
        worker: &WorkerInfo,
        skip: &[String],
        only_task: Option<&str>,
    ) -> Result<Option<Lease>> {
        self.alive().await;
        self.writing("claim_task").await;
        let r = self.inner.claim_task(worker, skip, only_task).await;
        if matches!(r, Ok(None)) {
            return r;
        }
        self.written_if(r, || "claim_task".into()).await
    }
    async fn release_lease(&self, lease: &Lease, end: LeaseEnd) -> Result<()> {
        self.alive().await;
        self.writing("release_lease").await;
        let r = self.inner.release_lease(lease, end).await;
        self.written_if(r, || "release_lease".into()).await
    }
    async fn stop_worker(&self, worker_id: &str) -> Result<()> {
        self.alive().await;
        self.writing("stop_worker").await;
        let r = self.inner.stop_worker(worker_id).await;
        self.written_if(r, || "stop_worker".into()).await
    }
    // Heartbeats are not crash points: when they happen is a matter of timing.
    async fn heartbeat(&self, worker: &WorkerInfo, held: &[Lease]) -> Result<Vec<String>> {
        self.alive().await;
        let Some(l) = &self.lock else {
            return self.inner.heartbeat(worker, held).await;
        };
        match tokio::time::timeout(l.busy, l.lock.lock()).await {
            Ok(_held) => self.inner.heartbeat(worker, held).await,
            Err(_) => {
                l.heartbeat_failures.fetch_add(1, Ordering::SeqCst);
                Err(gaffer_store::StoreError::Unsupported(
                    "database is locked (the emulated write lock)".into(),
                ))
            }
        }
    }
    async fn head(&self, stream: &StreamId) -> Result<i64> {
        self.alive().await;
        self.inner.head(stream).await
    }
    async fn state(&self, stream: &StreamId) -> Result<Option<StreamState>> {
        self.alive().await;
        self.reading(stream);
        self.inner.state(stream).await
    }
    async fn stream_events(&self, stream: &StreamId, after_seq: i64) -> Result<Vec<RecordedEvent>> {
        self.alive().await;
        self.reading(stream);
        self.inner.stream_events(stream, after_seq).await
    }
    async fn stream_events_after(
        &self,
        stream: &StreamId,
        after_pos: i64,
        limit: i64,
    ) -> Result<Vec<RecordedEvent>> {
        self.alive().await;
        self.inner
            .stream_events_after(stream, after_pos, limit)
            .await
    }
    async fn events_after(&self, after_pos: i64, limit: i64) -> Result<Vec<RecordedEvent>> {
        self.alive().await;
        self.inner.events_after(after_pos, limit).await
    }
    fn subscribe(&self) -> broadcast::Receiver<RecordedEvent> {
        self.inner.subscribe()
    }
    async fn task(&self, id: &str) -> Result<Option<TaskView>> {
        self.alive().await;
        self.reading(&StreamId(id.into()));
        self.inner.task(id).await
    }
    async fn task_by_key(&self, key: &str) -> Result<Option<TaskRow>> {
        self.alive().await;
        self.inner.task_by_key(key).await
    }
    async fn newest_task_with_key_prefix(&self, prefix: &str) -> Result<Option<TaskRow>> {
        self.alive().await;
        self.inner.newest_task_with_key_prefix(prefix).await
    }
    async fn tasks(&self, filter: &TaskFilter) -> Result<Vec<TaskRow>> {
        self.alive().await;
        self.inner.tasks(filter).await
    }
    async fn project_receipts_since(
        &self,
        project_id: &str,
        since: gaffer_core::Timestamp,
    ) -> Result<Vec<String>> {
        self.alive().await;
        self.inner.project_receipts_since(project_id, since).await
    }
    async fn followed_tasks(&self, pull_request_step: &str) -> Result<Vec<String>> {
        self.alive().await;
        self.inner.followed_tasks(pull_request_step).await
    }
    async fn approvals(&self, filter: &ApprovalFilter) -> Result<Vec<ApprovalRow>> {
        self.alive().await;
        self.inner.approvals(filter).await
    }
    async fn projects(&self) -> Result<Vec<ProjectRow>> {
        self.alive().await;
        self.inner.projects().await
    }
    async fn projections(&self) -> Result<Projections> {
        self.alive().await;
        self.inner.projections().await
    }
    async fn rebuild(&self) -> Result<usize> {
        self.alive().await;
        self.inner.rebuild().await
    }
    async fn verify(&self) -> Result<VerifyReport> {
        self.alive().await;
        self.inner.verify().await
    }
    async fn blobs_get(&self, keys: &[String]) -> Result<Vec<Option<Vec<u8>>>> {
        self.alive().await;
        self.inner.blobs_get(keys).await
    }
    async fn blobs_put(&self, entries: &[(String, Vec<u8>)]) -> Result<()> {
        self.alive().await;
        self.inner.blobs_put(entries).await
    }
    async fn counter_get(&self, key: &str, day: &str) -> Result<u64> {
        self.alive().await;
        self.inner.counter_get(key, day).await
    }
    async fn counter_add(&self, key: &str, day: &str, by: u64) -> Result<u64> {
        self.alive().await;
        self.inner.counter_add(key, day, by).await
    }
    async fn notify_enqueue(
        &self,
        items: &[gaffer_store::NotifyItem],
        cursor: Option<i64>,
    ) -> Result<usize> {
        self.inner.notify_enqueue(items, cursor).await
    }
    async fn notify_cursor(&self) -> Result<i64> {
        self.inner.notify_cursor().await
    }
    async fn notify_claim(
        &self,
        lease_ms: i64,
        limit: i64,
    ) -> Result<Vec<gaffer_store::NotifyItem>> {
        self.inner.notify_claim(lease_ms, limit).await
    }
    async fn notify_update(
        &self,
        item: &gaffer_store::NotifyItem,
        claimed_until: i64,
    ) -> Result<bool> {
        self.inner.notify_update(item, claimed_until).await
    }
    async fn notify_next_at(&self) -> Result<Option<i64>> {
        self.inner.notify_next_at().await
    }
    async fn notify_outbox(&self, limit: i64) -> Result<Vec<gaffer_store::NotifyItem>> {
        self.inner.notify_outbox(limit).await
    }
    async fn discord_message(&self, kind: &str, gaffer_id: &str) -> Result<Option<DiscordMessage>> {
        self.alive().await;
        self.inner.discord_message(kind, gaffer_id).await
    }
    async fn discord_message_in(
        &self,
        kind: &str,
        channel_id: &str,
    ) -> Result<Option<DiscordMessage>> {
        self.alive().await;
        self.inner.discord_message_in(kind, channel_id).await
    }
    async fn discord_message_put(&self, m: &DiscordMessage) -> Result<()> {
        self.alive().await;
        self.inner.discord_message_put(m).await
    }
    async fn discord_messages(&self) -> Result<Vec<DiscordMessage>> {
        self.alive().await;
        self.inner.discord_messages().await
    }
    async fn schedule_add(
        &self,
        s: &gaffer_store::StoredSchedule,
    ) -> Result<gaffer_store::StoredSchedule> {
        self.alive().await;
        self.inner.schedule_add(s).await
    }
    async fn schedule_remove(
        &self,
        name: &str,
        by: &gaffer_core::Actor,
        at: i64,
    ) -> Result<Option<gaffer_store::StoredSchedule>> {
        self.alive().await;
        self.inner.schedule_remove(name, by, at).await
    }
    async fn schedules(&self, with_removed: bool) -> Result<Vec<gaffer_store::StoredSchedule>> {
        self.alive().await;
        self.inner.schedules(with_removed).await
    }
    async fn workers(&self) -> Result<Vec<WorkerRow>> {
        self.alive().await;
        self.inner.workers().await
    }
    async fn lease(&self, task_id: &str) -> Result<Option<LeaseRow>> {
        self.alive().await;
        self.inner.lease(task_id).await
    }
    async fn event_writers(&self, stream: &StreamId) -> Result<Vec<EventWriter>> {
        self.alive().await;
        self.inner.event_writers(stream).await
    }
    async fn follow_other_processes(&self) -> Result<()> {
        self.inner.follow_other_processes().await
    }
    fn follow_only(&self, wanted: WantedEvents) {
        self.inner.follow_only(wanted)
    }
    fn sanitize_appends(&self, sanitizer: gaffer_store::Sanitizer) {
        self.inner.sanitize_appends(sanitizer)
    }
    fn location(&self) -> String {
        self.inner.location()
    }
    fn schema_version(&self) -> i64 {
        self.inner.schema_version()
    }
    /// Nothing: the journal it wraps is shared.
    async fn shutdown(&self) {}
}
