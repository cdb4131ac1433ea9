use std::sync::Arc;
use std::time::{Duration, Instant};

use gaffer_agents::llm::{ApiKind, ProviderConfig};
use gaffer_agents::toolloop::{BuiltinBackend, BuiltinConfig};
use gaffer_agents::{
    AgentBackend, AgentError, AgentEvent, AllowAll, Mode, PermissionDecision, TurnStatus,
};
use gaffer_testkit::llm::FakeLlmServer;
use serde_json::json;

use super::support::*;

fn provider(server: &FakeLlmServer, api: ApiKind) -> ProviderConfig {
    ProviderConfig {
        api,
        name: match api {
            ApiKind::OpenAiChat => "openai".into(),
            ApiKind::AnthropicMessages => "anthropic".into(),
        },
        base_url: match api {
            ApiKind::OpenAiChat => server.openai_base(),
            ApiKind::AnthropicMessages => server.anthropic_base(),
        },
        api_key: Some("sk-test-abcdefghijklmnopqrstuvwx".into()),
        model: "fake-model".into(),
        max_tokens: 1024,
        pricing: Some(gaffer_agents::accounting::Pricing {
            input_per_mtok: 1_000_000.0,
            output_per_mtok: 0.0,
            cached_input_per_mtok: 0.0,
        }),
        timeout: Duration::from_secs(20),
    }
}

#[tokio::test]
async fn openai_tool_loop_with_approval_allowed_then_denied() {
    let s = scenario(json!({"llm": [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "big.txt"}}], "usage": {"input_tokens": 10, "output_tokens": 1}},
        {"expect_request_contains": "start_line", "tool_calls": [{"name": "write_file", "arguments": {"path": "out/new.txt", "content": "hello"}}], "usage": {"input_tokens": 20, "output_tokens": 2}},
        {"tool_calls": [{"name": "run", "arguments": {"argv": ["touch", "allowed.txt"]}}]},
        {"tool_calls": [{"name": "run", "arguments": {"argv": ["touch", "denied.txt"]}}]},
        {"expect_request_contains": "denied by the approver: no", "tool_calls": [{"name": "finish", "arguments": {"summary": "all done"}}]}
    ]}));
    let server = FakeLlmServer::start(&s).await.unwrap();
    let env = Env::new(&s);
    std::fs::write(env.ws.join("big.txt"), "x".repeat(70_000)).unwrap();
    let gate = RecordingGate::new(vec![
        PermissionDecision::allow(),
        PermissionDecision::deny("no"),
    ]);
    let b = BuiltinBackend::new(BuiltinConfig::new(provider(&server, ApiKind::OpenAiChat)));
    let mut sess = b
        .start(env.opts(Mode::ReadWrite), gate.clone())
        .await
        .unwrap();
    let (events, r) = turn(sess.as_mut(), "build it").await;
    let r = r.unwrap();
    assert_eq!(r.status, TurnStatus::Completed);
    assert_eq!(r.text, "all done");
    assert_eq!(r.usage.input_tokens, 30);
    assert_eq!(r.usage.cost_usd, Some(30.0));
    assert_eq!(gate.seen().len(), 2);
    assert!(env.ws.join("allowed.txt").exists());
    assert!(!env.ws.join("denied.txt").exists());
    assert_eq!(
        std::fs::read_to_string(env.ws.join("out/new.txt")).unwrap(),
        "hello"
    );
    assert!(events
        .iter()
        .any(|e| matches!(e, AgentEvent::FileChange { path, .. } if path == "out/new.txt")));
    assert_eq!(server.remaining(), 0);
    // The key never appears in what the session emits.
    assert!(!format!("{events:?}").contains("sk-test-abcdefghijklmnopqrstuvwx"));
}

#[tokio::test]
async fn anthropic_429_with_retry_after_waits_visibly_then_succeeds() {
    let s = scenario(json!({"llm": [
        {"status": 429, "retry_after": 1},
        {"text": "hello after the wait", "usage": {"input_tokens": 3, "output_tokens": 4, "cached_input_tokens": 2}}
    ]}));
    let server = FakeLlmServer::start(&s).await.unwrap();
    let env = Env::new(&s);
    let b = BuiltinBackend::new(BuiltinConfig::new(provider(
        &server,
        ApiKind::AnthropicMessages,
    )));
    let mut sess = b
        .start(env.opts(Mode::ReadOnly), Arc::new(AllowAll))
        .await
        .unwrap();
    let start = Instant::now();
    let (events, r) = turn(sess.as_mut(), "hi").await;
    let r = r.unwrap();
    assert!(
        start.elapsed() >= Duration::from_secs(1),
        "Retry-After not honoured"
    );
    assert_eq!(r.text, "hello after the wait");
    assert_eq!(r.usage.cached_input_tokens, 2);
    let limited: Vec<&AgentEvent> = events
        .iter()
        .filter(|e| matches!(e, AgentEvent::RateLimited { .. }))
        .collect();
    assert_eq!(limited.len(), 1);
    if let AgentEvent::RateLimited {
        until,
        reason,
        provider,
    } = limited[0]
    {
        assert_eq!(reason, "429");
        assert_eq!(provider, "anthropic");
        assert!(humantime::parse_rfc3339(until).is_ok(), "{until}");
    }
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn persistent_429_gives_up_with_a_typed_error() {
    let replies: Vec<_> = (0..3)
        .map(|_| json!({"status": 429, "retry_after": 0}))
        .collect();
    let s = scenario(json!({"llm": replies}));
    let server = FakeLlmServer::start(&s).await.unwrap();
    let env = Env::new(&s);
    let mut cfg = BuiltinConfig::new(provider(&server, ApiKind::OpenAiChat));
    cfg.max_retries = 2;
    let mut sess = BuiltinBackend::new(cfg)
        .start(env.opts(Mode::ReadOnly), Arc::new(AllowAll))
        .await
        .unwrap();
    let (_, r) = turn(sess.as_mut(), "hi").await;
    assert!(
        matches!(r, Err(AgentError::RateLimited { attempts: 3, .. })),
        "{r:?}"
    );
}

/// A session another agent can take over from (`max_retry_wait`) does not wait out a
/// retry-after longer than that: the turn ends at once with the wait asked.
#[tokio::test]
async fn a_retry_after_past_the_sessions_limit_ends_the_turn_at_once() {
    let s = scenario(json!({"llm": [{"status": 429, "retry_after": 3600}, {"text": "never"}]}));
    let server = FakeLlmServer::start(&s).await.unwrap();
    let env = Env::new(&s);
    let b = BuiltinBackend::new(BuiltinConfig::new(provider(
        &server,
        ApiKind::AnthropicMessages,
    )));
    let mut opts = env.opts(Mode::ReadOnly);
    opts.max_retry_wait = Some(Duration::from_secs(60));
    let mut sess = b.start(opts, Arc::new(AllowAll)).await.unwrap();
    let start = Instant::now();
    let (_, r) = turn(sess.as_mut(), "hi").await;
    assert!(
        matches!(
            r,
            Err(AgentError::RetryAfterTooLong {
                retry_after_secs: 3600,
                max_secs: 60,
                ..
            })
        ),
        "{r:?}"
    );
    assert!(start.elapsed() < Duration::from_secs(600));
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn identical_failing_call_is_detected_and_ends_the_turn() {
    let call = json!({"tool_calls": [{"name": "read_file", "arguments": {"path": "missing.txt"}}]});
    let s = scenario(json!({"llm": [call.clone(), call.clone(), call.clone(), {"text": "never"}]}));
    let server = FakeLlmServer::start(&s).await.unwrap();
    let env = Env::new(&s);
    let b = BuiltinBackend::new(BuiltinConfig::new(provider(
        &server,
        ApiKind::AnthropicMessages,
    )));
    let mut sess = b
        .start(env.opts(Mode::ReadOnly), Arc::new(AllowAll))
        .await
        .unwrap();
    let (events, r) = turn(sess.as_mut(), "read it").await;
    let r = r.unwrap();
    assert_eq!(r.status, TurnStatus::RepeatedFailure);
    assert!(r.reason.unwrap().contains("read_file"));
    assert_eq!(server.remaining(), 1, "the loop must stop after the bound");
    let outputs: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolResult { output, .. } => Some(output.clone()),
            _ => None,
        })
        .collect();
    assert!(!outputs[0].contains("failed"), "{}", outputs[0]);
    assert!(outputs[1].contains("failed 2 times"), "{}", outputs[1]);
    // The model was told on its next request.
    assert!(server.requests()[2].to_string().contains("failed 2 times"));
}

#[tokio::test]
async fn failing_patch_in_the_loop_is_an_observation_and_file_is_unchanged() {
    let s = scenario(json!({"llm": [
        {"tool_calls": [{"name": "apply_patch", "arguments": {"patch": "--- a/f.txt\n+++ b/f.txt\n@@ -1,1 +1,1 @@\n-nope\n+yes\n"}}]},
        {"expect_request_contains": "does not apply", "text": "I will re-read the file."}
    ]}));
    let server = FakeLlmServer::start(&s).await.unwrap();
    let env = Env::new(&s);
    std::fs::write(env.ws.join("f.txt"), "original\n").unwrap();
    let b = BuiltinBackend::new(BuiltinConfig::new(provider(&server, ApiKind::OpenAiChat)));
    let mut sess = b
        .start(env.opts(Mode::ReadWrite), Arc::new(AllowAll))
        .await
        .unwrap();
    let (_, r) = turn(sess.as_mut(), "patch").await;
    assert_eq!(r.unwrap().status, TurnStatus::Completed);
    assert_eq!(
        std::fs::read_to_string(env.ws.join("f.txt")).unwrap(),
        "original\n"
    );
}

#[tokio::test]
async fn builtin_resume_needs_a_saved_transcript() {
    let s = scenario(
        json!({"llm": [{"text": "one"}, {"expect_request_contains": "first question", "text": "two"}]}),
    );
    let server = FakeLlmServer::start(&s).await.unwrap();
    let env = Env::new(&s);
    let mut cfg = BuiltinConfig::new(provider(&server, ApiKind::OpenAiChat));
    cfg.transcript_dir = Some(env.state.clone());
    let b = BuiltinBackend::new(cfg);
    let mut sess = b
        .start(env.opts(Mode::ReadOnly), Arc::new(AllowAll))
        .await
        .unwrap();
    turn(sess.as_mut(), "first question").await.1.unwrap();
    let id = sess.record().session_id;
    sess.shutdown().await.unwrap();
    let mut sess = b
        .resume(env.opts(Mode::ReadOnly), &id, Arc::new(AllowAll))
        .await
        .unwrap();
    assert_eq!(turn(sess.as_mut(), "second").await.1.unwrap().text, "two");
    let err = b
        .resume(
            env.opts(Mode::ReadOnly),
            "not-a-session",
            Arc::new(AllowAll),
        )
        .await
        .err()
        .unwrap();
    assert!(matches!(err, AgentError::SessionGone { .. }));
}

#[tokio::test]
async fn fake_llm_refuses_what_the_real_apis_refuse() {
    let s = scenario(json!({"llm": [{"text": "unused"}]}));
    let server = FakeLlmServer::start(&s).await.unwrap();
    let http = reqwest::Client::new();
    // A tool result without its call.
    let r = http
        .post(format!("{}/chat/completions", server.openai_base()))
        .json(&json!({"model": "m", "messages": [
            {"role": "user", "content": "hi"},
            {"role": "tool", "tool_call_id": "call_x", "content": "out"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    // Anthropic without x-api-key, and without max_tokens.
    let r = http
        .post(format!("{}/v1/messages", server.anthropic_base()))
        .header("anthropic-version", "2023-06-01")
        .json(&json!({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = http
        .post(format!("{}/v1/messages", server.anthropic_base()))
        .header("anthropic-version", "2023-06-01")
        .header("x-api-key", "k")
        .json(&json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert_eq!(
        server.remaining(),
        1,
        "refused requests consume no scripted reply"
    );
}
