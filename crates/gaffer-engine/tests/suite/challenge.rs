//! The plan's challenger: read-only challenges, the planner's revisions answering each
//! one, the loop's end (agreement or the round limit), and the approval that shows it.
use super::support::*;
use gaffer_app::Scope;
use gaffer_config::{Challenger, RoleConfig};
use gaffer_core::{Actor, Decision, Stage};
use gaffer_engine::Settings;
use pretty_assertions::assert_eq;
use serde_json::{json, Value};

const REQUEST: &str = "Add an installation section to README";

async fn world(max_challenge_rounds: u32) -> World {
    World::build(
        "grep -q '^## Installation' README.md",
        |s: &mut Settings| {
            s.roles.challenger = Some(Challenger {
                role: RoleConfig::default(),
                max_challenge_rounds,
            });
        },
    )
    .await
}

fn subtask(acceptance: &str) -> Value {
    json!({ "title": "Add an installation section", "description": "do: Add an installation section", "files": ["README.md"], "acceptance": acceptance })
}

fn challenges(list: Value, agreement: bool) -> Value {
    say(&format!(
        "I read the plan.\n```json\n{}\n```",
        json!({ "challenges": list, "agreement": agreement })
    ))
}

fn c(id: &str, severity: &str, claim: &str) -> Value {
    json!({ "id": id, "claim": claim, "severity": severity, "evidence": "README.md has no install command to copy" })
}

fn revision(acceptance: &str, answers: Value) -> Value {
    say(&format!(
        "Revised.\n```json\n{}\n```",
        json!({ "subtasks": [subtask(acceptance)], "answers": answers })
    ))
}

fn details(view: &gaffer_store::TaskView) -> Value {
    let plan = view.approvals.iter().find(|a| a.kind == "plan").unwrap();
    serde_json::from_str(&plan.details).unwrap()
}

#[tokio::test]
async fn a_plan_revised_once_after_a_challenge_is_approved_with_both_revisions_visible() {
    let w = world(3).await;
    w.script(
        "planner",
        vec![
            plan_answer(&["Add an installation section"]),
            {
                let mut t = revision(
                    "README has an Installation section with `cargo install demo`",
                    json!([
                        { "id": "C1", "decision": "adopted", "reason": "the criterion now names the command" },
                        { "id": "C2", "decision": "rejected", "reason": "there is no CHANGELOG in the repository" },
                    ]),
                );
                t["expect_prompt_contains"] = json!("[C1] (high) the acceptance cannot be checked");
                t
            },
        ],
    );
    w.script(
        "challenger",
        vec![
            challenges(
                json!([
                    c("C1", "high", "the acceptance cannot be checked"),
                    c("C2", "low", "the CHANGELOG is not updated")
                ]),
                false,
            ),
            {
                // The second round sees the planner's answers.
                let mut t = challenges(json!([]), true);
                t["expect_prompt_contains"] = json!("[C2] rejected: there is no CHANGELOG");
                t
            },
        ],
    );
    // The owner works to the revised plan.
    let mut owner = write("README.md", README_DONE);
    owner["expect_prompt_contains"] = json!("with `cargo install demo`");
    w.script("owner", vec![owner]);
    w.script("reviewer", vec![verdict(json!({ "verdict": "done" }))]);
    let id = w.task(REQUEST, true).await;
    assert_eq!(w.run(&id).await, Stage::Done);
    let view = w.view(&id).await;
    assert_eq!(
        step_ids(&view)[..7],
        [
            "worktree",
            "plan",
            "challenge/1",
            "revise/1",
            "challenge/2",
            "plan-approval",
            "code/1"
        ]
    );
    let challenger: Vec<_> = view
        .sessions
        .iter()
        .filter(|s| s.role == "challenger")
        .collect();
    assert_eq!(challenger.len(), 2, "a session per round");
    let d = details(&view);
    let revisions = d["revisions"].as_array().unwrap();
    assert_eq!(revisions.len(), 2);
    assert_eq!(
        revisions[0]["plan"]["subtasks"][0]["acceptance"],
        "README has an Installation section"
    );
    assert_eq!(
        revisions[1]["plan"]["subtasks"][0]["acceptance"],
        "README has an Installation section with `cargo install demo`"
    );
    assert_eq!(
        revisions[1]["changes"],
        json!(["changed subtask 1 (acceptance): Add an installation section"])
    );
    assert_eq!(revisions[1]["answers"][1]["decision"], "rejected");
    assert_eq!(d["challenge_rounds"].as_array().unwrap().len(), 2);
    assert_eq!(d["open_challenges"], json!([]));
    assert_eq!(
        d["plan"], revisions[1]["plan"],
        "the plan approved is the last revision"
    );
    let text = d["text"].as_str().unwrap();
    assert!(
        text.contains("Revision 2 changed:\n  changed subtask 1 (acceptance)"),
        "{text}"
    );
    assert!(
        text.contains("[C1] adopted: the criterion now names the command"),
        "{text}"
    );
    assert!(!text.contains("Left open"), "{text}");
    let summary = &view.approvals[0].summary;
    assert!(
        summary.contains("revision 2") && !summary.contains("left open"),
        "{summary}"
    );
}

#[tokio::test]
async fn a_challenge_still_open_after_the_round_limit_is_shown_on_the_approval() {
    let w = world(2).await;
    w.script(
        "planner",
        vec![
            plan_answer(&["Add an installation section"]),
            revision(
                "README has an Installation section",
                json!([{ "id": "C1", "decision": "rejected", "reason": "a section is enough" }]),
            ),
        ],
    );
    w.script(
        "challenger",
        vec![
            challenges(
                json!([c("C1", "medium", "the section says nothing about the MSRV")]),
                false,
            ),
            challenges(
                json!([c(
                    "C1",
                    "medium",
                    "the section still says nothing about the MSRV"
                )]),
                false,
            ),
        ],
    );
    let id = w.task(REQUEST, false).await;
    let mut events = w.journal.subscribe();
    let run = w.spawn(&id);
    let approval = loop {
        if let gaffer_core::Event::ApprovalRequested {
            approval_id,
            kind: gaffer_core::ApprovalKind::Plan,
            ..
        } = events.recv().await.unwrap().event
        {
            break approval_id;
        }
    };
    let view = w.view(&id).await;
    assert_eq!(
        step_ids(&view),
        [
            "worktree",
            "plan",
            "challenge/1",
            "revise/1",
            "challenge/2",
            "plan-approval"
        ]
    );
    let a = &view.approvals[0];
    assert!(
        a.summary.contains("(1 challenge left open)"),
        "{}",
        a.summary
    );
    let d = details(&view);
    assert_eq!(d["open_challenges"][0]["id"], "C1");
    assert_eq!(
        d["open_challenges"][0]["claim"],
        "the section still says nothing about the MSRV"
    );
    let text = d["text"].as_str().unwrap();
    assert!(
        text.starts_with("Left open by the challenger:\n[C1] (medium) the section still says nothing about the MSRV"),
        "{text}"
    );
    assert!(
        text.contains("[C1] rejected: a section is enough"),
        "{text}"
    );
    w.app
        .decide(
            approval.as_str(),
            Decision::Deny,
            Actor::user("ana", "test"),
            Some("settle the MSRV first".into()),
            Scope::default(),
        )
        .await
        .unwrap();
    assert_eq!(run.await.unwrap().unwrap(), Stage::Failed);
}

#[tokio::test]
async fn invalid_challenger_output_is_sent_back_once_then_fails_the_step_with_the_error() {
    let w = world(2).await;
    w.script(
        "planner",
        vec![plan_answer(&["Add an installation section"])],
    );
    let mut second = challenges(json!([c("C1", "fatal", "x")]), false);
    second["expect_prompt_contains"] = json!("does not meet the contract: `agreement` is missing");
    w.script(
        "challenger",
        vec![say("```json\n{\"challenges\": []}\n```"), second],
    );
    let id = w.task(REQUEST, true).await;
    assert_eq!(w.run(&id).await, Stage::Failed);
    let view = w.view(&id).await;
    assert_eq!(step_ids(&view), ["worktree", "plan", "challenge/1"]);
    let step = &view.steps[2];
    assert_eq!(step.state, "failed");
    let error = step.error.as_deref().unwrap();
    assert!(error.contains("not valid after a retry"), "{error}");
    assert!(
        error.contains("`challenges[0].severity` is `fatal`"),
        "{error}"
    );
    assert!(view
        .task
        .outcome
        .as_deref()
        .unwrap()
        .contains("challenger round 1 failed"));
    assert!(!w.effects().iter().any(|l| l.contains("role=owner")));
}

#[tokio::test]
async fn a_revision_that_leaves_a_challenge_unanswered_is_sent_back_once_then_fails() {
    let w = world(2).await;
    let mut retry = revision(
        "ok",
        json!([{ "id": "C1", "decision": "adopted", "reason": "done" }]),
    );
    retry["expect_prompt_contains"] = json!("leaves C2 unanswered");
    w.script(
        "planner",
        vec![
            plan_answer(&["Add an installation section"]),
            revision(
                "ok",
                json!([{ "id": "C1", "decision": "adopted", "reason": "done" }]),
            ),
            retry,
        ],
    );
    w.script(
        "challenger",
        vec![challenges(
            json!([c("C1", "high", "a"), c("C2", "low", "b")]),
            false,
        )],
    );
    let id = w.task(REQUEST, true).await;
    assert_eq!(w.run(&id).await, Stage::Failed);
    let view = w.view(&id).await;
    let step = view.steps.iter().find(|s| s.step_id == "revise/1").unwrap();
    assert_eq!(step.state, "failed");
    assert!(
        step.error
            .as_deref()
            .unwrap()
            .contains("`answers` leaves C2 unanswered"),
        "{:?}",
        step.error
    );
}

#[tokio::test]
async fn the_challenger_is_read_only_even_with_yes_and_no_sandbox() {
    let w = World::build(
        "grep -q '^## Installation' README.md",
        |s: &mut Settings| {
            s.roles.challenger = Some(Challenger {
                role: RoleConfig::default(),
                max_challenge_rounds: 1,
            });
            s.sandbox.mode = gaffer_agents::sandbox::SandboxMode::Off;
        },
    )
    .await;
    w.script(
        "planner",
        vec![plan_answer(&["Add an installation section"])],
    );
    let ask = |name: &str, input: Value, effect: Value| {
        let mut t = json!({ "tool": { "name": name, "input": input, "permission": true } });
        t["tool"]
            .as_object_mut()
            .unwrap()
            .extend(effect.as_object().unwrap().clone());
        t
    };
    w.script(
        "challenger",
        vec![json!({ "steps": [
            ask("Write", json!({ "file_path": "CHALLENGER.md", "content": "mine" }), json!({ "write": { "path": "CHALLENGER.md", "content": "mine" } })),
            ask("Bash", json!({ "command": "touch challenger-was-here" }), json!({ "run": "touch challenger-was-here" })),
            { "say": "```json\n{\"challenges\":[],\"agreement\":true}\n```" },
        ] })],
    );
    let id = w.task(REQUEST, true).await;
    let run = w.spawn(&id);
    let wt = w.dir.path().join("data/worktrees").join(id.as_str());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let view = w.view(&id).await;
        if view
            .steps
            .iter()
            .any(|s| s.step_id == "challenge/1" && s.state == "completed")
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the challenger never finished"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    run.abort();
    let _ = run.await;
    assert!(
        !wt.join("CHALLENGER.md").exists(),
        "the challenger wrote a file"
    );
    assert!(
        !wt.join("challenger-was-here").exists(),
        "the challenger ran a command that writes"
    );
}
