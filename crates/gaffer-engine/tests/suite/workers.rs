use super::support::*;
use gaffer_core::{Event, TaskId};
use gaffer_engine::Concurrency;
use gaffer_store::Journal;
use serde_json::json;
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
    let shutdown = CancellationToken::new();
    let engine = w.engine.clone();
    let token = shutdown.clone();
    let work = tokio::spawn(async move {
        engine
            .work(
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
        assert!(
            !matches!(e.event, Event::TaskFailed { .. }),
            "{:?}",
            e.event
        );
    }
    shutdown.cancel();
    work.await.unwrap().unwrap();
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
}
