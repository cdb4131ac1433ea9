//! Tasks that run after others: a chain runs in order with the fake agent, a
//! failed dependency blocks what waits for it, a waiting task survives a restart,
//! and two workers on one PostgreSQL journal run each task of a chain once, in order.

use super::support::*;
use gaffer_app::NewTask;
use gaffer_core::{Actor, Event, Stage, TaskId};
use gaffer_engine::{Concurrency, Engine};
use gaffer_store::{Journal, RecordedEvent};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

async fn after(w: &World, request: &str, after: &[&TaskId]) -> TaskId {
    let t = w
        .app
        .create_task(
            NewTask {
                project: "demo".into(),
                request: request.into(),
                agent: Some("claude".into()),
                auto_approve: true,
                after: after.iter().map(|t| t.0.clone()).collect(),
                ..NewTask::default()
            },
            Actor::user("test", "test"),
        )
        .await
        .unwrap();
    TaskId(t.id)
}

/// Script `n` tasks that each run to done.
fn script_done(w: &World, n: usize) {
    w.script(
        "planner",
        (0..n)
            .map(|i| plan_answer(&[&format!("part {i}")]))
            .collect(),
    );
    w.script(
        "owner",
        (0..n).map(|_| write("README.md", README_DONE)).collect(),
    );
    w.script("reviewer", vec![verdict(json!({"verdict": "done"})); n]);
}

/// A worker of `engine` (2 tasks at once, 3 per project: only the dependencies
/// keep the chain in order) until the returned token is cancelled.
fn start_worker(
    engine: &Engine,
) -> (
    CancellationToken,
    tokio::task::JoinHandle<gaffer_engine::Result<()>>,
) {
    let shutdown = CancellationToken::new();
    let engine = engine.clone();
    let token = shutdown.clone();
    let me = gaffer_engine::this_process(Duration::from_secs(30));
    let work = tokio::spawn(async move {
        engine
            .work(
                &me,
                Concurrency {
                    workers: 2,
                    per_project: 3,
                },
                token,
            )
            .await
    });
    (shutdown, work)
}

/// Wait until every task of `ids` has ended; their stages.
async fn ended(journal: &Arc<dyn Journal>, ids: &[&TaskId]) -> Vec<Stage> {
    let deadline = std::time::Instant::now() + Duration::from_secs(900);
    loop {
        let mut stages = Vec::new();
        for id in ids {
            let row = journal.task(id.as_str()).await.unwrap().unwrap().task;
            stages.push(row.dependency().unwrap().stage);
        }
        if stages.iter().all(|s| s.is_final()) {
            return stages;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "tasks stalled at {stages:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn log(journal: &Arc<dyn Journal>) -> Vec<RecordedEvent> {
    journal.events_after(0, 100_000).await.unwrap()
}

/// The global position of the first event of `id` matching `pred`.
fn first(log: &[RecordedEvent], id: &TaskId, pred: impl Fn(&Event) -> bool) -> i64 {
    log.iter()
        .find(|e| e.stream_id == id.0 && pred(&e.event))
        .unwrap_or_else(|| panic!("no such event of {id}"))
        .pos
}

fn done_at(log: &[RecordedEvent], id: &TaskId) -> i64 {
    first(log, id, |e| matches!(e, Event::TaskDone { .. }))
}

fn leased_at(log: &[RecordedEvent], id: &TaskId) -> i64 {
    first(log, id, |e| matches!(e, Event::TaskLeased { .. }))
}

fn count(log: &[RecordedEvent], id: &TaskId, kind: &str) -> usize {
    log.iter()
        .filter(|e| e.stream_id == id.0 && e.event.kind() == kind)
        .count()
}

/// B starts only after A is done, C only after B; each waits (is not leased)
/// until then, and records the end of what it waited for once.
fn assert_ran_in_order(log: &[RecordedEvent], chain: &[&TaskId]) {
    for pair in chain.windows(2) {
        let (before, next) = (pair[0], pair[1]);
        assert!(
            done_at(log, before) < leased_at(log, next),
            "{next} was leased before {before} was done"
        );
        let released = first(
            log,
            next,
            |e| matches!(e, Event::TaskDependencyDone { dependency } if dependency == before),
        );
        assert!(done_at(log, before) < released && released < leased_at(log, next));
        assert_eq!(count(log, next, "task_dependency_done"), 1, "{next}");
        assert_eq!(
            count(log, next, "task_leased"),
            1,
            "{next} ran more than once"
        );
    }
}

#[tokio::test]
async fn a_chain_runs_end_to_end_each_task_after_the_one_before() {
    let w = World::new().await;
    script_done(&w, 3);
    let a = w.task("first: the installation section", true).await;
    let b = after(&w, "second: builds on the first", &[&a]).await;
    let c = after(&w, "third: builds on the second", &[&b]).await;
    for id in [&b, &c] {
        assert_eq!(w.view(id).await.task.stage, "waiting");
    }
    let (shutdown, work) = start_worker(&w.engine);
    assert_eq!(ended(&w.journal, &[&a, &b, &c]).await, [Stage::Done; 3]);
    shutdown.cancel();
    work.await.unwrap().unwrap();
    assert_ran_in_order(&log(&w.journal).await, &[&a, &b, &c]);
    // What each ran after, with its stage, is on the task.
    let detail = w.app.task(c.as_str()).await.unwrap();
    assert_eq!(
        serde_json::to_value(&detail.task.after).unwrap(),
        json!([{ "id": b.0, "stage": "done" }])
    );
}

#[tokio::test]
async fn a_failed_task_blocks_the_chain_after_it_naming_what_happened() {
    let w = World::new().await;
    // The planner never gives a plan: the first task fails.
    w.script("planner", vec![say("I would rather not plan."); 6]);
    let a = w.task("first: will fail", true).await;
    let b = after(&w, "second", &[&a]).await;
    let c = after(&w, "third", &[&b]).await;
    let (shutdown, work) = start_worker(&w.engine);
    assert_eq!(
        ended(&w.journal, &[&a, &b, &c]).await,
        [Stage::Failed, Stage::Blocked, Stage::Blocked]
    );
    shutdown.cancel();
    work.await.unwrap().unwrap();
    let a_reason = reason(&w, &a).await;
    let b_outcome = World::summary(&w.view(&b).await);
    assert_eq!(b_outcome["dependency"], json!(a.0));
    assert_eq!(b_outcome["dependency_stage"], json!("failed"));
    assert_eq!(
        b_outcome["reason"],
        json!(format!(
            "task {a}, which this task runs after, failed: {a_reason}"
        ))
    );
    let c_outcome = World::summary(&w.view(&c).await);
    assert_eq!(c_outcome["dependency"], json!(b.0));
    assert!(
        c_outcome["reason"].as_str().unwrap().starts_with(&format!(
            "task {b}, which this task runs after, was blocked: task {a}"
        )),
        "{c_outcome}"
    );
    // Neither ever ran: no worker leased them, no step was recorded.
    let log = log(&w.journal).await;
    for id in [&b, &c] {
        assert_eq!(count(&log, id, "task_leased"), 0);
        assert_eq!(count(&log, id, "step_intent_recorded"), 0);
    }
}

async fn reason(w: &World, id: &TaskId) -> String {
    World::summary(&w.view(id).await)["reason"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn a_task_waiting_across_a_restart_starts_when_its_dependency_ends() {
    let w = World::new().await;
    script_done(&w, 2);
    let a = w.task("first", true).await;
    let b = after(&w, "second, after the first", &[&a]).await;
    // The first runs to done while no worker runs (a `gaffer run` elsewhere): the
    // second still waits, since nothing settled it.
    assert_eq!(w.run(&a).await, Stage::Done);
    assert_eq!(w.view(&b).await.task.stage, "waiting");
    // A worker starting later (a restarted `gaffer serve`, a new engine on the same
    // journal) settles it at once and runs it.
    let restarted = w.engine_on(w.journal.clone());
    let (shutdown, work) = start_worker(&restarted);
    assert_eq!(ended(&w.journal, &[&b]).await, [Stage::Done]);
    shutdown.cancel();
    work.await.unwrap().unwrap();
    let log = log(&w.journal).await;
    assert_eq!(count(&log, &b, "task_dependency_done"), 1);
    assert_eq!(count(&log, &b, "task_leased"), 1);
}

#[tokio::test]
async fn a_worker_stopped_while_the_chain_waits_resumes_it_in_order() {
    let w = World::new().await;
    script_done(&w, 2);
    let a = w.task("first", true).await;
    let b = after(&w, "second, after the first", &[&a]).await;
    // Stop the first worker while the first task runs and the second waits.
    let (shutdown, work) = start_worker(&w.engine);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while w.journal.lease(a.as_str()).await.unwrap().is_none() {
        assert!(std::time::Instant::now() < deadline, "never leased");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    shutdown.cancel();
    work.await.unwrap().unwrap();
    assert_eq!(w.view(&b).await.task.stage, "waiting");
    let restarted = w.engine_on(w.journal.clone());
    let (shutdown, work) = start_worker(&restarted);
    assert_eq!(
        ended(&w.journal, &[&a, &b]).await,
        [Stage::Done, Stage::Done]
    );
    shutdown.cancel();
    work.await.unwrap().unwrap();
    let log = log(&w.journal).await;
    assert!(done_at(&log, &a) < leased_at(&log, &b));
    assert_eq!(count(&log, &b, "task_leased"), 1);
}

#[tokio::test]
async fn two_workers_on_one_postgres_journal_run_a_chain_once_each_in_order() {
    if !Backend::Postgres.available() {
        eprintln!("skipped: no PostgreSQL (set GAFFER_TEST_POSTGRES_URL)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (journal, url) = Backend::Postgres.journal(dir.path()).await;
    let w = World::build_on(
        dir,
        journal,
        "demo",
        "grep -q '^## Installation' README.md",
        |_| {},
    )
    .await;
    script_done(&w, 3);
    let a = w.task("first", true).await;
    let b = after(&w, "second", &[&a]).await;
    let c = after(&w, "third", &[&b]).await;
    // Two processes, as far as the journal can tell: each its own connections,
    // hearing the other's events through LISTEN/NOTIFY.
    let mut workers = Vec::new();
    for _ in 0..2 {
        let own = gaffer_store::open(&url, gaffer_store::Durability::Normal)
            .await
            .unwrap();
        let engine = w.engine_on(own.clone());
        own.follow_only(engine.events_work_needs());
        own.follow_other_processes().await.unwrap();
        workers.push(start_worker(&engine));
    }
    assert_eq!(ended(&w.journal, &[&a, &b, &c]).await, [Stage::Done; 3]);
    for (shutdown, work) in workers {
        shutdown.cancel();
        work.await.unwrap().unwrap();
    }
    let log = log(&w.journal).await;
    assert_eq!(count(&log, &a, "task_leased"), 1);
    assert_ran_in_order(&log, &[&a, &b, &c]);
}
