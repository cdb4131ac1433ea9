//! Codex backend: `codex app-server`, JSON-RPC 2.0 over stdio (JSONL, `"jsonrpc"` header
//! omitted). `initialize` / `initialized`, `thread/start` (cwd, model, `approvalPolicy:
//! "untrusted"`, `sandbox: "read-only" | "workspace-write"`), `thread/resume`,
//! `turn/start`, `turn/interrupt`. `item/commandExecution/requestApproval` and
//! `item/fileChange/requestApproval` go through the [`ApprovalGate`] and are answered
//! `{"decision": "accept" | "decline"}`.
//!
//! (`codex exec --json` cannot ask a human, so it is not used here: it would only be a
//! fallback when the user allows full auto.)

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};

use crate::accounting::{PriceTable, Pricing};
use crate::error::{AgentError, Result};
use crate::jsonrpc::{parse_rpc_line, Framing, RpcMessage};
use crate::process::{find_executable, AgentProcess, SpawnSpec};
use crate::redact::Redactor;
use crate::sandbox;
use crate::session::{
    driver_channels, AgentBackend, AgentSession, ApprovalGate, Command, DriverSession, Emitter,
    Offer, PermissionBroker,
};
use crate::state::{self, Seed};
use crate::types::{
    AgentEvent, AgentKind, Delivery, Mode, PermissionDecision, PermissionKind, PermissionRequest,
    SessionRecord, StartOptions, TurnResult, TurnStatus, Usage,
};
use crate::workspace::{canonical_workspace, workspace_key};

const AGENT: &str = "codex";

/// Variables of gaffer's environment Codex gets on top of [`crate::environment::BASE`]:
/// where it keeps its state and its API keys. Nothing else of gaffer's environment
/// reaches it (a model provider with another `env_key` is named in `[agents] env`).
pub const PASSED_ENV: &[&str] = &[
    // Codex's and OpenAI's own settings (`CODEX_HOME`, `CODEX_API_KEY`, `OPENAI_API_KEY`,
    // `OPENAI_BASE_URL`, ...); a model provider of the user's `config.toml` names its key
    // variable (`env_key`), passed too: [`provider_key_vars`].
    "CODEX_*",
    "OPENAI_*",
    "AZURE_OPENAI_API_KEY",
];

/// The variables the model providers of a Codex `config.toml` read their keys from
/// (`[model_providers.<id>] env_key = "..."`): Codex needs them to reach the provider the
/// user chose. A file that does not parse names none (Codex itself will say why).
pub fn provider_key_vars(config_toml: &str) -> Vec<String> {
    let Ok(doc) = config_toml.parse::<toml::Table>() else {
        return Vec::new();
    };
    let providers = doc.get("model_providers").and_then(toml::Value::as_table);
    providers
        .into_iter()
        .flat_map(|p| p.values())
        .filter_map(|p| p.get("env_key").and_then(toml::Value::as_str))
        .map(str::to_owned)
        .collect()
}

/// What a private `CODEX_HOME` gets from the user's: the login (`auth.json`, refreshed
/// when the user's is newer) and, once, the user's `config.toml` (model providers).
const CODEX_SEED: Seed<'static> = Seed {
    copy: &["auth.json"],
    json_keys: &[],
    once: &["config.toml"],
};

/// Configuration of the Codex backend.
#[derive(Debug, Clone, Default)]
pub struct CodexConfig {
    /// Executable; default: `GAFFER_CODEX_BIN`, then `codex` on PATH.
    pub bin: Option<PathBuf>,
    /// Arguments; default `["app-server"]`.
    pub args: Option<Vec<String>>,
    /// Redactor.
    pub redactor: Arc<Redactor>,
    /// What the model's tokens cost (Codex reports tokens only); a model not in it
    /// leaves a turn's cost unknown.
    pub prices: PriceTable,
}

/// The Codex app-server backend.
#[derive(Debug, Clone, Default)]
pub struct CodexBackend {
    cfg: CodexConfig,
}

/// Codex's state dir: `CODEX_HOME` (from the session env, then this process), else
/// `~/.codex`.
pub fn codex_home(env: &BTreeMap<String, String>) -> PathBuf {
    crate::state::user_dir(env, "CODEX_HOME", ".codex")
}

/// The `thread/start` params gaffer sends. `approvalPolicy: "untrusted"`: Codex asks before
/// every patch and every command outside its own short list of read-only ones, so they
/// reach gaffer's gate and policy (with `on-request` it would run them without asking).
///
/// `sandbox_note`: gaffer's kernel sandbox holds the Codex process, and this says where
/// it may write. Codex's own Linux sandbox
/// is bubblewrap, which needs new mount namespaces, and a process in a Landlock domain may
/// never change mounts: inside gaffer's layer every command Codex sandboxed failed
/// (`bwrap: setting up uid map` / `Failed to make / slave`) and Codex asked again to run
/// it unsandboxed. So there Codex runs its commands directly (`danger-full-access`) and
/// they are confined by gaffer's layer, which is the stricter one (it also limits reads);
/// the approval policy is unchanged. Codex's model sees a refused command's own output
/// only, so its instructions say what a refusal means. Unconfined, Codex's own sandbox is
/// the only layer.
pub fn thread_start_params(opts: &StartOptions, cwd: &str, sandbox_note: Option<&str>) -> Value {
    let sandbox = match opts.mode {
        _ if sandbox_note.is_some() => "danger-full-access",
        Mode::ReadOnly => "read-only",
        Mode::ReadWrite => "workspace-write",
    };
    let mut p = json!({
        "cwd": cwd,
        "approvalPolicy": "untrusted",
        "sandbox": sandbox,
    });
    if let Some(m) = &opts.model {
        p["model"] = json!(m);
    }
    let instructions = match sandbox_note {
        Some(note) => format!(
            "{}\n\nYou run in gaffer's sandbox ({note}). A command that gets `Permission denied` or `Operation not permitted` there was {}: do not work around it.",
            opts.role_prompt,
            sandbox::REFUSED_BY_SANDBOX
        ),
        None => opts.role_prompt.clone(),
    };
    let instructions = instructions.trim();
    if !instructions.is_empty() {
        p["developerInstructions"] = json!(instructions);
    }
    p
}

impl CodexBackend {
    /// A backend.
    pub fn new(cfg: CodexConfig) -> Self {
        CodexBackend { cfg }
    }

    async fn launch(
        &self,
        opts: StartOptions,
        gate: Arc<dyn ApprovalGate>,
        resume: Option<&str>,
    ) -> Result<Box<dyn AgentSession>> {
        let ws = canonical_workspace(&opts.workspace)?;
        let bin = match &self.cfg.bin {
            Some(b) => b.clone(),
            None => find_executable("GAFFER_CODEX_BIN", "codex")?,
        };
        // Codex takes `-c` overrides before its subcommand.
        let overrides = crate::local_only::CODEX_CONFIG
            .iter()
            .filter(|_| opts.local_only)
            .flat_map(|kv| ["-c".to_owned(), kv.to_string()]);
        let args: Vec<String> = overrides
            .chain(
                self.cfg
                    .args
                    .clone()
                    .unwrap_or_else(|| vec!["app-server".into()]),
            )
            .collect();
        let mut env = opts.agent_env();
        if let Some(dir) = state::private_dir(
            &opts,
            AGENT,
            &state::user_dir(&env, "CODEX_HOME", ".codex"),
            "",
            &CODEX_SEED,
        )? {
            env.insert("CODEX_HOME".into(), dir.display().to_string());
        }
        let keys = std::fs::read_to_string(codex_home(&env).join("config.toml"))
            .map(|text| provider_key_vars(&text))
            .unwrap_or_default();
        let pass: Vec<&str> = PASSED_ENV
            .iter()
            .copied()
            .chain(keys.iter().map(String::as_str))
            .collect();
        let mut p = AgentProcess::spawn(
            AGENT,
            &bin,
            &args,
            &ws,
            &env,
            SpawnSpec {
                opts: &opts,
                pass_env: &pass,
                withhold: &[],
                state_dirs: vec![codex_home(&env)],
                state_files: Vec::new(),
            },
        )?;
        let mut next_id: i64 = 0;
        let init = p.rpc(Framing::Bare, &mut next_id,
            "initialize",
            json!({"clientInfo": {"name": "gaffer", "title": "gaffer", "version": env!("CARGO_PKG_VERSION")}}),
        )
        .await?;
        if let Err(m) = init {
            return Err(AgentError::Rejected {
                agent: AGENT.into(),
                method: "initialize".into(),
                message: m,
            });
        }
        p.send_or_exited(
            &RpcMessage::notification("initialized", Value::Null).to_value(Framing::Bare),
        )
        .await?;
        let cwd = ws.to_string_lossy().into_owned();
        let params = thread_start_params(&opts, &cwd, p.sandbox_note());
        let (method, params) = match resume {
            Some(id) => {
                let mut params = params;
                params["threadId"] = json!(id);
                ("thread/resume", params)
            }
            None => ("thread/start", params),
        };
        let thread = match p.rpc(Framing::Bare, &mut next_id, method, params).await? {
            Ok(v) => v,
            Err(message) => {
                p.kill().await;
                return Err(match resume {
                    Some(id) => AgentError::SessionGone {
                        agent: AGENT.into(),
                        session_id: id.into(),
                        detail: format!("thread/resume failed: {message}"),
                    },
                    None => AgentError::Rejected {
                        agent: AGENT.into(),
                        method: method.into(),
                        message,
                    },
                });
            }
        };
        let thread_id = thread
            .pointer("/thread/id")
            .and_then(Value::as_str)
            .ok_or_else(|| {
                p.malformed(
                    &thread.to_string(),
                    format!("{method} result has no thread.id"),
                )
            })?
            .to_string();
        if let Some(id) = resume {
            if id != thread_id {
                p.kill().await;
                return Err(AgentError::SessionMismatch {
                    agent: AGENT.into(),
                    expected: id.into(),
                    reported: thread_id,
                });
            }
        }
        let record = SessionRecord {
            agent: AgentKind::Codex,
            role: opts.role.clone(),
            workspace_key: workspace_key(&ws),
            session_id: thread_id.clone(),
            verified: true,
        };
        // The model Codex runs the thread on (its config's when gaffer names none):
        // what its tokens are priced at.
        let model = thread
            .get("model")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or(opts.model.clone());
        let price = model
            .as_deref()
            .and_then(|m| self.cfg.prices.price(m))
            .copied();
        let (record, cmd_tx, cmd_rx, em, events_rx) =
            driver_channels(record, self.cfg.redactor.clone());
        let task = tokio::spawn(drive(p, cmd_rx, em, gate, thread_id, next_id, price));
        Ok(Box::new(DriverSession {
            record,
            cmd_tx,
            events_rx,
            task: Some(task),
        }))
    }
}

#[async_trait]
impl AgentBackend for CodexBackend {
    fn kind(&self) -> AgentKind {
        AgentKind::Codex
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

#[derive(Default, Clone, Copy)]
struct Totals {
    input: u64,
    cached: u64,
    output: u64,
}

struct State {
    thread: String,
    turn: Option<String>,
    in_turn: bool,
    next_id: i64,
    items: HashMap<String, Value>,
    last_text: String,
    totals: Totals,
    at_turn_start: Totals,
    error: Option<String>,
    /// The provider's refusal an `error` notification named (`codexErrorInfo`).
    provider_error: Option<crate::ProviderError>,
    turn_start_req: Option<i64>,
    /// The price of the thread's model, when known.
    price: Option<Pricing>,
    /// `turn/steer` requests awaiting their answer: request id → message id.
    steers: HashMap<i64, String>,
    /// Messages that came before the running turn's id was known: `(id, text)`.
    held: Vec<(String, String)>,
    /// A `turn/completed` held back until every steer of the turn is answered.
    completed: Option<Value>,
    /// A person asked to stop the running turn (sent as soon as its id is known).
    interrupting: bool,
}

async fn drive(
    mut p: AgentProcess,
    mut cmd_rx: tokio::sync::mpsc::UnboundedReceiver<Command>,
    em: Emitter,
    gate: Arc<dyn ApprovalGate>,
    thread: String,
    next_id: i64,
    price: Option<Pricing>,
) {
    let (mut broker, mut decided_rx) = PermissionBroker::<Value>::new(gate);
    let mut st = State {
        thread,
        turn: None,
        in_turn: false,
        next_id,
        items: HashMap::new(),
        last_text: String::new(),
        totals: Totals::default(),
        at_turn_start: Totals::default(),
        error: None,
        provider_error: None,
        turn_start_req: None,
        price,
        steers: HashMap::new(),
        held: Vec::new(),
        completed: None,
        interrupting: false,
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
                    em.error(p.exited(st.in_turn).await).await;
                    return;
                }
            },
            cmd = cmd_rx.recv() => match cmd {
                Some(Command::Turn(text)) => {
                    if st.in_turn { em.error(AgentError::TurnInProgress).await; continue; }
                    st.in_turn = true;
                    st.interrupting = false;
                    st.error = None;
                    st.last_text.clear();
                    st.at_turn_start = st.totals;
                    st.next_id += 1;
                    st.turn_start_req = Some(st.next_id);
                    let msg = RpcMessage::request(st.next_id, "turn/start", json!({
                        "threadId": st.thread, "input": [{"type": "text", "text": text}]}));
                    if let Err(e) = p.send_or_exited(&msg.to_value(Framing::Bare)).await { em.error(e).await; p.kill().await; return; }
                }
                Some(Command::Steer(id, text)) => {
                    if !st.in_turn || st.interrupting {
                        em.delivered(id, Delivery::NextTurn).await;
                    } else if st.turn.is_none() {
                        st.held.push((id, text));
                    } else if let Err(e) = steer(&mut p, &mut st, id, &text).await {
                        em.error(e).await; p.kill().await; return;
                    }
                }
                Some(Command::Interrupt) => {
                    if st.in_turn && !st.interrupting {
                        st.interrupting = true;
                        interrupt(&mut p, &mut st).await;
                    }
                }
                Some(Command::Answer(key, d)) => { if relay(&mut p, &em, &mut broker, &key, d).await.is_err() { return; } }
                Some(Command::Shutdown) | None => { p.kill().await; return; }
            },
            Some((key, d)) = decided_rx.recv() => {
                if relay(&mut p, &em, &mut broker, &key, d).await.is_err() { return; }
            }
        }
    }
}

/// `turn/steer`: the message joins the running turn (`expectedTurnId` guards against
/// a turn that ended meanwhile); the answer says whether it did.
async fn steer(p: &mut AgentProcess, st: &mut State, id: String, text: &str) -> Result<()> {
    let Some(turn) = st.turn.clone() else {
        st.held.push((id, text.to_owned()));
        return Ok(());
    };
    st.next_id += 1;
    let msg = RpcMessage::request(
        st.next_id,
        "turn/steer",
        json!({"threadId": st.thread, "expectedTurnId": turn,
               "input": [{"type": "text", "text": text}], "clientUserMessageId": id}),
    );
    st.steers.insert(st.next_id, id);
    p.send_rpc(Framing::Bare, &msg).await
}

/// The running turn's id is `turn` (said by both the `turn/start` answer and
/// `turn/started`): the first time, steer what waited for it, or stop the turn when a
/// person asked to meanwhile (the messages then wait for the next turn).
async fn turn_known(p: &mut AgentProcess, st: &mut State, turn: &str) -> Result<()> {
    if st.turn.as_deref() == Some(turn) {
        return Ok(());
    }
    st.turn = Some(turn.to_string());
    if st.interrupting {
        interrupt(p, st).await;
        return Ok(());
    }
    for (id, text) in std::mem::take(&mut st.held) {
        steer(p, st, id, &text).await?;
    }
    Ok(())
}

/// `turn/interrupt` of the running turn, once its id is known.
async fn interrupt(p: &mut AgentProcess, st: &mut State) {
    if let Some(turn) = st.turn.clone() {
        st.next_id += 1;
        let msg = RpcMessage::request(
            st.next_id,
            "turn/interrupt",
            json!({"threadId": st.thread, "turnId": turn}),
        );
        let _ = p.send_rpc(Framing::Bare, &msg).await;
    }
}

async fn relay(
    p: &mut AgentProcess,
    em: &Emitter,
    broker: &mut PermissionBroker<Value>,
    key: &str,
    d: PermissionDecision,
) -> Result<()> {
    let Some(wires) = broker.resolve(key, &d) else {
        return Ok(());
    };
    for w in wires {
        p.send_rpc(Framing::Bare, &decision(w, &d)).await?;
    }
    em.emit(AgentEvent::PermissionResolved {
        request_id: key.into(),
        decision: d,
    })
    .await;
    Ok(())
}

/// The answer to an approval request.
fn decision(id: Value, d: &PermissionDecision) -> RpcMessage {
    let decision = if d.is_allow() { "accept" } else { "decline" };
    RpcMessage::result(id, json!({ "decision": decision }))
}

fn s<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or("")
}

fn breakdown(v: &Value) -> Totals {
    let n = |k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
    Totals {
        input: n("inputTokens"),
        cached: n("cachedInputTokens"),
        output: n("outputTokens"),
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
        // A response to one of our requests.
        RpcMessage::Response { id, outcome }
            if id.as_i64().is_some_and(|n| st.steers.contains_key(&n)) =>
        {
            let message = id
                .as_i64()
                .and_then(|n| st.steers.remove(&n))
                .unwrap_or_default();
            let delivery = match outcome {
                Ok(_) => Delivery::Live,
                Err(e) => {
                    tracing::info!(agent = AGENT, error = %em.redactor().redact(&e.message), "turn/steer refused; the message waits for the next turn");
                    Delivery::NextTurn
                }
            };
            em.delivered(message, delivery).await;
            if st.steers.is_empty() {
                if let Some(params) = st.completed.take() {
                    complete_turn(em, st, &params).await;
                }
            }
        }
        RpcMessage::Response { id, outcome } => match outcome {
            Err(e) => {
                if id.as_i64() == st.turn_start_req && st.in_turn {
                    st.in_turn = false;
                    return Err(AgentError::Rejected {
                        agent: AGENT.into(),
                        method: "turn/start".into(),
                        message: e.message,
                    });
                }
                tracing::warn!(agent = AGENT, error = %em.redactor().redact(&e.message), "request failed");
            }
            Ok(result) => {
                if id.as_i64() == st.turn_start_req {
                    if let Some(t) = result.pointer("/turn/id").and_then(Value::as_str) {
                        turn_known(p, st, t).await?;
                    }
                }
            }
        },
        // A request from the server.
        RpcMessage::Request { id, method, params } => {
            let kind = match method.as_str() {
                "item/commandExecution/requestApproval" => PermissionKind::Command,
                "item/fileChange/requestApproval" => PermissionKind::FileChange,
                other => {
                    let refusal =
                        RpcMessage::error(id, -32601, format!("gaffer does not handle {other}"));
                    p.send_rpc(Framing::Bare, &refusal).await?;
                    return Ok(());
                }
            };
            let item_id = s(&params, "itemId").to_string();
            let input = match kind {
                PermissionKind::Command => {
                    json!({"command": params.get("command"), "cwd": params.get("cwd")})
                }
                _ => st
                    .items
                    .get(&item_id)
                    .and_then(|i| i.get("changes").cloned())
                    .map(|c| json!({"changes": c}))
                    .unwrap_or(Value::Null),
            };
            let pr = PermissionRequest {
                id: format!("codex:{}:{}", st.thread, item_id),
                agent: AgentKind::Codex,
                session_id: st.thread.clone(),
                tool_name: if kind == PermissionKind::Command {
                    "commandExecution".into()
                } else {
                    "fileChange".into()
                },
                command: PermissionRequest::command_in(&input),
                paths: input
                    .get("changes")
                    .and_then(Value::as_array)
                    .map(|changes| changes.iter().map(|c| s(c, "path").to_string()).collect())
                    .unwrap_or_default(),
                input,
                kind,
                reason: params
                    .get("reason")
                    .and_then(Value::as_str)
                    .map(str::to_string),
            };
            let pr = em.redactor().redact_serde(pr);
            match broker.offer(id.clone(), &pr) {
                Offer::Asked => {
                    em.emit(AgentEvent::PermissionRequested { request: pr })
                        .await;
                }
                Offer::Joined => {}
                Offer::Decided(d) => p.send_rpc(Framing::Bare, &decision(id, &d)).await?,
            }
        }
        RpcMessage::Notification { method, params } => {
            match method.as_str() {
                "turn/started" => {
                    if let Some(t) = params.pointer("/turn/id").and_then(Value::as_str) {
                        turn_known(p, st, t).await?;
                    }
                }
                "item/started" => {
                    let item = params.get("item").cloned().unwrap_or(Value::Null);
                    let iid = s(&item, "id").to_string();
                    match s(&item, "type") {
                        "commandExecution" => em.emit(AgentEvent::ToolCall { call_id: iid.clone(), name: "commandExecution".into(),
                            input: json!({"command": item.get("command"), "cwd": item.get("cwd")}) }).await,
                        "fileChange" => em.emit(AgentEvent::ToolCall { call_id: iid.clone(), name: "fileChange".into(),
                            input: json!({"changes": item.get("changes")}) }).await,
                        "mcpToolCall" => em.emit(AgentEvent::ToolCall { call_id: iid.clone(), name: format!("{}/{}", s(&item, "server"), s(&item, "tool")),
                            input: item.get("arguments").cloned().unwrap_or(Value::Null) }).await,
                        _ => true,
                    };
                    st.items.insert(iid, item);
                }
                "item/completed" => {
                    let item = params.get("item").cloned().unwrap_or(Value::Null);
                    let iid = s(&item, "id").to_string();
                    let status = s(&item, "status");
                    match s(&item, "type") {
                        "agentMessage" => {
                            st.last_text = s(&item, "text").to_string();
                            em.emit(AgentEvent::AssistantText {
                                text: st.last_text.clone(),
                            })
                            .await;
                        }
                        "commandExecution" => {
                            let exit = item.get("exitCode").and_then(Value::as_i64);
                            let out = item
                                .get("aggregatedOutput")
                                .and_then(Value::as_str)
                                .unwrap_or("")
                                .to_string();
                            let is_error = status != "completed" || exit.is_some_and(|c| c != 0);
                            let out = if status == "declined" && out.is_empty() {
                                "declined".to_string()
                            } else {
                                out
                            };
                            let out = match p.sandbox_note() {
                                Some(note) if is_error => sandbox::explain_refusal(&out, note),
                                _ => out,
                            };
                            em.emit(AgentEvent::ToolResult {
                                call_id: iid.clone(),
                                output: out,
                                is_error,
                            })
                            .await;
                        }
                        "fileChange" => {
                            if status == "completed" {
                                for c in item
                                    .get("changes")
                                    .and_then(Value::as_array)
                                    .cloned()
                                    .unwrap_or_default()
                                {
                                    let kind = match c.get("kind") {
                                        Some(Value::String(k)) => k.clone(),
                                        Some(k) => s(k, "type").to_string(),
                                        None => "update".into(),
                                    };
                                    em.emit(AgentEvent::FileChange {
                                        path: s(&c, "path").into(),
                                        kind,
                                        diff: c
                                            .get("diff")
                                            .and_then(Value::as_str)
                                            .map(str::to_string),
                                    })
                                    .await;
                                }
                            }
                            em.emit(AgentEvent::ToolResult {
                                call_id: iid.clone(),
                                output: status.to_string(),
                                is_error: status != "completed",
                            })
                            .await;
                        }
                        "mcpToolCall" => {
                            let out = item
                                .get("result")
                                .or_else(|| item.get("error"))
                                .map(|r| r.to_string())
                                .unwrap_or_default();
                            em.emit(AgentEvent::ToolResult {
                                call_id: iid.clone(),
                                output: out,
                                is_error: status != "completed",
                            })
                            .await;
                        }
                        _ => {}
                    }
                    st.items.remove(&iid);
                }
                "thread/tokenUsage/updated" => {
                    if let Some(t) = params.pointer("/tokenUsage/total") {
                        st.totals = breakdown(t);
                    }
                }
                "error" => {
                    st.error = params
                        .pointer("/error/message")
                        .and_then(Value::as_str)
                        .map(str::to_string);
                    st.provider_error = params.get("error").and_then(provider_error);
                }
                "turn/completed" => {
                    // A steer still unanswered may yet join this turn or be refused:
                    // the turn ends once each is settled, so none is lost or doubled.
                    if st.steers.is_empty() {
                        complete_turn(em, st, &params).await;
                    } else {
                        st.completed = Some(params);
                    }
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// What a Codex `TurnError` (`{message, codexErrorInfo}`) says of the provider: the
/// error's kind (`usageLimitExceeded`, or a detailed one such as
/// `{"responseTooManyFailedAttempts": {"httpStatusCode": 429}}`), its HTTP status and,
/// for a model's cap, when it resets.
fn provider_error(error: &Value) -> Option<crate::ProviderError> {
    let info = error.get("codexErrorInfo")?;
    let (kind, details) = match info {
        Value::String(kind) => (kind.clone(), &Value::Null),
        Value::Object(o) => {
            let (kind, details) = o.iter().next()?;
            (kind.clone(), details)
        }
        _ => return None,
    };
    let number = |key: &str| details.get(key).and_then(Value::as_u64);
    Some(crate::ProviderError {
        status: number("httpStatusCode").and_then(|s| u16::try_from(s).ok()),
        kind: Some(kind),
        retry_after_secs: number("reset_after_seconds").or(number("resetAfterSeconds")),
    })
}

/// The turn ended (`turn/completed` params): its usage and result, and messages that
/// never reached it wait for the next turn.
async fn complete_turn(em: &Emitter, st: &mut State, params: &Value) {
    for (id, _) in std::mem::take(&mut st.held) {
        em.delivered(id, Delivery::NextTurn).await;
    }
    let turn = params.get("turn").cloned().unwrap_or(Value::Null);
    let status = match s(&turn, "status") {
        "completed" => TurnStatus::Completed,
        "interrupted" => TurnStatus::Interrupted,
        _ => TurnStatus::Failed,
    };
    let reason = turn
        .pointer("/error/message")
        .and_then(Value::as_str)
        .map(str::to_string)
        .or(st.error.take());
    let provider_error = turn
        .get("error")
        .and_then(provider_error)
        .or(st.provider_error.take());
    let d = Totals {
        input: st.totals.input.saturating_sub(st.at_turn_start.input),
        cached: st.totals.cached.saturating_sub(st.at_turn_start.cached),
        output: st.totals.output.saturating_sub(st.at_turn_start.output),
    };
    // Codex counts cached tokens inside inputTokens.
    let mut usage = Usage {
        input_tokens: d.input.saturating_sub(d.cached),
        output_tokens: d.output,
        cached_input_tokens: d.cached,
        cost_usd: None,
    };
    usage.cost_usd = st.price.map(|p| p.cost(&usage));
    st.in_turn = false;
    st.turn = None;
    em.emit(AgentEvent::Usage { usage }).await;
    em.emit(AgentEvent::TurnCompleted {
        result: TurnResult {
            status,
            text: st.last_text.clone(),
            usage,
            session_id: st.thread.clone(),
            reason: if status == TurnStatus::Completed {
                None
            } else {
                reason
            },
            provider_error: provider_error.filter(|_| status == TurnStatus::Failed),
        },
    })
    .await;
}

#[cfg(test)]
mod provider_error_tests {
    use super::provider_error;
    use serde_json::json;

    /// Codex app-server's `TurnError` (`error` notification and a failed turn): a
    /// bare kind, or a kind with its HTTP status.
    #[test]
    fn codex_error_info_gives_the_kind_and_status() {
        let usage = json!({"message": "You’ve hit your usage limit. Upgrade to Pro or try again at 9:16 AM.", "codexErrorInfo": "usageLimitExceeded", "additionalDetails": null});
        let e = provider_error(&usage).unwrap();
        assert_eq!(
            (e.kind.as_deref(), e.status),
            (Some("usageLimitExceeded"), None)
        );
        let retries = json!({"message": "exceeded retry limit, last status: 429 Too Many Requests", "codexErrorInfo": {"responseTooManyFailedAttempts": {"httpStatusCode": 429}}});
        let e = provider_error(&retries).unwrap();
        assert_eq!(
            (e.kind.as_deref(), e.status),
            (Some("responseTooManyFailedAttempts"), Some(429))
        );
        let cap = json!({"message": "model cap", "codexErrorInfo": {"modelCap": {"model": "gpt-5", "reset_after_seconds": 120}}});
        assert_eq!(provider_error(&cap).unwrap().retry_after_secs, Some(120));
        assert_eq!(provider_error(&json!({"message": "plain"})), None);
    }
}
