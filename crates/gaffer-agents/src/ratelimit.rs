//! Rate limits per provider and model: requests per minute (GCRA), requests per day
//! (counters persisted through [`CounterStore`], so a restart does not reset them),
//! optional tokens per minute, and jittered backoff for `429` / `Retry-After`.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use tokio::time::Instant;

use crate::error::{AgentError, Result};

/// Persisted daily counters. The store crate implements this on SQLite; tests use
/// [`MemoryCounterStore`].
#[async_trait]
pub trait CounterStore: Send + Sync {
    /// Current count of `key` on `day` (`YYYY-MM-DD`, UTC); 0 when absent.
    async fn get(&self, key: &str, day: &str) -> Result<u64>;
    /// Add `by` to the count of `key` on `day` and return the new count.
    async fn add(&self, key: &str, day: &str, by: u64) -> Result<u64>;
}

/// In-memory [`CounterStore`].
#[derive(Debug, Default)]
pub struct MemoryCounterStore {
    counts: Mutex<HashMap<(String, String), u64>>,
}

#[async_trait]
impl CounterStore for MemoryCounterStore {
    async fn get(&self, key: &str, day: &str) -> Result<u64> {
        let m = self
            .counts
            .lock()
            .map_err(|_| AgentError::Counters("poisoned".into()))?;
        Ok(m.get(&(key.to_string(), day.to_string()))
            .copied()
            .unwrap_or(0))
    }
    async fn add(&self, key: &str, day: &str, by: u64) -> Result<u64> {
        let mut m = self
            .counts
            .lock()
            .map_err(|_| AgentError::Counters("poisoned".into()))?;
        let c = m.entry((key.to_string(), day.to_string())).or_insert(0);
        *c += by;
        Ok(*c)
    }
}

/// Limits for one provider + model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimits {
    /// Requests per minute (default 120).
    pub rpm: u32,
    /// Requests per day (default 2,000), persisted.
    pub rpd: u64,
    /// Optional tokens per minute.
    pub tpm: Option<u64>,
}

impl Default for RateLimits {
    fn default() -> Self {
        RateLimits {
            rpm: 120,
            rpd: 2_000,
            tpm: None,
        }
    }
}

/// Why a request must wait, and until when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wait {
    /// Wall-clock end of the wait.
    pub until: SystemTime,
    /// Monotonic duration of the wait.
    pub delay: Duration,
    /// `rpm`, `rpd` or `tpm`.
    pub reason: &'static str,
}

struct Inner {
    tat: Option<Instant>,
    tokens: VecDeque<(Instant, u64)>,
}

/// The limiter of one provider + model.
pub struct RateLimiter {
    key: String,
    limits: RateLimits,
    store: std::sync::Arc<dyn CounterStore>,
    inner: Mutex<Inner>,
}

/// `YYYY-MM-DD` (UTC) of a time.
pub fn utc_day(t: SystemTime) -> String {
    let s = humantime::format_rfc3339_seconds(t).to_string();
    s.get(..10).unwrap_or("1970-01-01").to_string()
}

fn next_utc_midnight(t: SystemTime) -> SystemTime {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    SystemTime::UNIX_EPOCH + Duration::from_secs((secs / 86_400 + 1) * 86_400)
}

impl RateLimiter {
    /// A limiter for `key` (`provider:model`).
    pub fn new(
        key: impl Into<String>,
        limits: RateLimits,
        store: std::sync::Arc<dyn CounterStore>,
    ) -> Self {
        RateLimiter {
            key: key.into(),
            limits,
            store,
            inner: Mutex::new(Inner {
                tat: None,
                tokens: VecDeque::new(),
            }),
        }
    }

    /// The limiter's key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Take one request slot if allowed now (counting it, persistently for the day), or
    /// say how long to wait (taking nothing).
    pub async fn check(&self) -> Result<Option<Wait>> {
        let now_sys = SystemTime::now();
        let day = utc_day(now_sys);
        let used = self.store.get(&self.key, &day).await?;
        if used >= self.limits.rpd {
            let until = next_utc_midnight(now_sys);
            let delay = until.duration_since(now_sys).unwrap_or_default();
            return Ok(Some(Wait {
                until,
                delay,
                reason: "rpd",
            }));
        }
        {
            let mut g = self
                .inner
                .lock()
                .map_err(|_| AgentError::Counters("limiter poisoned".into()))?;
            let now = Instant::now();
            if let Some(tpm) = self.limits.tpm {
                while g
                    .tokens
                    .front()
                    .is_some_and(|(t, _)| now.duration_since(*t) >= Duration::from_secs(60))
                {
                    g.tokens.pop_front();
                }
                let sum: u64 = g.tokens.iter().map(|(_, n)| n).sum();
                if sum >= tpm {
                    if let Some((t, _)) = g.tokens.front() {
                        let delay = Duration::from_secs(60).saturating_sub(now.duration_since(*t));
                        return Ok(Some(Wait {
                            until: now_sys + delay,
                            delay,
                            reason: "tpm",
                        }));
                    }
                }
            }
            // GCRA: emission interval T = 60 s / rpm, burst tolerance = 60 s - T.
            let t = Duration::from_secs(60) / self.limits.rpm.max(1);
            let tau = Duration::from_secs(60).saturating_sub(t);
            let tat = g.tat.unwrap_or(now).max(now);
            let ahead = tat.duration_since(now);
            if ahead > tau {
                let delay = ahead - tau;
                return Ok(Some(Wait {
                    until: now_sys + delay,
                    delay,
                    reason: "rpm",
                }));
            }
            g.tat = Some(tat + t);
        }
        self.store.add(&self.key, &day, 1).await?;
        Ok(None)
    }

    /// Record tokens used by a request (for the optional tokens-per-minute limit).
    pub fn record_tokens(&self, n: u64) {
        if self.limits.tpm.is_some() {
            if let Ok(mut g) = self.inner.lock() {
                g.tokens.push_back((Instant::now(), n));
            }
        }
    }
}

/// Delay before retry `attempt` (1-based) after a 429: the server's `Retry-After` when
/// given, else exponential from 500 ms (capped at 60 s); plus up to 25 % random jitter.
pub fn backoff_delay(attempt: u32, retry_after: Option<Duration>) -> Duration {
    use rand::Rng;
    let base = retry_after.unwrap_or_else(|| {
        let exp = 500u64.saturating_mul(1u64 << attempt.saturating_sub(1).min(10));
        Duration::from_millis(exp.min(60_000))
    });
    let jitter_max = (base.as_millis() as u64 / 4).max(20);
    base + Duration::from_millis(rand::thread_rng().gen_range(0..=jitter_max))
}

/// Parse a `Retry-After` header: delta seconds or an HTTP date.
pub fn parse_retry_after(v: &str) -> Option<Duration> {
    let v = v.trim();
    if let Ok(s) = v.parse::<u64>() {
        return Some(Duration::from_secs(s));
    }
    if let Ok(f) = v.parse::<f64>() {
        if f.is_finite() && f >= 0.0 {
            return Some(Duration::from_secs_f64(f));
        }
    }
    let t = httpdate::parse_http_date(v).ok()?;
    Some(t.duration_since(SystemTime::now()).unwrap_or_default())
}

/// One shared [`RateLimiter`] per provider + model, all persisting through one store.
pub struct Limiters {
    store: std::sync::Arc<dyn CounterStore>,
    defaults: RateLimits,
    overrides: HashMap<String, RateLimits>,
    map: Mutex<HashMap<String, std::sync::Arc<RateLimiter>>>,
}

impl Limiters {
    /// Limiters with `defaults` for every provider/model without an override.
    pub fn new(store: std::sync::Arc<dyn CounterStore>, defaults: RateLimits) -> Self {
        Limiters {
            store,
            defaults,
            overrides: HashMap::new(),
            map: Mutex::new(HashMap::new()),
        }
    }
    /// Configure the limits of one provider + model.
    pub fn set_limits(&mut self, provider: &str, model: &str, limits: RateLimits) {
        self.overrides.insert(format!("{provider}:{model}"), limits);
    }
    /// The limiter of a provider + model (created on first use).
    pub fn get(&self, provider: &str, model: &str) -> std::sync::Arc<RateLimiter> {
        let key = format!("{provider}:{model}");
        let mut m = match self.map.lock() {
            Ok(m) => m,
            Err(p) => p.into_inner(),
        };
        m.entry(key.clone())
            .or_insert_with(|| {
                let limits = self.overrides.get(&key).copied().unwrap_or(self.defaults);
                std::sync::Arc::new(RateLimiter::new(key, limits, self.store.clone()))
            })
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test(start_paused = true)]
    async fn rpm_gcra_allows_burst_then_spaces() {
        let l = RateLimiter::new(
            "p:m",
            RateLimits {
                rpm: 2,
                rpd: 100,
                tpm: None,
            },
            Arc::new(MemoryCounterStore::default()),
        );
        assert!(l.check().await.unwrap().is_none());
        assert!(l.check().await.unwrap().is_none());
        let w = l.check().await.unwrap().unwrap();
        assert_eq!(w.reason, "rpm");
        assert!(
            w.delay > Duration::from_secs(25) && w.delay <= Duration::from_secs(30),
            "{w:?}"
        );
        tokio::time::advance(w.delay).await;
        assert!(l.check().await.unwrap().is_none());
    }

    #[tokio::test]
    async fn daily_counter_survives_a_restart() {
        let store: Arc<dyn CounterStore> = Arc::new(MemoryCounterStore::default());
        let limits = RateLimits {
            rpm: 1000,
            rpd: 2,
            tpm: None,
        };
        let l = RateLimiter::new("p:m", limits, store.clone());
        assert!(l.check().await.unwrap().is_none());
        assert!(l.check().await.unwrap().is_none());
        drop(l);
        let l2 = RateLimiter::new("p:m", limits, store.clone());
        let w = l2.check().await.unwrap().unwrap();
        assert_eq!(w.reason, "rpd");
        assert_eq!(
            utc_day(w.until),
            utc_day(SystemTime::now() + Duration::from_secs(86_400))
        );
        // Another model has its own counter.
        let other = RateLimiter::new("p:other", limits, store);
        assert!(other.check().await.unwrap().is_none());
    }

    #[test]
    fn backoff_honours_retry_after_with_bounded_jitter() {
        for _ in 0..50 {
            let d = backoff_delay(1, Some(Duration::from_secs(2)));
            assert!(
                d >= Duration::from_secs(2) && d <= Duration::from_millis(2500),
                "{d:?}"
            );
        }
        assert!(backoff_delay(3, None) >= Duration::from_secs(2));
        assert_eq!(parse_retry_after("7"), Some(Duration::from_secs(7)));
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon"), None);
    }

    #[tokio::test]
    async fn limiters_share_one_limiter_per_provider_model() {
        let mut l = Limiters::new(
            Arc::new(MemoryCounterStore::default()),
            RateLimits::default(),
        );
        l.set_limits(
            "openai",
            "small",
            RateLimits {
                rpm: 1000,
                rpd: 1,
                tpm: None,
            },
        );
        let a = l.get("openai", "small");
        let b = l.get("openai", "small");
        assert!(Arc::ptr_eq(&a, &b));
        assert!(a.check().await.unwrap().is_none());
        assert_eq!(b.check().await.unwrap().unwrap().reason, "rpd");
        assert!(l.get("openai", "big").check().await.unwrap().is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn tokens_per_minute_limit_waits_for_the_window() {
        let l = RateLimiter::new(
            "p:m",
            RateLimits {
                rpm: 1000,
                rpd: 1000,
                tpm: Some(100),
            },
            Arc::new(MemoryCounterStore::default()),
        );
        assert!(l.check().await.unwrap().is_none());
        l.record_tokens(150);
        let w = l.check().await.unwrap().unwrap();
        assert_eq!(w.reason, "tpm");
        tokio::time::advance(w.delay).await;
        assert!(l.check().await.unwrap().is_none());
    }
}
