//! Rendering for people and for scripts.

use serde::Serialize;
use std::io::Write;

/// Print a value as pretty JSON on stdout.
pub fn json<T: Serialize>(value: &T) -> crate::error::Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, value)
        .map_err(|e| crate::error::CliError::failed(e.to_string()))?;
    writeln!(out)?;
    Ok(())
}

/// "3m ago", "2h ago", "5d ago" from a timestamp in ms.
pub fn age(at_ms: i64, now_ms: i64) -> String {
    let secs = (now_ms - at_ms).max(0) / 1000;
    match secs {
        s if s < 60 => format!("{s}s ago"),
        s if s < 3600 => format!("{}m ago", s / 60),
        s if s < 86_400 => format!("{}h ago", s / 3600),
        s => format!("{}d ago", s / 86_400),
    }
}

/// `2026-01-31T12:00:00Z` from a timestamp in ms.
pub fn utc(at_ms: i64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(at_ms.max(0) as u64);
    humantime::format_rfc3339_seconds(at).to_string()
}

/// Cut `text` to `max` characters on one line, marking the cut.
pub fn one_line(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        flat
    } else {
        let cut: String = flat.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}
