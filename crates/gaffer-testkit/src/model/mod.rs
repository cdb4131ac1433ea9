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
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::{OriginalUri, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde_json::{json, Value};

use crate::scenario::{FakeUsage, LlmReply};

mod wire;
use wire::{
    anthropic_events, anthropic_message, error, gemini_response, responses_events,
    responses_object, sse, Reply,
};

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

/// Anthropic's answer when a plan's usage limit is used up: 429 with the unified
/// rate-limit headers the API sends to a subscription or Claude gateway login
/// (`anthropic-ratelimit-unified-status: rejected`, the limit that was hit as
/// `…-representative-claim`, its window's own `…-5h-*` / `…-7d-*` readings, reset
/// times in unix seconds) and `retry-after` until the reset. `claim` is `five_hour` or
/// `seven_day`; `resets_at` unix seconds.
pub fn usage_limit_reached(claim: &str, resets_at: u64, now: u64) -> LlmReply {
    let window = if claim == "seven_day" { "7d" } else { "5h" };
    let reset = resets_at.to_string();
    let headers = [
        ("anthropic-ratelimit-unified-status", "rejected"),
        ("anthropic-ratelimit-unified-reset", &reset),
        ("anthropic-ratelimit-unified-representative-claim", claim),
        (
            &format!("anthropic-ratelimit-unified-{window}-status"),
            "rejected",
        ),
        (
            &format!("anthropic-ratelimit-unified-{window}-reset"),
            &reset,
        ),
        (
            &format!("anthropic-ratelimit-unified-{window}-utilization"),
            "1.0",
        ),
        ("anthropic-ratelimit-unified-fallback", "available"),
        ("anthropic-ratelimit-unified-overage-status", "rejected"),
        (
            "anthropic-ratelimit-unified-overage-disabled-reason",
            "org_level_disabled",
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    LlmReply {
        status: Some(429),
        retry_after: Some(resets_at.saturating_sub(now)),
        headers,
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
        for (name, value) in &reply.headers {
            if let (Ok(name), Ok(value)) = (
                axum::http::HeaderName::from_bytes(name.as_bytes()),
                axum::http::HeaderValue::from_str(value),
            ) {
                resp.headers_mut().insert(name, value);
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

/// About four bytes a token, at least one.
fn estimate_tokens(text: &str) -> u64 {
    (text.len() as u64 / 4).max(1)
}
