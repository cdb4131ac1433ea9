//! Fake agent executables. Each `main` is called by a tiny binary in `src/bin/`.

pub mod acp;
pub mod claude;
pub mod codex;

use std::io::{BufRead, Write};

use serde_json::Value;

/// Line-oriented stdio shared by the fakes.
pub(crate) struct Io {
    input: std::io::Lines<std::io::StdinLock<'static>>,
    out: std::io::BufWriter<std::io::StdoutLock<'static>>,
    /// Messages read while waiting for something else, replayed first.
    pub(crate) queue: std::collections::VecDeque<Value>,
}

impl Io {
    pub(crate) fn new() -> Self {
        Io {
            input: std::io::stdin().lock().lines(),
            out: std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout().lock()),
            queue: Default::default(),
        }
    }
    /// Next JSON message from stdin (queued first). `None` at EOF. Exits 2 on bad JSON.
    pub(crate) fn read(&mut self) -> Option<Value> {
        if let Some(v) = self.queue.pop_front() {
            return Some(v);
        }
        self.read_wire()
    }
    pub(crate) fn read_wire(&mut self) -> Option<Value> {
        loop {
            let line = self.input.next()?.ok()?;
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str(&line) {
                Ok(v) => return Some(v),
                Err(e) => fail(&format!("invalid JSON on stdin: {e}: {line}")),
            }
        }
    }
    pub(crate) fn send(&mut self, v: &Value) {
        let _ = serde_json::to_writer(&mut self.out, v);
        let _ = self.out.write_all(b"\n");
        let _ = self.out.flush();
    }
    pub(crate) fn send_raw_unflushed(&mut self, line: &str) {
        let _ = self.out.write_all(line.as_bytes());
        let _ = self.out.write_all(b"\n");
    }
    pub(crate) fn send_bytes(&mut self, bytes: &[u8]) {
        let _ = self.out.write_all(bytes);
        let _ = self.out.flush();
    }
    pub(crate) fn flush(&mut self) {
        let _ = self.out.flush();
    }
}

/// Log the names (never the values) of the environment variables the fake was started
/// with, sorted: a test can check a credential was delivered by environment while the
/// `spawn` line shows it was not on the command line.
pub(crate) fn log_env_names(who: &str) {
    let mut names: Vec<String> = std::env::vars_os()
        .map(|(k, _)| k.to_string_lossy().into_owned())
        .collect();
    names.sort();
    crate::scenario::log_effect(&format!(
        "{who} env role={} names={}",
        std::env::var("GAFFER_ROLE").unwrap_or_default(),
        names.join(",")
    ));
}

/// Print to stderr and exit 2: the fake refuses what the real agent refuses.
pub(crate) fn fail(msg: &str) -> ! {
    let _ = writeln!(std::io::stderr(), "{msg}");
    let _ = std::io::stdout().flush();
    std::process::exit(2)
}

/// Exit with a code, flushing stdout first.
pub(crate) fn exit_now(io: &mut Io, code: i32) -> ! {
    io.flush();
    std::process::exit(code)
}
