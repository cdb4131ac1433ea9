//! Issue #20 item 4: each watchdog trigger raises exactly one `stall` approval,
//! with the fake Claude Code looping, idling, overrunning, failing the same read
//! and burning tokens; the answer continues the turn, or interrupts it and the
//! note reaches the agent as the decider's message.

use super::support::*;
use gaffer_core::{Actor, ApprovalKind, Decision, Event, Stage};
use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use std::time::Duration;

const REQUEST: &str = "Add an installation section to README";

/// A world whose watchdog is `cfg` (everything else off), with the planner and
/// reviewer scripted to pass and the owner's turns as given.
async fn world(cfg: gaffer_config::Watchdog, owner: Vec<Value>) -> World {
    let w = World::build("grep -q '^## Installation' README.md", |s| {
        s.watchdog = cfg;
    })
    .await;
    w.script(
        "planner",
        vec![plan_answer(&["Add an installation section"])],
    );
    w.script("owner", owner);
    w.script("reviewer", vec![verdict(json!({ "verdict": "done" }))]);
    w
}

/// The task's stall approvals: (trigger, state).
async fn stalls(w: &World, id: &gaffer_core::TaskId) -> Vec<(String, String)> {
    w.view(id)
        .await
        .approvals
        .iter()
        .filter(|a| a.kind == "stall")
        .map(|a| {
            let d: Value = serde_json::from_str(&a.details).unwrap();
            (d["trigger"].as_str().unwrap().to_owned(), a.state.clone())
        })
        .collect()
}

fn off() -> gaffer_config::Watchdog {
    gaffer_config::Watchdog::OFF
}

#[tokio::test]
async fn a_looping_agent_raises_one_stall_and_interrupt_sends_the_note_as_its_next_turn() {
    let ls = json!({ "tool": { "name": "Bash", "input": { "command": "ls -la" }, "permission": false, "output": "README.md" } });
    let w = world(
        gaffer_config::Watchdog {
            repeated_calls: Some(3),
            ..off()
        },
        vec![
            // The same call four times, then the turn waits (as a stuck agent would).
            json!({ "steps": [ls, ls, ls, ls, { "await_message": null }] }),
            json!({
                "expect_prompt_contains": "Stop listing files",
                "steps": [{ "write_file": { "path": "README.md", "content": README_DONE } }, { "say": "wrote README.md" }],
            }),
        ],
    )
    .await;
    let id = w.task(REQUEST, true).await;
    let mut events = w.journal.subscribe();
    let run = w.spawn(&id);
    let (stall, summary, details) = next_approval(&mut events, ApprovalKind::Stall).await;
    assert_eq!(details["trigger"], "repeated_call");
    assert_eq!(details["count"], 3);
    assert!(
        summary.contains("Bash") && summary.contains("ls -la"),
        "{summary}"
    );
    decide_as_ana(
        &w,
        &stall,
        Decision::Deny,
        Some("Stop listing files; write the README now."),
    )
    .await;
    assert_eq!(finish(&w, &id, run).await, Stage::Done);
    assert_eq!(
        stalls(&w, &id).await,
        vec![("repeated_call".into(), "denied".into())]
    );
    // The interrupt and the message are the decider's, recorded like `gaffer interrupt` + `say`.
    let journal = w
        .journal
        .stream_events(&gaffer_core::StreamId(id.0.clone()), 0)
        .await
        .unwrap();
    assert!(journal
        .iter()
        .any(|e| matches!(&e.event, Event::TurnInterrupted { by, .. } if by.name == "ana")));
    let messages = w.app.messages(id.as_str()).await.unwrap();
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(messages[0].by.name, "ana");
    assert_eq!(messages[0].delivery, "next_turn", "{messages:?}");
}

#[tokio::test]
async fn an_idle_agent_raises_one_stall_and_continue_sends_the_note_into_the_turn() {
    let w = world(
        gaffer_config::Watchdog {
            idle: Some(Duration::from_secs(1)),
            ..off()
        },
        vec![json!({ "steps": [
            { "say": "thinking" },
            { "await_message": null },
            { "write_file": { "path": "README.md", "content": README_DONE } },
            { "say": "wrote README.md" },
        ] })],
    )
    .await;
    let id = w.task(REQUEST, true).await;
    let mut events = w.journal.subscribe();
    let run = w.spawn(&id);
    let (stall, summary, details) = next_approval(&mut events, ApprovalKind::Stall).await;
    assert_eq!(details["trigger"], "idle");
    assert!(
        summary.contains("no activity from the agent for 1s"),
        "{summary}"
    );
    assert_eq!(details["choices"]["deny"], "interrupt the turn");
    decide_as_ana(
        &w,
        &stall,
        Decision::Approve,
        Some("keep going, you are close"),
    )
    .await;
    assert_eq!(finish(&w, &id, run).await, Stage::Done);
    // Idle again while waiting for the message: the same turn is not asked twice.
    assert_eq!(
        stalls(&w, &id).await,
        vec![("idle".into(), "approved".into())]
    );
    assert!(
        w.effects().iter().any(
            |l| l.starts_with("fake-claude message") && l.contains("keep going, you are close")
        ),
        "{:?}",
        w.effects()
    );
}

#[tokio::test]
async fn an_overrunning_turn_raises_one_stall_and_the_turn_goes_on_when_continued() {
    // Busy for 3 s; the turn trigger at 2 s, and (continued) again 2 s after the
    // answer: after the turn has ended.
    let busy: Vec<Value> = (0..12)
        .flat_map(|i| {
            [
                json!({ "say": format!("step {i}") }),
                json!({ "sleep_ms": 250 }),
            ]
        })
        .chain([
            json!({ "write_file": { "path": "README.md", "content": README_DONE } }),
            json!({ "say": "wrote README.md" }),
        ])
        .collect();
    let w = world(
        gaffer_config::Watchdog {
            turn: Some(Duration::from_secs(2)),
            ..off()
        },
        vec![json!({ "steps": busy })],
    )
    .await;
    let id = w.task(REQUEST, true).await;
    let mut events = w.journal.subscribe();
    let run = w.spawn(&id);
    let (stall, summary, details) = next_approval(&mut events, ApprovalKind::Stall).await;
    assert_eq!(details["trigger"], "turn");
    assert!(summary.contains("longer than 2s"), "{summary}");
    // The turn finishes meanwhile; it waits for the answer, then counts.
    decide_as_ana(&w, &stall, Decision::Approve, None).await;
    assert_eq!(finish(&w, &id, run).await, Stage::Done);
    assert_eq!(
        stalls(&w, &id).await,
        vec![("turn".into(), "approved".into())]
    );
    assert!(w.app.messages(id.as_str()).await.unwrap().is_empty());
}

#[tokio::test]
async fn the_same_failing_read_raises_one_stall_naming_the_error() {
    let read = json!({ "tool": { "name": "Read", "input": { "file_path": "docs/INSTALL.md" }, "permission": false, "run": "cat docs/INSTALL.md" } });
    let w = world(
        gaffer_config::Watchdog {
            repeated_failures: Some(2),
            repeated_calls: Some(3),
            ..off()
        },
        vec![json!({ "steps": [
            read, read, read, read,
            { "write_file": { "path": "README.md", "content": README_DONE } },
            { "say": "wrote README.md" },
        ] })],
    )
    .await;
    let id = w.task(REQUEST, true).await;
    let mut events = w.journal.subscribe();
    let run = w.spawn(&id);
    let (stall, summary, details) = next_approval(&mut events, ApprovalKind::Stall).await;
    assert_eq!(details["trigger"], "repeated_failure");
    assert_eq!(details["tool"], "Read");
    assert!(summary.contains("No such file"), "{summary}");
    decide_as_ana(&w, &stall, Decision::Approve, None).await;
    assert_eq!(finish(&w, &id, run).await, Stage::Done);
    // Four failing reads: one question, not one per trigger (repeated_calls = 3 too).
    assert_eq!(
        stalls(&w, &id).await,
        vec![("repeated_failure".into(), "approved".into())]
    );
}

#[tokio::test]
async fn tokens_without_a_file_change_raise_one_stall_and_the_note_starts_the_next_turn() {
    let w = world(
        gaffer_config::Watchdog {
            tokens_without_change: Some(10_000),
            ..off()
        },
        vec![
            json!({ "steps": [{ "say": "Let me think about it some more." }], "usage": { "input_tokens": 12_000, "output_tokens": 800 } }),
            json!({
                "expect_prompt_contains": "write the section now",
                "steps": [{ "write_file": { "path": "README.md", "content": README_DONE } }, { "say": "wrote README.md" }],
            }),
        ],
    )
    .await;
    // The planner spends more without changing anything: it only reads, by design.
    w.script(
        "planner",
        vec![{
            let mut p = plan_answer(&["Add an installation section"]);
            p["usage"] = json!({ "input_tokens": 50_000 });
            p
        }],
    );
    let id = w.task(REQUEST, true).await;
    let mut events = w.journal.subscribe();
    let run = w.spawn(&id);
    let (stall, summary, details) = next_approval(&mut events, ApprovalKind::Stall).await;
    assert_eq!(details["trigger"], "tokens_without_change");
    assert_eq!(details["step"], "code/1");
    assert!(
        summary.contains("12,800 tokens without changing a file"),
        "{summary}"
    );
    decide_as_ana(&w, &stall, Decision::Deny, Some("write the section now")).await;
    assert_eq!(finish(&w, &id, run).await, Stage::Done);
    assert_eq!(
        stalls(&w, &id).await,
        vec![("tokens_without_change".into(), "denied".into())]
    );
}

#[tokio::test]
async fn cancelling_the_task_answers_a_stall_by_withdrawing_it() {
    let w = world(
        gaffer_config::Watchdog {
            idle: Some(Duration::from_millis(500)),
            ..off()
        },
        vec![json!({ "steps": [{ "await_message": null }, { "say": "never" }] })],
    )
    .await;
    let id = w.task(REQUEST, true).await;
    let mut events = w.journal.subscribe();
    let run = w.spawn(&id);
    let (_, _, details) = next_approval(&mut events, ApprovalKind::Stall).await;
    assert_eq!(
        details["choices"]["cancel"],
        format!("gaffer task cancel {}", id.0)
    );
    w.app
        .cancel_task(
            id.as_str(),
            Actor::user("ana", "test"),
            Some("stuck".into()),
        )
        .await
        .unwrap();
    assert_eq!(finish(&w, &id, run).await, Stage::Cancelled);
    assert_eq!(
        stalls(&w, &id).await,
        vec![("idle".into(), "withdrawn".into())]
    );
}

#[tokio::test]
async fn an_agent_still_idle_after_a_continue_is_reported_again_in_the_same_turn() {
    let w = world(
        gaffer_config::Watchdog {
            idle: Some(Duration::from_secs(1)),
            ..off()
        },
        vec![json!({ "steps": [
            { "say": "thinking" },
            { "await_message": null },
            { "write_file": { "path": "README.md", "content": README_DONE } },
            { "say": "wrote README.md" },
        ] })],
    )
    .await;
    let id = w.task(REQUEST, true).await;
    let mut events = w.journal.subscribe();
    let run = w.spawn(&id);
    let (first, _, details) = next_approval(&mut events, ApprovalKind::Stall).await;
    assert_eq!(details["trigger"], "idle");
    // "Continue" without a note: the agent stays idle in the same turn.
    decide_as_ana(&w, &first, Decision::Approve, None).await;
    let (second, _, details) = next_approval(&mut events, ApprovalKind::Stall).await;
    assert_eq!(details["trigger"], "idle");
    assert_ne!(first, second);
    decide_as_ana(
        &w,
        &second,
        Decision::Approve,
        Some("write the section now"),
    )
    .await;
    assert_eq!(finish(&w, &id, run).await, Stage::Done);
    assert_eq!(
        stalls(&w, &id).await,
        vec![
            ("idle".into(), "approved".into()),
            ("idle".into(), "approved".into())
        ]
    );
    // Asked again a whole idle period after the answer, in the one turn.
    let journal = w
        .journal
        .stream_events(&gaffer_core::StreamId(id.0.clone()), 0)
        .await
        .unwrap();
    let when = |f: &dyn Fn(&Event) -> bool| journal.iter().find(|e| f(&e.event)).unwrap().at;
    let answered = when(
        &|e| matches!(e, Event::ApprovalDecided { approval_id, .. } if approval_id.0 == first),
    );
    let asked = when(
        &|e| matches!(e, Event::ApprovalRequested { approval_id, .. } if approval_id.0 == second),
    );
    assert!(
        asked - answered >= 1000,
        "asked again {} ms after the answer",
        asked - answered
    );
    let turns = journal
        .iter()
        .filter(|e| matches!(&e.event, Event::AgentActivity { activity, step_id } if activity["type"] == "turn_ended" && step_id.as_str() == "code/1"))
        .count();
    assert_eq!(turns, 1, "one turn of the owner");
}

#[tokio::test]
async fn tokens_spent_during_one_long_claude_turn_raise_a_stall_before_it_ends() {
    let w = world(
        gaffer_config::Watchdog {
            tokens_without_change: Some(10_000),
            ..off()
        },
        vec![json!({
            "steps": [
                model_call("msg_1", 6_000),
                model_call("msg_2", 6_000),
                // Stuck until a person's message arrives.
                { "await_message": null },
                { "write_file": { "path": "README.md", "content": README_DONE } },
                { "say": "wrote README.md" },
            ],
            "usage": { "input_tokens": 12_000 },
        })],
    )
    .await;
    let id = w.task(REQUEST, true).await;
    let mut events = w.journal.subscribe();
    let run = w.spawn(&id);
    let (stall, summary, details) = next_approval(&mut events, ApprovalKind::Stall).await;
    assert_eq!(details["trigger"], "tokens_without_change");
    assert!(
        summary.contains("12,000 tokens without changing a file"),
        "{summary}"
    );
    decide_as_ana(&w, &stall, Decision::Approve, Some("write the section now")).await;
    assert_eq!(finish(&w, &id, run).await, Stage::Done);
    // One question: the turn's final count (the same 12,000) is not counted again.
    assert_eq!(
        stalls(&w, &id).await,
        vec![("tokens_without_change".into(), "approved".into())]
    );
}
