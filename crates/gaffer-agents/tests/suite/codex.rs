use std::sync::Arc;

use gaffer_agents::codex::{CodexBackend, CodexConfig};
use gaffer_agents::{
    AgentBackend, AgentError, AgentEvent, AllowAll, Mode, PermissionDecision, TurnStatus,
};
use gaffer_testkit::bins::fake_bin;
use serde_json::json;

use super::support::*;

fn backend() -> CodexBackend {
    CodexBackend::new(CodexConfig {
        bin: Some(fake_bin("fake-codex")),
        ..Default::default()
    })
}

#[tokio::test]
async fn command_accepted_then_file_change_declined() {
    let env = Env::new(&scenario(json!({"turns": [{
        "steps": [
            {"tool": {"name": "command", "input": {"command": "make test"}, "output": "tests ok"}},
            {"tool": {"name": "file_change", "write": {"path": "notes.txt", "content": "x"}}},
            {"say": "done"}
        ],
        "usage": {"input_tokens": 100, "output_tokens": 9, "cached_input_tokens": 7}
    }]})));
    let gate = RecordingGate::new(vec![
        PermissionDecision::allow(),
        PermissionDecision::deny("no writes"),
    ]);
    let mut s = backend()
        .start(env.opts(Mode::ReadWrite), gate.clone())
        .await
        .unwrap();
    let (events, r) = turn(s.as_mut(), "go").await;
    let r = r.unwrap();
    assert_eq!(r.status, TurnStatus::Completed);
    assert_eq!(r.text, "done");
    assert_eq!(
        (
            r.usage.input_tokens,
            r.usage.cached_input_tokens,
            r.usage.output_tokens
        ),
        (100, 7, 9)
    );
    let seen = gate.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].tool_name, "commandExecution");
    assert_eq!(seen[0].input["command"], "make test");
    assert_eq!(seen[1].tool_name, "fileChange");
    assert_eq!(seen[1].input["changes"][0]["path"], "notes.txt");
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
            ("tests ok".to_string(), false),
            ("declined".to_string(), true)
        ]
    );
    assert_eq!(env.log_count("fake-codex exec make test"), 1);
    assert!(!env.ws.join("notes.txt").exists());
    let start = env
        .log()
        .into_iter()
        .find(|l| l.contains("thread/start"))
        .unwrap();
    assert!(
        start.contains("\"approvalPolicy\":\"untrusted\""),
        "{start}"
    );
    assert!(start.contains("\"sandbox\":\"workspace-write\""), "{start}");
    assert!(
        start.contains("\"developerInstructions\":\"You are the owner.\""),
        "{start}"
    );
    assert!(env.log_count("role=owner task=task-42 project=demo") == 1);
    let rec = s.record();
    assert!(rec.session_id.starts_with("thr_") && rec.verified);
}

#[tokio::test]
async fn read_only_uses_the_read_only_sandbox_and_allowed_file_change_is_written() {
    let env = Env::new(&scenario(json!({"turns": [{"steps": [
        {"tool": {"name": "file_change", "write": {"path": "a.txt", "content": "A"}, "repeat_request": true}}
    ]}]})));
    let gate = RecordingGate::new(vec![PermissionDecision::allow()]);
    let mut s = backend()
        .start(env.opts(Mode::ReadOnly), gate.clone())
        .await
        .unwrap();
    let (events, r) = turn(s.as_mut(), "go").await;
    r.unwrap();
    assert_eq!(gate.seen().len(), 1, "a repeated request is decided once");
    assert!(events.iter().any(|e| matches!(e, AgentEvent::FileChange { path, kind, .. } if path == "a.txt" && kind == "add")));
    assert_eq!(std::fs::read_to_string(env.ws.join("a.txt")).unwrap(), "A");
    let start = env
        .log()
        .into_iter()
        .find(|l| l.contains("thread/start"))
        .unwrap();
    assert!(start.contains("\"sandbox\":\"read-only\""), "{start}");
}

#[tokio::test]
async fn resume_existing_thread_and_usage_is_per_turn() {
    let env = Env::new(&scenario(json!({"turns": [
        {"steps": [{"say": "one"}], "usage": {"input_tokens": 10, "output_tokens": 1}},
        {"expect_prompt_contains": "again", "steps": [{"say": "two"}], "usage": {"input_tokens": 20, "output_tokens": 2}},
        {"steps": [{"say": "three"}], "usage": {"input_tokens": 5, "output_tokens": 5}}
    ]})));
    let b = backend();
    let mut s = b
        .start(env.opts(Mode::ReadWrite), Arc::new(AllowAll))
        .await
        .unwrap();
    turn(s.as_mut(), "first").await.1.unwrap();
    let id = s.record().session_id;
    s.shutdown().await.unwrap();
    let mut s = b
        .resume(env.opts(Mode::ReadWrite), &id, Arc::new(AllowAll))
        .await
        .unwrap();
    assert_eq!(s.record().session_id, id);
    let r = turn(s.as_mut(), "again").await.1.unwrap();
    assert_eq!(r.text, "two");
    assert_eq!(r.usage.input_tokens, 20);
    let r = turn(s.as_mut(), "more").await.1.unwrap();
    assert_eq!(r.text, "three");
    assert_eq!(
        r.usage.input_tokens, 5,
        "usage must be this turn's, not the thread total"
    );
}

#[tokio::test]
async fn resume_of_vanished_thread_is_a_clear_error() {
    let env = Env::new(&scenario(json!({"turns": []})));
    let err = backend()
        .resume(env.opts(Mode::ReadWrite), "thr_gone", Arc::new(AllowAll))
        .await
        .err()
        .unwrap();
    match &err {
        AgentError::SessionGone {
            session_id, detail, ..
        } => {
            assert_eq!(session_id, "thr_gone");
            assert!(detail.contains("no rollout found"), "{detail}");
        }
        other => panic!("expected SessionGone, got {other:?}"),
    }
    assert_eq!(
        env.log_count("thread/start"),
        0,
        "must not start a new conversation"
    );
}

#[tokio::test]
async fn malformed_line_and_exit_mid_turn_are_typed_errors() {
    let env = Env::new(&scenario(
        json!({"turns": [{"steps": [{"say": "a"}, {"raw": "garbage"}]}]}),
    ));
    let mut s = backend()
        .start(env.opts(Mode::ReadWrite), Arc::new(AllowAll))
        .await
        .unwrap();
    let (_, r) = turn(s.as_mut(), "x").await;
    assert!(
        matches!(r, Err(AgentError::MalformedOutput { .. })),
        "{r:?}"
    );

    let env = Env::new(&scenario(
        json!({"turns": [{"steps": [{"say": "a"}, {"exit": 9}]}]}),
    ));
    let mut s = backend()
        .start(env.opts(Mode::ReadWrite), Arc::new(AllowAll))
        .await
        .unwrap();
    let (_, r) = turn(s.as_mut(), "x").await;
    match r {
        Err(AgentError::ExitedMidTurn { status, .. }) => assert!(status.contains('9')),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn interrupt_stops_the_turn() {
    let env = Env::new(&scenario(json!({"turns": [{"steps": [
        {"tool": {"name": "command", "input": {"command": "sleep 100"}}}
    ]}]})));
    let (gate, mut rx) = gaffer_agents::ChannelGate::new();
    let mut s = backend()
        .start(env.opts(Mode::ReadWrite), Arc::new(gate))
        .await
        .unwrap();
    s.send_turn("go").await.unwrap();
    let _pending = rx.recv().await.unwrap();
    s.interrupt().await.unwrap();
    let r = loop {
        if let AgentEvent::TurnCompleted { result } =
            tokio::time::timeout(std::time::Duration::from_secs(20), s.next_event())
                .await
                .unwrap()
                .unwrap()
                .unwrap()
        {
            break result;
        }
    };
    assert_eq!(r.status, TurnStatus::Interrupted);
    assert_eq!(env.log_count("fake-codex exec"), 0);
}

#[test]
fn the_key_variables_of_the_users_model_providers_are_named() {
    let config = r#"
model_provider = "local"
[model_providers.local]
base_url = "http://127.0.0.1:8080/v1"
env_key = "LOCAL_LLM_KEY"
[model_providers.azure]
env_key = "MY_AZURE_KEY"
[model_providers.nokey]
base_url = "http://127.0.0.1:9/v1"
"#;
    let mut vars = gaffer_agents::codex::provider_key_vars(config);
    vars.sort();
    assert_eq!(vars, ["LOCAL_LLM_KEY", "MY_AZURE_KEY"]);
    assert!(gaffer_agents::codex::provider_key_vars("model_providers = [").is_empty());
}

/// Confined by gaffer's Landlock layer, Codex is started without its own sandbox
/// (bubblewrap cannot start inside a Landlock domain: every command it sandboxed failed)
/// and told what a refusal means; its approval policy stays `untrusted`. Unconfined,
/// its own sandbox is kept.
#[tokio::test]
async fn inside_gaffers_sandbox_codex_runs_without_its_own_and_is_told_why() {
    if !gaffer_agents::sandbox::support().filesystem() {
        eprintln!("skipping: {}", gaffer_agents::sandbox::support().describe());
        return;
    }
    let env = Env::new(&scenario(json!({"turns": [{"steps": [{"say": "done"}]}]})));
    let mut opts = env.opts(Mode::ReadOnly);
    opts.sandbox = env.required_sandbox();
    let mut s = backend().start(opts, Arc::new(AllowAll)).await.unwrap();
    let (_, r) = turn(s.as_mut(), "go").await;
    assert_eq!(r.unwrap().status, TurnStatus::Completed);
    let start = env
        .log()
        .into_iter()
        .find(|l| l.contains("thread/start"))
        .unwrap();
    assert!(
        start.contains("\"sandbox\":\"danger-full-access\""),
        "{start}"
    );
    assert!(
        start.contains("\"approvalPolicy\":\"untrusted\""),
        "{start}"
    );
    assert!(start.contains("You are the owner."), "{start}");
    assert!(start.contains("refused by gaffer's sandbox"), "{start}");
    assert!(start.contains("You run in gaffer's sandbox ("), "{start}");
}

/// A session that must stay local starts Codex with its analytics, feedback uploads,
/// update check and OpenTelemetry export turned off by `-c` overrides (which win over
/// its config.toml); a free one without.
#[tokio::test]
async fn a_local_only_session_turns_codexs_analytics_and_telemetry_off() {
    let spawned = |local_only: bool| async move {
        let env = Env::new(&scenario(json!({"turns": [{"steps": [{"say": "hi"}]}]})));
        let mut opts = env.opts(Mode::ReadOnly);
        opts.local_only = local_only;
        let mut s = backend().start(opts, Arc::new(AllowAll)).await.unwrap();
        let (_, r) = turn(s.as_mut(), "go").await;
        r.unwrap();
        let spawn = env
            .log()
            .into_iter()
            .find(|l| l.starts_with("fake-codex spawn"))
            .unwrap();
        spawn.split_once("args=").unwrap().1.to_owned()
    };
    let args = spawned(true).await;
    assert!(
        args.starts_with(
            "-c analytics.enabled=false -c feedback.enabled=false -c check_for_update_on_startup=false -c otel.exporter=\"none\" -c otel.trace_exporter=\"none\" -c otel.metrics_exporter=\"none\" app-server"
        ),
        "{args}"
    );
    assert_eq!(spawned(false).await, "app-server");
}
