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
//! - One `gaffer serve` per journal should run notifications: two would each
//!   deliver (still at least once, but twice).

#![deny(missing_docs)]

pub mod link;
pub mod news;
pub mod sign;

use gaffer_app::{App, AppError};
use gaffer_config::{NotifyEvent, NotifyKind, NotifyTarget};
use gaffer_core::Event;
use gaffer_store::{now_ms, NotifyItem, RecordedEvent};
pub use link::{Link, LinkError, LinkKey, Links};
use news::{ApprovalNews, News};
use std::sync::Arc;
use std::time::Duration;
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
}

impl Default for Retry {
    /// 2 s, 4 s, … up to 10 min between tries, 10 tries (about 37 minutes in all),
    /// 10 s per try.
    fn default() -> Self {
        Self {
            first: Duration::from_secs(2),
            max: Duration::from_secs(600),
            attempts: 10,
            timeout: Duration::from_secs(10),
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
}

/// The notifier: follower and deliverer over one app.
#[derive(Clone)]
pub struct Notifier {
    inner: Arc<Inner>,
}

struct Inner {
    app: App,
    targets: Vec<NotifyTarget>,
    links: Option<LinkKey>,
    base_url: String,
    retry: Retry,
    client: reqwest::Client,
    wake: Notify,
}

/// How an attempt went.
enum Attempt {
    Delivered,
    /// Worth trying again (5xx, 429, timeout, connection error).
    Again(String),
    /// Not worth trying again (another 4xx, a target gone).
    GiveUp(String),
    /// Nothing to send any more (the approval was decided first).
    Skip(String),
}

impl Notifier {
    /// A notifier for `targets`; links (for targets with a person) point at
    /// `base_url` (the server's public URL) and are signed with `links`.
    pub fn new(
        app: App,
        targets: Vec<NotifyTarget>,
        links: Option<LinkKey>,
        base_url: &str,
        retry: Retry,
    ) -> Result<Self> {
        let client = reqwest::Client::builder()
            .timeout(retry.timeout)
            .user_agent(concat!("gaffer/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| NotifyError::Client(e.to_string()))?;
        Ok(Self {
            inner: Arc::new(Inner {
                app,
                targets,
                links,
                base_url: base_url.trim_end_matches('/').to_owned(),
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
        self.enqueue_pending().await?;
        let deliverer = tokio::spawn(self.clone().deliver_loop(stop.clone()));
        loop {
            match self.follow_once(cursor).await {
                Ok(Some(pos)) => {
                    cursor = pos;
                    continue;
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "notify: cannot read the journal; trying again")
                }
            }
            // Woken by this process's appends; other processes' are seen within 2 s.
            tokio::select! {
                () = stop.cancelled() => break,
                _ = events.recv() => {}
                () = tokio::time::sleep(Duration::from_secs(2)) => {}
            }
        }
        let _ = deliverer.await;
        Ok(())
    }

    /// Enqueue what the events after `cursor` tell (one page); the new cursor, or
    /// `None` when there was nothing new.
    async fn follow_once(&self, cursor: i64) -> Result<Option<i64>> {
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
        let added = journal
            .notify_enqueue(&items, Some(last))
            .await
            .map_err(AppError::Store)?;
        if added > 0 {
            self.inner.wake.notify_one();
        }
        Ok(Some(last))
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

    async fn deliver_loop(self, stop: CancellationToken) {
        loop {
            let due = match self.inner.app.journal().notify_due(now_ms(), 16).await {
                Ok(d) => d,
                Err(e) => {
                    tracing::warn!(error = %e, "notify: cannot read the outbox");
                    Vec::new()
                }
            };
            let idle = due.is_empty();
            for item in due {
                if stop.is_cancelled() {
                    return;
                }
                self.deliver(item).await;
            }
            if idle {
                // Woken by new rows; retries come due within a second.
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = self.inner.wake.notified() => {}
                    () = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        }
    }

    /// Try `item` once and record how it went.
    async fn deliver(&self, mut item: NotifyItem) {
        let outcome = self.attempt(&item).await;
        let now = now_ms();
        item.attempts += 1;
        match outcome {
            Attempt::Delivered => {
                item.state = "delivered".into();
                item.delivered_at = Some(now);
                item.last_error.clear();
            }
            Attempt::Skip(why) => {
                item.state = "skipped".into();
                item.last_error = why;
            }
            Attempt::GiveUp(why) => {
                tracing::warn!(delivery = %item.id, error = %why, "notify: delivery failed; not retried");
                item.state = "failed".into();
                item.last_error = why;
            }
            Attempt::Again(why) => {
                let tried = u32::try_from(item.attempts).unwrap_or(u32::MAX);
                if tried >= self.inner.retry.attempts {
                    tracing::warn!(delivery = %item.id, error = %why, attempts = tried, "notify: delivery failed; giving up");
                    item.state = "failed".into();
                } else {
                    let wait = self.inner.retry.backoff(tried);
                    tracing::info!(delivery = %item.id, error = %why, retry_in_ms = wait.as_millis() as u64, "notify: delivery failed; will retry");
                    item.next_at = now + i64::try_from(wait.as_millis()).unwrap_or(i64::MAX / 2);
                }
                item.last_error = why;
            }
        }
        if let Err(e) = self.inner.app.journal().notify_update(&item).await {
            tracing::warn!(delivery = %item.id, error = %e, "notify: cannot record a delivery");
        }
    }

    async fn attempt(&self, item: &NotifyItem) -> Attempt {
        let Some(target) = self.inner.targets.iter().find(|t| t.name == item.target) else {
            return Attempt::GiveUp(format!("target `{}` is no longer configured", item.target));
        };
        let news: News = match serde_json::from_str(&item.payload) {
            Ok(n) => n,
            Err(e) => return Attempt::GiveUp(format!("unreadable outbox row: {e}")),
        };
        let links = match &news.approval {
            Some(a) => match self.inner.app.approval(&a.id).await {
                Ok(found) if found.state != "pending" => {
                    return Attempt::Skip(format!(
                        "the approval was {} before it could be delivered",
                        found.state
                    ))
                }
                Ok(found) => self.links(target, &news, found.expires_at),
                Err(e) => return Attempt::Again(format!("cannot read the approval: {e}")),
            },
            None => None,
        };
        let task_url = format!("{}/tasks/{}", self.inner.base_url, news.task_id);
        let request = match &target.kind {
            NotifyKind::Webhook { url, secret } => {
                let body = news::webhook_body(
                    &item.id,
                    &news,
                    &task_url,
                    target.person.as_deref(),
                    links.as_ref(),
                );
                let body = serde_json::to_vec(&body).unwrap_or_default();
                let timestamp = now_ms() / 1000;
                self.inner
                    .client
                    .post(url)
                    .header("content-type", "application/json")
                    .header(sign::DELIVERY_HEADER, &item.id)
                    .header(sign::EVENT_HEADER, &news.event)
                    .header(sign::TIMESTAMP_HEADER, timestamp.to_string())
                    .header(
                        sign::SIGNATURE_HEADER,
                        sign::signature(secret.expose(), timestamp, &body),
                    )
                    .body(body)
            }
            NotifyKind::Ntfy { url, topic, token } => {
                let body = news::ntfy_publish(topic, &news, &task_url, links.as_ref());
                let mut r = self.inner.client.post(format!("{url}/")).json(&body);
                if let Some(t) = token {
                    r = r.bearer_auth(t.expose());
                }
                r
            }
        };
        match request.send().await {
            Ok(r) if r.status().is_success() => Attempt::Delivered,
            Ok(r) => {
                let status = r.status();
                let said = r.text().await.unwrap_or_default();
                let why = format!("HTTP {status}: {}", news::clip(said.trim(), 200));
                if status.is_server_error() || status.as_u16() == 429 || status.as_u16() == 408 {
                    Attempt::Again(why)
                } else {
                    Attempt::GiveUp(why)
                }
            }
            // Without the URL: it may carry a token.
            Err(e) if e.is_timeout() => Attempt::Again("timed out".into()),
            Err(e) if e.is_connect() => {
                Attempt::Again(format!("cannot connect: {}", e.without_url()))
            }
            Err(e) => Attempt::Again(e.without_url().to_string()),
        }
    }

    /// Approve / deny links for `target`'s person, expiring with the approval.
    fn links(
        &self,
        target: &NotifyTarget,
        news: &News,
        expires: Option<i64>,
    ) -> Option<news::Links> {
        let (key, person, approval) = (
            self.inner.links.as_ref()?,
            target.person.as_ref()?,
            news.approval.as_ref()?,
        );
        let now = now_ms();
        let max = now + link::MAX_AGE_MS;
        let expires_at = expires.map_or(max, |e| e.min(max));
        let link = |approve: bool| {
            Link {
                approval_id: approval.id.clone(),
                task_id: news.task_id.clone(),
                approve,
                target: target.name.clone(),
                channel: target.channel().to_owned(),
                person: person.clone(),
                issued_at: now,
                expires_at,
            }
            .url(&self.inner.base_url, key)
        };
        Some(news::Links {
            approve: link(true),
            deny: link(false),
            expires_at,
        })
    }
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
        };
        let waits: Vec<u64> = (1..=7).map(|n| r.backoff(n).as_secs()).collect();
        assert_eq!(waits, [2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(r.backoff(200), Duration::from_secs(60));
    }
}
