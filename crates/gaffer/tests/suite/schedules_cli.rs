//! `gaffer schedules add|remove` with two real `gaffer worker` processes on one
//! PostgreSQL: a schedule added while they run is picked up by both, each slot
//! becomes one task, and once removed no slot runs any more.

use super::failover::Cluster;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// The slot keys of `tick`'s tasks, and how many `task_created` events have one.
async fn slots(c: &Cluster) -> (BTreeSet<String>, usize) {
    let mut keys = BTreeSet::new();
    let mut created = 0;
    for e in c.journal.events_after(0, 1_000_000).await.unwrap() {
        if let gaffer_core::Event::TaskCreated { options, .. } = &e.event {
            if let Some(k) = options
                .key
                .as_ref()
                .filter(|k| k.starts_with("schedule:tick:"))
            {
                keys.insert(k.clone());
                created += 1;
            }
        }
    }
    (keys, created)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_added_while_two_workers_run_makes_one_task_per_slot_until_removed() {
    let Some(c) = Cluster::new().await else {
        return;
    };
    c.project("p0");
    let (_w1, _) = c.worker(None);
    let (_w2, _) = c.worker(None);
    let out = c.ok(&[
        "schedules",
        "add",
        "tick",
        "--cron",
        "* * * * * *",
        "--project",
        "p0",
        "--request",
        "Add an installation section to README",
    ]);
    assert!(
        out.contains("added schedule tick (* * * * * * UTC)"),
        "{out}"
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (keys, _) = slots(&c).await;
        if keys.len() >= 3 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the workers made {} scheduled tasks in 60 s",
            keys.len()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let out = c.ok(&["schedules", "remove", "tick"]);
    assert!(out.contains("removed schedule tick"), "{out}");
    // Every scheduler reads the schedules again within RELOAD_EVERY (2 s).
    tokio::time::sleep(Duration::from_secs(4)).await;
    let (keys, created) = slots(&c).await;
    assert_eq!(created, keys.len(), "a slot made two tasks: {keys:?}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        slots(&c).await,
        (keys.clone(), created),
        "slots ran after the removal"
    );
    // One task per second from the first slot to the last: none left out.
    let times: Vec<i64> = keys
        .iter()
        .map(|k| {
            k.trim_start_matches("schedule:tick:")
                .parse::<jiff::Timestamp>()
                .unwrap()
                .as_millisecond()
        })
        .collect();
    assert!(
        times.windows(2).all(|w| w[1] - w[0] == 1000),
        "slots were left out: {keys:?}"
    );
}
