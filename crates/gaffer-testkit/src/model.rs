//! A scripted model server for the real agent CLIs: the model is the one part of an agent
//! a test cannot run, so this stands in for it on loopback, speaking each provider's own
//! streaming wire protocol:
//!
//! * Anthropic Messages — `POST /v1/messages` (SSE with `"stream": true`, JSON otherwise)
//!   and `POST /v1/messages/count_tokens`: Claude Code with `ANTHROPIC_BASE_URL`;
//! * OpenAI Responses — `POST /v1/responses` (SSE): Codex with a `model_providers` entry
//!   whose `base_url` is [`ModelServer::openai_base`] and `wire_api = "responses"`;
//! * Gemini — `POST /v1beta/models/<model>:streamGenerateContent?alt=sse`,
//!   `:generateContent` and `:countTokens`: Gemini CLI with `GOOGLE_GEMINI_BASE_URL`.
//!
//! Replies come from a [`ModelScript`]: each request is given to the gaffer role whose
//! marker (by default the first words of gaffer's role prompt, `You are the owner`)
//! appears first in it, and gets that role's next scripted [`LlmReply`] — text, tool calls
//! in the CLI's own tool names, usage. Requests no role claims (a CLI's side questions:
//! titles, summaries, command prefixes) get [`ModelScript::other`]. Every request is
//! recorded with its headers and body ([`ModelServer::requests`]) so tests can look for
//! what reached the model (a steering message, a secret that must not).

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::extract::{OriginalUri, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde_json::{json, Value};

use crate::scenario::{FakeUsage, LlmReply};

/// Which wire protocol a request spoke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// Anthropic Messages (`/v1/messages`).
    Anthropic,
    /// OpenAI Responses (`/v1/responses`).
    Responses,
    /// Gemini `generateContent` / `streamGenerateContent`.
    Gemini,
    /// A token count (`count_tokens`, `countTokens`): answered, never scripted.
    CountTokens,
    /// Anything else (answered 404).
    Other,
}

/// One gaffer role's part of a script.
#[derive(Debug, Clone)]
pub struct RoleScript {
    /// Role name (`planner`, `owner`, `reviewer`, `arbiter`, ...).
    pub role: String,
    /// Text that identifies the role's requests (it appears in their system prompt or
    /// first message).
    pub marker: String,
    /// Replies, one per request of this role, in order.
    pub replies: Vec<LlmReply>,
}

/// What the model answers, by role.
#[derive(Debug, Clone)]
pub struct ModelScript {
    /// Roles, each with its replies.
    pub roles: Vec<RoleScript>,
    /// Reply to requests no role marker matches.
    pub other: LlmReply,
}

impl Default for ModelScript {
    fn default() -> Self {
        ModelScript {
            roles: Vec::new(),
            other: LlmReply {
                text: Some("ok".into()),
                ..LlmReply::default()
            },
        }
    }
}

impl ModelScript {
    /// An empty script: every request gets [`ModelScript::other`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Add a gaffer role, marked by the opening of gaffer's role prompt (`You are the
    /// <role>`), with its replies.
    pub fn role(self, role: &str, replies: Vec<LlmReply>) -> Self {
        let marker = format!("You are the {role}");
        self.role_marked(role, &marker, replies)
    }

    /// Add a role whose requests contain `marker`.
    pub fn role_marked(mut self, role: &str, marker: &str, replies: Vec<LlmReply>) -> Self {
        self.roles.push(RoleScript {
            role: role.into(),
            marker: marker.into(),
            replies,
        });
        self
    }

    /// Answer unclaimed requests with `reply`.
    pub fn other(mut self, reply: LlmReply) -> Self {
        self.other = reply;
        self
    }
}

/// A reply saying `text`.
pub fn say(text: &str) -> LlmReply {
    LlmReply {
        text: Some(text.into()),
        ..LlmReply::default()
    }
}

/// A reply calling one tool `name` with `arguments` (a JSON object; for a Responses
/// free-form tool such as Codex's `apply_patch`, a JSON string).
pub fn call(name: &str, arguments: Value) -> LlmReply {
    LlmReply {
        tool_calls: vec![crate::scenario::LlmToolCall {
            name: name.into(),
            arguments,
        }],
        ..LlmReply::default()
    }
}

/// One request the server received.
#[derive(Debug, Clone)]
pub struct ModelRequest {
    /// Protocol.
    pub api: Api,
    /// HTTP method.
    pub method: String,
    /// Path and query.
    pub uri: String,
    /// Headers (lowercase names), as sent.
    pub headers: Vec<(String, String)>,
    /// The body (JSON; a string when it was not JSON).
    pub body: Value,
    /// The role whose marker it carried.
    pub role: Option<String>,
    /// Which of the role's replies it got (0-based).
    pub reply: Option<usize>,
}

impl ModelRequest {
    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct Inner {
    script: ModelScript,
    played: Mutex<HashMap<String, usize>>,
    requests: Mutex<Vec<ModelRequest>>,
    failures: Mutex<Vec<String>>,
    seq: Mutex<u64>,
}

/// The running server (stops when dropped).
pub struct ModelServer {
    addr: std::net::SocketAddr,
    inner: Arc<Inner>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ModelServer {
    /// Serve `script` on `127.0.0.1` (any free port).
    pub async fn start(script: ModelScript) -> anyhow::Result<Self> {
        let inner = Arc::new(Inner {
            script,
            ..Inner::default()
        });
        let app = Router::new().fallback(handle).with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(ModelServer { addr, inner, task })
    }

    /// `http://127.0.0.1:PORT`: `ANTHROPIC_BASE_URL`, `GOOGLE_GEMINI_BASE_URL`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://127.0.0.1:PORT/v1`: an OpenAI provider's `base_url`.
    pub fn openai_base(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Every request received, in order.
    pub fn requests(&self) -> Vec<ModelRequest> {
        self.inner.requests.lock().unwrap().clone()
    }

    /// The scripted requests of `role`, in order.
    pub fn requests_of(&self, role: &str) -> Vec<ModelRequest> {
        self.requests()
            .into_iter()
            .filter(|r| r.role.as_deref() == Some(role))
            .collect()
    }

    /// Every request body as one text (one JSON document a line), for searching what
    /// reached the model.
    pub fn bodies_text(&self) -> String {
        self.requests()
            .iter()
            .map(|r| r.body.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Requests that were not for a model: a CLI reaching for the internet through the
    /// proxy [`crate::clis::CliHome`] points it at (`CONNECT github.com:443`), or an
    /// endpoint this server does not serve. Empty when the CLIs kept to the model.
    pub fn strays(&self) -> Vec<String> {
        self.requests()
            .iter()
            .filter(|r| r.api == Api::Other)
            .map(|r| format!("{} {}", r.method, r.uri))
            .collect()
    }

    /// How many replies of `role` were given.
    pub fn played(&self, role: &str) -> usize {
        self.inner
            .played
            .lock()
            .unwrap()
            .get(role)
            .copied()
            .unwrap_or(0)
    }

    /// What went wrong serving the script (a role out of replies, a request not carrying
    /// what its reply expected). Empty when the agents followed it.
    pub fn failures(&self) -> Vec<String> {
        self.inner.failures.lock().unwrap().clone()
    }

    /// A summary for assertion messages: each request's api, role and first user text.
    pub fn describe(&self) -> String {
        self.requests()
            .iter()
            .map(|r| {
                let mut b = r.body.to_string();
                b.truncate(300);
                format!(
                    "{:?} {} role={:?} reply={:?}: {b}",
                    r.api, r.uri, r.role, r.reply
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// `"text"` as it appears inside a JSON string (newlines and quotes escaped).
fn json_escaped(text: &str) -> String {
    let s = Value::String(text.into()).to_string();
    s[1..s.len() - 1].to_string()
}

/// The role whose marker appears earliest in the body.
fn role_of(script: &ModelScript, body: &str) -> Option<usize> {
    script
        .roles
        .iter()
        .enumerate()
        .filter_map(|(i, r)| body.find(&json_escaped(&r.marker)).map(|at| (at, i)))
        .min()
        .map(|(_, i)| i)
}

fn api_of(method: &Method, path: &str) -> Api {
    if method != Method::POST {
        return Api::Other;
    }
    if path.ends_with("/messages/count_tokens") || path.ends_with(":countTokens") {
        Api::CountTokens
    } else if path.ends_with("/v1/messages") {
        Api::Anthropic
    } else if path.ends_with("/responses") {
        Api::Responses
    } else if path.contains("/models/")
        && (path.ends_with(":streamGenerateContent") || path.ends_with(":generateContent"))
    {
        Api::Gemini
    } else {
        Api::Other
    }
}

async fn handle(
    State(inner): State<Arc<Inner>>,
    method: Method,
    OriginalUri(uri): OriginalUri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_string();
    let api = api_of(&method, &path);
    let body: Value = serde_json::from_slice(&body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()));
    let text = body.to_string();
    let (role, reply_index, reply) = match api {
        Api::Anthropic | Api::Responses | Api::Gemini => match role_of(&inner.script, &text) {
            Some(i) => {
                let rs = &inner.script.roles[i];
                let n = {
                    let mut played = inner.played.lock().unwrap();
                    let n = played.entry(rs.role.clone()).or_insert(0);
                    *n += 1;
                    *n - 1
                };
                (Some(rs.role.clone()), Some(n), rs.replies.get(n).cloned())
            }
            None => (None, None, Some(inner.script.other.clone())),
        },
        _ => (None, None, None),
    };
    inner.requests.lock().unwrap().push(ModelRequest {
        api,
        method: method.to_string(),
        uri: uri.to_string(),
        headers: headers
            .iter()
            .map(|(k, v)| (k.to_string(), String::from_utf8_lossy(v.as_bytes()).into()))
            .collect(),
        body: body.clone(),
        role: role.clone(),
        reply: reply_index,
    });
    if let Err(e) = authorized(api, &headers, &uri) {
        return error(api, StatusCode::UNAUTHORIZED, &e);
    }
    let fail = |msg: String| {
        inner.failures.lock().unwrap().push(msg.clone());
        error(api, StatusCode::BAD_REQUEST, &msg)
    };
    match api {
        Api::Other => {
            return error(
                api,
                StatusCode::NOT_FOUND,
                &format!("scripted model server: no route {method} {path}"),
            )
        }
        Api::CountTokens => {
            let n = estimate_tokens(&text);
            return if path.ends_with(":countTokens") {
                axum::Json(json!({"totalTokens": n})).into_response()
            } else {
                axum::Json(json!({"input_tokens": n})).into_response()
            };
        }
        _ => {}
    }
    let Some(reply) = reply else {
        return fail(format!(
            "scripted model server: role {} has no reply left for its request {}",
            role.unwrap_or_default(),
            reply_index.map_or(0, |n| n + 1)
        ));
    };
    if let Some(exp) = &reply.expect_request_contains {
        if !text.contains(&json_escaped(exp)) {
            return fail(format!(
                "scripted model server: the request of {} (reply {}) does not contain {exp:?}",
                role.unwrap_or_else(|| "another role".into()),
                reply_index.map_or(0, |n| n + 1)
            ));
        }
    }
    if let Some(ms) = reply.delay_ms {
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    }
    if let Some(status) = reply.status.and_then(|s| StatusCode::from_u16(s).ok()) {
        let mut resp = error(api, status, "scripted error");
        if let Some(s) = reply.retry_after {
            if let Ok(v) = s.to_string().parse() {
                resp.headers_mut().insert("retry-after", v);
            }
        }
        return resp;
    }
    let n = {
        let mut s = inner.seq.lock().unwrap();
        *s += 1;
        *s
    };
    let usage = reply.usage.unwrap_or(FakeUsage {
        input_tokens: estimate_tokens(&text),
        output_tokens: estimate_tokens(&serde_json::to_string(&reply).unwrap_or_default()),
        cached_input_tokens: 0,
    });
    let stream = match api {
        Api::Anthropic => body.get("stream").and_then(Value::as_bool) == Some(true),
        Api::Responses => body.get("stream").and_then(Value::as_bool) != Some(false),
        _ => path.ends_with(":streamGenerateContent"),
    };
    let model = match api {
        Api::Gemini => path
            .rsplit('/')
            .next()
            .and_then(|m| m.split(':').next())
            .unwrap_or("")
            .to_string(),
        _ => body
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
    };
    let reply = Reply {
        n,
        model,
        text: reply.text.clone().unwrap_or_default(),
        calls: reply
            .tool_calls
            .iter()
            .map(|c| (c.name.clone(), c.arguments.clone()))
            .collect(),
        usage,
    };
    match (api, stream) {
        (Api::Anthropic, true) => sse(anthropic_events(&reply)),
        (Api::Anthropic, false) => axum::Json(anthropic_message(&reply)).into_response(),
        (Api::Responses, true) => sse(responses_events(&reply)),
        (Api::Responses, false) => axum::Json(responses_object(&reply)).into_response(),
        (_, true) => sse(vec![(None, gemini_response(&reply))]),
        (_, false) => axum::Json(gemini_response(&reply)).into_response(),
    }
}

/// Refuse what the real API refuses without a credential.
fn authorized(api: Api, headers: &HeaderMap, uri: &axum::http::Uri) -> Result<(), String> {
    let has = |h: &str| headers.get(h).is_some_and(|v| !v.is_empty());
    let ok = match api {
        Api::Anthropic => has("x-api-key") || has("authorization"),
        Api::Responses => has("authorization"),
        Api::Gemini => has("x-goog-api-key") || uri.query().is_some_and(|q| q.contains("key=")),
        Api::CountTokens | Api::Other => true,
    };
    if ok {
        Ok(())
    } else {
        Err("no API key in the request".into())
    }
}

fn error(api: Api, status: StatusCode, msg: &str) -> Response {
    let body = match api {
        Api::Anthropic | Api::CountTokens => {
            let ty = match status.as_u16() {
                401 => "authentication_error",
                404 => "not_found_error",
                429 => "rate_limit_error",
                s if s >= 500 => "api_error",
                _ => "invalid_request_error",
            };
            json!({"type": "error", "error": {"type": ty, "message": msg}})
        }
        Api::Responses | Api::Other => {
            json!({"error": {"message": msg, "type": "invalid_request_error", "param": null, "code": null}})
        }
        Api::Gemini => json!({"error": {"code": status.as_u16(), "message": msg,
            "status": if status == StatusCode::TOO_MANY_REQUESTS { "RESOURCE_EXHAUSTED" } else { "INVALID_ARGUMENT" }}}),
    };
    (status, axum::Json(body)).into_response()
}

/// About four bytes a token, at least one.
fn estimate_tokens(text: &str) -> u64 {
    (text.len() as u64 / 4).max(1)
}

struct Reply {
    n: u64,
    model: String,
    text: String,
    calls: Vec<(String, Value)>,
    usage: FakeUsage,
}

/// An SSE response: `event:` (when named) and `data:` lines, streamed event by event.
fn sse(events: Vec<(Option<&'static str>, Value)>) -> Response {
    let chunks: Vec<Result<Bytes, Infallible>> = events
        .into_iter()
        .map(|(name, data)| {
            let mut s = String::new();
            if let Some(name) = name {
                s.push_str(&format!("event: {name}\n"));
            }
            s.push_str(&format!("data: {data}\n\n"));
            Ok(Bytes::from(s))
        })
        .collect();
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(Body::from_stream(futures::stream::iter(chunks)))
        .unwrap()
}

/// Text in a few pieces, so clients assemble deltas as they must.
fn pieces(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let size = (chars.len() / 3).max(1);
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

fn arguments_text(args: &Value) -> String {
    match args {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

// ---- Anthropic Messages ----

fn anthropic_usage(u: &FakeUsage) -> Value {
    json!({"input_tokens": u.input_tokens, "output_tokens": u.output_tokens,
           "cache_read_input_tokens": u.cached_input_tokens, "cache_creation_input_tokens": 0})
}

fn anthropic_blocks(r: &Reply) -> Vec<Value> {
    let mut blocks = Vec::new();
    if !r.text.is_empty() {
        blocks.push(json!({"type": "text", "text": r.text}));
    }
    for (i, (name, args)) in r.calls.iter().enumerate() {
        blocks.push(json!({"type": "tool_use", "id": format!("toolu_{:02}{:022}", i, r.n), "name": name, "input": args}));
    }
    blocks
}

fn anthropic_stop(r: &Reply) -> &'static str {
    if r.calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    }
}

fn anthropic_message(r: &Reply) -> Value {
    json!({
        "id": format!("msg_{:024}", r.n), "type": "message", "role": "assistant", "model": r.model,
        "content": anthropic_blocks(r), "stop_reason": anthropic_stop(r), "stop_sequence": null,
        "usage": anthropic_usage(&r.usage),
    })
}

fn anthropic_events(r: &Reply) -> Vec<(Option<&'static str>, Value)> {
    let mut start_usage = anthropic_usage(&r.usage);
    start_usage["output_tokens"] = json!(1);
    let mut ev = vec![
        (
            Some("message_start"),
            json!({"type": "message_start", "message": {
                "id": format!("msg_{:024}", r.n), "type": "message", "role": "assistant", "model": r.model,
                "content": [], "stop_reason": null, "stop_sequence": null, "usage": start_usage}}),
        ),
        (Some("ping"), json!({"type": "ping"})),
    ];
    for (index, block) in anthropic_blocks(r).into_iter().enumerate() {
        let empty = match block["type"].as_str() {
            Some("text") => json!({"type": "text", "text": ""}),
            _ => json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
        };
        ev.push((
            Some("content_block_start"),
            json!({"type": "content_block_start", "index": index, "content_block": empty}),
        ));
        let deltas = match block["type"].as_str() {
            Some("text") => pieces(block["text"].as_str().unwrap_or(""))
                .into_iter()
                .map(|t| json!({"type": "text_delta", "text": t}))
                .collect::<Vec<_>>(),
            _ => pieces(&block["input"].to_string())
                .into_iter()
                .map(|t| json!({"type": "input_json_delta", "partial_json": t}))
                .collect(),
        };
        for delta in deltas {
            ev.push((
                Some("content_block_delta"),
                json!({"type": "content_block_delta", "index": index, "delta": delta}),
            ));
        }
        ev.push((
            Some("content_block_stop"),
            json!({"type": "content_block_stop", "index": index}),
        ));
    }
    ev.push((
        Some("message_delta"),
        json!({"type": "message_delta", "delta": {"stop_reason": anthropic_stop(r), "stop_sequence": null},
               "usage": {"output_tokens": r.usage.output_tokens}}),
    ));
    ev.push((Some("message_stop"), json!({"type": "message_stop"})));
    ev
}

// ---- OpenAI Responses ----

fn responses_items(r: &Reply) -> Vec<Value> {
    let mut items = Vec::new();
    if !r.text.is_empty() {
        items.push(json!({"id": format!("msg_{:024}", r.n), "type": "message", "status": "completed",
            "role": "assistant", "content": [{"type": "output_text", "text": r.text, "annotations": []}]}));
    }
    for (i, (name, args)) in r.calls.iter().enumerate() {
        let call_id = format!("call_{:02}{:022}", i, r.n);
        items.push(match args {
            Value::String(input) => json!({"id": format!("ctc_{:02}{:022}", i, r.n), "type": "custom_tool_call",
                "status": "completed", "call_id": call_id, "name": name, "input": input}),
            _ => json!({"id": format!("fc_{:02}{:022}", i, r.n), "type": "function_call", "status": "completed",
                "call_id": call_id, "name": name, "arguments": arguments_text(args)}),
        });
    }
    items
}

fn responses_object(r: &Reply) -> Value {
    json!({
        "id": format!("resp_{:024}", r.n), "object": "response", "created_at": 1_700_000_000u64,
        "status": "completed", "model": r.model, "output": responses_items(r),
        "usage": {
            "input_tokens": r.usage.input_tokens + r.usage.cached_input_tokens,
            "input_tokens_details": {"cached_tokens": r.usage.cached_input_tokens},
            "output_tokens": r.usage.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": r.usage.input_tokens + r.usage.cached_input_tokens + r.usage.output_tokens,
        },
    })
}

fn responses_events(r: &Reply) -> Vec<(Option<&'static str>, Value)> {
    let mut seq = 0u64;
    let mut ev = Vec::new();
    let mut push = |name: &'static str, mut data: Value| {
        data["type"] = json!(name);
        data["sequence_number"] = json!(seq);
        seq += 1;
        ev.push((Some(name), data));
    };
    let mut created = responses_object(r);
    created["status"] = json!("in_progress");
    created["output"] = json!([]);
    created["usage"] = Value::Null;
    push("response.created", json!({"response": created.clone()}));
    push("response.in_progress", json!({"response": created}));
    for (index, item) in responses_items(r).into_iter().enumerate() {
        let id = item["id"].clone();
        let mut added = item.clone();
        added["status"] = json!("in_progress");
        match item["type"].as_str() {
            Some("message") => {
                added["content"] = json!([]);
                push(
                    "response.output_item.added",
                    json!({"output_index": index, "item": added}),
                );
                push(
                    "response.content_part.added",
                    json!({"item_id": id, "output_index": index,
                    "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}}),
                );
                for d in pieces(r.text.as_str()) {
                    push(
                        "response.output_text.delta",
                        json!({"item_id": id, "output_index": index, "content_index": 0, "delta": d}),
                    );
                }
                push(
                    "response.output_text.done",
                    json!({"item_id": id, "output_index": index, "content_index": 0, "text": r.text}),
                );
                push(
                    "response.content_part.done",
                    json!({"item_id": id, "output_index": index,
                    "content_index": 0, "part": {"type": "output_text", "text": r.text, "annotations": []}}),
                );
            }
            Some("function_call") => {
                added["arguments"] = json!("");
                push(
                    "response.output_item.added",
                    json!({"output_index": index, "item": added}),
                );
                let args = item["arguments"].as_str().unwrap_or("").to_string();
                for d in pieces(&args) {
                    push(
                        "response.function_call_arguments.delta",
                        json!({"item_id": id, "output_index": index, "delta": d}),
                    );
                }
                push(
                    "response.function_call_arguments.done",
                    json!({"item_id": id, "output_index": index, "arguments": args}),
                );
            }
            _ => {
                added["input"] = json!("");
                push(
                    "response.output_item.added",
                    json!({"output_index": index, "item": added}),
                );
                let input = item["input"].as_str().unwrap_or("").to_string();
                for d in pieces(&input) {
                    push(
                        "response.custom_tool_call_input.delta",
                        json!({"item_id": id, "output_index": index, "delta": d}),
                    );
                }
                push(
                    "response.custom_tool_call_input.done",
                    json!({"item_id": id, "output_index": index, "input": input}),
                );
            }
        }
        push(
            "response.output_item.done",
            json!({"output_index": index, "item": item}),
        );
    }
    push(
        "response.completed",
        json!({"response": responses_object(r)}),
    );
    ev
}

// ---- Gemini ----

fn gemini_response(r: &Reply) -> Value {
    let mut parts = Vec::new();
    if !r.text.is_empty() {
        parts.push(json!({"text": r.text}));
    }
    for (name, args) in &r.calls {
        parts.push(json!({"functionCall": {"name": name, "args": args}}));
    }
    json!({
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {
            "promptTokenCount": r.usage.input_tokens + r.usage.cached_input_tokens,
            "cachedContentTokenCount": r.usage.cached_input_tokens,
            "candidatesTokenCount": r.usage.output_tokens,
            "totalTokenCount": r.usage.input_tokens + r.usage.cached_input_tokens + r.usage.output_tokens,
        },
        "modelVersion": r.model,
        "responseId": format!("resp-{}", r.n),
    })
}
