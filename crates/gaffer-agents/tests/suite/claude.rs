use std::sync::Arc;

use gaffer_agents::claude::{ClaudeBackend, ClaudeConfig};
use gaffer_agents::{
    AgentBackend, AgentError, AgentEvent, AllowAll, Mode, PermissionDecision, TurnStatus,
};
use gaffer_testkit::bins::fake_bin;
use serde_json::json;

use super::support::*;

fn backend() -> ClaudeBackend {
    ClaudeBackend::new(ClaudeConfig {
        bin: Some(fake_bin("fake-claude")),
        ..Default::default()
    })
}

#[tokio::test]
async fn tool_call_allowed_then_denied_goes_through_the_gate_once_each() {
    let env = Env::new(&scenario(json!({"turns": [{
        "steps": [
            {"say": "I will run the tests."},
            {"tool": {"name": "Bash", "input": {"command": "make test"}, "output": "all passed"}},
            {"tool": {"name": "Write", "input": {"file_path": "secret.txt", "content": "x"},
                      "write": {"path": "secret.txt", "content": "x"}}},
            {"say": "Done."}
        ],
        "result": "finished",
        "usage": {"input_tokens": 100, "output_tokens": 20, "cached_input_tokens": 7},
        "cost_usd": 0.0123
    }]})));
    let gate = RecordingGate::new(vec![
        PermissionDecision::allow(),
        PermissionDecision::deny("not on my watch"),
    ]);
    let mut s = backend()
        .start(env.opts(Mode::ReadWrite), gate.clone())
        .await
        .unwrap();
    let (events, res) = turn(s.as_mut(), "do it").await;
    let res = res.unwrap();
    assert_eq!(res.status, TurnStatus::Completed);
    assert_eq!(res.text, "finished");
    assert_eq!(res.usage.input_tokens, 100);
    assert_eq!(res.usage.cached_input_tokens, 7);
    assert_eq!(res.usage.cost_usd, Some(0.0123));

    let seen = gate.seen();
    assert_eq!(seen.len(), 2, "one gate call per request");
    assert_eq!(seen[0].tool_name, "Bash");
    assert_eq!(seen[0].input, json!({"command": "make test"}));
    assert_eq!(seen[1].tool_name, "Write");

    let results: Vec<(String, bool)> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolResult {
                output, is_error, ..
            } => Some((output.clone(), *is_error)),
            _ => None,
        })
        .collect();
    assert_eq!(
        results,
        vec![
            ("all passed".to_string(), false),
            ("not on my watch".to_string(), true)
        ]
    );
    let resolved: Vec<bool> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::PermissionResolved { decision, .. } => Some(decision.is_allow()),
            _ => None,
        })
        .collect();
    assert_eq!(resolved, vec![true, false]);
    // Effects: the allowed command ran once; the denied write never happened.
    assert_eq!(env.log_count("fake-claude tool Bash"), 1);
    assert_eq!(env.log_count("write secret.txt"), 0);
    assert!(!env.ws.join("secret.txt").exists());
    assert!(s.record().verified);
    s.shutdown().await.unwrap();
}

#[tokio::test]
async fn repeated_identical_request_asks_the_gate_once() {
    let env = Env::new(&scenario(json!({"turns": [{"steps": [
        {"tool": {"name": "Bash", "input": {"command": "ls"}, "repeat_request": true}}
    ]}]})));
    let gate = RecordingGate::new(vec![
        PermissionDecision::allow(),
        PermissionDecision::allow(),
    ]);
    let mut s = backend()
        .start(env.opts(Mode::ReadWrite), gate.clone())
        .await
        .unwrap();
    let (events, res) = turn(s.as_mut(), "go").await;
    res.unwrap();
    assert_eq!(gate.seen().len(), 1);
    let asked = events
        .iter()
        .filter(|e| matches!(e, AgentEvent::PermissionRequested { .. }))
        .count();
    assert_eq!(asked, 1);
    assert_eq!(env.log_count("fake-claude tool Bash"), 1);
}

#[tokio::test]
async fn flags_env_and_assigned_session_id() {
    let env = Env::new(&scenario(json!({"turns": [{"steps": [{"say": "hi"}]}]})));
    let mut s = backend()
        .start(env.opts(Mode::ReadOnly), Arc::new(AllowAll))
        .await
        .unwrap();
    let (events, res) = turn(s.as_mut(), "hello").await;
    res.unwrap();
    let rec = s.record();
    assert!(uuid::Uuid::parse_str(&rec.session_id).is_ok());
    assert!(rec.verified);
    assert_eq!(rec.workspace_key, env.ws.display().to_string());
    assert!(events.contains(&AgentEvent::SessionStarted {
        session_id: rec.session_id.clone(),
        verified: true
    }));
    let spawn = env.log().into_iter().find(|l| l.contains("spawn")).unwrap();
    assert!(
        spawn.contains("role=owner task=task-42 project=demo"),
        "{spawn}"
    );
    for flag in [
        "\"-p\"",
        "\"--output-format\",\"stream-json\"",
        "\"--input-format\",\"stream-json\"",
        "\"--verbose\"",
        "\"--permission-prompt-tool=stdio\"",
        "--disallowedTools=Edit,Write,MultiEdit,NotebookEdit",
    ] {
        assert!(spawn.contains(flag), "missing {flag} in {spawn}");
    }
    assert!(spawn.contains(&format!("--session-id={}", rec.session_id)));
}

#[tokio::test]
async fn resume_existing_session_continues_the_conversation() {
    let env = Env::new(&scenario(json!({"turns": [
        {"steps": [{"say": "first"}]},
        {"expect_prompt_contains": "second prompt", "steps": [{"say": "second"}]}
    ]})));
    let b = backend();
    let mut s = b
        .start(env.opts(Mode::ReadWrite), Arc::new(AllowAll))
        .await
        .unwrap();
    let (_, r) = turn(s.as_mut(), "first prompt").await;
    r.unwrap();
    let rec = s.record();
    s.shutdown().await.unwrap();
    drop(s);

    let mut s = b
        .resume(
            env.opts(Mode::ReadWrite),
            &rec.session_id,
            Arc::new(AllowAll),
        )
        .await
        .unwrap();
    let (events, r) = turn(s.as_mut(), "second prompt").await;
    r.unwrap();
    assert_eq!(texts(&events), vec!["second".to_string()]);
    assert_eq!(s.record().session_id, rec.session_id);
    assert!(s.record().verified);
    let spawns: Vec<String> = env
        .log()
        .into_iter()
        .filter(|l| l.contains("spawn"))
        .collect();
    assert_eq!(spawns.len(), 2);
    assert!(
        spawns[1].contains(&format!("--resume={}", rec.session_id)),
        "{}",
        spawns[1]
    );
    assert!(!spawns[1].contains("--session-id"));
}

#[tokio::test]
async fn resume_of_vanished_session_is_a_clear_error_and_starts_nothing() {
    let env = Env::new(&scenario(json!({"turns": [{"steps": [{"say": "never"}]}]})));
    let gone = uuid::Uuid::new_v4().to_string();
    let err = backend()
        .resume(env.opts(Mode::ReadWrite), &gone, Arc::new(AllowAll))
        .await
        .err()
        .unwrap();
    match &err {
        AgentError::SessionGone { session_id, .. } => assert_eq!(session_id, &gone),
        other => panic!("expected SessionGone, got {other:?}"),
    }
    assert!(err.to_string().contains("no new conversation"));
    assert_eq!(env.log_count("spawn"), 0, "no process may be started");
}

#[tokio::test]
async fn transcript_of_another_workspace_does_not_count() {
    let env = Env::new(&scenario(json!({"turns": [{"steps": [{"say": "a"}]}]})));
    let b = backend();
    let mut s = b
        .start(env.opts(Mode::ReadWrite), Arc::new(AllowAll))
        .await
        .unwrap();
    turn(s.as_mut(), "x").await.1.unwrap();
    let id = s.record().session_id;
    s.shutdown().await.unwrap();
    let other = env.dir.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    let mut opts = env.opts(Mode::ReadWrite);
    opts.workspace = other;
    let err = b.resume(opts, &id, Arc::new(AllowAll)).await.err().unwrap();
    assert!(matches!(err, AgentError::SessionGone { .. }), "{err:?}");
}

#[tokio::test]
async fn malformed_line_is_a_typed_error() {
    let env = Env::new(&scenario(json!({"turns": [{"steps": [
        {"say": "ok so far"}, {"raw": "{\"type\": \"assistant\", oops"}, {"say": "never seen"}
    ]}]})));
    let mut s = backend()
        .start(env.opts(Mode::ReadWrite), Arc::new(AllowAll))
        .await
        .unwrap();
    let (events, r) = turn(s.as_mut(), "go").await;
    match r {
        Err(AgentError::MalformedOutput {
            line_no, snippet, ..
        }) => {
            assert!(line_no >= 2);
            assert!(snippet.contains("oops"));
        }
        other => panic!("expected MalformedOutput, got {other:?}"),
    }
    assert_eq!(texts(&events), vec!["ok so far".to_string()]);
}

#[tokio::test]
async fn agent_exiting_mid_turn_is_a_typed_error() {
    let env = Env::new(&scenario(
        json!({"turns": [{"steps": [{"say": "working"}, {"exit": 3}]}]}),
    ));
    let mut s = backend()
        .start(env.opts(Mode::ReadWrite), Arc::new(AllowAll))
        .await
        .unwrap();
    let (_, r) = turn(s.as_mut(), "go").await;
    match r {
        Err(AgentError::ExitedMidTurn { status, .. }) => assert!(status.contains('3'), "{status}"),
        other => panic!("expected ExitedMidTurn, got {other:?}"),
    }
}

#[tokio::test]
async fn session_id_mismatch_is_detected() {
    let env = Env::new(&scenario(json!({
        "report_session_id": "11111111-1111-4111-8111-111111111111",
        "turns": [{"steps": [{"say": "hi"}]}]
    })));
    let mut s = backend()
        .start(env.opts(Mode::ReadWrite), Arc::new(AllowAll))
        .await
        .unwrap();
    let (_, r) = turn(s.as_mut(), "go").await;
    assert!(
        matches!(r, Err(AgentError::SessionMismatch { .. })),
        "{r:?}"
    );
    assert!(!s.record().verified);
}

#[tokio::test]
async fn secrets_in_agent_output_are_redacted() {
    let env = Env::new(&scenario(json!({"turns": [{"steps": [
        {"say": "the key is sk-ant-api03-abcdefghijklmnop and hunter2secret"}
    ]}]})));
    let b = ClaudeBackend::new(ClaudeConfig {
        bin: Some(fake_bin("fake-claude")),
        redactor: Arc::new(gaffer_agents::Redactor::new(["hunter2secret"])),
        ..Default::default()
    });
    let mut s = b
        .start(env.opts(Mode::ReadWrite), Arc::new(AllowAll))
        .await
        .unwrap();
    let (events, r) = turn(s.as_mut(), "go").await;
    r.unwrap();
    let t = texts(&events).join("");
    assert!(!t.contains("sk-ant"), "{t}");
    assert!(!t.contains("hunter2secret"), "{t}");
    assert!(t.contains("[REDACTED]"));
}

#[tokio::test]
async fn interrupt_withdraws_a_pending_permission() {
    let env = Env::new(&scenario(json!({"turns": [{"steps": [
        {"tool": {"name": "Bash", "input": {"command": "sleep 100"}}}
    ]}]})));
    // A gate that never answers.
    let (gate, mut rx) = gaffer_agents::ChannelGate::new();
    let mut s = backend()
        .start(env.opts(Mode::ReadWrite), Arc::new(gate))
        .await
        .unwrap();
    s.send_turn("go").await.unwrap();
    let _pending = rx.recv().await.unwrap();
    s.interrupt().await.unwrap();
    let (_, r) = turn_rest(s.as_mut()).await;
    assert_eq!(r.status, TurnStatus::Interrupted);
    assert_eq!(env.log_count("fake-claude tool"), 0);
}

async fn turn_rest(
    s: &mut dyn gaffer_agents::AgentSession,
) -> (Vec<AgentEvent>, gaffer_agents::TurnResult) {
    let mut evs = Vec::new();
    loop {
        let ev = tokio::time::timeout(std::time::Duration::from_secs(20), s.next_event())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        if let AgentEvent::TurnCompleted { result } = &ev {
            return (evs, result.clone());
        }
        evs.push(ev);
    }
}

#[tokio::test]
async fn planner_plan_block_and_owner_edits_pass_through_intact() {
    let plan = "Plan:\n```json\n{\"steps\": [{\"title\": \"add greeting\", \"files\": [\"hello.txt\"]}]}\n```";
    let env = Env::new(&scenario(json!({"turns": [
        {"steps": [{"say": plan}]},
        {"steps": [{"write_file": {"path": "hello.txt", "content": "hello\n"}}, {"say": "edited"}]}
    ]})));
    let mut s = backend()
        .start(env.opts(Mode::ReadWrite), Arc::new(AllowAll))
        .await
        .unwrap();
    let (_, r) = turn(s.as_mut(), "plan it").await;
    assert_eq!(r.unwrap().text, plan);
    let (_, r) = turn(s.as_mut(), "do it").await;
    assert_eq!(r.unwrap().text, "edited");
    assert_eq!(
        std::fs::read_to_string(env.ws.join("hello.txt")).unwrap(),
        "hello\n"
    );
    assert_eq!(env.log_count("fake-claude write hello.txt"), 1);
}

#[tokio::test]
async fn agent_that_refuses_to_start_reports_why() {
    let env = Env::new(&scenario(json!({})));
    let mut opts = env.opts(Mode::ReadWrite);
    opts.env.insert(
        "GAFFER_FAKE_SCENARIO".into(),
        "/nonexistent/scenario.json".into(),
    );
    // The agent may die before or after `start` wrote to it: both must say why.
    let err = match backend().start(opts, Arc::new(AllowAll)).await {
        Err(e) => e,
        Ok(mut s) => tokio::time::timeout(std::time::Duration::from_secs(20), s.next_event())
            .await
            .unwrap()
            .unwrap()
            .unwrap_err(),
    };
    match err {
        AgentError::Exited { stderr, status, .. } => {
            assert!(stderr.contains("reading scenario"), "{stderr}");
            assert!(status.contains('2'), "{status}");
        }
        other => panic!("expected Exited, got {other:?}"),
    }
}

#[tokio::test]
async fn secrets_in_malformed_lines_are_redacted_in_errors() {
    let env = Env::new(&scenario(json!({"turns": [{"steps": [
        {"raw": "oops sk-ant-api03-zzzzzzzzzzzzzzzzzzzz not json"}
    ]}]})));
    let mut s = backend()
        .start(env.opts(Mode::ReadWrite), Arc::new(AllowAll))
        .await
        .unwrap();
    let (_, r) = turn(s.as_mut(), "go").await;
    let e = r.unwrap_err().to_string();
    assert!(!e.contains("zzzzzzzz"), "{e}");
    assert!(e.contains("[REDACTED]"), "{e}");
}

#[tokio::test]
async fn direct_answer_wins_over_a_late_gate_decision() {
    let env = Env::new(&scenario(json!({"turns": [{"steps": [
        {"tool": {"name": "Bash", "input": {"command": "echo hi"}}}
    ]}]})));
    let (gate, mut rx) = gaffer_agents::ChannelGate::new();
    let mut s = backend()
        .start(env.opts(Mode::ReadWrite), Arc::new(gate))
        .await
        .unwrap();
    s.send_turn("go").await.unwrap();
    let pending = rx.recv().await.unwrap();
    s.answer_permission(&pending.request.id, PermissionDecision::allow())
        .await
        .unwrap();
    let (events, r) = turn_rest(s.as_mut()).await;
    assert_eq!(r.status, TurnStatus::Completed);
    // The late gate decision is ignored: no second response reaches the agent.
    pending.decide(PermissionDecision::deny("too late"));
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let resolved: Vec<_> = events
        .iter()
        .filter(|e| matches!(e, AgentEvent::PermissionResolved { .. }))
        .collect();
    assert_eq!(resolved.len(), 1);
    assert_eq!(env.log_count("fake-claude tool Bash"), 1);
    // A second turn still works (the agent was not confused by a stray response).
    let (ev2, r2) = turn(s.as_mut(), "again").await;
    r2.unwrap();
    assert!(
        !ev2.iter()
            .any(|e| matches!(e, AgentEvent::PermissionResolved { .. })),
        "a late decision must not be relayed: {ev2:?}"
    );
}

#[tokio::test]
async fn rejected_rate_limit_event_becomes_a_visible_wait() {
    let env = Env::new(&scenario(json!({"turns": [{"steps": [
        {"rate_limit": {"status": "allowed", "resets_at": 1_900_000_000u64}},
        {"rate_limit": {"status": "rejected", "resets_at": 1_900_000_000u64}},
        {"say": "Claude AI usage limit reached|1900000000"}
    ]}]})));
    let mut s = backend()
        .start(env.opts(Mode::ReadWrite), Arc::new(AllowAll))
        .await
        .unwrap();
    let (events, r) = turn(s.as_mut(), "go").await;
    r.unwrap();
    let waits: Vec<(String, String)> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::RateLimited { until, reason, .. } => Some((until.clone(), reason.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(waits.len(), 2, "{waits:?}");
    assert_eq!(waits[0].0, "2030-03-17T17:46:40Z");
    assert!(waits[0].1.contains("five_hour"));
    assert_eq!(waits[1].0, "2030-03-17T17:46:40Z");
}

/// Odd but well-formed JSON is tolerated or refused with a typed error; never a panic
/// (a panicking driver would close the session without a reason).
#[tokio::test]
async fn odd_lines_give_typed_errors_or_are_ignored() {
    let cases: &[(&str, bool)] = &[
        (r#"{"type":"assistant"}"#, true),
        (r#"{"type":5}"#, true),
        (r#"{"no_type":true}"#, true),
        (r#"[]"#, true),
        (r#"{"type":"control_request"}"#, true),
        (
            r#"{"type":"control_request","request_id":"r1","request":{"subtype":"can_use_tool"}}"#,
            false,
        ),
        (
            r#"{"type":"user","message":{"content":[{"type":"tool_result"}]}}"#,
            false,
        ),
        (
            r#"{"type":"assistant","message":{"content":[{"type":"tool_use"},{"type":"text"},{"type":"image"}]}}"#,
            false,
        ),
        (r#"{"type":"system","subtype":"init"}"#, false),
        (
            r#"{"type":"rate_limit_event","rate_limit_info":"x"}"#,
            false,
        ),
        (r#"{"type":"control_cancel_request"}"#, false),
        (r#"{"type":"some_future_message","x":[1,2,3]}"#, false),
    ];
    for (line, malformed) in cases {
        let env = Env::new(&scenario(
            json!({"turns": [{"steps": [{"raw": line}, {"say": "after"}]}]}),
        ));
        let gate = RecordingGate::new(vec![PermissionDecision::deny("no")]);
        let mut s = backend()
            .start(env.opts(Mode::ReadWrite), gate)
            .await
            .unwrap();
        s.send_turn("go").await.unwrap();
        let mut got_malformed = false;
        let mut completed = false;
        while let Ok(Some(ev)) =
            tokio::time::timeout(std::time::Duration::from_secs(5), s.next_event()).await
        {
            match ev {
                Err(AgentError::MalformedOutput { .. }) => {
                    got_malformed = true;
                    break;
                }
                Err(other) => panic!("{line}: unexpected error {other:?}"),
                Ok(AgentEvent::TurnCompleted { .. }) => {
                    completed = true;
                    break;
                }
                Ok(_) => {}
            }
        }
        if *malformed {
            assert!(got_malformed, "{line}: expected MalformedOutput");
        } else {
            // The bare can_use_tool line is answered by the gate; the fake (strictly) exits
            // on a response it did not ask for, so only require no malformed error there.
            assert!(!got_malformed, "{line}: should be tolerated");
            if !line.contains("can_use_tool") {
                assert!(completed, "{line}: the turn should complete");
            }
        }
    }
}

/// An assistant message as Claude Code writes it: one content block of model reply
/// `id`, with the reply's usage so far.
fn assistant_line(id: &str, text: &str, usage: serde_json::Value) -> serde_json::Value {
    json!({"raw": json!({"type": "assistant", "message": {"id": id, "type": "message",
        "role": "assistant", "model": "claude-sonnet-4-5-20250929",
        "content": [{"type": "text", "text": text}], "stop_reason": null, "usage": usage},
        "parent_tool_use_id": null, "session_id": null}).to_string()})
}

#[tokio::test]
async fn the_running_turns_spend_is_reported_per_model_call_and_the_result_stays_the_count() {
    // Reply A comes as two messages (two content blocks) repeating its input counts;
    // reply B is the second model call.
    let env = Env::new(&scenario(json!({"turns": [{
        "steps": [
            assistant_line("msg_A", "Looking.", json!({"input_tokens": 100, "cache_creation_input_tokens": 50, "cache_read_input_tokens": 1000, "output_tokens": 1})),
            assistant_line("msg_A", "Still looking.", json!({"input_tokens": 100, "cache_creation_input_tokens": 50, "cache_read_input_tokens": 1000, "output_tokens": 40})),
            assistant_line("msg_B", "Done.", json!({"input_tokens": 10, "cache_read_input_tokens": 1200, "output_tokens": 30})),
        ],
        "result": "Done.",
        "usage": {"input_tokens": 170, "output_tokens": 71, "cached_input_tokens": 2200},
        "cost_usd": 0.05
    }]})));
    let b = ClaudeBackend::new(ClaudeConfig {
        bin: Some(fake_bin("fake-claude")),
        prices: gaffer_agents::accounting::PriceTable::list_prices(),
        ..Default::default()
    });
    let mut s = b
        .start(env.opts(Mode::ReadWrite), Arc::new(AllowAll))
        .await
        .unwrap();
    let (events, res) = turn(s.as_mut(), "go").await;
    let res = res.unwrap();
    let so_far: Vec<(u64, u64, u64, f64)> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::UsageSoFar { usage } => Some((
                usage.input_tokens,
                usage.output_tokens,
                usage.cached_input_tokens,
                usage.cost_usd.unwrap(),
            )),
            _ => None,
        })
        .collect();
    // Sonnet 4.5: $3 in, $15 out, $0.30 cached per million tokens.
    let usd = |i: f64, o: f64, c: f64| (i * 3.0 + o * 15.0 + c * 0.3) / 1e6;
    let expected = [
        (150, 1, 1000, usd(150.0, 1.0, 1000.0)),
        (150, 40, 1000, usd(150.0, 40.0, 1000.0)),
        (160, 70, 2200, usd(160.0, 70.0, 2200.0)),
    ];
    assert_eq!(so_far.len(), expected.len(), "{so_far:?}");
    for (got, want) in so_far.iter().zip(expected) {
        assert_eq!((got.0, got.1, got.2), (want.0, want.1, want.2));
        assert!((got.3 - want.3).abs() < 1e-12, "{got:?} vs {want:?}");
    }
    // What counts is the result's, as before: the turn's one `Usage` and its result.
    let counted: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Usage { usage } => Some(*usage),
            _ => None,
        })
        .collect();
    assert_eq!(counted, vec![res.usage]);
    assert_eq!(
        (
            res.usage.input_tokens,
            res.usage.output_tokens,
            res.usage.cached_input_tokens,
            res.usage.cost_usd
        ),
        (170, 71, 2200, Some(0.05))
    );
    // The spend so far comes before the turn's count, never after it.
    let last_so_far = events
        .iter()
        .rposition(|e| matches!(e, AgentEvent::UsageSoFar { .. }));
    let count = events
        .iter()
        .position(|e| matches!(e, AgentEvent::Usage { .. }));
    assert!(last_so_far < count, "{events:?}");
}

/// What a session that must stay local is started with: no switch to Bedrock, Vertex
/// or Foundry and no AWS or Google Cloud credential, even named by its own variables;
/// Claude Code's telemetry, error reports and update checks off; only the user's
/// (gaffer's private) settings read, and the checked endpoint pinned over them.
#[tokio::test]
async fn a_local_only_session_gets_no_cloud_switch_or_credential_and_no_telemetry() {
    let cloud = [
        ("CLAUDE_CODE_USE_BEDROCK", "1"),
        ("ANTHROPIC_BEDROCK_BASE_URL", "https://bedrock.example"),
        ("CLAUDE_CODE_USE_VERTEX", "1"),
        ("ANTHROPIC_VERTEX_PROJECT_ID", "proj"),
        ("CLOUD_ML_REGION", "us-east5"),
        ("AWS_SECRET_ACCESS_KEY", "s3cret"),
        ("AWS_PROFILE", "prod"),
        ("GOOGLE_APPLICATION_CREDENTIALS", "/keys/sa.json"),
    ];
    let started = |local_only: bool| async move {
        let env = Env::new(&scenario(json!({"turns": [{"steps": [{"say": "hi"}]}]})));
        let mut opts = env.opts(Mode::ReadOnly);
        opts.env.extend(
            cloud
                .iter()
                .chain(&[("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")])
                .map(|(k, v)| (k.to_string(), v.to_string())),
        );
        opts.local_only = local_only;
        let mut s = backend().start(opts, Arc::new(AllowAll)).await.unwrap();
        let (_, res) = turn(s.as_mut(), "hello").await;
        res.unwrap();
        let line = |what: &str| {
            env.log()
                .into_iter()
                .find(|l| l.starts_with(&format!("fake-claude {what} ")))
                .unwrap()
        };
        let names = line("env");
        let names: Vec<String> = names
            .split_once("names=")
            .unwrap()
            .1
            .split(',')
            .map(str::to_owned)
            .collect();
        (names, line("spawn"))
    };

    let (names, spawn) = started(true).await;
    for (gone, _) in cloud {
        assert!(
            !names.iter().any(|n| n == gone),
            "{gone} reached a local session: {names:?}"
        );
    }
    for kept in [
        "ANTHROPIC_BASE_URL",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
        "DISABLE_TELEMETRY",
        "DISABLE_ERROR_REPORTING",
        "DISABLE_AUTOUPDATER",
    ] {
        assert!(names.iter().any(|n| n == kept), "{kept} missing: {names:?}");
    }
    let args: Vec<String> = serde_json::from_str(spawn.split_once("args=").unwrap().1).unwrap();
    assert!(
        args.contains(&"--setting-sources=user".to_owned()),
        "{args:?}"
    );
    let settings = args
        .iter()
        .find_map(|a| a.strip_prefix("--settings="))
        .unwrap_or_else(|| panic!("no --settings in {args:?}"));
    let pinned: serde_json::Value = serde_json::from_str(settings).unwrap();
    assert_eq!(pinned["env"]["ANTHROPIC_BASE_URL"], "http://127.0.0.1:9");
    assert_eq!(pinned["env"]["CLAUDE_CODE_USE_BEDROCK"], "0");
    assert_eq!(pinned["env"]["CLAUDE_CODE_USE_VERTEX"], "0");
    assert_eq!(pinned["env"]["CLAUDE_CODE_USE_FOUNDRY"], "0");
    assert_eq!(
        pinned["env"]["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"],
        "1"
    );
    assert_eq!(pinned["env"]["DISABLE_TELEMETRY"], "1");

    // A session free to use a cloud (a standard project) keeps what the user set.
    let (names, spawn) = started(false).await;
    for (kept, _) in cloud {
        assert!(
            names.iter().any(|n| n == kept),
            "{kept} withheld: {names:?}"
        );
    }
    assert!(!spawn.contains("--setting-sources"), "{spawn}");
    assert!(!names.iter().any(|n| n == "DISABLE_TELEMETRY"), "{names:?}");
}
