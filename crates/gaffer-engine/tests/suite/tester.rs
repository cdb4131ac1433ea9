//! The tester, once before review: its tests committed on their own, failing tests
//! sent back to the owner with the output, the reviewer seeing both.
use super::support::*;
use gaffer_config::RoleConfig;
use gaffer_core::Stage;
use gaffer_engine::Settings;
use pretty_assertions::assert_eq;
use serde_json::{json, Value};

const REQUEST: &str = "Add an installation section to README";
/// Runs every test the tester wrote.
const CHECK: &str = "for t in tests/*.sh; do [ -e \"$t\" ] || continue; sh \"$t\" || exit 1; done";
const TEST: &str = "grep -q 'cargo install demo' README.md || { echo 'FAIL: README does not say cargo install demo'; exit 1; }\n";

async fn world() -> World {
    World::build(CHECK, |s: &mut Settings| {
        s.roles.tester = Some(RoleConfig::default());
    })
    .await
}

fn report(path: &str) -> Value {
    json!({ "tests": [{ "path": path, "covers": "subtask 1: the README says how to install" }], "summary": "one shell test" })
}

#[tokio::test]
async fn a_testers_failing_test_goes_back_to_the_owner_with_the_output_and_is_fixed() {
    let w = world().await;
    w.script(
        "planner",
        vec![plan_answer(&["Add an installation section"])],
    );
    let mut fix = write("README.md", README_DONE);
    fix["expect_prompt_contains"] = json!("FAIL: README does not say cargo install demo");
    w.script(
        "owner",
        vec![
            write("README.md", "# demo\n\n## Installation\n\nTODO\n"),
            fix,
        ],
    );
    let mut tester = json!({ "steps": [
        { "write_file": { "path": "tests/install.sh", "content": TEST } },
        { "say": format!("Wrote a test.\n```json\n{}\n```", report("tests/install.sh")) },
    ] });
    tester["expect_prompt_contains"] = json!("done when: README has an Installation section");
    w.script("tester", vec![tester]);
    // The reviewer reads the owner's change and the tester's test.
    let mut reviewer = verdict(json!({ "verdict": "done" }));
    reviewer["expect_prompt_contains"] = json!("tests/install.sh");
    w.script("reviewer", vec![reviewer]);
    let id = w.task(REQUEST, true).await;
    assert_eq!(w.run(&id).await, Stage::Done);
    let view = w.view(&id).await;
    assert_eq!(
        step_ids(&view)[3..],
        [
            "code/1",
            "commit/1",
            "test/1",
            "commit-test/1",
            "test-run/1",
            "fix/1",
            "commit-fix/1",
            "test-run/2",
            "review/1",
            "check/1",
            "ship"
        ]
    );
    let run1 = view
        .steps
        .iter()
        .find(|s| s.step_id == "test-run/1")
        .unwrap();
    let run1: Value = serde_json::from_str(run1.receipt.as_deref().unwrap()).unwrap();
    assert_eq!(run1["passed"], false);
    let fix = view.steps.iter().find(|s| s.step_id == "fix/1").unwrap();
    let input: Value = serde_json::from_str(&fix.input).unwrap();
    assert_eq!(input["reason"], "tests");
    // Three commits: the subtask, the tests with their own trailer, the fix.
    let branch = World::summary(&view)["branch"].as_str().unwrap().to_owned();
    let log = git(
        &w.repo,
        &[
            "log",
            "--format=%s|%(trailers:key=Gaffer-Step,valueonly)",
            &format!("main..{branch}"),
        ],
    );
    let lines: Vec<&str> = log.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), 3, "{log}");
    assert!(
        lines[1].starts_with("Tests for the acceptance criteria|")
            && lines[1].ends_with(&format!("{id}/commit-test/1")),
        "{log}"
    );
    let tested = git(
        &w.repo,
        &["show", "--name-only", "--format=", &format!("{branch}~1")],
    );
    assert_eq!(
        tested.trim(),
        "tests/install.sh",
        "the tester's commit holds only its test"
    );
    let tester: Vec<_> = view
        .sessions
        .iter()
        .filter(|s| s.role == "tester")
        .collect();
    assert_eq!(tester.len(), 1);
}

#[tokio::test]
async fn invalid_tester_output_is_sent_back_once_then_fails_the_step_with_the_error() {
    let w = world().await;
    w.script(
        "planner",
        vec![plan_answer(&["Add an installation section"])],
    );
    w.script("owner", vec![write("README.md", README_DONE)]);
    let mut second = say(&format!(
        "```json\n{}\n```",
        json!({ "tests": [{ "path": "../outside.sh", "covers": "x" }], "summary": "s" })
    ));
    second["expect_prompt_contains"] = json!("`tests` is empty");
    w.script(
        "tester",
        vec![
            say("```json\n{\"tests\": [], \"summary\": \"none\"}\n```"),
            second,
        ],
    );
    let id = w.task(REQUEST, true).await;
    assert_eq!(w.run(&id).await, Stage::Failed);
    let view = w.view(&id).await;
    let step = view.steps.iter().find(|s| s.step_id == "test/1").unwrap();
    assert_eq!(step.state, "failed");
    let error = step.error.as_deref().unwrap();
    assert!(
        error.contains("not valid after a retry")
            && error.contains("`tests[0].path` is `../outside.sh`"),
        "{error}"
    );
    assert!(!step_ids(&view).contains(&"review/1"));
}
