//! Spawning agent executables: lookup on PATH or via `GAFFER_*_BIN`, an environment
//! built from an allowlist, containment (see [`crate::contain`]), the sandbox, stdio
//! pipes, a bounded stderr tail, and newline-delimited stdout.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{ChildStdin, ChildStdout};

use crate::contain::{ContainedChild, ContainedCommand};
use crate::error::{AgentError, Result};
use crate::jsonrpc::{parse_rpc_line, Framing, RpcMessage};
use crate::sandbox::{self, Confinement};
use crate::types::Mode;
use crate::types::StartOptions;
use crate::wire::{snippet, BadLine, LineDecoder};

/// Find an executable: the env var (if set and non-empty) wins, then `PATH`.
pub fn find_executable(env_var: &str, name: &str) -> Result<PathBuf> {
    find_executable_in(
        env_var,
        std::env::var(env_var).ok(),
        std::env::var_os("PATH"),
        name,
    )
}

/// [`find_executable`] with the environment given explicitly (for tests and for callers
/// that resolve a session's own environment).
pub fn find_executable_in(
    env_var: &str,
    override_value: Option<String>,
    path: Option<std::ffi::OsString>,
    name: &str,
) -> Result<PathBuf> {
    // Agents start in their worktree, so a relative path is made absolute here, where
    // it was meant; a bare name (no `/`) is left for the agent's PATH lookup.
    if let Some(v) = override_value.filter(|v| !v.is_empty()) {
        let p = PathBuf::from(v);
        return Ok(if p.components().count() > 1 {
            std::path::absolute(&p).unwrap_or(p)
        } else {
            p
        });
    }
    if let Some(paths) = path {
        for dir in std::env::split_paths(&paths) {
            let p = dir.join(name);
            if p.is_file() {
                return Ok(std::path::absolute(&p).unwrap_or(p));
            }
        }
    }
    Err(AgentError::ExecutableNotFound {
        name: name.into(),
        env_var: env_var.into(),
    })
}

/// `$HOME` of this process (empty when unset).
pub(crate) fn home_dir() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default()
}

const STDERR_TAIL: usize = 4096;
/// How much of stdout is read at once.
const READ_CHUNK: usize = 64 * 1024;

/// A spawned agent process with piped stdio.
pub(crate) struct AgentProcess {
    pub(crate) agent: String,
    /// The agent and everything it starts; dropping it kills them all.
    proc: ContainedChild,
    pub(crate) stdin: ChildStdin,
    stdout: ChildStdout,
    decoder: LineDecoder,
    read_buf: Vec<u8>,
    stdout_closed: bool,
    stderr_tail: Arc<Mutex<Vec<u8>>>,
}

/// How an agent process is started: its session's options, the credentials of its
/// backend passed from gaffer's environment, and the agent CLI's own state (session
/// store, config), which it may write.
pub(crate) struct SpawnSpec<'a> {
    pub(crate) opts: &'a StartOptions,
    /// Names of variables of gaffer's environment the agent needs (its credentials).
    pub(crate) pass_env: &'a [&'a str],
    /// Names (or `PREFIX*`) the agent must not get even when gaffer has them or the
    /// session's own variables name them ([`crate::environment::withhold`]).
    pub(crate) withhold: &'a [&'a str],
    /// Directories the agent keeps its state in; created when missing, so they can be
    /// allowed.
    pub(crate) state_dirs: Vec<PathBuf>,
    /// Files it keeps state in (allowed when they exist).
    pub(crate) state_files: Vec<PathBuf>,
}

impl AgentProcess {
    /// The next non-blank line the agent wrote on stdout; `Ok(None)` once stdout is
    /// closed. A line that is not UTF-8 or too long is a
    /// [`AgentError::MalformedOutput`]. Cancel-safe (for `select!`): bytes are taken
    /// from the pipe only when the read completes.
    pub(crate) async fn next_line(&mut self) -> Result<Option<String>> {
        loop {
            if let Some(line) = self.decoder.next_line() {
                return line.map(Some).map_err(|bad| self.bad_line(bad));
            }
            if self.stdout_closed {
                return self
                    .decoder
                    .finish()
                    .transpose()
                    .map_err(|bad| self.bad_line(bad));
            }
            match self.stdout.read(&mut self.read_buf).await {
                Ok(0) => self.stdout_closed = true,
                Ok(n) => self.decoder.feed(&self.read_buf[..n]),
                Err(source) => {
                    return Err(AgentError::Io {
                        agent: self.agent.clone(),
                        source,
                    })
                }
            }
        }
    }

    /// Send a JSON-RPC message.
    pub(crate) async fn send_rpc(&mut self, framing: Framing, msg: &RpcMessage) -> Result<()> {
        self.send(&msg.to_value(framing)).await
    }

    /// Send a request and read until its response; notifications before it are
    /// ignored and requests from the agent (none are served during setup) are
    /// refused. `Ok(Err(message))` is a JSON-RPC error response.
    pub(crate) async fn rpc(
        &mut self,
        framing: Framing,
        next_id: &mut i64,
        method: &str,
        params: serde_json::Value,
    ) -> Result<std::result::Result<serde_json::Value, String>> {
        *next_id += 1;
        let id = *next_id;
        self.send_or_exited(&RpcMessage::request(id, method, params).to_value(framing))
            .await?;
        loop {
            let Some(line) = self.next_line().await? else {
                let status = self.exit_status().await;
                return Err(AgentError::ExitedMidTurn {
                    agent: self.agent.clone(),
                    status: format!("{status} while waiting for the {method} response"),
                    stderr: self.stderr_tail(),
                });
            };
            match parse_rpc_line(&line).map_err(|e| self.malformed(&line, e))? {
                RpcMessage::Response { id: rid, outcome } if rid.as_i64() == Some(id) => {
                    return Ok(outcome.map_err(|e| e.message));
                }
                RpcMessage::Request { id: rid, .. } => {
                    let refusal = RpcMessage::error(rid, -32601, "not available during setup");
                    self.send_rpc(framing, &refusal).await?;
                }
                _ => {}
            }
        }
    }

    /// Start `program` for a session: environment from the allowlist plus `env`, the
    /// worktree `cwd` as its working directory, contained and confined as `spec` says.
    pub(crate) fn spawn(
        agent: &str,
        program: &Path,
        args: &[String],
        cwd: &Path,
        env: &BTreeMap<String, String>,
        spec: SpawnSpec<'_>,
    ) -> Result<Self> {
        let opts = spec.opts;
        let mut env = crate::environment::build(spec.pass_env, env);
        crate::environment::withhold(&mut env, spec.withhold);
        let mut cmd = ContainedCommand::new(agent, program, cwd);
        cmd.args(args)
            .envs(&env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(lock) = &opts.lock {
            cmd.hold_lock(lock);
        }
        if opts.sandbox.mode != sandbox::SandboxMode::Off {
            for dir in &spec.state_dirs {
                // A state dir the agent has not used yet must exist to be allowed.
                let _ = std::fs::create_dir_all(dir);
            }
            let state: Vec<PathBuf> = spec
                .state_dirs
                .into_iter()
                .chain(spec.state_files)
                .collect();
            let mut c =
                Confinement::for_agent(&opts.sandbox, cwd, opts.mode == Mode::ReadWrite, &state);
            c.readable.extend(opts.readable.iter().cloned());
            let bin = if program.components().count() > 1 {
                Some(program.to_path_buf())
            } else {
                find_executable_in(
                    "",
                    None,
                    env.get("PATH").map(Into::into),
                    &program.to_string_lossy(),
                )
                .ok()
            };
            c.readable
                .extend(bin.and_then(|b| sandbox::install_root(&b, &opts.sandbox)));
            cmd.confine(c);
        }
        let mut proc = cmd.spawn()?;
        let io_err = |what: &str| AgentError::Spawn {
            agent: agent.into(),
            source: std::io::Error::other(format!("no {what} pipe")),
        };
        let stdin = proc.child.stdin.take().ok_or_else(|| io_err("stdin"))?;
        let stdout = proc.child.stdout.take().ok_or_else(|| io_err("stdout"))?;
        let mut stderr = proc.child.stderr.take().ok_or_else(|| io_err("stderr"))?;
        let stderr_tail = Arc::new(Mutex::new(Vec::new()));
        let tail = stderr_tail.clone();
        tokio::spawn(async move {
            let mut buf = [0u8; 2048];
            loop {
                match stderr.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if let Ok(mut t) = tail.lock() {
                            t.extend_from_slice(&buf[..n]);
                            if t.len() > STDERR_TAIL {
                                let cut = t.len() - STDERR_TAIL;
                                t.drain(..cut);
                            }
                        }
                    }
                }
            }
        });
        Ok(AgentProcess {
            agent: agent.into(),
            proc,
            stdin,
            stdout,
            decoder: LineDecoder::default(),
            read_buf: vec![0; READ_CHUNK],
            stdout_closed: false,
            stderr_tail,
        })
    }

    /// Where a confined agent may write, for messages about refusals.
    pub(crate) fn sandbox_note(&self) -> Option<&str> {
        self.proc.sandbox_note()
    }

    /// Write one JSON value as a line.
    pub(crate) async fn send(&mut self, v: &serde_json::Value) -> Result<()> {
        let mut line = v.to_string();
        line.push('\n');
        self.stdin
            .write_all(line.as_bytes())
            .await
            .map_err(|source| AgentError::Io {
                agent: self.agent.clone(),
                source,
            })?;
        self.stdin.flush().await.map_err(|source| AgentError::Io {
            agent: self.agent.clone(),
            source,
        })
    }

    /// Like [`AgentProcess::send`], but when the pipe is broken because the agent already
    /// exited, report that exit (status and stderr) instead of the bare IO error.
    pub(crate) async fn send_or_exited(&mut self, v: &serde_json::Value) -> Result<()> {
        match self.send(v).await {
            Err(AgentError::Io { .. }) => {
                let status = self.exit_status().await;
                Err(AgentError::Exited {
                    agent: self.agent.clone(),
                    status,
                    stderr: self.stderr_tail(),
                })
            }
            other => other,
        }
    }

    /// The last bytes the agent wrote to stderr; when it shows the kernel refused an
    /// access of a confined agent, followed by where the sandbox lets it write.
    pub(crate) fn stderr_tail(&self) -> String {
        let tail = match self.stderr_tail.lock() {
            Ok(t) => String::from_utf8_lossy(&t).trim().to_string(),
            Err(_) => String::new(),
        };
        match self.sandbox_note() {
            Some(note) if sandbox::looks_refused(&tail) => format!("{tail}\n[{note}]"),
            _ => tail,
        }
    }

    /// Why a session ends when its agent closed its output: [`AgentError::ExitedMidTurn`]
    /// during a turn, [`AgentError::Exited`] between turns, with its status and stderr.
    pub(crate) async fn exited(&mut self, mid_turn: bool) -> AgentError {
        let status = self.exit_status().await;
        let (agent, stderr) = (self.agent.clone(), self.stderr_tail());
        if mid_turn {
            AgentError::ExitedMidTurn {
                agent,
                status,
                stderr,
            }
        } else {
            AgentError::Exited {
                agent,
                status,
                stderr,
            }
        }
    }

    /// Wait briefly for the process to end and describe its status; also gives the stderr
    /// reader a moment to drain.
    pub(crate) async fn exit_status(&mut self) -> String {
        let st = tokio::time::timeout(std::time::Duration::from_secs(3), self.proc.wait()).await;
        // let the stderr reader catch up
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        match st {
            Ok(Ok(s)) => match s.code() {
                Some(c) => format!("exit code {c}"),
                None => "killed by a signal".into(),
            },
            Ok(Err(e)) => format!("unknown ({e})"),
            Err(_) => {
                self.proc.start_kill();
                "stdout closed but the process kept running; killed".into()
            }
        }
    }

    /// A malformed-output error for the line last read.
    pub(crate) fn malformed(&self, line: &str, reason: impl std::fmt::Display) -> AgentError {
        AgentError::MalformedOutput {
            agent: self.agent.clone(),
            line_no: self.decoder.line_no(),
            reason: reason.to_string(),
            snippet: snippet(line),
        }
    }

    fn bad_line(&self, bad: BadLine) -> AgentError {
        self.malformed(&bad.start, bad.error)
    }

    /// Kill the agent and everything it started, and wait until they are gone.
    pub(crate) async fn kill(&mut self) {
        self.proc.kill().await;
    }
}
