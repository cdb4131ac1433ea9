//! Task dependencies at run time: bring what the tasks a waiting task runs after
//! came to into its stream, as the reducer's [`gaffer_core::dependency::settle`]
//! decides, so the last one done queues it and a failed one blocks it.
//!
//! Who settles: every worker, when it hears a task end or a task be created (the
//! journal's events, also other processes' through LISTEN/NOTIFY or the SQLite
//! follower), at its start (what ended while nobody ran) and at each heartbeat (a
//! missed event); and `gaffer run --after` / `task resume` while it waits for its
//! own task. Any number may settle at once: each append names the waiting task's
//! head, so the first wins and the others re-read and find nothing left to record.

use crate::driver::Engine;
use crate::error::{EngineError, Result};
use gaffer_core::dependency::{settle, Dependency};
use gaffer_core::{Event, Stage, StreamId, TaskId};
use gaffer_store::{NewEvent, StoreError, TaskFilter};
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

/// Event types after which a waiting task may have something to settle: a task
/// ended (one waited for, maybe), or one was created (its dependencies may have
/// ended between its checks and its creation).
pub(crate) fn may_settle(kind: &str) -> bool {
    matches!(
        kind,
        "task_done"
            | "task_failed"
            | "task_cancelled"
            | "task_blocked"
            | "task_dependency_failed"
            | "task_created"
    )
}

/// How many appends a settling tries when other writers keep moving the task.
const TRIES: usize = 8;

/// Most waiting tasks one sweep looks at (oldest are not favoured; a later sweep
/// sees the rest).
const SWEEP_LIMIT: i64 = 10_000;

impl Engine {
    /// Settle every waiting task; the ids of those that stopped waiting (queued or
    /// blocked).
    pub async fn settle_waiting(&self) -> Result<Vec<TaskId>> {
        let waiting = self
            .journal()
            .tasks(&TaskFilter {
                stage: Some(Stage::Waiting.as_str().to_owned()),
                limit: Some(SWEEP_LIMIT),
                ..TaskFilter::default()
            })
            .await?;
        let mut moved = Vec::new();
        for row in waiting {
            let id = TaskId(row.id);
            match self.settle_task(&id).await {
                Ok(stage) if stage != Stage::Waiting => moved.push(id),
                Ok(_) => {}
                Err(e) => tracing::warn!(task = %id, "settling its dependencies: {e}"),
            }
        }
        Ok(moved)
    }

    /// Settle the waiting task `id` from its dependencies' states now; its stage
    /// afterwards.
    pub async fn settle_task(&self, id: &TaskId) -> Result<Stage> {
        let stream = StreamId::from(id);
        for _ in 0..TRIES {
            let Some((task, head)) = self.load(id).await? else {
                return Err(EngineError::Invalid(format!("task `{id}` does not exist")));
            };
            let mut deps: Vec<Dependency> = Vec::new();
            for dep in &task.waiting_for {
                if let Some(d) = self
                    .journal()
                    .task(dep.as_str())
                    .await?
                    .and_then(|v| v.task.dependency())
                {
                    deps.push(d);
                }
            }
            let events = settle(&task, &deps);
            if events.is_empty() {
                return Ok(task.stage);
            }
            let kinds: Vec<&str> = events.iter().map(Event::kind).collect();
            match self
                .journal()
                .append(
                    &stream,
                    head,
                    events.into_iter().map(NewEvent::now).collect(),
                )
                .await
            {
                Ok(_) => tracing::info!(task = %id, events = ?kinds, "dependencies settled"),
                // Another settler (or a person cancelling) came first: read again.
                Err(StoreError::Conflict { .. } | StoreError::Rejected { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Err(EngineError::Invalid(format!(
            "task `{id}` kept changing while its dependencies were settled; it is settled at the next event"
        )))
    }

    /// Wait while task `id` waits for the tasks it runs after, settling it as they
    /// end (woken by the journal's events, this process's and, once the caller
    /// follows them, other processes'). Its stage once it stops waiting (queued,
    /// blocked, cancelled), or `None` when `cancel` fired first.
    pub async fn wait_for_dependencies(
        &self,
        id: &TaskId,
        cancel: &CancellationToken,
    ) -> Result<Option<Stage>> {
        // Subscribed before the first look, so no end between the two is missed.
        let mut events = self.journal().subscribe();
        loop {
            let stage = self.settle_task(id).await?;
            if stage != Stage::Waiting {
                return Ok(Some(stage));
            }
            loop {
                tokio::select! {
                    () = cancel.cancelled() => return Ok(None),
                    got = events.recv() => match got {
                        Ok(e) if e.stream_id == id.as_str() || may_settle(e.event.kind()) => break,
                        Ok(_) => {}
                        Err(RecvError::Lagged(_)) => break,
                        Err(RecvError::Closed) => {
                            return Err(EngineError::Invalid("the journal closed".into()))
                        }
                    },
                }
            }
        }
    }
}
