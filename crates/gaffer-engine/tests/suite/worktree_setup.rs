//! Ready worktrees: before any agent works in a new worktree, the project's ignored
//! files are copied from the main checkout, a port is chosen for the task, and the
//! setup commands run; journaled as the idempotent `setup` step.
use super::faulty::{Death, Faulty, Point};
use super::support::*;
use gaffer_config::WorktreeSetup;
use gaffer_core::Stage;
use gaffer_engine::Settings;
use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

const REQUEST: &str = "Add an installation section to README";

/// A world whose repository ignores `.env` and `deps/`, with a `.env` in the main
/// checkout, and whose project runs `setup` with the port on.
async fn world(commands: &[&str], copy: &[&str]) -> World {
    let setup = WorktreeSetup {
        commands: commands.iter().map(|c| c.to_string()).collect(),
        copy: copy.iter().map(|c| c.to_string()).collect(),
        port: true,
    };
    // The check passes only in a worktree the setup made ready, with the same port.
    let check = "grep -q '^## Installation' README.md && grep -q DEV_MODE=on deps/env-seen && test \"$(cat deps/port)\" = \"$GAFFER_PORT\"";
    let w = World::build(check, |s: &mut Settings| {
        s.worktree_setup.insert("demo".into(), setup);
    })
    .await;
    std::fs::write(w.repo.join(".gitignore"), ".env\ndeps/\n").unwrap();
    git(&w.repo, &["add", ".gitignore"]);
    git(&w.repo, &["commit", "-q", "-m", "ignore .env and deps"]);
    std::fs::write(w.repo.join(".env"), "DEV_MODE=on\n").unwrap();
    w
}

const INSTALL: &str = "mkdir -p deps && cp .env deps/env-seen && echo \"$GAFFER_PORT\" > deps/port && echo ran >> deps/runs";

fn worktree_file(w: &World, id: &gaffer_core::TaskId, path: &str) -> String {
    let p = w
        .dir
        .path()
        .join("data/worktrees")
        .join(id.as_str())
        .join(path);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn receipt(view: &gaffer_store::TaskView, step: &str) -> Value {
    let s = view.steps.iter().find(|s| s.step_id == step).unwrap();
    serde_json::from_str(s.receipt.as_deref().unwrap()).unwrap()
}

#[tokio::test]
async fn a_worktree_is_set_up_with_a_copied_ignored_file_and_a_command_before_the_owner_starts() {
    let w = world(&[INSTALL], &[".env"]).await;
    w.script(
        "planner",
        vec![plan_answer(&["Add an installation section"])],
    );
    // The owner's first command sees what setup made, and the task's port.
    w.script(
        "owner",
        vec![json!({ "steps": [
            { "tool": { "name": "Bash", "input": { "command": "look" }, "permission": false,
                        "run": "cat deps/env-seen deps/port > owner-saw.txt; echo \"$GAFFER_PORT\" >> owner-saw.txt" } },
            { "write_file": { "path": "README.md", "content": README_DONE } },
            { "say": "done" },
        ] })],
    );
    w.script("reviewer", vec![verdict(json!({ "verdict": "done" }))]);
    let id = w.task(REQUEST, true).await;
    assert_eq!(w.run(&id).await, Stage::Done);
    let view = w.view(&id).await;
    assert_eq!(
        step_ids(&view)[..4],
        ["worktree", "setup", "plan", "plan-approval"]
    );
    let setup = receipt(&view, "setup");
    assert_eq!(setup["copied"], json!([".env"]));
    assert_eq!(setup["commands"][0]["command"], INSTALL);
    assert_eq!(setup["commands"][0]["exit_code"], 0);
    let port = setup["port"].as_u64().unwrap();
    assert!(port > 0);
    assert_eq!(
        worktree_file(&w, &id, "owner-saw.txt"),
        format!("DEV_MODE=on\n{port}\n{port}\n")
    );
    // The copied file and what setup installed stay out of the task's commits.
    let branch = World::summary(&view)["branch"].as_str().unwrap().to_owned();
    let files = git(&w.repo, &["ls-tree", "-r", "--name-only", &branch]);
    assert!(files.contains("owner-saw.txt"), "{files}");
    assert!(
        !files.contains(".env\n") && !files.contains("deps/"),
        "{files}"
    );
    assert_eq!(worktree_file(&w, &id, "deps/runs"), "ran\n");
}

#[tokio::test]
async fn a_failing_setup_command_fails_the_task_with_its_output_before_any_agent() {
    let failing = "echo resolving packages; yes 'progress line' | head -n 3000; echo 'npm ERR! 404 left-pad-9 not found' >&2; exit 7";
    let w = world(&[failing, "touch deps/never"], &[".env"]).await;
    let id = w.task(REQUEST, true).await;
    assert_eq!(w.run(&id).await, Stage::Failed);
    let view = w.view(&id).await;
    assert_eq!(step_ids(&view), ["worktree", "setup"]);
    let step = view.steps.iter().find(|s| s.step_id == "setup").unwrap();
    assert_eq!(step.state, "failed");
    let error = step.error.as_deref().unwrap();
    assert!(
        error.contains("setup command `echo resolving packages;"),
        "{error}"
    );
    assert!(error.contains("exit code 7"), "{error}");
    assert!(
        error.contains("npm ERR! 404 left-pad-9 not found"),
        "{error}"
    );
    assert!(error.contains("[projects.demo] setup"), "{error}");
    // Capped: the tail of a long output, not all of it.
    assert!(error.len() < 5000, "{} bytes", error.len());
    assert!(!error.contains("resolving packages\n"), "{error}");
    let reason = view.task.outcome.as_deref().unwrap_or_default();
    assert!(reason.contains("npm ERR! 404"), "{reason}");
    // No agent ran, the next command did not run.
    assert!(
        w.effects().iter().all(|l| !l.contains("spawn")),
        "{:?}",
        w.effects()
    );
    let wt = w.dir.path().join("data/worktrees").join(id.as_str());
    assert!(!wt.join("deps/never").exists());
}

#[tokio::test]
async fn a_copy_git_does_not_ignore_or_that_is_missing_fails_setup_with_what_to_do() {
    let w = world(&[], &["README.md"]).await;
    let id = w.task(REQUEST, true).await;
    assert_eq!(w.run(&id).await, Stage::Failed);
    let view = w.view(&id).await;
    let error = view.steps[1].error.clone().unwrap();
    assert!(
        error.contains("`README.md` is not ignored by git"),
        "{error}"
    );
    assert!(error.contains(".gitignore"), "{error}");

    let w = world(&[], &["config/local.toml"]).await;
    let id = w.task(REQUEST, true).await;
    assert_eq!(w.run(&id).await, Stage::Failed);
    let error = w.view(&id).await.steps[1].error.clone().unwrap();
    assert!(
        error.contains("`config/local.toml` does not exist in the main checkout"),
        "{error}"
    );
}

#[tokio::test]
async fn a_crash_after_setup_completed_resumes_without_running_setup_again() {
    let w = world(&[INSTALL], &[".env"]).await;
    w.script(
        "planner",
        vec![plan_answer(&["Add an installation section"])],
    );
    w.script("owner", vec![write("README.md", README_DONE)]);
    w.script("reviewer", vec![verdict(json!({ "verdict": "done" }))]);
    let id = w.task(REQUEST, true).await;
    let point = Point::After {
        signature: "step_completed(setup)".into(),
        occurrence: 1,
    };
    let journal = Faulty::new(w.journal.clone(), Some(point), Death::Freeze);
    let engine = w.engine_on(journal.clone());
    let run = tokio::spawn({
        let id = id.clone();
        async move { engine.run_task(&id, CancellationToken::new()).await }
    });
    tokio::time::timeout(std::time::Duration::from_secs(60), journal.died())
        .await
        .expect("the run never completed setup");
    run.abort();
    let _ = run.await;
    w.engine.recover_task(&id).await.unwrap();
    assert_eq!(w.run(&id).await, Stage::Done);
    assert_eq!(worktree_file(&w, &id, "deps/runs"), "ran\n");
    let view = w.view(&id).await;
    let setup = view.steps.iter().find(|s| s.step_id == "setup").unwrap();
    assert_eq!(setup.attempt, 1);
}

#[tokio::test]
async fn a_crash_in_the_middle_of_setup_runs_it_again_from_the_journal() {
    // Killed while the command runs: setup is idempotent, so recovery runs it again.
    let slow = "mkdir -p deps && echo ran >> deps/runs && sleep 30";
    let w = world(&[slow], &[".env"]).await;
    let id = w.task(REQUEST, true).await;
    let run = w.spawn(&id);
    let runs = w
        .dir
        .path()
        .join("data/worktrees")
        .join(id.as_str())
        .join("deps/runs");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !runs.exists() {
        assert!(std::time::Instant::now() < deadline, "setup never started");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    run.abort();
    let _ = run.await;
    assert!(w.engine.recover_task(&id).await.unwrap());
    let view = w.view(&id).await;
    let setup = view.steps.iter().find(|s| s.step_id == "setup").unwrap();
    assert_eq!(
        setup.state, "intent_recorded",
        "re-queued, not effect_unknown"
    );
}
