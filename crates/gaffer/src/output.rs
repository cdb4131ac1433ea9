//! Rendering for people and for scripts.

use serde::Serialize;
use std::io::Write;
use unicode_width::UnicodeWidthStr;

/// Print a value as pretty JSON on stdout (serde escapes every control character).
pub fn json<T: Serialize>(value: &T) -> crate::error::Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, value).map_err(|e| {
        if e.io_error_kind() == Some(std::io::ErrorKind::BrokenPipe) {
            crate::error::CliError::from(std::io::Error::from(std::io::ErrorKind::BrokenPipe))
        } else {
            crate::error::CliError::failed(e.to_string())
        }
    })?;
    writeln!(out)?;
    Ok(())
}

/// "3m ago", "2h ago", "5d ago" from a timestamp in ms.
pub fn age(at_ms: i64, now_ms: i64) -> String {
    format!("{} ago", span((now_ms - at_ms).max(0) / 1000))
}

/// "45s", "12m", "3h", "5d": a duration in seconds, roughly.
pub fn span(secs: i64) -> String {
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86_400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

/// `2026-01-31T12:00:00Z` from a timestamp in ms.
pub fn utc(at_ms: i64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(at_ms.max(0) as u64);
    humantime::format_rfc3339_seconds(at).to_string()
}

/// `text` on one line of at most `max` columns: whitespace runs become one space,
/// control characters are shown escaped, and a cut is marked with `…`.
pub fn one_line(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    cut(&crate::term::line(&flat), max)
}

/// An error of several lines as a terminal shows it: its first line (what went
/// wrong) and its last `tail` lines (where a command's output says why: a failing
/// setup or check prints its reason last), the lines between counted. Each line is
/// escaped and cut to `max` columns.
pub fn error_lines(text: &str, tail: usize, max: usize) -> Vec<String> {
    let safe = crate::term::text(text.trim_end());
    let lines: Vec<String> = safe
        .lines()
        .map(|l| cut(&l.replace('\t', "    "), max))
        .collect();
    if lines.len() <= tail + 2 {
        return lines;
    }
    let mut out = vec![
        lines[0].clone(),
        format!("… {} lines left out", lines.len() - 1 - tail),
    ];
    out.extend_from_slice(&lines[lines.len() - tail..]);
    out
}

/// `text` (already safe to show) cut to `max` columns, marking the cut with `…`.
pub fn cut(text: &str, max: usize) -> String {
    if text.width() <= max {
        return text.to_owned();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in text.chars() {
        let w = unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
        if used + w + 1 > max {
            break;
        }
        used += w;
        out.push(c);
    }
    out.push('…');
    out
}

/// `text` padded with spaces to `width` columns.
pub fn pad(text: &str, width: usize) -> String {
    let w = text.width();
    format!("{text}{}", " ".repeat(width.saturating_sub(w)))
}

/// `1234567` → `1.2M`, `12345` → `12.3k`: token counts at a glance.
pub fn count(n: u64) -> String {
    match n {
        n if n >= 1_000_000 => format!("{:.1}M", n as f64 / 1e6),
        n if n >= 10_000 => format!("{:.1}k", n as f64 / 1e3),
        n => n.to_string(),
    }
}

/// A table whose columns are as wide as their widest cell; the last column takes
/// what is left of `width` (cut with `…`), or all it needs without a width.
pub fn table(header: &[&str], rows: &[Vec<String>], width: Option<usize>) -> Vec<String> {
    let columns = header.len();
    let mut widths: Vec<usize> = header.iter().map(|h| h.width()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate().take(columns) {
            widths[i] = widths[i].max(cell.width());
        }
    }
    let fixed: usize = widths[..columns - 1].iter().map(|w| w + 2).sum();
    let last = width.map(|w| w.saturating_sub(fixed).max(10));
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == columns {
                match last {
                    Some(max) => out.push_str(&cut(cell, max)),
                    None => out.push_str(cell),
                }
            } else {
                out.push_str(&pad(cell, widths[i]));
                out.push_str("  ");
            }
        }
        out.trim_end().to_owned()
    };
    std::iter::once(line(header.to_vec()))
        .chain(
            rows.iter()
                .map(|r| line(r.iter().map(String::as_str).collect())),
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn one_line_flattens_escapes_and_cuts_by_columns() {
        assert_eq!(one_line("a\n  b\x1b[2Jc", 80), "a b\\x1b[2Jc");
        assert_eq!(one_line("abcdef", 4), "abc…");
        assert_eq!(one_line("日本語です", 5), "日本…");
    }

    /// A failing setup command's error: the message first, then the output's
    /// tail, whose last line says why. Flattened or cut to its head (as it was),
    /// that line was lost.
    #[test]
    fn an_error_keeps_its_first_line_and_the_end_of_the_output_line_by_line() {
        let output: String = (1..=40).map(|i| format!("npm http fetch {i}\n")).collect();
        let error = format!(
            "setup command `npm ci` failed (exit code 1); fix it in [projects.web] setup or in the repository, then retry the task. Its output:\n{output}npm ERR! missing: left-pad@1.3.0\n"
        );
        let lines = error_lines(&error, 3, 300);
        assert_eq!(
            lines,
            [
                "setup command `npm ci` failed (exit code 1); fix it in [projects.web] setup or in the repository, then retry the task. Its output:",
                "… 38 lines left out",
                "npm http fetch 39",
                "npm http fetch 40",
                "npm ERR! missing: left-pad@1.3.0",
            ]
        );
        // Short: every line, escaped.
        assert_eq!(
            error_lines("boom\n\x1b[2Jgone", 3, 80),
            ["boom", "\\x1b[2Jgone"]
        );
    }

    #[test]
    fn a_table_fits_its_width() {
        let rows = vec![
            vec![
                "t-1".into(),
                "done".into(),
                "a long request that goes on".into(),
            ],
            vec!["t-22".into(), "coding".into(), "short".into()],
        ];
        assert_eq!(
            table(&["ID", "STAGE", "REQUEST"], &rows, Some(26)),
            [
                "ID    STAGE   REQUEST",
                "t-1   done    a long requ…",
                "t-22  coding  short",
            ]
        );
    }
}
