//! Minimal clients for OpenAI-compatible Chat Completions (OpenAI, Ollama, vLLM,
//! llama.cpp server, OpenRouter) and Anthropic Messages, with tool calling.

use std::time::Duration;

use serde_json::{json, Value};

use crate::accounting::Pricing;
use crate::error::AgentError;
use crate::ratelimit::parse_retry_after;
use crate::redact::Redactor;
use crate::tools::ToolSpec;
use crate::types::Usage;

/// Which wire API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiKind {
    /// `POST {base}/chat/completions` (base usually ends in `/v1`).
    OpenAiChat,
    /// `POST {base}/v1/messages`.
    AnthropicMessages,
}

/// One provider + model.
#[derive(Debug, Clone)]
pub struct ProviderConfig {
    /// Wire API.
    pub api: ApiKind,
    /// Provider name for limits and accounting (`openai`, `anthropic`, `ollama`, ...).
    pub name: String,
    /// Base URL.
    pub base_url: String,
    /// API key (never logged).
    pub api_key: Option<String>,
    /// Model.
    pub model: String,
    /// `max_tokens` for each request.
    pub max_tokens: u32,
    /// Prices, for cost per turn.
    pub pricing: Option<Pricing>,
    /// Request timeout.
    pub timeout: Duration,
}

impl ProviderConfig {
    /// OpenAI-compatible from `OPENAI_BASE_URL` (default `https://api.openai.com/v1`) and
    /// `OPENAI_API_KEY`.
    pub fn openai_from_env(model: impl Into<String>) -> Self {
        ProviderConfig {
            api: ApiKind::OpenAiChat,
            name: "openai".into(),
            base_url: std::env::var("OPENAI_BASE_URL")
                .unwrap_or_else(|_| "https://api.openai.com/v1".into()),
            api_key: std::env::var("OPENAI_API_KEY").ok(),
            model: model.into(),
            max_tokens: 4096,
            pricing: None,
            timeout: Duration::from_secs(300),
        }
    }
    /// Anthropic from `ANTHROPIC_BASE_URL` (default `https://api.anthropic.com`) and
    /// `ANTHROPIC_API_KEY`.
    pub fn anthropic_from_env(model: impl Into<String>) -> Self {
        ProviderConfig {
            api: ApiKind::AnthropicMessages,
            name: "anthropic".into(),
            base_url: std::env::var("ANTHROPIC_BASE_URL")
                .unwrap_or_else(|_| "https://api.anthropic.com".into()),
            api_key: std::env::var("ANTHROPIC_API_KEY").ok(),
            model: model.into(),
            max_tokens: 4096,
            pricing: None,
            timeout: Duration::from_secs(300),
        }
    }
}

/// A tool call made by the model.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Call {
    /// Call id.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Arguments (`Value::String` holding the raw text when it was not valid JSON).
    pub arguments: Value,
}

/// A tool result sent back.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ToolRes {
    /// Call id.
    pub call_id: String,
    /// Observation.
    pub content: String,
    /// Failed.
    pub is_error: bool,
}

/// Provider-neutral conversation message.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Msg {
    /// User text.
    User {
        /// Text.
        text: String,
    },
    /// Model reply.
    Assistant {
        /// Text.
        text: Option<String>,
        /// Tool calls.
        calls: Vec<Call>,
    },
    /// Tool results.
    Tools {
        /// Results.
        results: Vec<ToolRes>,
    },
}

/// One model reply.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// Text.
    pub text: Option<String>,
    /// Tool calls.
    pub calls: Vec<Call>,
    /// Usage.
    pub usage: Usage,
}

/// Why a call failed.
#[derive(Debug)]
pub enum CallError {
    /// HTTP 429 (with the server's `Retry-After`, if any). Retried with backoff.
    RateLimited(Option<Duration>),
    /// Anything else. Not retried.
    Other(AgentError),
}

/// HTTP client of one provider.
#[derive(Debug, Clone)]
pub struct LlmClient {
    http: reqwest::Client,
    cfg: ProviderConfig,
    redactor: std::sync::Arc<Redactor>,
}

impl LlmClient {
    /// A client. The API key is added to the redactor.
    pub fn new(cfg: ProviderConfig, redactor: &Redactor) -> Result<Self, AgentError> {
        let http = reqwest::Client::builder()
            .timeout(cfg.timeout)
            .build()
            .map_err(|e| AgentError::Http {
                provider: cfg.name.clone(),
                message: e.to_string(),
            })?;
        let mut r = redactor.clone();
        if let Some(k) = &cfg.api_key {
            r.add_secret(k.clone());
        }
        Ok(LlmClient {
            http,
            cfg,
            redactor: std::sync::Arc::new(r),
        })
    }

    /// The provider config.
    pub fn config(&self) -> &ProviderConfig {
        &self.cfg
    }

    fn err(&self, m: impl std::fmt::Display) -> CallError {
        CallError::Other(AgentError::Http {
            provider: self.cfg.name.clone(),
            message: self.redactor.redact(&m.to_string()),
        })
    }

    /// One completion.
    pub async fn complete(
        &self,
        system: &str,
        msgs: &[Msg],
        tools: &[ToolSpec],
    ) -> Result<Reply, CallError> {
        let base = self.cfg.base_url.trim_end_matches('/');
        let (url, body) = match self.cfg.api {
            ApiKind::OpenAiChat => (
                format!("{base}/chat/completions"),
                openai_body(&self.cfg, system, msgs, tools),
            ),
            ApiKind::AnthropicMessages => (
                format!("{base}/v1/messages"),
                anthropic_body(&self.cfg, system, msgs, tools),
            ),
        };
        let mut req = self.http.post(&url).json(&body);
        match self.cfg.api {
            ApiKind::OpenAiChat => {
                if let Some(k) = &self.cfg.api_key {
                    req = req.bearer_auth(k);
                }
            }
            ApiKind::AnthropicMessages => {
                req = req.header("anthropic-version", "2023-06-01");
                if let Some(k) = &self.cfg.api_key {
                    req = req.header("x-api-key", k);
                }
            }
        }
        let resp = req.send().await.map_err(|e| self.err(e))?;
        let status = resp.status();
        if status.as_u16() == 429 {
            let ra = resp
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(parse_retry_after);
            return Err(CallError::RateLimited(ra));
        }
        let text = resp.text().await.map_err(|e| self.err(e))?;
        if !status.is_success() {
            let snippet: String = text.chars().take(500).collect();
            return Err(self.err(format!("HTTP {status}: {snippet}")));
        }
        let v: Value = serde_json::from_str(&text)
            .map_err(|e| self.err(format!("response is not JSON: {e}")))?;
        let mut reply = match self.cfg.api {
            ApiKind::OpenAiChat => parse_openai(&v),
            ApiKind::AnthropicMessages => parse_anthropic(&v),
        }
        .map_err(|m| self.err(m))?;
        if let Some(p) = &self.cfg.pricing {
            reply.usage.cost_usd = Some(p.cost(&reply.usage));
        }
        Ok(reply)
    }
}

fn openai_body(cfg: &ProviderConfig, system: &str, msgs: &[Msg], tools: &[ToolSpec]) -> Value {
    let mut m = vec![json!({"role": "system", "content": system})];
    for msg in msgs {
        match msg {
            Msg::User { text } => m.push(json!({"role": "user", "content": text})),
            Msg::Assistant { text, calls } => {
                let mut a = json!({"role": "assistant", "content": text});
                if !calls.is_empty() {
                    a["tool_calls"] = Value::Array(
                        calls
                            .iter()
                            .map(|c| json!({"id": c.id, "type": "function", "function": {
                                "name": c.name,
                                "arguments": match &c.arguments { Value::String(s) => s.clone(), v => v.to_string() }}}))
                            .collect(),
                    );
                }
                m.push(a);
            }
            Msg::Tools { results } => {
                for r in results {
                    m.push(
                        json!({"role": "tool", "tool_call_id": r.call_id, "content": r.content}),
                    );
                }
            }
        }
    }
    json!({
        "model": cfg.model,
        "messages": m,
        "max_tokens": cfg.max_tokens,
        "tools": tools.iter().map(|t| json!({"type": "function", "function": {
            "name": t.name, "description": t.description, "parameters": t.parameters}})).collect::<Vec<_>>(),
    })
}

fn anthropic_body(cfg: &ProviderConfig, system: &str, msgs: &[Msg], tools: &[ToolSpec]) -> Value {
    let mut m = Vec::new();
    for msg in msgs {
        match msg {
            Msg::User { text } => m.push(json!({"role": "user", "content": text})),
            Msg::Assistant { text, calls } => {
                let mut blocks = Vec::new();
                if let Some(t) = text.as_ref().filter(|t| !t.is_empty()) {
                    blocks.push(json!({"type": "text", "text": t}));
                }
                for c in calls {
                    let input = if c.arguments.is_object() { c.arguments.clone() } else { json!({}) };
                    blocks.push(json!({"type": "tool_use", "id": c.id, "name": c.name, "input": input}));
                }
                m.push(json!({"role": "assistant", "content": blocks}));
            }
            Msg::Tools { results } => m.push(json!({"role": "user", "content": results.iter().map(|r| json!({
                "type": "tool_result", "tool_use_id": r.call_id, "content": r.content, "is_error": r.is_error})).collect::<Vec<_>>()})),
        }
    }
    json!({
        "model": cfg.model,
        "max_tokens": cfg.max_tokens,
        "system": system,
        "messages": m,
        "tools": tools.iter().map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters})).collect::<Vec<_>>(),
    })
}

fn n(v: &Value, p: &str) -> u64 {
    v.pointer(p).and_then(Value::as_u64).unwrap_or(0)
}

fn parse_openai(v: &Value) -> Result<Reply, String> {
    let msg = v
        .pointer("/choices/0/message")
        .ok_or("response has no choices[0].message")?;
    let text = msg
        .get("content")
        .and_then(Value::as_str)
        .map(str::to_string);
    let mut calls = Vec::new();
    if let Some(tcs) = msg.get("tool_calls").and_then(Value::as_array) {
        for tc in tcs {
            let id = tc
                .get("id")
                .and_then(Value::as_str)
                .ok_or("tool call without id")?;
            let name = tc
                .pointer("/function/name")
                .and_then(Value::as_str)
                .ok_or("tool call without function.name")?;
            let raw = tc
                .pointer("/function/arguments")
                .and_then(Value::as_str)
                .unwrap_or("{}");
            let arguments =
                serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_string()));
            calls.push(Call {
                id: id.into(),
                name: name.into(),
                arguments,
            });
        }
    }
    let prompt = n(v, "/usage/prompt_tokens");
    let cached = n(v, "/usage/prompt_tokens_details/cached_tokens");
    Ok(Reply {
        text,
        calls,
        usage: Usage {
            input_tokens: prompt.saturating_sub(cached),
            output_tokens: n(v, "/usage/completion_tokens"),
            cached_input_tokens: cached,
            cost_usd: None,
        },
    })
}

fn parse_anthropic(v: &Value) -> Result<Reply, String> {
    let content = v
        .get("content")
        .and_then(Value::as_array)
        .ok_or("response has no content[]")?;
    let mut text = String::new();
    let mut calls = Vec::new();
    for b in content {
        match b.get("type").and_then(Value::as_str) {
            Some("text") => text.push_str(b.get("text").and_then(Value::as_str).unwrap_or("")),
            Some("tool_use") => calls.push(Call {
                id: b
                    .get("id")
                    .and_then(Value::as_str)
                    .ok_or("tool_use without id")?
                    .into(),
                name: b
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or("tool_use without name")?
                    .into(),
                arguments: b.get("input").cloned().unwrap_or(json!({})),
            }),
            _ => {}
        }
    }
    Ok(Reply {
        text: (!text.is_empty()).then_some(text),
        calls,
        usage: Usage {
            input_tokens: n(v, "/usage/input_tokens") + n(v, "/usage/cache_creation_input_tokens"),
            output_tokens: n(v, "/usage/output_tokens"),
            cached_input_tokens: n(v, "/usage/cache_read_input_tokens"),
            cost_usd: None,
        },
    })
}
