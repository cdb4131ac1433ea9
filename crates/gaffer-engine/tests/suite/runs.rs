//! Whole tasks through the real engine, real git and the fake Claude Code.
use super::support::*;
use gaffer_app::Scope;
use gaffer_core::{Actor, Decision, Stage, StreamId};
use pretty_assertions::assert_eq;
use serde_json::json;
use tokio_util::sync::CancellationToken;

const REQUEST: &str = "Add an installation section to README";

fn stages(view: &gaffer_store::TaskView) -> Vec<String> {
    view.steps
        .iter()
        .map(|s| format!("{}:{}", s.step_id, s.state))
        .collect()
}

#[tokio::test]
async fn add_an_installation_section_runs_to_done() {
    let w = World::new().await;
    w.script(
        "planner",
        vec![plan_answer(&["Add an installation section"])],
    );
    // The owner's prompt carries the context manager's pick; the reviewer's, the
    // changed file and its neighbourhood.
    let mut owner = write("README.md", README_DONE);
    owner["expect_prompt_contains"] = json!("context manager picked");
    w.script("owner", vec![owner]);
    let mut reviewer = verdict(json!({ "verdict": "done" }));
    reviewer["expect_prompt_contains"] = json!("- README.md (");
    w.script("reviewer", vec![reviewer]);
    let id = w.task(REQUEST, true).await;
    let stage = w
        .engine
        .run_task(&id, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(stage, Stage::Done);

    let view = w.view(&id).await;
    assert_eq!(
        stages(&view),
        [
            "worktree:completed",
            "plan:completed",
            "plan-approval:completed",
            "code/1:completed",
            "commit/1:completed",
            "review/1:completed",
            "check/1:completed",
            "ship:completed"
        ]
    );
    // The plan was approved by policy (--yes), and that is on record.
    assert_eq!(view.approvals.len(), 1);
    assert_eq!(view.approvals[0].kind, "plan");
    assert_eq!(view.approvals[0].state, "approved");
    assert!(view.approvals[0]
        .decided_by
        .as_deref()
        .unwrap()
        .contains("policy"));

    let summary = World::summary(&view);
    let branch = summary["branch"].as_str().unwrap();
    assert!(
        branch.starts_with(&format!("gaffer/{id}-add-an-installation")),
        "{branch}"
    );
    assert_eq!(summary["commits"].as_array().unwrap().len(), 1);
    assert_eq!(summary["check"]["passed"], true);
    assert_eq!(summary["changed_files"], json!(["README.md"]));
    // The branch in the user's repository has the change; main does not.
    let readme = git(&w.repo, &["show", &format!("{branch}:README.md")]);
    assert!(readme.contains("## Installation"));
    assert!(!std::fs::read_to_string(w.repo.join("README.md"))
        .unwrap()
        .contains("Installation"));
    assert_eq!(
        git(
            &w.repo,
            &["rev-list", "--count", &format!("main..{branch}")]
        ),
        "1"
    );
    // Every agent got the role and task in its environment.
    let effects = w.effects();
    for role in ["planner", "owner", "reviewer"] {
        assert!(
            effects
                .iter()
                .any(|l| l.contains(&format!("spawn role={role} task={id} project=demo"))),
            "{role} not spawned with GAFFER_* env: {effects:#?}"
        );
    }
    // Each agent step's pack is on record with the step: which files, full or skeleton,
    // their tokens, within the budget; the reviewer's starts with the changed file.
    let pack = |step: &str| -> serde_json::Value {
        let row = view.steps.iter().find(|s| s.step_id == step).unwrap();
        serde_json::from_str(
            row.context
                .as_deref()
                .unwrap_or_else(|| panic!("{step} has no pack")),
        )
        .unwrap()
    };
    for step in ["plan", "code/1", "review/1"] {
        let p = pack(step);
        assert_eq!(p["budget"], 8000, "{step}: {p}");
        let files = p["files"].as_array().unwrap();
        assert!(!files.is_empty(), "{step}: {p}");
        let sum: u64 = files.iter().map(|f| f["tokens"].as_u64().unwrap()).sum();
        assert_eq!(p["used"].as_u64().unwrap(), sum, "{step}");
        assert!(files
            .iter()
            .all(|f| f["mode"] == "full" || f["mode"] == "skeleton"));
    }
    assert_eq!(pack("review/1")["files"][0]["path"], "README.md");
    let events = w
        .journal
        .stream_events(&StreamId(id.0.clone()), 0)
        .await
        .unwrap();
    let packed: Vec<(String, String)> = events
        .iter()
        .filter_map(|e| match &e.event {
            gaffer_core::Event::StepContextPacked { step_id, role, .. } => {
                Some((step_id.0.clone(), role.as_str().to_owned()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        packed,
        [
            ("plan".to_string(), "planner".to_string()),
            ("code/1".into(), "owner".into()),
            ("review/1".into(), "reviewer".into())
        ]
    );
    assert_eq!(w.journal.verify().await.unwrap().broken, None);
}

#[tokio::test]
async fn reviewer_requests_changes_once_then_done() {
    let w = World::new().await;
    w.script(
        "planner",
        vec![plan_answer(&["Add an installation section"])],
    );
    w.script(
        "owner",
        vec![
            write(
                "README.md",
                "# demo\n\n## Installation\n\n    cargo install demo\n",
            ),
            write(
                "README.md",
                "# demo\n\n## Installation\n\n    cargo install --locked demo\n",
            ),
        ],
    );
    w.script(
        "reviewer",
        vec![
            verdict(json!({ "verdict": "changes_requested", "feedback": "use --locked" })),
            verdict(json!({ "verdict": "done" })),
        ],
    );
    let id = w.task(REQUEST, true).await;
    assert_eq!(w.run(&id).await, Stage::Done);
    let view = w.view(&id).await;
    let ids = step_ids(&view);
    assert_eq!(
        ids,
        [
            "worktree",
            "plan",
            "plan-approval",
            "code/1",
            "commit/1",
            "review/1",
            "fix/1",
            "commit-fix/1",
            "review/2",
            "check/1",
            "ship"
        ]
    );
    // The reviewer's feedback reached the owner.
    let fix = view.steps.iter().find(|s| s.step_id == "fix/1").unwrap();
    assert!(fix.input.contains("use --locked"), "{}", fix.input);
    let summary = World::summary(&view);
    assert_eq!(summary["commits"].as_array().unwrap().len(), 2);
    let branch = summary["branch"].as_str().unwrap();
    assert!(git(&w.repo, &["show", &format!("{branch}:README.md")]).contains("--locked"));
}

#[tokio::test]
async fn reviewer_blocks_and_the_arbiter_rules_proceed() {
    let w = World::new().await;
    w.script(
        "planner",
        vec![plan_answer(&["Add an installation section"])],
    );
    w.script("owner", vec![write("README.md", README_DONE)]);
    w.script(
        "reviewer",
        vec![verdict(
            json!({ "verdict": "blocked", "reason": "unsure the crate name is right" }),
        )],
    );
    w.script(
        "arbiter",
        vec![say(
            "```json\n{\"ruling\":\"proceed\",\"reason\":\"the name matches Cargo.toml\"}\n```",
        )],
    );
    let id = w.task(REQUEST, true).await;
    assert_eq!(w.run(&id).await, Stage::Done);
    let view = w.view(&id).await;
    let ids = step_ids(&view);
    assert!(
        ids.contains(&"arbiter/1") && ids.contains(&"check/1"),
        "{ids:?}"
    );
    assert!(!ids.contains(&"fix/1"), "{ids:?}");
    // The arbiter ran in a fresh session of its own.
    let arbiters: Vec<_> = view
        .sessions
        .iter()
        .filter(|s| s.role == "arbiter")
        .collect();
    assert_eq!(arbiters.len(), 1);
}

#[tokio::test]
async fn the_arbiter_escalates_and_a_human_approves() {
    let w = World::new().await;
    w.script(
        "planner",
        vec![plan_answer(&["Add an installation section"])],
    );
    w.script("owner", vec![write("README.md", README_DONE)]);
    w.script(
        "reviewer",
        vec![verdict(
            json!({ "verdict": "blocked", "reason": "licence question" }),
        )],
    );
    w.script("arbiter", vec![say("```json\n{\"ruling\":\"escalate\",\"reason\":\"a human must confirm the licence\"}\n```")]);
    let id = w.task(REQUEST, true).await;
    let mut events = w.journal.subscribe();
    let run = w.spawn(&id);
    // Wait for the escalation (--yes never approves escalations).
    let approval = loop {
        let e = events.recv().await.unwrap();
        if let gaffer_core::Event::ApprovalRequested {
            approval_id,
            kind: gaffer_core::ApprovalKind::Escalation,
            summary,
            ..
        } = &e.event
        {
            assert!(
                summary.contains("a human must confirm the licence"),
                "{summary}"
            );
            break approval_id.clone();
        }
    };
    assert!(!run.is_finished());
    w.app
        .decide(
            approval.as_str(),
            Decision::Approve,
            Actor::user("ana", "test"),
            Some("licence is MIT".into()),
            Scope::default(),
        )
        .await
        .unwrap();
    assert_eq!(run.await.unwrap().unwrap(), Stage::Done);
    let view = w.view(&id).await;
    let esc = view
        .approvals
        .iter()
        .find(|a| a.kind == "escalation")
        .unwrap();
    assert_eq!(esc.state, "approved");
    assert!(view
        .steps
        .iter()
        .any(|s| s.step_id == "escalation/1" && s.state == "completed"));
}

#[tokio::test]
async fn a_denied_escalation_blocks_the_task() {
    let w = World::new().await;
    w.script(
        "planner",
        vec![plan_answer(&["Add an installation section"])],
    );
    w.script("owner", vec![write("README.md", README_DONE)]);
    w.script(
        "reviewer",
        vec![verdict(json!({ "verdict": "blocked", "reason": "x" }))],
    );
    w.script(
        "arbiter",
        vec![say(
            "```json\n{\"ruling\":\"escalate\",\"reason\":\"decide\"}\n```",
        )],
    );
    let id = w.task(REQUEST, true).await;
    let mut events = w.journal.subscribe();
    let run = w.spawn(&id);
    let approval = loop {
        if let gaffer_core::Event::ApprovalRequested {
            approval_id,
            kind: gaffer_core::ApprovalKind::Escalation,
            ..
        } = events.recv().await.unwrap().event
        {
            break approval_id;
        }
    };
    w.app
        .decide(
            approval.as_str(),
            Decision::Deny,
            Actor::user("ana", "test"),
            Some("not now".into()),
            Scope::default(),
        )
        .await
        .unwrap();
    assert_eq!(run.await.unwrap().unwrap(), Stage::Blocked);
    let view = w.view(&id).await;
    assert!(view.task.outcome.unwrap().contains("not now"));
}

#[tokio::test]
async fn a_failing_check_goes_back_to_the_owner_then_passes() {
    let w = World::new().await;
    w.script(
        "planner",
        vec![plan_answer(&["Add an installation section"])],
    );
    w.script(
        "owner",
        vec![
            write("README.md", "# demo\n\n### install\n\nsomehow\n"),
            write("README.md", README_DONE),
        ],
    );
    w.script(
        "reviewer",
        vec![
            verdict(json!({ "verdict": "done" })),
            verdict(json!({ "verdict": "done" })),
        ],
    );
    let id = w.task(REQUEST, true).await;
    assert_eq!(w.run(&id).await, Stage::Done);
    let view = w.view(&id).await;
    let ids = step_ids(&view);
    assert_eq!(
        ids,
        [
            "worktree",
            "plan",
            "plan-approval",
            "code/1",
            "commit/1",
            "review/1",
            "check/1",
            "fix/1",
            "commit-fix/1",
            "review/2",
            "check/2",
            "ship"
        ]
    );
    let check1 = view.steps.iter().find(|s| s.step_id == "check/1").unwrap();
    assert!(check1
        .receipt
        .as_deref()
        .unwrap()
        .contains("\"passed\":false"));
    let fix = view.steps.iter().find(|s| s.step_id == "fix/1").unwrap();
    assert!(fix.input.contains("\"reason\":\"check\""), "{}", fix.input);
}

#[tokio::test]
async fn an_invalid_plan_is_retried_once_with_the_error_then_fails_the_task() {
    let w = World::new().await;
    w.script(
        "planner",
        vec![
            say("I think we should just do it."),
            say("```json\n{\"subtasks\": []}\n```"),
        ],
    );
    let id = w.task(REQUEST, true).await;
    assert_eq!(w.run(&id).await, Stage::Failed);
    let view = w.view(&id).await;
    let outcome = view.task.outcome.unwrap();
    assert!(
        outcome.contains("must list at least one subtask"),
        "{outcome}"
    );
    // Two planner turns in one session: the retry carried the validation error.
    assert_eq!(
        w.effects()
            .iter()
            .filter(|l| l.starts_with("fake-claude turn"))
            .count(),
        2
    );
}

#[tokio::test]
async fn a_plan_waits_for_a_human_without_yes_and_a_denial_fails_the_task() {
    let w = World::new().await;
    w.script(
        "planner",
        vec![plan_answer(&["Add an installation section"])],
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
    assert_eq!(view.task.stage, "awaiting_plan_approval");
    w.app
        .decide(
            approval.as_str(),
            Decision::Deny,
            Actor::user("ana", "test"),
            Some("split it".into()),
            Scope::default(),
        )
        .await
        .unwrap();
    assert_eq!(run.await.unwrap().unwrap(), Stage::Failed);
    assert!(w.view(&id).await.task.outcome.unwrap().contains("split it"));
    // No owner ever ran.
    assert!(!w.effects().iter().any(|l| l.contains("role=owner")));
}

#[tokio::test]
async fn a_dirty_default_branch_fails_the_task_with_what_to_do() {
    let w = World::new().await;
    std::fs::write(w.repo.join("README.md"), "local edits\n").unwrap();
    let id = w.task(REQUEST, true).await;
    assert_eq!(w.run(&id).await, Stage::Failed);
    let outcome = w.view(&id).await.task.outcome.unwrap();
    assert!(
        outcome.contains("uncommitted changes") && outcome.contains("commit or stash"),
        "{outcome}"
    );
}

#[tokio::test]
async fn cancel_mid_turn_stops_the_agent_keeps_the_worktree_and_cancels_the_task() {
    let w = World::new().await;
    w.script(
        "planner",
        vec![plan_answer(&["Add an installation section"])],
    );
    w.script(
        "owner",
        vec![json!({ "steps": [{ "write_file": { "path": "WIP.md", "content": "half" } }, { "sleep_ms": 60000 }, { "say": "never" }] })],
    );
    let id = w.task(REQUEST, true).await;
    let cancel = CancellationToken::new();
    let engine = w.engine.clone();
    let run_id = id.clone();
    let token = cancel.clone();
    let run = tokio::spawn(async move { engine.run_task(&run_id, token).await });
    // Wait until the owner has written its file, i.e. is mid-turn.
    let wt = w.dir.path().join("data/worktrees").join(id.as_str());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !wt.join("WIP.md").exists() {
        assert!(std::time::Instant::now() < deadline, "owner never started");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    cancel.cancel();
    let stage = run.await.unwrap().unwrap();
    assert_eq!(stage, Stage::Cancelled);
    assert!(wt.join("WIP.md").exists(), "the worktree was not kept");
    // No fake agent is left running in that worktree.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let orphans: Vec<_> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .chars()
                .all(|c| c.is_ascii_digit())
        })
        .filter(|e| {
            std::fs::read_link(e.path().join("cwd"))
                .map(|p| p.starts_with(&wt))
                .unwrap_or(false)
        })
        .collect();
    assert!(
        orphans.is_empty(),
        "agent processes left in the worktree: {orphans:?}"
    );
    let view = w.view(&id).await;
    assert_eq!(view.task.stage, "cancelled");
    let owner = view.steps.iter().find(|s| s.step_id == "code/1").unwrap();
    assert_eq!(owner.state, "failed");
    assert!(w.journal.head(&StreamId::from(&id)).await.unwrap() > 0);
}

/// Ctrl-C while the plan waits for a person: the run ends at once, cancelled, and
/// nothing is decided (the question is withdrawn, not denied).
#[tokio::test]
async fn cancel_while_waiting_for_a_decision_ends_the_run_and_decides_nothing() {
    let w = World::new().await;
    w.script(
        "planner",
        vec![plan_answer(&["Add an installation section"])],
    );
    let id = w.task(REQUEST, false).await;
    let cancel = CancellationToken::new();
    let engine = w.engine.clone();
    let (run_id, token) = (id.clone(), cancel.clone());
    let run = tokio::spawn(async move { engine.run_task(&run_id, token).await });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while w.view(&id).await.approvals.is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the plan was never asked"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    cancel.cancel();
    let stage = tokio::time::timeout(std::time::Duration::from_secs(30), run)
        .await
        .expect("the run waited for an answer after Ctrl-C")
        .unwrap()
        .unwrap();
    assert_eq!(stage, Stage::Cancelled);
    let view = w.view(&id).await;
    let approval = &view.approvals[0];
    assert_eq!(approval.state, "withdrawn", "{approval:?}");
    assert_eq!(approval.decided_by, None);
}

#[tokio::test]
async fn a_project_can_put_its_reviewer_on_another_agent() {
    let w = World::build("grep -q '^## Installation' README.md", |s| {
        let mut roles = s.roles.clone();
        roles.reviewer.agent = "codex".into();
        s.project_roles.insert("demo".into(), roles);
    })
    .await;
    w.script(
        "planner",
        vec![plan_answer(&["Add an installation section"])],
    );
    w.script("owner", vec![write("README.md", README_DONE)]);
    w.script("reviewer", vec![verdict(json!({ "verdict": "done" }))]);
    let id = w.task_with_agent(REQUEST, true, None).await;
    assert_eq!(w.run(&id).await, Stage::Done);
    let view = w.view(&id).await;
    let agent_of = |role: &str| {
        view.sessions
            .iter()
            .find(|s| s.role == role)
            .map(|s| s.agent.clone())
            .unwrap()
    };
    assert_eq!(agent_of("reviewer"), "codex");
    assert_eq!(agent_of("owner"), "claude");
    assert!(
        w.effects().iter().any(|l| l.starts_with("fake-codex")),
        "{:#?}",
        w.effects()
    );
}

#[tokio::test]
async fn a_roles_effort_reaches_claude_and_codex() {
    let w = World::build("grep -q '^## Installation' README.md", |s| {
        s.roles.owner.effort = Some("high".into());
        s.roles.reviewer.agent = "codex".into();
        s.roles.reviewer.effort = Some("low".into());
    })
    .await;
    w.script(
        "planner",
        vec![plan_answer(&["Add an installation section"])],
    );
    w.script("owner", vec![write("README.md", README_DONE)]);
    w.script("reviewer", vec![verdict(json!({ "verdict": "done" }))]);
    let id = w.task_with_agent(REQUEST, true, None).await;
    assert_eq!(w.run(&id).await, Stage::Done);
    let effects = w.effects();
    let spawn = |who: &str, role: &str| {
        effects
            .iter()
            .find(|l| l.starts_with(&format!("{who} spawn role={role}")))
            .cloned()
            .unwrap_or_else(|| panic!("no {who} {role}: {effects:#?}"))
    };
    assert!(
        spawn("fake-claude", "owner").contains("thinking=31999"),
        "{}",
        spawn("fake-claude", "owner")
    );
    assert!(
        spawn("fake-claude", "planner").contains("thinking= "),
        "no effort set for the planner"
    );
    assert!(
        spawn("fake-codex", "reviewer").contains("-c model_reasoning_effort=low app-server"),
        "{}",
        spawn("fake-codex", "reviewer")
    );
}

#[tokio::test]
async fn an_unreadable_verdict_is_asked_again_once_then_counts_as_blocked() {
    let w = World::new().await;
    w.script(
        "planner",
        vec![plan_answer(&["Add an installation section"])],
    );
    w.script("owner", vec![write("README.md", README_DONE)]);
    w.script(
        "reviewer",
        vec![say("Looks fine to me!"), say("Really, it is fine.")],
    );
    w.script(
        "arbiter",
        vec![say(
            "```json\n{\"ruling\":\"proceed\",\"reason\":\"the change is what was asked\"}\n```",
        )],
    );
    let id = w.task(REQUEST, true).await;
    assert_eq!(w.run(&id).await, Stage::Done);
    let view = w.view(&id).await;
    let review = view.steps.iter().find(|s| s.step_id == "review/1").unwrap();
    let receipt = review.receipt.as_deref().unwrap();
    assert!(
        receipt.contains("\"verdict\":\"blocked\"") && receipt.contains("could not be read"),
        "{receipt}"
    );
    assert!(step_ids(&view).contains(&"arbiter/1"));
    // Exactly two reviewer turns: the answer and the one retry.
    let reviewer_turns = w
        .effects()
        .iter()
        .filter(|l| l.contains("spawn role=reviewer"))
        .count();
    assert_eq!(reviewer_turns, 1, "one reviewer session");
    assert_eq!(
        w.effects()
            .iter()
            .filter(|l| l.starts_with("fake-claude turn"))
            .count(),
        5,
        "planner 1 + owner 1 + reviewer 2 + arbiter 1"
    );
}

#[tokio::test]
async fn a_check_that_runs_too_long_is_stopped_and_counts_as_failed() {
    let w = World::build("sleep 30", |s| {
        s.check_timeout = std::time::Duration::from_millis(300);
        s.limits.check_attempts = 1;
    })
    .await;
    w.script(
        "planner",
        vec![plan_answer(&["Add an installation section"])],
    );
    w.script("owner", vec![write("README.md", README_DONE)]);
    w.script("reviewer", vec![verdict(json!({ "verdict": "done" }))]);
    let id = w.task(REQUEST, true).await;
    let started = std::time::Instant::now();
    assert_eq!(w.run(&id).await, Stage::Failed);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "the check was not stopped"
    );
    let view = w.view(&id).await;
    let check = view.steps.iter().find(|s| s.step_id == "check/1").unwrap();
    let receipt = check.receipt.as_deref().unwrap();
    assert!(
        receipt.contains("\"passed\":false") && receipt.contains("timed out"),
        "{receipt}"
    );
}

#[tokio::test]
async fn new_files_are_in_changed_files_of_the_owner_turn_and_of_the_crash_question() {
    let w = World::new().await;
    w.script(
        "planner",
        vec![plan_answer(&["Add an installation section"])],
    );
    w.script(
        "owner",
        vec![
            // Turn 1 adds a file, then the process dies mid-turn.
            json!({ "steps": [{ "write_file": { "path": "docs/INSTALL.md", "content": "cargo install demo\n" } }, { "sleep_ms": 60000 }, { "say": "never" }] }),
            // The turn again, after a person said go on.
            json!({ "steps": [{ "write_file": { "path": "README.md", "content": README_DONE } }, { "say": "done" }] }),
        ],
    );
    w.script("reviewer", vec![verdict(json!({ "verdict": "done" }))]);
    let id = w.task(REQUEST, true).await;
    let run = w.spawn(&id);
    let wt = w.dir.path().join("data/worktrees").join(id.as_str());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !wt.join("docs/INSTALL.md").exists() {
        assert!(std::time::Instant::now() < deadline, "owner never started");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    run.abort();
    assert!(run.await.unwrap_err().is_cancelled());

    // After the restart a person is asked, and told which files changed.
    assert!(w.engine.recover_task(&id).await.unwrap());
    let mut events = w.journal.subscribe();
    let run = w.spawn(&id);
    let (approval, summary) = loop {
        let e = events.recv().await.unwrap();
        if let gaffer_core::Event::ApprovalRequested {
            approval_id,
            summary,
            ..
        } = e.event
        {
            break (approval_id.0, summary);
        }
    };
    assert!(
        summary.contains("uncommitted changes in: docs/INSTALL.md"),
        "{summary}"
    );
    w.app
        .decide(
            &approval,
            Decision::Approve,
            Actor::user("ana", "test"),
            None,
            Scope::default(),
        )
        .await
        .unwrap();
    assert_eq!(run.await.unwrap().unwrap(), Stage::Done);
    let view = w.view(&id).await;
    let turn = view.steps.iter().find(|s| s.step_id == "code/1").unwrap();
    let receipt: serde_json::Value =
        serde_json::from_str(turn.receipt.as_deref().unwrap()).unwrap();
    assert_eq!(
        receipt["changed_files"],
        json!(["README.md", "docs/INSTALL.md"])
    );
    assert_eq!(
        World::summary(&view)["changed_files"],
        json!(["README.md", "docs/INSTALL.md"])
    );
}

#[tokio::test]
async fn a_five_megabyte_tool_input_is_stored_as_a_few_kilobytes() {
    let w = World::new().await;
    w.script(
        "planner",
        vec![plan_answer(&["Add an installation section"])],
    );
    let huge = "x".repeat(5 * 1024 * 1024);
    w.script(
        "owner",
        vec![json!({ "steps": [
            { "tool": { "name": "Write", "input": { "file_path": "notes.txt", "content": huge }, "permission": true, "output": "written" } },
            { "write_file": { "path": "README.md", "content": README_DONE } },
            { "say": "done" }
        ] })],
    );
    w.script("reviewer", vec![verdict(json!({ "verdict": "done" }))]);
    let id = w.task(REQUEST, true).await;
    assert_eq!(w.run(&id).await, Stage::Done);
    let events = w.journal.events_after(0, 100_000).await.unwrap();
    let stored: usize = events
        .iter()
        .map(|e| serde_json::to_string(&e.event).unwrap().len())
        .sum();
    assert!(stored < 256 * 1024, "the journal holds {stored} bytes");
    // The approval still shows what was asked, cut with a marker.
    let view = w.view(&id).await;
    let tool = view.approvals.iter().find(|a| a.kind == "tool").unwrap();
    assert!(
        tool.details.contains("more bytes)"),
        "{}",
        &tool.details[..200]
    );
    assert!(tool.details.len() < 20 * 1024, "{}", tool.details.len());
}
