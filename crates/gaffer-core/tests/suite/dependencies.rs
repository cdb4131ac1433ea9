//! Task dependencies: `after` at creation, the waiting stage, and what the tasks
//! waited for bring into the waiting task's stream.

use gaffer_core::dependency::{check_after, settle, AfterProblem, Dependency};
use gaffer_core::*;
use pretty_assertions::assert_eq;
use std::collections::HashMap;

fn created_after(id: &str, after: &[&str]) -> Event {
    Event::TaskCreated {
        task_id: id.into(),
        project_id: "p-1".into(),
        request: "build on the others".into(),
        by: Actor::user("ana", "cli"),
        options: TaskOptions {
            after: after.iter().map(|a| TaskId::from(*a)).collect(),
            ..TaskOptions::default()
        },
    }
}

fn given(events: &[Event]) -> TaskState {
    match StreamState::replay(events.iter().enumerate().map(|(i, e)| (i as i64, e))) {
        Ok(Some(StreamState::Task(t))) => *t,
        other => panic!("not a task: {other:?}"),
    }
}

fn rejects(task: &TaskState, event: Event) -> Rejected {
    let mut after = task.clone();
    let err = after
        .apply(99, &event)
        .expect_err("event should be rejected");
    assert_eq!(&after, task, "a rejected event changed the state");
    err
}

fn dep(id: &str, stage: Stage, after: &[&str]) -> Dependency {
    Dependency {
        id: id.into(),
        project_id: "p-1".into(),
        stage,
        after: after.iter().map(|a| TaskId::from(*a)).collect(),
        reason: None,
    }
}

fn done(id: &str) -> Event {
    Event::TaskDependencyDone {
        dependency: id.into(),
    }
}

#[test]
fn a_task_with_after_is_created_waiting_for_each() {
    let t = given(&[created_after("t-c", &["t-a", "t-b"])]);
    assert_eq!(t.stage, Stage::Waiting);
    assert_eq!(
        t.waiting_for.iter().map(TaskId::as_str).collect::<Vec<_>>(),
        ["t-a", "t-b"]
    );
    let plain = given(&[created_after("t-c", &[])]);
    assert_eq!(plain.stage, Stage::Queued);
}

#[test]
fn the_last_dependency_done_queues_the_task_and_not_before() {
    let t = given(&[created_after("t-c", &["t-a", "t-b"]), done("t-a")]);
    assert_eq!(t.stage, Stage::Waiting, "still waits for t-b");
    let t = given(&[
        created_after("t-c", &["t-a", "t-b"]),
        done("t-a"),
        done("t-b"),
    ]);
    assert_eq!(t.stage, Stage::Queued);
    assert!(t.waiting_for.is_empty());
}

#[test]
fn a_dependency_recorded_twice_or_never_awaited_is_refused() {
    let t = given(&[created_after("t-c", &["t-a", "t-b"]), done("t-a")]);
    assert_eq!(
        rejects(&t, done("t-a")),
        Rejected::NotAwaited {
            dependency: "t-a".into()
        }
    );
    assert!(matches!(
        rejects(&t, done("t-x")),
        Rejected::NotAwaited { .. }
    ));
    let queued = given(&[created_after("t-q", &[])]);
    assert!(matches!(
        rejects(&queued, done("t-a")),
        Rejected::NotAwaited { .. }
    ));
}

#[test]
fn nothing_works_on_a_waiting_task() {
    let t = given(&[created_after("t-c", &["t-a"])]);
    let leased = Event::TaskLeased {
        worker_id: "w".into(),
        generation: 1,
    };
    assert_eq!(
        rejects(&t, leased),
        Rejected::Waiting { got: "task_leased" }
    );
    let planning = Event::TaskStageEntered {
        stage: Stage::Planning,
    };
    assert_eq!(
        rejects(&t, planning),
        Rejected::Waiting {
            got: "task_stage_entered"
        }
    );
    let step = Event::StepIntentRecorded {
        step_id: "worktree".into(),
        name: "worktree".into(),
        intent: Intent::Idempotent,
        depends_on: vec![],
        input: serde_json::json!({}),
    };
    assert!(matches!(rejects(&t, step), Rejected::Waiting { .. }));
}

#[test]
fn a_waiting_task_can_be_cancelled() {
    let t = given(&[
        created_after("t-c", &["t-a"]),
        Event::TaskCancelled {
            by: Actor::user("ana", "cli"),
            reason: None,
        },
    ]);
    assert_eq!(t.stage, Stage::Cancelled);
    assert!(t.waiting_for.is_empty());
}

#[test]
fn a_failed_dependency_blocks_naming_it_and_how_it_ended() {
    let t = given(&[
        created_after("t-c", &["t-a"]),
        Event::TaskDependencyFailed {
            dependency: "t-a".into(),
            stage: Stage::Failed,
            reason: Some("the check failed".into()),
        },
    ]);
    assert_eq!(t.stage, Stage::Blocked);
    assert_eq!(
        t.outcome,
        Some(serde_json::json!({
            "reason": "task t-a, which this task runs after, failed: the check failed",
            "dependency": "t-a",
            "dependency_stage": "failed",
        }))
    );
    let waiting = given(&[created_after("t-c", &["t-a"])]);
    let not_an_end = Event::TaskDependencyFailed {
        dependency: "t-a".into(),
        stage: Stage::Done,
        reason: None,
    };
    assert!(matches!(
        rejects(&waiting, not_an_end),
        Rejected::BadAfter(_)
    ));
}

#[test]
fn a_task_cannot_be_created_after_itself_or_the_same_task_twice() {
    let itself = StreamState::start(0, &created_after("t-c", &["t-c"])).unwrap_err();
    assert!(
        matches!(itself, Rejected::BadAfter(ref m) if m.contains("itself")),
        "{itself}"
    );
    let twice = StreamState::start(0, &created_after("t-c", &["t-a", "t-a"])).unwrap_err();
    assert!(
        matches!(twice, Rejected::BadAfter(ref m) if m.contains("twice")),
        "{twice}"
    );
}

#[test]
fn settle_blocks_on_the_first_ended_dependency_and_records_each_done_one() {
    let t = given(&[created_after("t-c", &["t-a", "t-b"])]);
    assert_eq!(
        settle(
            &t,
            &[
                dep("t-a", Stage::Coding, &[]),
                dep("t-b", Stage::Queued, &[])
            ]
        ),
        vec![],
        "nothing while both run"
    );
    assert_eq!(
        settle(
            &t,
            &[dep("t-a", Stage::Done, &[]), dep("t-b", Stage::Coding, &[])]
        ),
        vec![done("t-a")]
    );
    let mut cancelled = dep("t-b", Stage::Cancelled, &[]);
    cancelled.reason = Some("not needed".into());
    assert_eq!(
        settle(&t, &[dep("t-a", Stage::Done, &[]), cancelled]),
        vec![Event::TaskDependencyFailed {
            dependency: "t-b".into(),
            stage: Stage::Cancelled,
            reason: Some("not needed".into()),
        }]
    );
    // What was already recorded is not recorded again.
    let t = given(&[created_after("t-c", &["t-a", "t-b"]), done("t-a")]);
    assert_eq!(
        settle(
            &t,
            &[dep("t-a", Stage::Done, &[]), dep("t-b", Stage::Done, &[])]
        ),
        vec![done("t-b")]
    );
    // The events settle decides are ones the reducer accepts.
    let mut next = t.clone();
    for e in settle(&t, &[dep("t-b", Stage::Done, &[])]) {
        next.apply(5, &e).unwrap();
    }
    assert_eq!(next.stage, Stage::Queued);
    let queued = given(&[created_after("t-q", &[])]);
    assert_eq!(settle(&queued, &[dep("t-a", Stage::Failed, &[])]), vec![]);
}

fn graph(deps: Vec<Dependency>) -> impl Fn(&TaskId) -> Option<Dependency> {
    let map: HashMap<TaskId, Dependency> = deps.into_iter().map(|d| (d.id.clone(), d)).collect();
    move |id| map.get(id).cloned()
}

#[test]
fn check_after_refuses_what_could_never_be_waited_for() {
    let known = graph(vec![
        dep("t-a", Stage::Done, &[]),
        dep("t-b", Stage::Coding, &["t-a"]),
        dep("t-f", Stage::Failed, &[]),
        Dependency {
            project_id: "p-2".into(),
            ..dep("t-o", Stage::Queued, &[])
        },
    ]);
    let new: TaskId = "t-new".into();
    let p1: ProjectId = "p-1".into();
    let ids = |v: &[&str]| v.iter().map(|s| TaskId::from(*s)).collect::<Vec<_>>();
    assert_eq!(
        check_after(&new, &p1, &ids(&["t-a", "t-b"]), &known),
        Ok(())
    );
    assert_eq!(
        check_after(&new, &p1, &ids(&["t-zz"]), &known),
        Err(AfterProblem::Unknown("t-zz".into()))
    );
    assert_eq!(
        check_after(&new, &p1, &ids(&["t-new"]), &known),
        Err(AfterProblem::Itself("t-new".into()))
    );
    assert_eq!(
        check_after(&new, &p1, &ids(&["t-a", "t-a"]), &known),
        Err(AfterProblem::Duplicate("t-a".into()))
    );
    assert_eq!(
        check_after(&new, &p1, &ids(&["t-o"]), &known),
        Err(AfterProblem::OtherProject { id: "t-o".into() })
    );
    assert_eq!(
        check_after(&new, &p1, &ids(&["t-f"]), &known),
        Err(AfterProblem::Ended {
            id: "t-f".into(),
            stage: Stage::Failed
        })
    );
    assert_eq!(
        check_after(&new, &p1, &ids(&[""]), &known),
        Err(AfterProblem::Empty)
    );
    let many: Vec<TaskId> = (0..33).map(|i| TaskId(format!("t-{i}"))).collect();
    assert_eq!(
        check_after(&new, &p1, &many, &known),
        Err(AfterProblem::TooMany(33))
    );
}

#[test]
fn check_after_finds_a_circle_through_the_graph() {
    // t-x already exists (a creation repeated under the same id) and runs after
    // t-y, which runs after t-x's new list would make it wait for: a circle.
    let known = graph(vec![
        dep("t-x", Stage::Waiting, &["t-z"]),
        dep("t-y", Stage::Waiting, &["t-x"]),
        dep("t-z", Stage::Queued, &[]),
    ]);
    let err = check_after(&"t-x".into(), &"p-1".into(), &["t-y".into()], &known).unwrap_err();
    assert_eq!(
        err,
        AfterProblem::Cycle {
            path: vec!["t-x".into(), "t-y".into(), "t-x".into()]
        }
    );
    assert_eq!(
        err.to_string(),
        "waiting would go round in a circle: t-x → t-y → t-x"
    );
}
