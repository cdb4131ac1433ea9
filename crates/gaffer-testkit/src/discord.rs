//! A fake Discord on loopback: the REST API (under `/api/v10`) and the gateway
//! websocket, with Discord's real payload shapes, op codes and status codes (as far
//! as gaffer uses them).
//!
//! * Gateway (`GET /gateway/bot` names it): Hello (op 10) with a heartbeat interval,
//!   Identify (op 2, the token is checked: a wrong one closes with 4004), READY with
//!   `session_id` and `resume_gateway_url`, Heartbeat (op 1) → ACK (op 11), Resume
//!   (op 6) replays what the session missed then RESUMED, an unknown session gets
//!   Invalid Session (op 9, `d: false`). Dispatches (op 0) carry a per-session `s`.
//!   Tests drop the connection ([`FakeDiscord::drop_connection`]) or ask the client
//!   to reconnect ([`FakeDiscord::request_reconnect`], op 7).
//! * People: [`FakeDiscord::say`] (MESSAGE_CREATE), [`FakeDiscord::slash`]
//!   (INTERACTION_CREATE type 2) and [`FakeDiscord::press`] (type 3, a button of a
//!   message the bot posted) as a [`FakeUser`].
//! * REST: create message (JSON, or multipart with `payload_json` and `files[n]`),
//!   edit message (`PATCH`), start a thread from a message (the thread's id is the
//!   message's, a second one is 400 code 160004), interaction callbacks (types 4, 6, 7;
//!   flag 64 = ephemeral; a second callback is 400 code 40060, an unknown interaction
//!   404 code 10062), `PUT /applications/{id}/commands`. A wrong `Authorization: Bot …`
//!   is 401.
//! * Nonces, as Discord documents `enforce_nonce`: a create with a `nonce` (≤ 25
//!   characters) and `enforce_nonce: true` returns, unchanged, the message the
//!   same author created in the same channel with the same nonce within the
//!   window ([`FakeDiscord::set_nonce_window`], default 5 minutes) and creates
//!   none. `GET /channels/{id}/messages?limit=&before=` lists a channel's messages
//!   newest first (limit 1–100, default 50).
//! * Crashes: [`FakeDiscord::stall_next_post`] makes the next post with a given
//!   text record its message and then never answer, so a test can kill the bot
//!   after Discord made the message and before the bot learnt its id.
//! * Rate limits: every bucketed answer has `X-RateLimit-Limit/Remaining/Reset/
//!   Reset-After/Bucket`; a request to an exhausted bucket before its reset is 429
//!   with `retry_after` and counted in [`FakeDiscord::violations`].
//!   [`FakeDiscord::limit_messages`] sets the message bucket's size;
//!   [`FakeDiscord::fail_next_posts_with_429`] answers the next posts 429 once each.

// Handlers' helpers fail with the HTTP answer itself; its size does not matter in a fake.
#![allow(clippy::result_large_err)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::ws::{CloseFrame, Message as WsMessage, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post, put};
use axum::{Json, Router};
use futures::StreamExt;
use serde_json::{json, Value};
use tokio::sync::{mpsc, Notify};

/// A person in the fake guild.
#[derive(Debug, Clone)]
pub struct FakeUser {
    /// Snowflake.
    pub id: String,
    /// Username.
    pub name: String,
    /// Role ids they hold.
    pub roles: Vec<String>,
}

impl FakeUser {
    /// A user with `id`, `name` and `roles`.
    pub fn new(id: &str, name: &str, roles: &[&str]) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            roles: roles.iter().map(|r| r.to_string()).collect(),
        }
    }
}

/// A message as the fake holds it (the real Message object's fields gaffer uses).
#[derive(Debug, Clone, PartialEq)]
pub struct FakeMessage {
    /// Snowflake.
    pub id: String,
    /// Channel or thread.
    pub channel_id: String,
    /// Author's user id.
    pub author_id: String,
    /// Text.
    pub content: String,
    /// Action rows as sent.
    pub components: Value,
    /// Attachments: (filename, bytes).
    pub attachments: Vec<(String, Vec<u8>)>,
    /// How many times it was edited.
    pub edits: usize,
}

impl FakeMessage {
    /// The `custom_id`s of its buttons.
    pub fn buttons(&self) -> Vec<String> {
        let mut ids = Vec::new();
        for row in self.components.as_array().into_iter().flatten() {
            for c in row["components"].as_array().into_iter().flatten() {
                if let Some(id) = c["custom_id"].as_str() {
                    ids.push(id.to_owned());
                }
            }
        }
        ids
    }

    fn to_json(&self) -> Value {
        json!({
            "id": self.id,
            "type": 0,
            "channel_id": self.channel_id,
            "author": { "id": self.author_id, "username": "gaffer", "bot": true },
            "content": self.content,
            "components": self.components,
            "attachments": self.attachments.iter().enumerate().map(|(i, (f, b))| json!({
                "id": i.to_string(), "filename": f, "size": b.len(),
            })).collect::<Vec<_>>(),
            "edited_timestamp": if self.edits > 0 { json!("2026-01-01T00:00:00.000000+00:00") } else { Value::Null },
        })
    }
}

/// An interaction callback the bot sent.
#[derive(Debug, Clone, PartialEq)]
pub struct FakeCallback {
    /// The interaction it answers.
    pub interaction_id: String,
    /// Callback type (4 message, 6 deferred update, 7 update message).
    pub kind: u64,
    /// `data` as sent.
    pub data: Value,
}

impl FakeCallback {
    /// Whether only the presser sees it (flag 64).
    pub fn ephemeral(&self) -> bool {
        self.data["flags"].as_u64().unwrap_or(0) & 64 != 0
    }

    /// Its text.
    pub fn content(&self) -> &str {
        self.data["content"].as_str().unwrap_or("")
    }
}

/// A gateway session the fake knows.
#[derive(Debug, Clone, Default)]
struct Session {
    /// Dispatches sent so far, in order (`s` is the index + 1).
    sent: Vec<Value>,
    /// The connection it is on now, if any.
    conn: Option<mpsc::UnboundedSender<Control>>,
}

enum Control {
    Send(Value),
    Drop,
}

#[derive(Debug, Clone)]
struct Bucket {
    remaining: u32,
    reset_at: Instant,
}

#[derive(Default)]
struct Inner {
    next_id: u64,
    messages: Vec<FakeMessage>,
    threads: HashMap<String, String>,
    callbacks: Vec<FakeCallback>,
    interactions: HashMap<String, (String, Option<String>)>,
    commands: Value,
    sessions: HashMap<String, Session>,
    current: Option<String>,
    identifies: usize,
    resumes: usize,
    heartbeats: Vec<Value>,
    buckets: HashMap<String, Bucket>,
    message_limit: Option<(u32, Duration)>,
    fail_posts: Vec<f64>,
    violations: usize,
    throttled: Vec<(Instant, Duration)>,
    posts_at: Vec<Instant>,
    received: Vec<FakeRequest>,
    /// (channel, author, nonce) → (message id, when it was created).
    nonces: HashMap<(String, String, String), (String, Instant)>,
    nonce_window: Option<Duration>,
    /// Text whose next post is recorded and then left unanswered.
    stall: Option<String>,
    /// How many posts were recorded and left unanswered.
    stalled: usize,
    /// How many creates were answered with an earlier message by their nonce.
    nonce_hits: usize,
}

/// How long Discord remembers a nonce ("the past few minutes").
const NONCE_WINDOW: Duration = Duration::from_secs(300);

/// A REST request the bot sent, as it arrived (before any check).
#[derive(Debug, Clone)]
pub struct FakeRequest {
    /// `POST`, `PATCH`, ...
    pub method: String,
    /// The path, e.g. `/api/v10/channels/100/messages`.
    pub path: String,
    /// The body: JSON, or multipart with `payload_json` and the attachments' bytes.
    pub body: Vec<u8>,
}

struct Shared {
    token: String,
    app_id: String,
    heartbeat_ms: u64,
    addr: Mutex<Option<SocketAddr>>,
    inner: Mutex<Inner>,
    changed: Notify,
}

/// The fake Discord. Dropping it stops the server.
pub struct FakeDiscord {
    addr: SocketAddr,
    shared: Arc<Shared>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for FakeDiscord {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// The bot's own user id in the fake.
pub const BOT_USER_ID: &str = "1000";
/// The guild every channel is in.
pub const GUILD_ID: &str = "2000";

impl FakeDiscord {
    /// Start a fake that accepts `token`, for application `app_id`, asking for a
    /// heartbeat every `heartbeat` (short in tests to exercise it).
    pub async fn start(token: &str, app_id: &str, heartbeat: Duration) -> Self {
        let shared = Arc::new(Shared {
            token: token.into(),
            app_id: app_id.into(),
            heartbeat_ms: heartbeat.as_millis() as u64,
            addr: Mutex::new(None),
            inner: Mutex::new(Inner {
                next_id: 10_000,
                ..Inner::default()
            }),
            changed: Notify::new(),
        });
        let app = Router::new()
            .route("/gateway", get(gateway))
            .route("/api/v10/gateway/bot", get(gateway_bot))
            .route(
                "/api/v10/channels/{channel}/messages",
                post(create_message).get(list_messages),
            )
            .route(
                "/api/v10/channels/{channel}/messages/{message}",
                patch(edit_message),
            )
            .route(
                "/api/v10/channels/{channel}/messages/{message}/threads",
                post(start_thread),
            )
            .route(
                "/api/v10/interactions/{id}/{token}/callback",
                post(callback),
            )
            .route("/api/v10/applications/{app}/commands", put(put_commands))
            .layer(axum::middleware::from_fn_with_state(
                shared.clone(),
                record_request,
            ))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        *shared.addr.lock().unwrap() = Some(addr);
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            addr,
            shared,
            server,
        }
    }

    /// The REST base URL (`http://127.0.0.1:PORT/api/v10`).
    pub fn api_url(&self) -> String {
        format!("http://{}/api/v10", self.addr)
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.shared.inner.lock().unwrap()
    }

    /// Every message in `channel` (a channel or thread id), oldest first.
    pub fn messages(&self, channel: &str) -> Vec<FakeMessage> {
        self.inner()
            .messages
            .iter()
            .filter(|m| m.channel_id == channel)
            .cloned()
            .collect()
    }

    /// One message by id.
    pub fn message(&self, id: &str) -> Option<FakeMessage> {
        self.inner().messages.iter().find(|m| m.id == id).cloned()
    }

    /// Thread id → parent channel id.
    pub fn threads(&self) -> HashMap<String, String> {
        self.inner().threads.clone()
    }

    /// Every interaction callback, in order.
    pub fn callbacks(&self) -> Vec<FakeCallback> {
        self.inner().callbacks.clone()
    }

    /// Every REST request the bot sent, in order, with its body: what a test greps to
    /// be sure something never reached Discord (message text before and after edits,
    /// thread names, attachments, interaction answers).
    pub fn received(&self) -> Vec<FakeRequest> {
        self.inner().received.clone()
    }

    /// The slash commands the bot registered (`PUT /applications/{id}/commands`).
    pub fn commands(&self) -> Value {
        self.inner().commands.clone()
    }

    /// (Identify count, Resume count) seen on the gateway.
    pub fn gateway_logins(&self) -> (usize, usize) {
        let i = self.inner();
        (i.identifies, i.resumes)
    }

    /// Requests that hit an exhausted bucket before its reset (a client that
    /// ignores the rate-limit headers makes these).
    pub fn violations(&self) -> usize {
        self.inner().violations
    }

    /// When each 429 was answered and the `retry_after` it named.
    pub fn throttled(&self) -> Vec<(Instant, Duration)> {
        self.inner().throttled.clone()
    }

    /// When each message post was accepted.
    pub fn posts_at(&self) -> Vec<Instant> {
        self.inner().posts_at.clone()
    }

    /// Messages per channel: at most `limit` per `window`, as Discord's per-channel bucket.
    pub fn limit_messages(&self, limit: u32, window: Duration) {
        let mut i = self.inner();
        i.message_limit = Some((limit, window));
        i.buckets.retain(|k, _| !k.starts_with("messages:"));
    }

    /// How long a nonce is remembered (default 5 minutes); `Duration::ZERO` is a
    /// restart that came after the window.
    pub fn set_nonce_window(&self, window: Duration) {
        self.inner().nonce_window = Some(window);
    }

    /// The next message post whose content contains `text` is made (it shows in
    /// the channel) but never answered: the bot cannot learn its id.
    pub fn stall_next_post(&self, text: &str) {
        self.inner().stall = Some(text.to_owned());
    }

    /// How many posts [`FakeDiscord::stall_next_post`] left unanswered so far.
    pub fn stalled(&self) -> usize {
        self.inner().stalled
    }

    /// How many creates were answered with an earlier message by their nonce.
    pub fn nonce_hits(&self) -> usize {
        self.inner().nonce_hits
    }

    /// Answer the next `n` message posts with 429 and `retry_after` seconds.
    pub fn fail_next_posts_with_429(&self, n: usize, retry_after: f64) {
        self.inner().fail_posts = vec![retry_after; n];
    }

    /// Wait (up to `timeout`) until `check` holds on the fake; panics with `what` otherwise.
    pub async fn wait_for<T>(
        &self,
        what: &str,
        timeout: Duration,
        mut check: impl FnMut(&FakeDiscord) -> Option<T>,
    ) -> T {
        let deadline = Instant::now() + timeout;
        loop {
            let notified = self.shared.changed.notified();
            if let Some(v) = check(self) {
                return v;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                panic!("timed out waiting for {what}");
            }
            // Woken by every change the fake sees; the short cap only re-checks.
            let _ = tokio::time::timeout(left.min(Duration::from_millis(200)), notified).await;
        }
    }

    fn next_id(&self) -> String {
        let mut i = self.inner();
        i.next_id += 1;
        i.next_id.to_string()
    }

    /// Send a dispatch (op 0) to the bot's session; buffered while it is
    /// disconnected and replayed on Resume.
    pub fn dispatch(&self, kind: &str, data: Value) {
        dispatch(&self.shared, kind, data);
    }

    /// `user` writes `content` in `channel` (MESSAGE_CREATE).
    pub fn say(&self, channel: &str, user: &FakeUser, content: &str) -> String {
        let id = self.next_id();
        self.dispatch(
            "MESSAGE_CREATE",
            json!({
                "id": id, "type": 0, "channel_id": channel, "guild_id": GUILD_ID,
                "author": { "id": user.id, "username": user.name },
                "member": { "roles": user.roles },
                "content": content, "mentions": [], "attachments": [], "embeds": [],
            }),
        );
        id
    }

    fn interaction(
        &self,
        kind: u64,
        channel: &str,
        user: &FakeUser,
        data: Value,
        message: Option<Value>,
    ) -> String {
        let id = self.next_id();
        let token = format!("itoken-{id}");
        let message_id = message
            .as_ref()
            .and_then(|m| m["id"].as_str().map(str::to_owned));
        self.inner()
            .interactions
            .insert(id.clone(), (token.clone(), message_id));
        let mut body = json!({
            "id": id, "application_id": self.shared.app_id, "type": kind,
            "guild_id": GUILD_ID, "channel_id": channel, "token": token, "version": 1,
            "member": { "user": { "id": user.id, "username": user.name }, "roles": user.roles },
            "data": data,
        });
        if let Some(m) = message {
            body["message"] = m;
        }
        self.dispatch("INTERACTION_CREATE", body);
        id
    }

    /// `user` runs `/name` with string `options` in `channel` (INTERACTION_CREATE
    /// type 2). Returns the interaction id.
    pub fn slash(
        &self,
        channel: &str,
        user: &FakeUser,
        name: &str,
        options: &[(&str, &str)],
    ) -> String {
        let options: Vec<(&str, Value)> = options.iter().map(|(k, v)| (*k, json!(v))).collect();
        self.slash_with(channel, user, name, &options)
    }

    /// [`FakeDiscord::slash`] with options of any type: a boolean is sent as
    /// Discord's BOOLEAN option (type 5), anything else as a STRING (type 3).
    pub fn slash_with(
        &self,
        channel: &str,
        user: &FakeUser,
        name: &str,
        options: &[(&str, Value)],
    ) -> String {
        let options: Vec<Value> = options
            .iter()
            .map(|(k, v)| {
                let kind = if v.is_boolean() { 5 } else { 3 };
                json!({ "name": k, "type": kind, "value": v })
            })
            .collect();
        self.interaction(
            2,
            channel,
            user,
            json!({ "id": "3000", "name": name, "type": 1, "options": options }),
            None,
        )
    }

    /// `user` presses the button `custom_id` of message `message_id`
    /// (INTERACTION_CREATE type 3). Returns the interaction id.
    pub fn press(&self, message_id: &str, user: &FakeUser, custom_id: &str) -> String {
        let m = self
            .message(message_id)
            .expect("the pressed message exists");
        self.interaction(
            3,
            &m.channel_id,
            user,
            json!({ "custom_id": custom_id, "component_type": 2 }),
            Some(m.to_json()),
        )
    }

    /// The callback answering interaction `id`, once it came.
    pub fn callback(&self, id: &str) -> Option<FakeCallback> {
        self.inner()
            .callbacks
            .iter()
            .find(|c| c.interaction_id == id)
            .cloned()
    }

    /// Cut the gateway connection without a close frame, as a network failure would.
    pub fn drop_connection(&self) {
        let i = self.inner();
        if let Some(conn) = i
            .current
            .as_ref()
            .and_then(|s| i.sessions.get(s))
            .and_then(|s| s.conn.as_ref())
        {
            let _ = conn.send(Control::Drop);
        }
    }

    /// Ask the client to reconnect and resume (op 7).
    pub fn request_reconnect(&self) {
        let i = self.inner();
        if let Some(conn) = i
            .current
            .as_ref()
            .and_then(|s| i.sessions.get(s))
            .and_then(|s| s.conn.as_ref())
        {
            let _ = conn.send(Control::Send(json!({ "op": 7, "d": null })));
        }
    }

    /// End the bot's session (op 9 Invalid Session, `d: false`): it cannot be
    /// resumed, the bot must identify afresh.
    pub fn invalidate_session(&self) {
        let mut i = self.inner();
        let Some(sid) = i.current.take() else { return };
        if let Some(conn) = i.sessions.remove(&sid).and_then(|s| s.conn) {
            let _ = conn.send(Control::Send(json!({ "op": 9, "d": false })));
        }
    }

    /// The `d` (last sequence number) of every heartbeat the bot sent.
    pub fn heartbeats(&self) -> Vec<Value> {
        self.inner().heartbeats.clone()
    }

    /// Whether the bot has a live gateway connection that has logged in.
    pub fn connected(&self) -> bool {
        let i = self.inner();
        i.current
            .as_ref()
            .and_then(|s| i.sessions.get(s))
            .is_some_and(|s| s.conn.is_some())
    }
}

fn dispatch(shared: &Shared, kind: &str, data: Value) {
    let mut i = shared.inner.lock().unwrap();
    let Some(sid) = i.current.clone() else {
        panic!("fake discord: a dispatch before the bot identified");
    };
    let s = i.sessions.get_mut(&sid).unwrap();
    let seq = s.sent.len() as u64 + 1;
    let frame = json!({ "op": 0, "t": kind, "s": seq, "d": data });
    s.sent.push(frame.clone());
    if let Some(conn) = &s.conn {
        let _ = conn.send(Control::Send(frame));
    }
    drop(i);
    shared.changed.notify_waiters();
}

fn authorized(shared: &Shared, headers: &HeaderMap) -> bool {
    headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == format!("Bot {}", shared.token))
}

fn error(status: StatusCode, code: u64, message: &str) -> Response {
    (status, Json(json!({ "message": message, "code": code }))).into_response()
}

fn unauthorized() -> Response {
    error(StatusCode::UNAUTHORIZED, 0, "401: Unauthorized")
}

async fn gateway_bot(State(s): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    if !authorized(&s, &headers) {
        return unauthorized();
    }
    let addr = s.addr.lock().unwrap().unwrap();
    Json(json!({
        "url": format!("ws://{addr}/gateway"),
        "shards": 1,
        "session_start_limit": { "total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1 },
    }))
    .into_response()
}

async fn gateway(State(s): State<Arc<Shared>>, ws: WebSocketUpgrade) -> Response {
    ws.on_upgrade(move |socket| connection(s, socket))
}

async fn close(mut socket: WebSocket, code: u16, reason: &str) {
    let _ = socket
        .send(WsMessage::Close(Some(CloseFrame {
            code,
            reason: reason.to_owned().into(),
        })))
        .await;
}

/// One gateway connection: Hello, then Identify or Resume, then heartbeats and dispatches.
async fn connection(s: Arc<Shared>, mut socket: WebSocket) {
    let hello = json!({ "op": 10, "d": { "heartbeat_interval": s.heartbeat_ms } });
    if socket
        .send(WsMessage::Text(hello.to_string().into()))
        .await
        .is_err()
    {
        return;
    }
    let first = match socket.next().await {
        Some(Ok(WsMessage::Text(t))) => serde_json::from_str::<Value>(&t).unwrap_or(Value::Null),
        _ => return,
    };
    let token_ok = |d: &Value| d["token"].as_str() == Some(s.token.as_str());
    let (tx, mut rx) = mpsc::unbounded_channel::<Control>();
    let session_id = match first["op"].as_u64() {
        Some(2) => {
            if !token_ok(&first["d"]) {
                return close(socket, 4004, "Authentication failed.").await;
            }
            if first["d"]["intents"].as_u64().is_none() {
                return close(socket, 4013, "Invalid intent(s).").await;
            }
            let sid = format!("session-{}", uuid::Uuid::new_v4().simple());
            let addr = s.addr.lock().unwrap().unwrap();
            {
                let mut i = s.inner.lock().unwrap();
                i.identifies += 1;
                i.sessions.insert(
                    sid.clone(),
                    Session {
                        sent: Vec::new(),
                        conn: Some(tx.clone()),
                    },
                );
                i.current = Some(sid.clone());
            }
            dispatch(
                &s,
                "READY",
                json!({
                    "v": 10,
                    "user": { "id": BOT_USER_ID, "username": "gaffer", "bot": true },
                    "guilds": [{ "id": GUILD_ID, "unavailable": true }],
                    "session_id": sid,
                    "resume_gateway_url": format!("ws://{addr}/gateway"),
                    "application": { "id": s.app_id, "flags": 0 },
                }),
            );
            sid
        }
        Some(6) => {
            let d = &first["d"];
            let sid = d["session_id"].as_str().unwrap_or("").to_owned();
            let seq = d["seq"].as_u64().unwrap_or(0) as usize;
            if !token_ok(d) {
                return close(socket, 4004, "Authentication failed.").await;
            }
            let missed = {
                let mut i = s.inner.lock().unwrap();
                match i.sessions.get_mut(&sid) {
                    Some(session) if seq <= session.sent.len() => {
                        session.conn = Some(tx.clone());
                        let missed = session.sent[seq..].to_vec();
                        i.resumes += 1;
                        i.current = Some(sid.clone());
                        Some(missed)
                    }
                    _ => None,
                }
            };
            let Some(missed) = missed else {
                let _ = socket
                    .send(WsMessage::Text(
                        json!({ "op": 9, "d": false }).to_string().into(),
                    ))
                    .await;
                return;
            };
            for frame in missed {
                let _ = tx.send(Control::Send(frame));
            }
            dispatch(&s, "RESUMED", json!({}));
            sid
        }
        _ => return close(socket, 4003, "Not authenticated.").await,
    };
    s.changed.notify_waiters();
    loop {
        tokio::select! {
            control = rx.recv() => match control {
                Some(Control::Send(frame)) => {
                    if socket.send(WsMessage::Text(frame.to_string().into())).await.is_err() {
                        break;
                    }
                }
                Some(Control::Drop) | None => break,
            },
            incoming = socket.next() => match incoming {
                Some(Ok(WsMessage::Text(t))) => {
                    let v: Value = serde_json::from_str(&t).unwrap_or(Value::Null);
                    match v["op"].as_u64() {
                        Some(1) => {
                            s.inner.lock().unwrap().heartbeats.push(v["d"].clone());
                            s.changed.notify_waiters();
                            let ack = json!({ "op": 11, "d": null });
                            if socket.send(WsMessage::Text(ack.to_string().into())).await.is_err() {
                                break;
                            }
                        }
                        // Identifying twice on one connection is refused, as Discord does.
                        Some(2) => return close(socket, 4005, "Already authenticated.").await,
                        _ => {}
                    }
                }
                Some(Ok(WsMessage::Close(_))) | None | Some(Err(_)) => break,
                Some(Ok(_)) => {}
            },
        }
    }
    let mut i = s.inner.lock().unwrap();
    if let Some(session) = i.sessions.get_mut(&session_id) {
        // Only if a resumed connection has not taken the session over already.
        if session.conn.as_ref().is_some_and(|c| c.same_channel(&tx)) {
            session.conn = None;
        }
    }
    drop(i);
    s.changed.notify_waiters();
}

/// Count a request against `bucket`; the headers to answer with, or a 429.
fn take(s: &Shared, bucket: &str, limit: u32, window: Duration) -> Result<HeaderMap, Response> {
    let mut i = s.inner.lock().unwrap();
    let now = Instant::now();
    let b = i.buckets.entry(bucket.to_owned()).or_insert(Bucket {
        remaining: limit,
        reset_at: now + window,
    });
    if now >= b.reset_at {
        b.remaining = limit;
        b.reset_at = now + window;
    }
    let reset_after = b.reset_at.saturating_duration_since(now).as_secs_f64();
    if b.remaining == 0 {
        i.violations += 1;
        i.throttled
            .push((now, Duration::from_secs_f64(reset_after)));
        drop(i);
        return Err(too_many(bucket, limit, reset_after));
    }
    b.remaining -= 1;
    let remaining = b.remaining;
    let mut h = HeaderMap::new();
    let epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
        + reset_after;
    for (k, v) in [
        ("x-ratelimit-limit", limit.to_string()),
        ("x-ratelimit-remaining", remaining.to_string()),
        ("x-ratelimit-reset", format!("{epoch:.3}")),
        ("x-ratelimit-reset-after", format!("{reset_after:.3}")),
        (
            "x-ratelimit-bucket",
            bucket.split(':').next().unwrap_or(bucket).to_owned(),
        ),
    ] {
        h.insert(k, HeaderValue::from_str(&v).unwrap());
    }
    Ok(h)
}

fn too_many(bucket: &str, limit: u32, retry_after: f64) -> Response {
    let mut r = (
        StatusCode::TOO_MANY_REQUESTS,
        Json(json!({ "message": "You are being rate limited.", "retry_after": retry_after, "global": false })),
    )
        .into_response();
    let h = r.headers_mut();
    for (k, v) in [
        ("retry-after", format!("{}", retry_after.ceil() as u64)),
        ("x-ratelimit-limit", limit.to_string()),
        ("x-ratelimit-remaining", "0".into()),
        ("x-ratelimit-reset-after", format!("{retry_after:.3}")),
        (
            "x-ratelimit-bucket",
            bucket.split(':').next().unwrap_or(bucket).to_owned(),
        ),
        ("x-ratelimit-scope", "user".into()),
    ] {
        h.insert(k, HeaderValue::from_str(&v).unwrap());
    }
    r
}

/// Attached files: (filename, bytes).
type Files = Vec<(String, Vec<u8>)>;

/// Message create/edit body: JSON, or multipart with `payload_json` and `files[n]`.
fn parse_message_body(headers: &HeaderMap, body: &Bytes) -> Result<(Value, Files), Response> {
    let ctype = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if let Some(boundary) = ctype
        .strip_prefix("multipart/form-data")
        .and_then(|rest| rest.split("boundary=").nth(1))
    {
        let boundary = boundary.trim_matches('"');
        let mut payload = None;
        let mut files = Vec::new();
        for part in split_multipart(body, boundary) {
            let (head, data) = part;
            let name = head
                .split("name=\"")
                .nth(1)
                .and_then(|r| r.split('"').next())
                .unwrap_or("");
            if name == "payload_json" {
                payload = serde_json::from_slice::<Value>(&data).ok();
            } else if name.starts_with("files[") {
                let filename = head
                    .split("filename=\"")
                    .nth(1)
                    .and_then(|r| r.split('"').next())
                    .unwrap_or("file")
                    .to_owned();
                files.push((filename, data));
            }
        }
        let Some(payload) = payload else {
            return Err(error(
                StatusCode::BAD_REQUEST,
                50035,
                "Invalid Form Body: payload_json missing",
            ));
        };
        let declared = payload["attachments"].as_array().map_or(0, Vec::len);
        if declared != files.len() {
            return Err(error(
                StatusCode::BAD_REQUEST,
                50035,
                "Invalid Form Body: attachments do not match files",
            ));
        }
        return Ok((payload, files));
    }
    serde_json::from_slice::<Value>(body)
        .map(|v| (v, Vec::new()))
        .map_err(|_| {
            error(
                StatusCode::BAD_REQUEST,
                50109,
                "The request body contains invalid JSON.",
            )
        })
}

fn split_multipart(body: &[u8], boundary: &str) -> Vec<(String, Vec<u8>)> {
    let delim = format!("--{boundary}");
    let text = body;
    let mut parts = Vec::new();
    let mut starts = Vec::new();
    let d = delim.as_bytes();
    let mut i = 0;
    while i + d.len() <= text.len() {
        if &text[i..i + d.len()] == d {
            starts.push(i);
            i += d.len();
        } else {
            i += 1;
        }
    }
    for w in starts.windows(2) {
        let part = &text[w[0] + d.len()..w[1]];
        let part = part.strip_prefix(b"\r\n").unwrap_or(part);
        let part = part.strip_suffix(b"\r\n").unwrap_or(part);
        let Some(split) = part.windows(4).position(|x| x == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&part[..split]).into_owned();
        parts.push((head, part[split + 4..].to_vec()));
    }
    parts
}

fn check_content(v: &Value) -> Result<(), Response> {
    if v["content"]
        .as_str()
        .is_some_and(|c| c.chars().count() > 2000)
    {
        return Err(error(
            StatusCode::BAD_REQUEST,
            50035,
            "Invalid Form Body: content: Must be 2000 or fewer in length.",
        ));
    }
    Ok(())
}

async fn create_message(
    State(s): State<Arc<Shared>>,
    Path(channel): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if !authorized(&s, &headers) {
        return unauthorized();
    }
    let (limit, window) = s
        .inner
        .lock()
        .unwrap()
        .message_limit
        .unwrap_or((50, Duration::from_secs(1)));
    let retry = s.inner.lock().unwrap().fail_posts.pop();
    if let Some(retry_after) = retry {
        s.inner
            .lock()
            .unwrap()
            .throttled
            .push((Instant::now(), Duration::from_secs_f64(retry_after)));
        return too_many(&format!("messages:{channel}"), limit, retry_after);
    }
    let rl = match take(&s, &format!("messages:{channel}"), limit, window) {
        Ok(h) => h,
        Err(r) => return r,
    };
    let (payload, files) = match parse_message_body(&headers, &body) {
        Ok(x) => x,
        Err(r) => return r,
    };
    if let Err(r) = check_content(&payload) {
        return r;
    }
    let content = payload["content"].as_str().unwrap_or("").to_owned();
    if content.is_empty() && files.is_empty() && payload["components"].is_null() {
        return error(
            StatusCode::BAD_REQUEST,
            50006,
            "Cannot send an empty message",
        );
    }
    let nonce = match &payload["nonce"] {
        Value::Null => None,
        Value::String(n) if n.chars().count() <= 25 => Some(n.clone()),
        Value::Number(n) if n.to_string().len() <= 25 => Some(n.to_string()),
        _ => return error(
            StatusCode::BAD_REQUEST,
            50035,
            "Invalid Form Body: nonce: Must be an integer or a string of 25 or fewer characters.",
        ),
    };
    let enforce = payload["enforce_nonce"].as_bool() == Some(true);
    let (message, stalled) = {
        let mut i = s.inner.lock().unwrap();
        let now = Instant::now();
        let window = i.nonce_window.unwrap_or(NONCE_WINDOW);
        let key = nonce
            .clone()
            .filter(|_| enforce)
            .map(|n| (channel.clone(), BOT_USER_ID.to_owned(), n));
        let earlier = key
            .as_ref()
            .and_then(|k| i.nonces.get(k))
            .filter(|(_, at)| now.duration_since(*at) < window)
            .and_then(|(id, _)| i.messages.iter().find(|m| &m.id == id).cloned());
        if let Some(m) = earlier {
            i.nonce_hits += 1;
            drop(i);
            let mut v = m.to_json();
            v["nonce"] = json!(nonce);
            return (rl, Json(v)).into_response();
        }
        i.next_id += 1;
        let m = FakeMessage {
            id: i.next_id.to_string(),
            channel_id: channel,
            author_id: BOT_USER_ID.into(),
            content,
            components: payload.get("components").cloned().unwrap_or(json!([])),
            attachments: files,
            edits: 0,
        };
        i.messages.push(m.clone());
        i.posts_at.push(now);
        if let Some(k) = key {
            i.nonces.insert(k, (m.id.clone(), now));
        }
        let stalled = i
            .stall
            .as_ref()
            .is_some_and(|t| m.content.contains(t.as_str()));
        if stalled {
            i.stall = None;
            i.stalled += 1;
        }
        (m, stalled)
    };
    s.changed.notify_waiters();
    if stalled {
        // Made, but the answer never comes: the bot dies (or times out) first.
        std::future::pending::<()>().await;
    }
    let mut v = message.to_json();
    v["nonce"] = json!(nonce);
    (rl, Json(v)).into_response()
}

/// `GET /channels/{id}/messages`: newest first, `limit` 1–100 (default 50),
/// only those older than `before` when given.
async fn list_messages(
    State(s): State<Arc<Shared>>,
    Path(channel): Path<String>,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    if !authorized(&s, &headers) {
        return unauthorized();
    }
    let rl = match take(&s, &format!("list:{channel}"), 50, Duration::from_secs(1)) {
        Ok(h) => h,
        Err(r) => return r,
    };
    let limit = match q.get("limit").map(|l| l.parse::<usize>()) {
        None => 50,
        Some(Ok(l)) if (1..=100).contains(&l) => l,
        Some(_) => {
            return error(
                StatusCode::BAD_REQUEST,
                50035,
                "Invalid Form Body: limit: int value should be less than or equal to 100.",
            )
        }
    };
    let before = q.get("before").and_then(|b| b.parse::<u64>().ok());
    let list: Vec<Value> = {
        let i = s.inner.lock().unwrap();
        let mut ms: Vec<&FakeMessage> = i
            .messages
            .iter()
            .filter(|m| m.channel_id == channel)
            .filter(|m| before.is_none_or(|b| m.id.parse::<u64>().unwrap_or(0) < b))
            .collect();
        ms.sort_by_key(|m| std::cmp::Reverse(m.id.parse::<u64>().unwrap_or(0)));
        ms.into_iter()
            .take(limit)
            .map(FakeMessage::to_json)
            .collect()
    };
    (rl, Json(Value::Array(list))).into_response()
}

async fn edit_message(
    State(s): State<Arc<Shared>>,
    Path((channel, message)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if !authorized(&s, &headers) {
        return unauthorized();
    }
    let rl = match take(&s, &format!("edit:{channel}"), 50, Duration::from_secs(1)) {
        Ok(h) => h,
        Err(r) => return r,
    };
    let (payload, files) = match parse_message_body(&headers, &body) {
        Ok(x) => x,
        Err(r) => return r,
    };
    if let Err(r) = check_content(&payload) {
        return r;
    }
    let edited = {
        let mut i = s.inner.lock().unwrap();
        let Some(m) = i
            .messages
            .iter_mut()
            .find(|m| m.id == message && m.channel_id == channel)
        else {
            return error(StatusCode::NOT_FOUND, 10008, "Unknown Message");
        };
        apply_edit(m, &payload, files);
        m.clone()
    };
    s.changed.notify_waiters();
    (rl, Json(edited.to_json())).into_response()
}

fn apply_edit(m: &mut FakeMessage, payload: &Value, files: Vec<(String, Vec<u8>)>) {
    if let Some(c) = payload["content"].as_str() {
        m.content = c.to_owned();
    }
    if let Some(c) = payload.get("components") {
        m.components = c.clone();
    }
    if !files.is_empty() {
        m.attachments = files;
    }
    m.edits += 1;
}

/// Keep a copy of every request body (see [`FakeDiscord::received`]).
async fn record_request(
    State(s): State<Arc<Shared>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let (parts, body) = req.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 64 << 20).await else {
        return error(
            StatusCode::PAYLOAD_TOO_LARGE,
            40005,
            "Request entity too large",
        );
    };
    s.inner.lock().unwrap().received.push(FakeRequest {
        method: parts.method.to_string(),
        path: parts.uri.path().to_owned(),
        body: bytes.to_vec(),
    });
    next.run(axum::extract::Request::from_parts(
        parts,
        axum::body::Body::from(bytes),
    ))
    .await
}

async fn start_thread(
    State(s): State<Arc<Shared>>,
    Path((channel, message)): Path<(String, String)>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    if !authorized(&s, &headers) {
        return unauthorized();
    }
    let Some(name) = body["name"]
        .as_str()
        .filter(|n| !n.is_empty() && n.chars().count() <= 100)
    else {
        return error(
            StatusCode::BAD_REQUEST,
            50035,
            "Invalid Form Body: name: Must be between 1 and 100 in length.",
        );
    };
    {
        let mut i = s.inner.lock().unwrap();
        if !i
            .messages
            .iter()
            .any(|m| m.id == message && m.channel_id == channel)
        {
            return error(StatusCode::NOT_FOUND, 10008, "Unknown Message");
        }
        if i.threads.contains_key(&message) {
            return error(
                StatusCode::BAD_REQUEST,
                160004,
                "A thread has already been created for this message",
            );
        }
        i.threads.insert(message.clone(), channel.clone());
    }
    s.changed.notify_waiters();
    (
        StatusCode::CREATED,
        Json(json!({
            "id": message, "type": 11, "guild_id": GUILD_ID, "parent_id": channel,
            "name": name, "owner_id": BOT_USER_ID,
            "thread_metadata": { "archived": false, "auto_archive_duration": body["auto_archive_duration"].as_u64().unwrap_or(1440), "locked": false },
        })),
    )
        .into_response()
}

async fn callback(
    State(s): State<Arc<Shared>>,
    Path((id, token)): Path<(String, String)>,
    method: Method,
    Json(body): Json<Value>,
) -> Response {
    debug_assert_eq!(method, Method::POST);
    let kind = body["type"].as_u64().unwrap_or(0);
    let data = body.get("data").cloned().unwrap_or(Value::Null);
    {
        let mut i = s.inner.lock().unwrap();
        let Some((expected, message_id)) = i.interactions.get(&id).cloned() else {
            return error(StatusCode::NOT_FOUND, 10062, "Unknown interaction");
        };
        if expected != token {
            return error(StatusCode::UNAUTHORIZED, 50027, "Invalid Webhook Token");
        }
        if i.callbacks.iter().any(|c| c.interaction_id == id) {
            return error(
                StatusCode::BAD_REQUEST,
                40060,
                "Interaction has already been acknowledged.",
            );
        }
        match kind {
            4 | 6 => {}
            7 => {
                let Some(mid) = message_id else {
                    return error(
                        StatusCode::BAD_REQUEST,
                        50035,
                        "UPDATE_MESSAGE is only valid for component interactions",
                    );
                };
                if let Some(m) = i.messages.iter_mut().find(|m| m.id == mid) {
                    apply_edit(m, &data, Vec::new());
                }
            }
            _ => {
                return error(
                    StatusCode::BAD_REQUEST,
                    50035,
                    "Invalid interaction callback type",
                )
            }
        }
        if kind == 4 {
            if let Err(r) = check_content(&data) {
                return r;
            }
        }
        i.callbacks.push(FakeCallback {
            interaction_id: id,
            kind,
            data,
        });
    }
    s.changed.notify_waiters();
    StatusCode::NO_CONTENT.into_response()
}

async fn put_commands(
    State(s): State<Arc<Shared>>,
    Path(app): Path<String>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    if !authorized(&s, &headers) {
        return unauthorized();
    }
    if app != s.app_id {
        return error(StatusCode::FORBIDDEN, 50001, "Missing Access");
    }
    let Some(list) = body.as_array() else {
        return error(
            StatusCode::BAD_REQUEST,
            50035,
            "Invalid Form Body: expected an array of commands",
        );
    };
    let mut out = Vec::new();
    for (n, c) in list.iter().enumerate() {
        let name = c["name"].as_str().unwrap_or("");
        if name.is_empty() || name.len() > 32 || c["description"].as_str().is_none_or(str::is_empty)
        {
            return error(
                StatusCode::BAD_REQUEST,
                50035,
                "Invalid Form Body: name and description are required",
            );
        }
        let mut c = c.clone();
        c["id"] = json!(format!("{}", 5000 + n));
        c["application_id"] = json!(app);
        out.push(c);
    }
    s.inner.lock().unwrap().commands = json!(out);
    s.changed.notify_waiters();
    Json(json!(out)).into_response()
}
