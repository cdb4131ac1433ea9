//! Workers: many processes, on many machines, run the tasks of one journal.
//!
//! A worker claims an unfinished task whose lease is free or expired
//! ([`gaffer_store::Journal::claim_task`]), records `task_leased`, marks the steps a
//! previous holder left running as interrupted (the recovery rules then re-run
//! reads and idempotent steps and turn non-idempotent ones into `effect_unknown`),
//! and runs it. Every append it makes for the task goes through a
//! [`FencedJournal`], so once another worker has taken the task over, the next
//! append is refused in the store; the heartbeat notices the loss too and drops the
//! task's run at once, which kills its agent processes. New tasks wake the workers
//! through the journal's events; expired leases of dead workers are found at each
//! heartbeat (a third of the lease length). A task that runs after others is not
//! claimed while it waits: a worker that hears a task end settles the waiting
//! ones (`dependencies`), and the one its last dependency queues is claimed at once.
//!
//! A task runs in its project's repository and its worktree, which are files on
//! one machine. A worker claims only tasks of projects whose repository is on its
//! machine, and hands back at once a task whose worktree another machine made: a
//! takeover across machines needs the data dir (the worktrees) on storage every
//! machine mounts at the same path.

use crate::driver::Engine;
use crate::error::{EngineError, Result};
use gaffer_core::{Event, Stage, TaskId};
use gaffer_store::{FencedJournal, Journal, Lease, LeaseEnd, WorkerInfo};
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;
use tokio::task::{AbortHandle, JoinSet};
use tokio_util::sync::CancellationToken;

/// How many tasks run at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Concurrency {
    /// In all, in this process.
    pub workers: usize,
    /// In one project (two owners in one repository rarely help each other).
    pub per_project: usize,
}

/// This process as a worker: `host/pid/random`, unique across restarts.
pub fn this_process(lease: Duration) -> WorkerInfo {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into());
    let pid = std::process::id();
    let nonce = uuid::Uuid::new_v4().simple().to_string();
    WorkerInfo {
        id: format!("{host}/{pid}/{}", &nonce[..6]),
        host,
        pid: i64::from(pid),
        lease_ms: i64::try_from(lease.as_millis()).unwrap_or(i64::MAX),
    }
}

/// How often a worker renews its leases: a third of their length, so two
/// heartbeats may be late before a lease lapses.
fn heartbeat_every(me: &WorkerInfo) -> Duration {
    Duration::from_millis((me.lease_ms / 3).max(1) as u64)
}

/// How a run ended, for the worker's counters.
fn lease_end(result: &Result<Stage>) -> LeaseEnd {
    match result {
        Ok(Stage::Done | Stage::Cancelled) => LeaseEnd::Finished,
        // Not run here at all: handed to a worker on the right machine.
        Err(EngineError::Elsewhere(_)) => LeaseEnd::Handed,
        _ => LeaseEnd::Failed,
    }
}

impl Engine {
    /// This engine with every append for `lease.task_id` fenced by `lease`: the
    /// driver's and the app service's (approval requests) alike.
    pub fn fenced(&self, lease: Lease) -> Engine {
        let journal = Arc::new(FencedJournal::new(self.app().journal().clone(), lease));
        self.with_app(self.app().with_journal(journal))
    }

    /// Start a leased task: record the lease and, in the same append, what a
    /// previous holder left running as interrupted. False if the task has ended
    /// meanwhile.
    async fn take_over(&self, lease: &Lease) -> Result<bool> {
        let leased = Event::TaskLeased {
            worker_id: lease.worker_id.clone(),
            generation: lease.generation,
        };
        self.take_over_task(&TaskId(lease.task_id.clone()), Some(leased))
            .await
    }

    /// Whether task `id` can run on this machine: its worktree, once made, must be
    /// here. Read-only, so a worker that cannot run it writes nothing for it.
    async fn check_runnable_here(&self, id: &TaskId) -> Result<()> {
        let Some((task, _)) = self.load(id).await? else {
            return Err(EngineError::Invalid(format!("task `{id}` does not exist")));
        };
        let Ok(path) = self.worktree_path(&task) else {
            return Ok(()); // No worktree yet: this machine makes it.
        };
        if path.is_dir() {
            return Ok(());
        }
        Err(EngineError::Elsewhere(format!(
            "task `{id}` cannot run on this machine: its worktree `{}` is not here (another machine made it). Put the data dir on storage every machine mounts at the same path, or let a worker on that machine resume it",
            path.display()
        )))
    }

    /// Projects whose repository is not on this machine: their tasks are left to
    /// workers elsewhere.
    async fn projects_elsewhere(&self) -> Result<Vec<String>> {
        Ok(self
            .app()
            .journal()
            .projects()
            .await?
            .into_iter()
            .filter(|p| !Path::new(&p.path).is_dir())
            .map(|p| p.id)
            .collect())
    }

    /// Run one leased task to its end, fenced by its lease.
    async fn run_leased(&self, lease: Lease, cancel: CancellationToken) -> Result<Stage> {
        self.check_runnable_here(&TaskId(lease.task_id.clone()))
            .await?;
        let fenced = self.fenced(lease.clone());
        if !fenced.take_over(&lease).await? {
            return Err(EngineError::Finished(lease.task_id));
        }
        fenced.run_task(&TaskId(lease.task_id), cancel).await
    }

    /// Run the task `id` here (`gaffer run`, `gaffer task resume`) as worker `me`,
    /// holding its lease while it runs; a task that has ended returns its stage.
    /// `Ok(None)`: another live worker holds it.
    /// A lost lease stops the run at once with [`gaffer_store::StoreError::LeaseLost`].
    pub async fn run_one(
        &self,
        id: &TaskId,
        me: &WorkerInfo,
        cancel: CancellationToken,
    ) -> Result<Option<Stage>> {
        let journal = self.app().journal().clone();
        journal.register_worker(me).await?;
        self.reap_dead_neighbours(me).await?;
        let Some(lease) = journal.claim_task(me, &[], Some(id.as_str())).await? else {
            journal.stop_worker(&me.id).await?;
            // Not claimable: it has ended (say how), or another worker holds it.
            return match self.load(id).await? {
                Some((task, _)) if task.stage.is_final() => Ok(Some(task.stage)),
                Some(_) => Ok(None),
                None => Err(EngineError::Invalid(format!("task `{id}` does not exist"))),
            };
        };
        // The heartbeat beats in a task of its own. Awaited in place of the run, a
        // beat that came while the run was inside an append (SQLite: holding the
        // write lock) waited for a lock the run could not release until the beat
        // ended: both stood still for the busy timeout (issue #16).
        let mut beating = AbortOnDrop(tokio::spawn(beat_until_lost(
            journal.clone(),
            me.clone(),
            lease.clone(),
        )));
        let result = tokio::select! {
            r = self.run_leased(lease.clone(), cancel) => r,
            // It ends only when the lease is lost.
            _ = &mut beating.0 => Err(lease_lost(&lease)),
        };
        drop(beating);
        release(&*journal, &lease, lease_end(&result)).await;
        if let Err(e) = journal.stop_worker(&me.id).await {
            tracing::warn!("recording this worker's stop: {e}");
        }
        result.map(Some)
    }

    /// Release at once the leases of workers on this host whose process is gone (a
    /// crashed `gaffer run`, say), so resuming here needs no wait for their expiry.
    /// Only a liveness shortcut: were such a worker alive after all, its next append
    /// would be refused by the fence.
    async fn reap_dead_neighbours(&self, me: &WorkerInfo) -> Result<()> {
        let journal = self.app().journal();
        for w in journal.workers().await? {
            if w.stopped_at.is_none()
                && w.host == me.host
                && w.pid != me.pid
                && !process_alive(w.pid)
            {
                tracing::info!(worker = %w.id, "its process is gone: releasing its leases");
                journal.stop_worker(&w.id).await?;
            }
        }
        Ok(())
    }

    /// Load what each process loads once, on its first task otherwise (the context
    /// tokenizer, a fraction of a second), so that no task waits for it. Call it
    /// before taking work.
    pub async fn warm_up() {
        let tokenizer = tokio::task::spawn_blocking(|| {
            gaffer_index::Tokenizer::load(crate::driver::CONTEXT_TOKENIZER).map(|_| ())
        });
        if let Ok(Err(e)) = tokenizer.await {
            tracing::warn!("loading the context tokenizer: {e}");
        }
    }

    /// What a process that only runs tasks needs to hear of other processes' events,
    /// for [`gaffer_store::Journal::follow_only`]: new tasks and reopened ones (to claim them), new
    /// approvals (the expiry timer), and everything of the tasks [`Engine::work`]
    /// runs now (decisions, cancellations). A task is added before its run starts,
    /// so its run misses nothing: what it does not hear was in the state it read.
    pub fn events_work_needs(&self) -> gaffer_store::WantedEvents {
        let held = self.held.clone();
        Arc::new(move |stream: &str, kind: &str| {
            crate::dependencies::may_settle(kind)
                || kind == "task_dependency_done"
                || kind == "follow_up_opened"
                || kind == "approval_requested"
                || held
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .contains(stream)
        })
    }

    /// Run tasks as worker `me` until `shutdown` (and poll the forges for issue intake
    /// and follow the done tasks' pull requests, [`Engine::follow`], meanwhile): claim
    /// what the limits allow, run
    /// each fenced by its lease, renew the leases by heartbeat, and drop at once a
    /// task whose lease was lost. On shutdown running tasks are dropped, not
    /// cancelled, and their leases released: another worker (or the next start)
    /// takes them over and resumes them by the recovery rules.
    pub async fn work(
        &self,
        me: &WorkerInfo,
        limits: Concurrency,
        shutdown: CancellationToken,
    ) -> Result<()> {
        let journal = self.app().journal().clone();
        let mut events = journal.subscribe();
        journal.register_worker(me).await?;
        // Issue intake polls wherever tasks are worked on (see `crate::intake`).
        let _polling = AbortOnDrop(tokio::spawn({
            let (engine, stop) = (self.clone(), shutdown.clone());
            async move { engine.poll_intake(stop).await }
        }));
        // Every process that runs tasks also follows the done tasks' pull requests.
        let _follower = AbortOnDrop(tokio::spawn({
            let engine = self.clone();
            let stop = shutdown.child_token();
            async move { engine.follow(stop).await }
        }));
        let workers = limits.workers.max(1);
        let per_project = limits.per_project.max(1);
        // tokio task id → the lease it runs under, and how to drop the run.
        let mut running: HashMap<tokio::task::Id, (Lease, AbortHandle)> = HashMap::new();
        let mut set: JoinSet<Result<Stage>> = JoinSet::new();
        let mut beat = tokio::time::interval(heartbeat_every(me));
        let mut look = true;
        // Settle the waiting tasks first: their dependencies may have ended while
        // no worker ran.
        let mut settle = true;
        // Tasks whose worktree is on another machine, and projects already reported
        // as not on this one (each said once in the log).
        let mut tasks_elsewhere: HashSet<String> = HashSet::new();
        let mut projects_reported: HashSet<String> = HashSet::new();
        loop {
            self.held
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .retain(|t| running.values().any(|(l, _)| l.task_id == *t));
            if settle {
                settle = false;
                match self.settle_waiting().await {
                    Ok(moved) => look |= !moved.is_empty(),
                    // Tried again at the next beat or event.
                    Err(e) => tracing::warn!("settling waiting tasks: {e}"),
                }
            }
            let mut elsewhere = if look {
                self.projects_elsewhere().await.unwrap_or_else(|e| {
                    tracing::warn!("reading the projects: {e}");
                    Vec::new()
                })
            } else {
                Vec::new()
            };
            for p in &elsewhere {
                if projects_reported.insert(p.clone()) {
                    tracing::warn!(project = %p, "its repository is not on this machine: its tasks are left to workers elsewhere");
                }
            }
            elsewhere.extend(tasks_elsewhere.iter().cloned());
            // Claim what the limits allow, oldest first.
            while look && running.len() < workers {
                let mut per: HashMap<&str, usize> = HashMap::new();
                for (l, _) in running.values() {
                    *per.entry(l.project_id.as_str()).or_default() += 1;
                }
                let skip: Vec<String> = per
                    .into_iter()
                    .filter(|(_, n)| *n >= per_project)
                    .map(|(p, _)| p.to_owned())
                    .chain(elsewhere.iter().cloned())
                    .collect();
                let lease = match journal.claim_task(me, &skip, None).await {
                    Ok(Some(lease)) => lease,
                    Ok(None) => break,
                    // Tried again at the next beat or event.
                    Err(e) => {
                        tracing::warn!("claiming a task: {e}");
                        break;
                    }
                };
                tracing::info!(task = %lease.task_id, generation = lease.generation, "leased");
                self.held
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(lease.task_id.clone());
                let engine = self.clone();
                // Not a child of `shutdown`: a shutdown drops the run (abort below), it
                // does not cancel the task. A child token let the run see the shutdown
                // first and record `task_cancelled` ("the run was stopped"), so a
                // restart cancelled the tasks it should have handed over.
                let token = CancellationToken::new();
                let handle = set.spawn({
                    let lease = lease.clone();
                    async move { engine.run_leased(lease, token).await }
                });
                running.insert(handle.id(), (lease, handle));
            }
            look = false;
            tokio::select! {
                () = shutdown.cancelled() => {
                    set.abort_all();
                    // Runs that ended before the abort are counted as they ended.
                    while let Some(done) = set.join_next_with_id().await {
                        if let Ok((tid, result)) = done {
                            if let Some((lease, _)) = running.remove(&tid) {
                                release(&*journal, &lease, lease_end(&result)).await;
                            }
                        }
                    }
                    journal.stop_worker(&me.id).await?;
                    self.held.lock().unwrap_or_else(|e| e.into_inner()).clear();
                    return Ok(());
                }
                Some(done) = set.join_next_with_id() => {
                    let (tid, result) = match done {
                        Ok((tid, r)) => (tid, r),
                        // Aborted: its lease was lost and it is already accounted for.
                        Err(e) => { running.remove(&e.id()); look = true; continue; }
                    };
                    if let Some((lease, _)) = running.remove(&tid) {
                        match &result {
                            Ok(stage) => tracing::info!(task = %lease.task_id, %stage, "task ended"),
                            Err(e @ EngineError::Elsewhere(_)) => {
                                tracing::warn!(task = %lease.task_id, "{e}");
                                tasks_elsewhere.insert(lease.task_id.clone());
                            }
                            Err(e) => tracing::warn!(task = %lease.task_id, "task stopped: {e}"),
                        }
                        release(&*journal, &lease, lease_end(&result)).await;
                    }
                    look = true;
                }
                _ = beat.tick() => {
                    let held: Vec<Lease> = running.values().map(|(l, _)| l.clone()).collect();
                    let lost = match journal.heartbeat(me, &held).await {
                        Ok(lost) => lost,
                        // The next beat tries again; the fence covers a lapse meanwhile.
                        Err(e) => {
                            tracing::warn!("heartbeat: {e}");
                            Vec::new()
                        }
                    };
                    // Another worker took these over: stop them now (dropping a run kills
                    // its agent processes); their appends would be refused anyway.
                    let mut dropped = Vec::new();
                    running.retain(|_, (lease, run)| {
                        if lost.contains(&lease.task_id) {
                            tracing::warn!("{}", lease_lost(lease));
                            run.abort();
                            dropped.push(lease.clone());
                            false
                        } else {
                            true
                        }
                    });
                    for lease in dropped {
                        // Counted as a failure of this worker; the new holder's lease stays.
                        release(&*journal, &lease, LeaseEnd::Failed).await;
                    }
                    // Leases of dead workers expire without an event: look at each beat;
                    // an end this process missed is settled too.
                    look = true;
                    settle = true;
                }
                got = events.recv() => match got {
                    Ok(e) => {
                        let kind = e.event.kind();
                        if crate::dependencies::may_settle(kind) {
                            settle = true;
                        }
                        // A new task, one its last dependency queued (in another
                        // process), or a done one a follow-up opened again.
                        if matches!(e.event, Event::TaskCreated { .. } | Event::TaskDependencyDone { .. } | Event::FollowUpOpened { .. }) {
                            look = true;
                        }
                    }
                    Err(RecvError::Lagged(_)) => {
                        look = true;
                        settle = true;
                    }
                    Err(RecvError::Closed) => return Ok(()),
                },
            }
        }
    }
}

/// Renew `lease` every third of its length until another worker takes it over.
async fn beat_until_lost(journal: Arc<dyn Journal>, me: WorkerInfo, lease: Lease) {
    let mut beat = tokio::time::interval(heartbeat_every(&me));
    beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        beat.tick().await;
        match journal.heartbeat(&me, std::slice::from_ref(&lease)).await {
            Ok(lost) if !lost.is_empty() => return,
            Ok(_) => {}
            // The next beat tries again; should the lease lapse meanwhile, the
            // fence still keeps a second worker's run and ours apart.
            Err(e) => tracing::warn!("heartbeat: {e}"),
        }
    }
}

/// A background task stopped when this is dropped: the heartbeat of one run (the run
/// ended, or was dropped), the intake poller and the follower of a worker loop.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Give a lease up; a failure only delays another worker's takeover until expiry.
async fn release(journal: &dyn Journal, lease: &Lease, end: LeaseEnd) {
    if let Err(e) = journal.release_lease(lease, end).await {
        tracing::warn!(task = %lease.task_id, "releasing the lease: {e}; it expires by itself");
    }
}

/// Whether process `pid` of this host runs. Without `/proc`, every process is
/// assumed to run (its leases then expire by themselves).
fn process_alive(pid: i64) -> bool {
    !Path::new("/proc/self").exists() || Path::new(&format!("/proc/{pid}")).exists()
}

fn lease_lost(lease: &Lease) -> EngineError {
    EngineError::Store(gaffer_store::StoreError::LeaseLost {
        task: lease.task_id.clone(),
        worker: lease.worker_id.clone(),
        generation: lease.generation,
        holder: None,
    })
}
