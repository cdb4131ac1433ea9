//! A person's message steered into a running turn, and an interrupted turn, on every
//! backend against its fake (the real CLIs: `real_steer.rs`).

use std::sync::Arc;
use std::time::Duration;

use gaffer_agents::acp::{AcpBackend, AcpConfig};
use gaffer_agents::claude::{ClaudeBackend, ClaudeConfig};
use gaffer_agents::codex::{CodexBackend, CodexConfig};
use gaffer_agents::llm::{ApiKind, ProviderConfig};
use gaffer_agents::toolloop::{BuiltinBackend, BuiltinConfig};
use gaffer_agents::{
    AgentBackend, AgentEvent, AgentSession, AllowAll, Delivery, Mode, PermissionDecision,
    TurnResult, TurnStatus,
};
use gaffer_testkit::bins::fake_bin;
use gaffer_testkit::llm::FakeLlmServer;
use serde_json::json;

use super::support::*;

#[derive(Clone, Copy, Debug)]
enum Fake {
    Claude,
    Codex,
    Acp,
}

impl Fake {
    const ALL: [Fake; 3] = [Fake::Claude, Fake::Codex, Fake::Acp];

    fn backend(self) -> Box<dyn AgentBackend> {
        match self {
            Fake::Claude => Box::new(ClaudeBackend::new(ClaudeConfig {
                bin: Some(fake_bin("fake-claude")),
                ..Default::default()
            })),
            Fake::Codex => Box::new(CodexBackend::new(CodexConfig {
                bin: Some(fake_bin("fake-codex")),
                ..Default::default()
            })),
            Fake::Acp => Box::new(AcpBackend::new(AcpConfig::command(
                "fake-acp",
                fake_bin("fake-acp"),
                vec!["--acp".into()],
            ))),
        }
    }

    /// The effect-log prefix of the fake.
    fn name(self) -> &'static str {
        match self {
            Fake::Claude => "fake-claude",
            Fake::Codex => "fake-codex",
            Fake::Acp => "fake-acp",
        }
    }
}

/// Events until the assistant says `text` (the turn is then waiting mid-way).
async fn until_said(s: &mut dyn AgentSession, text: &str) -> Vec<AgentEvent> {
    let mut events = Vec::new();
    loop {
        let ev = tokio::time::timeout(Duration::from_secs(20), s.next_event())
            .await
            .expect("no event in 20 s")
            .expect("session ended")
            .expect("agent error");
        let said = matches!(&ev, AgentEvent::AssistantText { text: t } if t == text);
        events.push(ev);
        if said {
            return events;
        }
    }
}

/// Events until the turn completes, and its result.
async fn rest_of_turn(s: &mut dyn AgentSession) -> (Vec<AgentEvent>, TurnResult) {
    let mut events = Vec::new();
    loop {
        let ev = tokio::time::timeout(Duration::from_secs(20), s.next_event())
            .await
            .expect("no event in 20 s")
            .expect("session ended")
            .expect("agent error");
        if let AgentEvent::TurnCompleted { result } = ev {
            return (events, result);
        }
        events.push(ev);
    }
}

pub(super) fn deliveries(events: &[AgentEvent]) -> Vec<(String, Delivery)> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::MessageDelivered {
                message_id,
                delivery,
            } => Some((message_id.clone(), *delivery)),
            _ => None,
        })
        .collect()
}

/// The scenario: the agent says `working`, waits for a message, then answers. ACP has
/// no way into a running prompt: its prompt ends `cancelled` and the message comes as
/// the next prompt, which must carry it.
fn steered_scenario(fake: Fake) -> serde_json::Value {
    match fake {
        Fake::Acp => json!({"turns": [
            {"steps": [{"say": "working"}, "await_message"]},
            {"expect_prompt_contains": "use tabs", "steps": [{"say": "answered"}]}
        ]}),
        _ => {
            json!({"turns": [{"steps": [{"say": "working"}, "await_message", {"say": "answered"}]}]})
        }
    }
}

#[tokio::test]
async fn a_message_mid_turn_reaches_each_fake_once_and_the_turn_goes_on() {
    for fake in Fake::ALL {
        let env = Env::new(&scenario(steered_scenario(fake)));
        let mut s = fake
            .backend()
            .start(env.opts(Mode::ReadWrite), Arc::new(AllowAll))
            .await
            .unwrap();
        s.send_turn("go").await.unwrap();
        let mut events = until_said(s.as_mut(), "working").await;
        s.steer("m1", "use tabs").await.unwrap();
        let (rest, result) = rest_of_turn(s.as_mut()).await;
        events.extend(rest);
        assert_eq!(
            result.status,
            TurnStatus::Completed,
            "{fake:?}: {events:#?}"
        );
        assert_eq!(result.text, "answered", "{fake:?}");
        assert_eq!(
            deliveries(&events),
            vec![("m1".to_string(), Delivery::Live)],
            "{fake:?}: delivered once, live"
        );
        match fake {
            Fake::Acp => {
                assert_eq!(env.log_count("fake-acp cancelled for a message"), 1);
                assert_eq!(env.log_count("fake-acp turn "), 2, "one re-prompt");
            }
            _ => {
                let line = format!("{} message use tabs", fake.name());
                assert_eq!(env.log_count(&line), 1, "{fake:?}: {:?}", env.log());
                assert_eq!(env.log_count(&format!("{} turn ", fake.name())), 1);
            }
        }
        // Nothing else follows the turn (no extra turn for the message).
        let after = tokio::time::timeout(Duration::from_millis(300), s.next_event()).await;
        assert!(after.is_err(), "{fake:?}: {after:?}");
        s.shutdown().await.unwrap();
    }
}

#[tokio::test]
async fn a_message_between_turns_waits_for_the_next_turn_on_each_fake() {
    for fake in Fake::ALL {
        let env = Env::new(&scenario(json!({"turns": [{"steps": [{"say": "hi"}]}]})));
        let mut s = fake
            .backend()
            .start(env.opts(Mode::ReadWrite), Arc::new(AllowAll))
            .await
            .unwrap();
        let (_, r) = turn(s.as_mut(), "go").await;
        r.unwrap();
        s.steer("m2", "too late").await.unwrap();
        let ev = tokio::time::timeout(Duration::from_secs(10), s.next_event())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(
            ev,
            AgentEvent::MessageDelivered {
                message_id: "m2".into(),
                delivery: Delivery::NextTurn
            },
            "{fake:?}"
        );
        assert!(
            !env.log().iter().any(|l| l.contains("too late")),
            "{fake:?}: {:?}",
            env.log()
        );
        s.shutdown().await.unwrap();
    }
}

#[tokio::test]
async fn an_interrupt_stops_each_fakes_turn_keeps_its_work_and_the_session_goes_on() {
    for fake in Fake::ALL {
        let env = Env::new(&scenario(json!({"turns": [
            {"steps": [
                {"write_file": {"path": "done-so-far.txt", "content": "kept\n"}},
                {"say": "wrote"},
                "await_message",
                {"say": "never said"}
            ]},
            {"expect_prompt_contains": "go on", "steps": [{"say": "went on"}]}
        ]})));
        let mut s = fake
            .backend()
            .start(env.opts(Mode::ReadWrite), Arc::new(AllowAll))
            .await
            .unwrap();
        s.send_turn("start").await.unwrap();
        let first = until_said(s.as_mut(), "wrote").await;
        let session = first.iter().find_map(|e| match e {
            AgentEvent::SessionStarted { session_id, .. } => Some(session_id.clone()),
            _ => None,
        });
        s.interrupt().await.unwrap();
        // A message sent while the turn is stopping is not given to it.
        s.steer("m3", "after the interrupt").await.unwrap();
        let (events, r) = rest_of_turn(s.as_mut()).await;
        assert_eq!(r.status, TurnStatus::Interrupted, "{fake:?}: {events:#?}");
        assert!(!texts(&events).contains(&"never said".to_string()));
        assert_eq!(
            deliveries(&events),
            vec![("m3".to_string(), Delivery::NextTurn)],
            "{fake:?}"
        );
        assert_eq!(
            std::fs::read_to_string(env.ws.join("done-so-far.txt")).unwrap(),
            "kept\n",
            "{fake:?}: the work before the interrupt stays"
        );
        let (_, r) = turn(s.as_mut(), "go on").await;
        let r = r.unwrap();
        assert_eq!(
            (r.status, r.text.as_str()),
            (TurnStatus::Completed, "went on")
        );
        if let Some(id) = session {
            assert_eq!(r.session_id, id, "{fake:?}: the same session goes on");
        }
        s.shutdown().await.unwrap();
    }
}

/// A built-in loop session against the fake model server playing `s`, its turn
/// `build it` started, and the requests of its gate.
async fn builtin_turn(
    s: &gaffer_testkit::scenario::Scenario,
) -> (
    FakeLlmServer,
    Env,
    Box<dyn AgentSession>,
    tokio::sync::mpsc::UnboundedReceiver<gaffer_agents::PendingApproval>,
) {
    let server = FakeLlmServer::start(s).await.unwrap();
    let env = Env::new(s);
    let (gate, rx) = gaffer_agents::ChannelGate::new();
    let b = BuiltinBackend::new(BuiltinConfig::new(provider(&server)));
    let mut sess = b
        .start(env.opts(Mode::ReadWrite), Arc::new(gate))
        .await
        .unwrap();
    sess.send_turn("build it").await.unwrap();
    (server, env, sess, rx)
}

fn provider(server: &FakeLlmServer) -> ProviderConfig {
    ProviderConfig {
        api: ApiKind::OpenAiChat,
        name: "openai".into(),
        base_url: server.openai_base(),
        api_key: Some("sk-test-abcdefghijklmnopqrstuvwx".into()),
        model: "fake-model".into(),
        max_tokens: 1024,
        pricing: None,
        timeout: Duration::from_secs(20),
    }
}

#[tokio::test]
async fn the_builtin_loop_gives_a_message_to_its_next_model_call_once() {
    let s = scenario(json!({"llm": [
        {"tool_calls": [{"name": "run", "arguments": {"argv": ["touch", "a.txt"]}}]},
        {"expect_request_contains": "use tabs", "text": "answered"}
    ]}));
    let (_server, env, mut sess, mut rx) = builtin_turn(&s).await;
    // Mid-turn: the loop waits for the approval of its command.
    let pending = rx.recv().await.unwrap();
    sess.steer("m1", "use tabs").await.unwrap();
    pending.decide(PermissionDecision::allow());
    let (events, r) = rest_of_turn(sess.as_mut()).await;
    assert_eq!(r.status, TurnStatus::Completed, "{events:#?}");
    assert_eq!(r.text, "answered");
    assert_eq!(deliveries(&events), vec![("m1".into(), Delivery::Live)]);
    assert!(env.ws.join("a.txt").exists());
}

#[tokio::test]
async fn an_interrupted_builtin_turn_keeps_its_conversation() {
    let s = scenario(json!({"llm": [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "kept"}}]},
        {"tool_calls": [{"name": "run", "arguments": {"argv": ["touch", "b.txt"]}}]},
        {"expect_request_contains": "kept", "text": "went on"}
    ]}));
    let (_server, env, mut sess, mut rx) = builtin_turn(&s).await;
    let _pending = rx.recv().await.unwrap();
    sess.interrupt().await.unwrap();
    let (_, r) = rest_of_turn(sess.as_mut()).await;
    assert_eq!(r.status, TurnStatus::Interrupted);
    assert_eq!(
        std::fs::read_to_string(env.ws.join("a.txt")).unwrap(),
        "kept"
    );
    assert!(
        !env.ws.join("b.txt").exists(),
        "the interrupted call never ran"
    );
    // The next turn's model call still carries the first turn's write (`kept`).
    let (_, r) = turn(sess.as_mut(), "go on").await;
    assert_eq!(r.unwrap().text, "went on");
}
