//! `[[schedules]]` through the real processes: two `gaffer worker`s on one
//! PostgreSQL journal with an every-second schedule. Each slot is one task while
//! both run, while one is SIGKILLed and restarted, and across a short downtime of
//! both (slots then are late but on time); a `missed = "run_once"` schedule whose
//! last slot was long ago makes one task for the newest missed slot.

use super::failover::{Cluster, Proc};
use gaffer_core::{Actor, Event, StreamId, TaskOptions};
use gaffer_store::{now_ms, NewEvent, TaskFilter};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const SECOND: i64 = 1_000;
const MINUTE: i64 = 60 * SECOND;

/// Every schedule task's slot time (ms) by schedule name, from the journal, and how
/// many tasks each schedule has (more than its slots if a slot ran twice).
async fn slots(c: &Cluster) -> (BTreeMap<String, Vec<i64>>, BTreeMap<String, usize>) {
    let tasks = c
        .journal
        .tasks(&TaskFilter {
            limit: Some(100_000),
            ..TaskFilter::default()
        })
        .await
        .unwrap();
    let mut by_name: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    let mut count: BTreeMap<String, usize> = BTreeMap::new();
    for key in tasks.iter().filter_map(|t| t.origin_key.as_deref()) {
        let Some(rest) = key.strip_prefix("schedule:") else {
            continue;
        };
        let (name, at) = rest.split_once(':').unwrap();
        let at: jiff::Timestamp = at.parse().unwrap();
        by_name
            .entry(name.into())
            .or_default()
            .push(at.as_millisecond());
        *count.entry(name.into()).or_default() += 1;
    }
    for v in by_name.values_mut() {
        v.sort_unstable();
        v.dedup();
    }
    (by_name, count)
}

/// Wait (polling the journal) until the `tick` schedule has a task for the slot
/// at or after `at_ms`.
async fn tick_reaches(c: &Cluster, at_ms: i64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (by_name, _) = slots(c).await;
        if by_name
            .get("tick")
            .and_then(|s| s.last())
            .is_some_and(|last| *last >= at_ms)
        {
            return;
        }
        if Instant::now() > deadline {
            let logs: Vec<String> = ["a", "b"]
                .iter()
                .map(|w| {
                    std::fs::read_to_string(c.home.dir.path().join(format!("worker-{w}.log")))
                        .unwrap_or_default()
                })
                .collect();
            panic!(
                "no tick slot at {at_ms} yet: {by_name:?}\nworker a:\n{}\nworker b:\n{}",
                logs[0], logs[1]
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A `gaffer worker` running one task at a time, its log in `worker-<name>.log`.
fn worker(c: &Cluster, name: &str) -> Proc {
    let log = c.home.dir.path().join(format!("worker-{name}.log"));
    let (p, first) = c.start(&["worker", "--count", "1"], Some(&log));
    assert!(first.contains("is running"), "{first}");
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workers_run_each_slot_once_across_a_kill_a_restart_and_a_downtime() {
    let Some(c) = Cluster::new().await else {
        return;
    };
    c.project("p0");
    // Every agent turn takes 20 s: each worker holds one task, the others wait
    // queued; this is about which tasks exist, not how they run.
    gaffer_testkit::scenario::write_install_section_cycle(
        &c.home.dir.path().join("scenarios"),
        20_000,
    )
    .unwrap();
    c.home.write_config(
        "[[schedules]]\nname = \"tick\"\ncron = \"* * * * * *\"\nproject = \"p0\"\nrequest = \"Add an installation section to README\"\nmissed = \"skip\"\n\n\
         [[schedules]]\nname = \"catchup\"\ncron = \"0 * * * * *\"\nproject = \"p0\"\nrequest = \"Add an installation section to README\"\nmissed = \"run_once\"\n",
    );
    // `catchup` last ran ten minutes ago, and nothing has run since: what a
    // scheduler records for a slot (a task with the slot's key), written as it
    // would have been then.
    let t0 = now_ms();
    let seeded = t0 - t0.rem_euclid(MINUTE) - 10 * MINUTE;
    let project = c.journal.projects().await.unwrap()[0].id.clone();
    let seeded_task = format!("t-{:032x}", 0xfeed);
    c.journal
        .append(
            &StreamId::from(seeded_task.as_str()),
            0,
            vec![NewEvent::now(Event::TaskCreated {
                task_id: seeded_task.as_str().into(),
                project_id: project.as_str().into(),
                request: "Add an installation section to README".into(),
                by: Actor::system("schedule:catchup"),
                options: TaskOptions {
                    key: Some(format!(
                        "schedule:catchup:{}",
                        gaffer_config::slot_text(seeded)
                    )),
                    ..TaskOptions::default()
                },
            })],
        )
        .await
        .unwrap();

    let a = worker(&c, "a");
    let b = worker(&c, "b");
    let started = now_ms();
    tick_reaches(&c, started + 3 * SECOND).await;

    // One worker killed mid-run, restarted a few slots later.
    drop(a);
    let killed = now_ms();
    tick_reaches(&c, killed + 3 * SECOND).await;
    let a = worker(&c, "a");
    tick_reaches(&c, now_ms() + 2 * SECOND).await;

    // Both down for a few seconds: the slots that passed are late, not missed;
    // the first to come back runs each of them once.
    drop(a);
    drop(b);
    let down = now_ms();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let _a = worker(&c, "a");
    let _b = worker(&c, "b");
    let back = now_ms();
    tick_reaches(&c, back + 3 * SECOND).await;

    let (by_name, count) = slots(&c).await;
    let tick = &by_name["tick"];
    assert_eq!(count["tick"], tick.len(), "a tick slot has two tasks");
    // No gap: one task for every second from the first slot to the last, through
    // the kill and the downtime.
    let (first, last) = (tick[0], *tick.last().unwrap());
    assert!(
        first < killed && last > back,
        "{first} {killed} {back} {last}"
    );
    let expected: Vec<i64> = (0..=(last - first) / SECOND)
        .map(|i| first + i * SECOND)
        .collect();
    assert_eq!(
        tick, &expected,
        "a slot was skipped (down from {down} to {back})"
    );

    // `catchup`: the seeded slot, then exactly one for all the slots missed while
    // nothing ran (the newest of them, a minute or more before the schedulers
    // started), and the on-time ones since.
    let catchup = &by_name["catchup"];
    assert_eq!(
        count["catchup"],
        catchup.len(),
        "a catchup slot has two tasks"
    );
    assert_eq!(catchup[0], seeded, "{catchup:?}");
    let newest_missed = |at: i64| (at - MINUTE) - (at - MINUTE).rem_euclid(MINUTE);
    assert!(
        catchup.len() >= 2,
        "the missed slots made no task: {catchup:?}"
    );
    assert!(
        [newest_missed(t0), newest_missed(started)].contains(&catchup[1]),
        "not the newest missed slot: {catchup:?}"
    );
    assert!(
        catchup[2..].iter().all(|s| *s > t0 - MINUTE),
        "more than one missed slot ran: {catchup:?}"
    );
    assert!(
        catchup[1..].iter().all(|s| *s > seeded + 8 * MINUTE),
        "{catchup:?}"
    );
}
