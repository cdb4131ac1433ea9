//! Newline-delimited framing of what an agent CLI writes on stdout, decoded without IO.
//!
//! Every agent backend reads its process through one [`LineDecoder`]: the bytes arrive in
//! whatever chunks the pipe delivers, the decoder hands out whole lines, and a line that is
//! not UTF-8 or grows past [`MAX_LINE_BYTES`] becomes a [`WireError`] naming the problem
//! instead of a panic, an unbounded buffer or a misreported exit. The message parsers
//! ([`crate::claude::parse_stream_line`], [`crate::jsonrpc::parse_rpc_line`]) take the
//! lines from here.

/// The longest line accepted from an agent. Claude Code and Codex put whole tool outputs
/// (file contents, command output) on one line, so this is generous; a line beyond it is
/// a runaway agent, not a message.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// Bytes of a bad line quoted in its error.
const SNIPPET_CHARS: usize = 120;

/// Why a line from an agent is not a message gaffer understands.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// The line's bytes are not UTF-8 (JSON on the wire must be).
    #[error("the line is not UTF-8 (invalid byte at offset {offset})")]
    NotUtf8 {
        /// Offset of the first invalid byte in the line.
        offset: usize,
    },
    /// The line is longer than the decoder's limit; the rest of it is skipped.
    #[error("the line is longer than {limit} bytes")]
    TooLong {
        /// The limit.
        limit: usize,
    },
    /// The line is not JSON.
    #[error("not JSON: {0}")]
    NotJson(String),
    /// The line is JSON but not a message of the protocol (says which field is wrong).
    #[error("{0}")]
    Shape(String),
}

impl WireError {
    pub(crate) fn shape(what: impl Into<String>) -> Self {
        WireError::Shape(what.into())
    }
}

/// Parse a line as one JSON value.
pub(crate) fn json_value(line: &str) -> Result<serde_json::Value, WireError> {
    serde_json::from_str(line).map_err(|e| WireError::NotJson(e.to_string()))
}

/// A line that could not be decoded: the problem and how it starts (for the error shown).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadLine {
    /// What is wrong with it.
    pub error: WireError,
    /// Its first characters (invalid bytes replaced).
    pub start: String,
}

/// Splits a byte stream into lines: `\n` or `\r\n` ends a line, blank lines are skipped,
/// and line numbers count every line the peer wrote (blank ones too) from 1.
#[derive(Debug)]
pub struct LineDecoder {
    buf: Vec<u8>,
    /// Where the first unreturned byte of `buf` is.
    start: usize,
    /// How far past `start` is known to hold no newline.
    scanned: usize,
    limit: usize,
    /// Skipping the rest of a line already reported as too long.
    discarding: bool,
    line_no: u64,
}

impl Default for LineDecoder {
    fn default() -> Self {
        Self::with_limit(MAX_LINE_BYTES)
    }
}

impl LineDecoder {
    /// A decoder that refuses lines longer than `limit` bytes.
    pub fn with_limit(limit: usize) -> Self {
        LineDecoder {
            buf: Vec::new(),
            start: 0,
            scanned: 0,
            limit,
            discarding: false,
            line_no: 0,
        }
    }

    /// Append bytes read from the peer.
    pub fn feed(&mut self, chunk: &[u8]) {
        self.buf.extend_from_slice(chunk);
    }

    /// How many lines were read so far, blank ones included: right after
    /// [`LineDecoder::next_line`] or [`LineDecoder::finish`] gave a line, its number.
    pub fn line_no(&self) -> u64 {
        self.line_no
    }

    /// The next complete, non-blank line fed so far, or `None` until more bytes arrive.
    /// A line longer than the limit is reported as soon as that many bytes are buffered
    /// (so memory stays bounded), and its remainder is skipped.
    pub fn next_line(&mut self) -> Option<Result<String, BadLine>> {
        loop {
            let pending = &self.buf[self.start..];
            match pending[self.scanned..].iter().position(|&b| b == b'\n') {
                Some(i) => {
                    let end = self.start + self.scanned + i;
                    let (from, was_discarding) = (self.start, self.discarding);
                    self.start = end + 1;
                    self.scanned = 0;
                    self.discarding = false;
                    if was_discarding {
                        continue;
                    }
                    if let Some(line) = self.take(from, end) {
                        return Some(line);
                    }
                }
                None => {
                    self.scanned = pending.len();
                    let overlong = !self.discarding && pending.len() > self.limit;
                    let report = overlong.then(|| self.too_long(self.start));
                    if overlong || self.discarding {
                        self.discarding = true;
                        self.start = self.buf.len();
                        self.scanned = 0;
                    }
                    self.buf.drain(..self.start);
                    self.start = 0;
                    return report;
                }
            }
        }
    }

    /// At the end of the stream: the last line when the peer did not end it with a
    /// newline.
    pub fn finish(&mut self) -> Option<Result<String, BadLine>> {
        let (from, end) = (self.start, self.buf.len());
        let discarding = std::mem::replace(&mut self.discarding, false);
        self.start = end;
        self.scanned = 0;
        if discarding || from == end {
            return None;
        }
        self.take(from, end)
    }

    /// The line in `buf[from..end]` (without its `\n`), or `None` when it is blank.
    fn take(&mut self, from: usize, end: usize) -> Option<Result<String, BadLine>> {
        self.line_no += 1;
        if end - from > self.limit {
            return Some(Err(self.bad(
                from,
                end,
                WireError::TooLong { limit: self.limit },
            )));
        }
        let mut bytes = &self.buf[from..end];
        if let Some(b) = bytes.strip_suffix(b"\r") {
            bytes = b;
        }
        match std::str::from_utf8(bytes) {
            Ok(s) if s.trim().is_empty() => None,
            Ok(s) => Some(Ok(s.to_owned())),
            Err(e) => {
                let offset = e.valid_up_to();
                Some(Err(self.bad(from, end, WireError::NotUtf8 { offset })))
            }
        }
    }

    fn too_long(&mut self, from: usize) -> Result<String, BadLine> {
        self.line_no += 1;
        let end = self.buf.len();
        Err(self.bad(from, end, WireError::TooLong { limit: self.limit }))
    }

    fn bad(&self, from: usize, end: usize, error: WireError) -> BadLine {
        let head = &self.buf[from..end.min(from + SNIPPET_CHARS * 4)];
        BadLine {
            error,
            start: snippet(&String::from_utf8_lossy(head)),
        }
    }
}

/// The first characters of a line, for an error message.
pub(crate) fn snippet(line: &str) -> String {
    line.chars().take(SNIPPET_CHARS).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(d: &mut LineDecoder) -> Vec<Result<String, WireError>> {
        let mut out = Vec::new();
        while let Some(l) = d.next_line() {
            out.push(l.map_err(|b| b.error));
        }
        out
    }

    #[test]
    fn lines_end_with_lf_or_crlf_and_blank_ones_are_skipped_but_counted() {
        let mut d = LineDecoder::default();
        d.feed(b"{\"a\":1}\r\n\n  \n{\"b\"");
        assert_eq!(d.next_line(), Some(Ok("{\"a\":1}".to_string())));
        assert_eq!(d.line_no(), 1);
        assert_eq!(all(&mut d), vec![]);
        assert_eq!(d.line_no(), 3, "the blank lines were read");
        d.feed(b":2}\nrest");
        assert_eq!(all(&mut d), vec![Ok("{\"b\":2}".to_string())]);
        assert_eq!(d.line_no(), 4);
        assert_eq!(
            d.finish().map(|l| l.map_err(|b| b.error)),
            Some(Ok("rest".into()))
        );
        assert_eq!(d.line_no(), 5);
        assert_eq!(d.finish(), None);
    }

    #[test]
    fn invalid_utf8_names_the_offset_and_the_next_line_still_decodes() {
        let mut d = LineDecoder::default();
        d.feed(b"ab\xffcd\nok\n");
        let first = d
            .next_line()
            .and_then(Result::err)
            .map(|b| (b.error, b.start));
        assert_eq!(
            first,
            Some((WireError::NotUtf8 { offset: 2 }, "ab\u{fffd}cd".to_string()))
        );
        assert_eq!(d.next_line(), Some(Ok("ok".to_string())));
    }

    #[test]
    fn an_overlong_line_is_refused_once_with_bounded_memory_and_skipped() {
        let mut d = LineDecoder::with_limit(8);
        d.feed(b"0123456789");
        assert_eq!(all(&mut d), vec![Err(WireError::TooLong { limit: 8 })]);
        for _ in 0..100 {
            d.feed(b"xxxxxxxxxxxxxxxx");
            assert_eq!(all(&mut d), vec![]);
            assert!(d.buf.len() <= 16, "the skipped line is not kept");
        }
        d.feed(b"tail\nnext\n");
        assert_eq!(all(&mut d), vec![Ok("next".to_string())]);
        assert_eq!(d.line_no(), 2);
    }
}
