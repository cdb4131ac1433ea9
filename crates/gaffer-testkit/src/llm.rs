//! A fake OpenAI-compatible (`POST /v1/chat/completions`) and Anthropic
//! (`POST /v1/messages`) server on loopback, answering from [`Scenario::llm`] in order.
//! It refuses what the real APIs refuse: a tool result without its call, an unanswered
//! tool call, missing `max_tokens` / `anthropic-version` / `x-api-key`, roles out of order.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};

use crate::scenario::{log_effect, LlmReply, Scenario};

#[derive(Default)]
struct Inner {
    replies: Mutex<VecDeque<LlmReply>>,
    requests: Mutex<Vec<Value>>,
    seq: Mutex<u64>,
}

/// The running server. Dropping it stops it.
pub struct FakeLlmServer {
    addr: std::net::SocketAddr,
    inner: Arc<Inner>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeLlmServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeLlmServer {
    /// Start on `127.0.0.1:0`.
    pub async fn start(scenario: &Scenario) -> anyhow::Result<Self> {
        Self::start_on(scenario, 0).await
    }

    /// Start on `127.0.0.1:port` (0: any free port).
    pub async fn start_on(scenario: &Scenario, port: u16) -> anyhow::Result<Self> {
        let inner = Arc::new(Inner {
            replies: Mutex::new(scenario.llm.clone().into()),
            ..Default::default()
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(openai))
            .route("/v1/messages", post(anthropic))
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(FakeLlmServer { addr, inner, task })
    }
    /// Base URL for OpenAI-compatible clients (`http://127.0.0.1:PORT/v1`).
    pub fn openai_base(&self) -> String {
        format!("http://{}/v1", self.addr)
    }
    /// Base URL for Anthropic clients (`http://127.0.0.1:PORT`).
    pub fn anthropic_base(&self) -> String {
        format!("http://{}", self.addr)
    }
    /// Every request body received, in order.
    pub fn requests(&self) -> Vec<Value> {
        self.inner.requests.lock().unwrap().clone()
    }
    /// Scripted replies not yet used.
    pub fn remaining(&self) -> usize {
        self.inner.replies.lock().unwrap().len()
    }
}

fn next_id(inner: &Inner) -> u64 {
    let mut s = inner.seq.lock().unwrap();
    *s += 1;
    *s
}

fn openai_error(status: StatusCode, msg: &str) -> Response {
    (status, Json(json!({"error": {"message": msg, "type": "invalid_request_error", "param": null, "code": null}}))).into_response()
}

fn anthropic_error(status: StatusCode, ty: &str, msg: &str) -> Response {
    (
        status,
        Json(json!({"type": "error", "error": {"type": ty, "message": msg}})),
    )
        .into_response()
}

/// The next scripted reply to `body` (recorded first), after its `delay_ms`.
async fn take(inner: &Inner, body: &Value) -> Result<LlmReply, String> {
    inner.requests.lock().unwrap().push(body.clone());
    let r = inner
        .replies
        .lock()
        .unwrap()
        .pop_front()
        .ok_or_else(|| "fake LLM scenario exhausted".to_string())?;
    if let Some(exp) = &r.expect_request_contains {
        if !body.to_string().contains(exp.as_str()) {
            return Err(format!("request does not contain {exp:?}"));
        }
    }
    if let Some(ms) = r.delay_ms {
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    }
    Ok(r)
}

fn rate_limited(r: &LlmReply, body: Value) -> Option<Response> {
    let status = StatusCode::from_u16(r.status?).ok()?;
    let mut resp = (status, Json(body)).into_response();
    if let Some(s) = r.retry_after {
        if let Ok(v) = s.to_string().parse() {
            resp.headers_mut().insert("retry-after", v);
        }
    }
    Some(resp)
}

fn check_openai(body: &Value) -> Result<(), String> {
    body.get("model")
        .and_then(Value::as_str)
        .ok_or("you must provide a model parameter")?;
    let msgs = body
        .get("messages")
        .and_then(Value::as_array)
        .ok_or("'messages' is a required property")?;
    if msgs.is_empty() {
        return Err("'messages' must not be empty".into());
    }
    for (i, t) in body
        .get("tools")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        if t.get("type").and_then(Value::as_str) != Some("function")
            || t.pointer("/function/name")
                .and_then(Value::as_str)
                .is_none()
            || !t
                .pointer("/function/parameters")
                .is_some_and(Value::is_object)
        {
            return Err(format!(
                "tools[{i}]: expected {{type: \"function\", function: {{name, parameters}}}}"
            ));
        }
    }
    let mut open: Vec<String> = Vec::new();
    for (i, m) in msgs.iter().enumerate() {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("");
        if role == "tool" {
            let id = m.get("tool_call_id").and_then(Value::as_str).unwrap_or("");
            let Some(pos) = open.iter().position(|x| x == id) else {
                return Err(format!("messages[{i}]: tool message with tool_call_id {id:?} does not answer a preceding tool call"));
            };
            open.remove(pos);
            continue;
        }
        if !open.is_empty() {
            return Err(format!("An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. Missing: {open:?}"));
        }
        if role == "assistant" {
            if let Some(tcs) = m.get("tool_calls").and_then(Value::as_array) {
                for tc in tcs {
                    let args = tc
                        .pointer("/function/arguments")
                        .and_then(Value::as_str)
                        .ok_or("tool_calls[].function.arguments must be a string")?;
                    let _ = args;
                    open.push(
                        tc.get("id")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string(),
                    );
                }
            }
        }
    }
    if !open.is_empty() {
        return Err(format!("tool calls without results: {open:?}"));
    }
    Ok(())
}

async fn openai(State(inner): State<Arc<Inner>>, Json(body): Json<Value>) -> Response {
    if let Err(m) = check_openai(&body) {
        return openai_error(StatusCode::BAD_REQUEST, &m);
    }
    let r = match take(&inner, &body).await {
        Ok(r) => r,
        Err(m) => return openai_error(StatusCode::BAD_REQUEST, &m),
    };
    if let Some(resp) = rate_limited(
        &r,
        json!({"error": {"message": "Rate limit reached", "type": "rate_limit_error"}}),
    ) {
        log_effect("fake-llm openai 429");
        return resp;
    }
    log_effect("fake-llm openai request");
    let n = next_id(&inner);
    let calls: Vec<Value> = r
        .tool_calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            json!({"id": format!("call_{n}_{i}"), "type": "function",
            "function": {"name": c.name, "arguments": c.arguments.to_string()}})
        })
        .collect();
    let mut message = json!({"role": "assistant", "content": r.text});
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls.clone());
    }
    let u = r.usage.unwrap_or_default();
    Json(json!({
        "id": format!("chatcmpl-{n}"), "object": "chat.completion", "created": 1_700_000_000u64,
        "model": body.get("model").cloned().unwrap_or(Value::Null),
        "choices": [{"index": 0, "message": message, "logprobs": null,
                     "finish_reason": if calls.is_empty() { "stop" } else { "tool_calls" }}],
        "usage": {"prompt_tokens": u.input_tokens + u.cached_input_tokens, "completion_tokens": u.output_tokens,
                  "total_tokens": u.input_tokens + u.cached_input_tokens + u.output_tokens,
                  "prompt_tokens_details": {"cached_tokens": u.cached_input_tokens}}
    }))
    .into_response()
}

fn check_anthropic(
    headers: &HeaderMap,
    body: &Value,
) -> Result<(), (StatusCode, &'static str, String)> {
    if !headers.contains_key("x-api-key") {
        return Err((
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "x-api-key header is required".into(),
        ));
    }
    if !headers.contains_key("anthropic-version") {
        return Err((
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "anthropic-version: header is required".into(),
        ));
    }
    let bad = |m: String| (StatusCode::BAD_REQUEST, "invalid_request_error", m);
    body.get("model")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("model: Field required".into()))?;
    body.get("max_tokens")
        .and_then(Value::as_u64)
        .ok_or_else(|| bad("max_tokens: Field required".into()))?;
    let msgs = body
        .get("messages")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("messages: Field required".into()))?;
    let mut expect = "user";
    let mut pending: Vec<String> = Vec::new();
    for (i, m) in msgs.iter().enumerate() {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("");
        if role != expect {
            return Err(bad(format!(
                "messages.{i}: roles must alternate between \"user\" and \"assistant\""
            )));
        }
        let blocks: Vec<Value> = m
            .get("content")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if role == "user" {
            for b in &blocks {
                if b.get("type").and_then(Value::as_str) == Some("tool_result") {
                    let id = b
                        .get("tool_use_id")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string();
                    if !pending.contains(&id) {
                        return Err(bad(format!("messages.{i}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.")));
                    }
                    pending.retain(|x| x != &id);
                }
            }
            if !pending.is_empty() {
                return Err(bad(format!("messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {pending:?}")));
            }
            expect = "assistant";
        } else {
            pending = blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"))
                .map(|b| {
                    b.get("id")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string()
                })
                .collect();
            expect = "user";
        }
    }
    if expect != "assistant" {
        return Err(bad("the last message must be a user message".into()));
    }
    Ok(())
}

async fn anthropic(
    State(inner): State<Arc<Inner>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    if let Err((st, ty, m)) = check_anthropic(&headers, &body) {
        return anthropic_error(st, ty, &m);
    }
    let r = match take(&inner, &body).await {
        Ok(r) => r,
        Err(m) => return anthropic_error(StatusCode::BAD_REQUEST, "invalid_request_error", &m),
    };
    if let Some(resp) = rate_limited(
        &r,
        json!({"type": "error", "error": {"type": "rate_limit_error", "message": "Number of request tokens has exceeded your per-minute rate limit"}}),
    ) {
        log_effect("fake-llm anthropic 429");
        return resp;
    }
    log_effect("fake-llm anthropic request");
    let n = next_id(&inner);
    let mut content = Vec::new();
    if let Some(t) = &r.text {
        content.push(json!({"type": "text", "text": t}));
    }
    for (i, c) in r.tool_calls.iter().enumerate() {
        content.push(json!({"type": "tool_use", "id": format!("toolu_{n}_{i}"), "name": c.name, "input": c.arguments}));
    }
    let u = r.usage.unwrap_or_default();
    Json(json!({
        "id": format!("msg_{n}"), "type": "message", "role": "assistant",
        "model": body.get("model").cloned().unwrap_or(Value::Null),
        "content": content,
        "stop_reason": if r.tool_calls.is_empty() { "end_turn" } else { "tool_use" },
        "stop_sequence": null,
        "usage": {"input_tokens": u.input_tokens, "output_tokens": u.output_tokens,
                  "cache_read_input_tokens": u.cached_input_tokens, "cache_creation_input_tokens": 0}
    }))
    .into_response()
}
