//! Hostile agent output: the patch parser, the line framing of agent stdout, Claude's
//! stream-json parser and the JSON-RPC parser of Codex and ACP get arbitrary input and
//! answer with a typed error naming the problem or a result, never a panic (bounded case
//! counts; the `fuzz/` targets run the same functions without a bound). Each backend's
//! driver reads its agent through exactly these functions, and the fake agents at the end
//! prove that malformed output mid-stream reaches the session as that error.

use std::sync::Arc;

use gaffer_agents::acp::{AcpBackend, AcpConfig};
use gaffer_agents::claude::{
    parse_stream_line, AssistantBlock, ClaudeBackend, ClaudeConfig, ControlRequest, StreamMessage,
    ToolResult, TurnEnd,
};
use gaffer_agents::codex::{CodexBackend, CodexConfig};
use gaffer_agents::jsonrpc::{parse_rpc_line, Framing, RpcMessage};
use gaffer_agents::patch::{apply_unified_diff, parse_patch};
use gaffer_agents::wire::{LineDecoder, WireError};
use gaffer_agents::{AgentBackend, AgentError, AllowAll, Mode, Usage};
use gaffer_testkit::bins::fake_bin;
use proptest::prelude::*;
use serde_json::{json, Value};

use super::support::{scenario, texts, turn, Env};

fn line() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("--- a/src/lib.rs".to_string()),
        Just("+++ b/src/lib.rs".to_string()),
        Just("--- /dev/null".to_string()),
        Just("\\ No newline at end of file".to_string()),
        "@@ -[0-9]{1,3}(,[0-9]{1,3})? \\+[0-9]{1,3}(,[0-9]{1,3})? @@",
        "[ +-][a-z {}();]{0,12}",
        ".{0,20}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn patch_parser_survives_any_text(text in ".{0,600}") {
        let _ = parse_patch(&text);
        let _ = apply_unified_diff("a\nb\nc\n", &text);
    }

    /// A diff that replaces any run of lines with any others, with the rest as context,
    /// turns the original into exactly the new text.
    #[test]
    fn a_replacement_diff_applies_to_exactly_the_new_text(
        original in proptest::collection::vec("[a-z ]{0,10}", 1..15),
        added in proptest::collection::vec("[A-Z ]{0,10}", 0..5),
        cut in any::<(usize, usize)>(),
    ) {
        let (a, b) = (cut.0 % (original.len() + 1), cut.1 % (original.len() + 1));
        let (from, to) = (a.min(b), a.max(b));
        let new: Vec<&str> = original[..from]
            .iter()
            .chain(&added)
            .chain(&original[to..])
            .map(String::as_str)
            .collect();
        prop_assume!(!new.is_empty());
        let mut diff = format!("--- a/f\n+++ b/f\n@@ -1,{} +1,{} @@\n", original.len(), new.len());
        for l in &original[..from] {
            diff.push_str(&format!(" {l}\n"));
        }
        for l in &original[from..to] {
            diff.push_str(&format!("-{l}\n"));
        }
        for l in &added {
            diff.push_str(&format!("+{l}\n"));
        }
        for l in &original[to..] {
            diff.push_str(&format!(" {l}\n"));
        }
        let text = |lines: &[&str]| lines.iter().map(|l| format!("{l}\n")).collect::<String>();
        let original_refs: Vec<&str> = original.iter().map(String::as_str).collect();
        prop_assert_eq!(apply_unified_diff(&text(&original_refs), &diff), Ok(text(&new)));
    }

    #[test]
    fn patch_parser_survives_patch_shaped_noise(lines in proptest::collection::vec(line(), 0..24), original in "[a-z\n]{0,60}") {
        let text = lines.join("\n");
        if let Ok(files) = parse_patch(&text) {
            for f in &files {
                // Every hunk line it accepted is one of the three kinds.
                for h in &f.hunks {
                    prop_assert!(h.lines.iter().all(|(k, _)| matches!(k, ' ' | '+' | '-')));
                }
            }
        }
        let _ = apply_unified_diff(&original, &text);
    }
}

/// JSON without floats (serde_json does not promise bit-exact float round trips).
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            proptest::collection::btree_map("[a-zA-Z_/]{0,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A message as Claude Code writes it, and what gaffer must read from it.
fn claude_message() -> impl Strategy<Value = (Value, StreamMessage)> {
    let text = ".{0,30}";
    prop_oneof![
        (text, "[a-z0-9-]{0,12}").prop_map(|(t, sid)| (
            json!({"type": "assistant", "session_id": sid, "message": {"role": "assistant",
                "content": [{"type": "text", "text": t}, {"type": "thinking", "thinking": "hm"}]}}),
            StreamMessage::Assistant {
                blocks: vec![AssistantBlock::Text(t), AssistantBlock::Other],
                call: None,
            },
        )),
        ("toolu_[a-z0-9]{1,8}", "[A-Z][a-z]{1,8}", json_value()).prop_map(|(id, name, input)| (
            json!({"type": "assistant", "message": {"content": [
                {"type": "tool_use", "id": id, "name": name, "input": input}]}}),
            StreamMessage::Assistant {
                blocks: vec![AssistantBlock::ToolUse { id, name, input }],
                call: None,
            },
        )),
        ("toolu_[a-z0-9]{1,8}", text, any::<bool>()).prop_map(|(id, out, is_error)| (
            json!({"type": "user", "message": {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": id, "is_error": is_error,
                 "content": [{"type": "text", "text": out}]}]}}),
            StreamMessage::ToolResults {
                results: vec![ToolResult {
                    tool_use_id: id,
                    is_error,
                    output: out
                }]
            },
        )),
        (
            "[a-z_]{1,16}",
            any::<bool>(),
            proptest::option::of(text),
            any::<u32>(),
            any::<u32>(),
            any::<u32>()
        )
            .prop_map(|(subtype, is_error, result, input, created, output)| (
                json!({"type": "result", "subtype": subtype, "is_error": is_error, "result": result,
                    "session_id": "s-1", "total_cost_usd": 0.5,
                    "usage": {"input_tokens": input, "cache_creation_input_tokens": created,
                              "output_tokens": output, "cache_read_input_tokens": 7}}),
                StreamMessage::Result(TurnEnd {
                    session_id: Some("s-1".into()),
                    subtype,
                    is_error,
                    result,
                    usage: Usage {
                        input_tokens: u64::from(input) + u64::from(created),
                        output_tokens: output.into(),
                        cached_input_tokens: 7,
                        cost_usd: Some(0.5),
                    },
                    api_error: None,
                }),
            )),
        (
            "req_[a-z0-9]{1,8}",
            "[A-Z][a-z]{1,8}",
            json_value(),
            proptest::option::of("toolu_[0-9]{1,4}")
        )
            .prop_map(|(request_id, tool_name, input, tool_use_id)| (
                json!({"type": "control_request", "request_id": request_id, "request": {
                    "subtype": "can_use_tool", "tool_name": tool_name, "input": input,
                    "tool_use_id": tool_use_id, "permission_suggestions": []}}),
                StreamMessage::ControlRequest {
                    request_id,
                    request: ControlRequest::CanUseTool {
                        tool_name,
                        input,
                        tool_use_id,
                        decision_reason: None
                    },
                },
            )),
        "[a-z_]{1,12}"
            .prop_filter("a type gaffer acts on", |t| !matches!(
                t.as_str(),
                "assistant"
                    | "user"
                    | "result"
                    | "control_request"
                    | "control_cancel_request"
                    | "rate_limit_event"
            ))
            .prop_map(|t| (
                json!({"type": t, "x": [1, 2]}),
                StreamMessage::Ignored { kind: t }
            )),
    ]
}

/// Serialized lines with varied line ends and blank lines between them.
fn stream_of(lines: &[String], ends: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        out.extend_from_slice(l.as_bytes());
        out.extend_from_slice(match ends.get(i).copied().unwrap_or(0) % 3 {
            0 => b"\n".as_slice(),
            1 => b"\r\n",
            _ => b"\n \n",
        });
    }
    out
}

/// Feed `bytes` to a decoder in chunks cut at `cuts` (positions modulo the length); every
/// line it gives, with its line number.
fn decode_in_chunks(
    bytes: &[u8],
    cuts: &[usize],
    limit: usize,
) -> Vec<(u64, Result<String, WireError>)> {
    let mut at: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    at.push(0);
    at.push(bytes.len());
    at.sort_unstable();
    let mut d = LineDecoder::with_limit(limit);
    let mut out = Vec::new();
    for w in at.windows(2) {
        d.feed(&bytes[w[0]..w[1]]);
        while let Some(l) = d.next_line() {
            out.push((d.line_no(), l.map_err(|b| b.error)));
        }
    }
    if let Some(l) = d.finish() {
        out.push((d.line_no(), l.map_err(|b| b.error)));
    }
    out
}

/// What the decoder must give, computed the obvious way on the whole input at once.
fn decode_reference(bytes: &[u8], limit: usize) -> Vec<(u64, Result<String, WireError>)> {
    let mut lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    if lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    let mut out = Vec::new();
    for (i, line) in lines.into_iter().enumerate() {
        let n = i as u64 + 1;
        if line.len() > limit {
            out.push((n, Err(WireError::TooLong { limit })));
            continue;
        }
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        match std::str::from_utf8(line) {
            Ok(s) if s.trim().is_empty() => {}
            Ok(s) => out.push((n, Ok(s.to_string()))),
            Err(e) => out.push((
                n,
                Err(WireError::NotUtf8 {
                    offset: e.valid_up_to(),
                }),
            )),
        }
    }
    out
}

fn rpc_message() -> impl Strategy<Value = RpcMessage> {
    let id = prop_oneof![
        any::<i64>().prop_map(Value::from),
        "[a-z0-9-]{0,10}".prop_map(Value::from)
    ];
    let params = prop_oneof![
        Just(Value::Null),
        json_value().prop_filter("not null", |v| !v.is_null())
    ];
    prop_oneof![
        (
            id.clone(),
            "[a-z]{1,8}(/[a-zA-Z_]{1,12}){0,2}",
            params.clone()
        )
            .prop_map(|(id, m, p)| RpcMessage::request(id, &m, p)),
        ("[a-z]{1,8}(/[a-zA-Z_]{1,12}){0,2}", params)
            .prop_map(|(m, p)| RpcMessage::notification(&m, p)),
        (id.clone(), json_value()).prop_map(|(id, r)| RpcMessage::result(id, r)),
        (id, any::<i64>(), ".{0,20}").prop_map(|(id, c, m)| RpcMessage::error(id, c, m)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn any_split_of_a_valid_claude_stream_gives_the_same_messages(
        msgs in proptest::collection::vec(claude_message(), 1..12),
        ends in proptest::collection::vec(any::<u8>(), 12),
        cuts in proptest::collection::vec(any::<usize>(), 0..20),
    ) {
        let lines: Vec<String> = msgs.iter().map(|(v, _)| v.to_string()).collect();
        let bytes = stream_of(&lines, &ends);
        let got: Vec<StreamMessage> = decode_in_chunks(&bytes, &cuts, 1 << 20)
            .into_iter()
            .map(|(_, l)| parse_stream_line(&l.unwrap()).unwrap())
            .collect();
        let want: Vec<StreamMessage> = msgs.into_iter().map(|(_, m)| m).collect();
        prop_assert_eq!(got, want);
    }

    #[test]
    fn any_bytes_in_any_chunks_decode_like_the_reference(
        bytes in proptest::collection::vec(prop_oneof![
            4 => any::<u8>(), 1 => Just(b'\n'), 1 => Just(b'\r'), 1 => Just(b' ')], 0..600),
        cuts in proptest::collection::vec(any::<usize>(), 0..30),
        limit in 1usize..80,
    ) {
        prop_assert_eq!(decode_in_chunks(&bytes, &cuts, limit), decode_reference(&bytes, limit));
    }

    #[test]
    fn a_jsonrpc_message_round_trips_in_both_framings(msg in rpc_message(), standard in any::<bool>()) {
        let framing = if standard { Framing::Standard } else { Framing::Bare };
        let line = msg.to_value(framing).to_string();
        prop_assert_eq!(line.contains("\"jsonrpc\":\"2.0\""), standard);
        prop_assert_eq!(parse_rpc_line(&line), Ok(msg));
    }

    #[test]
    fn any_text_gives_a_message_or_an_error_that_names_the_problem(text in ".{0,200}") {
        for e in [parse_stream_line(&text).err(), parse_rpc_line(&text).err()].into_iter().flatten() {
            let shown = e.to_string();
            prop_assert!(shown.starts_with("not JSON: ") || shown.contains('`') || shown.contains("JSON object"), "{}", shown);
        }
    }

    #[test]
    fn any_json_is_refused_only_for_what_the_protocol_requires(v in json_value()) {
        let line = v.to_string();
        if let Err(e) = parse_stream_line(&line) {
            let why = e.to_string();
            let ty = v.get("type").and_then(Value::as_str);
            let expected = match ty {
                None => "no string `type` field",
                Some("assistant") => "message.content[]",
                Some("control_request") => "request_id",
                Some(other) => return Err(TestCaseError::fail(format!("{other} refused: {why}"))),
            };
            prop_assert!(why.contains(expected), "{}: {}", line, why);
        }
        match parse_rpc_line(&line) {
            Ok(RpcMessage::Request { method, .. } | RpcMessage::Notification { method, .. }) => {
                prop_assert_eq!(v.get("method"), Some(&Value::from(method)));
            }
            Ok(RpcMessage::Response { id, .. }) => {
                prop_assert!(v.get("method").is_none());
                prop_assert_eq!(v.get("id"), Some(&id));
            }
            Err(e) => prop_assert!(
                !v.is_object()
                    || v.get("method").is_some_and(|m| !m.is_string())
                    || (v.get("method").is_none() && v.get("id").is_none()),
                "{} refused: {}", line, e
            ),
        }
    }
}

/// How each fake agent is started, for the tests that run all three.
fn backends() -> Vec<(&'static str, Box<dyn AgentBackend>)> {
    vec![
        (
            "claude",
            Box::new(ClaudeBackend::new(ClaudeConfig {
                bin: Some(fake_bin("fake-claude")),
                ..Default::default()
            })),
        ),
        (
            "codex",
            Box::new(CodexBackend::new(CodexConfig {
                bin: Some(fake_bin("fake-codex")),
                ..Default::default()
            })),
        ),
        (
            "fake-acp",
            Box::new(AcpBackend::new(AcpConfig::command(
                "fake-acp",
                fake_bin("fake-acp"),
                vec!["--acp".into()],
            ))),
        ),
    ]
}

/// Garbage bytes mid-stream: what came before is delivered, the bad line stops the turn
/// with an error naming the line and the problem, never a panic or a hang; blank lines
/// are not garbage.
#[tokio::test]
async fn garbage_mid_stream_ends_the_turn_with_an_error_naming_the_line() {
    let garbage: [(Value, &str); 3] = [
        (
            json!({"raw_bytes": b"\xff\xfe not utf-8\n".to_vec()}),
            "not UTF-8 (invalid byte at offset 0)",
        ),
        (json!({"raw": "\u{0}\u{1}binary"}), "not JSON"),
        (json!({"raw": "{\"half\": "}), "not JSON"),
    ];
    for (name, backend) in backends() {
        for (step, says) in &garbage {
            let env = Env::new(&scenario(json!({"turns": [{"steps": [
                {"say": "before"},
                {"raw_bytes": b"\n\n".to_vec()},
                step,
                {"say": "never delivered"}
            ]}]})));
            let mut s = backend
                .start(env.opts(Mode::ReadWrite), Arc::new(AllowAll))
                .await
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let (events, r) = turn(s.as_mut(), "go").await;
            assert_eq!(texts(&events), vec!["before".to_string()], "{name} {step}");
            match r {
                Err(e @ AgentError::MalformedOutput { .. }) => {
                    let shown = e.to_string();
                    assert!(shown.contains(says), "{name} {step}: {shown}");
                    assert!(shown.contains("malformed line"), "{name} {step}: {shown}");
                }
                other => panic!("{name} {step}: expected MalformedOutput, got {other:?}"),
            }
        }
    }
}

/// A message that reaches gaffer in several pieces (the agent flushed mid-line) is read
/// whole, through the same decoder.
#[tokio::test]
async fn a_message_split_across_writes_is_read_whole() {
    let line = json!({"type": "assistant", "message": {"role": "assistant",
        "content": [{"type": "text", "text": "split ✓ in two"}]}})
    .to_string();
    let (a, b) = line.as_bytes().split_at(line.find('✓').unwrap() + 1);
    let env = Env::new(&scenario(json!({"turns": [{"steps": [
        {"raw_bytes": a.to_vec()},
        {"sleep_ms": 50},
        {"raw_bytes": ([b, b"\n"].concat())},
        {"say": "after"}
    ]}]})));
    let (_, claude) = backends().remove(0);
    let mut s = claude
        .start(env.opts(Mode::ReadWrite), Arc::new(AllowAll))
        .await
        .unwrap();
    let (events, r) = turn(s.as_mut(), "go").await;
    r.unwrap();
    assert_eq!(
        texts(&events),
        vec!["split ✓ in two".to_string(), "after".to_string()]
    );
}

/// Claude Code 2.1's `result` when the model API refused the turn, as the real CLI
/// printed it against a scripted server answering 429: the status and kind are kept.
#[test]
fn a_results_api_error_is_read() {
    let line = r#"{"type":"result","subtype":"success","is_error":true,"num_turns":1,"api_error_status":429,"api_error_type":"rate_limit_error","result":"API Error: Request rejected (429) · scripted error","terminal_reason":"api_error","total_cost_usd":0,"usage":{"input_tokens":0,"output_tokens":0}}"#;
    let StreamMessage::Result(end) = parse_stream_line(line).unwrap() else {
        panic!("not a result");
    };
    assert!(end.is_error);
    let error = end.api_error.unwrap();
    assert_eq!(error.status, Some(429));
    assert_eq!(error.kind.as_deref(), Some("rate_limit_error"));
    let ok = r#"{"type":"result","subtype":"success","is_error":false,"result":"done","usage":{}}"#;
    let StreamMessage::Result(end) = parse_stream_line(ok).unwrap() else {
        panic!("not a result");
    };
    assert_eq!(end.api_error, None);
}

/// Claude Code 2.1.332's `result` when the API refused with the unified rate-limit
/// headers (`anthropic-ratelimit-unified-status: rejected`, a subscription or Claude
/// gateway login): its own classification `api_error: "usage_limit_reached"` is the
/// kind, not the API's generic `rate_limit_error`, so a usage limit is told apart from a
/// plain 429.
#[test]
fn a_results_usage_limit_classification_is_the_kind() {
    let line = r#"{"type":"result","subtype":"success","is_error":true,"num_turns":1,"api_error_status":429,"api_error_type":"rate_limit_error","api_error":"usage_limit_reached","result":"You've hit your 5-hour limit · resets 2:14pm (UTC)","terminal_reason":"api_error","total_cost_usd":0,"usage":{"input_tokens":0,"output_tokens":0}}"#;
    let StreamMessage::Result(end) = parse_stream_line(line).unwrap() else {
        panic!("not a result");
    };
    let error = end.api_error.unwrap();
    assert_eq!(error.status, Some(429));
    assert_eq!(error.kind.as_deref(), Some("usage_limit_reached"));
}
