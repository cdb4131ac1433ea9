//! `fake-claude`: speaks Claude Code's `-p` stream-json protocol with the control
//! protocol (`initialize`, `can_use_tool`, `interrupt`, `control_cancel_request`).
//! Keeps transcripts where the real one does
//! (`$CLAUDE_CONFIG_DIR|~/.claude/projects/<key>/<id>.jsonl`).

use std::path::PathBuf;

use serde_json::{json, Value};

use super::{exit_now, fail, Io};
use crate::scenario::{do_write, log_effect, run_shell, Scenario, Step};

fn arg_value(args: &[String], name: &str) -> Option<String> {
    let eq = format!("{name}=");
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == name {
            return it.next().cloned();
        }
        if let Some(v) = a.strip_prefix(&eq) {
            return Some(v.to_string());
        }
    }
    None
}

fn has(args: &[String], name: &str) -> bool {
    args.iter()
        .any(|a| a == name || a.starts_with(&format!("{name}=")))
}

fn project_key(p: &std::path::Path) -> String {
    p.to_string_lossy()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

fn config_dir() -> PathBuf {
    match std::env::var("CLAUDE_CONFIG_DIR") {
        Ok(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".claude"),
    }
}

fn append(path: &std::path::Path, v: &Value) {
    let _ = crate::scenario::append_line(path, &v.to_string());
}

/// Entry point of `fake-claude`.
pub fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !has(&args, "-p") && !has(&args, "--print") {
        fail("fake-claude only supports --print mode");
    }
    if arg_value(&args, "--output-format").as_deref() == Some("stream-json")
        && !has(&args, "--verbose")
    {
        fail("Error: When using --print, --output-format=stream-json requires --verbose");
    }
    if arg_value(&args, "--input-format").as_deref() != Some("stream-json") {
        fail("fake-claude: this fake needs --input-format stream-json");
    }
    let stdio_perm = arg_value(&args, "--permission-prompt-tool").as_deref() == Some("stdio");
    let replay = has(&args, "--replay-user-messages");
    // Like Claude Code, `total_cost_usd` is what the process spent so far.
    let mut total_cost = 0.0;
    let scenario = Scenario::from_env().unwrap_or_else(|e| fail(&e.to_string()));
    let cwd = std::env::current_dir().unwrap_or_else(|e| fail(&e.to_string()));
    let dir = config_dir().join("projects").join(project_key(&cwd));
    let session_id_arg = arg_value(&args, "--session-id");
    let resume_arg = arg_value(&args, "--resume");
    let (session_id, transcript) = match (session_id_arg, resume_arg) {
        (Some(_), Some(_)) if !has(&args, "--fork-session") => {
            fail("Error: --session-id can only be used with --continue or --resume if --fork-session is also specified.")
        }
        (Some(id), None) => {
            if uuid::Uuid::parse_str(&id).is_err() {
                fail("Error: Invalid session ID. Must be a valid UUID.");
            }
            let t = dir.join(format!("{id}.jsonl"));
            if t.exists() {
                fail(&format!("Error: Session ID {id} is already in use."));
            }
            (id, t)
        }
        (None, Some(id)) => {
            let t = dir.join(format!("{id}.jsonl"));
            if !t.is_file() {
                fail(&format!("No conversation found with session ID: {id}"));
            }
            (id, t)
        }
        _ => (uuid::Uuid::new_v4().to_string(), PathBuf::new()),
    };
    let _ = std::fs::create_dir_all(&dir);
    log_effect(&format!(
        "fake-claude spawn role={} task={} project={} thinking={} args={}",
        std::env::var("GAFFER_ROLE").unwrap_or_default(),
        std::env::var("GAFFER_TASK_ID").unwrap_or_default(),
        std::env::var("GAFFER_PROJECT").unwrap_or_default(),
        std::env::var("MAX_THINKING_TOKENS").unwrap_or_default(),
        serde_json::to_string(&args).unwrap_or_default()
    ));
    super::log_env_names("fake-claude");
    let played = std::fs::read_to_string(&transcript)
        .map(|s| {
            s.lines()
                .filter(|l| l.contains("\"type\":\"user\""))
                .count()
        })
        .unwrap_or(0);
    let reported = scenario
        .report_session_id
        .clone()
        .unwrap_or_else(|| session_id.clone());
    let mut io = Io::new();
    let mut turn_idx = played;
    let mut inited = false;
    // `PostToolUse` hooks registered at initialize: (matcher, callback id).
    let mut post_tool_hooks: Vec<(String, String)> = Vec::new();
    let mut tool_seq = 0u64;
    while let Some(msg) = io.read() {
        match msg.get("type").and_then(Value::as_str) {
            Some("control_request") => {
                let rid = msg
                    .get("request_id")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                match msg.pointer("/request/subtype").and_then(Value::as_str) {
                    Some("initialize") => {
                        post_tool_hooks = post_tool_use_hooks(&msg);
                        io.send(&json!({
                            "type": "control_response",
                            "response": {"subtype": "success", "request_id": rid,
                                "response": {"commands": [], "output_style": "default",
                                             "available_output_styles": ["default"]}}
                        }))
                    }
                    Some("interrupt") => io.send(&json!({
                        "type": "control_response",
                        "response": {"subtype": "success", "request_id": rid, "response": {}}
                    })),
                    other => io.send(&json!({
                        "type": "control_response",
                        "response": {"subtype": "error", "request_id": rid,
                                     "error": format!("Unsupported control request subtype: {other:?}")}
                    })),
                }
            }
            Some("user") => {
                let content = msg
                    .pointer("/message/content")
                    .cloned()
                    .unwrap_or(Value::Null);
                if msg.pointer("/message/role").and_then(Value::as_str) != Some("user") {
                    fail("Error: user message must have message.role = \"user\"");
                }
                let prompt = match &content {
                    Value::String(s) => s.clone(),
                    Value::Array(a) => a
                        .iter()
                        .filter_map(|b| b.get("text").and_then(Value::as_str))
                        .collect::<Vec<_>>()
                        .join("\n"),
                    _ => fail("Error: user message content must be a string or an array of blocks"),
                };
                if !inited {
                    inited = true;
                    io.send(&json!({
                        "type": "system", "subtype": "init", "cwd": cwd, "session_id": reported,
                        "tools": ["Bash", "Read", "Write", "Edit"], "mcp_servers": [],
                        "model": arg_value(&args, "--model").unwrap_or_else(|| "claude-fake".into()),
                        "permissionMode": arg_value(&args, "--permission-mode").unwrap_or_else(|| "default".into()),
                        "apiKeySource": "none", "uuid": uuid::Uuid::new_v4().to_string()
                    }));
                }
                if replay {
                    io.send(&echo(&msg, &reported));
                }
                append(
                    &transcript,
                    &json!({"type": "user", "sessionId": session_id, "message": {"role": "user", "content": prompt}}),
                );
                let turn = scenario.turn(turn_idx);
                turn_idx += 1;
                if let Some(exp) = &turn.expect_prompt_contains {
                    if !prompt.contains(exp.as_str()) {
                        fail(&format!(
                            "fake-claude: prompt does not contain {exp:?}: {prompt:?}"
                        ));
                    }
                }
                log_effect(&format!("fake-claude turn {turn_idx}"));
                let mut last_text = String::new();
                let mut denials = Vec::new();
                let mut interrupted = false;
                'steps: for step in &turn.steps {
                    match step {
                        Step::Say(t) => {
                            last_text = t.clone();
                            io.send(&assistant(&reported, json!([{"type": "text", "text": t}])));
                            append(
                                &transcript,
                                &json!({"type": "assistant", "message": {"content": t}}),
                            );
                        }
                        Step::Tool(ts) => {
                            tool_seq += 1;
                            let tu = format!(
                                "toolu_{:04}_{}",
                                tool_seq,
                                &uuid::Uuid::new_v4().simple().to_string()[..8]
                            );
                            io.send(&assistant(&reported, json!([{"type": "tool_use", "id": tu, "name": ts.name, "input": ts.input}])));
                            let mut decision: Option<(bool, Value, String)> = None;
                            if ts.permission {
                                if !stdio_perm {
                                    decision = Some((false, Value::Null, format!("Claude requested permissions to use {}, but you haven't granted it yet.", ts.name)));
                                } else {
                                    let n = if ts.repeat_request { 2 } else { 1 };
                                    let mut rids = Vec::new();
                                    for _ in 0..n {
                                        let rid = uuid::Uuid::new_v4().to_string();
                                        io.send(&json!({"type": "control_request", "request_id": rid,
                                            "request": {"subtype": "can_use_tool", "tool_name": ts.name, "input": ts.input,
                                                        "tool_use_id": tu, "permission_suggestions": []}}));
                                        rids.push(rid);
                                    }
                                    let mut answers: Vec<(bool, Value, String)> = Vec::new();
                                    while answers.len() < rids.len() {
                                        let Some(m) = io.read_wire() else {
                                            std::process::exit(0)
                                        };
                                        match m.get("type").and_then(Value::as_str) {
                                            Some("control_response") => {
                                                let r = m
                                                    .get("response")
                                                    .cloned()
                                                    .unwrap_or(Value::Null);
                                                let rid = r
                                                    .get("request_id")
                                                    .and_then(Value::as_str)
                                                    .unwrap_or("");
                                                if !rids.iter().any(|x| x == rid) {
                                                    fail(&format!("fake-claude: control_response for unknown request_id {rid:?}"));
                                                }
                                                if r.get("subtype").and_then(Value::as_str)
                                                    != Some("success")
                                                {
                                                    fail("fake-claude: can_use_tool answered with an error response");
                                                }
                                                let body = r
                                                    .get("response")
                                                    .cloned()
                                                    .unwrap_or(Value::Null);
                                                match body.get("behavior").and_then(Value::as_str) {
                                                    Some("allow") => {
                                                        let ui = body.get("updatedInput").cloned().unwrap_or(Value::Null);
                                                        if !ui.is_object() {
                                                            fail("fake-claude: allow must carry updatedInput (an object)");
                                                        }
                                                        answers.push((true, ui, String::new()));
                                                    }
                                                    Some("deny") => {
                                                        let m = body.get("message").and_then(Value::as_str)
                                                            .unwrap_or_else(|| fail("fake-claude: deny must carry a message"));
                                                        answers.push((false, Value::Null, m.to_string()));
                                                    }
                                                    _ => fail("fake-claude: behavior must be allow or deny"),
                                                }
                                            }
                                            Some("control_request")
                                                if m.pointer("/request/subtype")
                                                    .and_then(Value::as_str)
                                                    == Some("interrupt") =>
                                            {
                                                let rid = m
                                                    .get("request_id")
                                                    .and_then(Value::as_str)
                                                    .unwrap_or("")
                                                    .to_string();
                                                io.send(&json!({"type": "control_response", "response": {"subtype": "success", "request_id": rid, "response": {}}}));
                                                for r in &rids {
                                                    io.send(&json!({"type": "control_cancel_request", "request_id": r}));
                                                }
                                                interrupted = true;
                                                break 'steps;
                                            }
                                            _ => io.queue.push_back(m),
                                        }
                                    }
                                    if answers.windows(2).any(|w| w[0].0 != w[1].0) {
                                        fail(
                                            "fake-claude: repeated request answered inconsistently",
                                        );
                                    }
                                    decision = answers.into_iter().next();
                                }
                            }
                            let (allowed, updated, message) =
                                decision.unwrap_or((true, ts.input.clone(), String::new()));
                            let (out, is_error) = if allowed {
                                if let Some(w) = &ts.write {
                                    if let Err(e) = do_write("fake-claude", w) {
                                        fail(&e.to_string());
                                    }
                                } else {
                                    log_effect(&format!(
                                        "fake-claude tool {} {}",
                                        ts.name, updated
                                    ));
                                }
                                match &ts.run {
                                    Some(cmd) => {
                                        let (out, ok) = run_shell("fake-claude", cmd);
                                        (out, !ok)
                                    }
                                    None => (ts.output.clone().unwrap_or_else(|| "ok".into()), false),
                                }
                            } else {
                                denials.push(json!({"tool_name": ts.name, "tool_use_id": tu, "tool_input": ts.input}));
                                (message, true)
                            };
                            io.send(&json!({"type": "user", "message": {"role": "user", "content": [
                                {"type": "tool_result", "tool_use_id": tu, "content": out, "is_error": is_error}]},
                                "session_id": reported, "parent_tool_use_id": null}));
                            if allowed {
                                run_post_tool_hooks(&mut io, &post_tool_hooks, &ts.name, &ts.input, &tu, &out, is_error);
                            }
                        }
                        Step::WriteFile(w) => {
                            if let Err(e) = do_write("fake-claude", w) {
                                fail(&e.to_string());
                            }
                        }
                        Step::RateLimit { status, resets_at } => io.send(&json!({
                            "type": "rate_limit_event",
                            "rate_limit_info": {"status": status, "resetsAt": resets_at,
                                                "rateLimitType": "five_hour", "isUsingOverage": false},
                            "uuid": uuid::Uuid::new_v4().to_string(), "session_id": reported
                        })),
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
                            match m.get("type").and_then(Value::as_str) {
                                Some("user") => {
                                    let text = m
                                        .pointer("/message/content")
                                        .and_then(Value::as_str)
                                        .unwrap_or_else(|| fail("fake-claude: a message's content must be a string"))
                                        .to_string();
                                    log_effect(&format!("fake-claude message {text}"));
                                    if replay {
                                        io.send(&echo(&m, &reported));
                                    }
                                    append(
                                        &transcript,
                                        &json!({"type": "user", "sessionId": session_id, "message": {"role": "user", "content": text}}),
                                    );
                                    break;
                                }
                                Some("control_request")
                                    if m.pointer("/request/subtype").and_then(Value::as_str)
                                        == Some("interrupt") =>
                                {
                                    let rid = m.get("request_id").and_then(Value::as_str).unwrap_or("").to_string();
                                    io.send(&json!({"type": "control_response", "response": {"subtype": "success", "request_id": rid, "response": {}}}));
                                    interrupted = true;
                                    break 'steps;
                                }
                                _ => io.queue.push_back(m),
                            }
                        },
                        Step::Flood { count, text } => {
                            let line =
                                assistant(&reported, json!([{"type": "text", "text": text}]))
                                    .to_string();
                            for _ in 0..*count {
                                io.send_raw_unflushed(&line);
                            }
                            io.flush();
                            last_text = text.clone();
                        }
                    }
                }
                let u = turn.usage.unwrap_or_default();
                total_cost += turn.cost_usd.unwrap_or(0.0);
                let text = if interrupted {
                    "Interrupted by user".to_string()
                } else {
                    turn.result.clone().unwrap_or(last_text)
                };
                io.send(&json!({
                    "type": "result",
                    "subtype": if interrupted { "error_during_execution" } else { "success" },
                    "is_error": interrupted, "duration_ms": 1, "duration_api_ms": 1, "num_turns": 1,
                    "result": text, "session_id": reported,
                    "total_cost_usd": total_cost,
                    "usage": {"input_tokens": u.input_tokens, "cache_creation_input_tokens": 0,
                              "cache_read_input_tokens": u.cached_input_tokens, "output_tokens": u.output_tokens},
                    "permission_denials": denials, "uuid": uuid::Uuid::new_v4().to_string()
                }));
                append(&transcript, &json!({"type": "result", "result": text}));
            }
            Some(other) => fail(&format!(
                "fake-claude: unexpected message type {other:?} on stdin"
            )),
            None => fail("fake-claude: message without type on stdin"),
        }
    }
}

/// The `PostToolUse` matchers of an `initialize` request: `(matcher, callback id)`.
fn post_tool_use_hooks(init: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for m in init
        .pointer("/request/hooks/PostToolUse")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let matcher = m.get("matcher").and_then(Value::as_str).unwrap_or("*");
        for id in m
            .get("hookCallbackIds")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            out.push((matcher.to_string(), id.to_string()));
        }
    }
    out
}

/// As Claude Code does after a tool ran: ask each matching `PostToolUse` callback and
/// wait for its answer; context it adds reaches the model (logged as `hook-context`).
fn run_post_tool_hooks(
    io: &mut Io,
    hooks: &[(String, String)],
    tool: &str,
    input: &Value,
    tool_use_id: &str,
    output: &str,
    is_error: bool,
) {
    for (matcher, id) in hooks {
        if matcher != "*" && matcher != tool {
            continue;
        }
        let rid = uuid::Uuid::new_v4().to_string();
        io.send(&json!({"type": "control_request", "request_id": rid, "request": {
            "subtype": "hook_callback", "callback_id": id, "tool_use_id": tool_use_id,
            "input": {"hook_event_name": "PostToolUse", "tool_name": tool, "tool_input": input,
                      "tool_response": {"stdout": output, "stderr": "", "interrupted": false, "is_error": is_error}}}}));
        loop {
            let Some(m) = io.read_wire() else {
                std::process::exit(0)
            };
            let answers = m.get("type").and_then(Value::as_str) == Some("control_response")
                && m.pointer("/response/request_id").and_then(Value::as_str) == Some(rid.as_str());
            if !answers {
                io.queue.push_back(m);
                continue;
            }
            if m.pointer("/response/subtype").and_then(Value::as_str) != Some("success") {
                fail("fake-claude: hook_callback answered with an error response");
            }
            if let Some(ctx) = m
                .pointer("/response/response/hookSpecificOutput/additionalContext")
                .and_then(Value::as_str)
            {
                log_effect(&format!("fake-claude hook-context {ctx}"));
            }
            break;
        }
    }
}

/// The echo of a user message Claude takes (`--replay-user-messages`).
fn echo(msg: &Value, session: &str) -> Value {
    json!({"type": "user", "message": msg.get("message").cloned().unwrap_or(Value::Null),
        "session_id": session, "parent_tool_use_id": null,
        "uuid": uuid::Uuid::new_v4().to_string(), "isReplay": true})
}

fn assistant(session: &str, content: Value) -> Value {
    json!({"type": "assistant", "message": {"id": format!("msg_{}", uuid::Uuid::new_v4().simple()),
        "type": "message", "role": "assistant", "model": "claude-fake", "content": content,
        "stop_reason": null, "usage": {"input_tokens": 1, "output_tokens": 1}},
        "parent_tool_use_id": null, "session_id": session})
}
