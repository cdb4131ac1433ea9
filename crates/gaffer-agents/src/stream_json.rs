//! Claude Code's `--output-format stream-json` messages, decoded without IO.
//!
//! [`parse_stream_line`] turns one line into a [`StreamMessage`] carrying only what gaffer
//! acts on; the Claude backend's driver does nothing but act on these, so the fuzz
//! targets and property tests exercise the production parser. Claude adds fields and
//! message types over time: unknown ones are [`StreamMessage::Ignored`], and missing
//! optional fields take neutral values; only what would leave gaffer unable to follow
//! the conversation (no `type`, an assistant message without content, a control request
//! it could not answer) is an error.

use serde_json::Value;

use crate::types::Usage;
use crate::wire::{json_value, WireError};

/// One message Claude Code wrote.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamMessage {
    /// `system` / `init`: the session Claude runs (checked against the one gaffer assigned).
    Init {
        /// The session id it reports (absent or empty: not reported).
        session_id: Option<String>,
    },
    /// An assistant message's content blocks, in order.
    Assistant {
        /// The blocks.
        blocks: Vec<AssistantBlock>,
        /// The model call it came from, when the message says (`message.id` and
        /// `message.usage`).
        call: Option<ModelCall>,
    },
    /// A user message gaffer wrote, echoed (`isReplay`, with `--replay-user-messages`)
    /// when Claude takes it into the conversation.
    UserEcho,
    /// A user message: the tool results it carries back to the model.
    ToolResults {
        /// The results, in order.
        results: Vec<ToolResult>,
    },
    /// The end of a turn.
    Result(TurnEnd),
    /// Claude asks gaffer something (`can_use_tool`, hooks, MCP).
    ControlRequest {
        /// The id to answer with.
        request_id: String,
        /// What it asks.
        request: ControlRequest,
    },
    /// Claude withdrew a control request.
    ControlCancel {
        /// The withdrawn request's id.
        request_id: Option<String>,
    },
    /// Claude refused a control request gaffer sent.
    ControlError {
        /// Its message.
        message: String,
    },
    /// A `rate_limit_event`.
    RateLimit {
        /// `allowed`, `allowed_warning` or `rejected`.
        status: String,
        /// When the limit resets (unix seconds).
        resets_at: Option<u64>,
        /// Which limit (`five_hour`, ...).
        limit_type: Option<String>,
    },
    /// A message gaffer does not act on (`stream_event`, other `system` messages,
    /// successful control responses, types newer than gaffer).
    Ignored {
        /// Its `type` (and `subtype`, when it has one).
        kind: String,
    },
}

/// One call to the model, as an assistant message reports it. Claude Code writes one
/// message per content block of a model reply, each with the reply's id and its
/// usage so far (the same input counts, output growing): the call's usage is the
/// latest of its id, never their sum.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelCall {
    /// The reply's id (`message.id`).
    pub id: String,
    /// The model that answered (`message.model`), when given.
    pub model: Option<String>,
    /// Its tokens (cache writes counted as input); no cost (assistant messages
    /// carry none).
    pub usage: Usage,
}

/// A content block of an assistant message.
#[derive(Debug, Clone, PartialEq)]
pub enum AssistantBlock {
    /// Text.
    Text(String),
    /// A tool call.
    ToolUse {
        /// The call id.
        id: String,
        /// The tool.
        name: String,
        /// Its input (`null` when absent).
        input: Value,
    },
    /// Thinking, images and other blocks gaffer does not act on.
    Other,
}

/// A `tool_result` block of a user message.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    /// The call it answers.
    pub tool_use_id: String,
    /// Whether the tool failed.
    pub is_error: bool,
    /// Its output as text.
    pub output: String,
}

/// A `result` message.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnEnd {
    /// The session id it reports.
    pub session_id: Option<String>,
    /// `success`, `error_max_turns`, `error_during_execution`, ...
    pub subtype: String,
    /// Claude's own failure flag.
    pub is_error: bool,
    /// The final text, when Claude gives one.
    pub result: Option<String>,
    /// Tokens (cache writes counted as input) and cost.
    pub usage: Usage,
    /// The model API's refusal that ended the turn (`api_error_status`, and
    /// `api_error` or else `api_error_type`), when there was one.
    pub api_error: Option<crate::ProviderError>,
}

/// What a `control_request` asks.
#[derive(Debug, Clone, PartialEq)]
pub enum ControlRequest {
    /// May this tool run with this input?
    CanUseTool {
        /// The tool.
        tool_name: String,
        /// Its input (`null` when absent).
        input: Value,
        /// The tool call it is about (the same call may be asked about twice).
        tool_use_id: Option<String>,
        /// Why Claude asks (non-empty).
        decision_reason: Option<String>,
    },
    /// A hook gaffer registered at `initialize` fired (`hook_callback`).
    HookCallback {
        /// Which of gaffer's callbacks.
        callback_id: String,
        /// The hook's input (for `PostToolUse`: `tool_name`, `tool_input`,
        /// `tool_response`).
        input: Value,
    },
    /// Any other subtype: gaffer registers no MCP servers and refuses these.
    Other {
        /// The subtype.
        subtype: Option<String>,
    },
}

/// Parse one line of Claude Code's stream-json output.
pub fn parse_stream_line(line: &str) -> Result<StreamMessage, WireError> {
    let v = json_value(line)?;
    let Some(ty) = v.get("type").and_then(Value::as_str) else {
        return Err(WireError::shape("message has no string `type` field"));
    };
    let subtype = v.get("subtype").and_then(Value::as_str);
    Ok(match ty {
        "system" if subtype == Some("init") => StreamMessage::Init {
            session_id: non_empty(v.get("session_id")),
        },
        "assistant" => {
            let content = v
                .pointer("/message/content")
                .and_then(Value::as_array)
                .ok_or_else(|| WireError::shape("assistant message without message.content[]"))?;
            StreamMessage::Assistant {
                blocks: content.iter().map(assistant_block).collect(),
                call: model_call(&v),
            }
        }
        "user" if v.get("isReplay").and_then(Value::as_bool) == Some(true) => {
            StreamMessage::UserEcho
        }
        "user" => StreamMessage::ToolResults {
            results: v
                .pointer("/message/content")
                .and_then(Value::as_array)
                .map(|blocks| blocks.iter().filter_map(tool_result).collect())
                .unwrap_or_default(),
        },
        "result" => {
            let cost = v.get("total_cost_usd").and_then(Value::as_f64);
            StreamMessage::Result(TurnEnd {
                session_id: non_empty(v.get("session_id")),
                subtype: str_of(&v, "subtype"),
                is_error: v.get("is_error").and_then(Value::as_bool).unwrap_or(false),
                result: v.get("result").and_then(Value::as_str).map(str::to_string),
                usage: usage(v.get("usage").unwrap_or(&Value::Null), cost),
                api_error: v
                    .get("api_error_status")
                    .and_then(Value::as_u64)
                    .map(|status| crate::ProviderError {
                        status: u16::try_from(status).ok(),
                        // Claude Code's own classification (`usage_limit_reached`
                        // on a subscription's or gateway's unified limit) says more
                        // than the API's error type (`rate_limit_error`).
                        kind: non_empty(v.get("api_error"))
                            .or_else(|| non_empty(v.get("api_error_type"))),
                        retry_after_secs: None,
                    }),
            })
        }
        "control_request" => {
            let request_id = v
                .get("request_id")
                .and_then(Value::as_str)
                .ok_or_else(|| WireError::shape("control_request without request_id"))?
                .to_string();
            let req = v.get("request").unwrap_or(&Value::Null);
            let request = match req.get("subtype").and_then(Value::as_str) {
                Some("can_use_tool") => ControlRequest::CanUseTool {
                    tool_name: str_of(req, "tool_name"),
                    input: req.get("input").cloned().unwrap_or(Value::Null),
                    tool_use_id: req
                        .get("tool_use_id")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                    decision_reason: non_empty(req.get("decision_reason")),
                },
                Some("hook_callback") => ControlRequest::HookCallback {
                    callback_id: str_of(req, "callback_id"),
                    input: req.get("input").cloned().unwrap_or(Value::Null),
                },
                other => ControlRequest::Other {
                    subtype: other.map(str::to_string),
                },
            };
            StreamMessage::ControlRequest {
                request_id,
                request,
            }
        }
        "control_cancel_request" => StreamMessage::ControlCancel {
            request_id: v
                .get("request_id")
                .and_then(Value::as_str)
                .map(str::to_string),
        },
        "control_response"
            if v.pointer("/response/subtype").and_then(Value::as_str) == Some("error") =>
        {
            StreamMessage::ControlError {
                message: v
                    .pointer("/response/error")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
            }
        }
        "rate_limit_event" => {
            let info = v.get("rate_limit_info").unwrap_or(&Value::Null);
            StreamMessage::RateLimit {
                status: str_of(info, "status"),
                resets_at: info.get("resetsAt").and_then(Value::as_u64),
                limit_type: info
                    .get("rateLimitType")
                    .and_then(Value::as_str)
                    .map(str::to_string),
            }
        }
        other => StreamMessage::Ignored {
            kind: match subtype {
                Some(s) => format!("{other}/{s}"),
                None => other.to_string(),
            },
        },
    })
}

fn str_of(v: &Value, k: &str) -> String {
    v.get(k)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn non_empty(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

fn assistant_block(block: &Value) -> AssistantBlock {
    match block.get("type").and_then(Value::as_str) {
        Some("text") => AssistantBlock::Text(str_of(block, "text")),
        Some("tool_use") => AssistantBlock::ToolUse {
            id: str_of(block, "id"),
            name: str_of(block, "name"),
            input: block.get("input").cloned().unwrap_or(Value::Null),
        },
        _ => AssistantBlock::Other,
    }
}

fn tool_result(block: &Value) -> Option<ToolResult> {
    (block.get("type").and_then(Value::as_str) == Some("tool_result")).then(|| ToolResult {
        tool_use_id: str_of(block, "tool_use_id"),
        is_error: block
            .get("is_error")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        output: text_of(block.get("content").unwrap_or(&Value::Null)),
    })
}

/// A tool result's content (a string or text blocks) as text.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(a) => a
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The model call of an assistant message, when it names its id and usage.
fn model_call(v: &Value) -> Option<ModelCall> {
    let message = v.get("message")?;
    let id = non_empty(message.get("id"))?;
    let counts = message.get("usage").filter(|u| u.is_object())?;
    Some(ModelCall {
        id,
        model: non_empty(message.get("model")),
        usage: usage(counts, None),
    })
}

fn usage(v: &Value, cost: Option<f64>) -> Usage {
    let n = |k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
    Usage {
        // An agent reporting absurd counts must not overflow the sum.
        input_tokens: n("input_tokens").saturating_add(n("cache_creation_input_tokens")),
        output_tokens: n("output_tokens"),
        cached_input_tokens: n("cache_read_input_tokens"),
        cost_usd: cost,
    }
}
