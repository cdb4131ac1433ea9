//! The scenario format shared by every fake (JSON). One file drives a fake agent or the
//! fake LLM server: what to say, which tools to call, which permissions to ask, which files
//! to write, when to misbehave.
//!
//! ```json
//! {"turns": [
//!   {"expect_prompt_contains": "plan",
//!    "steps": [
//!      {"say": "Here is the plan:\n```json\n{\"steps\": []}\n```"},
//!      {"tool": {"name": "Bash", "input": {"command": "make test"}, "permission": true,
//!                "output": "ok"}},
//!      {"tool": {"name": "Write", "input": {"file_path": "a.txt", "content": "x"},
//!                "write": {"path": "a.txt", "content": "x"}}},
//!      {"write_file": {"path": "b.txt", "content": "y"}},
//!      {"raw": "this is not json"},
//!      {"raw_bytes": [255, 0, 10]},
//!      {"exit": 3}
//!    ],
//!    "result": "done", "usage": {"input_tokens": 10, "output_tokens": 5}, "cost_usd": 0.01}
//! ]}
//! ```
//!
//! A pipeline test uses one scenario per role: the planner `say`s a fenced ```` ```json ````
//! plan block, the owner `write_file`s or calls tools that `write`, the reviewer `say`s its
//! verdict block; `GAFFER_FAKE_LOG` then counts the effects (`<fake> write <path>`,
//! followed by ` task=<id>` when an engine started the fake,
//! `<fake> tool|exec ...`; `spawn` (with the argv), `env` (the environment's variable
//! names, no values) and `turn` lines are informational). The LLM server uses
//! `llm`: `[{"tool_calls": [{"name": "read_file", "arguments": {"path": "a"}}]},
//! {"status": 429, "retry_after": 1}, {"text": "done"}]`.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Env var naming the scenario file.
pub const SCENARIO_ENV: &str = "GAFFER_FAKE_SCENARIO";
/// Env var naming the effect log (one line per side-effecting action).
pub const LOG_ENV: &str = "GAFFER_FAKE_LOG";
/// Env var naming a directory where fakes without their own store keep session state.
pub const STATE_ENV: &str = "GAFFER_FAKE_STATE_DIR";
/// The fakes' variables, for `GAFFER_AGENTS_ENV` (`[agents] env`): gaffer passes agents
/// nothing of its environment it is not told to.
pub const FAKE_ENV_NAMES: &str = "GAFFER_FAKE_SCENARIO,GAFFER_FAKE_STATE_DIR,GAFFER_FAKE_LOG";

/// A whole scenario.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Scenario {
    /// Turns, in order. A resumed session continues with the next unplayed turn.
    #[serde(default)]
    pub turns: Vec<Turn>,
    /// Set when loaded from a role directory: the file counting the role's played turns.
    #[serde(skip)]
    pub role_cursor: Option<PathBuf>,
    /// ACP: advertise `loadSession`.
    #[serde(default)]
    pub load_session: bool,
    /// Claude: report this session id instead of the assigned one (to test verification).
    #[serde(default)]
    pub report_session_id: Option<String>,
    /// LLM server: responses in order (see [`LlmReply`]).
    #[serde(default)]
    pub llm: Vec<LlmReply>,
    /// Role scenario: after the last turn, play the first again (one script for
    /// any number of tasks, as in the failover test and the benches).
    #[serde(default)]
    pub cycle: bool,
}

/// One turn of a fake agent.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Turn {
    /// The fake refuses (exit 2, message on stderr) a prompt that does not contain this.
    #[serde(default)]
    pub expect_prompt_contains: Option<String>,
    /// What happens, in order.
    #[serde(default)]
    pub steps: Vec<Step>,
    /// Final result text (default: the last `say`).
    #[serde(default)]
    pub result: Option<String>,
    /// Usage reported at the end of the turn.
    #[serde(default)]
    pub usage: Option<FakeUsage>,
    /// Cost reported at the end of the turn.
    #[serde(default)]
    pub cost_usd: Option<f64>,
}

/// Token counts a fake reports.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct FakeUsage {
    /// Input tokens.
    #[serde(default)]
    pub input_tokens: u64,
    /// Output tokens.
    #[serde(default)]
    pub output_tokens: u64,
    /// Cached input tokens.
    #[serde(default)]
    pub cached_input_tokens: u64,
}

/// One step of a turn.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// Assistant text.
    Say(String),
    /// A tool call, optionally asking permission first.
    Tool(ToolStep),
    /// Write a file (relative to the agent's cwd) without asking.
    WriteFile(FileWrite),
    /// Print this raw line on stdout (malformed output).
    Raw(String),
    /// Print these bytes on stdout as they are (no newline added): invalid UTF-8, a
    /// line split mid-message, a stray NUL.
    RawBytes(Vec<u8>),
    /// Exit now with this code (mid-turn).
    Exit(i32),
    /// Sleep.
    SleepMs(u64),
    /// Wait for a person's message in the middle of the turn, the way the agent
    /// takes one: Claude a user message on stdin (echoed with
    /// `--replay-user-messages`), Codex a `turn/steer` request, an ACP agent the
    /// `session/cancel` that precedes it (the prompt then ends `cancelled`). Logged
    /// as `<fake> message <text>` (ACP: `fake-acp cancelled for a message`).
    AwaitMessage,
    /// Claude: a `rate_limit_event` (`status`: `allowed`, `allowed_warning`, `rejected`;
    /// `resets_at`: unix seconds). Other fakes ignore it.
    RateLimit {
        /// Status.
        status: String,
        /// Reset time, unix seconds.
        resets_at: u64,
    },
    /// Emit `count` assistant text messages as fast as possible (benchmarks).
    Flood {
        /// How many.
        count: u64,
        /// Text of each.
        text: String,
    },
}

/// A tool call.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ToolStep {
    /// Tool name (`Bash`, `Write`; codex: `command` or `file_change`; ACP: a title).
    pub name: String,
    /// Tool input.
    #[serde(default)]
    pub input: Value,
    /// Ask permission first (default true).
    #[serde(default = "yes")]
    pub permission: bool,
    /// Ask a second time for the same underlying tool call (tests dedup).
    #[serde(default)]
    pub repeat_request: bool,
    /// File written when the call is allowed.
    #[serde(default)]
    pub write: Option<FileWrite>,
    /// A shell command actually run (`sh -c`, in the agent's cwd and environment) when
    /// the call is allowed, as Claude Code's Bash tool or Codex's command execution do:
    /// its stdout and stderr are the tool output, a non-zero exit an error.
    #[serde(default)]
    pub run: Option<String>,
    /// Tool output when allowed (default `ok`).
    #[serde(default)]
    pub output: Option<String>,
}

/// Run a tool step's `run` command as an agent CLI would: `sh -c` with the agent's own
/// environment; returns the combined output and whether it exited 0.
pub fn run_shell(who: &str, command: &str) -> (String, bool) {
    log_effect(&format!("{who} run {command}"));
    match std::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .stdin(std::process::Stdio::null())
        .output()
    {
        Ok(out) => {
            let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
            text.push_str(&String::from_utf8_lossy(&out.stderr));
            (text, out.status.success())
        }
        Err(e) => (format!("sh: {e}"), false),
    }
}

fn yes() -> bool {
    true
}

/// A file to write.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FileWrite {
    /// Path relative to the agent's cwd.
    pub path: String,
    /// Content.
    pub content: String,
}

/// One scripted reply of the fake LLM server.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LlmReply {
    /// Answer with this HTTP status instead (e.g. 429).
    #[serde(default)]
    pub status: Option<u16>,
    /// `Retry-After` header (seconds) with `status`.
    #[serde(default)]
    pub retry_after: Option<u64>,
    /// More response headers with `status` (scripted model server): the provider's own,
    /// e.g. Anthropic's `anthropic-ratelimit-unified-*` on a usage limit.
    #[serde(default)]
    pub headers: Vec<(String, String)>,
    /// Assistant text.
    #[serde(default)]
    pub text: Option<String>,
    /// Tool calls: `{"name": "read_file", "arguments": {...}}`.
    #[serde(default)]
    pub tool_calls: Vec<LlmToolCall>,
    /// Usage to report.
    #[serde(default)]
    pub usage: Option<FakeUsage>,
    /// The request must contain this text somewhere (else the server answers 400).
    #[serde(default)]
    pub expect_request_contains: Option<String>,
    /// Scripted model server and fake LLM server: wait this long before answering (a
    /// slow model, so a test can interrupt a turn or send a message during it).
    #[serde(default)]
    pub delay_ms: Option<u64>,
}

/// A tool call the fake model makes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LlmToolCall {
    /// Tool name.
    pub name: String,
    /// Arguments.
    #[serde(default)]
    pub arguments: Value,
}

impl Scenario {
    /// Load the scenario named by `GAFFER_FAKE_SCENARIO` (empty scenario when unset).
    ///
    /// When it names a directory, the scenario is `<dir>/<GAFFER_ROLE>.json` (an empty
    /// scenario if that file does not exist), and turns are counted per role across
    /// sessions (see [`Scenario::turn`]): one directory scripts a whole pipeline.
    pub fn from_env() -> anyhow::Result<Self> {
        match std::env::var(SCENARIO_ENV) {
            Ok(p) if !p.is_empty() && Path::new(&p).is_dir() => {
                let role = std::env::var("GAFFER_ROLE").unwrap_or_else(|_| "agent".into());
                // `<role>.<fake>.json` (`panelist.codex.json`) scripts one agent of a
                // role whose sessions run in parallel with other agents' (the
                // arbiter's panel): each keeps its own count of turns played.
                let fake = std::env::current_exe().ok().and_then(|e| {
                    e.file_stem()?
                        .to_str()?
                        .strip_prefix("fake-")
                        .map(str::to_owned)
                });
                let role = match fake {
                    Some(f) if Path::new(&p).join(format!("{role}.{f}.json")).exists() => {
                        format!("{role}.{f}")
                    }
                    _ => role,
                };
                let file = Path::new(&p).join(format!("{role}.json"));
                let mut scenario = if file.exists() {
                    Self::load(&file)?
                } else {
                    Scenario::default()
                };
                scenario.role_cursor = Some(Path::new(&p).join(format!(".{role}.played")));
                Ok(scenario)
            }
            Ok(p) if !p.is_empty() => Self::load(Path::new(&p)),
            _ => Ok(Scenario::default()),
        }
    }

    /// The turn to play for a prompt: the session's `played`-th turn, or, for a
    /// role scenario, the role's next unplayed turn across every session of that
    /// role (the count is kept in a file next to the scenarios).
    pub fn turn(&self, played_in_session: usize) -> Turn {
        let index = match &self.role_cursor {
            Some(cursor) => {
                let n = std::fs::read_to_string(cursor)
                    .ok()
                    .and_then(|s| s.trim().parse::<usize>().ok())
                    .unwrap_or(0);
                let _ = std::fs::write(cursor, (n + 1).to_string());
                n
            }
            None => played_in_session,
        };
        let index = match self.turns.len() {
            n if self.cycle && n > 0 => index % n,
            _ => index,
        };
        self.turns.get(index).cloned().unwrap_or_default()
    }
    /// Load a scenario file.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("reading scenario {}: {e}", path.display()))?;
        serde_json::from_str(&text)
            .map_err(|e| anyhow::anyhow!("parsing scenario {}: {e}", path.display()))
    }
    /// Write a scenario to a file (for tests).
    pub fn write_to(&self, path: &Path) -> anyhow::Result<()> {
        std::fs::write(path, serde_json::to_vec_pretty(self)?)?;
        Ok(())
    }
}

/// Append one line to the effect log named by `GAFFER_FAKE_LOG` (if set).
pub fn log_effect(line: &str) {
    if let Ok(p) = std::env::var(LOG_ENV) {
        if p.is_empty() {
            return;
        }
        let _ = append_line(Path::new(&p), line);
    }
}

/// Append `line` to the log at `path`, whole: many fakes in many processes log to
/// one file at once, so the line and its newline go in one `write` (`writeln!`
/// makes two, and another writer's line could land between them).
pub fn append_line(path: &Path, line: &str) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    let mut whole = line.replace('\n', "\\n");
    whole.push('\n');
    f.write_all(whole.as_bytes())
}

/// Read an effect log into lines.
pub fn read_log(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .map(|s| s.lines().map(str::to_string).collect())
        .unwrap_or_default()
}

/// Where fakes without their own session store keep state.
pub fn state_dir() -> PathBuf {
    match std::env::var(STATE_ENV) {
        Ok(p) if !p.is_empty() => PathBuf::from(p),
        _ => std::env::temp_dir().join("gaffer-fake-state"),
    }
}

/// Write `content` to `path` relative to the current directory and log it.
pub fn do_write(who: &str, w: &FileWrite) -> std::io::Result<()> {
    let p = Path::new(&w.path);
    if let Some(parent) = p.parent() {
        if !parent.as_os_str().is_empty() {
            std::fs::create_dir_all(parent)?;
        }
    }
    std::fs::write(p, &w.content)?;
    // The task (when an engine started the agent) attributes effects in shared logs.
    match std::env::var("GAFFER_TASK_ID") {
        Ok(task) if !task.is_empty() => log_effect(&format!("{who} write {} task={task}", w.path)),
        _ => log_effect(&format!("{who} write {}", w.path)),
    }
    Ok(())
}

/// Scripts in `dir` (`planner.json`, `owner.json`, `reviewer.json`) that play one
/// task, "add an installation section to README", for every task they are given
/// (`cycle`): a one-subtask plan, the owner's write of `README.md` (the effect
/// tests count), a `done` verdict. Every turn first sleeps `turn_ms` (0: none).
pub fn write_install_section_cycle(dir: &Path, turn_ms: u64) -> std::io::Result<()> {
    let plan = serde_json::json!({ "subtasks": [{ "title": "Add an installation section", "description": "write it", "files": ["README.md"], "acceptance": "README has ## Installation" }] });
    let turns = [
        (
            "planner",
            serde_json::json!([{ "say": format!("```json\n{plan}\n```") }]),
        ),
        (
            "owner",
            serde_json::json!([{ "write_file": { "path": "README.md", "content": "# demo\n\n## Installation\n\n    cargo install demo\n" } }, { "say": "added" }]),
        ),
        (
            "reviewer",
            serde_json::json!([{ "say": "```json\n{\"verdict\":\"done\"}\n```" }]),
        ),
    ];
    for (role, mut steps) in turns {
        if turn_ms > 0 {
            if let Some(steps) = steps.as_array_mut() {
                steps.insert(0, serde_json::json!({ "sleep_ms": turn_ms }));
            }
        }
        let script = serde_json::json!({ "cycle": true, "turns": [{ "steps": steps }] });
        std::fs::write(dir.join(format!("{role}.json")), script.to_string())?;
    }
    Ok(())
}
