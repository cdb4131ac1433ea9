//! Tasks that run after other tasks (`after`): checked before anything is stored,
//! shown with their dependencies' stages, and what a retry of a blocked one waits
//! for.

use crate::error::{AppError, Result};
use crate::App;
use gaffer_core::dependency::{check_after, settle, Dependency};
use gaffer_core::{Event, ProjectId, TaskId, TaskOptions, TaskState};
use gaffer_protocol::api;
use std::collections::HashMap;

/// Most tasks the circle check reads through what each runs after.
const GRAPH_LIMIT: usize = 2_000;

impl App {
    /// Whether a new task of `project` (id or name) could run after `after`, as
    /// [`App::create_task`] checks it; stores nothing. 400 (field `after`) if not.
    pub async fn check_after(&self, project: &str, after: &[String]) -> Result<()> {
        let project = self.project_row(project).await?;
        let after: Vec<TaskId> = after.iter().map(|a| TaskId(a.trim().to_owned())).collect();
        // A fresh id: the task does not exist yet.
        let task = TaskId(crate::new_id("t"));
        self.checked_after(&task, &ProjectId(project.id), &after)
            .await
            .map(|_| ())
    }

    /// The tasks named in `after` and, through what each runs after, the graph the
    /// circle check walks; refused (400, field `after`) when `task` of `project`
    /// cannot run after them.
    pub(crate) async fn checked_after(
        &self,
        task: &TaskId,
        project: &ProjectId,
        after: &[TaskId],
    ) -> Result<Vec<Dependency>> {
        let mut known: HashMap<TaskId, Dependency> = HashMap::new();
        let mut next: Vec<TaskId> = after.to_vec();
        while let Some(id) = next.pop() {
            if known.len() >= GRAPH_LIMIT || known.contains_key(&id) {
                continue;
            }
            let Some(dep) = self.dependency(&id).await? else {
                continue;
            };
            next.extend(dep.after.iter().cloned());
            known.insert(id, dep);
        }
        check_after(task, project, after, |id| known.get(id).cloned())
            .map_err(|p| AppError::invalid("after", format!("`after`: {p}")))?;
        Ok(after
            .iter()
            .filter_map(|id| known.get(id).cloned())
            .collect())
    }

    /// The first events of a new task: its creation and, for the tasks it runs
    /// after that are already done, their `task_dependency_done` (the last queues
    /// it), in one append.
    pub(crate) fn creation_events(created: Event, deps: &[Dependency]) -> Result<Vec<Event>> {
        let state = TaskState::create(0, &created)
            .map_err(|r| AppError::invalid("after", r.to_string()))?;
        let mut events = vec![created];
        events.extend(settle(&state, deps));
        Ok(events)
    }

    /// What a retry of the task with `options` waits for: the tasks it ran after
    /// that are not done and did not end otherwise. A task blocked by a dependency
    /// is retried without the one that blocked it: the person retrying it has
    /// decided it should run without that one's result (to wait for a rerun of
    /// it instead, create the task with `--after` the new id).
    pub(crate) async fn after_for_retry(&self, options: &TaskOptions) -> Result<Vec<String>> {
        let mut after = Vec::new();
        for id in &options.after {
            if let Some(dep) = self.dependency(id).await? {
                if !dep.stage.is_final() {
                    after.push(id.0.clone());
                }
            }
        }
        Ok(after)
    }

    /// The tasks a task with `options` runs after, with their stages now.
    pub(crate) async fn dependency_stages(
        &self,
        options: &TaskOptions,
    ) -> Result<Vec<api::TaskDependency>> {
        let mut out = Vec::with_capacity(options.after.len());
        for id in &options.after {
            let stage = self
                .dependency(id)
                .await?
                .map_or_else(|| "unknown".to_owned(), |d| d.stage.as_str().to_owned());
            out.push(api::TaskDependency {
                id: id.0.clone(),
                stage,
            });
        }
        Ok(out)
    }

    async fn dependency(&self, id: &TaskId) -> Result<Option<Dependency>> {
        Ok(self
            .journal()
            .task(id.as_str())
            .await?
            .and_then(|v| v.task.dependency()))
    }
}
