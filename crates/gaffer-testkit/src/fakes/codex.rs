//! `fake-codex`: speaks `codex app-server` (JSON-RPC without the `jsonrpc` header, JSONL
//! over stdio). Threads are kept under `$CODEX_HOME/sessions/<id>.jsonl`; resuming an
//! unknown thread is an error like the real one. Refuses requests before
//! `initialize`/`initialized`, a second `initialize`, unknown approval policies and
//! sandbox modes, and approval answers other than accept/acceptForSession/decline/cancel.

use std::path::PathBuf;

use serde_json::{json, Value};

use super::{exit_now, fail, Io};
use crate::scenario::{do_write, log_effect, run_shell, Scenario, Step};

fn codex_home() -> PathBuf {
    match std::env::var("CODEX_HOME") {
        Ok(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".codex"),
    }
}

fn err(io: &mut Io, id: &Value, code: i64, message: &str) {
    io.send(&json!({"id": id, "error": {"code": code, "message": message}}));
}

fn append(path: &std::path::Path, v: &Value) {
    let _ = crate::scenario::append_line(path, &v.to_string());
}

struct Totals {
    input: u64,
    cached: u64,
    output: u64,
}

/// Entry point of `fake-codex`.
pub fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // Like the real CLI: `-c key=value` config overrides may come before the subcommand.
    let mut rest = args.as_slice();
    while let [flag, value, tail @ ..] = rest {
        if flag != "-c" || !value.contains('=') {
            break;
        }
        rest = tail;
    }
    if rest.first().map(String::as_str) != Some("app-server") {
        fail("fake-codex: only `app-server` is supported");
    }
    let scenario = Scenario::from_env().unwrap_or_else(|e| fail(&e.to_string()));
    log_effect(&format!(
        "fake-codex spawn role={} task={} project={} args={}",
        std::env::var("GAFFER_ROLE").unwrap_or_default(),
        std::env::var("GAFFER_TASK_ID").unwrap_or_default(),
        std::env::var("GAFFER_PROJECT").unwrap_or_default(),
        std::env::args().skip(1).collect::<Vec<_>>().join(" ")
    ));
    super::log_env_names("fake-codex");
    let sessions = codex_home().join("sessions");
    let _ = std::fs::create_dir_all(&sessions);
    let mut io = Io::new();
    let mut initialized = 0u8; // 0 none, 1 initialize answered, 2 initialized received
    let mut thread: Option<(String, PathBuf, usize)> = None;
    let mut srv_id = 0i64;
    let mut turn_seq = 0u64;
    let mut item_seq = 0u64;
    let mut totals = Totals {
        input: 0,
        cached: 0,
        output: 0,
    };
    while let Some(msg) = io.read() {
        if msg.get("jsonrpc").is_some() {
            // The real server omits the header; it tolerates it, so do we.
        }
        let method = msg
            .get("method")
            .and_then(Value::as_str)
            .map(str::to_string);
        let id = msg.get("id").cloned();
        let params = msg.get("params").cloned().unwrap_or(Value::Null);
        let (Some(method), Some(id)) = (method.clone(), id) else {
            match method.as_deref() {
                Some("initialized") if initialized == 1 => initialized = 2,
                Some("initialized") => fail("fake-codex: `initialized` before `initialize`"),
                _ => {} // responses to nothing / other notifications: ignored
            }
            continue;
        };
        if method == "initialize" {
            if initialized > 0 {
                err(&mut io, &id, -32600, "Already initialized");
                continue;
            }
            if params
                .pointer("/clientInfo/name")
                .and_then(Value::as_str)
                .is_none()
            {
                err(
                    &mut io,
                    &id,
                    -32602,
                    "Invalid params: missing field `clientInfo`",
                );
                continue;
            }
            initialized = 1;
            io.send(&json!({"id": id, "result": {"userAgent": "fake-codex/0.0.0"}}));
            continue;
        }
        if initialized < 2 {
            err(&mut io, &id, -32002, "Not initialized");
            continue;
        }
        match method.as_str() {
            "thread/start" | "thread/resume" => {
                if let Some(ap) = params.get("approvalPolicy").and_then(Value::as_str) {
                    if !["untrusted", "on-failure", "on-request", "never"].contains(&ap) {
                        err(
                            &mut io,
                            &id,
                            -32602,
                            &format!("Invalid params: unknown variant `{ap}`"),
                        );
                        continue;
                    }
                }
                if let Some(sb) = params.get("sandbox").and_then(Value::as_str) {
                    if !["read-only", "workspace-write", "danger-full-access"].contains(&sb) {
                        err(
                            &mut io,
                            &id,
                            -32602,
                            &format!("Invalid params: unknown variant `{sb}`"),
                        );
                        continue;
                    }
                }
                let tid = if method == "thread/start" {
                    format!("thr_{}", uuid::Uuid::new_v4().simple())
                } else {
                    params
                        .get("threadId")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string()
                };
                let rollout = sessions.join(format!("{tid}.jsonl"));
                if method == "thread/resume" && !rollout.is_file() {
                    err(
                        &mut io,
                        &id,
                        -32600,
                        &format!("no rollout found for thread id {tid}"),
                    );
                    continue;
                }
                let played = std::fs::read_to_string(&rollout)
                    .map(|s| s.lines().filter(|l| l.contains("\"turn\"")).count())
                    .unwrap_or(0);
                if method == "thread/start" {
                    append(&rollout, &json!({"thread": tid, "cwd": params.get("cwd")}));
                }
                log_effect(&format!("fake-codex {method} {params}"));
                let th = json!({"id": tid, "preview": "", "modelProvider": "openai", "createdAt": 1_700_000_000u64});
                io.send(&json!({"id": id, "result": {"thread": th, "model": params.get("model").cloned().unwrap_or(json!("gpt-fake")),
                    "modelProvider": "openai", "cwd": params.get("cwd"), "approvalPolicy": params.get("approvalPolicy"),
                    "sandbox": {"type": params.get("sandbox")}}}));
                if method == "thread/start" {
                    io.send(&json!({"method": "thread/started", "params": {"thread": th}}));
                }
                thread = Some((tid, rollout, played));
            }
            "turn/interrupt" => {
                io.send(&json!({"id": id, "result": {}}));
            }
            "turn/steer" => err(&mut io, &id, -32600, "no active turn to steer"),
            "turn/start" => {
                let Some((tid, rollout, played)) = thread.clone() else {
                    err(&mut io, &id, -32600, "thread not found");
                    continue;
                };
                if params.get("threadId").and_then(Value::as_str) != Some(tid.as_str()) {
                    err(&mut io, &id, -32600, "thread not found");
                    continue;
                }
                let Some(input) = params.get("input").and_then(Value::as_array) else {
                    err(
                        &mut io,
                        &id,
                        -32602,
                        "Invalid params: missing field `input`",
                    );
                    continue;
                };
                let prompt: String = input
                    .iter()
                    .filter(|i| i.get("type").and_then(Value::as_str) == Some("text"))
                    .filter_map(|i| i.get("text").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("\n");
                let turn = scenario.turn(played);
                if let Some(e) = &turn.expect_prompt_contains {
                    if !prompt.contains(e.as_str()) {
                        fail(&format!("fake-codex: prompt does not contain {e:?}"));
                    }
                }
                thread = Some((tid.clone(), rollout.clone(), played + 1));
                turn_seq += 1;
                let turn_id = format!("turn_{turn_seq}");
                append(&rollout, &json!({"turn": turn_id, "prompt": prompt}));
                log_effect(&format!("fake-codex turn {}", played + 1));
                io.send(&json!({"id": id, "result": {"turn": {"id": turn_id, "status": "inProgress", "items": [], "error": null}}}));
                io.send(&json!({"method": "turn/started", "params": {"threadId": tid, "turn": {"id": turn_id, "status": "inProgress", "items": [], "error": null}}}));
                let mut interrupted = false;
                'steps: for step in &turn.steps {
                    match step {
                        Step::Say(t) => {
                            item_seq += 1;
                            let iid = format!("msg_{item_seq}");
                            io.send(&json!({"method": "item/started", "params": {"threadId": tid, "turnId": turn_id, "item": {"type": "agentMessage", "id": iid, "text": ""}}}));
                            io.send(&json!({"method": "item/agentMessage/delta", "params": {"threadId": tid, "turnId": turn_id, "itemId": iid, "delta": t}}));
                            io.send(&json!({"method": "item/completed", "params": {"threadId": tid, "turnId": turn_id, "item": {"type": "agentMessage", "id": iid, "text": t}}}));
                        }
                        Step::Tool(ts) => {
                            item_seq += 1;
                            let iid = format!("call_{item_seq}");
                            let is_file = ts.name == "file_change";
                            let cwd = std::env::current_dir()
                                .map(|p| p.display().to_string())
                                .unwrap_or_default();
                            let command = ts
                                .input
                                .get("command")
                                .and_then(Value::as_str)
                                .unwrap_or("true")
                                .to_string();
                            let changes = ts.write.as_ref().map(|w| json!([{"path": w.path, "kind": {"type": "add"}, "diff": w.content}])).unwrap_or(json!([]));
                            let item = if is_file {
                                json!({"type": "fileChange", "id": iid, "changes": changes, "status": "inProgress"})
                            } else {
                                json!({"type": "commandExecution", "id": iid, "command": command, "cwd": cwd, "processId": null,
                                       "status": "inProgress", "commandActions": [], "aggregatedOutput": null, "exitCode": null, "durationMs": null})
                            };
                            io.send(&json!({"method": "item/started", "params": {"threadId": tid, "turnId": turn_id, "item": item}}));
                            let mut accepted = true;
                            if ts.permission {
                                let n = if ts.repeat_request { 2 } else { 1 };
                                let mut ids = Vec::new();
                                for _ in 0..n {
                                    srv_id += 1;
                                    ids.push(srv_id);
                                    let (m, p) = if is_file {
                                        (
                                            "item/fileChange/requestApproval",
                                            json!({"threadId": tid, "turnId": turn_id, "itemId": iid, "reason": "write files"}),
                                        )
                                    } else {
                                        (
                                            "item/commandExecution/requestApproval",
                                            json!({"threadId": tid, "turnId": turn_id, "itemId": iid, "reason": "run a command", "command": command, "cwd": cwd}),
                                        )
                                    };
                                    io.send(&json!({"method": m, "id": srv_id, "params": p}));
                                }
                                let mut decisions = Vec::new();
                                while decisions.len() < ids.len() {
                                    let Some(m) = io.read_wire() else {
                                        std::process::exit(0)
                                    };
                                    if m.get("method").and_then(Value::as_str)
                                        == Some("turn/interrupt")
                                    {
                                        let rid = m.get("id").cloned().unwrap_or(Value::Null);
                                        io.send(&json!({"id": rid, "result": {}}));
                                        interrupted = true;
                                        break 'steps;
                                    }
                                    if m.get("method").is_some() {
                                        io.queue.push_back(m);
                                        continue;
                                    }
                                    let rid = m.get("id").and_then(Value::as_i64).unwrap_or(-1);
                                    if !ids.contains(&rid) {
                                        fail(&format!(
                                            "fake-codex: response to unknown request id {rid}"
                                        ));
                                    }
                                    let d = m
                                        .pointer("/result/decision")
                                        .and_then(Value::as_str)
                                        .unwrap_or("");
                                    if !["accept", "acceptForSession", "decline", "cancel"]
                                        .contains(&d)
                                    {
                                        fail(&format!(
                                            "fake-codex: invalid approval decision {d:?}"
                                        ));
                                    }
                                    decisions.push(d.starts_with("accept"));
                                }
                                if decisions.windows(2).any(|w| w[0] != w[1]) {
                                    fail("fake-codex: repeated approval answered inconsistently");
                                }
                                accepted = decisions[0];
                            }
                            let mut done = item.clone();
                            if accepted {
                                if let Some(w) = &ts.write {
                                    if let Err(e) = do_write("fake-codex", w) {
                                        fail(&e.to_string());
                                    }
                                } else {
                                    log_effect(&format!("fake-codex exec {command}"));
                                }
                                done["status"] = json!("completed");
                                if !is_file {
                                    let (out, code) = match &ts.run {
                                        Some(cmd) => {
                                            let (out, ok) = run_shell("fake-codex", cmd);
                                            (out, if ok { 0 } else { 1 })
                                        }
                                        None => {
                                            (ts.output.clone().unwrap_or_else(|| "ok".into()), 0)
                                        }
                                    };
                                    done["aggregatedOutput"] = json!(out);
                                    done["exitCode"] = json!(code);
                                    done["durationMs"] = json!(1);
                                    if code != 0 {
                                        done["status"] = json!("failed");
                                    }
                                }
                            } else {
                                done["status"] = json!("declined");
                            }
                            io.send(&json!({"method": "item/completed", "params": {"threadId": tid, "turnId": turn_id, "item": done}}));
                        }
                        Step::WriteFile(w) => {
                            if let Err(e) = do_write("fake-codex", w) {
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
                        Step::AwaitMessage => {
                            loop {
                                let Some(m) = io.read_wire() else {
                                    std::process::exit(0)
                                };
                                match m.get("method").and_then(Value::as_str) {
                                    Some("turn/steer") => {
                                        let p = m.get("params").cloned().unwrap_or(Value::Null);
                                        if p.get("expectedTurnId").and_then(Value::as_str)
                                            != Some(turn_id.as_str())
                                        {
                                            fail("fake-codex: turn/steer must name the running turn in expectedTurnId");
                                        }
                                        let text: String = p
                                            .get("input")
                                            .and_then(Value::as_array)
                                            .into_iter()
                                            .flatten()
                                            .filter_map(|i| i.get("text").and_then(Value::as_str))
                                            .collect::<Vec<_>>()
                                            .join("\n");
                                        log_effect(&format!("fake-codex message {text}"));
                                        io.send(&json!({"id": m.get("id"), "result": {"turnId": turn_id}}));
                                        break;
                                    }
                                    Some("turn/interrupt") => {
                                        io.send(&json!({"id": m.get("id"), "result": {}}));
                                        interrupted = true;
                                        break 'steps;
                                    }
                                    _ => io.queue.push_back(m),
                                }
                            }
                        }
                        Step::Flood { count, text } => {
                            for i in 0..*count {
                                let line = json!({"method": "item/completed", "params": {"threadId": tid, "turnId": turn_id,
                                    "item": {"type": "agentMessage", "id": format!("flood_{i}"), "text": text}}}).to_string();
                                io.send_raw_unflushed(&line);
                            }
                            io.flush();
                        }
                    }
                }
                let u = turn.usage.unwrap_or_default();
                totals.input += u.input_tokens + u.cached_input_tokens;
                totals.cached += u.cached_input_tokens;
                totals.output += u.output_tokens;
                let bd = |i: u64, c: u64, o: u64| json!({"totalTokens": i + o, "inputTokens": i, "cachedInputTokens": c, "outputTokens": o, "reasoningOutputTokens": 0});
                io.send(&json!({"method": "thread/tokenUsage/updated", "params": {"threadId": tid, "turnId": turn_id, "tokenUsage": {
                    "total": bd(totals.input, totals.cached, totals.output),
                    "last": bd(u.input_tokens + u.cached_input_tokens, u.cached_input_tokens, u.output_tokens),
                    "modelContextWindow": 200000}}}));
                let status = if interrupted {
                    "interrupted"
                } else {
                    "completed"
                };
                io.send(&json!({"method": "turn/completed", "params": {"threadId": tid, "turn": {"id": turn_id, "status": status, "items": [], "error": null}}}));
            }
            other => err(&mut io, &id, -32601, &format!("method not found: {other}")),
        }
    }
}
