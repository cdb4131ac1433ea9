//! The scheduler: every slot of a schedule becomes one task, with two schedulers
//! (two worker processes) on one journal, across a restart, and after slots
//! missed while none ran, on a clock moved by hand.
use super::support::fixture_repo;
use gaffer_app::{AddProject, App, Policy};
use gaffer_config::Schedule;
use gaffer_engine::schedules::{check_projects, due};
use gaffer_engine::{ManualClock, Scheduler};
use gaffer_store::{Durability, Journal};
use pretty_assertions::assert_eq;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// 2026-05-01T00:00:00Z.
const T0: i64 = 1_777_593_600_000;
const LATE: Duration = Duration::from_millis(500);
/// Each tick (a second) reads the added schedules again.
const RELOAD: Duration = Duration::from_millis(1000);

fn at(seconds: i64, ms: i64) -> i64 {
    T0 + seconds * 1000 + ms
}

/// The `[[schedules]]` of `toml`, as `gaffer serve` reads them.
fn schedules(toml: &str) -> Vec<Schedule> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    std::fs::write(&path, toml).unwrap();
    let env = |_: &str| None;
    gaffer_config::load(&gaffer_config::Sources {
        file: Some((path, true)),
        data_dir_flag: None,
        database_flag: None,
        default_data_dir: dir.path().join("data"),
        env: &env,
    })
    .unwrap()
    .schedules
}

fn every_second(missed: &str) -> Vec<Schedule> {
    schedules(&format!(
        "[[schedules]]\nname = \"tick\"\ncron = \"* * * * * *\"\nproject = \"demo\"\nrequest = \"look at the logs\"\nmissed = \"{missed}\"\n"
    ))
}

pub(super) struct Two {
    _dir: tempfile::TempDir,
    pub(super) apps: [App; 2],
}

/// Two processes' apps on one new journal (PostgreSQL or SQLite) with project `demo`.
pub(super) async fn two_processes(postgres: bool) -> Two {
    let dir = tempfile::tempdir().unwrap();
    let url = if postgres {
        gaffer_testkit::postgres::fresh_database().await
    } else {
        dir.path().join("gaffer.db").display().to_string()
    };
    let open = || async {
        let j: Arc<dyn Journal> = gaffer_store::open(&url, Durability::Normal).await.unwrap();
        App::new(j, Policy::default())
    };
    let apps = [open().await, open().await];
    let repo = fixture_repo(dir.path());
    apps[0]
        .add_project(
            AddProject {
                path: repo.display().to_string(),
                name: Some("demo".into()),
                check: None,
            },
            gaffer_core::Actor::user("ana", "test"),
        )
        .await
        .unwrap();
    Two { _dir: dir, apps }
}

/// Schedulers running in both processes on `clock`.
pub(super) struct Running {
    stop: CancellationToken,
    progress: Vec<tokio::sync::watch::Receiver<i64>>,
    joins: Vec<tokio::task::JoinHandle<gaffer_engine::Result<()>>>,
}

pub(super) fn start(two: &Two, schedules: &[Schedule], clock: &ManualClock) -> Running {
    let stop = CancellationToken::new();
    let mut progress = Vec::new();
    let mut joins = Vec::new();
    for app in &two.apps {
        let s = Scheduler::new(app.clone(), schedules.to_vec(), Arc::new(clock.clone()))
            .late_after(LATE)
            .reload_every(RELOAD);
        progress.push(s.progress());
        joins.push(tokio::spawn(s.run(stop.clone())));
    }
    Running {
        stop,
        progress,
        joins,
    }
}

impl Running {
    /// Both schedulers have handled the clock up to `now`.
    pub(super) async fn handled(&mut self, now: i64) {
        for p in &mut self.progress {
            tokio::time::timeout(Duration::from_secs(30), p.wait_for(|t| *t >= now))
                .await
                .expect("a scheduler did not look at the clock within 30 s")
                .unwrap();
        }
    }

    pub(super) async fn stop(self) {
        self.stop.cancel();
        for j in self.joins {
            j.await.unwrap().unwrap();
        }
    }
}

/// Move the clock to `now` and wait until both schedulers have handled it.
pub(super) async fn tick(clock: &ManualClock, run: &mut Running, now: i64) {
    clock.set(now);
    run.handled(now).await;
}

/// Every task's origin key, sorted, and how many `task_created` events there are.
pub(super) async fn keys(app: &App) -> (Vec<String>, usize) {
    let mut keys: Vec<String> = app
        .journal()
        .projections()
        .await
        .unwrap()
        .tasks
        .into_iter()
        .filter_map(|t| t.origin_key)
        .collect();
    keys.sort();
    let created = app
        .journal()
        .events_after(0, 100_000)
        .await
        .unwrap()
        .iter()
        .filter(|e| e.event.kind() == "task_created")
        .count();
    (keys, created)
}

fn slot_keys(seconds: impl IntoIterator<Item = i64>) -> Vec<String> {
    seconds
        .into_iter()
        .map(|s| format!("schedule:tick:{}", gaffer_config::slot_text(at(s, 0))))
        .collect()
}

/// Two schedulers start at 0.2 (slot 0 passed before the schedule ever ran: it
/// missed nothing) and run slots 1..=5, both stop, both start again at 6.2 and run
/// 6..=8: each slot once. Then nobody runs from 8.2 to 20.7; at the restart the
/// policy decides about slots 9..=20, and slot 21 runs as usual.
async fn once_per_slot_across_two_workers_and_restarts(postgres: bool, missed: &str) {
    let two = two_processes(postgres).await;
    let tick_schedule = every_second(missed);
    let clock = ManualClock::new(at(0, 200));
    let mut run = start(&two, &tick_schedule, &clock);
    run.handled(at(0, 200)).await;
    for s in 1..=5 {
        tick(&clock, &mut run, at(s, 200)).await;
    }
    run.stop().await;
    let expected = slot_keys(1..=5);
    assert_eq!(keys(&two.apps[0]).await, (expected.clone(), expected.len()));

    // A restart a little after slot 6: the slots already run stay as they are.
    clock.set(at(6, 200));
    let mut run = start(&two, &tick_schedule, &clock);
    run.handled(at(6, 200)).await;
    for s in 7..=8 {
        tick(&clock, &mut run, at(s, 200)).await;
    }
    run.stop().await;
    let expected = slot_keys(1..=8);
    assert_eq!(keys(&two.apps[1]).await, (expected.clone(), expected.len()));

    // Down from 8.2 to 20.7: slots 9..=20 pass with no scheduler (20 is later than
    // LATE when the schedulers start, so it was missed too).
    clock.set(at(20, 700));
    let mut run = start(&two, &tick_schedule, &clock);
    run.handled(at(20, 700)).await;
    let mut expected = slot_keys(1..=8);
    if missed == "run_once" {
        expected.extend(slot_keys([20]));
    }
    assert_eq!(
        keys(&two.apps[0]).await,
        (expected.clone(), expected.len()),
        "missed = {missed}"
    );
    tick(&clock, &mut run, at(21, 100)).await;
    run.stop().await;
    expected.extend(slot_keys([21]));
    assert_eq!(
        keys(&two.apps[0]).await,
        (expected.clone(), expected.len()),
        "missed = {missed}"
    );
}

#[tokio::test]
async fn two_workers_on_postgres_run_each_slot_once_and_skip_missed_slots() {
    if gaffer_testkit::postgres::available() {
        once_per_slot_across_two_workers_and_restarts(true, "skip").await;
    }
}

#[tokio::test]
async fn two_workers_on_postgres_run_each_slot_once_and_the_newest_missed_slot_once() {
    if gaffer_testkit::postgres::available() {
        once_per_slot_across_two_workers_and_restarts(true, "run_once").await;
    }
}

#[tokio::test]
async fn two_workers_on_sqlite_run_each_slot_once_and_the_newest_missed_slot_once() {
    once_per_slot_across_two_workers_and_restarts(false, "run_once").await;
}

#[test]
fn due_slots_are_the_on_time_ones_and_for_run_once_the_newest_missed() {
    let late = 60_000;
    let hourly = |missed: &str| {
        schedules(&format!(
            "[[schedules]]\nname = \"h\"\ncron = \"0 * * * *\"\nproject = \"demo\"\nrequest = \"r\"\nmissed = \"{missed}\"\n"
        ))
        .remove(0)
    };
    let (skip, once) = (hourly("skip"), hourly("run_once"));
    let hour = 3_600_000;
    // Handled up to 00:00; now 00:00:30: slot 00:00 is already handled.
    assert_eq!(due(&skip, T0, T0 + 30_000, late), Vec::<i64>::new());
    // Handled up to 00:59:59; now 01:00:30: slot 01:00 is on time.
    assert_eq!(
        due(&skip, T0 + hour - 1000, T0 + hour + 30_000, late),
        vec![T0 + hour]
    );
    // Handled up to 00:00, now 05:00:30 (down four hours): on time is only 05:00;
    // run_once adds the newest missed slot, 04:00.
    let now = T0 + 5 * hour + 30_000;
    assert_eq!(due(&skip, T0, now, late), vec![T0 + 5 * hour]);
    assert_eq!(
        due(&once, T0, now, late),
        vec![T0 + 4 * hour, T0 + 5 * hour]
    );
    // Now 05:02 (05:00 is two minutes late, so missed too): run_once runs only 05:00.
    let now = T0 + 5 * hour + 120_000;
    assert_eq!(due(&skip, T0, now, late), Vec::<i64>::new());
    assert_eq!(due(&once, T0, now, late), vec![T0 + 5 * hour]);
    // Nothing missed since the last handled time: run_once adds nothing.
    assert_eq!(due(&once, T0 + 5 * hour, now, late), Vec::<i64>::new());
}

#[tokio::test]
async fn a_schedule_naming_an_unregistered_project_is_refused_naming_the_field() {
    let two = two_processes(false).await;
    let bad = schedules(
        "[[schedules]]\nname = \"n\"\ncron = \"0 3 * * *\"\nproject = \"nope\"\nrequest = \"r\"\n",
    );
    let err = check_projects(&two.apps[0], &bad).await.unwrap_err();
    assert!(
        err.contains("schedules.n.project") && err.contains("`nope`"),
        "{err}"
    );
    assert_eq!(
        check_projects(&two.apps[0], &every_second("skip")).await,
        Ok(())
    );
}

/// The keys gaffer creates tasks under are in the namespaces only gaffer may use,
/// so no client's `Idempotency-Key` can claim an issue or a schedule's slot first.
#[test]
fn intake_and_schedule_keys_are_in_the_namespaces_only_gaffer_may_use() {
    let reserved = |key: &str| {
        gaffer_app::SYSTEM_KEY_PREFIXES
            .iter()
            .any(|p| key.starts_with(p))
    };
    let issue = gaffer_engine::origin_key("https://git.example.com/", "acme", "app", 5);
    assert!(reserved(&issue), "{issue}");
    let slot = every_second("skip")[0].slot_key(T0);
    assert!(reserved(&slot), "{slot}");
}
