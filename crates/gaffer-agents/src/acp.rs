//! Agent Client Protocol backend (JSON-RPC 2.0 over stdio): Gemini CLI (`gemini --acp`)
//! and any ACP agent given as a command. `initialize` → `session/new` (or `session/load`
//! for resume, only where the agent advertises `loadSession`) → `session/prompt`;
//! `session/update` notifications are normalized; `session/request_permission` goes
//! through the [`ApprovalGate`]; `session/cancel` cancels.
//!
//! Written against the ACP schema by hand (field names as in the schema) rather than with
//! the `agent-client-protocol` crate: its client side runs `!Send` futures on a
//! `LocalSet`, which does not fit the `Send` session handles the engine holds, and gaffer
//! needs only the client half of a handful of methods. We advertise no `fs` / `terminal`
//! capabilities, so the agent uses its own tools and every risky one asks permission.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};

use crate::accounting::PriceTable;
use crate::error::{AgentError, Result};
use crate::jsonrpc::{parse_rpc_line, Framing, RpcMessage};
use crate::process::{find_executable, home_dir, AgentProcess, SpawnSpec};
use crate::redact::Redactor;
use crate::sandbox;
use crate::session::{
    driver_channels, AgentBackend, AgentSession, ApprovalGate, Command, DriverSession, Emitter,
    Offer, PermissionBroker,
};
use crate::state::{self, Seed};
use crate::types::{
    AgentEvent, AgentKind, Delivery, PermissionDecision, PermissionKind, PermissionRequest,
    SessionRecord, StartOptions, TurnResult, TurnStatus, Usage,
};
use crate::workspace::{canonical_workspace, workspace_key};

/// ACP protocol version gaffer speaks.
pub const PROTOCOL_VERSION: u64 = 1;

/// Configuration of one ACP agent.
#[derive(Debug, Clone)]
pub struct AcpConfig {
    /// Name for logs and errors (`gemini`, ...).
    pub name: String,
    /// Executable; when `None`, `env_var` then `default_bin` on PATH.
    pub bin: Option<PathBuf>,
    /// Env var overriding the executable.
    pub env_var: String,
    /// Executable name looked up on PATH.
    pub default_bin: String,
    /// Arguments.
    pub args: Vec<String>,
    /// Where the agent keeps its own state (sessions, settings); writable in the sandbox.
    pub state_dirs: Vec<PathBuf>,
    /// Environment variables it is started with, on top of the session's.
    pub env: BTreeMap<String, String>,
    /// The variable that moves the agent's home for its state (Gemini CLI:
    /// `GEMINI_CLI_HOME`): a session with a private state dir
    /// ([`StartOptions::state_dir`]) gets its own there instead of `state_dirs`.
    pub state_home_env: Option<String>,
    /// Variables of gaffer's environment the agent gets on top of
    /// [`crate::environment::BASE`] (its API keys).
    pub pass_env: Vec<String>,
    /// Arguments added for a read-only session (the agent's own read-only mode).
    pub read_only_args: Vec<String>,
    /// Redactor.
    pub redactor: Arc<Redactor>,
    /// What the models' tokens cost (ACP agents report tokens only); a model not in
    /// it leaves a turn's cost unknown.
    pub prices: PriceTable,
}

/// Variables of gaffer's environment Gemini CLI gets: where it keeps its state and what
/// it may need to log in (API keys, Vertex AI).
pub const GEMINI_PASSED_ENV: &[&str] = &[
    // Gemini CLI's own settings (`GEMINI_API_KEY`, `GEMINI_MODEL`, `GEMINI_CLI_HOME`, ...)
    // and Google's (`GOOGLE_API_KEY`, `GOOGLE_GEMINI_BASE_URL`, `GOOGLE_CLOUD_PROJECT`,
    // `GOOGLE_GENAI_USE_VERTEXAI`, `GOOGLE_APPLICATION_CREDENTIALS`, ...).
    "GEMINI_*", "GOOGLE_*",
];

/// What a private Gemini home gets from the user's `~/.gemini`: the login, and of the
/// settings how to authenticate, which model, and the user's privacy and update choices
/// (never hooks, MCP servers, tools or context files).
const GEMINI_SEED: Seed<'static> = Seed {
    copy: &[
        "oauth_creds.json",
        "google_accounts.json",
        "google_account_id",
        "installation_id",
    ],
    json_keys: &[(
        "settings.json",
        &[
            "security",
            "selectedAuthType",
            "model",
            "privacy",
            "telemetry",
            "general",
        ],
    )],
    once: &[],
};

impl AcpConfig {
    /// Gemini CLI: `GAFFER_GEMINI_BIN` or `gemini` on PATH, with `--acp`.
    pub fn gemini() -> Self {
        AcpConfig {
            name: "gemini".into(),
            bin: None,
            env_var: "GAFFER_GEMINI_BIN".into(),
            default_bin: "gemini".into(),
            args: vec!["--acp".into()],
            state_dirs: vec![home_dir().join(".gemini")],
            env: BTreeMap::new(),
            state_home_env: Some("GEMINI_CLI_HOME".into()),
            pass_env: GEMINI_PASSED_ENV.iter().map(|s| s.to_string()).collect(),
            read_only_args: vec!["--approval-mode=plan".into()],
            redactor: Arc::new(Redactor::default()),
            prices: PriceTable::default(),
        }
    }
    /// An ACP agent command (`[agents.acp.<name>]`). It keeps no state the sandbox
    /// lets it write until `state_dirs` says where (each agent has its own place: the
    /// Claude Code ACP adapter `~/.claude`, ...).
    pub fn command(name: impl Into<String>, bin: PathBuf, args: Vec<String>) -> Self {
        let name = name.into();
        AcpConfig {
            env_var: format!("GAFFER_{}_BIN", name.to_ascii_uppercase().replace('-', "_")),
            default_bin: name.clone(),
            state_dirs: Vec::new(),
            env: BTreeMap::new(),
            state_home_env: None,
            pass_env: Vec::new(),
            read_only_args: Vec::new(),
            name,
            bin: Some(bin),
            args,
            redactor: Arc::new(Redactor::default()),
            prices: PriceTable::default(),
        }
    }
}

/// The ACP backend.
#[derive(Debug, Clone)]
pub struct AcpBackend {
    cfg: AcpConfig,
}

impl AcpBackend {
    /// A backend.
    pub fn new(cfg: AcpConfig) -> Self {
        AcpBackend { cfg }
    }

    async fn launch(
        &self,
        opts: StartOptions,
        gate: Arc<dyn ApprovalGate>,
        resume: Option<&str>,
    ) -> Result<Box<dyn AgentSession>> {
        let agent = self.cfg.name.clone();
        let ws = canonical_workspace(&opts.workspace)?;
        let bin = match &self.cfg.bin {
            Some(b) => b.clone(),
            None => find_executable(&self.cfg.env_var, &self.cfg.default_bin)?,
        };
        let mut env = self.cfg.env.clone();
        env.extend(opts.agent_env());
        let mut state_dirs = self.cfg.state_dirs.clone();
        if let Some(var) = &self.cfg.state_home_env {
            let user = state::user_dir(&env, var, "").join(".gemini");
            if let Some(dir) = state::private_dir(&opts, &agent, &user, ".gemini", &GEMINI_SEED)? {
                env.insert(var.clone(), dir.display().to_string());
                state_dirs = vec![dir];
            }
        }
        let pass: Vec<&str> = self.cfg.pass_env.iter().map(String::as_str).collect();
        let mut args = self.cfg.args.clone();
        if opts.mode == crate::types::Mode::ReadOnly {
            args.extend(self.cfg.read_only_args.iter().cloned());
        }
        let mut p = AgentProcess::spawn(
            &agent,
            &bin,
            &args,
            &ws,
            &env,
            SpawnSpec {
                opts: &opts,
                pass_env: &pass,
                withhold: &[],
                state_dirs,
                state_files: Vec::new(),
            },
        )?;
        let mut next_id = 0i64;
        let init = p.rpc(Framing::Standard, &mut next_id, "initialize", json!({
            "protocolVersion": PROTOCOL_VERSION,
            "clientCapabilities": {"fs": {"readTextFile": false, "writeTextFile": false}, "terminal": false},
            "clientInfo": {"name": "gaffer", "version": env!("CARGO_PKG_VERSION")},
        }))
        .await?
        .map_err(|m| AgentError::Rejected { agent: agent.clone(), method: "initialize".into(), message: m })?;
        let load_session = init
            .pointer("/agentCapabilities/loadSession")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let cwd = ws.to_string_lossy().into_owned();
        let (session_id, opened) = match resume {
            Some(id) => {
                if !load_session {
                    p.kill().await;
                    return Err(AgentError::SessionGone {
                        agent,
                        session_id: id.into(),
                        detail: "the agent does not advertise loadSession, so its sessions cannot be resumed".into(),
                    });
                }
                match p
                    .rpc(
                        Framing::Standard,
                        &mut next_id,
                        "session/load",
                        json!({"sessionId": id, "cwd": cwd, "mcpServers": []}),
                    )
                    .await?
                {
                    Ok(r) => (id.to_string(), r),
                    Err(m) => {
                        p.kill().await;
                        return Err(AgentError::SessionGone {
                            agent,
                            session_id: id.into(),
                            detail: format!("session/load failed: {m}"),
                        });
                    }
                }
            }
            None => {
                let r = p
                    .rpc(
                        Framing::Standard,
                        &mut next_id,
                        "session/new",
                        json!({"cwd": cwd, "mcpServers": []}),
                    )
                    .await?
                    .map_err(|m| AgentError::Rejected {
                        agent: agent.clone(),
                        method: "session/new".into(),
                        message: m,
                    })?;
                let id = r
                    .get("sessionId")
                    .and_then(Value::as_str)
                    .ok_or_else(|| {
                        p.malformed(&r.to_string(), "session/new result has no sessionId")
                    })?
                    .to_string();
                (id, r)
            }
        };
        // The session's model (ACP's `models.currentModelId`, else the one gaffer
        // asked for): what tokens reported without a model are priced at.
        let model = opened
            .pointer("/models/currentModelId")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or(opts.model.clone());
        let pricing = Pricer {
            prices: self.cfg.prices.clone(),
            model,
        };
        let record = SessionRecord {
            agent: AgentKind::Acp,
            role: opts.role.clone(),
            workspace_key: workspace_key(&ws),
            session_id: session_id.clone(),
            verified: true,
        };
        let (record, cmd_tx, cmd_rx, em, events_rx) =
            driver_channels(record, self.cfg.redactor.clone());
        let preamble =
            (resume.is_none() && !opts.role_prompt.is_empty()).then(|| opts.role_prompt.clone());
        let task = tokio::spawn(drive(
            p, cmd_rx, em, gate, session_id, next_id, agent, preamble, pricing,
        ));
        Ok(Box::new(DriverSession {
            record,
            cmd_tx,
            events_rx,
            task: Some(task),
        }))
    }
}

#[async_trait]
impl AgentBackend for AcpBackend {
    fn kind(&self) -> AgentKind {
        AgentKind::Acp
    }
    async fn start(
        &self,
        opts: StartOptions,
        gate: Arc<dyn ApprovalGate>,
    ) -> Result<Box<dyn AgentSession>> {
        self.launch(opts, gate, None).await
    }
    async fn resume(
        &self,
        opts: StartOptions,
        session_id: &str,
        gate: Arc<dyn ApprovalGate>,
    ) -> Result<Box<dyn AgentSession>> {
        self.launch(opts, gate, Some(session_id)).await
    }
}

struct State {
    agent: String,
    session: String,
    next_id: i64,
    prompt_req: Option<i64>,
    text: String,
    tools: HashMap<String, (String, String)>,
    pending: Vec<Value>,
    options: HashMap<String, Vec<Value>>,
    preamble: Option<String>,
    pricing: Pricer,
    /// Messages for the running prompt, sent with a new `session/prompt` once the
    /// cancelled one returns: `(id, text)`.
    steering: Vec<(String, String)>,
    /// A person asked to stop the turn: no new prompt after the cancel.
    interrupted: bool,
    /// Usage of the prompts this turn already made (a steered turn makes several).
    usage: Usage,
    /// The text of the running (or last) prompt.
    prompt_text: String,
    /// The prompt a person's interrupt stopped: the next turn recalls it.
    stopped: Option<String>,
}

#[allow(clippy::too_many_arguments)]
async fn drive(
    mut p: AgentProcess,
    mut cmd_rx: tokio::sync::mpsc::UnboundedReceiver<Command>,
    em: Emitter,
    gate: Arc<dyn ApprovalGate>,
    session: String,
    next_id: i64,
    agent: String,
    preamble: Option<String>,
    pricing: Pricer,
) {
    let (mut broker, mut decided_rx) = PermissionBroker::<Value>::new(gate);
    let mut st = State {
        agent,
        session,
        next_id,
        prompt_req: None,
        text: String::new(),
        tools: HashMap::new(),
        pending: Vec::new(),
        options: HashMap::new(),
        preamble,
        pricing,
        steering: Vec::new(),
        interrupted: false,
        usage: Usage::default(),
        prompt_text: String::new(),
        stopped: None,
    };
    loop {
        tokio::select! {
            line = p.next_line() => match line {
                Ok(Some(line)) => {
                    if let Err(e) = handle_line(&mut p, &line, &em, &mut broker, &mut st).await {
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
                    em.error(p.exited(st.prompt_req.is_some()).await).await;
                    return;
                }
            },
            cmd = cmd_rx.recv() => match cmd {
                Some(Command::Turn(text)) => {
                    if st.prompt_req.is_some() { em.error(AgentError::TurnInProgress).await; continue; }
                    let text = match st.preamble.take() { Some(pre) => format!("{pre}\n\n{text}"), None => text };
                    let text = match st.stopped.take() { Some(stopped) => recall(&stopped, &text), None => text };
                    st.interrupted = false;
                    st.usage = Usage::default();
                    if let Err(e) = prompt(&mut p, &mut st, &text).await { em.error(e).await; p.kill().await; return; }
                }
                Some(Command::Steer(id, text)) => {
                    // ACP has no way into a running prompt: cancel it, then prompt
                    // again with the message (when the cancelled prompt returns).
                    if st.prompt_req.is_none() || st.interrupted {
                        em.delivered(id, Delivery::NextTurn).await;
                        continue;
                    }
                    if st.steering.is_empty() {
                        cancel(&mut p, &mut broker, &mut st).await;
                    }
                    st.steering.push((id, text));
                }
                Some(Command::Interrupt) => {
                    st.interrupted = true;
                    cancel(&mut p, &mut broker, &mut st).await;
                }
                Some(Command::Answer(key, d)) => { if relay(&mut p, &em, &mut broker, &mut st, &key, d).await.is_err() { return; } }
                Some(Command::Shutdown) | None => { p.kill().await; return; }
            },
            Some((key, d)) = decided_rx.recv() => {
                if relay(&mut p, &em, &mut broker, &mut st, &key, d).await.is_err() { return; }
            }
        }
    }
}

/// Send a `session/prompt` of `text`.
async fn prompt(p: &mut AgentProcess, st: &mut State, text: &str) -> Result<()> {
    st.prompt_text = text.to_owned();
    st.next_id += 1;
    st.prompt_req = Some(st.next_id);
    st.text.clear();
    let msg = RpcMessage::request(
        st.next_id,
        "session/prompt",
        json!({"sessionId": st.session, "prompt": [{"type": "text", "text": text}]}),
    );
    p.send_or_exited(&msg.to_value(Framing::Standard)).await
}

/// A prompt after `stopped` was cancelled. An agent may drop a cancelled prompt's
/// exchange from its history (Gemini CLI forgets the whole prompt, gaffer's role
/// preamble included), so the new prompt says again what was asked.
fn recall(stopped: &str, then: &str) -> String {
    format!(
        "Your previous turn was stopped before it finished; what it changed in the \
         workspace is still there. It was asked:\n\n<stopped-request>\n{stopped}\n</stopped-request>\n\n{then}"
    )
}

/// `session/cancel`, answering pending permission requests with `cancelled` as the
/// client must.
async fn cancel(p: &mut AgentProcess, broker: &mut PermissionBroker<Value>, st: &mut State) {
    let cancel = RpcMessage::notification("session/cancel", json!({"sessionId": st.session}));
    let _ = p.send_rpc(Framing::Standard, &cancel).await;
    for w in std::mem::take(&mut st.pending) {
        broker.withdraw(&w);
        let cancelled = RpcMessage::result(w, json!({"outcome": {"outcome": "cancelled"}}));
        let _ = p.send_rpc(Framing::Standard, &cancelled).await;
    }
}

/// Pick the option id for a decision: the first `allow_once` (else `allow_always`) for
/// allow; the first `reject_once` (else `reject_always`) for deny.
fn pick_option(options: &[Value], allow: bool) -> Option<String> {
    let prefs: &[&str] = if allow {
        &["allow_once", "allow_always"]
    } else {
        &["reject_once", "reject_always"]
    };
    prefs.iter().find_map(|k| {
        options
            .iter()
            .find(|o| o.get("kind").and_then(Value::as_str) == Some(k))
            .and_then(|o| o.get("optionId").and_then(Value::as_str))
            .map(str::to_string)
    })
}

fn outcome(options: &[Value], d: &PermissionDecision) -> Value {
    match pick_option(options, d.is_allow()) {
        Some(id) => json!({"outcome": {"outcome": "selected", "optionId": id}}),
        None => json!({"outcome": {"outcome": "cancelled"}}),
    }
}

async fn relay(
    p: &mut AgentProcess,
    em: &Emitter,
    broker: &mut PermissionBroker<Value>,
    st: &mut State,
    key: &str,
    d: PermissionDecision,
) -> Result<()> {
    let Some(wires) = broker.resolve(key, &d) else {
        return Ok(());
    };
    let options = st.options.get(key).cloned().unwrap_or_default();
    for w in wires {
        st.pending.retain(|x| x != &w);
        p.send_rpc(
            Framing::Standard,
            &RpcMessage::result(w, outcome(&options, &d)),
        )
        .await?;
    }
    em.emit(AgentEvent::PermissionResolved {
        request_id: key.into(),
        decision: d,
    })
    .await;
    Ok(())
}

/// The tokens of a turn from its `session/prompt` result: the schema's `usage`
/// (`inputTokens`, `outputTokens`, `cachedReadTokens`) or, where an agent reports them
/// as Gemini CLI does, `_meta.quota.token_count` (`input_tokens`, `output_tokens`).
fn prompt_usage(result: &Value) -> Usage {
    let n = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
    if let Some(u) = result.get("usage").filter(|u| u.is_object()) {
        let cached = n(u.get("cachedReadTokens"));
        return Usage {
            input_tokens: n(u.get("inputTokens")).saturating_sub(cached),
            output_tokens: n(u.get("outputTokens")),
            cached_input_tokens: cached,
            cost_usd: None,
        };
    }
    let count = result.pointer("/_meta/quota/token_count");
    Usage {
        input_tokens: n(count.and_then(|c| c.get("input_tokens"))),
        output_tokens: n(count.and_then(|c| c.get("output_tokens"))),
        cached_input_tokens: 0,
        cost_usd: None,
    }
}

/// What a session's tokens cost.
struct Pricer {
    prices: PriceTable,
    /// The session's model, when known.
    model: Option<String>,
}

impl Pricer {
    /// `usage` (of the `session/prompt` result `result`) with its cost: per model where
    /// the agent says which model spent what (Gemini CLI's `_meta.quota.model_usage`),
    /// else at the session's model. Unknown (`None`) when a model has no price.
    fn priced(&self, mut usage: Usage, result: &Value) -> Usage {
        let by_model = result
            .pointer("/_meta/quota/model_usage")
            .and_then(Value::as_array)
            .filter(|m| !m.is_empty());
        usage.cost_usd = match by_model {
            Some(models) => models
                .iter()
                .map(|m| {
                    let n = |k: &str| m.pointer(k).and_then(Value::as_u64).unwrap_or(0);
                    let spent = Usage {
                        input_tokens: n("/token_count/input_tokens"),
                        output_tokens: n("/token_count/output_tokens"),
                        ..Usage::default()
                    };
                    self.prices
                        .cost(m.get("model").and_then(Value::as_str)?, &spent)
                })
                .sum(),
            None => self
                .model
                .as_deref()
                .and_then(|m| self.prices.cost(m, &usage)),
        };
        usage
    }
}

/// What a permission request's `toolCall` asks, for the gate: its input, the command
/// line and the paths. The schema makes `rawInput` optional and Gemini CLI sends none
/// (only `title`, `kind`, `content`, `locations`), so without it the input is what the
/// request shows, the command of an `execute` call is its title (Gemini CLI's title of a
/// shell call is the command line), and the paths are its locations and diffs.
fn shown_call(tc: &Value, title: &str, kind: &str) -> (Value, Option<String>, Vec<String>) {
    let raw = tc.get("rawInput").filter(|v| !v.is_null());
    let mut paths = raw.map(PermissionRequest::paths_in).unwrap_or_default();
    let named = |key: &str| {
        tc.get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|v| key == "locations" || v.get("type").and_then(Value::as_str) == Some("diff"))
            .filter_map(|v| v.get("path").and_then(Value::as_str).map(str::to_owned))
            .collect::<Vec<_>>()
    };
    for p in named("locations").into_iter().chain(named("content")) {
        if !paths.contains(&p) {
            paths.push(p);
        }
    }
    let command = raw
        .and_then(PermissionRequest::command_in)
        .or_else(|| (kind == "execute" && !title.is_empty()).then(|| title.to_string()));
    let input = match raw {
        Some(raw) => raw.clone(),
        None => json!({
            "title": title,
            "kind": kind,
            "locations": tc.get("locations").cloned().unwrap_or(json!([])),
            "content": tc.get("content").cloned().unwrap_or(json!([])),
        }),
    };
    (input, command, paths)
}

fn content_text(v: &Value) -> String {
    match v {
        Value::Array(a) => a
            .iter()
            .map(content_text)
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Object(_) => match v.get("type").and_then(Value::as_str) {
            Some("text") => v
                .get("text")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            Some("content") => content_text(v.get("content").unwrap_or(&Value::Null)),
            _ => String::new(),
        },
        _ => String::new(),
    }
}

async fn handle_line(
    p: &mut AgentProcess,
    line: &str,
    em: &Emitter,
    broker: &mut PermissionBroker<Value>,
    st: &mut State,
) -> Result<()> {
    match parse_rpc_line(line).map_err(|e| p.malformed(line, e))? {
        RpcMessage::Response { id, outcome } => {
            if id.as_i64().is_some() && id.as_i64() == st.prompt_req {
                st.prompt_req = None;
                let result = outcome.map_err(|e| AgentError::Rejected {
                    agent: st.agent.clone(),
                    method: "session/prompt".into(),
                    message: e.message,
                })?;
                let stop = result
                    .pointer("/stopReason")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                let status = match stop.as_str() {
                    "end_turn" => TurnStatus::Completed,
                    "cancelled" => TurnStatus::Interrupted,
                    _ => TurnStatus::Failed,
                };
                let usage = st.pricing.priced(prompt_usage(&result), &result);
                em.emit(AgentEvent::Usage { usage }).await;
                st.usage += usage;
                let steering = std::mem::take(&mut st.steering);
                if st.interrupted {
                    for (id, _) in steering {
                        em.delivered(id, Delivery::NextTurn).await;
                    }
                    if status == TurnStatus::Interrupted {
                        st.stopped = Some(std::mem::take(&mut st.prompt_text));
                    }
                } else if !steering.is_empty() {
                    // The prompt was cancelled to let the messages in: the turn goes on
                    // with them as the next prompt.
                    let messages = steering
                        .iter()
                        .map(|(_, t)| t.as_str())
                        .collect::<Vec<_>>()
                        .join("\n\n");
                    let then =
                        format!("A person sent you this while you worked on it:\n\n{messages}");
                    let text = if status == TurnStatus::Interrupted {
                        recall(&st.prompt_text, &then)
                    } else {
                        then
                    };
                    prompt(p, st, &text).await?;
                    for (id, _) in steering {
                        em.delivered(id, Delivery::Live).await;
                    }
                    return Ok(());
                }
                let usage = std::mem::take(&mut st.usage);
                em.emit(AgentEvent::TurnCompleted {
                    result: TurnResult {
                        status,
                        text: std::mem::take(&mut st.text),
                        usage,
                        session_id: st.session.clone(),
                        reason: (status != TurnStatus::Completed).then_some(stop),
                        provider_error: None,
                    },
                })
                .await;
            }
        }
        RpcMessage::Request { id, method, params } if method == "session/request_permission" => {
            let tc = params.get("toolCall").cloned().unwrap_or(Value::Null);
            let tcid = tc
                .get("toolCallId")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let (title, kind) = st.tools.get(&tcid).cloned().unwrap_or_default();
            let title = tc
                .get("title")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or(title);
            let kind = tc
                .get("kind")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or(kind);
            let options = params
                .get("options")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let (input, command, paths) = shown_call(&tc, &title, &kind);
            let pr = PermissionRequest {
                id: format!("acp:{}:{}", st.session, tcid),
                agent: AgentKind::Acp,
                session_id: st.session.clone(),
                tool_name: title,
                input,
                command,
                paths,
                kind: match kind.as_str() {
                    "execute" => PermissionKind::Command,
                    "edit" | "delete" | "move" => PermissionKind::FileChange,
                    _ => PermissionKind::Tool,
                },
                reason: None,
            };
            let pr = em.redactor().redact_serde(pr);
            st.options.insert(pr.id.clone(), options.clone());
            match broker.offer(id.clone(), &pr) {
                Offer::Asked => {
                    st.pending.push(id);
                    em.emit(AgentEvent::PermissionRequested { request: pr })
                        .await;
                }
                Offer::Joined => st.pending.push(id),
                Offer::Decided(d) => {
                    p.send_rpc(
                        Framing::Standard,
                        &RpcMessage::result(id, outcome(&options, &d)),
                    )
                    .await?;
                }
            }
        }
        RpcMessage::Request {
            id, method: other, ..
        } => {
            // fs/*, terminal/*: not advertised, so not served.
            let refusal = RpcMessage::error(id, -32601, format!("Method not found: {other}"));
            p.send_rpc(Framing::Standard, &refusal).await?;
        }
        RpcMessage::Notification { method, params } if method == "session/update" => {
            let u = params.get("update").cloned().unwrap_or(Value::Null);
            match u.get("sessionUpdate").and_then(Value::as_str) {
                Some("agent_message_chunk") => {
                    let t = content_text(u.get("content").unwrap_or(&Value::Null));
                    if !t.is_empty() {
                        st.text.push_str(&t);
                        em.emit(AgentEvent::AssistantText { text: t }).await;
                    }
                }
                Some("tool_call") => {
                    let tcid = u
                        .get("toolCallId")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string();
                    let title = u
                        .get("title")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string();
                    let kind = u
                        .get("kind")
                        .and_then(Value::as_str)
                        .unwrap_or("other")
                        .to_string();
                    st.tools.insert(tcid.clone(), (title.clone(), kind));
                    em.emit(AgentEvent::ToolCall {
                        call_id: tcid,
                        name: title,
                        input: u.get("rawInput").cloned().unwrap_or(Value::Null),
                    })
                    .await;
                }
                Some("tool_call_update") => {
                    let tcid = u
                        .get("toolCallId")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string();
                    let status = u.get("status").and_then(Value::as_str).unwrap_or("");
                    if status == "completed" || status == "failed" {
                        if status == "completed" {
                            for c in u
                                .get("content")
                                .and_then(Value::as_array)
                                .cloned()
                                .unwrap_or_default()
                            {
                                if c.get("type").and_then(Value::as_str) == Some("diff") {
                                    let kind = if c.get("oldText").is_none_or(Value::is_null) {
                                        "add"
                                    } else {
                                        "update"
                                    };
                                    em.emit(AgentEvent::FileChange {
                                        path: c
                                            .get("path")
                                            .and_then(Value::as_str)
                                            .unwrap_or("")
                                            .into(),
                                        kind: kind.into(),
                                        diff: c
                                            .get("newText")
                                            .and_then(Value::as_str)
                                            .map(str::to_string),
                                    })
                                    .await;
                                }
                            }
                        }
                        let mut out = content_text(u.get("content").unwrap_or(&Value::Null));
                        if out.is_empty() {
                            out = u
                                .get("rawOutput")
                                .map(|r| r.to_string())
                                .unwrap_or_else(|| status.to_string());
                        }
                        let is_error = status == "failed";
                        let out = match p.sandbox_note() {
                            Some(note) if is_error => sandbox::explain_refusal(&out, note),
                            _ => out,
                        };
                        em.emit(AgentEvent::ToolResult {
                            call_id: tcid,
                            output: out,
                            is_error,
                        })
                        .await;
                    }
                }
                _ => {} // thoughts, plans, commands, modes: not normalized
            }
        }
        RpcMessage::Notification { .. } => {}
    }
    Ok(())
}
