//! The built-in agent: a tool loop over an LLM HTTP API with gaffer's own tools
//! ([`crate::tools`]), rate limits ([`crate::ratelimit`]) and repeated-failure detection.
//!
//! `run` always goes through the [`ApprovalGate`]; `write_file` / `apply_patch` do too
//! when [`BuiltinConfig::approve_writes`] is set. A failed read-only call is an
//! observation and the loop goes on; failed writes/runs are observations too, and the
//! engine's intent rules decide about the step. The same identical call failing
//! [`BuiltinConfig::repeat_bound`] times ends the turn with `TurnStatus::RepeatedFailure`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use tokio::sync::{mpsc, oneshot};

use crate::error::{AgentError, Result};
use crate::llm::{Call, CallError, LlmClient, Msg, ProviderConfig, ToolRes};
use crate::ratelimit::{backoff_delay, MemoryCounterStore, RateLimiter, RateLimits};
use crate::redact::Redactor;
use crate::session::{
    driver_channels, AgentBackend, AgentSession, ApprovalGate, Command, DriverSession, Emitter,
};
use crate::tools::{tool_specs, Worktree};
use crate::types::{
    AgentEvent, AgentKind, Delivery, PermissionDecision, PermissionKind, PermissionRequest,
    SessionRecord, StartOptions, TurnResult, TurnStatus, Usage,
};
use crate::workspace::{canonical_workspace, workspace_key};

/// Configuration of the built-in agent.
#[derive(Clone)]
pub struct BuiltinConfig {
    /// Provider + model.
    pub provider: ProviderConfig,
    /// Shared limiter of this provider + model (share one per provider/model across sessions).
    pub limiter: Arc<RateLimiter>,
    /// Redactor.
    pub redactor: Arc<Redactor>,
    /// Most model calls per turn.
    pub max_steps: u32,
    /// Identical failing calls tolerated before the turn ends.
    pub repeat_bound: u32,
    /// Most 429 retries per model call.
    pub max_retries: u32,
    /// Ask the gate before `write_file` / `apply_patch` too.
    pub approve_writes: bool,
    /// Where conversations are saved for resume (none: sessions cannot be resumed).
    pub transcript_dir: Option<PathBuf>,
}

impl BuiltinConfig {
    /// Defaults: 50 steps, 3 repeats, 5 retries, limiter 120 RPM / 2,000 RPD in memory.
    pub fn new(provider: ProviderConfig) -> Self {
        let limiter = Arc::new(RateLimiter::new(
            format!("{}:{}", provider.name, provider.model),
            RateLimits::default(),
            Arc::new(MemoryCounterStore::default()),
        ));
        BuiltinConfig {
            provider,
            limiter,
            redactor: Arc::new(Redactor::default()),
            max_steps: 50,
            repeat_bound: 3,
            max_retries: 5,
            approve_writes: false,
            transcript_dir: None,
        }
    }
}

/// The built-in agent backend.
#[derive(Clone)]
pub struct BuiltinBackend {
    cfg: BuiltinConfig,
}

impl BuiltinBackend {
    /// A backend.
    pub fn new(cfg: BuiltinConfig) -> Self {
        BuiltinBackend { cfg }
    }

    async fn launch(
        &self,
        opts: StartOptions,
        gate: Arc<dyn ApprovalGate>,
        session_id: String,
        history: Vec<Msg>,
    ) -> Result<Box<dyn AgentSession>> {
        let ws = canonical_workspace(&opts.workspace)?;
        let worktree = Worktree::new(&ws, opts.mode)?
            .with_sandbox(opts.sandbox.clone())
            .with_env(opts.agent_env())
            .with_session(opts.readable.clone(), opts.lock.clone());
        let client = LlmClient::new(self.cfg.provider.clone(), &self.cfg.redactor)?;
        let mut redactor = (*self.cfg.redactor).clone();
        if let Some(k) = &self.cfg.provider.api_key {
            redactor.add_secret(k.clone());
        }
        let record = SessionRecord {
            agent: AgentKind::Builtin,
            role: opts.role.clone(),
            workspace_key: workspace_key(&ws),
            session_id: session_id.clone(),
            verified: true,
        };
        let (record, cmd_tx, cmd_rx, em, events_rx) = driver_channels(record, Arc::new(redactor));
        let ctx = Ctx {
            cfg: self.cfg.clone(),
            client,
            worktree,
            gate,
            em,
            system: opts.role_prompt.clone(),
            session_id,
            messages: history,
            manual: Arc::new(Mutex::new(HashMap::new())),
            inbox: Inbox::default(),
            mode: opts.mode,
            max_retry_wait: opts.max_retry_wait,
        };
        let task = tokio::spawn(drive(ctx, cmd_rx));
        Ok(Box::new(DriverSession {
            record,
            cmd_tx,
            events_rx,
            task: Some(task),
        }))
    }

    fn transcript(&self, id: &str) -> Option<PathBuf> {
        self.cfg
            .transcript_dir
            .as_ref()
            .map(|d| d.join(format!("{id}.json")))
    }
}

#[async_trait]
impl AgentBackend for BuiltinBackend {
    fn kind(&self) -> AgentKind {
        AgentKind::Builtin
    }
    async fn start(
        &self,
        opts: StartOptions,
        gate: Arc<dyn ApprovalGate>,
    ) -> Result<Box<dyn AgentSession>> {
        self.launch(opts, gate, uuid::Uuid::new_v4().to_string(), Vec::new())
            .await
    }
    async fn resume(
        &self,
        opts: StartOptions,
        session_id: &str,
        gate: Arc<dyn ApprovalGate>,
    ) -> Result<Box<dyn AgentSession>> {
        let gone = |detail: String| AgentError::SessionGone {
            agent: "builtin".into(),
            session_id: session_id.into(),
            detail,
        };
        let path = self
            .transcript(session_id)
            .ok_or_else(|| gone("no transcript directory is configured".into()))?;
        let text = std::fs::read_to_string(&path)
            .map_err(|_| gone(format!("no transcript at {}", path.display())))?;
        let history: Vec<Msg> =
            serde_json::from_str(&text).map_err(|e| gone(format!("transcript unreadable: {e}")))?;
        self.launch(opts, gate, session_id.to_string(), history)
            .await
    }
}

type Manual = Arc<Mutex<HashMap<String, oneshot::Sender<PermissionDecision>>>>;
/// People's messages for the running turn, `(id, text)`: the loop gives them to the
/// model with its next call.
type Inbox = Arc<Mutex<Vec<(String, String)>>>;

struct Ctx {
    cfg: BuiltinConfig,
    client: LlmClient,
    worktree: Worktree,
    gate: Arc<dyn ApprovalGate>,
    em: Emitter,
    system: String,
    session_id: String,
    messages: Vec<Msg>,
    manual: Manual,
    inbox: Inbox,
    mode: crate::types::Mode,
    max_retry_wait: Option<std::time::Duration>,
}

async fn drive(mut ctx: Ctx, mut cmd_rx: mpsc::UnboundedReceiver<Command>) {
    while let Some(cmd) = cmd_rx.recv().await {
        match cmd {
            Command::Turn(text) => {
                let before = ctx.messages.len();
                let manual = ctx.manual.clone();
                let inbox = ctx.inbox.clone();
                let em = ctx.em.clone();
                let sid = ctx.session_id.clone();
                let outcome = {
                    let fut = run_turn(&mut ctx, text);
                    tokio::pin!(fut);
                    loop {
                        tokio::select! {
                            r = &mut fut => break Some(r),
                            c = cmd_rx.recv() => match c {
                                Some(Command::Answer(k, d)) => {
                                    let tx = manual.lock().ok().and_then(|mut m| m.remove(&k));
                                    if let Some(tx) = tx { let _ = tx.send(d); }
                                }
                                Some(Command::Steer(id, text)) => {
                                    if let Ok(mut i) = inbox.lock() { i.push((id, text)); }
                                }
                                Some(Command::Interrupt) => break None,
                                Some(Command::Turn(_)) => { em.error(AgentError::TurnInProgress).await; }
                                Some(Command::Shutdown) | None => return,
                            }
                        }
                    }
                };
                // What the turn did not take waits for the next one.
                let left = inbox
                    .lock()
                    .map(|mut i| std::mem::take(&mut *i))
                    .unwrap_or_default();
                for (id, _) in left {
                    em.delivered(id, Delivery::NextTurn).await;
                }
                match outcome {
                    Some(Ok(result)) => {
                        save(&ctx);
                        em.emit(AgentEvent::TurnCompleted { result }).await;
                    }
                    Some(Err(e)) => {
                        ctx.messages.truncate(before);
                        em.error(e).await;
                    }
                    None => {
                        // Interrupted: the conversation so far stays, so the next turn
                        // goes on from it; only a reply whose tool calls never got their
                        // results goes (a provider refuses calls without results).
                        if matches!(ctx.messages.last(), Some(Msg::Assistant { calls, .. }) if !calls.is_empty())
                        {
                            ctx.messages.pop();
                        }
                        save(&ctx);
                        em.emit(AgentEvent::TurnCompleted {
                            result: TurnResult {
                                status: TurnStatus::Interrupted,
                                text: String::new(),
                                usage: Usage::default(),
                                session_id: sid,
                                reason: Some("interrupted".into()),
                                provider_error: None,
                            },
                        })
                        .await;
                    }
                }
            }
            Command::Answer(k, d) => {
                let tx = ctx.manual.lock().ok().and_then(|mut m| m.remove(&k));
                if let Some(tx) = tx {
                    let _ = tx.send(d);
                }
            }
            Command::Steer(id, _) => {
                ctx.em.delivered(id, Delivery::NextTurn).await;
            }
            Command::Interrupt => {}
            Command::Shutdown => return,
        }
    }
}

fn save(ctx: &Ctx) {
    if let Some(dir) = &ctx.cfg.transcript_dir {
        let _ = std::fs::create_dir_all(dir);
        if let Ok(text) = serde_json::to_string(&ctx.messages) {
            let _ =
                crate::tools::atomic_write(&dir.join(format!("{}.json", ctx.session_id)), &text);
        }
    }
}

/// Give the model the messages people sent since its last call, as user messages.
async fn take_messages(ctx: &mut Ctx) {
    let taken = ctx
        .inbox
        .lock()
        .map(|mut i| std::mem::take(&mut *i))
        .unwrap_or_default();
    for (id, text) in taken {
        ctx.messages.push(Msg::User { text });
        ctx.em.delivered(id, Delivery::Live).await;
    }
}

fn call_key(c: &Call) -> String {
    format!("{}\u{0}{}", c.name, c.arguments)
}

async fn ask(ctx: &Ctx, c: &Call, kind: PermissionKind) -> PermissionDecision {
    let req = PermissionRequest {
        id: format!("builtin:{}:{}", ctx.session_id, c.id),
        agent: AgentKind::Builtin,
        session_id: ctx.session_id.clone(),
        tool_name: c.name.clone(),
        input: c.arguments.clone(),
        command: PermissionRequest::command_in(&c.arguments),
        paths: PermissionRequest::paths_in(&c.arguments),
        kind,
        reason: None,
    };
    let req = ctx.em.redactor().redact_serde(req);
    let (tx, rx) = oneshot::channel();
    if let Ok(mut m) = ctx.manual.lock() {
        m.insert(req.id.clone(), tx);
    }
    ctx.em
        .emit(AgentEvent::PermissionRequested {
            request: req.clone(),
        })
        .await;
    let id = req.id.clone();
    let d = tokio::select! {
        d = ctx.gate.decide(req) => d,
        Ok(d) = rx => d,
    };
    if let Ok(mut m) = ctx.manual.lock() {
        m.remove(&id);
    }
    ctx.em
        .emit(AgentEvent::PermissionResolved {
            request_id: id,
            decision: d.clone(),
        })
        .await;
    d
}

async fn run_turn(ctx: &mut Ctx, text: String) -> Result<TurnResult> {
    ctx.messages.push(Msg::User { text });
    let specs = tool_specs(ctx.mode);
    let provider = ctx.cfg.provider.name.clone();
    let mut total = Usage::default();
    let mut failures: HashMap<String, u32> = HashMap::new();
    let mut last_text = String::new();
    for _ in 0..ctx.cfg.max_steps {
        take_messages(ctx).await;
        while let Some(w) = ctx.cfg.limiter.check().await? {
            ctx.em
                .emit(AgentEvent::RateLimited {
                    until: humantime::format_rfc3339_millis(w.until).to_string(),
                    provider: provider.clone(),
                    reason: w.reason.into(),
                })
                .await;
            tokio::time::sleep(w.delay).await;
        }
        let mut attempt = 0;
        let reply = loop {
            match ctx
                .client
                .complete(&ctx.system, &ctx.messages, &specs)
                .await
            {
                Ok(r) => break r,
                Err(CallError::RateLimited(ra)) => {
                    if let (Some(max), Some(wait)) = (ctx.max_retry_wait, ra) {
                        if wait > max {
                            return Err(AgentError::RetryAfterTooLong {
                                provider: provider.clone(),
                                retry_after_secs: wait.as_secs(),
                                max_secs: max.as_secs(),
                            });
                        }
                    }
                    attempt += 1;
                    if attempt > ctx.cfg.max_retries {
                        return Err(AgentError::RateLimited {
                            provider: provider.clone(),
                            attempts: attempt,
                        });
                    }
                    let delay = backoff_delay(attempt, ra);
                    ctx.em
                        .emit(AgentEvent::RateLimited {
                            until: humantime::format_rfc3339_millis(
                                std::time::SystemTime::now() + delay,
                            )
                            .to_string(),
                            provider: provider.clone(),
                            reason: "429".into(),
                        })
                        .await;
                    tokio::time::sleep(delay).await;
                }
                Err(CallError::Other(e)) => return Err(e),
            }
        };
        ctx.cfg.limiter.record_tokens(
            reply.usage.input_tokens + reply.usage.output_tokens + reply.usage.cached_input_tokens,
        );
        total += reply.usage;
        ctx.em.emit(AgentEvent::Usage { usage: reply.usage }).await;
        if let Some(t) = reply.text.as_ref().filter(|t| !t.is_empty()) {
            last_text = t.clone();
            ctx.em
                .emit(AgentEvent::AssistantText { text: t.clone() })
                .await;
        }
        ctx.messages.push(Msg::Assistant {
            text: reply.text.clone(),
            calls: reply.calls.clone(),
        });
        let waiting = ctx.inbox.lock().is_ok_and(|i| !i.is_empty());
        if reply.calls.is_empty() && !waiting {
            return Ok(TurnResult {
                status: TurnStatus::Completed,
                text: last_text,
                usage: total,
                session_id: ctx.session_id.clone(),
                reason: None,
                provider_error: None,
            });
        }
        let mut results = Vec::new();
        let mut finished: Option<String> = None;
        let mut repeated: Option<String> = None;
        for c in &reply.calls {
            ctx.em
                .emit(AgentEvent::ToolCall {
                    call_id: c.id.clone(),
                    name: c.name.clone(),
                    input: c.arguments.clone(),
                })
                .await;
            let mut outcome = if !c.arguments.is_object() {
                crate::tools::ToolOutcome {
                    output: format!(
                        "arguments of {} are not a JSON object; send valid JSON arguments",
                        c.name
                    ),
                    is_error: true,
                    ..Default::default()
                }
            } else {
                let gated = match c.name.as_str() {
                    "run" => Some(PermissionKind::Command),
                    "write_file" | "apply_patch" if ctx.cfg.approve_writes => {
                        Some(PermissionKind::FileChange)
                    }
                    _ => None,
                };
                let denied = match gated {
                    Some(kind) if ctx.mode == crate::types::Mode::ReadWrite => {
                        match ask(ctx, c, kind).await {
                            PermissionDecision::Deny { message } => Some(message),
                            PermissionDecision::Allow { .. } => None,
                        }
                    }
                    _ => None,
                };
                match denied {
                    Some(m) => crate::tools::ToolOutcome {
                        output: format!("denied by the approver: {m}"),
                        is_error: true,
                        ..Default::default()
                    },
                    None => ctx.worktree.execute(&c.name, &c.arguments).await,
                }
            };
            let key = call_key(c);
            if outcome.is_error {
                let n = failures.entry(key).or_insert(0);
                *n += 1;
                if *n >= 2 {
                    outcome.output.push_str(&format!(
                        "\n[this identical {} call has now failed {} times; do not repeat it: change the arguments or the approach]",
                        c.name, n
                    ));
                }
                if *n >= ctx.cfg.repeat_bound {
                    repeated = Some(format!(
                        "the identical {} call failed {} times in a row",
                        c.name, n
                    ));
                }
            } else {
                failures.remove(&key);
            }
            for (path, kind, diff) in &outcome.changes {
                ctx.em
                    .emit(AgentEvent::FileChange {
                        path: path.clone(),
                        kind: kind.clone(),
                        diff: diff.clone(),
                    })
                    .await;
            }
            let output = ctx.em.redactor().redact(&outcome.output);
            ctx.em
                .emit(AgentEvent::ToolResult {
                    call_id: c.id.clone(),
                    output: output.clone(),
                    is_error: outcome.is_error,
                })
                .await;
            if outcome.finished.is_some() {
                finished = outcome.finished.clone();
            }
            results.push(ToolRes {
                call_id: c.id.clone(),
                content: output,
                is_error: outcome.is_error,
            });
        }
        ctx.messages.push(Msg::Tools { results });
        if let Some(reason) = repeated {
            return Ok(TurnResult {
                status: TurnStatus::RepeatedFailure,
                text: last_text,
                usage: total,
                session_id: ctx.session_id.clone(),
                reason: Some(reason),
                provider_error: None,
            });
        }
        if let Some(summary) = finished {
            return Ok(TurnResult {
                status: TurnStatus::Completed,
                text: summary,
                usage: total,
                session_id: ctx.session_id.clone(),
                reason: None,
                provider_error: None,
            });
        }
    }
    Ok(TurnResult {
        status: TurnStatus::StepLimit,
        text: last_text,
        usage: total,
        session_id: ctx.session_id.clone(),
        reason: Some(format!("no finish after {} model calls", ctx.cfg.max_steps)),
        provider_error: None,
    })
}
