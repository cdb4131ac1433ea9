//! `fake-acp`: an Agent Client Protocol agent (JSON-RPC 2.0 over stdio). Sessions are
//! kept under `$GAFFER_FAKE_STATE_DIR/acp/<sessionId>.jsonl`; `loadSession` is advertised
//! when the scenario says so. Refuses messages without `"jsonrpc": "2.0"`, requests before
//! `initialize`, relative `cwd`, unknown sessions and permission outcomes that do not name
//! an offered option.

use serde_json::{json, Value};

use super::{exit_now, fail, Io};
use crate::scenario::{do_write, log_effect, state_dir, Scenario, Step};

fn append(path: &std::path::Path, v: &Value) {
    let _ = crate::scenario::append_line(path, &v.to_string());
}

fn reply(io: &mut Io, id: &Value, result: Value) {
    io.send(&json!({"jsonrpc": "2.0", "id": id, "result": result}));
}

fn error(io: &mut Io, id: &Value, code: i64, message: &str) {
    io.send(&json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}));
}

fn update(io: &mut Io, session: &str, u: Value) {
    io.send(&json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session, "update": u}}));
}

/// Entry point of `fake-acp`.
pub fn main() {
    let scenario = Scenario::from_env().unwrap_or_else(|e| fail(&e.to_string()));
    log_effect(&format!(
        "fake-acp spawn role={} task={} project={} args={:?}",
        std::env::var("GAFFER_ROLE").unwrap_or_default(),
        std::env::var("GAFFER_TASK_ID").unwrap_or_default(),
        std::env::var("GAFFER_PROJECT").unwrap_or_default(),
        std::env::args().skip(1).collect::<Vec<_>>()
    ));
    super::log_env_names("fake-acp");
    let dir = state_dir().join("acp");
    let _ = std::fs::create_dir_all(&dir);
    let mut io = Io::new();
    let mut initialized = false;
    let mut session: Option<(String, std::path::PathBuf, usize)> = None;
    let mut req_id = 0i64;
    let mut tool_seq = 0u64;
    while let Some(msg) = io.read() {
        if msg.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            fail("fake-acp: message without \"jsonrpc\": \"2.0\"");
        }
        let method = msg
            .get("method")
            .and_then(Value::as_str)
            .map(str::to_string);
        let Some(method) = method else { continue };
        let Some(id) = msg.get("id").cloned() else {
            continue;
        }; // notifications (session/cancel outside a turn)
        let params = msg.get("params").cloned().unwrap_or(Value::Null);
        if method != "initialize" && !initialized {
            error(
                &mut io,
                &id,
                -32000,
                "Not initialized: call initialize first",
            );
            continue;
        }
        match method.as_str() {
            "initialize" => {
                if params
                    .get("protocolVersion")
                    .and_then(Value::as_u64)
                    .is_none()
                {
                    error(
                        &mut io,
                        &id,
                        -32602,
                        "Invalid params: protocolVersion must be an integer",
                    );
                    continue;
                }
                initialized = true;
                reply(
                    &mut io,
                    &id,
                    json!({"protocolVersion": 1, "agentCapabilities": {
                    "loadSession": scenario.load_session,
                    "promptCapabilities": {"image": false, "audio": false, "embeddedContext": false}},
                    "authMethods": []}),
                );
            }
            "session/new" | "session/load" => {
                let cwd = params.get("cwd").and_then(Value::as_str).unwrap_or("");
                if !std::path::Path::new(cwd).is_absolute() {
                    error(
                        &mut io,
                        &id,
                        -32602,
                        "Invalid params: cwd must be an absolute path",
                    );
                    continue;
                }
                if !params.get("mcpServers").is_some_and(Value::is_array) {
                    error(
                        &mut io,
                        &id,
                        -32602,
                        "Invalid params: missing field `mcpServers`",
                    );
                    continue;
                }
                if method == "session/load" {
                    if !scenario.load_session {
                        error(&mut io, &id, -32601, "Method not found: session/load");
                        continue;
                    }
                    let sid = params
                        .get("sessionId")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string();
                    let path = dir.join(format!("{sid}.jsonl"));
                    let Ok(hist) = std::fs::read_to_string(&path) else {
                        error(
                            &mut io,
                            &id,
                            -32002,
                            &format!("Resource not found: session {sid}"),
                        );
                        continue;
                    };
                    let mut played = 0;
                    for l in hist.lines() {
                        let Ok(h) = serde_json::from_str::<Value>(l) else {
                            continue;
                        };
                        if let Some(p) = h.get("prompt").and_then(Value::as_str) {
                            played += 1;
                            update(
                                &mut io,
                                &sid,
                                json!({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": p}}),
                            );
                        }
                    }
                    log_effect(&format!("fake-acp session/load {sid}"));
                    reply(&mut io, &id, Value::Null);
                    session = Some((sid, path, played));
                } else {
                    let sid = format!("sess_{}", uuid::Uuid::new_v4().simple());
                    let path = dir.join(format!("{sid}.jsonl"));
                    append(&path, &json!({"session": sid, "cwd": cwd}));
                    log_effect(&format!("fake-acp session/new {sid}"));
                    reply(&mut io, &id, json!({"sessionId": sid}));
                    session = Some((sid, path, 0));
                }
            }
            "session/prompt" => {
                let Some((sid, path, played)) = session.clone() else {
                    error(&mut io, &id, -32002, "Resource not found: no session");
                    continue;
                };
                if params.get("sessionId").and_then(Value::as_str) != Some(sid.as_str()) {
                    error(
                        &mut io,
                        &id,
                        -32002,
                        "Resource not found: unknown sessionId",
                    );
                    continue;
                }
                let Some(prompt) = params.get("prompt").and_then(Value::as_array) else {
                    error(
                        &mut io,
                        &id,
                        -32602,
                        "Invalid params: prompt must be an array of content blocks",
                    );
                    continue;
                };
                let text: String = prompt
                    .iter()
                    .filter_map(|b| b.get("text").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("\n");
                let turn = scenario.turn(played);
                if let Some(e) = &turn.expect_prompt_contains {
                    if !text.contains(e.as_str()) {
                        fail(&format!(
                            "fake-acp: prompt does not contain {e:?}: {text:?}"
                        ));
                    }
                }
                session = Some((sid.clone(), path.clone(), played + 1));
                append(&path, &json!({"prompt": text}));
                log_effect(&format!("fake-acp turn {}", played + 1));
                let mut stop = "end_turn";
                'steps: for step in &turn.steps {
                    match step {
                        Step::Say(t) => update(
                            &mut io,
                            &sid,
                            json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": t}}),
                        ),
                        Step::Tool(ts) => {
                            tool_seq += 1;
                            let tcid = format!("call_{tool_seq}");
                            let kind = if ts.write.is_some() {
                                "edit"
                            } else {
                                "execute"
                            };
                            let tc = json!({"toolCallId": tcid, "title": ts.name, "kind": kind, "status": "pending", "rawInput": ts.input});
                            update(
                                &mut io,
                                &sid,
                                json!({"sessionUpdate": "tool_call", "toolCallId": tcid, "title": ts.name, "kind": kind,
                                "status": "pending", "rawInput": ts.input, "content": [], "locations": []}),
                            );
                            let mut allowed = true;
                            if ts.permission {
                                let options = json!([
                                    {"optionId": "allow-once", "name": "Allow", "kind": "allow_once"},
                                    {"optionId": "allow-always", "name": "Always allow", "kind": "allow_always"},
                                    {"optionId": "reject-once", "name": "Reject", "kind": "reject_once"}]);
                                let n = if ts.repeat_request { 2 } else { 1 };
                                let mut ids = Vec::new();
                                for _ in 0..n {
                                    req_id += 1;
                                    ids.push(req_id);
                                    io.send(&json!({"jsonrpc": "2.0", "id": req_id, "method": "session/request_permission",
                                        "params": {"sessionId": sid, "toolCall": tc, "options": options}}));
                                }
                                let mut answers = Vec::new();
                                let mut cancelled = false;
                                while answers.len() < ids.len() {
                                    let Some(m) = io.read_wire() else {
                                        std::process::exit(0)
                                    };
                                    if m.get("method").and_then(Value::as_str)
                                        == Some("session/cancel")
                                    {
                                        cancelled = true;
                                        continue;
                                    }
                                    if m.get("method").is_some() {
                                        io.queue.push_back(m);
                                        continue;
                                    }
                                    let rid = m.get("id").and_then(Value::as_i64).unwrap_or(-1);
                                    if !ids.contains(&rid) {
                                        fail(&format!(
                                            "fake-acp: response to unknown request {rid}"
                                        ));
                                    }
                                    let o = m
                                        .pointer("/result/outcome")
                                        .cloned()
                                        .unwrap_or(Value::Null);
                                    match o.get("outcome").and_then(Value::as_str) {
                                        Some("selected") => {
                                            let opt = o
                                                .get("optionId")
                                                .and_then(Value::as_str)
                                                .unwrap_or("");
                                            if !["allow-once", "allow-always", "reject-once"]
                                                .contains(&opt)
                                            {
                                                fail(&format!(
                                                    "fake-acp: optionId {opt:?} was not offered"
                                                ));
                                            }
                                            answers.push(opt.starts_with("allow"));
                                        }
                                        Some("cancelled") => {
                                            cancelled = true;
                                            answers.push(false);
                                        }
                                        _ => {
                                            fail("fake-acp: outcome must be selected or cancelled")
                                        }
                                    }
                                }
                                if cancelled {
                                    stop = "cancelled";
                                    break 'steps;
                                }
                                if answers.windows(2).any(|w| w[0] != w[1]) {
                                    fail("fake-acp: inconsistent answers");
                                }
                                allowed = answers[0];
                            }
                            if allowed {
                                let mut content = vec![
                                    json!({"type": "content", "content": {"type": "text", "text": ts.output.clone().unwrap_or_else(|| "ok".into())}}),
                                ];
                                if let Some(w) = &ts.write {
                                    if let Err(e) = do_write("fake-acp", w) {
                                        fail(&e.to_string());
                                    }
                                    content.push(json!({"type": "diff", "path": w.path, "oldText": null, "newText": w.content}));
                                } else {
                                    log_effect(&format!("fake-acp exec {} {}", ts.name, ts.input));
                                }
                                update(
                                    &mut io,
                                    &sid,
                                    json!({"sessionUpdate": "tool_call_update", "toolCallId": tcid, "status": "completed", "content": content}),
                                );
                            } else {
                                update(
                                    &mut io,
                                    &sid,
                                    json!({"sessionUpdate": "tool_call_update", "toolCallId": tcid, "status": "failed",
                                    "content": [{"type": "content", "content": {"type": "text", "text": "rejected by the user"}}]}),
                                );
                            }
                        }
                        Step::WriteFile(w) => {
                            if let Err(e) = do_write("fake-acp", w) {
                                fail(&e.to_string());
                            }
                        }
                        Step::RateLimit { .. } => {}
                        Step::Raw(l) => {
                            io.send_raw_unflushed(l);
                            io.flush();
                        }
                        Step::RawBytes(b) => io.send_bytes(b),
                        Step::Exit(c) => exit_now(&mut io, *c),
                        Step::SleepMs(ms) => {
                            std::thread::sleep(std::time::Duration::from_millis(*ms))
                        }
                        Step::AwaitMessage => loop {
                            let Some(m) = io.read_wire() else {
                                std::process::exit(0)
                            };
                            if m.get("method").and_then(Value::as_str) == Some("session/cancel") {
                                log_effect("fake-acp cancelled for a message");
                                stop = "cancelled";
                                break 'steps;
                            }
                            io.queue.push_back(m);
                        },
                        Step::Flood { count, text } => {
                            let line = json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid,
                                "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}}}).to_string();
                            for _ in 0..*count {
                                io.send_raw_unflushed(&line);
                            }
                            io.flush();
                        }
                    }
                }
                reply(&mut io, &id, json!({"stopReason": stop}));
            }
            other => error(&mut io, &id, -32601, &format!("Method not found: {other}")),
        }
    }
}
