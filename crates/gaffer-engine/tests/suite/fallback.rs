//! Fallback agents per role: the owner's agent is out (usage limit, a 429 it gave
//! up on, a process that cannot start) and the next agent of the chain takes the
//! step over; a turn that did something first waits for a person; a crash between
//! the switch and the next agent, or after the next agent's effect, repeats nothing.
//! The agents' failures are the real CLIs' own `result` lines (fake Claude Code
//! prints them raw).
use super::faulty::{Death, Faulty, Point};
use super::support::*;
use gaffer_app::Scope;
use gaffer_core::{
    Actor, AgentSwitch, ApprovalKind, Decision, Event, Stage, StreamId, StreamState, TaskId,
    TaskState,
};
use gaffer_engine::{Backends, Engine, Settings};
use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

const REQUEST: &str = "Add an installation section to README";

/// Claude Code 2.1's `result` when its subscription limit is reached.
fn usage_limit() -> Value {
    json!({"type":"result","subtype":"success","is_error":true,"api_error_status":429,"duration_ms":819,"num_turns":1,"result":"You've hit your limit · resets 3pm (UTC)","total_cost_usd":0,"usage":{"input_tokens":0,"output_tokens":0}})
}

/// Claude Code 2.1's `result` on a 429 whose retry-after is too long to wait: it
/// gives up at once (as it did against the scripted model server).
fn rate_limited() -> Value {
    json!({"type":"result","subtype":"success","is_error":true,"api_error_status":429,"api_error_type":"rate_limit_error","terminal_reason":"api_error","result":"API Error: Request rejected (429) · scripted error","total_cost_usd":0,"usage":{"input_tokens":0,"output_tokens":0}})
}

/// A Claude turn that does `before` and then fails with `result`.
fn fails_after(before: Vec<Value>, result: Value) -> Value {
    let mut steps = before;
    steps.push(json!({ "raw": result.to_string() }));
    steps.push(json!({ "exit": 0 }));
    json!({ "steps": steps })
}

/// The owner plays Claude Code first, Codex when Claude is out.
fn world_settings(s: &mut Settings) {
    s.roles.owner.fallback = vec!["codex".into()];
}

async fn world() -> World {
    World::build("grep -q '^## Installation' README.md", world_settings).await
}

fn script_rest(w: &World) {
    w.script(
        "planner",
        vec![plan_answer(&["Add an installation section"])],
    );
    w.script("reviewer", vec![verdict(json!({ "verdict": "done" }))]);
}

async fn state(w: &World, id: &TaskId) -> TaskState {
    match w.journal.state(&StreamId::from(id)).await.unwrap() {
        Some(StreamState::Task(t)) => *t,
        other => panic!("{other:?}"),
    }
}

/// The owner's sessions: (agent, ended).
fn owner_sessions(t: &TaskState) -> Vec<(String, bool)> {
    let mut s: Vec<_> = t
        .sessions
        .values()
        .filter(|s| s.role == gaffer_core::Role::Owner)
        .collect();
    s.sort_by_key(|s| s.started_at);
    s.iter()
        .map(|s| (s.agent.clone(), s.ended.is_some()))
        .collect()
}

fn writes(w: &World, path: &str) -> usize {
    w.effects()
        .iter()
        .filter(|l| l.contains(&format!(" write {path}")))
        .count()
}

fn the_switch(t: &TaskState) -> &AgentSwitch {
    assert_eq!(t.switches.len(), 1, "{:?}", t.switches);
    &t.switches[0]
}

#[tokio::test]
async fn a_usage_limit_or_a_long_rate_limit_moves_the_owner_to_codex_and_the_turn_runs_again() {
    for (failure, trigger) in [
        (usage_limit(), "usage_limit"),
        (rate_limited(), "rate_limited"),
    ] {
        let w = world().await;
        script_rest(&w);
        // Turns count per role across agents: Claude's failed turn, then Codex's.
        w.script(
            "owner",
            vec![
                fails_after(vec![], failure),
                write("README.md", README_DONE),
            ],
        );
        let id = w.task_with_agent(REQUEST, true, None).await;
        assert_eq!(w.run(&id).await, Stage::Done, "{trigger}");
        let t = state(&w, &id).await;
        let s = the_switch(&t);
        assert_eq!(
            (
                s.from.as_str(),
                s.to.as_str(),
                s.trigger.as_str(),
                s.effects
            ),
            ("claude", "codex", trigger, false)
        );
        assert_eq!(s.step_id.as_str(), "code/1");
        // Claude is not tried again before the cool-down (15 minutes by default).
        assert!(s.until >= s.at + 899_000, "{s:?}");
        assert_eq!(s.detail.contains("success"), false, "{}", s.detail);
        assert_eq!(
            owner_sessions(&t),
            [("claude".to_owned(), true), ("codex".to_owned(), true)]
        );
        assert_eq!(writes(&w, "README.md"), 1);
        // Nobody was asked: the failed turn did nothing.
        assert!(t.approvals.values().all(|a| a.kind != ApprovalKind::Manual));
        // The step records the privacy of the agent that played it, not the first of
        // the chain.
        let receipt = t.steps[&gaffer_core::StepId::from("code/1")]
            .receipt
            .clone()
            .unwrap();
        assert_eq!(receipt["privacy"]["agent"], "codex", "{trigger}: {receipt}");
    }
}

#[tokio::test]
async fn an_agent_that_cannot_start_hands_the_step_to_the_next_one() {
    let dir = tempfile::tempdir().unwrap();
    let (journal, _) = Backend::Sqlite.journal(dir.path()).await;
    // Codex first, and its executable is missing.
    let w = World::build_on(
        dir,
        journal,
        "demo",
        "grep -q '^## Installation' README.md",
        |s| {
            s.roles.owner.agent = "codex".into();
            s.roles.owner.fallback = vec!["claude".into()];
        },
    )
    .await;
    let agents = Arc::new(Backends::new(w.settings.redactor.clone()).with_bins(
        Some(gaffer_testkit::bins::fake_bin("fake-claude")),
        Some(w.dir.path().join("no-such-codex")),
    ));
    let engine = Engine::new(w.app.clone(), agents, w.settings.clone());
    script_rest(&w);
    w.script("owner", vec![write("README.md", README_DONE)]);
    let id = w.task_with_agent(REQUEST, true, None).await;
    let stage = engine
        .run_task(&id, tokio_util::sync::CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(stage, Stage::Done);
    let t = state(&w, &id).await;
    let s = the_switch(&t);
    assert_eq!(
        (
            s.from.as_str(),
            s.to.as_str(),
            s.trigger.as_str(),
            s.effects
        ),
        ("codex", "claude", "cannot_start", false)
    );
    assert!(s.detail.contains("No such file"), "{}", s.detail);
    assert_eq!(owner_sessions(&t), [("claude".to_owned(), true)]);
}

/// Run the task, answering each person's question with `answer`; the questions.
async fn run_answering(
    w: &World,
    engine: &Engine,
    id: &TaskId,
    answer: Decision,
) -> (Stage, Vec<String>) {
    let mut events = w.journal.subscribe();
    let mut run = tokio::spawn({
        let engine = engine.clone();
        let id = id.clone();
        async move {
            engine
                .run_task(&id, tokio_util::sync::CancellationToken::new())
                .await
        }
    });
    let mut asked = Vec::new();
    loop {
        tokio::select! {
            stage = &mut run => return (stage.unwrap().unwrap(), asked),
            e = events.recv() => {
                if let Event::ApprovalRequested { approval_id, kind: ApprovalKind::Manual, summary, .. } = e.unwrap().event {
                    w.app
                        .decide(&approval_id.0, answer, Actor::user("ana", "test"), None, Scope::default())
                        .await
                        .unwrap();
                    asked.push(summary);
                }
            }
        }
    }
}

#[tokio::test]
async fn a_turn_that_did_something_before_its_agent_ran_out_waits_for_a_person() {
    for answer in [Decision::Approve, Decision::Deny] {
        let w = world().await;
        script_rest(&w);
        w.script(
            "owner",
            vec![
                fails_after(
                    vec![json!({ "write_file": { "path": "NOTES.md", "content": "half done\n" } })],
                    usage_limit(),
                ),
                write("README.md", README_DONE),
            ],
        );
        let id = w.task_with_agent(REQUEST, true, None).await;
        let (stage, asked) = run_answering(&w, &w.engine, &id, answer).await;
        assert_eq!(asked.len(), 1, "{asked:?}");
        assert!(
            asked[0].contains("claude is out (usage_limit"),
            "{}",
            asked[0]
        );
        assert!(asked[0].contains("NOTES.md"), "{}", asked[0]);
        assert!(asked[0].contains("go on with codex"), "{}", asked[0]);
        let t = state(&w, &id).await;
        assert!(the_switch(&t).effects);
        match answer {
            Decision::Approve => {
                assert_eq!(stage, Stage::Done);
                assert_eq!(writes(&w, "README.md"), 1);
            }
            _ => {
                assert_eq!(stage, Stage::Failed);
                assert_eq!(owner_sessions(&t), [("claude".to_owned(), true)]);
                assert_eq!(writes(&w, "README.md"), 0);
            }
        }
    }
}

#[tokio::test]
async fn a_crash_between_the_switch_and_the_next_agent_resumes_on_it_without_asking() {
    let w = world().await;
    script_rest(&w);
    w.script(
        "owner",
        vec![
            fails_after(vec![], usage_limit()),
            write("README.md", README_DONE),
        ],
    );
    let id = w.task_with_agent(REQUEST, true, None).await;
    let point = Point::After {
        signature: "agent_switched(code/1)".into(),
        occurrence: 1,
    };
    let journal = Faulty::new(w.journal.clone(), Some(point), Death::Freeze);
    let engine = w.engine_on(journal.clone());
    let mut run = tokio::spawn({
        let id = id.clone();
        async move {
            engine
                .run_task(&id, tokio_util::sync::CancellationToken::new())
                .await
        }
    });
    tokio::select! {
        () = journal.died() => {}
        r = &mut run => panic!("ended before the switch: {r:?}"),
        () = tokio::time::sleep(Duration::from_secs(120)) => panic!("no switch: {:?}", journal.written()),
    }
    run.abort();
    let _ = run.await;
    // The process that recorded the switch is gone; another takes the task over.
    assert!(w.engine.recover_task(&id).await.unwrap());
    let (stage, asked) = run_answering(&w, &w.engine, &id, Decision::Deny).await;
    assert_eq!(stage, Stage::Done);
    assert_eq!(
        asked,
        Vec::<String>::new(),
        "nothing happened since the switch"
    );
    let t = state(&w, &id).await;
    // Codex took over after the restart: the journal kept Claude's cool-down.
    assert_eq!(
        owner_sessions(&t),
        [("claude".to_owned(), true), ("codex".to_owned(), true)]
    );
    assert_eq!(writes(&w, "README.md"), 1);
}

#[tokio::test]
async fn a_crash_after_the_next_agents_effect_goes_on_in_its_conversation_once() {
    let w = world().await;
    script_rest(&w);
    w.script(
        "owner",
        vec![
            fails_after(vec![], usage_limit()),
            json!({ "steps": [{ "write_file": { "path": "README.md", "content": README_DONE } }, { "sleep_ms": 60000 }, { "say": "never" }] }),
            json!({ "steps": [{ "say": "went on" }] }),
        ],
    );
    let id = w.task_with_agent(REQUEST, true, None).await;
    let run = w.spawn(&id);
    let readme = w
        .dir
        .path()
        .join("data/worktrees")
        .join(id.as_str())
        .join("README.md");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&readme)
        .unwrap_or_default()
        .contains("## Installation")
    {
        assert!(std::time::Instant::now() < deadline, "codex never edited");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    run.abort();
    let _ = run.await;
    assert!(w.engine.recover_task(&id).await.unwrap());
    let (stage, asked) = run_answering(&w, &w.engine, &id, Decision::Approve).await;
    assert_eq!(stage, Stage::Done);
    // The crash after an effect is a person's call, as for any turn; they are told
    // it goes on in the Codex conversation, not back on Claude.
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(asked[0].contains("same codex conversation"), "{}", asked[0]);
    let t = state(&w, &id).await;
    assert_eq!(
        owner_sessions(&t),
        [("claude".to_owned(), true), ("codex".to_owned(), true)]
    );
    assert_eq!(writes(&w, "README.md"), 1, "{:?}", w.effects());
}
