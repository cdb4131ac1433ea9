//! The arbiter's panel: each member's opinion in a fresh read-only session, all in
//! parallel (fake Claude Code, fake Codex, and the built-in OpenAI loop against the
//! scripted model server), each recorded; the arbiter rules with every opinion in
//! front of it; a member that fails or times out is recorded as failed; a crash in
//! the middle asks only the members without a recorded opinion.
use super::support::*;
use gaffer_config::{Panel, PanelMember};
use gaffer_core::{Event, Stage, StreamId, TaskId};
use gaffer_testkit::llm::FakeLlmServer;
use gaffer_testkit::scenario::Scenario;
use pretty_assertions::assert_eq;
use serde_json::{json, Value};

const REQUEST: &str = "Add an installation section to README";

fn member(spec: &str) -> PanelMember {
    PanelMember::parse(spec).unwrap()
}

/// A world whose arbiter has a panel of `members`, and whose reviewer blocks, so the
/// arbiter is called once after the owner's work.
async fn world(members: &[&str], timeout_secs: u64) -> World {
    world_with(members, timeout_secs, |_| {}).await
}

/// [`world`], with `tune` applied to its settings.
async fn world_with(
    members: &[&str],
    timeout_secs: u64,
    tune: impl FnOnce(&mut gaffer_engine::Settings),
) -> World {
    let panel = Panel {
        members: members.iter().map(|m| member(m)).collect(),
        timeout_secs,
    };
    let w = World::build("grep -q '^## Installation' README.md", move |s| {
        s.roles.panel = Some(panel);
        tune(s);
    })
    .await;
    w.script(
        "planner",
        vec![plan_answer(&["Add an installation section"])],
    );
    w.script("owner", vec![write("README.md", README_DONE)]);
    w.script(
        "reviewer",
        vec![verdict(
            json!({ "verdict": "blocked", "reason": "the owner and I disagree on the heading level" }),
        )],
    );
    w
}

fn opinion_block(opinion: &str, reason: &str) -> String {
    format!(
        "I read the change.\n```json\n{}\n```",
        json!({ "opinion": opinion, "reason": reason })
    )
}

/// A member's turn: sleeps `ms` (so its session is seen running), then gives its opinion.
fn opinion(opinion: &str, reason: &str, ms: u64, tokens: (u64, u64), cost: f64) -> Value {
    json!({
        "steps": [{ "sleep_ms": ms }, { "say": opinion_block(opinion, reason) }],
        "usage": { "input_tokens": tokens.0, "output_tokens": tokens.1 },
        "cost_usd": cost,
        "expect_prompt_contains": "You sit on the arbiter's panel",
    })
}

fn ruling(expect: &str) -> Value {
    let mut t = verdict(json!({ "ruling": "proceed", "reason": "the panel's evidence holds" }));
    t["expect_prompt_contains"] = json!(expect);
    t
}

/// The scripted model server for the `openai` member, named by `OPENAI_BASE_URL`
/// (each test runs in its own process under nextest).
async fn model_server(replies: Value) -> FakeLlmServer {
    let scenario: Scenario = serde_json::from_value(json!({ "llm": replies })).unwrap();
    let server = FakeLlmServer::start(&scenario).await.unwrap();
    std::env::set_var("OPENAI_BASE_URL", server.openai_base());
    std::env::set_var("OPENAI_API_KEY", "sk-test-panel");
    server
}

async fn events(w: &World, id: &TaskId) -> Vec<Event> {
    w.journal
        .stream_events(&StreamId::from(id), 0)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.event)
        .collect()
}

/// The `panel_opinion` events: member, recommendation (or none), error.
fn opinions(events: &[Event]) -> Vec<(String, Option<String>, Option<String>)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::PanelOpinion {
                member,
                opinion,
                error,
                ..
            } => Some((
                member.clone(),
                opinion
                    .as_ref()
                    .map(|o| o["opinion"].as_str().unwrap().to_owned()),
                error.clone(),
            )),
            _ => None,
        })
        .collect()
}

fn arbiter_receipt(view: &gaffer_store::TaskView) -> Value {
    let step = view
        .steps
        .iter()
        .find(|s| s.step_id == "arbiter/1")
        .unwrap();
    serde_json::from_str(step.receipt.as_deref().unwrap()).unwrap()
}

#[tokio::test]
async fn a_panel_of_three_gives_opinions_in_parallel_and_the_arbiter_rules_with_all_of_them() {
    let w = world(&["claude", "codex:gpt-5-codex", "openai:gpt-4.1"], 120).await;
    w.script(
        "panelist.claude",
        vec![opinion(
            "proceed",
            "the section is there and the check greps for it",
            3000,
            (1000, 200),
            0.01,
        )],
    );
    w.script(
        "panelist.codex",
        vec![opinion(
            "revise",
            "use a level-2 heading like the rest of README",
            3000,
            (2000, 300),
            0.02,
        )],
    );
    let llm = model_server(json!([{
        "text": opinion_block("escalate", "whether the heading level matters is the maintainers' call"),
        "usage": { "input_tokens": 500, "output_tokens": 50 }
    }]))
    .await;
    // The arbiter reads every opinion, in the configured order.
    w.script(
        "arbiter",
        vec![ruling(
            "1. claude recommends proceed: the section is there and the check greps for it\n\
             2. codex:gpt-5-codex recommends revise: use a level-2 heading like the rest of README\n\
             3. openai:gpt-4.1 recommends escalate: whether the heading level matters is the maintainers' call",
        )],
    );
    let id = w.task(REQUEST, true).await;
    assert_eq!(w.run(&id).await, Stage::Done);

    let all = events(&w, &id).await;
    // One opinion per member, recorded as each came (in any order).
    let mut said = opinions(&all);
    said.sort();
    assert_eq!(
        said,
        [
            ("claude".to_owned(), Some("proceed".to_owned()), None),
            (
                "codex:gpt-5-codex".to_owned(),
                Some("revise".to_owned()),
                None
            ),
            (
                "openai:gpt-4.1".to_owned(),
                Some("escalate".to_owned()),
                None
            ),
        ]
    );
    // In parallel: each of the two CLI members' sessions started before the other
    // one's opinion was recorded (each turn takes 3 s; one after the other, the
    // second would start after the first's opinion).
    let at = |pred: &dyn Fn(&Event) -> bool| all.iter().position(pred).unwrap();
    let started = |agent: &'static str| move |e: &Event| matches!(e, Event::SessionStarted { agent: a, role: gaffer_core::Role::Panelist, .. } if a == agent);
    let said = |member: &'static str| move |e: &Event| matches!(e, Event::PanelOpinion { member: m, .. } if m == member);
    assert!(at(&started("claude")) < at(&said("codex:gpt-5-codex")));
    assert!(at(&started("codex")) < at(&said("claude")));
    // All before the ruling's own session.
    let arbiter_started = at(&|e| {
        matches!(
            e,
            Event::SessionStarted {
                role: gaffer_core::Role::Arbiter,
                ..
            }
        )
    });
    assert!(all
        .iter()
        .enumerate()
        .filter(|(_, e)| matches!(e, Event::PanelOpinion { .. }))
        .all(|(i, _)| i < arbiter_started));

    // The receipt: the ruling, the opinions in the configured order with who, model,
    // text and spend, and the step's spend is the ruling's plus every member's.
    let view = w.view(&id).await;
    let r = arbiter_receipt(&view);
    assert_eq!(r["ruling"]["ruling"], "proceed");
    let panel = r["panel"].as_array().unwrap();
    let who: Vec<(&str, &str, Option<&str>, &str)> = panel
        .iter()
        .map(|o| {
            (
                o["member"].as_str().unwrap(),
                o["agent"].as_str().unwrap(),
                o["model"].as_str(),
                o["opinion"]["opinion"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        who,
        [
            ("claude", "claude", None, "proceed"),
            ("codex:gpt-5-codex", "codex", Some("gpt-5-codex"), "revise"),
            ("openai:gpt-4.1", "openai", Some("gpt-4.1"), "escalate"),
        ]
    );
    assert!(panel[1]["text"]
        .as_str()
        .unwrap()
        .contains("use a level-2 heading"));
    assert_eq!(panel[0]["usage"]["input_tokens"], 1000);
    assert_eq!(panel[1]["usage"]["output_tokens"], 300);
    assert_eq!(panel[2]["usage"]["input_tokens"], 500);
    let members_in: u64 = panel
        .iter()
        .map(|o| o["usage"]["input_tokens"].as_u64().unwrap())
        .sum();
    assert_eq!(
        r["usage"]["input_tokens"].as_u64().unwrap(),
        members_in + r["ruling_usage"]["input_tokens"].as_u64().unwrap()
    );
    // Three fresh panelist sessions, all ended; the model server was asked once.
    let panelists: Vec<_> = view
        .sessions
        .iter()
        .filter(|s| s.role == "panelist")
        .collect();
    assert_eq!(panelists.len(), 3);
    assert!(panelists.iter().all(|s| s.ended.is_some()));
    let asked = llm.requests();
    assert_eq!(asked.len(), 1);
    assert!(asked[0]
        .to_string()
        .contains("You sit on the arbiter's panel"));
}

/// One member breaks the contract twice, one takes longer than the panel's timeout,
/// one answers: both failures are recorded with why, the arbiter hears the one
/// opinion and is told the others gave none.
#[tokio::test]
async fn a_member_that_fails_or_times_out_is_recorded_as_failed_and_the_ruling_goes_on() {
    let w = world(&["claude", "codex", "openai:gpt-4.1"], 3).await;
    // Sent back once with what was wrong, then recorded as failed.
    let mut again = say("Still fine, no block.");
    again["expect_prompt_contains"] = json!("no ```json block found");
    w.script("panelist.claude", vec![say("I think it is fine."), again]);
    w.script(
        "panelist.codex",
        vec![opinion("proceed", "never heard", 60_000, (10, 1), 0.0)],
    );
    let _llm =
        model_server(json!([{ "text": opinion_block("revise", "the heading level is wrong") }]))
            .await;
    w.script(
        "arbiter",
        vec![ruling(
            "1. claude gave no opinion (its answer is not a valid opinion after a retry: its answer has no ```json block)\n\
             2. codex gave no opinion (gave no opinion within 3 s (panel_timeout_secs))\n\
             3. openai:gpt-4.1 recommends revise: the heading level is wrong",
        )],
    );
    let id = w.task(REQUEST, true).await;
    assert_eq!(w.run(&id).await, Stage::Done);
    let view = w.view(&id).await;
    let panel = arbiter_receipt(&view)["panel"].clone();
    assert_eq!(panel[0]["opinion"], Value::Null);
    assert!(
        panel[0]["text"].as_str().unwrap().contains("Still fine"),
        "{panel}"
    );
    assert_eq!(
        panel[1]["error"],
        "gave no opinion within 3 s (panel_timeout_secs)"
    );
    assert_eq!(panel[2]["opinion"]["opinion"], "revise");
    // The member that timed out had its session ended, not left running.
    let codex = view
        .sessions
        .iter()
        .find(|s| s.role == "panelist" && s.agent == "codex")
        .unwrap();
    assert!(codex
        .ended
        .as_deref()
        .unwrap()
        .contains("panel_timeout_secs"));
}

/// Every member fails: the arbiter rules alone, told so, and the receipt keeps the
/// failures.
#[tokio::test]
async fn when_every_member_fails_the_arbiter_rules_alone_and_is_told_so() {
    let w = world(&["claude", "acp:nowhere"], 30).await;
    w.script("panelist.claude", vec![json!({ "steps": [{ "exit": 3 }] })]);
    w.script(
        "arbiter",
        vec![ruling(
            "Your panel gave no opinion (every member failed): rule on your own reading.",
        )],
    );
    let id = w.task(REQUEST, true).await;
    assert_eq!(w.run(&id).await, Stage::Done);
    let r = arbiter_receipt(&w.view(&id).await);
    assert_eq!(r["ruling"]["ruling"], "proceed");
    let errors: Vec<&str> = r["panel"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["error"].as_str().unwrap())
        .collect();
    assert_eq!(errors.len(), 2);
    assert!(errors[1].contains("nowhere"), "{errors:?}");
}

/// The run dies while one member still thinks and two opinions are recorded: after
/// recovery the two are not asked again (their scripts and the model server count
/// one turn each), the third is asked in a new session (the one the crash cut short
/// is ended), and the arbiter rules with all three.
#[tokio::test]
async fn a_crash_mid_panel_asks_only_the_members_without_a_recorded_opinion() {
    let w = world(&["claude", "codex", "openai:gpt-4.1"], 120).await;
    w.script(
        "panelist.claude",
        vec![
            opinion("proceed", "first answer", 0, (100, 10), 0.001),
            opinion("escalate", "asked twice", 0, (100, 10), 0.001),
        ],
    );
    w.script(
        "panelist.codex",
        vec![
            opinion("revise", "cut short by the crash", 60_000, (100, 10), 0.001),
            opinion("revise", "after the crash", 0, (100, 10), 0.001),
        ],
    );
    let llm = model_server(json!([
        { "text": opinion_block("proceed", "from the model server") },
        { "text": opinion_block("escalate", "asked twice") },
    ]))
    .await;
    w.script(
        "arbiter",
        vec![ruling(
            "1. claude recommends proceed: first answer\n\
             2. codex recommends revise: after the crash\n\
             3. openai:gpt-4.1 recommends proceed: from the model server",
        )],
    );
    let id = w.task(REQUEST, true).await;
    let run = w.spawn(&id);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let all = events(&w, &id).await;
        let codex_running = all.iter().any(|e| {
            matches!(e, Event::SessionStarted { agent, role: gaffer_core::Role::Panelist, .. } if agent == "codex")
        });
        if opinions(&all).len() == 2 && codex_running {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the panel never got there"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    run.abort();
    assert!(run.await.unwrap_err().is_cancelled());
    assert!(w.engine.recover_task(&id).await.unwrap());

    assert_eq!(w.run(&id).await, Stage::Done);
    let all = events(&w, &id).await;
    let mut said = opinions(&all);
    said.sort();
    assert_eq!(
        said,
        [
            ("claude".to_owned(), Some("proceed".to_owned()), None),
            ("codex".to_owned(), Some("revise".to_owned()), None),
            (
                "openai:gpt-4.1".to_owned(),
                Some("proceed".to_owned()),
                None
            ),
        ],
        "one opinion per member, none asked twice"
    );
    assert_eq!(llm.requests().len(), 1, "the model server was asked once");
    let played =
        |role: &str| std::fs::read_to_string(w.scenarios.join(format!(".{role}.played"))).unwrap();
    assert_eq!(played("panelist.claude"), "1");
    assert_eq!(played("panelist.codex"), "2");
    let view = w.view(&id).await;
    let codex: Vec<_> = view
        .sessions
        .iter()
        .filter(|s| s.role == "panelist" && s.agent == "codex")
        .collect();
    assert_eq!(codex.len(), 2, "a new session after the crash");
    assert!(codex[0]
        .ended
        .as_deref()
        .unwrap()
        .contains("interrupted by a crash"));
    let r = arbiter_receipt(&view);
    assert_eq!(r["panel"][1]["opinion"]["reason"], "after the crash");
}

/// A member is read-only like the arbiter, even with `--yes`: its request to write is
/// refused before any policy, and the file is not written; its opinion still counts.
#[tokio::test]
async fn a_panel_member_asking_to_write_is_refused_even_with_yes() {
    let w = world(&["claude"], 60).await;
    w.script(
        "panelist.claude",
        vec![json!({ "steps": [
            { "tool": { "name": "Write", "input": { "file_path": "PWNED.md", "content": "x" }, "write": { "path": "PWNED.md", "content": "x" } } },
            { "say": opinion_block("proceed", "read only") },
        ] })],
    );
    w.script(
        "arbiter",
        vec![ruling("1. claude recommends proceed: read only")],
    );
    let id = w.task(REQUEST, true).await;
    assert_eq!(w.run(&id).await, Stage::Done);
    let wt = w.dir.path().join("data/worktrees").join(id.as_str());
    assert!(
        !wt.join("PWNED.md").exists(),
        "a panel member wrote to the worktree"
    );
    assert!(
        !w.effects().iter().any(|l| l.contains("write PWNED.md")),
        "{:?}",
        w.effects()
    );
}

/// A `local-only` project: a member whose model is in the cloud (Codex without
/// `OPENAI_BASE_URL`) is never started (it would read the change), and is recorded
/// as failed with why; the ruling goes on with the others.
#[tokio::test]
async fn a_cloud_member_of_a_local_only_project_is_refused_before_it_starts() {
    // The roles' Claude Code talks to a model on loopback; Codex to its own provider.
    std::env::set_var("ANTHROPIC_BASE_URL", "http://127.0.0.1:9");
    std::env::remove_var("OPENAI_BASE_URL");
    let w = world_with(&["claude", "codex"], 30, |s| {
        s.privacy
            .modes
            .insert("demo".into(), gaffer_config::Privacy::LocalOnly);
    })
    .await;
    w.script(
        "panelist.claude",
        vec![opinion("proceed", "it is fine", 10, (10, 1), 0.0)],
    );
    w.script(
        "panelist.codex",
        vec![opinion("proceed", "I read your source", 10, (10, 1), 0.0)],
    );
    w.script("arbiter", vec![ruling("1. claude recommends proceed")]);
    let id = w.task(REQUEST, true).await;
    assert_eq!(w.run(&id).await, Stage::Done);
    // Recorded as they come: the refused member first.
    let said = opinions(&events(&w, &id).await);
    assert_eq!(said.len(), 2, "{said:?}");
    assert_eq!(
        (said[1].0.as_str(), said[1].1.as_deref()),
        ("claude", Some("proceed"))
    );
    assert_eq!((said[0].0.as_str(), &said[0].1), ("codex", &None));
    assert!(
        said[0].2.as_deref().unwrap().contains("local-only"),
        "{said:?}"
    );
    assert!(
        !w.view(&id)
            .await
            .sessions
            .iter()
            .any(|s| s.agent == "codex"),
        "the cloud member was started"
    );
}

/// Each member's turn is recorded as every other turn is (`turn_ended`, which
/// `/metrics` folds into turn durations by role and agent), in the member's session.
#[tokio::test]
async fn a_members_turn_is_recorded_as_ended_like_every_turn() {
    let w = world(&["claude"], 60).await;
    w.script(
        "panelist.claude",
        vec![opinion("proceed", "read only", 10, (10, 1), 0.0)],
    );
    w.script(
        "arbiter",
        vec![ruling("1. claude recommends proceed: read only")],
    );
    let id = w.task(REQUEST, true).await;
    assert_eq!(w.run(&id).await, Stage::Done);
    let member = w
        .view(&id)
        .await
        .sessions
        .into_iter()
        .find(|s| s.role == "panelist")
        .unwrap();
    let ended: Vec<Value> = events(&w, &id)
        .await
        .into_iter()
        .filter_map(|e| match e {
            Event::AgentActivity { activity, .. }
                if activity["type"] == "turn_ended"
                    && activity["session_id"] == member.id.as_str() =>
            {
                Some(activity)
            }
            _ => None,
        })
        .collect();
    assert_eq!(ended.len(), 1, "{ended:?}");
    assert_eq!(ended[0]["status"], "completed");
}
