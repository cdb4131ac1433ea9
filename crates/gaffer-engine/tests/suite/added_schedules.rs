//! Schedules added and removed at run time ([`App::add_schedule`]): two schedulers
//! (two worker processes) on one journal pick an added schedule up — the adding
//! process at once, the other on its next read — run each slot once, stop when it
//! is removed (in the other process), and a name added again runs neither the slots
//! its first life ran nor those that passed while it was removed.
use super::schedules::{keys, start, tick, two_processes};
use gaffer_app::App;
use gaffer_config::ScheduleSpec;
use gaffer_core::Actor;
use gaffer_engine::ManualClock;
use pretty_assertions::assert_eq;
use std::time::Duration;

fn every_second(missed: &str) -> ScheduleSpec {
    ScheduleSpec {
        name: "tick".into(),
        cron: "* * * * * *".into(),
        project: "demo".into(),
        request: "look at the logs".into(),
        missed: Some(missed.into()),
        ..ScheduleSpec::default()
    }
}

async fn add(app: &App, missed: &str) {
    app.add_schedule(every_second(missed), &[], Actor::user("ana", "test"))
        .await
        .unwrap();
}

async fn added_then_removed_then_added_again(postgres: bool) {
    let two = two_processes(postgres).await;
    // The clock starts at the next whole second of the real one: an added
    // schedule's slots start when it was added (the real clock).
    let base = (gaffer_store::now_ms() / 1000 + 1) * 1000;
    let at = |s: i64, ms: i64| base + s * 1000 + ms;
    let slots = |seconds: &[i64]| -> Vec<String> {
        seconds
            .iter()
            .map(|s| format!("schedule:tick:{}", gaffer_config::slot_text(at(*s, 0))))
            .collect()
    };
    let clock = ManualClock::new(at(0, 200));
    let mut run = start(&two, &[], &clock);
    run.handled(at(0, 200)).await;
    assert_eq!(keys(&two.apps[0]).await, (vec![], 0));

    add(&two.apps[0], "skip").await;
    for s in 1..=3 {
        tick(&clock, &mut run, at(s, 200)).await;
    }
    let expected = slots(&[1, 2, 3]);
    assert_eq!(keys(&two.apps[1]).await, (expected.clone(), 3));

    // Removed by the other process: neither scheduler runs a slot after it.
    two.apps[1]
        .remove_schedule("tick", &[], Actor::user("ana", "test"))
        .await
        .unwrap();
    for s in 4..=5 {
        tick(&clock, &mut run, at(s, 200)).await;
    }
    assert_eq!(keys(&two.apps[0]).await, (expected.clone(), 3));

    // Added again once slot 6 has passed, missed = run_once: slots 1..=3 stay as
    // they are, 4..=6 passed before this schedule existed, 7 and 8 run.
    while gaffer_store::now_ms() <= at(6, 0) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    add(&two.apps[1], "run_once").await;
    for s in 7..=8 {
        tick(&clock, &mut run, at(s, 200)).await;
    }
    run.stop().await;
    let expected = slots(&[1, 2, 3, 7, 8]);
    assert_eq!(keys(&two.apps[0]).await, (expected, 5));
}

#[tokio::test]
async fn an_added_schedule_runs_once_per_slot_in_two_processes_and_stops_when_removed_on_sqlite() {
    added_then_removed_then_added_again(false).await;
}

#[tokio::test]
async fn an_added_schedule_runs_once_per_slot_in_two_processes_and_stops_when_removed_on_postgres()
{
    if gaffer_testkit::postgres::available() {
        added_then_removed_then_added_again(true).await;
    }
}
