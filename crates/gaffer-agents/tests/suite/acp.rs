use std::sync::Arc;

use gaffer_agents::acp::{AcpBackend, AcpConfig};
use gaffer_agents::{
    AgentBackend, AgentError, AgentEvent, AllowAll, Mode, PermissionDecision, TurnStatus,
};
use gaffer_testkit::bins::fake_bin;
use serde_json::json;

use super::support::*;

fn backend() -> AcpBackend {
    AcpBackend::new(AcpConfig::command(
        "fake-acp",
        fake_bin("fake-acp"),
        vec!["--acp".into()],
    ))
}

#[tokio::test]
async fn permission_allowed_then_denied_and_updates_normalized() {
    let env = Env::new(&scenario(
        json!({"turns": [{"expect_prompt_contains": "You are the owner.\n\ndo it", "steps": [
            {"say": "Let me "}, {"say": "work."},
            {"tool": {"name": "Run tests", "input": {"command": "cargo test"}, "output": "passed"}},
            {"tool": {"name": "Edit file", "write": {"path": "x.txt", "content": "X"}, "repeat_request": true}}
        ]}]}),
    ));
    let gate = RecordingGate::new(vec![
        PermissionDecision::allow(),
        PermissionDecision::deny("no"),
    ]);
    let mut s = backend()
        .start(env.opts(Mode::ReadWrite), gate.clone())
        .await
        .unwrap();
    let (events, r) = turn(s.as_mut(), "do it").await;
    let r = r.unwrap();
    assert_eq!(r.status, TurnStatus::Completed);
    assert_eq!(r.text, "Let me work.");
    let seen = gate.seen();
    assert_eq!(
        seen.len(),
        2,
        "repeated request for the same tool call is decided once"
    );
    assert_eq!(seen[0].tool_name, "Run tests");
    assert_eq!(seen[0].input, json!({"command": "cargo test"}));
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
            ("passed".to_string(), false),
            ("rejected by the user".to_string(), true)
        ]
    );
    assert_eq!(env.log_count("fake-acp exec"), 1);
    assert!(!env.ws.join("x.txt").exists());
    // The role prompt is sent with the first prompt (ACP has no system prompt).
    let spawn = env.log().into_iter().find(|l| l.contains("spawn")).unwrap();
    assert!(
        spawn.contains("role=owner") && spawn.contains("--acp"),
        "{spawn}"
    );
}

#[tokio::test]
async fn resume_with_load_session_and_vanished_session() {
    let env = Env::new(&scenario(json!({"load_session": true, "turns": [
        {"steps": [{"say": "one"}]},
        {"expect_prompt_contains": "again", "steps": [{"say": "two"}]}
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
    let r = turn(s.as_mut(), "again").await.1.unwrap();
    assert_eq!(
        r.text, "two",
        "history replay must not leak into the new turn"
    );
    let err = b
        .resume(env.opts(Mode::ReadWrite), "sess_gone", Arc::new(AllowAll))
        .await
        .err()
        .unwrap();
    assert!(matches!(err, AgentError::SessionGone { .. }), "{err:?}");
    assert_eq!(
        env.log_count("session/new"),
        1,
        "no new conversation on a failed resume"
    );
}

#[tokio::test]
async fn resume_without_load_session_capability_is_refused() {
    let env = Env::new(&scenario(json!({"turns": [{"steps": [{"say": "one"}]}]})));
    let err = backend()
        .resume(env.opts(Mode::ReadWrite), "sess_x", Arc::new(AllowAll))
        .await
        .err()
        .unwrap();
    match err {
        AgentError::SessionGone { detail, .. } => assert!(detail.contains("loadSession")),
        other => panic!("{other:?}"),
    }
    assert_eq!(env.log_count("session/new"), 0);
}

#[tokio::test]
async fn malformed_line_exit_and_cancel() {
    let env = Env::new(&scenario(json!({"turns": [{"steps": [{"raw": "[1,2"}]}]})));
    let mut s = backend()
        .start(env.opts(Mode::ReadWrite), Arc::new(AllowAll))
        .await
        .unwrap();
    assert!(matches!(
        turn(s.as_mut(), "x").await.1,
        Err(AgentError::MalformedOutput { .. })
    ));

    let env = Env::new(&scenario(json!({"turns": [{"steps": [{"exit": 4}]}]})));
    let mut s = backend()
        .start(env.opts(Mode::ReadWrite), Arc::new(AllowAll))
        .await
        .unwrap();
    assert!(matches!(
        turn(s.as_mut(), "x").await.1,
        Err(AgentError::ExitedMidTurn { .. })
    ));

    let env = Env::new(&scenario(
        json!({"turns": [{"steps": [{"tool": {"name": "Run", "input": {}}}]}]}),
    ));
    let (gate, mut rx) = gaffer_agents::ChannelGate::new();
    let mut s = backend()
        .start(env.opts(Mode::ReadWrite), Arc::new(gate))
        .await
        .unwrap();
    s.send_turn("go").await.unwrap();
    let _p = rx.recv().await.unwrap();
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
    assert_eq!(env.log_count("fake-acp exec"), 0);
}
