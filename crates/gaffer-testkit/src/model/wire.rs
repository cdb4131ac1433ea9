//! The providers' wire shapes the scripted model server answers in: each API's error
//! body, and a reply as Anthropic Messages, OpenAI Responses and Gemini events and
//! objects (streamed as SSE or whole).

use std::convert::Infallible;

use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use super::Api;
use crate::scenario::FakeUsage;

pub(super) fn error(api: Api, status: StatusCode, msg: &str) -> Response {
    let body = match api {
        Api::Anthropic | Api::CountTokens => {
            let (ty, msg) = match status.as_u16() {
                401 => ("authentication_error", msg),
                404 => ("not_found_error", msg),
                429 => ("rate_limit_error", msg),
                // The API's own word for 529.
                529 => ("overloaded_error", "Overloaded"),
                s if s >= 500 => ("api_error", msg),
                _ => ("invalid_request_error", msg),
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

/// One scripted reply, ready to encode.
pub(super) struct Reply {
    pub(super) n: u64,
    pub(super) model: String,
    pub(super) text: String,
    pub(super) calls: Vec<(String, Value)>,
    pub(super) usage: FakeUsage,
}

/// An SSE response: `event:` (when named) and `data:` lines, streamed event by event.
pub(super) fn sse(events: Vec<(Option<&'static str>, Value)>) -> Response {
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
pub(super) fn pieces(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let size = (chars.len() / 3).max(1);
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

pub(super) fn arguments_text(args: &Value) -> String {
    match args {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

// ---- Anthropic Messages ----

pub(super) fn anthropic_usage(u: &FakeUsage) -> Value {
    json!({"input_tokens": u.input_tokens, "output_tokens": u.output_tokens,
           "cache_read_input_tokens": u.cached_input_tokens, "cache_creation_input_tokens": 0})
}

pub(super) fn anthropic_blocks(r: &Reply) -> Vec<Value> {
    let mut blocks = Vec::new();
    if !r.text.is_empty() {
        blocks.push(json!({"type": "text", "text": r.text}));
    }
    for (i, (name, args)) in r.calls.iter().enumerate() {
        blocks.push(json!({"type": "tool_use", "id": format!("toolu_{:02}{:022}", i, r.n), "name": name, "input": args}));
    }
    blocks
}

pub(super) fn anthropic_stop(r: &Reply) -> &'static str {
    if r.calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    }
}

pub(super) fn anthropic_message(r: &Reply) -> Value {
    json!({
        "id": format!("msg_{:024}", r.n), "type": "message", "role": "assistant", "model": r.model,
        "content": anthropic_blocks(r), "stop_reason": anthropic_stop(r), "stop_sequence": null,
        "usage": anthropic_usage(&r.usage),
    })
}

pub(super) fn anthropic_events(r: &Reply) -> Vec<(Option<&'static str>, Value)> {
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

pub(super) fn responses_items(r: &Reply) -> Vec<Value> {
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

pub(super) fn responses_object(r: &Reply) -> Value {
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

pub(super) fn responses_events(r: &Reply) -> Vec<(Option<&'static str>, Value)> {
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

pub(super) fn gemini_response(r: &Reply) -> Value {
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
