//! The seams the engine uses: [`AgentBackend`], [`AgentSession`] and [`ApprovalGate`],
//! plus the machinery every backend shares (a driver task behind a channel handle, a
//! permission broker that asks the gate exactly once per underlying request).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use crate::error::{AgentError, Result};
use crate::redact::Redactor;
use crate::types::{
    AgentEvent, AgentKind, PermissionDecision, PermissionRequest, SessionRecord, StartOptions,
    TurnResult,
};

/// Decides permission requests. The engine implements this: one journal approval per
/// request, the waiting backend woken by the decision event (no polling).
///
/// Backends call `decide` exactly once per distinct [`PermissionRequest::id`]; a repeated
/// identical request for the same underlying request id reuses the first decision.
#[async_trait]
pub trait ApprovalGate: Send + Sync {
    /// Decide one request. May wait as long as a human takes.
    async fn decide(&self, request: PermissionRequest) -> PermissionDecision;
}

/// A gate that allows everything (full auto).
#[derive(Debug, Default, Clone, Copy)]
pub struct AllowAll;

#[async_trait]
impl ApprovalGate for AllowAll {
    async fn decide(&self, _request: PermissionRequest) -> PermissionDecision {
        PermissionDecision::allow()
    }
}

/// A gate that denies everything with a fixed message.
#[derive(Debug, Clone)]
pub struct DenyAll(pub String);

#[async_trait]
impl ApprovalGate for DenyAll {
    async fn decide(&self, _request: PermissionRequest) -> PermissionDecision {
        PermissionDecision::deny(self.0.clone())
    }
}

/// A request waiting in a [`ChannelGate`]: answer it with [`PendingApproval::decide`].
#[derive(Debug)]
pub struct PendingApproval {
    /// The request.
    pub request: PermissionRequest,
    reply: oneshot::Sender<PermissionDecision>,
}

impl PendingApproval {
    /// Send the decision back to the waiting backend.
    pub fn decide(self, decision: PermissionDecision) {
        let _ = self.reply.send(decision);
    }
}

/// A gate that hands each request to a channel; whoever holds the receiver decides.
/// If the receiver is gone, requests are denied.
#[derive(Debug, Clone)]
pub struct ChannelGate {
    tx: mpsc::UnboundedSender<PendingApproval>,
}

impl ChannelGate {
    /// A gate and the receiver of its requests.
    pub fn new() -> (Self, mpsc::UnboundedReceiver<PendingApproval>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (ChannelGate { tx }, rx)
    }
}

#[async_trait]
impl ApprovalGate for ChannelGate {
    async fn decide(&self, request: PermissionRequest) -> PermissionDecision {
        let (reply, rx) = oneshot::channel();
        if self.tx.send(PendingApproval { request, reply }).is_err() {
            return PermissionDecision::deny("no approver is listening");
        }
        rx.await
            .unwrap_or_else(|_| PermissionDecision::deny("approval was dropped"))
    }
}

/// One running agent session. Events are redacted before they leave the session.
#[async_trait]
pub trait AgentSession: Send {
    /// The record to store (updated when the agent verifies the session id).
    fn record(&self) -> SessionRecord;
    /// Send one user turn. Events follow on [`AgentSession::next_event`].
    async fn send_turn(&mut self, prompt: &str) -> Result<()>;
    /// Next normalized event; `None` when the session has ended. An `Err` is terminal for
    /// the turn (malformed output, exit mid-turn, ...).
    async fn next_event(&mut self) -> Option<Result<AgentEvent>>;
    /// Answer a pending permission request directly (by [`PermissionRequest::id`]). The first
    /// decision wins; the gate's later answer for the same request is ignored.
    async fn answer_permission(
        &mut self,
        request_id: &str,
        decision: PermissionDecision,
    ) -> Result<()>;
    /// Give the agent a person's message `text` during the running turn, the way its
    /// protocol allows (see [`crate::Delivery::Live`]). Returns once the message is
    /// queued; [`AgentEvent::MessageDelivered`] with `message_id` follows on
    /// [`AgentSession::next_event`] once it was written to the agent (`Live`), or when
    /// it could not be and must go with the next turn (`NextTurn`). A live message
    /// keeps the turn going: the agent answers it before the turn completes.
    async fn steer(&mut self, message_id: &str, text: &str) -> Result<()>;
    /// Stop the running turn, keeping the session: it ends with
    /// `TurnStatus::Interrupted` when the agent honours it, what the agent did so far
    /// (files, conversation) stays, and the next [`AgentSession::send_turn`] goes on
    /// from there. Messages steered but not yet taken come back as `NextTurn`.
    async fn interrupt(&mut self) -> Result<()>;
    /// Stop the agent process / loop.
    async fn shutdown(&mut self) -> Result<()>;
}

/// Starts sessions of one kind of agent.
#[async_trait]
pub trait AgentBackend: Send + Sync {
    /// Which agent.
    fn kind(&self) -> AgentKind;
    /// Start a new session (a new conversation with an id gaffer assigns where possible).
    async fn start(
        &self,
        opts: StartOptions,
        gate: Arc<dyn ApprovalGate>,
    ) -> Result<Box<dyn AgentSession>>;
    /// Resume a stored session. Fails with [`AgentError::SessionGone`] when the agent no
    /// longer has it; never starts a new conversation instead.
    async fn resume(
        &self,
        opts: StartOptions,
        session_id: &str,
        gate: Arc<dyn ApprovalGate>,
    ) -> Result<Box<dyn AgentSession>>;
}

/// Drive one turn to its end, collecting every event. Returns the events and the result.
pub async fn run_turn(
    session: &mut dyn AgentSession,
    prompt: &str,
) -> Result<(Vec<AgentEvent>, TurnResult)> {
    session.send_turn(prompt).await?;
    let mut events = Vec::new();
    while let Some(ev) = session.next_event().await {
        let ev = ev?;
        if let AgentEvent::TurnCompleted { result } = &ev {
            let result = result.clone();
            events.push(ev);
            return Ok((events, result));
        }
        events.push(ev);
    }
    Err(AgentError::Closed)
}

// ---------------------------------------------------------------------------------------
// Shared machinery for backends.

/// Commands from the handle to a backend's driver task.
#[derive(Debug)]
pub(crate) enum Command {
    Turn(String),
    /// A person's message for the running turn: `(message id, text)`.
    Steer(String, String),
    Interrupt,
    Answer(String, PermissionDecision),
    Shutdown,
}

/// Sends redacted events to the session handle.
#[derive(Clone)]
pub(crate) struct Emitter {
    tx: mpsc::Sender<Result<AgentEvent>>,
    redactor: Arc<Redactor>,
}

impl Emitter {
    pub(crate) async fn emit(&self, ev: AgentEvent) -> bool {
        let ev = redact_event(&self.redactor, ev);
        self.tx.send(Ok(ev)).await.is_ok()
    }
    pub(crate) async fn error(&self, e: AgentError) -> bool {
        self.tx.send(Err(e.redacted(&self.redactor))).await.is_ok()
    }
    pub(crate) fn redactor(&self) -> &Redactor {
        &self.redactor
    }
    /// Report how the message `id` reached the agent.
    pub(crate) async fn delivered(&self, id: String, delivery: crate::types::Delivery) -> bool {
        self.emit(AgentEvent::MessageDelivered {
            message_id: id,
            delivery,
        })
        .await
    }
}

/// Redact every free-text field of an event.
pub fn redact_event(r: &Redactor, ev: AgentEvent) -> AgentEvent {
    let s = |x: String| r.redact(&x);
    let j = |mut v: Value| {
        r.redact_json(&mut v);
        v
    };
    match ev {
        AgentEvent::AssistantText { text } => AgentEvent::AssistantText { text: s(text) },
        AgentEvent::ToolCall {
            call_id,
            name,
            input,
        } => AgentEvent::ToolCall {
            call_id,
            name: s(name),
            input: j(input),
        },
        AgentEvent::ToolResult {
            call_id,
            output,
            is_error,
        } => AgentEvent::ToolResult {
            call_id,
            output: s(output),
            is_error,
        },
        AgentEvent::FileChange { path, kind, diff } => AgentEvent::FileChange {
            path: s(path),
            kind,
            diff: diff.map(s),
        },
        AgentEvent::PermissionRequested { mut request } => {
            request.tool_name = s(request.tool_name);
            request.input = j(request.input);
            request.command = request.command.map(s);
            request.paths = request.paths.into_iter().map(s).collect();
            request.reason = request.reason.map(s);
            AgentEvent::PermissionRequested { request }
        }
        AgentEvent::PermissionResolved {
            request_id,
            decision,
        } => AgentEvent::PermissionResolved {
            request_id,
            decision: match decision {
                PermissionDecision::Allow { updated_input } => PermissionDecision::Allow {
                    updated_input: updated_input.map(j),
                },
                PermissionDecision::Deny { message } => PermissionDecision::Deny {
                    message: s(message),
                },
            },
        },
        AgentEvent::TurnCompleted { mut result } => {
            result.text = s(result.text);
            result.reason = result.reason.map(s);
            AgentEvent::TurnCompleted { result }
        }
        other => other,
    }
}

/// The handle side of a driver-based session.
pub(crate) struct DriverSession {
    pub(crate) record: Arc<Mutex<SessionRecord>>,
    pub(crate) cmd_tx: mpsc::UnboundedSender<Command>,
    pub(crate) events_rx: mpsc::Receiver<Result<AgentEvent>>,
    pub(crate) task: Option<tokio::task::JoinHandle<()>>,
}

/// Channels of a driver session: record, command sender/receiver, emitter, event receiver.
pub(crate) type DriverChannels = (
    Arc<Mutex<SessionRecord>>,
    mpsc::UnboundedSender<Command>,
    mpsc::UnboundedReceiver<Command>,
    Emitter,
    mpsc::Receiver<Result<AgentEvent>>,
);

/// Create the channels of a driver session.
pub(crate) fn driver_channels(record: SessionRecord, redactor: Arc<Redactor>) -> DriverChannels {
    let record = Arc::new(Mutex::new(record));
    let (cmd_tx, cmd_rx) = mpsc::unbounded_channel();
    let (tx, events_rx) = mpsc::channel(1024);
    (record, cmd_tx, cmd_rx, Emitter { tx, redactor }, events_rx)
}

pub(crate) fn set_verified(record: &Arc<Mutex<SessionRecord>>, verified: bool) {
    if let Ok(mut r) = record.lock() {
        r.verified = verified;
    }
}

#[allow(dead_code)]
pub(crate) fn set_session_id(record: &Arc<Mutex<SessionRecord>>, id: &str) {
    if let Ok(mut r) = record.lock() {
        r.session_id = id.to_string();
    }
}

#[async_trait]
impl AgentSession for DriverSession {
    fn record(&self) -> SessionRecord {
        match self.record.lock() {
            Ok(r) => r.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }
    async fn send_turn(&mut self, prompt: &str) -> Result<()> {
        self.cmd_tx
            .send(Command::Turn(prompt.to_string()))
            .map_err(|_| AgentError::Closed)
    }
    async fn next_event(&mut self) -> Option<Result<AgentEvent>> {
        self.events_rx.recv().await
    }
    async fn answer_permission(
        &mut self,
        request_id: &str,
        decision: PermissionDecision,
    ) -> Result<()> {
        self.cmd_tx
            .send(Command::Answer(request_id.to_string(), decision))
            .map_err(|_| AgentError::Closed)
    }
    async fn steer(&mut self, message_id: &str, text: &str) -> Result<()> {
        self.cmd_tx
            .send(Command::Steer(message_id.to_string(), text.to_string()))
            .map_err(|_| AgentError::Closed)
    }
    async fn interrupt(&mut self) -> Result<()> {
        self.cmd_tx
            .send(Command::Interrupt)
            .map_err(|_| AgentError::Closed)
    }
    async fn shutdown(&mut self) -> Result<()> {
        let _ = self.cmd_tx.send(Command::Shutdown);
        if let Some(t) = self.task.take() {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), t).await;
        }
        Ok(())
    }
}

impl Drop for DriverSession {
    fn drop(&mut self) {
        let _ = self.cmd_tx.send(Command::Shutdown);
    }
}

enum Entry<W> {
    Pending(Vec<W>),
    Decided(PermissionDecision),
}

/// Outcome of offering a request to the broker.
pub(crate) enum Offer {
    /// New request: the gate was asked; emit `PermissionRequested`.
    Asked,
    /// Same underlying request already pending: wait with it (no second gate call).
    Joined,
    /// Already decided: answer the wire request now with this decision.
    Decided(PermissionDecision),
}

/// Asks the gate exactly once per request key and fans the decision out to every wire
/// request that asked for it. Owned by one driver task.
pub(crate) struct PermissionBroker<W> {
    gate: Arc<dyn ApprovalGate>,
    entries: HashMap<String, Entry<W>>,
    decided_tx: mpsc::UnboundedSender<(String, PermissionDecision)>,
}

impl<W: PartialEq> PermissionBroker<W> {
    pub(crate) fn new(
        gate: Arc<dyn ApprovalGate>,
    ) -> (Self, mpsc::UnboundedReceiver<(String, PermissionDecision)>) {
        let (decided_tx, rx) = mpsc::unbounded_channel();
        (
            PermissionBroker {
                gate,
                entries: HashMap::new(),
                decided_tx,
            },
            rx,
        )
    }

    pub(crate) fn offer(&mut self, wire: W, req: &PermissionRequest) -> Offer {
        match self.entries.get_mut(&req.id) {
            Some(Entry::Decided(d)) => Offer::Decided(d.clone()),
            Some(Entry::Pending(ws)) => {
                ws.push(wire);
                Offer::Joined
            }
            None => {
                self.entries
                    .insert(req.id.clone(), Entry::Pending(vec![wire]));
                let gate = self.gate.clone();
                let tx = self.decided_tx.clone();
                let req = req.clone();
                tokio::spawn(async move {
                    let key = req.id.clone();
                    let d = gate.decide(req).await;
                    let _ = tx.send((key, d));
                });
                Offer::Asked
            }
        }
    }

    /// Record a decision (first wins). Returns the wire requests to answer, or `None` if
    /// the request was unknown or already decided.
    pub(crate) fn resolve(&mut self, key: &str, d: &PermissionDecision) -> Option<Vec<W>> {
        match self.entries.get_mut(key) {
            Some(e @ Entry::Pending(_)) => {
                let old = std::mem::replace(e, Entry::Decided(d.clone()));
                match old {
                    Entry::Pending(ws) => Some(ws),
                    Entry::Decided(_) => None,
                }
            }
            _ => None,
        }
    }

    /// The agent withdrew a wire request (e.g. Claude `control_cancel_request`).
    pub(crate) fn withdraw(&mut self, wire: &W) {
        for e in self.entries.values_mut() {
            if let Entry::Pending(ws) = e {
                ws.retain(|w| w != wire);
            }
        }
    }
}
