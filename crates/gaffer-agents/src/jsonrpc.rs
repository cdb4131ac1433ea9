//! JSON-RPC 2.0 messages as `codex app-server` and ACP agents exchange them, one per
//! line: [`parse_rpc_line`] classifies what the agent wrote, [`RpcMessage::to_value`]
//! writes what gaffer sends. Both backends and their setup handshake use these two
//! functions, so what the fuzz targets and property tests exercise is the production code.

use serde_json::{json, Map, Value};

use crate::wire::{json_value, WireError};

/// How a JSON-RPC peer frames its messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// With `"jsonrpc": "2.0"` (ACP).
    Standard,
    /// Without it (`codex app-server`).
    Bare,
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    /// The error code (0 when the peer sent none).
    pub code: i64,
    /// The message (`(no message)` when the peer sent none).
    pub message: String,
}

/// One JSON-RPC message.
#[derive(Debug, Clone, PartialEq)]
pub enum RpcMessage {
    /// A call that expects a response with the same `id`.
    Request {
        /// The id (a number or a string).
        id: Value,
        /// The method.
        method: String,
        /// The params (`null` when absent).
        params: Value,
    },
    /// A call without an `id`: no response.
    Notification {
        /// The method.
        method: String,
        /// The params (`null` when absent).
        params: Value,
    },
    /// The answer to a request.
    Response {
        /// The request's id.
        id: Value,
        /// `result`, or `error`.
        outcome: Result<Value, RpcError>,
    },
}

impl RpcMessage {
    /// A request.
    pub fn request(id: impl Into<Value>, method: &str, params: Value) -> Self {
        RpcMessage::Request {
            id: id.into(),
            method: method.into(),
            params,
        }
    }

    /// A notification.
    pub fn notification(method: &str, params: Value) -> Self {
        RpcMessage::Notification {
            method: method.into(),
            params,
        }
    }

    /// A successful response.
    pub fn result(id: Value, result: Value) -> Self {
        RpcMessage::Response {
            id,
            outcome: Ok(result),
        }
    }

    /// An error response.
    pub fn error(id: Value, code: i64, message: impl Into<String>) -> Self {
        RpcMessage::Response {
            id,
            outcome: Err(RpcError {
                code,
                message: message.into(),
            }),
        }
    }

    /// The message as the JSON object sent on the wire (`params: null` is left out).
    pub fn to_value(&self, framing: Framing) -> Value {
        let mut m = Map::new();
        if framing == Framing::Standard {
            m.insert("jsonrpc".into(), json!("2.0"));
        }
        match self {
            RpcMessage::Request { id, method, params } => {
                m.insert("id".into(), id.clone());
                m.insert("method".into(), json!(method));
                if !params.is_null() {
                    m.insert("params".into(), params.clone());
                }
            }
            RpcMessage::Notification { method, params } => {
                m.insert("method".into(), json!(method));
                if !params.is_null() {
                    m.insert("params".into(), params.clone());
                }
            }
            RpcMessage::Response { id, outcome } => {
                m.insert("id".into(), id.clone());
                match outcome {
                    Ok(result) => m.insert("result".into(), result.clone()),
                    Err(e) => m.insert(
                        "error".into(),
                        json!({"code": e.code, "message": e.message}),
                    ),
                };
            }
        }
        Value::Object(m)
    }
}

/// Classify one line an agent wrote: a request (it has `method` and `id`), a
/// notification (`method`, no `id`) or a response (`id`, no `method`; `error` wins over
/// `result`). The `"jsonrpc"` header is not required (`codex app-server` omits it).
pub fn parse_rpc_line(line: &str) -> Result<RpcMessage, WireError> {
    let Value::Object(mut m) = json_value(line)? else {
        return Err(WireError::shape("a JSON-RPC message must be a JSON object"));
    };
    let params = m.remove("params").unwrap_or(Value::Null);
    let id = m.remove("id");
    let method = match m.remove("method") {
        None => None,
        Some(Value::String(s)) => Some(s),
        Some(other) => {
            return Err(WireError::shape(format!(
                "`method` must be a string, not {other}"
            )))
        }
    };
    Ok(match (method, id) {
        (Some(method), Some(id)) => RpcMessage::Request { id, method, params },
        (Some(method), None) => RpcMessage::Notification { method, params },
        (None, Some(id)) => RpcMessage::Response {
            id,
            outcome: match m.remove("error").filter(|e| !e.is_null()) {
                Some(e) => Err(rpc_error(&e)),
                None => Ok(m.remove("result").unwrap_or(Value::Null)),
            },
        },
        (None, None) => {
            return Err(WireError::shape(
                "neither a request, a response nor a notification (no `method` and no `id`)",
            ))
        }
    })
}

fn rpc_error(e: &Value) -> RpcError {
    match e {
        Value::String(s) => RpcError {
            code: 0,
            message: s.clone(),
        },
        _ => RpcError {
            code: e.get("code").and_then(Value::as_i64).unwrap_or(0),
            message: e
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("(no message)")
                .to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_kinds_are_told_apart_with_or_without_the_header() {
        assert_eq!(
            parse_rpc_line(
                r#"{"jsonrpc":"2.0","id":3,"method":"session/request_permission","params":{"a":1}}"#
            ),
            Ok(RpcMessage::request(
                3,
                "session/request_permission",
                json!({"a": 1})
            ))
        );
        assert_eq!(
            parse_rpc_line(r#"{"method":"turn/started"}"#),
            Ok(RpcMessage::notification("turn/started", Value::Null))
        );
        assert_eq!(
            parse_rpc_line(r#"{"id":"x","error":{"code":-32601,"message":"nope"},"result":1}"#),
            Ok(RpcMessage::error(json!("x"), -32601, "nope"))
        );
        assert_eq!(
            parse_rpc_line(r#"{"id":1}"#),
            Ok(RpcMessage::result(json!(1), Value::Null))
        );
    }

    #[test]
    fn what_is_not_a_message_says_why() {
        for (line, says) in [
            ("[1,2]", "must be a JSON object"),
            (r#"{"method":5,"id":1}"#, "`method` must be a string"),
            (r#"{"result":1}"#, "no `method` and no `id`"),
            ("{oops", "not JSON"),
        ] {
            let e = parse_rpc_line(line).unwrap_err().to_string();
            assert!(e.contains(says), "{line}: {e}");
        }
    }
}
