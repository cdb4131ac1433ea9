//! Issue #20 item 5: spending caps pause, not kill. A cap reached pauses the task
//! with one `budget` approval; approving raises this task's cap and the task goes
//! on; denying stops it with its work kept.

use super::support::*;
use gaffer_core::{ApprovalKind, Decision, Stage};
use pretty_assertions::assert_eq;
use serde_json::json;
use std::time::Duration;

const REQUEST: &str = "Add an installation section to README";

/// The owner writes README and spends 1,500 tokens ($0.30); the cap is `caps`.
async fn world(caps: gaffer_config::Budget) -> World {
    let w = World::build("grep -q '^## Installation' README.md", |s| {
        s.budget = caps;
    })
    .await;
    w.script(
        "planner",
        vec![plan_answer(&["Add an installation section"])],
    );
    let mut owner = write("README.md", README_DONE);
    owner["usage"] = json!({ "input_tokens": 1200, "output_tokens": 300 });
    owner["cost_usd"] = json!(0.3);
    w.script("owner", vec![owner]);
    w.script("reviewer", vec![verdict(json!({ "verdict": "done" }))]);
    w
}

fn budgets(view: &gaffer_store::TaskView) -> Vec<(String, String)> {
    view.approvals
        .iter()
        .filter(|a| a.kind == "budget")
        .map(|a| (a.step_id.clone(), a.state.clone()))
        .collect()
}

#[tokio::test]
async fn a_task_cap_pauses_before_the_next_turn_and_a_raise_lets_it_finish() {
    let w = world(gaffer_config::Budget {
        task_tokens: Some(1000),
        ..Default::default()
    })
    .await;
    let id = w.task(REQUEST, true).await;
    let mut events = w.journal.subscribe();
    let run = w.spawn(&id);
    let (approval, summary, details) = next_approval(&mut events, ApprovalKind::Budget).await;
    // Paused before the reviewer's turn, with the owner's work committed.
    assert_eq!(details["cap"], "task_tokens");
    assert_eq!(details["spent"], 1500.0);
    assert_eq!(details["step"], "review/1");
    assert!(
        summary.contains("spent 1,500 tokens of 1,000 tokens"),
        "{summary}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!run.is_finished(), "the task waits for a person");
    decide_as_ana(&w, &approval, Decision::Approve, Some("raise by 5k")).await;
    assert_eq!(finish(&w, &id, run).await, Stage::Done);
    let view = w.view(&id).await;
    assert_eq!(budgets(&view), vec![("review/1".into(), "approved".into())]);
}

#[tokio::test]
async fn a_raise_too_small_asks_again_and_a_denial_stops_the_task_keeping_its_work() {
    let w = world(gaffer_config::Budget {
        task_usd: Some(0.25),
        ..Default::default()
    })
    .await;
    let id = w.task(REQUEST, true).await;
    let mut events = w.journal.subscribe();
    let run = w.spawn(&id);
    let (first, _, details) = next_approval(&mut events, ApprovalKind::Budget).await;
    assert_eq!(details["cap"], "task_usd");
    assert_eq!(details["spent"], 0.3);
    // $0.01 more is still under what was spent: asked again, under a new key.
    decide_as_ana(&w, &first, Decision::Approve, Some("$0.01")).await;
    let (second, summary, _) = next_approval(&mut events, ApprovalKind::Budget).await;
    assert_ne!(first, second);
    assert!(summary.contains("$0.3000 of $0.2600"), "{summary}");
    decide_as_ana(
        &w,
        &second,
        Decision::Deny,
        Some("too expensive for a README"),
    )
    .await;
    assert_eq!(finish(&w, &id, run).await, Stage::Failed);
    let view = w.view(&id).await;
    assert_eq!(
        budgets(&view),
        vec![
            ("review/1".into(), "approved".into()),
            ("review/1".into(), "denied".into())
        ]
    );
    let outcome = view.task.outcome.clone().unwrap();
    assert!(
        outcome.contains("task_usd") && outcome.contains("too expensive for a README"),
        "{outcome}"
    );
    // Nothing lost: the owner's commit is on the task branch, in the kept worktree.
    let wt = w.dir.path().join("data/worktrees").join(id.as_str());
    assert_eq!(
        std::fs::read_to_string(wt.join("README.md")).unwrap(),
        README_DONE
    );
    let log = git(&wt, &["log", "--format=%s", "-n", "1"]);
    assert!(!log.contains("init"), "the owner's commit is kept: {log}");
    assert!(view
        .steps
        .iter()
        .any(|s| s.step_id == "commit/1" && s.state == "completed"));
}

#[tokio::test]
async fn a_projects_daily_cap_pauses_its_next_task_before_its_first_turn() {
    let w = world(gaffer_config::Budget {
        project_day_tokens: Some(1000),
        ..Default::default()
    })
    .await;
    // The planner's first plan spends nothing; the owner's 1,500 tokens take the
    // first task over the day's cap before its review, where a raise lets it finish.
    let first = w.task(REQUEST, true).await;
    let mut events = w.journal.subscribe();
    let run = w.spawn(&first);
    let (a, _, d) = next_approval(&mut events, ApprovalKind::Budget).await;
    assert_eq!(d["cap"], "project_day_tokens");
    decide_as_ana(&w, &a, Decision::Approve, Some("ok")).await;
    assert_eq!(finish(&w, &first, run).await, Stage::Done);
    // The raise was the first task's: the next task stops before its planner runs.
    let second = w.task(REQUEST, true).await;
    let run = w.spawn(&second);
    let (b, summary, d) = next_approval(&mut events, ApprovalKind::Budget).await;
    assert_eq!(
        (d["cap"].as_str(), d["step"].as_str()),
        (Some("project_day_tokens"), Some("plan"))
    );
    assert!(summary.contains("the project's tasks today"), "{summary}");
    decide_as_ana(&w, &b, Decision::Deny, Some("enough for today")).await;
    assert_eq!(finish(&w, &second, run).await, Stage::Failed);
}

#[tokio::test]
async fn the_projects_daily_cap_counts_a_task_older_than_the_newest_hundred() {
    let w = world(gaffer_config::Budget {
        project_day_tokens: Some(1000),
        ..Default::default()
    })
    .await;
    // The task that spends today is older than the project's 100 newest tasks: a
    // count of the newest page only would miss its 1,500 tokens and let it finish.
    let old = w.task(REQUEST, true).await;
    for n in 0..101 {
        w.task(&format!("a later task {n}"), true).await;
    }
    let mut events = w.journal.subscribe();
    let run = w.spawn(&old);
    let (approval, summary, details) = next_approval(&mut events, ApprovalKind::Budget).await;
    assert_eq!(
        (details["cap"].as_str(), details["step"].as_str()),
        (Some("project_day_tokens"), Some("review/1"))
    );
    assert_eq!(details["spent"], 1500.0);
    assert!(summary.contains("the project's tasks today"), "{summary}");
    decide_as_ana(&w, &approval, Decision::Deny, Some("enough for today")).await;
    assert_eq!(finish(&w, &old, run).await, Stage::Failed);
}

/// A world whose owner runs one turn of `steps` that spends `tokens` (its result's
/// count), under `caps`.
async fn one_long_turn(
    caps: gaffer_config::Budget,
    steps: Vec<serde_json::Value>,
    tokens: u64,
) -> World {
    let w = world(caps).await;
    w.script(
        "owner",
        vec![json!({ "steps": steps, "usage": { "input_tokens": tokens } })],
    );
    w
}

/// The positions in the task's journal of the first event matching `f`.
async fn position(
    w: &World,
    id: &gaffer_core::TaskId,
    f: impl Fn(&gaffer_core::Event) -> bool,
) -> Option<i64> {
    let events = w
        .journal
        .stream_events(&gaffer_core::StreamId(id.0.clone()), 0)
        .await
        .unwrap();
    events.iter().find(|e| f(&e.event)).map(|e| e.seq)
}

fn owners_turn_ended(e: &gaffer_core::Event) -> bool {
    matches!(e, gaffer_core::Event::AgentActivity { step_id, activity } if step_id.as_str() == "code/1" && activity["type"] == "turn_ended")
}

#[tokio::test]
async fn a_cap_crossed_during_one_long_turn_asks_once_while_it_runs_and_a_raise_lets_it_finish() {
    // Claude reports each model call as the turn goes; the cap falls between the two.
    let w = one_long_turn(
        gaffer_config::Budget {
            task_tokens: Some(1000),
            ..Default::default()
        },
        vec![
            model_call("msg_1", 600),
            model_call("msg_2", 600),
            json!({ "sleep_ms": 1500 }),
            json!({ "write_file": { "path": "README.md", "content": README_DONE } }),
            model_call("msg_3", 300),
        ],
        1500,
    )
    .await;
    let id = w.task(REQUEST, true).await;
    let mut events = w.journal.subscribe();
    let run = w.spawn(&id);
    let (approval, summary, details) = next_approval(&mut events, ApprovalKind::Budget).await;
    assert_eq!(
        (
            details["cap"].as_str(),
            details["step"].as_str(),
            details["during_turn"].as_bool()
        ),
        (Some("task_tokens"), Some("code/1"), Some(true))
    );
    assert_eq!(details["spent"], 1200.0);
    assert!(summary.contains("during `"), "{summary}");
    decide_as_ana(&w, &approval, Decision::Approve, Some("raise by 5k")).await;
    assert_eq!(finish(&w, &id, run).await, Stage::Done);
    let view = w.view(&id).await;
    assert_eq!(budgets(&view), vec![("code/1".into(), "approved".into())]);
    // Asked while the turn ran, not after it.
    let asked = position(&w, &id, |e| {
        matches!(
            e,
            gaffer_core::Event::ApprovalRequested {
                kind: ApprovalKind::Budget,
                ..
            }
        )
    })
    .await;
    let ended = position(&w, &id, owners_turn_ended).await;
    assert!(
        asked.unwrap() < ended.unwrap(),
        "asked at {asked:?}, the turn ended at {ended:?}"
    );
    // What the step records is the turn's result, as before: not the spend so far.
    let owner = view.steps.iter().find(|s| s.step_id == "code/1").unwrap();
    let receipt: serde_json::Value =
        serde_json::from_str(owner.receipt.as_deref().unwrap()).unwrap();
    assert_eq!(receipt["usage"]["input_tokens"], 1500, "{receipt}");
    assert_eq!(receipt["usage"]["output_tokens"], 0, "{receipt}");
}

#[tokio::test]
async fn denying_a_cap_crossed_during_a_turn_interrupts_it_and_stops_the_task_keeping_its_work() {
    let draft = "# demo\n\nA demo project.\n\n## Installation\n";
    let w = one_long_turn(
        gaffer_config::Budget {
            task_tokens: Some(1000),
            ..Default::default()
        },
        vec![
            json!({ "write_file": { "path": "README.md", "content": draft } }),
            model_call("msg_1", 1500),
            // The agent would go on and on: only an interrupt ends this turn.
            json!({ "await_message": null }),
            json!({ "write_file": { "path": "README.md", "content": "never" } }),
        ],
        1500,
    )
    .await;
    let id = w.task(REQUEST, true).await;
    let mut events = w.journal.subscribe();
    let run = w.spawn(&id);
    let (approval, _, details) = next_approval(&mut events, ApprovalKind::Budget).await;
    assert_eq!(details["during_turn"], true);
    decide_as_ana(
        &w,
        &approval,
        Decision::Deny,
        Some("too expensive for a README"),
    )
    .await;
    assert_eq!(finish(&w, &id, run).await, Stage::Failed);
    let view = w.view(&id).await;
    assert_eq!(budgets(&view), vec![("code/1".into(), "denied".into())]);
    let outcome = view.task.outcome.clone().unwrap();
    assert!(
        outcome.contains("task_tokens") && outcome.contains("too expensive for a README"),
        "{outcome}"
    );
    // Nothing lost: the turn's spend is the failed step's, the draft stays in the
    // kept worktree, and the agent never went on.
    let owner = view.steps.iter().find(|s| s.step_id == "code/1").unwrap();
    assert_eq!(owner.state, "failed");
    let receipt: serde_json::Value =
        serde_json::from_str(owner.receipt.as_deref().unwrap()).unwrap();
    assert_eq!(receipt["usage"]["input_tokens"], 1500, "{receipt}");
    let wt = w.dir.path().join("data/worktrees").join(id.as_str());
    assert_eq!(
        std::fs::read_to_string(wt.join("README.md")).unwrap(),
        draft
    );
    assert!(
        position(&w, &id, owners_turn_ended).await.is_some(),
        "the interrupted turn ended"
    );
    assert!(
        !w.effects()
            .iter()
            .any(|l| l.starts_with("fake-claude message")),
        "nobody's message was sent to the agent: {:?}",
        w.effects()
    );
}
