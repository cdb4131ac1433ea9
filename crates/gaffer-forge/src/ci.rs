//! Waiting for CI: poll with exponential backoff and a time limit.

use std::time::{Duration, Instant};

use crate::api::{ApiError, CiState, CiStatus, Forge};

/// How to wait.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CiWait {
    /// First pause between polls.
    pub first_interval: Duration,
    /// Longest pause between polls (the pause doubles up to this).
    pub max_interval: Duration,
    /// Give up after this long ([`ApiError::CiTimedOut`]).
    pub timeout: Duration,
    /// Consecutive unreachable/5xx answers tolerated before giving up.
    pub max_transient_errors: u32,
    /// When no check at all has reported after this long, stop with
    /// [`ApiError::NoChecks`] (the repository probably has no CI for this branch).
    /// `None`: wait for the full `timeout`.
    pub no_checks_after: Option<Duration>,
}

impl Default for CiWait {
    /// 10 s, doubling to 2 min, for at most 1 h; no check at all after 10 min ends it.
    fn default() -> Self {
        Self {
            first_interval: Duration::from_secs(10),
            max_interval: Duration::from_secs(120),
            timeout: Duration::from_secs(3600),
            max_transient_errors: 5,
            no_checks_after: Some(Duration::from_secs(600)),
        }
    }
}

fn signature(s: &CiStatus) -> Vec<(String, CiState)> {
    let mut v: Vec<_> = s.checks.iter().map(|c| (c.name.clone(), c.state)).collect();
    v.sort();
    v.push((String::new(), s.state));
    v
}

/// Poll `sha`'s CI until it is final (success, failure or error with at least one
/// check), calling `on_change` with the first state and every change (overall state or
/// any check's state) so the engine can journal it. Read-only: after a crash, call it
/// again. Rate limits are waited out; unreachable or 5xx answers are retried up to
/// `limits.max_transient_errors` times in a row.
pub async fn wait_for_ci(
    forge: &dyn Forge,
    sha: &str,
    limits: &CiWait,
    mut on_change: impl FnMut(&CiStatus) + Send,
) -> Result<CiStatus, ApiError> {
    let start = Instant::now();
    let mut interval = limits.first_interval;
    let mut last: Option<CiStatus> = None;
    let mut transient = 0;
    loop {
        let mut pause = interval;
        match forge.ci_status(sha).await {
            Ok(status) => {
                transient = 0;
                if last.as_ref().map(signature) != Some(signature(&status)) {
                    on_change(&status);
                }
                if status.state.is_final() {
                    return Ok(status);
                }
                if status.checks.is_empty()
                    && limits.no_checks_after.is_some_and(|d| start.elapsed() >= d)
                {
                    return Err(ApiError::NoChecks {
                        sha: sha.into(),
                        waited: start.elapsed(),
                    });
                }
                last = Some(status);
                interval = (interval * 2).min(limits.max_interval);
            }
            Err(ApiError::RateLimited { retry_after, .. }) => pause = pause.max(retry_after),
            Err(e @ (ApiError::Unreachable { .. } | ApiError::Http { .. })) => {
                transient += 1;
                if transient > limits.max_transient_errors {
                    return Err(e);
                }
            }
            Err(e) => return Err(e),
        }
        let waited = start.elapsed();
        if waited + pause > limits.timeout {
            // Sleep out what is left, and look one last time.
            let rest = limits.timeout.saturating_sub(waited);
            tokio::time::sleep(rest).await;
            if let Ok(status) = forge.ci_status(sha).await {
                if last.as_ref().map(signature) != Some(signature(&status)) {
                    on_change(&status);
                }
                if status.state.is_final() {
                    return Ok(status);
                }
                last = Some(status);
            }
            return Err(ApiError::CiTimedOut {
                sha: sha.into(),
                waited: start.elapsed(),
                last: last.map(|s| s.state).unwrap_or(CiState::Pending),
            });
        }
        tokio::time::sleep(pause).await;
    }
}
