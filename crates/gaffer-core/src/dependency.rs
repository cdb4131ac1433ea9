//! Task dependencies: a task may run after other tasks of its project
//! (`TaskOptions::after`).
//!
//! ```text
//! task_created {after: [a, b]}  → waiting (no worker takes it)
//! task_dependency_done {a}      → still waiting for b
//! task_dependency_done {b}      → queued (a worker takes it)
//! task_dependency_failed {b}    → blocked, naming b and how it ended
//! ```
//!
//! A task stream's reducer sees only its own events, so what the other tasks came
//! to is brought to it as events: [`settle`] decides them from the waiting task
//! and the states of the tasks it waits for, and the engine appends them (any
//! worker may; the journal's expected head makes the first append win, and the
//! reducer refuses a dependency recorded twice). [`check_after`] decides, before
//! anything is stored, whether a new task's `after` list can be waited for at all.
//!
//! Dependencies are fixed when a task is created and name only tasks that exist,
//! so a cycle could only form through a task naming itself; [`check_after`]
//! still walks the whole graph, so a journal that holds one never makes a task
//! wait forever on it.

use crate::{Event, ProjectId, Rejected, Stage, TaskId, TaskState};
use std::collections::{BTreeSet, HashSet};

/// Most tasks one task may run after.
pub const MAX_AFTER: usize = 32;

/// What [`check_after`] and [`settle`] need to know of a task another runs after.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dependency {
    /// Its id.
    pub id: TaskId,
    /// Its project.
    pub project_id: ProjectId,
    /// Its stage now.
    pub stage: Stage,
    /// The tasks it runs after in turn.
    pub after: Vec<TaskId>,
    /// Its final reason, once failed, cancelled or blocked.
    pub reason: Option<String>,
}

/// Why an `after` list cannot be waited for. Nothing is stored when one is found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AfterProblem {
    /// An empty id.
    #[error("an empty task id; give the ids `gaffer task list` prints")]
    Empty,
    /// More than [`MAX_AFTER`] ids.
    #[error("{0} tasks is more than the {MAX_AFTER} a task may run after")]
    TooMany(usize),
    /// The same id twice.
    #[error("`{0}` is named twice")]
    Duplicate(TaskId),
    /// The task itself.
    #[error("a task cannot run after itself (`{0}`)")]
    Itself(TaskId),
    /// No such task.
    #[error("task `{0}` does not exist; `gaffer task list` shows the tasks")]
    Unknown(TaskId),
    /// A task of another project.
    #[error("task `{id}` is in another project; a task runs only after tasks of its own project")]
    OtherProject {
        /// The task named.
        id: TaskId,
    },
    /// A task that already ended without being done: nothing could start this one.
    #[error("task `{id}` is already {stage}, so this task could never start; retry `{id}` first (`gaffer task retry {id}`) and name the new task")]
    Ended {
        /// The task named.
        id: TaskId,
        /// How it ended.
        stage: Stage,
    },
    /// Waiting would go round in a circle back to the task.
    #[error("waiting would go round in a circle: {}", path.iter().map(TaskId::as_str).collect::<Vec<_>>().join(" → "))]
    Cycle {
        /// The circle, starting and ending at the new task.
        path: Vec<TaskId>,
    },
}

/// Whether task `task` of project `project` can run after `after`: every id names
/// an existing task of the same project (`lookup`), none twice, not itself, none
/// already failed, cancelled or blocked, and no circle through the graph of what
/// each runs after.
pub fn check_after(
    task: &TaskId,
    project: &ProjectId,
    after: &[TaskId],
    lookup: impl Fn(&TaskId) -> Option<Dependency>,
) -> Result<(), AfterProblem> {
    if after.len() > MAX_AFTER {
        return Err(AfterProblem::TooMany(after.len()));
    }
    let mut seen = HashSet::new();
    for id in after {
        if id.as_str().trim().is_empty() {
            return Err(AfterProblem::Empty);
        }
        if !seen.insert(id) {
            return Err(AfterProblem::Duplicate(id.clone()));
        }
        if id == task {
            return Err(AfterProblem::Itself(id.clone()));
        }
        let dep = lookup(id).ok_or_else(|| AfterProblem::Unknown(id.clone()))?;
        if dep.project_id != *project {
            return Err(AfterProblem::OtherProject { id: id.clone() });
        }
        if dep.stage.is_final() && dep.stage != Stage::Done {
            return Err(AfterProblem::Ended {
                id: id.clone(),
                stage: dep.stage,
            });
        }
    }
    // Depth first from each named task along what it runs after: reaching the new
    // task again is a circle.
    let mut visited = HashSet::new();
    for id in after {
        if let Some(mut circle) = reaches(id, task, &lookup, &mut visited) {
            circle.insert(0, task.clone());
            return Err(AfterProblem::Cycle { path: circle });
        }
    }
    Ok(())
}

/// The path from `from` to `target` along what each task runs after, if any.
fn reaches(
    from: &TaskId,
    target: &TaskId,
    lookup: &impl Fn(&TaskId) -> Option<Dependency>,
    visited: &mut HashSet<TaskId>,
) -> Option<Vec<TaskId>> {
    if from == target {
        return Some(vec![from.clone()]);
    }
    if !visited.insert(from.clone()) {
        return None;
    }
    let dep = lookup(from)?;
    for next in &dep.after {
        if let Some(mut rest) = reaches(next, target, lookup, visited) {
            rest.insert(0, from.clone());
            return Some(rest);
        }
    }
    None
}

/// The events that bring what the tasks `task` waits for came to into its stream:
/// the first of them that failed, was cancelled or was blocked blocks it (one
/// `task_dependency_failed`); otherwise each one done is recorded, and the last
/// queues it. Nothing for a task that is not waiting, or whose dependencies all
/// still run. `deps` may hold more tasks than it waits for; one it waits for but
/// `deps` lacks is taken as still running.
pub fn settle(task: &TaskState, deps: &[Dependency]) -> Vec<Event> {
    if task.stage != Stage::Waiting {
        return Vec::new();
    }
    let awaited = || {
        task.options
            .after
            .iter()
            .filter(|id| task.waiting_for.contains(*id))
            .filter_map(|id| deps.iter().find(|d| d.id == *id))
    };
    if let Some(ended) = awaited().find(|d| d.stage.is_final() && d.stage != Stage::Done) {
        return vec![Event::TaskDependencyFailed {
            dependency: ended.id.clone(),
            stage: ended.stage,
            reason: ended.reason.clone(),
        }];
    }
    awaited()
        .filter(|d| d.stage == Stage::Done)
        .map(|d| Event::TaskDependencyDone {
            dependency: d.id.clone(),
        })
        .collect()
}

/// What a new task waits for: its `after` list, refused when it names a task twice
/// or itself (the rest needs other streams: [`check_after`]).
pub(crate) fn awaited(task: &TaskId, after: &[TaskId]) -> Result<BTreeSet<TaskId>, Rejected> {
    let mut set = BTreeSet::new();
    for id in after {
        if id.as_str().is_empty() {
            return Err(Rejected::Empty("after"));
        }
        if id == task {
            return Err(Rejected::BadAfter(
                AfterProblem::Itself(id.clone()).to_string(),
            ));
        }
        if !set.insert(id.clone()) {
            return Err(Rejected::BadAfter(
                AfterProblem::Duplicate(id.clone()).to_string(),
            ));
        }
    }
    Ok(set)
}

/// While a task waits, only what ends the wait may happen: a dependency's outcome,
/// or the task's own end (cancelled, failed, blocked). No worker may lease it, no
/// step may be recorded, no stage entered.
pub(crate) fn may_happen_while_waiting(event: &Event) -> bool {
    matches!(
        event,
        Event::TaskDependencyDone { .. }
            | Event::TaskDependencyFailed { .. }
            | Event::TaskCancelled { .. }
            | Event::TaskFailed { .. }
            | Event::TaskBlocked { .. }
    )
}

/// The reason a task blocked by `dependency` gives, naming it and how it ended.
pub fn blocked_reason(dependency: &TaskId, stage: Stage, reason: Option<&str>) -> String {
    let how = match stage {
        Stage::Cancelled => "was cancelled",
        Stage::Blocked => "was blocked",
        _ => "failed",
    };
    match reason.map(str::trim).filter(|r| !r.is_empty()) {
        Some(r) => format!("task {dependency}, which this task runs after, {how}: {r}"),
        None => format!("task {dependency}, which this task runs after, {how}"),
    }
}

impl TaskState {
    /// `task_dependency_done`: one fewer to wait for; the last one queues the task.
    pub(crate) fn dependency_done(&mut self, dependency: &TaskId) -> Result<(), Rejected> {
        self.check_awaited(dependency)?;
        self.waiting_for.remove(dependency);
        if self.waiting_for.is_empty() {
            self.stage = Stage::Queued;
        }
        Ok(())
    }

    /// `task_dependency_failed`: the outcome of the blocked task (the caller
    /// finishes it).
    pub(crate) fn dependency_failed(
        &self,
        dependency: &TaskId,
        stage: Stage,
        reason: Option<&str>,
    ) -> Result<serde_json::Value, Rejected> {
        self.check_awaited(dependency)?;
        if !stage.is_final() || stage == Stage::Done {
            return Err(Rejected::BadAfter(format!(
                "`{dependency}` is {stage}, which blocks nothing"
            )));
        }
        Ok(serde_json::json!({
            "reason": blocked_reason(dependency, stage, reason),
            "dependency": dependency,
            "dependency_stage": stage,
        }))
    }

    fn check_awaited(&self, dependency: &TaskId) -> Result<(), Rejected> {
        if self.stage == Stage::Waiting && self.waiting_for.contains(dependency) {
            Ok(())
        } else {
            Err(Rejected::NotAwaited {
                dependency: dependency.clone(),
            })
        }
    }
}
