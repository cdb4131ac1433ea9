//! Workers: run every unfinished task, and each new one as soon as it is queued,
//! with a limit on how many run at once overall and per project.

use crate::driver::Engine;
use crate::error::Result;
use gaffer_core::{Event, Stage, TaskId};
use gaffer_store::TaskFilter;
use std::collections::{HashMap, VecDeque};
use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// How many tasks run at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Concurrency {
    /// In all.
    pub workers: usize,
    /// In one project (two owners in one repository rarely help each other).
    pub per_project: usize,
}

impl Engine {
    /// Run tasks until `shutdown`: first every unfinished task (recovered from the
    /// journal), then each task as it is created, woken by the journal's events.
    /// On shutdown running tasks are dropped, not cancelled: their steps are found
    /// interrupted at the next start and resume by the recovery rules.
    pub async fn work(&self, limits: Concurrency, shutdown: CancellationToken) -> Result<()> {
        let mut events = self.app().journal().subscribe();
        let mut queue: VecDeque<(TaskId, String)> = VecDeque::new();
        for id in self.recover().await? {
            if let Some(project) = self.project_of(&id).await? {
                queue.push_back((id, project));
            }
        }
        let mut running: HashMap<TaskId, String> = HashMap::new();
        let mut set: JoinSet<TaskId> = JoinSet::new();
        let workers = limits.workers.max(1);
        let per_project = limits.per_project.max(1);
        loop {
            // Start what the limits allow, oldest first.
            let mut i = 0;
            while running.len() < workers && i < queue.len() {
                let busy = running.values().filter(|p| **p == queue[i].1).count();
                if busy >= per_project {
                    i += 1;
                    continue;
                }
                let Some((id, project)) = queue.remove(i) else {
                    break;
                };
                running.insert(id.clone(), project);
                let engine = self.clone();
                let token = shutdown.child_token();
                set.spawn(async move {
                    match engine.run_task(&id, token).await {
                        Ok(stage) => tracing::info!(task = %id, %stage, "task ended"),
                        Err(e) => tracing::warn!(task = %id, "task stopped: {e}"),
                    }
                    id
                });
            }
            tokio::select! {
                () = shutdown.cancelled() => {
                    set.abort_all();
                    return Ok(());
                }
                Some(done) = set.join_next() => {
                    if let Ok(id) = done {
                        running.remove(&id);
                    }
                }
                got = events.recv() => match got {
                    Ok(e) => {
                        if let Event::TaskCreated { task_id, project_id, .. } = e.event {
                            if !running.contains_key(&task_id) && !queue.iter().any(|(q, _)| *q == task_id) {
                                queue.push_back((task_id, project_id.0));
                            }
                        }
                    }
                    // Missed events: look at the journal itself for queued tasks.
                    Err(RecvError::Lagged(_)) => {
                        for row in self.app().journal().tasks(&TaskFilter { stage: Some(Stage::Queued.as_str().into()), limit: Some(i64::MAX), ..Default::default() }).await? {
                            let id = TaskId(row.id);
                            if !running.contains_key(&id) && !queue.iter().any(|(q, _)| *q == id) {
                                queue.push_back((id, row.project_id));
                            }
                        }
                    }
                    Err(RecvError::Closed) => return Ok(()),
                },
            }
        }
    }

    async fn project_of(&self, id: &TaskId) -> Result<Option<String>> {
        Ok(self
            .app()
            .journal()
            .task(id.as_str())
            .await?
            .map(|v| v.task.project_id))
    }
}
