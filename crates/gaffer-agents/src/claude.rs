//! Claude Code backend: `claude -p` with the stream-json control protocol.
//!
//! gaffer assigns the session id (`--session-id=<uuid>`); resume uses `--resume=<id>` only
//! when Claude's transcript `<config>/projects/<key>/<id>.jsonl` still exists, otherwise
//! [`AgentError::SessionGone`]. Tool permission arrives as `control_request` /
//! `can_use_tool` and is answered with `control_response` after the [`ApprovalGate`] decided.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::{json, Value};

use crate::accounting::PriceTable;
use crate::error::{AgentError, Result};
use crate::local_only;
use crate::process::{find_executable, AgentProcess, SpawnSpec};
use crate::redact::Redactor;
use crate::sandbox;
use crate::session::{
    driver_channels, set_verified, AgentBackend, AgentSession, ApprovalGate, Command,
    DriverSession, Emitter, Offer, PermissionBroker,
};
use crate::state::{self, Seed};
pub use crate::stream_json::{
    parse_stream_line, AssistantBlock, ControlRequest, StreamMessage, ToolResult, TurnEnd,
};
use crate::types::{
    AgentEvent, AgentKind, Delivery, Mode, PermissionDecision, PermissionKind, PermissionRequest,
    SessionRecord, StartOptions, TurnResult, TurnStatus, Usage,
};
use crate::workspace::{canonical_workspace, claude_project_key, workspace_key};

const AGENT: &str = "claude";

/// gaffer's `PostToolUse` hook: tells the model when the sandbox refused a command.
const SANDBOX_HOOK: &str = "gaffer_sandbox";

/// Tools denied to read-only sessions (on top of `--permission-mode`).
pub const READ_ONLY_DENIED_TOOLS: &str = "Edit,Write,MultiEdit,NotebookEdit";

/// Variables of gaffer's environment Claude Code gets on top of [`crate::environment::BASE`]:
/// where it keeps its state and what it may need to log in (API keys, Bedrock, Vertex).
/// Nothing else of gaffer's environment reaches it.
pub const PASSED_ENV: &[&str] = &[
    "CLAUDE_CONFIG_DIR",
    // Claude Code's own settings: the endpoint, key, models and headers
    // (`ANTHROPIC_BASE_URL`, `ANTHROPIC_DEFAULT_HAIKU_MODEL`, ...) and its switches
    // (`CLAUDE_CODE_USE_BEDROCK`, `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC`, ...).
    "ANTHROPIC_*",
    "CLAUDE_CODE_*",
    "DISABLE_TELEMETRY",
    "DISABLE_ERROR_REPORTING",
    "DISABLE_AUTOUPDATER",
    "DISABLE_BUG_COMMAND",
    "DISABLE_COST_WARNINGS",
    "DISABLE_NON_ESSENTIAL_MODEL_CALLS",
    "DISABLE_PROMPT_CACHING",
    "CLOUD_ML_REGION",
    "AWS_REGION",
    "AWS_PROFILE",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_BEARER_TOKEN_BEDROCK",
    "GOOGLE_APPLICATION_CREDENTIALS",
];

/// What a private `CLAUDE_CONFIG_DIR` gets from the user's: the login, and of the
/// settings only how to authenticate (never hooks, permissions or instructions).
const CLAUDE_SEED: Seed<'static> = Seed {
    copy: &[".credentials.json"],
    json_keys: &[(
        "settings.json",
        &[
            "apiKeyHelper",
            "env",
            "forceLoginMethod",
            "forceLoginOrgUUID",
            "awsAuthRefresh",
            "awsCredentialExport",
        ],
    )],
    once: &[],
};

/// The account part of the user's `.claude.json` (an API key chosen at login lives
/// there), which Claude Code reads from its config dir once that dir is moved: it is
/// `$CLAUDE_CONFIG_DIR/.claude.json`, else `~/.claude.json`.
fn seed_claude_json(env: &BTreeMap<String, String>, dir: &Path) {
    state::seed_json_keys(
        &state::user_dir(env, "CLAUDE_CONFIG_DIR", "").join(".claude.json"),
        &dir.join(".claude.json"),
        &[
            "primaryApiKey",
            "oauthAccount",
            "userID",
            "customApiKeyResponses",
            "hasCompletedOnboarding",
        ],
    );
}

/// Configuration of the Claude Code backend.
#[derive(Debug, Clone, Default)]
pub struct ClaudeConfig {
    /// Executable; default: `GAFFER_CLAUDE_BIN`, then `claude` on PATH.
    pub bin: Option<PathBuf>,
    /// Extra arguments appended to the command line.
    pub extra_args: Vec<String>,
    /// Redactor applied to every event.
    pub redactor: Arc<Redactor>,
    /// What a model's tokens cost: prices the running turn's spend so far
    /// ([`AgentEvent::UsageSoFar`]); the turn's own cost is Claude's `total_cost_usd`.
    pub prices: PriceTable,
}

/// The Claude Code backend.
#[derive(Debug, Clone, Default)]
pub struct ClaudeBackend {
    cfg: ClaudeConfig,
}

impl ClaudeBackend {
    /// A backend with this configuration.
    pub fn new(cfg: ClaudeConfig) -> Self {
        ClaudeBackend { cfg }
    }

    fn bin(&self) -> Result<PathBuf> {
        match &self.cfg.bin {
            Some(b) => Ok(b.clone()),
            None => find_executable("GAFFER_CLAUDE_BIN", "claude"),
        }
    }

    async fn launch(
        &self,
        opts: StartOptions,
        gate: Arc<dyn ApprovalGate>,
        session_id: String,
        resume: bool,
    ) -> Result<Box<dyn AgentSession>> {
        let ws = canonical_workspace(&opts.workspace)?;
        let mut env = opts.agent_env();
        if let Some(dir) = state::private_dir(
            &opts,
            AGENT,
            &state::user_dir(&env, "CLAUDE_CONFIG_DIR", ".claude"),
            "",
            &CLAUDE_SEED,
        )? {
            seed_claude_json(&env, &dir);
            env.insert("CLAUDE_CONFIG_DIR".into(), dir.display().to_string());
        }
        if resume {
            let path = claude_transcript_path(&claude_config_dir(&env), &ws, &session_id);
            if !path.is_file() {
                return Err(AgentError::SessionGone {
                    agent: AGENT.into(),
                    session_id,
                    detail: format!("no transcript at {}", path.display()),
                });
            }
        }
        // A session that must stay local gets the endpoint gaffer checked (gaffer's
        // own ANTHROPIC_BASE_URL) and nothing that routes elsewhere.
        let checked_url = opts
            .local_only
            .then(|| {
                env.get("ANTHROPIC_BASE_URL")
                    .cloned()
                    .or_else(|| std::env::var("ANTHROPIC_BASE_URL").ok())
            })
            .flatten();
        let mut args = claude_args(&opts, &session_id, resume, &self.cfg.extra_args);
        if opts.local_only {
            env.extend(local_only::claude_env(checked_url.as_deref()));
            args.extend(local_only::claude_args(checked_url.as_deref()));
        }
        let bin = self.bin()?;
        let mut proc = AgentProcess::spawn(
            AGENT,
            &bin,
            &args,
            &ws,
            &env,
            SpawnSpec {
                opts: &opts,
                pass_env: PASSED_ENV,
                withhold: if opts.local_only {
                    local_only::CLAUDE_WITHHELD
                } else {
                    &[]
                },
                state_dirs: vec![claude_config_dir(&env)],
                state_files: claude_state_files(&env),
            },
        )?;
        // A confined session hears about a refusal in the result of the very command
        // the kernel refused (see `sandbox_context`).
        let hooks = match proc.sandbox_note() {
            Some(_) => {
                json!({"PostToolUse": [{"matcher": "Bash", "hookCallbackIds": [SANDBOX_HOOK]}]})
            }
            None => Value::Null,
        };
        proc.send_or_exited(&json!({
            "type": "control_request",
            "request_id": format!("req_init_{}", uuid::Uuid::new_v4().simple()),
            "request": {"subtype": "initialize", "hooks": hooks}
        }))
        .await
        .map_err(|e| e.redacted(&self.cfg.redactor))?;
        let record = SessionRecord {
            agent: AgentKind::ClaudeCode,
            role: opts.role.clone(),
            workspace_key: workspace_key(&ws),
            session_id: session_id.clone(),
            verified: false,
        };
        let (record, cmd_tx, cmd_rx, em, events_rx) =
            driver_channels(record, self.cfg.redactor.clone());
        let rec2 = record.clone();
        let prices = self.cfg.prices.clone();
        let task = tokio::spawn(async move {
            drive(proc, cmd_rx, em, rec2, gate, session_id, prices).await;
        });
        Ok(Box::new(DriverSession {
            record,
            cmd_tx,
            events_rx,
            task: Some(task),
        }))
    }
}

/// The command line for a session (without the executable).
pub fn claude_args(
    opts: &StartOptions,
    session_id: &str,
    resume: bool,
    extra: &[String],
) -> Vec<String> {
    let mut a: Vec<String> = [
        "-p",
        "--output-format",
        "stream-json",
        "--input-format",
        "stream-json",
        "--verbose",
        "--permission-prompt-tool=stdio",
        // Each user message gaffer writes is echoed when Claude takes it: a message
        // sent too late for the running turn is answered in a turn of its own, and
        // gaffer's turn ends only when every message was answered.
        "--replay-user-messages",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if resume {
        a.push(format!("--resume={session_id}"));
    } else {
        a.push(format!("--session-id={session_id}"));
    }
    // Plan mode is Claude Code's own read-only mode: no edits, no commands that change
    // anything (gaffer's gate and the sandbox refuse them too).
    a.push(match opts.mode {
        Mode::ReadOnly => "--permission-mode=plan".into(),
        Mode::ReadWrite => "--permission-mode=default".into(),
    });
    if opts.mode == Mode::ReadOnly {
        a.push(format!("--disallowedTools={READ_ONLY_DENIED_TOOLS}"));
    }
    if !opts.role_prompt.is_empty() {
        a.push(format!("--append-system-prompt={}", opts.role_prompt));
    }
    if let Some(m) = &opts.model {
        a.push(format!("--model={m}"));
    }
    a.extend(extra.iter().cloned());
    a
}

/// Claude's config directory: `CLAUDE_CONFIG_DIR` (from the session env, then this
/// process), else `~/.claude` (the session's `HOME`, else gaffer's).
pub fn claude_config_dir(env: &BTreeMap<String, String>) -> PathBuf {
    crate::state::user_dir(env, "CLAUDE_CONFIG_DIR", ".claude")
}

/// Claude Code also keeps `~/.claude.json` unless `CLAUDE_CONFIG_DIR` moves it.
fn claude_state_files(env: &BTreeMap<String, String>) -> Vec<PathBuf> {
    let moved = env.contains_key("CLAUDE_CONFIG_DIR")
        || std::env::var_os("CLAUDE_CONFIG_DIR").is_some_and(|d| !d.is_empty());
    if moved {
        Vec::new()
    } else {
        vec![crate::state::user_home(env).join(".claude.json")]
    }
}

/// Where Claude keeps the transcript of `session_id` for a canonical workspace.
pub fn claude_transcript_path(config_dir: &Path, canonical_ws: &Path, session_id: &str) -> PathBuf {
    config_dir
        .join("projects")
        .join(claude_project_key(canonical_ws))
        .join(format!("{session_id}.jsonl"))
}

#[async_trait]
impl AgentBackend for ClaudeBackend {
    fn kind(&self) -> AgentKind {
        AgentKind::ClaudeCode
    }
    async fn start(
        &self,
        opts: StartOptions,
        gate: Arc<dyn ApprovalGate>,
    ) -> Result<Box<dyn AgentSession>> {
        let id = uuid::Uuid::new_v4().to_string();
        self.launch(opts, gate, id, false).await
    }
    async fn resume(
        &self,
        opts: StartOptions,
        session_id: &str,
        gate: Arc<dyn ApprovalGate>,
    ) -> Result<Box<dyn AgentSession>> {
        self.launch(opts, gate, session_id.to_string(), true).await
    }
}

struct State {
    in_turn: bool,
    /// User messages written and not yet taken by Claude (echoed back).
    untaken: usize,
    /// Usage of the turns Claude ran for this one of gaffer's (one, unless a message
    /// came too late for the first).
    usage: Usage,
    /// `total_cost_usd` when gaffer's last turn ended: Claude reports the session's
    /// running total, so a turn costs the difference.
    session_cost: f64,
    /// The model calls since Claude's last `result`, by reply id: each one's model
    /// and latest usage. With `usage`, the running turn's spend so far.
    calls: BTreeMap<String, (Option<String>, Usage)>,
    /// The spend so far last reported.
    so_far: Usage,
    prices: PriceTable,
    expected: String,
    inputs: HashMap<String, Value>,
    tools: HashMap<String, (String, Value)>,
    last_text: String,
    cancelled: bool,
}

impl State {
    /// A model call of the running turn reported its usage: the turn's spend so far
    /// is reported when it grew. A call's messages repeat its usage, so each call
    /// counts once, at the latest (greatest) counts it reported.
    async fn call_made(&mut self, call: crate::stream_json::ModelCall, em: &Emitter) {
        if !self.in_turn {
            return;
        }
        let (model, usage) = self.calls.entry(call.id).or_default();
        if call.model.is_some() {
            *model = call.model;
        }
        *usage = Usage {
            input_tokens: usage.input_tokens.max(call.usage.input_tokens),
            output_tokens: usage.output_tokens.max(call.usage.output_tokens),
            cached_input_tokens: usage
                .cached_input_tokens
                .max(call.usage.cached_input_tokens),
            cost_usd: None,
        };
        // What Claude's results this turn counted, then the calls since.
        let mut so_far = self.usage;
        for (model, usage) in self.calls.values() {
            so_far += Usage {
                cost_usd: model.as_deref().and_then(|m| self.prices.cost(m, usage)),
                ..*usage
            };
        }
        if so_far != self.so_far {
            self.so_far = so_far;
            em.emit(AgentEvent::UsageSoFar { usage: so_far }).await;
        }
    }
}

async fn drive(
    mut p: AgentProcess,
    mut cmd_rx: tokio::sync::mpsc::UnboundedReceiver<Command>,
    em: Emitter,
    record: Arc<Mutex<SessionRecord>>,
    gate: Arc<dyn ApprovalGate>,
    expected: String,
    prices: PriceTable,
) {
    let (mut broker, mut decided_rx) = PermissionBroker::<String>::new(gate);
    let mut st = State {
        in_turn: false,
        untaken: 0,
        usage: Usage::default(),
        session_cost: 0.0,
        calls: BTreeMap::new(),
        so_far: Usage::default(),
        prices,
        expected,
        inputs: HashMap::new(),
        tools: HashMap::new(),
        last_text: String::new(),
        cancelled: false,
    };
    loop {
        tokio::select! {
            line = p.next_line() => match line {
                Ok(Some(line)) => {
                    let r = handle_line(&mut p, &line, &em, &record, &mut broker, &mut st).await;
                    if let Err(e) = r {
                        em.error(e).await;
                        p.kill().await;
                        return;
                    }
                }
                Err(e) => {
                    em.error(e).await;
                    p.kill().await;
                    return;
                }
                Ok(None) => {
                    em.error(p.exited(st.in_turn).await).await;
                    return;
                }
            },
            cmd = cmd_rx.recv() => match cmd {
                Some(Command::Turn(text)) => {
                    st.in_turn = true;
                    st.untaken += 1;
                    st.usage = Usage::default();
                    st.calls.clear();
                    st.so_far = Usage::default();
                    st.cancelled = false;
                    st.last_text.clear();
                    let msg = json!({
                        "type": "user",
                        "message": {"role": "user", "content": text},
                        "parent_tool_use_id": null,
                        "session_id": st.expected,
                    });
                    if let Err(e) = p.send_or_exited(&msg).await { em.error(e).await; p.kill().await; return; }
                }
                Some(Command::Steer(id, text)) => {
                    // Claude Code reads user messages on its stream-json input while a
                    // turn runs and gives them to the model before it goes on.
                    if !st.in_turn || st.cancelled {
                        em.delivered(id, Delivery::NextTurn).await;
                        continue;
                    }
                    let msg = json!({
                        "type": "user",
                        "message": {"role": "user", "content": text},
                        "parent_tool_use_id": null,
                        "session_id": st.expected,
                    });
                    if let Err(e) = p.send_or_exited(&msg).await { em.error(e).await; p.kill().await; return; }
                    st.untaken += 1;
                    em.delivered(id, Delivery::Live).await;
                }
                Some(Command::Interrupt) => {
                    st.cancelled = true;
                    interrupt(&mut p).await;
                }
                Some(Command::Answer(key, d)) => {
                    if relay(&mut p, &em, &mut broker, &st, &key, d).await.is_err() { return; }
                }
                Some(Command::Shutdown) | None => { p.kill().await; return; }
            },
            Some((key, d)) = decided_rx.recv() => {
                if relay(&mut p, &em, &mut broker, &st, &key, d).await.is_err() { return; }
            }
        }
    }
}

/// The `PostToolUse` hook's answer: when the command's output shows the kernel refused
/// something, context for the model saying it was gaffer's sandbox and where writing is
/// allowed; otherwise nothing.
fn sandbox_context(input: &Value, note: &str) -> Value {
    let response = input
        .get("tool_response")
        .map(Value::to_string)
        .unwrap_or_default();
    if sandbox::looks_refused(&response) {
        json!({"hookSpecificOutput": {
            "hookEventName": "PostToolUse",
            "additionalContext": sandbox::refusal_message(note),
        }})
    } else {
        json!({})
    }
}

async fn interrupt(p: &mut AgentProcess) {
    let msg = json!({
        "type": "control_request",
        "request_id": format!("req_int_{}", uuid::Uuid::new_v4().simple()),
        "request": {"subtype": "interrupt"}
    });
    let _ = p.send(&msg).await;
}

fn control_response(request_id: &str, d: &PermissionDecision, original: &Value) -> Value {
    let resp = match d {
        PermissionDecision::Allow { updated_input } => json!({
            "behavior": "allow",
            "updatedInput": updated_input.clone().unwrap_or_else(|| original.clone()),
        }),
        PermissionDecision::Deny { message } => json!({"behavior": "deny", "message": message}),
    };
    json!({
        "type": "control_response",
        "response": {"subtype": "success", "request_id": request_id, "response": resp}
    })
}

async fn relay(
    p: &mut AgentProcess,
    em: &Emitter,
    broker: &mut PermissionBroker<String>,
    st: &State,
    key: &str,
    d: PermissionDecision,
) -> Result<()> {
    let Some(wires) = broker.resolve(key, &d) else {
        return Ok(());
    };
    let original = st.inputs.get(key).cloned().unwrap_or(Value::Null);
    for w in wires {
        p.send(&control_response(&w, &d, &original)).await?;
    }
    em.emit(AgentEvent::PermissionResolved {
        request_id: key.to_string(),
        decision: d,
    })
    .await;
    Ok(())
}

/// `Claude AI usage limit reached|<unix seconds>` → the reset time.
fn usage_limit_until(text: &str) -> Option<std::time::SystemTime> {
    let idx = text.find("usage limit reached|")?;
    let rest = &text[idx + "usage limit reached|".len()..];
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    let secs: u64 = digits.parse().ok()?;
    Some(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs))
}

fn check_session(
    st: &State,
    record: &Arc<Mutex<SessionRecord>>,
    reported: Option<&str>,
) -> Result<Option<bool>> {
    let Some(rep) = reported.filter(|s| !s.is_empty()) else {
        return Ok(None);
    };
    if rep != st.expected {
        return Err(AgentError::SessionMismatch {
            agent: AGENT.into(),
            expected: st.expected.clone(),
            reported: rep.into(),
        });
    }
    set_verified(record, true);
    Ok(Some(true))
}

async fn handle_line(
    p: &mut AgentProcess,
    line: &str,
    em: &Emitter,
    record: &Arc<Mutex<SessionRecord>>,
    broker: &mut PermissionBroker<String>,
    st: &mut State,
) -> Result<()> {
    match parse_stream_line(line).map_err(|e| p.malformed(line, e))? {
        StreamMessage::Init { session_id } => {
            if check_session(st, record, session_id.as_deref())?.is_some() {
                em.emit(AgentEvent::SessionStarted {
                    session_id: st.expected.clone(),
                    verified: true,
                })
                .await;
            }
        }
        StreamMessage::Assistant { blocks, call } => {
            if let Some(call) = call {
                st.call_made(call, em).await;
            }
            for block in blocks {
                match block {
                    AssistantBlock::Text(text) => {
                        st.last_text.clone_from(&text);
                        em.emit(AgentEvent::AssistantText { text }).await;
                    }
                    AssistantBlock::ToolUse { id, name, input } => {
                        st.tools.insert(id.clone(), (name.clone(), input.clone()));
                        em.emit(AgentEvent::ToolCall {
                            call_id: id,
                            name,
                            input,
                        })
                        .await;
                    }
                    AssistantBlock::Other => {}
                }
            }
        }
        StreamMessage::ToolResults { results } => {
            for r in results {
                let output = match p.sandbox_note() {
                    Some(note) if r.is_error => sandbox::explain_refusal(&r.output, note),
                    _ => r.output,
                };
                em.emit(AgentEvent::ToolResult {
                    call_id: r.tool_use_id.clone(),
                    output,
                    is_error: r.is_error,
                })
                .await;
                if r.is_error {
                    continue;
                }
                if let Some((name, input)) = st.tools.get(&r.tool_use_id) {
                    if matches!(
                        name.as_str(),
                        "Write" | "Edit" | "MultiEdit" | "NotebookEdit"
                    ) {
                        let path = input
                            .get("file_path")
                            .or_else(|| input.get("notebook_path"))
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string();
                        let kind = if name == "Write" { "write" } else { "edit" };
                        em.emit(AgentEvent::FileChange {
                            path,
                            kind: kind.into(),
                            diff: None,
                        })
                        .await;
                    }
                }
            }
        }
        StreamMessage::UserEcho => {
            st.untaken = st.untaken.saturating_sub(1);
            // Stopped: a message Claude takes after the interrupt would start a turn
            // nobody asked for.
            if st.cancelled {
                interrupt(p).await;
            }
        }
        StreamMessage::Result(end) => {
            check_session(st, record, end.session_id.as_deref())?;
            // Tokens are per result; `total_cost_usd` is the session's so far.
            let total_cost = end.usage.cost_usd;
            st.usage += Usage {
                cost_usd: None,
                ..end.usage
            };
            // The result counts these calls (and the spend so far reported is replaced
            // by the turn's `Usage` below).
            st.calls.clear();
            if let Some(total) = total_cost {
                st.usage.cost_usd = Some((total - st.session_cost).max(0.0));
            }
            if st.untaken > 0 {
                // Claude runs another turn for the messages it has not taken yet.
                if let Some(t) = end.result.filter(|t| !t.is_empty()) {
                    st.last_text = t;
                }
                return Ok(());
            }
            let text = end.result.unwrap_or_else(|| st.last_text.clone());
            if let Some(until) = usage_limit_until(&text) {
                em.emit(AgentEvent::RateLimited {
                    until: humantime::format_rfc3339_seconds(until).to_string(),
                    provider: AGENT.into(),
                    reason: "usage limit".into(),
                })
                .await;
            }
            let status = if end.subtype == "success" && !end.is_error {
                TurnStatus::Completed
            } else if st.cancelled {
                TurnStatus::Interrupted
            } else {
                TurnStatus::Failed
            };
            st.in_turn = false;
            st.so_far = Usage::default();
            let usage = std::mem::take(&mut st.usage);
            if let Some(total) = total_cost {
                st.session_cost = total;
            }
            em.emit(AgentEvent::Usage { usage }).await;
            em.emit(AgentEvent::TurnCompleted {
                result: TurnResult {
                    status,
                    text,
                    usage,
                    session_id: st.expected.clone(),
                    reason: (status != TurnStatus::Completed).then_some(end.subtype),
                    provider_error: end.api_error.filter(|_| status == TurnStatus::Failed),
                },
            })
            .await;
        }
        StreamMessage::ControlRequest {
            request_id,
            request:
                ControlRequest::CanUseTool {
                    tool_name,
                    input,
                    tool_use_id,
                    decision_reason,
                },
        } => {
            let underlying = tool_use_id.unwrap_or_else(|| request_id.clone());
            let kind = match tool_name.as_str() {
                "Bash" => PermissionKind::Command,
                "Write" | "Edit" | "MultiEdit" | "NotebookEdit" => PermissionKind::FileChange,
                _ => PermissionKind::Tool,
            };
            let pr = PermissionRequest {
                id: format!(
                    "{}:{}:{}",
                    AgentKind::ClaudeCode.as_str(),
                    st.expected,
                    underlying
                ),
                agent: AgentKind::ClaudeCode,
                session_id: st.expected.clone(),
                tool_name,
                command: (kind == PermissionKind::Command)
                    .then(|| PermissionRequest::command_in(&input))
                    .flatten(),
                paths: PermissionRequest::paths_in(&input),
                input: input.clone(),
                kind,
                reason: decision_reason,
            };
            let pr = em.redactor().redact_serde(pr);
            st.inputs.insert(pr.id.clone(), input);
            match broker.offer(request_id.clone(), &pr) {
                Offer::Asked => {
                    em.emit(AgentEvent::PermissionRequested { request: pr })
                        .await;
                }
                Offer::Joined => {}
                Offer::Decided(d) => {
                    let original = st.inputs.get(&pr.id).cloned().unwrap_or(Value::Null);
                    p.send(&control_response(&request_id, &d, &original))
                        .await?;
                }
            }
        }
        StreamMessage::ControlRequest {
            request_id,
            request: ControlRequest::HookCallback { callback_id, input },
        } => {
            let output = match p.sandbox_note() {
                Some(note) if callback_id == SANDBOX_HOOK => sandbox_context(&input, note),
                _ => json!({}),
            };
            p.send(&json!({
                "type": "control_response",
                "response": {"subtype": "success", "request_id": request_id, "response": output}
            }))
            .await?;
        }
        StreamMessage::ControlRequest {
            request_id,
            request: ControlRequest::Other { subtype },
        } => {
            // We register no hooks or MCP servers: answer unknown requests with an error.
            let msg = json!({
                "type": "control_response",
                "response": {"subtype": "error", "request_id": request_id,
                             "error": format!("gaffer does not handle control request {subtype:?}")}
            });
            p.send(&msg).await?;
        }
        StreamMessage::ControlCancel { request_id } => {
            if let Some(rid) = request_id {
                broker.withdraw(&rid);
            }
        }
        StreamMessage::ControlError { message } => {
            tracing::warn!(agent = AGENT, error = %em.redactor().redact(&message), "control request failed");
        }
        StreamMessage::RateLimit {
            status,
            resets_at: Some(secs),
            limit_type,
        } if status == "rejected" => {
            let until = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
            let kind = limit_type.as_deref().unwrap_or("usage");
            em.emit(AgentEvent::RateLimited {
                until: humantime::format_rfc3339_seconds(until).to_string(),
                provider: AGENT.into(),
                reason: format!("usage limit ({kind})"),
            })
            .await;
        }
        StreamMessage::RateLimit { .. } | StreamMessage::Ignored { .. } => {}
    }
    Ok(())
}
