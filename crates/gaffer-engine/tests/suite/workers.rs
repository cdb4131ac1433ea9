use super::faulty::Faulty;
use super::support::*;
use gaffer_core::{Event, TaskId};
use gaffer_engine::Concurrency;
use gaffer_store::NewEvent;
use serde_json::json;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn workers_run_queued_and_new_tasks_one_per_project_at_a_time() {
    let w = World::new().await;
    w.script(
        "planner",
        vec![
            plan_answer(&["a"]),
            plan_answer(&["b"]),
            plan_answer(&["c"]),
        ],
    );
    w.script(
        "owner",
        vec![
            write("README.md", README_DONE),
            write("README.md", README_DONE),
            write("README.md", README_DONE),
        ],
    );
    w.script("reviewer", vec![verdict(json!({"verdict": "done"})); 3]);
    let first = w.task("first request", true).await;
    let second = w.task("second request", true).await;
    let mut events = w.journal.subscribe();
    let wanted = w.engine.events_work_needs();
    let shutdown = CancellationToken::new();
    let engine = w.engine.clone();
    let token = shutdown.clone();
    let me = gaffer_engine::this_process(std::time::Duration::from_secs(30));
    let worker = me.clone();
    let work = tokio::spawn(async move {
        engine
            .work(
                &worker,
                Concurrency {
                    workers: 2,
                    per_project: 1,
                },
                token,
            )
            .await
    });
    // A task queued while the workers run is picked up without polling.
    let third = w.task("third request", true).await;
    let mut done: Vec<TaskId> = Vec::new();
    while done.len() < 3 {
        let e = tokio::time::timeout(std::time::Duration::from_secs(120), events.recv())
            .await
            .expect("tasks stalled")
            .unwrap();
        if let Event::TaskDone { .. } = e.event {
            done.push(TaskId(e.stream_id.clone()));
        }
        // A task's run hears every event of its task from other processes.
        if let Event::TaskLeased { .. } = e.event {
            assert!(wanted(&e.stream_id, "approval_decided"), "{}", e.stream_id);
        }
        assert!(
            !matches!(e.event, Event::TaskFailed { .. }),
            "{:?}",
            e.event
        );
    }
    // The worker counts a run once it returns, just after its last event.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while w.journal.workers().await.unwrap()[0].tasks_run < 3 {
        assert!(std::time::Instant::now() < deadline, "runs not counted");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    shutdown.cancel();
    work.await.unwrap().unwrap();
    // Other tasks' events are not needed, nor those of tasks no longer run; new
    // tasks and approvals always are.
    for id in [&first, &second, &third] {
        assert!(!wanted(&id.0, "approval_decided"), "{id:?}");
    }
    assert!(wanted("t-other", "task_created") && wanted("t-other", "approval_requested"));
    assert!(!wanted("t-other", "step_started"));
    let mut all = done.clone();
    all.sort();
    let mut expected = vec![first.clone(), second.clone(), third.clone()];
    expected.sort();
    assert_eq!(all, expected);
    // One project, one task at a time: each task's events form one unbroken interval.
    let log = w.journal.events_after(0, 10_000).await.unwrap();
    let span = |id: &TaskId| {
        let pos: Vec<i64> = log
            .iter()
            .filter(|e| e.stream_id == id.0 && e.seq > 1)
            .map(|e| e.pos)
            .collect();
        (*pos.first().unwrap(), *pos.last().unwrap())
    };
    let mut spans: Vec<(i64, i64)> = [&first, &second, &third]
        .iter()
        .map(|id| span(id))
        .collect();
    spans.sort();
    for pair in spans.windows(2) {
        assert!(
            pair[0].1 < pair[1].0,
            "two tasks of one project overlapped: {spans:?}"
        );
    }
    // Each task was leased once by this worker, and every event after its creation
    // was appended under that lease (fenced).
    for id in [&first, &second, &third] {
        let writers = w
            .journal
            .event_writers(&id.0.as_str().into())
            .await
            .unwrap();
        assert_eq!(
            writers[0].worker_id, None,
            "created by the requester, not a worker"
        );
        assert!(writers.len() > 5);
        for wr in &writers[1..] {
            assert_eq!(
                (wr.worker_id.as_deref(), wr.lease_generation),
                (Some(me.id.as_str()), Some(1)),
                "event {} of {id}",
                wr.seq
            );
        }
        let leased: Vec<Event> = w
            .journal
            .stream_events(&id.0.as_str().into(), 0)
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.event)
            .filter(|e| matches!(e, Event::TaskLeased { .. }))
            .collect();
        assert_eq!(
            leased,
            vec![Event::TaskLeased {
                worker_id: me.id.clone(),
                generation: 1
            }]
        );
    }
    // The worker stopped cleanly: not live, its leases released, its runs counted.
    let ws = w.journal.workers().await.unwrap();
    assert_eq!(ws.len(), 1);
    assert!(!ws[0].alive && ws[0].leases.is_empty());
    assert_eq!((ws[0].tasks_run, ws[0].failures), (3, 0));
}

/// Workers on machines that do not share a data dir: this worker's machine lacks
/// one project's repository and another machine's worktree of a task. It runs
/// what it can, leaves the rest untouched for workers elsewhere, and does not
/// keep re-claiming what it handed back.
#[tokio::test]
async fn a_worker_leaves_tasks_whose_repository_or_worktree_is_on_another_machine() {
    let w = World::new().await;
    w.script("planner", vec![plan_answer(&["a"])]);
    w.script("owner", vec![write("README.md", README_DONE)]);
    w.script("reviewer", vec![verdict(json!({"verdict": "done"}))]);

    // A task another machine started: its worktree is on that machine's disk.
    let started_elsewhere = w.task("started on machine A", true).await;
    let elsewhere_wt = w.dir.path().join("machine-a/worktrees/t");
    let stream = started_elsewhere.0.as_str().into();
    let head = w.journal.head(&stream).await.unwrap();
    let step = gaffer_core::StepId("worktree".into());
    w.journal
        .append(
            &stream,
            head,
            vec![
                NewEvent::now(Event::StepIntentRecorded {
                    step_id: step.clone(),
                    name: "worktree".into(),
                    intent: gaffer_core::Intent::Idempotent,
                    depends_on: vec![],
                    input: serde_json::Value::Null,
                }),
                NewEvent::now(Event::StepStarted {
                    step_id: step.clone(),
                }),
                NewEvent::now(Event::StepCompleted {
                    step_id: step,
                    receipt: json!({"path": elsewhere_wt, "branch": "gaffer/t", "base": "main"}),
                }),
            ],
        )
        .await
        .unwrap();
    let head_elsewhere = w.journal.head(&stream).await.unwrap();

    // A project whose repository exists only on another machine.
    let other_repo = fixture_repo(&w.dir.path().join("other"));
    w.app
        .add_project(
            gaffer_app::AddProject {
                path: other_repo.display().to_string(),
                name: Some("other".into()),
                check: None,
            },
            gaffer_core::Actor::user("test", "test"),
        )
        .await
        .unwrap();
    let not_here = TaskId(
        w.app
            .create_task(
                gaffer_app::NewTask {
                    project: "other".into(),
                    request: "a task for machine A".into(),
                    agent: Some("claude".into()),
                    ..Default::default()
                },
                gaffer_core::Actor::user("test", "test"),
            )
            .await
            .unwrap()
            .id,
    );
    std::fs::rename(&other_repo, w.dir.path().join("moved-away")).unwrap();

    let runnable = w.task("runs here", true).await;
    let mut events = w.journal.subscribe();
    let shutdown = CancellationToken::new();
    let me = gaffer_engine::this_process(std::time::Duration::from_millis(600));
    let work = {
        let (engine, me, token) = (w.engine.clone(), me.clone(), shutdown.clone());
        tokio::spawn(async move {
            engine
                .work(
                    &me,
                    Concurrency {
                        workers: 2,
                        per_project: 1,
                    },
                    token,
                )
                .await
        })
    };
    loop {
        let e = tokio::time::timeout(std::time::Duration::from_secs(120), events.recv())
            .await
            .expect("the runnable task stalled")
            .unwrap();
        assert!(!matches!(e.event, Event::TaskFailed { .. }), "{e:?}");
        if e.stream_id == runnable.0 && matches!(e.event, Event::TaskDone { .. }) {
            break;
        }
    }
    // Many heartbeats later (each one looks for work again), still untouched.
    let first_beat = w.journal.workers().await.unwrap()[0].heartbeat_at;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while w.journal.workers().await.unwrap()[0].heartbeat_at < first_beat + 2_000 {
        assert!(std::time::Instant::now() < deadline, "no heartbeats");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    shutdown.cancel();
    work.await.unwrap().unwrap();

    assert_eq!(
        w.journal.head(&stream).await.unwrap(),
        head_elsewhere,
        "nothing written for the task started elsewhere"
    );
    let lease = w
        .journal
        .lease(started_elsewhere.as_str())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (lease.generation, lease.expires_at),
        (1, 0),
        "claimed once, handed back at once, not re-claimed"
    );
    assert_eq!(
        w.journal.lease(not_here.as_str()).await.unwrap(),
        None,
        "never claimed"
    );
    assert_eq!(w.view(&not_here).await.task.stage, "queued");
    let ws = w.journal.workers().await.unwrap();
    assert_eq!(
        (ws[0].tasks_run, ws[0].failures),
        (1, 0),
        "a handed-back task is not a failure"
    );
}

/// Issue #16: `gaffer run` stalled for SQLite's busy timeout, logging `heartbeat:
/// database is locked`, when a heartbeat came while its run was inside an append:
/// the heartbeat was awaited in place of the run, so the run could not finish the
/// append whose write lock the heartbeat waited for. Here every append holds an
/// emulated write lock a while and heartbeats come often: none may give up.
#[tokio::test]
async fn a_heartbeat_never_waits_for_the_run_it_renews() {
    let w = World::new().await;
    w.script("planner", vec![plan_answer(&["a"])]);
    w.script("owner", vec![write("README.md", README_DONE)]);
    w.script("reviewer", vec![verdict(json!({"verdict": "done"}))]);
    let id = w.task("add an installation section", true).await;
    let journal = Faulty::with_write_lock(
        w.journal.clone(),
        Duration::from_millis(40),
        Duration::from_secs(2),
    );
    let engine = w.engine_on(journal.clone());
    // A beat every 40 ms: many meet an append in progress.
    let me = gaffer_engine::this_process(Duration::from_millis(120));
    let stage = engine
        .run_one(&id, &me, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(stage, Some(gaffer_core::Stage::Done));
    assert_eq!(
        journal.heartbeat_failures(),
        0,
        "a heartbeat waited for its own run"
    );
}
