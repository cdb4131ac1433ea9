//! The deliverer: claim due outbox rows, send each once, record how it went.

use crate::news::{self, Commands, News};
use crate::{link, sign, Link, Notifier};
use gaffer_config::{NotifyKind, NotifyTarget};
use gaffer_store::{now_ms, NotifyItem};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Rows claimed at a time.
const BATCH: i64 = 16;
/// The longest the deliverer sleeps without looking (a missed wake only).
const IDLE_MAX: Duration = Duration::from_secs(30);
/// The shortest: a row due but claimed this instant by another deliverer is
/// looked at again after this.
const IDLE_MIN: Duration = Duration::from_millis(50);

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
    pub(crate) async fn deliver_loop(self, stop: CancellationToken) {
        let journal = self.inner.app.journal().clone();
        let lease_ms = self.inner.retry.lease_ms();
        loop {
            let claimed = match journal.notify_claim(lease_ms, BATCH).await {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(error = %e, "notify: cannot claim from the outbox");
                    Vec::new()
                }
            };
            if claimed.is_empty() {
                let wait = self.until_due().await;
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = self.inner.wake.notified() => {}
                    () = tokio::time::sleep(wait) => {}
                }
                continue;
            }
            let mut claimed = claimed.into_iter();
            for item in claimed.by_ref() {
                self.deliver(item).await;
                if stop.is_cancelled() {
                    break;
                }
            }
            // Claimed but not tried before stopping: released for whoever runs next.
            self.release(claimed).await;
            if stop.is_cancelled() {
                return;
            }
        }
    }

    /// Enqueue what the journal tells up to now and deliver what is due, for at
    /// most about `within` (plus one attempt's timeout): a command about to exit
    /// (`gaffer run` after its task ended) sends the end before it goes. What is
    /// not delivered by then (a receiver down) stays pending for the next notifier;
    /// returns how many are pending.
    pub async fn flush(&self, within: Duration) -> usize {
        let journal = self.inner.app.journal().clone();
        let deadline = tokio::time::Instant::now() + within;
        if let Ok(mut cursor) = journal.notify_cursor().await {
            while let Ok(Some(followed)) = self.follow_once(cursor, true).await {
                cursor = followed.pos;
            }
        }
        let lease_ms = self.inner.retry.lease_ms();
        while tokio::time::Instant::now() < deadline {
            let Ok(claimed) = journal.notify_claim(lease_ms, BATCH).await else {
                break;
            };
            if claimed.is_empty() {
                break;
            }
            let mut claimed = claimed.into_iter();
            for item in claimed.by_ref() {
                self.deliver(item).await;
                if tokio::time::Instant::now() >= deadline {
                    break;
                }
            }
            self.release(claimed).await;
        }
        match journal.notify_outbox(1000).await {
            Ok(rows) => rows.iter().filter(|i| i.state == "pending").count(),
            Err(_) => 0,
        }
    }

    /// Give claimed rows not tried back, due now, for whoever runs next.
    async fn release(&self, left: impl Iterator<Item = NotifyItem>) {
        for mut item in left {
            let claim = item.next_at;
            item.next_at = now_ms();
            let _ = self.inner.app.journal().notify_update(&item, claim).await;
        }
    }

    /// How long until the next pending row comes due (a retry, or the end of
    /// another deliverer's claim).
    async fn until_due(&self) -> Duration {
        let next = match self.inner.app.journal().notify_next_at().await {
            Ok(Some(at)) => at,
            Ok(None) => return IDLE_MAX,
            Err(e) => {
                tracing::warn!(error = %e, "notify: cannot read the outbox");
                return IDLE_MAX;
            }
        };
        let ms = u64::try_from(next.saturating_sub(now_ms())).unwrap_or(0);
        Duration::from_millis(ms).clamp(IDLE_MIN, IDLE_MAX)
    }

    /// Try `item` (claimed until its `next_at`) once and record how it went.
    async fn deliver(&self, mut item: NotifyItem) {
        let claim = item.next_at;
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
        match self.inner.app.journal().notify_update(&item, claim).await {
            Ok(true) => {}
            // Held past its lease (a stalled process): another deliverer took it over.
            Ok(false) => {
                tracing::info!(delivery = %item.id, "notify: the claim had lapsed; another deliverer has the row")
            }
            Err(e) => {
                tracing::warn!(delivery = %item.id, error = %e, "notify: cannot record a delivery")
            }
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
        // Links only to a server that is there now; without one, none at all.
        let server = self.inner.reach.server.now().await;
        let links = match &news.approval {
            Some(a) => match self.inner.app.approval(&a.id).await {
                Ok(found) if found.state != "pending" => {
                    return Attempt::Skip(format!(
                        "the approval was {} before it could be delivered",
                        found.state
                    ))
                }
                Ok(found) => server
                    .as_deref()
                    .and_then(|base| self.links(base, target, &news, found.expires_at)),
                Err(e) => return Attempt::Again(format!("cannot read the approval: {e}")),
            },
            None => None,
        };
        let task_url = server.map(|base| format!("{base}/tasks/{}", news.task_id));
        let commands = news
            .approval
            .as_ref()
            .map(|a| Commands::new(&self.inner.reach.gaffer, &a.id));
        let shown = news::Shown {
            task_url: task_url.as_deref(),
            links: links.as_ref(),
            commands: commands.as_ref(),
        };
        let request = match &target.kind {
            NotifyKind::Webhook { url, secret } => {
                let body = news::webhook_body(&item.id, &news, target.person.as_deref(), &shown);
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
                let body = news::ntfy_publish(topic, &news, &shown);
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

    /// Approve / deny links on `base` for `target`'s person, expiring with the
    /// approval.
    fn links(
        &self,
        base: &str,
        target: &NotifyTarget,
        news: &News,
        expires: Option<i64>,
    ) -> Option<news::Links> {
        let (key, person, approval) = (
            self.inner.reach.links.as_ref()?,
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
            .url(base, key)
        };
        Some(news::Links {
            approve: link(true),
            deny: link(false),
            expires_at,
        })
    }
}
