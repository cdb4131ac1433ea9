//! `[watchdog]` (when a running agent looks stuck) and `[budget]` (spending caps),
//! global and per project (`[projects.<name>.watchdog]`, `[projects.<name>.budget]`,
//! key by key over the global ones). Every threshold is a positive number or
//! `"off"`; durations are written the way people say them (`"10m"`, `"90s"`,
//! `"1h30m"`; a bare number is minutes).

use crate::{invalid, ConfigError};
use serde::Deserialize;
use std::time::Duration;

/// When a running agent turn looks stuck: each trigger that is set raises one
/// `stall` approval. `None` turns a trigger off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Watchdog {
    /// No agent activity (text, tool call, result, usage) for this long during a turn.
    pub idle: Option<Duration>,
    /// A turn running longer than this.
    pub turn: Option<Duration>,
    /// The same tool call with the same input this many times in one session.
    pub repeated_calls: Option<u32>,
    /// The same failing read or search (same tool, same input, an error each time)
    /// this many times in one session.
    pub repeated_failures: Option<u32>,
    /// Tokens spent by a writing role's session since its last file change (or
    /// its start) past this many.
    pub tokens_without_change: Option<u64>,
}

impl Default for Watchdog {
    /// On, with thresholds a person would call stuck: seed 004's agent repeated one
    /// failed search 15 times and one failed read 7 times.
    fn default() -> Self {
        Self {
            idle: Some(Duration::from_secs(10 * 60)),
            turn: Some(Duration::from_secs(60 * 60)),
            repeated_calls: Some(5),
            repeated_failures: Some(3),
            tokens_without_change: Some(500_000),
        }
    }
}

impl Watchdog {
    /// Every trigger off.
    pub const OFF: Self = Self {
        idle: None,
        turn: None,
        repeated_calls: None,
        repeated_failures: None,
        tokens_without_change: None,
    };
}

/// Spending caps: reaching one pauses the task with a `budget` approval. `None`:
/// no cap.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Budget {
    /// Tokens one task may spend.
    pub task_tokens: Option<u64>,
    /// US dollars one task may spend.
    pub task_usd: Option<f64>,
    /// Tokens the project's tasks may spend in one UTC day.
    pub project_day_tokens: Option<u64>,
    /// US dollars the project's tasks may spend in one UTC day.
    pub project_day_usd: Option<f64>,
}

impl Budget {
    /// Whether any cap is set.
    pub fn any(&self) -> bool {
        self.task_tokens.is_some()
            || self.task_usd.is_some()
            || self.project_day_tokens.is_some()
            || self.project_day_usd.is_some()
    }
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawWatchdog {
    idle: Option<toml::Value>,
    turn: Option<toml::Value>,
    repeated_calls: Option<toml::Value>,
    repeated_failures: Option<toml::Value>,
    tokens_without_change: Option<toml::Value>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawBudget {
    task_tokens: Option<toml::Value>,
    task_usd: Option<toml::Value>,
    project_day_tokens: Option<toml::Value>,
    project_day_usd: Option<toml::Value>,
}

/// `raw` (at `section`, like `watchdog` or `projects.web.watchdog`) over `base`.
pub(crate) fn watchdog(
    origin: &str,
    section: &str,
    base: Watchdog,
    raw: RawWatchdog,
) -> Result<Watchdog, ConfigError> {
    let field = |k: &str| format!("{section}.{k}");
    let mut w = base;
    if let Some(v) = raw.idle {
        w.idle = duration(origin, &field("idle"), &v)?;
    }
    if let Some(v) = raw.turn {
        w.turn = duration(origin, &field("turn"), &v)?;
    }
    if let Some(v) = raw.repeated_calls {
        w.repeated_calls = count(origin, &field("repeated_calls"), &v, 2)?
            .map(|n| u32::try_from(n).unwrap_or(u32::MAX));
    }
    if let Some(v) = raw.repeated_failures {
        w.repeated_failures = count(origin, &field("repeated_failures"), &v, 2)?
            .map(|n| u32::try_from(n).unwrap_or(u32::MAX));
    }
    if let Some(v) = raw.tokens_without_change {
        w.tokens_without_change = count(origin, &field("tokens_without_change"), &v, 1)?;
    }
    Ok(w)
}

/// `raw` (at `section`, like `budget` or `projects.web.budget`) over `base`.
pub(crate) fn budget(
    origin: &str,
    section: &str,
    base: Budget,
    raw: RawBudget,
) -> Result<Budget, ConfigError> {
    let field = |k: &str| format!("{section}.{k}");
    let mut b = base;
    if let Some(v) = raw.task_tokens {
        b.task_tokens = count(origin, &field("task_tokens"), &v, 1)?;
    }
    if let Some(v) = raw.task_usd {
        b.task_usd = usd(origin, &field("task_usd"), &v)?;
    }
    if let Some(v) = raw.project_day_tokens {
        b.project_day_tokens = count(origin, &field("project_day_tokens"), &v, 1)?;
    }
    if let Some(v) = raw.project_day_usd {
        b.project_day_usd = usd(origin, &field("project_day_usd"), &v)?;
    }
    Ok(b)
}

fn is_off(v: &toml::Value) -> bool {
    v.as_str()
        .is_some_and(|s| s.trim().eq_ignore_ascii_case("off"))
}

/// A whole number of at least `min`, or `"off"`.
fn count(origin: &str, field: &str, v: &toml::Value, min: u64) -> Result<Option<u64>, ConfigError> {
    if is_off(v) {
        return Ok(None);
    }
    match v.as_integer().and_then(|n| u64::try_from(n).ok()) {
        Some(n) if n >= min => Ok(Some(n)),
        _ => Err(invalid(
            origin,
            field,
            format!("is `{v}`; use a whole number of at least {min}, or \"off\""),
        )),
    }
}

/// Dollars: a number above 0, or `"off"`.
fn usd(origin: &str, field: &str, v: &toml::Value) -> Result<Option<f64>, ConfigError> {
    if is_off(v) {
        return Ok(None);
    }
    let n = v.as_float().or_else(|| v.as_integer().map(|i| i as f64));
    match n {
        Some(n) if n.is_finite() && n > 0.0 => Ok(Some(n)),
        _ => Err(invalid(
            origin,
            field,
            format!("is `{v}`; use an amount of US dollars above 0, like 5 or 2.5, or \"off\""),
        )),
    }
}

/// A duration: `"10m"`, `"90s"`, `"1h30m"`, `"2.5m"`, a bare number of minutes, or `"off"`.
fn duration(origin: &str, field: &str, v: &toml::Value) -> Result<Option<Duration>, ConfigError> {
    if is_off(v) {
        return Ok(None);
    }
    let parsed = match v {
        toml::Value::Integer(m) => u64::try_from(*m)
            .ok()
            .map(|m| Duration::from_secs(m.saturating_mul(60))),
        toml::Value::Float(m) if m.is_finite() && *m >= 0.0 => {
            Duration::try_from_secs_f64(m * 60.0).ok()
        }
        toml::Value::String(s) => parse_duration(s),
        _ => None,
    };
    match parsed {
        Some(d) if !d.is_zero() => Ok(Some(d)),
        _ => Err(invalid(
            origin,
            field,
            format!("is `{v}`; write a duration above zero like \"10m\", \"90s\" or \"1h30m\" (a bare number is minutes), or \"off\""),
        )),
    }
}

/// `"1h30m"`, `"10m"`, `"2.5s"`: numbers each followed by `h`, `m` or `s`.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    let mut total = 0.0_f64;
    let mut number = String::new();
    for c in text.chars() {
        if c.is_ascii_digit() || c == '.' {
            number.push(c);
            continue;
        }
        let unit = match c {
            'h' => 3600.0,
            'm' => 60.0,
            's' => 1.0,
            _ => return None,
        };
        let n: f64 = number.parse().ok()?;
        total += n * unit;
        number.clear();
    }
    if !number.is_empty() {
        return None;
    }
    Duration::try_from_secs_f64(total).ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn durations_read_the_way_people_write_them() {
        assert_eq!(parse_duration("10m"), Some(Duration::from_secs(600)));
        assert_eq!(parse_duration("90s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("1h30m"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_duration("2.5m"), Some(Duration::from_secs(150)));
        assert_eq!(parse_duration(" 2s "), Some(Duration::from_secs(2)));
        for bad in ["", "10", "m", "10 m", "1d", "-5m", "1.2.3s", "ten minutes"] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
    }
}
