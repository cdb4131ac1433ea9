//! A person's message reaches a real agent CLI's running turn, and the model sees it.

use std::time::Duration;

use gaffer_agents::{AgentEvent, Delivery, Mode, PermissionDecision, TurnStatus};
use gaffer_testkit::clis::Cli;
use gaffer_testkit::model::{call, say, ModelScript, ModelServer};
use gaffer_testkit::scenario::LlmReply;
use serde_json::json;

use super::real_cli::Real;
use super::steer::deliveries;
use super::support::RecordingGate;

const MESSAGE: &str = "Also add a line saying steered-by-ana.";

/// Play one turn of `cli` whose first model reply is slow; once the model has been
/// asked, steer `MESSAGE` into the turn. Returns the events and the server.
async fn steered_turn(
    cli: Cli,
    first: LlmReply,
    rest: Vec<LlmReply>,
) -> (Vec<AgentEvent>, ModelServer) {
    let mut replies = vec![first];
    replies.extend(rest);
    let server = ModelServer::start(ModelScript::new().role("owner", replies))
        .await
        .unwrap();
    let real = Real::new(cli, &server);
    let gate = RecordingGate::new(vec![PermissionDecision::allow(); 4]);
    let mut s = real
        .backend()
        .start(real.opts("owner", Mode::ReadWrite), gate)
        .await
        .unwrap();
    s.send_turn("Say hello.").await.unwrap();
    let mut events = Vec::new();
    let mut steered = false;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let ev = tokio::select! {
            ev = s.next_event() => ev,
            () = tokio::time::sleep(Duration::from_millis(20)) => {
                if !steered && !server.requests_of("owner").is_empty() {
                    steered = true;
                    s.steer("m1", MESSAGE).await.unwrap();
                }
                assert!(tokio::time::Instant::now() < deadline, "no end: {events:#?}\n{}", server.describe());
                continue;
            }
        };
        match ev {
            Some(Ok(AgentEvent::TurnCompleted { result })) => {
                eprintln!("completed: {result:?}");
                events.push(AgentEvent::TurnCompleted { result });
                break;
            }
            Some(Ok(e)) => events.push(e),
            Some(Err(e)) => panic!("{e}\n{events:#?}\n{}", server.describe()),
            None => panic!("closed\n{events:#?}"),
        }
    }
    // The message was answered inside the turn: no turn of its own follows.
    let after = tokio::time::timeout(Duration::from_secs(3), s.next_event()).await;
    assert!(after.is_err(), "after the turn: {after:?}");
    (events, server)
}

/// The model got the message in a request still carrying the owner's role prompt (an
/// agent that forgot its task on the way would not).
fn assert_model_saw_the_message(server: &ModelServer) {
    assert!(
        server
            .requests_of("owner")
            .iter()
            .any(|r| r.body.to_string().contains("steered-by-ana")),
        "{}",
        server.describe()
    );
}

fn slow(reply: LlmReply) -> LlmReply {
    LlmReply {
        delay_ms: Some(1500),
        ..reply
    }
}

#[tokio::test]
async fn real_claude_takes_a_message_mid_turn_and_the_model_sees_it() {
    let (events, server) = steered_turn(
        Cli::Claude,
        slow(call(
            "Bash",
            json!({"command": "echo hi", "description": "say hi"}),
        )),
        vec![say("first"), say("second"), say("third")],
    )
    .await;
    assert_eq!(deliveries(&events), vec![("m1".into(), Delivery::Live)]);
    assert_model_saw_the_message(&server);
    let last = events.last().unwrap();
    assert!(
        matches!(last, AgentEvent::TurnCompleted { result } if result.status == TurnStatus::Completed)
    );
}

#[tokio::test]
async fn real_codex_takes_a_message_mid_turn_and_the_model_sees_it() {
    let (events, server) = steered_turn(
        Cli::Codex,
        slow(call("exec_command", json!({"cmd": "echo hi"}))),
        vec![say("first"), say("second"), say("third")],
    )
    .await;
    assert_eq!(deliveries(&events), vec![("m1".into(), Delivery::Live)]);
    assert_model_saw_the_message(&server);
}

#[tokio::test]
async fn real_gemini_takes_a_message_by_cancel_then_prompt_and_the_model_sees_it() {
    let (events, server) = steered_turn(
        Cli::Gemini,
        slow(say("thinking")),
        vec![say("first"), say("second"), say("third")],
    )
    .await;
    assert_eq!(deliveries(&events), vec![("m1".into(), Delivery::Live)]);
    assert_model_saw_the_message(&server);
}

#[tokio::test]
async fn real_claude_answers_a_message_sent_during_its_last_model_call() {
    let (events, server) = steered_turn(
        Cli::Claude,
        slow(say("thinking")),
        vec![say("first"), say("second"), say("third")],
    )
    .await;
    assert_eq!(deliveries(&events), vec![("m1".into(), Delivery::Live)]);
    assert_model_saw_the_message(&server);
}

/// Play a turn of `cli` whose first model reply runs `command` (writing `done.txt`)
/// and whose second is slow; interrupt it while the second is asked, then play a
/// second turn in the same session. The work of the first turn stays, and the second
/// turn's model call still carries the first turn's conversation.
async fn interrupted_then_resumed(cli: Cli, command: LlmReply) {
    let server = ModelServer::start(ModelScript::new().role(
        "owner",
        vec![
            command,
            LlmReply {
                delay_ms: Some(20_000),
                ..say("never said")
            },
            say("went on"),
        ],
    ))
    .await
    .unwrap();
    let real = Real::new(cli, &server);
    let gate = RecordingGate::new(vec![PermissionDecision::allow(); 2]);
    let mut s = real
        .backend()
        .start(real.opts("owner", Mode::ReadWrite), gate)
        .await
        .unwrap();
    s.send_turn("Write done.txt, then say something.")
        .await
        .unwrap();
    let mut events = Vec::new();
    let mut interrupted = false;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let result = loop {
        let ev = tokio::select! {
            ev = s.next_event() => ev,
            () = tokio::time::sleep(Duration::from_millis(20)) => {
                if !interrupted && server.requests_of("owner").len() >= 2 {
                    interrupted = true;
                    s.interrupt().await.unwrap();
                }
                assert!(tokio::time::Instant::now() < deadline, "no end: {events:#?}\n{}", server.describe());
                continue;
            }
        };
        match ev {
            Some(Ok(AgentEvent::TurnCompleted { result })) => break result,
            Some(Ok(e)) => events.push(e),
            Some(Err(e)) => panic!("{e}\n{events:#?}\n{}", server.describe()),
            None => panic!("closed\n{events:#?}"),
        }
    };
    assert!(
        interrupted,
        "the turn ended before the interrupt: {result:?}"
    );
    assert_eq!(
        result.status,
        TurnStatus::Interrupted,
        "{result:?}\n{events:#?}"
    );
    assert_eq!(
        std::fs::read_to_string(real.ws.join("done.txt"))
            .unwrap_or_default()
            .trim(),
        "kept",
        "the work before the interrupt stays"
    );
    let (_, second) = super::support::turn(s.as_mut(), "Go on.").await;
    let second = second.unwrap_or_else(|e| panic!("{e}\n{}", server.describe()));
    assert_eq!(
        (second.status, second.text.as_str()),
        (TurnStatus::Completed, "went on"),
        "{}",
        server.describe()
    );
    let last = server.requests_of("owner").last().unwrap().body.to_string();
    assert!(
        last.contains("Write done.txt") && last.contains("Go on."),
        "the session went on from the interrupted turn: {last}"
    );
    assert!(!last.contains("never said"), "{last}");
    s.shutdown().await.unwrap();
}

#[tokio::test]
async fn real_claude_interrupted_turn_keeps_its_work_and_the_session_goes_on() {
    interrupted_then_resumed(
        Cli::Claude,
        call(
            "Bash",
            json!({"command": "echo kept > done.txt", "description": "write done.txt"}),
        ),
    )
    .await;
}

#[tokio::test]
async fn real_codex_interrupted_turn_keeps_its_work_and_the_session_goes_on() {
    interrupted_then_resumed(
        Cli::Codex,
        call("exec_command", json!({"cmd": "echo kept > done.txt"})),
    )
    .await;
}

#[tokio::test]
async fn real_gemini_interrupted_turn_keeps_its_work_and_the_session_goes_on() {
    interrupted_then_resumed(
        Cli::Gemini,
        call(
            "run_shell_command",
            json!({"command": "echo kept > done.txt", "description": "write done.txt"}),
        ),
    )
    .await;
}
