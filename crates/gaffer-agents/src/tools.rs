//! The built-in agent's tools, confined to one worktree by physical path.
//!
//! | tool | arguments |
//! |---|---|
//! | `read_file` | `{path, start_line?, end_line?}` (whole file only up to 64 KiB) |
//! | `list_dir` | `{path}` |
//! | `search` | `{pattern, path?}` (regex, ignore-aware) |
//! | `apply_patch` | `{patch}` (strict unified diff, atomic) |
//! | `write_file` | `{path, content}` (atomic) |
//! | `run` | `{argv: [..], timeout_s?}` (no shell, time limit, output cap) |
//! | `finish` | `{summary}` |

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Value};
use tokio::io::AsyncReadExt;

use crate::contain::ContainedCommand;
use crate::error::{AgentError, Result};
use crate::patch::{apply_file_patch, parse_patch};
use crate::sandbox::{self, Confinement, Sandbox, SandboxMode};
use crate::types::Mode;

/// Largest file `read_file` returns without a line range.
pub const READ_LIMIT: u64 = 64 * 1024;
/// Output cap per stream of `run`.
pub const RUN_OUTPUT_CAP: usize = 16 * 1024;
/// Default `run` time limit.
pub const RUN_DEFAULT_TIMEOUT_S: u64 = 120;
/// Largest `run` time limit accepted.
pub const RUN_MAX_TIMEOUT_S: u64 = 1800;
const MAX_MATCHES: usize = 200;
const MAX_ENTRIES: usize = 1000;

/// A tool's description for the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// Name.
    pub name: &'static str,
    /// Description.
    pub description: &'static str,
    /// JSON schema of the arguments.
    pub parameters: Value,
}

/// Tools offered in a mode (read-only sessions get no write/run tools).
pub fn tool_specs(mode: Mode) -> Vec<ToolSpec> {
    let mut v = vec![
        ToolSpec {
            name: "read_file",
            description:
                "Read a text file of the worktree. Files over 64 KiB must be read by line range.",
            parameters: json!({"type": "object", "properties": {
                "path": {"type": "string"},
                "start_line": {"type": "integer", "minimum": 1},
                "end_line": {"type": "integer", "minimum": 1}},
                "required": ["path"]}),
        },
        ToolSpec {
            name: "list_dir",
            description: "List a directory of the worktree.",
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        },
        ToolSpec {
            name: "search",
            description: "Search files (respecting .gitignore) for a regular expression.",
            parameters: json!({"type": "object", "properties": {
                "pattern": {"type": "string"}, "path": {"type": "string"}}, "required": ["pattern"]}),
        },
    ];
    if mode == Mode::ReadWrite {
        v.extend([
            ToolSpec {
                name: "apply_patch",
                description: "Apply a strict unified diff (--- a/path, +++ b/path, @@ hunks). All files change or none.",
                parameters: json!({"type": "object", "properties": {"patch": {"type": "string"}}, "required": ["patch"]}),
            },
            ToolSpec {
                name: "write_file",
                description: "Write a whole file (created if missing).",
                parameters: json!({"type": "object", "properties": {
                    "path": {"type": "string"}, "content": {"type": "string"}}, "required": ["path", "content"]}),
            },
            ToolSpec {
                name: "run",
                description: "Run a program with arguments (no shell) in the worktree, with a time limit.",
                parameters: json!({"type": "object", "properties": {
                    "argv": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                    "timeout_s": {"type": "integer", "minimum": 1}}, "required": ["argv"]}),
            },
        ]);
    }
    v.push(ToolSpec {
        name: "finish",
        description: "End the turn with a summary of what was done.",
        parameters: json!({"type": "object", "properties": {"summary": {"type": "string"}}, "required": ["summary"]}),
    });
    v
}

/// Result of one tool call.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolOutcome {
    /// Observation for the model.
    pub output: String,
    /// The call failed (the observation says why).
    pub is_error: bool,
    /// `finish` was called with this summary.
    pub finished: Option<String>,
    /// Files changed: (path relative to the worktree, kind, diff).
    pub changes: Vec<(String, String, Option<String>)>,
}

impl ToolOutcome {
    fn ok(output: impl Into<String>) -> Self {
        ToolOutcome {
            output: output.into(),
            ..Default::default()
        }
    }
    fn err(output: impl Into<String>) -> Self {
        ToolOutcome {
            output: output.into(),
            is_error: true,
            ..Default::default()
        }
    }
}

/// One worktree; every path a tool touches is resolved physically inside it.
#[derive(Debug, Clone)]
pub struct Worktree {
    root: PathBuf,
    mode: Mode,
    sandbox: Sandbox,
    env: BTreeMap<String, String>,
    readable: Vec<PathBuf>,
    lock: Option<PathBuf>,
}

#[derive(Deserialize)]
struct ReadArgs {
    path: String,
    start_line: Option<usize>,
    end_line: Option<usize>,
}
#[derive(Deserialize)]
struct PathArgs {
    #[serde(default)]
    path: String,
}
#[derive(Deserialize)]
struct SearchArgs {
    pattern: String,
    path: Option<String>,
}
#[derive(Deserialize)]
struct PatchArgs {
    patch: String,
}
#[derive(Deserialize)]
struct WriteArgs {
    path: String,
    content: String,
}
#[derive(Deserialize)]
struct RunArgs {
    argv: Vec<String>,
    timeout_s: Option<u64>,
}
#[derive(Deserialize)]
struct FinishArgs {
    summary: String,
}

fn args<T: serde::de::DeserializeOwned>(
    tool: &str,
    v: &Value,
) -> std::result::Result<T, ToolOutcome> {
    serde_json::from_value(v.clone())
        .map_err(|e| ToolOutcome::err(format!("invalid arguments for {tool}: {e}")))
}

impl Worktree {
    /// A worktree rooted at the physical path of `root`.
    pub fn new(root: &Path, mode: Mode) -> Result<Self> {
        let root = std::fs::canonicalize(root).map_err(|e| AgentError::Workspace {
            path: root.to_path_buf(),
            reason: e.to_string(),
        })?;
        Ok(Worktree {
            root,
            mode,
            sandbox: Sandbox::default(),
            env: BTreeMap::new(),
            readable: Vec::new(),
            lock: None,
        })
    }

    /// Confine the commands `run` starts with this sandbox (default: off).
    pub fn with_sandbox(mut self, sandbox: Sandbox) -> Self {
        self.sandbox = sandbox;
        self
    }

    /// The session's side of `run`'s environment: `GAFFER_*` and `[agents] env`, on top
    /// of [`crate::environment::BASE`] (no credential of any kind).
    pub fn with_env(mut self, env: BTreeMap<String, String>) -> Self {
        self.env = env;
        self
    }

    /// What `run` commands may read beyond the sandbox's allowlist, and the lock file
    /// their processes hold (see [`crate::types::StartOptions`]).
    pub fn with_session(mut self, readable: Vec<PathBuf>, lock: Option<PathBuf>) -> Self {
        self.readable = readable;
        self.lock = lock;
        self
    }

    /// The physical root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Resolve a path given by the model to a physical path inside the worktree. Paths
    /// that escape (`..`, absolute paths elsewhere, symlinks pointing out) are refused
    /// without revealing where they point.
    pub fn resolve(&self, path: &str) -> std::result::Result<PathBuf, String> {
        let refuse = || {
            format!("refused: path `{path}` resolves outside the worktree; use a path inside it")
        };
        let p = Path::new(path);
        let candidate = if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.root.join(p)
        };
        // Deepest existing ancestor, canonicalised; the rest appended lexically.
        let mut existing = candidate.clone();
        let mut rest: Vec<std::ffi::OsString> = Vec::new();
        loop {
            if std::fs::symlink_metadata(&existing).is_ok() {
                break;
            }
            match (existing.file_name(), existing.parent()) {
                (Some(name), Some(parent)) => {
                    rest.push(name.to_os_string());
                    existing = parent.to_path_buf();
                }
                _ => {
                    // `..` at the end or root: let canonicalize decide below.
                    break;
                }
            }
        }
        let mut resolved = match std::fs::canonicalize(&existing) {
            Ok(c) => c,
            Err(_) => {
                if std::fs::symlink_metadata(&existing).is_ok() {
                    return Err(format!("refused: `{path}` is a dangling symlink"));
                }
                return Err(refuse());
            }
        };
        for comp in rest.iter().rev() {
            match Path::new(comp).components().next() {
                Some(Component::Normal(_)) => resolved.push(comp),
                Some(Component::CurDir) => {}
                _ => return Err(refuse()),
            }
        }
        // A lexical `..` that did not exist yet (e.g. `new/../../x`).
        if candidate
            .components()
            .any(|c| matches!(c, Component::ParentDir))
            && !rest.is_empty()
        {
            return Err(refuse());
        }
        if resolved.starts_with(&self.root) {
            Ok(resolved)
        } else {
            Err(refuse())
        }
    }

    fn rel(&self, p: &Path) -> String {
        p.strip_prefix(&self.root)
            .map(|r| r.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// Run one tool call. Never panics; every failure is an observation.
    pub async fn execute(&self, name: &str, input: &Value) -> ToolOutcome {
        let writes = matches!(name, "apply_patch" | "write_file" | "run");
        if writes && self.mode == Mode::ReadOnly {
            return ToolOutcome::err(format!(
                "refused: {name} is not available in a read-only session"
            ));
        }
        let r = match name {
            "read_file" => self.read_file(input),
            "list_dir" => self.list_dir(input),
            "search" => self.search(input),
            "apply_patch" => self.apply_patch(input),
            "write_file" => self.write_file(input),
            "run" => self.run(input).await,
            "finish" => args::<FinishArgs>(name, input).map(|a| ToolOutcome {
                output: "finished".into(),
                finished: Some(a.summary),
                ..Default::default()
            }),
            other => Err(ToolOutcome::err(format!(
                "unknown tool `{other}`; available: read_file, list_dir, search, apply_patch, write_file, run, finish"
            ))),
        };
        r.unwrap_or_else(|e| e)
    }

    fn read_file(&self, input: &Value) -> std::result::Result<ToolOutcome, ToolOutcome> {
        let a: ReadArgs = args("read_file", input)?;
        let p = self.resolve(&a.path).map_err(ToolOutcome::err)?;
        let meta = std::fs::metadata(&p)
            .map_err(|_| ToolOutcome::err(format!("`{}` does not exist", a.path)))?;
        if meta.is_dir() {
            return Err(ToolOutcome::err(format!(
                "`{}` is a directory; use list_dir",
                a.path
            )));
        }
        let bytes = std::fs::read(&p)
            .map_err(|e| ToolOutcome::err(format!("cannot read `{}`: {e}", a.path)))?;
        let text = String::from_utf8(bytes)
            .map_err(|_| ToolOutcome::err(format!("`{}` is not UTF-8 text", a.path)))?;
        let total = text.lines().count();
        if a.start_line.is_none() && a.end_line.is_none() {
            if meta.len() > READ_LIMIT {
                return Err(ToolOutcome::err(format!(
                    "`{}` is {} bytes ({total} lines), over the {READ_LIMIT}-byte limit for reading a whole file. \
                     Read a range instead: call read_file with start_line and end_line, e.g. \
                     {{\"path\": \"{}\", \"start_line\": 1, \"end_line\": 200}}",
                    a.path,
                    meta.len(),
                    a.path
                )));
            }
            return Ok(ToolOutcome::ok(text));
        }
        let start = a.start_line.unwrap_or(1).max(1);
        let end = a.end_line.unwrap_or(total).min(total);
        if start > end {
            return Err(ToolOutcome::err(format!(
                "empty range {start}..{end}: `{}` has {total} lines",
                a.path
            )));
        }
        let mut out = String::new();
        for (i, l) in text.lines().enumerate().take(end).skip(start - 1) {
            if out.len() + l.len() > READ_LIMIT as usize {
                out.push_str(&format!(
                    "[range truncated at line {} by the {READ_LIMIT}-byte limit; continue with start_line={}]\n",
                    i + 1,
                    i + 1
                ));
                break;
            }
            out.push_str(l);
            out.push('\n');
        }
        Ok(ToolOutcome::ok(out))
    }

    fn list_dir(&self, input: &Value) -> std::result::Result<ToolOutcome, ToolOutcome> {
        let a: PathArgs = args("list_dir", input)?;
        let p = self
            .resolve(if a.path.is_empty() { "." } else { &a.path })
            .map_err(ToolOutcome::err)?;
        let rd = std::fs::read_dir(&p)
            .map_err(|_| ToolOutcome::err(format!("`{}` is not a readable directory", a.path)))?;
        let mut names: Vec<String> = rd
            .filter_map(|e| e.ok())
            .map(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                    format!("{n}/")
                } else {
                    n
                }
            })
            .collect();
        names.sort();
        let n = names.len();
        names.truncate(MAX_ENTRIES);
        let mut out = names.join("\n");
        if n > MAX_ENTRIES {
            out.push_str(&format!("\n[{} more entries not shown]", n - MAX_ENTRIES));
        }
        Ok(ToolOutcome::ok(out))
    }

    fn search(&self, input: &Value) -> std::result::Result<ToolOutcome, ToolOutcome> {
        let a: SearchArgs = args("search", input)?;
        let re = regex::Regex::new(&a.pattern)
            .map_err(|e| ToolOutcome::err(format!("invalid regex: {e}")))?;
        let base = self
            .resolve(a.path.as_deref().unwrap_or("."))
            .map_err(ToolOutcome::err)?;
        let mut hits = Vec::new();
        let mut more = false;
        for entry in ignore::WalkBuilder::new(&base)
            .build()
            .filter_map(|e| e.ok())
        {
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            // Symlinked files are followed only if they stay inside.
            let Ok(real) = std::fs::canonicalize(entry.path()) else {
                continue;
            };
            if !real.starts_with(&self.root) {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&real) else {
                continue;
            };
            for (i, line) in text.lines().enumerate() {
                if re.is_match(line) {
                    if hits.len() >= MAX_MATCHES {
                        more = true;
                        break;
                    }
                    let shown: String = line.chars().take(300).collect();
                    hits.push(format!("{}:{}: {}", self.rel(entry.path()), i + 1, shown));
                }
            }
            if more {
                break;
            }
        }
        if hits.is_empty() {
            return Ok(ToolOutcome::ok("no matches"));
        }
        let mut out = hits.join("\n");
        if more {
            out.push_str(&format!(
                "\n[stopped after {MAX_MATCHES} matches; narrow the pattern or path]"
            ));
        }
        Ok(ToolOutcome::ok(out))
    }

    fn apply_patch(&self, input: &Value) -> std::result::Result<ToolOutcome, ToolOutcome> {
        let a: PatchArgs = args("apply_patch", input)?;
        let files = parse_patch(&a.patch).map_err(|e| ToolOutcome::err(e.to_string()))?;
        // Compute every new content first; write nothing unless all hunks apply.
        let mut plan: Vec<(PathBuf, String, Option<String>, String)> = Vec::new();
        for fp in &files {
            let p = self.resolve(fp.path()).map_err(ToolOutcome::err)?;
            let original =
                match std::fs::read(&p) {
                    Ok(b) => Some(String::from_utf8(b).map_err(|_| {
                        ToolOutcome::err(format!("`{}` is not UTF-8 text", fp.path()))
                    })?),
                    Err(_) => None,
                };
            let new = apply_file_patch(original.as_deref(), fp)
                .map_err(|e| ToolOutcome::err(e.to_string()))?;
            let kind = match (&original, &new) {
                (None, _) => "add",
                (_, None) => "delete",
                _ => "update",
            };
            plan.push((p, fp.path().to_string(), new, kind.to_string()));
        }
        let mut changes = Vec::new();
        for (p, rel, new, kind) in plan {
            match new {
                Some(content) => atomic_write(&p, &content)
                    .map_err(|e| ToolOutcome::err(format!("writing `{rel}` failed: {e}")))?,
                None => std::fs::remove_file(&p)
                    .map_err(|e| ToolOutcome::err(format!("deleting `{rel}` failed: {e}")))?,
            }
            changes.push((rel, kind, Some(a.patch.clone())));
        }
        let names: Vec<&str> = changes.iter().map(|c| c.0.as_str()).collect();
        Ok(ToolOutcome {
            output: format!("patch applied to {}", names.join(", ")),
            changes,
            ..Default::default()
        })
    }

    fn write_file(&self, input: &Value) -> std::result::Result<ToolOutcome, ToolOutcome> {
        let a: WriteArgs = args("write_file", input)?;
        let p = self.resolve(&a.path).map_err(ToolOutcome::err)?;
        if p.is_dir() {
            return Err(ToolOutcome::err(format!("`{}` is a directory", a.path)));
        }
        let existed = p.exists();
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).map_err(|e| {
                ToolOutcome::err(format!("cannot create directory for `{}`: {e}", a.path))
            })?;
        }
        atomic_write(&p, &a.content)
            .map_err(|e| ToolOutcome::err(format!("writing `{}` failed: {e}", a.path)))?;
        Ok(ToolOutcome {
            output: format!("wrote {} bytes to {}", a.content.len(), a.path),
            changes: vec![(
                self.rel(&p),
                if existed { "update" } else { "add" }.into(),
                None,
            )],
            ..Default::default()
        })
    }

    async fn run(&self, input: &Value) -> std::result::Result<ToolOutcome, ToolOutcome> {
        let a: RunArgs = args("run", input)?;
        let Some((prog, rest)) = a.argv.split_first() else {
            return Err(ToolOutcome::err("run needs a non-empty argv"));
        };
        let timeout = a
            .timeout_s
            .unwrap_or(RUN_DEFAULT_TIMEOUT_S)
            .clamp(1, RUN_MAX_TIMEOUT_S);
        let mut cmd = ContainedCommand::new("run", prog, &self.root);
        cmd.args(rest)
            .envs(&crate::environment::build(&[], &self.env))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(lock) = &self.lock {
            cmd.hold_lock(lock);
        }
        if self.sandbox.mode != SandboxMode::Off {
            // The model's API is called by gaffer itself, not by the command: with the
            // network off it gets no TCP at all.
            let mut c = Confinement::new(&self.sandbox);
            if self.mode == Mode::ReadWrite {
                c.writable.push(self.root.clone());
            }
            c.readable.extend(self.readable.iter().cloned());
            cmd.confine(c);
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| ToolOutcome::err(format!("cannot start `{prog}`: {e}")))?;
        let sandbox_note = child.sandbox_note().map(str::to_owned);
        let mut so = child.child.stdout.take();
        let mut se = child.child.stderr.take();
        let work = async {
            // Both pipes close once the command and whatever it left running are gone.
            let (o, e) = tokio::join!(read_capped(so.take()), read_capped(se.take()));
            let st = child.wait().await;
            (o, e, st)
        };
        let finished = tokio::time::timeout(Duration::from_secs(timeout), work).await;
        match finished {
            Err(_) => {
                child.kill().await;
                Err(ToolOutcome::err(format!(
                    "`{}` timed out after {timeout}s and was killed",
                    a.argv.join(" ")
                )))
            }
            Ok((o, e, st)) => {
                let code = st.ok().and_then(|s| s.code());
                let out = format!(
                    "exit code: {}\nstdout:\n{o}\nstderr:\n{e}",
                    code.map(|c| c.to_string())
                        .unwrap_or_else(|| "killed by signal".into())
                );
                if code == Some(0) {
                    Ok(ToolOutcome::ok(out))
                } else {
                    match sandbox_note {
                        Some(note) => Err(ToolOutcome::err(sandbox::explain_refusal(&out, &note))),
                        None => Err(ToolOutcome::err(out)),
                    }
                }
            }
        }
    }
}

/// Write through a temp file in the same directory and rename over the target.
pub fn atomic_write(path: &Path, content: &str) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(
        ".{name}.gaffer-tmp-{}",
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::write(&tmp, content)?;
    if let Ok(meta) = std::fs::metadata(path) {
        let _ = std::fs::set_permissions(&tmp, meta.permissions());
    }
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

async fn read_capped<R: tokio::io::AsyncRead + Unpin>(pipe: Option<R>) -> String {
    let Some(mut p) = pipe else {
        return String::new();
    };
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let mut total = 0usize;
    loop {
        match p.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                total += n;
                if buf.len() < RUN_OUTPUT_CAP {
                    let take = n.min(RUN_OUTPUT_CAP - buf.len());
                    buf.extend_from_slice(&chunk[..take]);
                }
            }
        }
    }
    let mut s = String::from_utf8_lossy(&buf).into_owned();
    if total > RUN_OUTPUT_CAP {
        s.push_str(&format!(
            "\n[output truncated: {total} bytes, first {RUN_OUTPUT_CAP} shown]"
        ));
    }
    s
}
