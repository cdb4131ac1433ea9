//! An agent turn a crash cut short goes on in the same conversation after a person
//! says so; when the agent no longer has that conversation, a person is told and
//! decides whether a new one starts (fake Claude Code, which keeps its transcripts
//! where the real one does).
use super::support::*;
use gaffer_app::Scope;
use gaffer_core::{Actor, ApprovalKind, Decision, Event, Stage, TaskId};
use pretty_assertions::assert_eq;
use serde_json::json;

const REQUEST: &str = "Add an installation section to README";

/// The owner's first turn edits the README and hangs; the run is dropped there (the
/// process died mid-turn) and the task recovered. Returns the task and Claude's id
/// of the interrupted conversation.
async fn crash_mid_owner_turn(w: &World) -> (TaskId, String) {
    w.script(
        "planner",
        vec![plan_answer(&["Add an installation section"])],
    );
    w.script(
        "owner",
        vec![
            json!({ "steps": [{ "write_file": { "path": "README.md", "content": README_DONE } }, { "sleep_ms": 60000 }, { "say": "never" }] }),
            json!({ "steps": [{ "say": "went on" }] }),
        ],
    );
    w.script("reviewer", vec![verdict(json!({ "verdict": "done" }))]);
    let id = w.task(REQUEST, true).await;
    let run = w.spawn(&id);
    let readme = w
        .dir
        .path()
        .join("data/worktrees")
        .join(id.as_str())
        .join("README.md");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !std::fs::read_to_string(&readme)
        .unwrap_or_default()
        .contains("## Installation")
    {
        assert!(std::time::Instant::now() < deadline, "owner never edited");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    run.abort();
    assert!(run.await.unwrap_err().is_cancelled());
    assert!(w.engine.recover_task(&id).await.unwrap());
    let view = w.view(&id).await;
    let owner: Vec<_> = view.sessions.iter().filter(|s| s.role == "owner").collect();
    assert_eq!(owner.len(), 1);
    assert_eq!(owner[0].ended, None, "the crash left it open");
    (id, owner[0].agent_session_id.clone().unwrap())
}

/// Run the task to its end, answering every question a person gets with `answer`
/// (given its summary). Returns the final stage and the questions, in order.
async fn run_answering(
    w: &World,
    id: &TaskId,
    answer: impl Fn(&str) -> Decision,
) -> (Stage, Vec<String>) {
    let mut events = w.journal.subscribe();
    let mut run = w.spawn(id);
    let mut asked = Vec::new();
    loop {
        tokio::select! {
            stage = &mut run => return (stage.unwrap().unwrap(), asked),
            e = events.recv() => {
                if let Event::ApprovalRequested { approval_id, kind: ApprovalKind::Manual, summary, .. } = e.unwrap().event {
                    w.app
                        .decide(&approval_id.0, answer(&summary), Actor::user("ana", "test"), None, Scope::default())
                        .await
                        .unwrap();
                    asked.push(summary);
                }
            }
        }
    }
}

/// How Claude was started for the owner's turns: each spawn's arguments.
fn owner_spawns(w: &World) -> Vec<String> {
    w.effects()
        .into_iter()
        .filter(|l| l.starts_with("fake-claude spawn role=owner "))
        .collect()
}

/// Delete Claude's transcript of `session` (in the task's private Claude config dir,
/// `data/agents/<task>/claude/projects/<key>/`), as a cleaned-up `~/.claude` would.
fn forget(w: &World, id: &TaskId, session: &str) {
    let projects = w
        .dir
        .path()
        .join("data/agents")
        .join(id.as_str())
        .join("claude/projects");
    let name = format!("{session}.jsonl");
    let transcript = std::fs::read_dir(&projects)
        .unwrap_or_else(|e| panic!("{}: {e}", projects.display()))
        .flatten()
        .map(|d| d.path().join(&name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("no transcript of {session} under {}", projects.display()));
    std::fs::remove_file(transcript).unwrap();
}

#[tokio::test]
async fn a_turn_a_crash_cut_short_goes_on_in_the_same_conversation() {
    let w = World::new().await;
    let (id, session) = crash_mid_owner_turn(&w).await;
    let (stage, asked) = run_answering(&w, &id, |_| Decision::Approve).await;
    assert_eq!(stage, Stage::Done);
    assert_eq!(asked.len(), 1, "{asked:#?}");
    assert!(
        asked[0].contains("run it again in the same claude conversation"),
        "{}",
        asked[0]
    );
    // Claude was started again on the stored id, with --resume.
    let spawns = owner_spawns(&w);
    assert_eq!(spawns.len(), 2, "{spawns:#?}");
    assert!(
        spawns[1].contains(&format!("\"--resume={session}\"")),
        "{}",
        spawns[1]
    );
    // One conversation from start to end, verified by the resumed agent.
    let view = w.view(&id).await;
    let owner: Vec<_> = view.sessions.iter().filter(|s| s.role == "owner").collect();
    assert_eq!(owner.len(), 1, "{owner:#?}");
    assert_eq!(owner[0].agent_session_id.as_deref(), Some(session.as_str()));
    assert!(owner[0].verified);
    assert_eq!(owner[0].ended.as_deref(), Some("turn finished"));
}

#[tokio::test]
async fn a_lost_conversation_is_told_and_a_new_one_starts_only_when_approved() {
    let w = World::new().await;
    let (id, session) = crash_mid_owner_turn(&w).await;
    forget(&w, &id, &session);
    let (stage, asked) = run_answering(&w, &id, |_| Decision::Approve).await;
    assert_eq!(stage, Stage::Done);
    assert_eq!(asked.len(), 2, "{asked:#?}");
    assert!(
        asked[1].contains(&format!(
            "claude no longer has its conversation `{session}` (no transcript at"
        )) && asked[1].contains("approve to go on in a new conversation"),
        "{}",
        asked[1]
    );
    // The lost one ended, saying why; the new one is another conversation.
    let view = w.view(&id).await;
    let owner: Vec<_> = view.sessions.iter().filter(|s| s.role == "owner").collect();
    assert_eq!(owner.len(), 2, "{owner:#?}");
    assert!(owner[0]
        .ended
        .as_deref()
        .unwrap()
        .starts_with("could not be resumed: no transcript at"));
    assert_ne!(owner[1].agent_session_id.as_deref(), Some(session.as_str()));
    let spawns = owner_spawns(&w);
    assert_eq!(spawns.len(), 2, "{spawns:#?}");
    assert!(spawns[1].contains("--session-id="), "{}", spawns[1]);
}

#[tokio::test]
async fn a_lost_conversation_denied_fails_the_task_without_a_new_one() {
    let w = World::new().await;
    let (id, session) = crash_mid_owner_turn(&w).await;
    forget(&w, &id, &session);
    let (stage, asked) = run_answering(&w, &id, |q| {
        if q.contains("no longer has its conversation") {
            Decision::Deny
        } else {
            Decision::Approve
        }
    })
    .await;
    assert_eq!(stage, Stage::Failed);
    assert_eq!(asked.len(), 2, "{asked:#?}");
    let view = w.view(&id).await;
    let step = view.steps.iter().find(|s| s.step_id == "code/1").unwrap();
    assert!(
        step.error.as_deref().unwrap_or_default().contains(&format!(
            "claude no longer has the conversation `{session}`"
        )),
        "{:?}",
        step.error
    );
    // No new conversation was started.
    assert_eq!(owner_spawns(&w).len(), 1);
    let owner: Vec<_> = view.sessions.iter().filter(|s| s.role == "owner").collect();
    assert_eq!(owner.len(), 1, "{owner:#?}");
    assert!(owner[0].ended.is_some());
}
