//! The tester, once before review (for a project with `[roles.tester]`): after the
//! owner's last subtask is committed, `test/1` writes tests for every subtask's
//! acceptance criterion, `commit-test/1` commits them on their own, `test-run/k`
//! runs the project's check; failing tests go to the owner (`fix/n`, reason
//! `tests`, with the output), whose fix is committed and run again, until they pass
//! (then the review, which sees both commits) or the check attempts are spent.
//!
//! Once, not after each subtask: tests written after subtask 1 would be rewritten
//! when subtask 2 changes the same code, each run would cost a turn and a check, and
//! the reviewer reads the whole change anyway.

use super::{count, fail, fix, go, receipt_of, record, Limits, Next, StepKind};
use gaffer_core::{Stage, Step, TaskState};
use serde_json::{json, Value};

/// Whether the task has a tester (the `worktree` step records it).
pub(crate) fn has_tester(task: &TaskState) -> bool {
    receipt_of(task, StepKind::Worktree)
        .and_then(|r| r.get("tester"))
        .and_then(Value::as_bool)
        == Some(true)
}

/// After the owner's last subtask: the tester's turn.
pub(crate) fn after_last_subtask(task: &TaskState, last: &Step) -> Next {
    go(task, Stage::Testing, StepKind::Test(1), last, json!({}))
}

/// After the tester's commit, or the owner's fix of failing tests: run them.
pub(crate) fn run_tests(task: &TaskState, last: &Step) -> Next {
    let k = count(task, |k| matches!(k, StepKind::TestRun(_))) + 1;
    go(task, Stage::Testing, StepKind::TestRun(k), last, json!({}))
}

/// After test run `k`: passing, the review; failing, the owner fixes with the output,
/// until the check attempts are spent.
pub(crate) fn after_test_run(task: &TaskState, last: &Step, k: u32, limits: &Limits) -> Next {
    let receipt = last.receipt.clone().unwrap_or(Value::Null);
    if receipt.get("passed").and_then(Value::as_bool) == Some(true) {
        let r = count(task, |k| matches!(k, StepKind::Review(_))) + 1;
        return go(task, Stage::Reviewing, StepKind::Review(r), last, json!({}));
    }
    if k < limits.check_attempts {
        return fix(task, last, "tests", receipt);
    }
    fail(format!(
        "the tester's tests still fail after {k} runs of {}",
        receipt
            .get("command")
            .and_then(Value::as_str)
            .unwrap_or("the check")
    ))
}

/// After the tester's turn: its commit.
pub(crate) fn after_tester(last: &Step, n: u32) -> Next {
    Next::Record(vec![record(
        StepKind::CommitTest(n),
        Some(last),
        json!({ "test": n }),
    )])
}
