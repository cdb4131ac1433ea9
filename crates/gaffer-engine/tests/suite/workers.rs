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
