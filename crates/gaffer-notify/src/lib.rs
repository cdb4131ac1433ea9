//! gaffer's notifications: tell people where they are — a signed webhook, an ntfy
//! topic on their phone — that an approval waits for them or a task ended, with
//! one-tap links that open a confirm page on the server.
//!
//! ```text
//! journal events ─► follower ─► outbox rows (idempotency id, JSON news) + cursor, one transaction
//!                                    │
//!                 deliverer ◄────────┘  sign links, POST; 2xx: delivered;
//!                                       5xx / 429 / timeout / connection error: again after
//!                                       2^n backoff, bounded; other 4xx: failed
//! ```
//!
//! - **Events** (`events` of a target; default all): `approval` (an approval waits
//!   for a person; auto-approved ones are never sent, and one decided before its
//!   delivery is skipped), `done`, `failed`, `blocked` (a task ended so, or needs a
//!   person to go on). A cancelled task is not sent: a person cancelled it.
//! - **At least once, never lost.** The follower reads the journal from its cursor
//!   and writes the outbox rows and the new cursor in one transaction; a row's id
//!   is `<target>/<event>/<approval or task id>`, so re-reading after a crash adds
//!   nothing. A row is marked delivered after the receiver's 2xx: a crash between
//!   the two sends it again, with the same `id` (body, `X-Gaffer-Delivery`) for the
//!   receiver to drop. Pending approvals are also enqueued at start (same ids).
//! - **Secrets**: signing secrets and tokens come from the environment
//!   (`gaffer-config`), never reach the outbox, the journal or a log; a failed
//!   delivery's recorded error names the status or the kind of failure, not the URL.
//! - **Any number of notifiers per journal** (`gaffer serve`, `gaffer run`,
//!   `gaffer worker`, on one machine or many): a deliverer *claims* a row for a
//!   lease ([`Retry::lease`]; PostgreSQL `FOR UPDATE SKIP LOCKED`, SQLite its one
//!   writer) before it sends, so each notification is sent by one of them; a
//!   deliverer that dies holding a claim leaves the row to the others once the
//!   lease has passed. Every follower enqueues the same ids, so rows are not
//!   doubled either.
//! - **Links only to a server that is there**: [`ServerUrl`] is asked before each
//!   delivery; when it finds no server, the notification carries no link (no task
//!   page, no one-tap link) and an approval carries the commands that decide it
//!   (`gaffer approve ap-…`), as every approval does.
//! - **Woken, not polling**: the follower wakes on the journal's events (this
//!   process's appends, and other processes' once `follow_others` is on); the
//!   deliverer on new rows and at the next row's due time (a retry, a claim's
//!   end); the follower's cursor is written with the rows it adds, else at most
//!   every [`CURSOR_EVERY`] and when it stops (re-reading adds nothing twice).

#![deny(missing_docs)]

mod deliver;
pub mod link;
pub mod news;
mod reach;
pub mod sign;

use gaffer_app::{App, AppError};
use gaffer_config::{NotifyEvent, NotifyTarget};
use gaffer_core::Event;
use gaffer_store::{now_ms, NotifyItem, RecordedEvent};
pub use link::{Link, LinkError, LinkKey, Links};
use news::{ApprovalNews, News};
pub use reach::{Reach, ServerUrl};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// What can stop the notifier.
#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    /// The journal could not be read or written (retried by the loops; returned
    /// only when starting).
    #[error(transparent)]
    App(#[from] AppError),
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
}

/// The crate's result.
pub type Result<T, E = NotifyError> = std::result::Result<T, E>;

/// How deliveries are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    /// The wait after the first failure; doubled after each further one.
    pub first: Duration,
    /// The longest wait.
    pub max: Duration,
    /// Attempts in all before a delivery is given up (`failed`).
    pub attempts: u32,
    /// How long one attempt may take.
    pub timeout: Duration,
    /// How long a deliverer holds a claimed row before another may take it over
    /// (its claimer died); kept longer than `timeout`.
    pub lease: Duration,
}

impl Default for Retry {
    /// 2 s, 4 s, … up to 10 min between tries, 10 tries (about 37 minutes in all),
    /// 10 s per try, claims of 60 s.
    fn default() -> Self {
        Self {
            first: Duration::from_secs(2),
            max: Duration::from_secs(600),
            attempts: 10,
            timeout: Duration::from_secs(10),
            lease: Duration::from_secs(60),
        }
    }
}

impl Retry {
    /// The wait after the `attempts`-th failed attempt.
    pub fn backoff(&self, attempts: u32) -> Duration {
        let factor = 1u32
            .checked_shl(attempts.saturating_sub(1))
            .unwrap_or(u32::MAX);
        self.first.saturating_mul(factor).min(self.max)
    }

    /// The claim's length: `lease`, but always past an attempt's `timeout`, so a
    /// live deliverer's claim never lapses while it sends.
    fn lease_ms(&self) -> i64 {
        let lease = self.lease.max(self.timeout.saturating_mul(2));
        i64::try_from(lease.as_millis()).unwrap_or(i64::MAX / 2)
    }
}

/// How often the follower writes its cursor when it enqueued nothing.
pub const CURSOR_EVERY: Duration = Duration::from_secs(10);

/// The notifier: follower and deliverer over one app.
#[derive(Clone)]
pub struct Notifier {
    inner: Arc<Inner>,
}

struct Inner {
    app: App,
    targets: Vec<NotifyTarget>,
    reach: Reach,
    retry: Retry,
    client: reqwest::Client,
    wake: Notify,
}

impl Notifier {
    /// A notifier for `targets`; `reach` says where people act on what it sends.
    pub fn new(app: App, targets: Vec<NotifyTarget>, reach: Reach, retry: Retry) -> Result<Self> {
        let client = reqwest::Client::builder()
            .timeout(retry.timeout)
            .user_agent(concat!("gaffer/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| NotifyError::Client(e.to_string()))?;
        Ok(Self {
            inner: Arc::new(Inner {
                app,
                targets,
                reach,
                retry,
                client,
                wake: Notify::new(),
            }),
        })
    }

    /// Follow the journal and deliver until `stop`.
    pub async fn run(self, stop: CancellationToken) -> Result<()> {
        let journal = self.inner.app.journal().clone();
        // Subscribed before the first read: nothing appended meanwhile is missed.
        let mut events = journal.subscribe();
        let mut cursor = journal.notify_cursor().await.map_err(AppError::Store)?;
        let (mut stored, mut stored_at) = (cursor, Instant::now());
        self.enqueue_pending().await?;
        let deliverer = tokio::spawn(self.clone().deliver_loop(stop.clone()));
        loop {
            let store = stored_at.elapsed() >= CURSOR_EVERY;
            match self.follow_once(cursor, store).await {
                Ok(Some(followed)) => {
                    cursor = followed.pos;
                    if followed.stored {
                        (stored, stored_at) = (cursor, Instant::now());
                    }
                    continue;
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "notify: cannot read the journal; trying again")
                }
            }
            // Woken by this process's appends and, once the journal follows other
            // processes, theirs; the sleep only bounds a missed wake.
            tokio::select! {
                () = stop.cancelled() => break,
                _ = events.recv() => {}
                () = tokio::time::sleep(Duration::from_secs(2)) => {}
            }
        }
        if cursor != stored {
            if let Err(e) = journal.notify_enqueue(&[], Some(cursor)).await {
                tracing::warn!(error = %e, "notify: cannot record how far the journal was read");
            }
        }
        let _ = deliverer.await;
        Ok(())
    }

    /// Enqueue what the events after `cursor` tell (one page), writing the new
    /// cursor with the rows, or alone when `store`; `None` when there was nothing new.
    pub(crate) async fn follow_once(&self, cursor: i64, store: bool) -> Result<Option<Followed>> {
        let journal = self.inner.app.journal();
        let page = journal
            .events_after(cursor, 200)
            .await
            .map_err(AppError::Store)?;
        let Some(last) = page.last().map(|e| e.pos) else {
            return Ok(None);
        };
        let mut items = Vec::new();
        for e in &page {
            if let Some(news) = self.news_of(e).await? {
                items.extend(self.items(&news));
            }
        }
        if items.is_empty() && !store {
            return Ok(Some(Followed {
                pos: last,
                stored: false,
            }));
        }
        journal
            .notify_enqueue(&items, Some(last))
            .await
            .map_err(AppError::Store)?;
        // Woken even when another process's follower added the rows first: the
        // deliverers race for them by claim, and one sends each.
        if !items.is_empty() {
            self.inner.wake.notify_one();
        }
        Ok(Some(Followed {
            pos: last,
            stored: true,
        }))
    }

    /// Approvals pending now (those asked while notifications were off included).
    async fn enqueue_pending(&self) -> Result<()> {
        let mut items = Vec::new();
        for a in self.inner.app.approvals(Some("pending")).await? {
            let request = self.request_of(&a.task_id).await?;
            items.extend(self.items(&approval_news(&a, request)));
        }
        self.inner
            .app
            .journal()
            .notify_enqueue(&items, None)
            .await
            .map_err(AppError::Store)?;
        Ok(())
    }

    async fn request_of(&self, task_id: &str) -> Result<String> {
        let task = self.inner.app.task(task_id).await?;
        Ok(news::clip(&task.task.request, 500))
    }

    /// The news an event is, if any.
    async fn news_of(&self, e: &RecordedEvent) -> Result<Option<News>> {
        let app = &self.inner.app;
        let (event, reason) = match &e.event {
            Event::ApprovalRequested { approval_id, .. } => {
                let a = match app.approval(approval_id.as_str()).await {
                    Ok(a) => a,
                    Err(AppError::NotFound { .. }) => return Ok(None),
                    Err(e) => return Err(e.into()),
                };
                // Auto-approved (or already decided): nobody needs telling.
                if a.state != "pending" {
                    return Ok(None);
                }
                let request = self.request_of(&a.task_id).await?;
                return Ok(Some(approval_news(&a, request)));
            }
            Event::TaskDone { .. } => (NotifyEvent::Done, None),
            Event::TaskFailed { reason } => (NotifyEvent::Failed, Some(reason.clone())),
            Event::TaskBlocked { reason } => (NotifyEvent::Blocked, Some(reason.clone())),
            Event::TaskDependencyFailed {
                dependency,
                stage,
                reason,
            } => (
                NotifyEvent::Blocked,
                Some(gaffer_core::dependency::blocked_reason(
                    dependency,
                    *stage,
                    reason.as_deref(),
                )),
            ),
            _ => return Ok(None),
        };
        let task = match app.task(&e.stream_id).await {
            Ok(t) => t.task,
            Err(AppError::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        Ok(Some(News {
            event: event.as_str().to_owned(),
            at: e.at,
            project: task.project,
            task_id: task.id,
            request: news::clip(&task.request, 500),
            approval: None,
            reason: reason.map(|r| news::clip(&r, 1000)),
        }))
    }

    /// One outbox row per target that wants `news`.
    fn items(&self, news: &News) -> Vec<NotifyItem> {
        let Some(kind) = news.kind() else {
            return Vec::new();
        };
        let payload = serde_json::to_string(news).unwrap_or_default();
        let now = now_ms();
        self.inner
            .targets
            .iter()
            .filter(|t| t.events.contains(&kind))
            .map(|t| NotifyItem {
                id: news.delivery_id(&t.name),
                target: t.name.clone(),
                payload: payload.clone(),
                created_at: now,
                attempts: 0,
                next_at: now,
                state: "pending".into(),
                delivered_at: None,
                last_error: String::new(),
            })
            .collect()
    }
}

/// Where a page of the follower got to.
pub(crate) struct Followed {
    /// The last event read.
    pub(crate) pos: i64,
    /// Whether the cursor was written there.
    stored: bool,
}

fn approval_news(a: &gaffer_protocol::api::Approval, request: String) -> News {
    News {
        event: NotifyEvent::Approval.as_str().to_owned(),
        at: a.requested_at,
        project: a.project.clone(),
        task_id: a.task_id.clone(),
        request,
        approval: Some(ApprovalNews {
            id: a.id.clone(),
            kind: a.kind.clone(),
            summary: news::clip(&a.summary, 1000),
        }),
        reason: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_the_first_wait_up_to_the_cap() {
        let r = Retry {
            first: Duration::from_secs(2),
            max: Duration::from_secs(60),
            attempts: 10,
            timeout: Duration::from_secs(1),
            lease: Duration::from_secs(1),
        };
        let waits: Vec<u64> = (1..=7).map(|n| r.backoff(n).as_secs()).collect();
        assert_eq!(waits, [2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(r.backoff(200), Duration::from_secs(60));
        // A claim outlives an attempt, whatever the lease asked for.
        assert_eq!(r.lease_ms(), 2_000);
    }
}
