//! The scheduler: each slot of each `[[schedules]]` entry becomes one task.
//!
//! It runs where workers run (`gaffer serve`, `gaffer worker`), in every such
//! process at once: a slot's task is created through [`App::create_task_once`]
//! with the slot's origin key (`schedule:<name>:<slot time, RFC 3339 UTC>`), which
//! the journal keeps unique, so however many schedulers see a slot, and however
//! often one restarts, the slot makes one task.
//!
//! A slot is *on time* when a scheduler sees it at most [`LATE_AFTER`] after its
//! time: it runs. Older slots that no scheduler turned into a task were *missed*
//! (no scheduler ran, or the machine slept): `missed = "skip"` drops them,
//! `"run_once"` makes one task for the newest of them. What a schedule ran last is
//! read from the journal (its newest slot key) when a scheduler starts; a schedule
//! that never ran has missed nothing.
//!
//! Schedules added at run time ([`App::add_schedule`]) run the same way: a
//! scheduler reads them again at once when its own process adds or removes one,
//! and every [`RELOAD_EVERY`] for what other processes did; a removed one stops. An
//! added schedule's slots start at the time it was added, so a name removed and
//! added again runs neither the slots its first life ran (their keys are taken)
//! nor those that passed while it was removed.
//!
//! Which slots are due ([`due`]) is a pure function of the schedule, the last
//! handled time and now; the clock is a [`Clock`], so tests move time by hand
//! ([`ManualClock`]).

use crate::error::Result;
use gaffer_app::{App, AppError, NewTask};
use gaffer_config::{Missed, Schedule};
use gaffer_core::Actor;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// How late a slot may be seen and still run as on time (a slow start, a busy
/// machine); a slot older than this when first seen was missed.
pub const LATE_AFTER: Duration = Duration::from_secs(60);

/// How long the scheduler waits before trying again after the journal failed.
const RETRY_AFTER_MS: i64 = 5_000;

/// The most on-time slots one look at the clock turns into tasks per schedule (a
/// schedule every second seen a minute late has 60).
const MAX_SLOTS_AT_ONCE: usize = 120;

/// Wall-clock time, in ms since the epoch, and waiting for it.
pub trait Clock: Send + Sync + 'static {
    /// Now.
    fn now_ms(&self) -> i64;
    /// Returns at `at_ms` or a little later; earlier is allowed too (the scheduler
    /// looks at the clock again).
    fn sleep_until(&self, at_ms: i64) -> Pin<Box<dyn Future<Output = ()> + Send + '_>>;
}

/// The system clock. Sleeps at most a minute at a time, so a clock set forward
/// (or a machine waking up) is noticed.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        gaffer_store::now_ms()
    }

    fn sleep_until(&self, at_ms: i64) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        let wait = (at_ms - self.now_ms()).clamp(0, 60_000) as u64;
        Box::pin(tokio::time::sleep(Duration::from_millis(wait)))
    }
}

/// A clock moved by hand: for tests, and for anyone who drives the scheduler.
#[derive(Debug, Clone)]
pub struct ManualClock(Arc<watch::Sender<i64>>);

impl ManualClock {
    /// A clock standing at `now_ms`.
    pub fn new(now_ms: i64) -> Self {
        Self(Arc::new(watch::Sender::new(now_ms)))
    }

    /// Move it to `now_ms`, waking whoever sleeps until then.
    pub fn set(&self, now_ms: i64) {
        self.0.send_replace(now_ms);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        *self.0.borrow()
    }

    fn sleep_until(&self, at_ms: i64) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        let mut rx = self.0.subscribe();
        Box::pin(async move {
            let _ = rx.wait_for(|now| *now >= at_ms).await;
        })
    }
}

/// The slots of `schedule` to turn into tasks now: those after `after` (the time
/// handled last) up to `now`; on-time ones all, and for `run_once` also the
/// newest one that is older than `late_after_ms`. Oldest first.
pub fn due(schedule: &Schedule, after: i64, now: i64, late_after_ms: i64) -> Vec<i64> {
    let mut slots = Vec::new();
    let on_time_after = after.max(now - late_after_ms);
    if schedule.missed == Missed::RunOnce && on_time_after > after {
        if let Some(missed) = schedule.latest_until(on_time_after) {
            if missed > after {
                slots.push(missed);
            }
        }
    }
    let mut from = on_time_after;
    while slots.len() < MAX_SLOTS_AT_ONCE {
        match schedule.next_after(from) {
            Some(slot) if slot <= now => {
                slots.push(slot);
                from = slot;
            }
            _ => break,
        }
    }
    slots
}

/// Every schedule's project is registered; else the field and what is wrong
/// (the CLI exits 78 with it).
pub async fn check_projects(app: &App, schedules: &[Schedule]) -> std::result::Result<(), String> {
    for s in schedules {
        match app.project(&s.project).await {
            Ok(_) => {}
            Err(AppError::NotFound { .. }) => {
                return Err(format!(
                    "`schedules.{}.project` is `{}`, which is not a registered project; register it with `gaffer project add PATH` or name another",
                    s.name, s.project
                ))
            }
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(())
}

/// How often a scheduler reads the added schedules again (on its clock), to see
/// what other processes added or removed.
pub const RELOAD_EVERY: Duration = Duration::from_secs(2);

/// One schedule a scheduler runs, and the time up to which its slots are handled.
struct Running {
    schedule: Schedule,
    /// The stored row of an added schedule (`None`: from the config): a name removed
    /// and added again is another row, so another schedule.
    added: Option<i64>,
    cursor: i64,
}

/// Turns the slots of the config's `schedules` and of the schedules added at run
/// time ([`App::add_schedule`]) into tasks, on `clock`, until stopped.
pub struct Scheduler {
    app: App,
    schedules: Vec<Schedule>,
    clock: Arc<dyn Clock>,
    late_after_ms: i64,
    reload_ms: i64,
    progress: watch::Sender<i64>,
}

impl Scheduler {
    /// A scheduler for `schedules` (the config's) and the added ones, creating
    /// tasks through `app`.
    pub fn new(app: App, schedules: Vec<Schedule>, clock: Arc<dyn Clock>) -> Self {
        Self {
            app,
            schedules,
            clock,
            late_after_ms: LATE_AFTER.as_millis() as i64,
            reload_ms: RELOAD_EVERY.as_millis() as i64,
            progress: watch::Sender::new(i64::MIN),
        }
    }

    /// The same, with slots late after `late_after` counted as missed.
    pub fn late_after(mut self, late_after: Duration) -> Self {
        self.late_after_ms = late_after.as_millis() as i64;
        self
    }

    /// The same, reading the added schedules again every `every` of its clock.
    pub fn reload_every(mut self, every: Duration) -> Self {
        self.reload_ms = (every.as_millis() as i64).max(1);
        self
    }

    /// The time up to which every schedule's slots have been handled, the added
    /// schedules read at least once at that time or later (for tests and status);
    /// `i64::MIN` before the first look at the clock.
    pub fn progress(&self) -> watch::Receiver<i64> {
        self.progress.subscribe()
    }

    /// The newest slot of `s` that made a task, if any.
    async fn last_slot(&self, s: &Schedule) -> gaffer_store::Result<Option<i64>> {
        Ok(self
            .app
            .journal()
            .newest_task_with_key_prefix(&s.key_prefix())
            .await?
            .and_then(|t| t.origin_key)
            .and_then(|k| s.slot_of_key(&k)))
    }

    /// Bring `running`'s added schedules in line with the store: drop the removed,
    /// start the new. A new one's slots start at the time it was added (what came
    /// before is not its own), or after its name's newest slot.
    async fn reload(&self, running: &mut Vec<Running>) -> std::result::Result<(), AppError> {
        let added = self.app.added_schedules().await?;
        running.retain(|r| match r.added {
            None => true,
            Some(id) => added.iter().any(|a| a.record.id == id),
        });
        for a in added {
            if running.iter().any(|r| r.added == Some(a.record.id)) {
                continue;
            }
            if running.iter().any(|r| r.schedule.name == a.schedule.name) {
                // The config took the name after it was added: the config's runs.
                continue;
            }
            let created = a.record.created_at;
            let cursor = self
                .last_slot(&a.schedule)
                .await?
                .map_or(created, |l| l.max(created));
            tracing::info!(schedule = %a.schedule.name, "added schedule runs");
            running.push(Running {
                schedule: a.schedule,
                added: Some(a.record.id),
                cursor,
            });
        }
        Ok(())
    }

    /// Run until `stop`. Fails only when the journal cannot be read at start.
    pub async fn run(self, stop: CancellationToken) -> Result<()> {
        let start = self.clock.now_ms();
        let mut running = Vec::with_capacity(self.schedules.len());
        for s in &self.schedules {
            // A schedule that never ran has missed nothing, not even the slots of
            // the last LATE_AFTER (a schedule every second would start with 60).
            let cursor = self.last_slot(s).await?.unwrap_or(start);
            running.push(Running {
                schedule: s.clone(),
                added: None,
                cursor,
            });
        }
        let mut changed = self.app.schedules_changed();
        let mut reload_at = i64::MIN;
        loop {
            let now = self.clock.now_ms();
            let mut failed = false;
            if now >= reload_at || changed.has_changed().unwrap_or(false) {
                changed.borrow_and_update();
                match self.reload(&mut running).await {
                    Ok(()) => reload_at = now + self.reload_ms,
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot read the added schedules; trying again");
                        reload_at = now + RETRY_AFTER_MS;
                    }
                }
            }
            for r in &mut running {
                let s = &r.schedule;
                match self
                    .fire(s, due(s, r.cursor, now, self.late_after_ms))
                    .await
                {
                    Ok(()) => r.cursor = r.cursor.max(now),
                    Err(e) => {
                        // The cursor stays: the next look tries these slots again
                        // (their keys keep a slot from running twice).
                        tracing::warn!(schedule = %s.name, error = %e, "cannot queue a scheduled task; trying again");
                        failed = true;
                    }
                }
            }
            self.progress.send_replace(now);
            let next = running
                .iter()
                .filter_map(|r| r.schedule.next_after(r.cursor))
                .min()
                .unwrap_or(i64::MAX)
                .min(reload_at.max(now));
            let wake = if failed {
                next.min(now + RETRY_AFTER_MS)
            } else {
                next
            };
            tokio::select! {
                () = stop.cancelled() => return Ok(()),
                () = self.clock.sleep_until(wake) => {}
                Ok(()) = changed.changed() => {}
            }
        }
    }

    /// One task per slot, each once.
    async fn fire(&self, s: &Schedule, slots: Vec<i64>) -> std::result::Result<(), AppError> {
        for slot in slots {
            let key = s.slot_key(slot);
            let created = self
                .app
                .create_task_once(
                    NewTask {
                        project: s.project.clone(),
                        request: s.request.clone(),
                        agent: s.agent.clone(),
                        key: Some(key.clone()),
                        ..NewTask::default()
                    },
                    Actor::system(&format!("schedule:{}", s.name)),
                )
                .await?;
            if !created.existing {
                tracing::info!(schedule = %s.name, task = %created.task.id, slot = %key, "scheduled task queued");
            }
        }
        Ok(())
    }
}
