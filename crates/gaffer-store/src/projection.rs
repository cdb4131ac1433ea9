//! Projection rows, computed from reducer state alone. The same functions feed
//! live appends, `rebuild` and `verify`, so rebuild == live by construction of
//! the rows and by test of the SQL.

use gaffer_core::{Approval, ProjectState, Session, Step, StreamState, TaskState};
use serde::{Deserialize, Serialize};

/// One row of `projects`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
pub struct ProjectRow {
    /// Project id.
    pub id: String,
    /// Unique short name.
    pub name: String,
    /// Canonical repository path.
    pub path: String,
    /// Check command, if known.
    pub check_command: Option<String>,
    /// Project-wide auto-approve toggle.
    pub auto_approve: bool,
    /// Registered at (ms).
    pub created_at: i64,
    /// Last change (ms).
    pub updated_at: i64,
}

/// One row of `tasks`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
pub struct TaskRow {
    /// Task id.
    pub id: String,
    /// Project id.
    pub project_id: String,
    /// The request, as asked.
    pub request: String,
    /// Lifecycle stage (snake_case).
    pub stage: String,
    /// Who asked (JSON of an `Actor`).
    pub created_by: String,
    /// How it runs (JSON of `TaskOptions`).
    pub options: String,
    /// Final summary or reason (JSON), once final.
    pub outcome: Option<String>,
    /// Created at (ms).
    pub created_at: i64,
    /// Last change (ms).
    pub updated_at: i64,
    /// The key it was created once for (`TaskOptions::key`), unique (migration 0009).
    pub origin_key: Option<String>,
}

impl TaskRow {
    /// The task as another task's dependency sees it: its project, stage, what it
    /// runs after and its final reason. `None` when a column does not parse (a
    /// stage from a newer gaffer): such a task is neither done nor ended here.
    pub fn dependency(&self) -> Option<gaffer_core::dependency::Dependency> {
        let stage = serde_json::from_value(serde_json::Value::String(self.stage.clone())).ok()?;
        let options: gaffer_core::TaskOptions = serde_json::from_str(&self.options).ok()?;
        let reason = self
            .outcome
            .as_deref()
            .and_then(|o| serde_json::from_str::<serde_json::Value>(o).ok())
            .and_then(|o| o.get("reason").and_then(|r| r.as_str()).map(str::to_owned));
        Some(gaffer_core::dependency::Dependency {
            id: gaffer_core::TaskId(self.id.clone()),
            project_id: gaffer_core::ProjectId(self.project_id.clone()),
            stage,
            after: options.after,
            reason,
        })
    }
}

/// One row of `steps`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
pub struct StepRow {
    /// Task id.
    pub task_id: String,
    /// Step id within the task.
    pub step_id: String,
    /// Recording order within the task.
    pub ord: i64,
    /// What it does.
    pub name: String,
    /// `read_only` | `idempotent` | `non_idempotent`.
    pub intent: String,
    /// Step state (snake_case).
    pub state: String,
    /// Attempt number.
    pub attempt: i64,
    /// JSON array of step ids.
    pub depends_on: String,
    /// JSON input.
    pub input: String,
    /// JSON receipt, once completed.
    pub receipt: Option<String>,
    /// Error or manual reason.
    pub error: Option<String>,
    /// JSON context pack its agent was given (migration 0007).
    pub context: Option<String>,
    /// Recorded at (ms).
    pub recorded_at: i64,
    /// Last change (ms).
    pub updated_at: i64,
}

/// One row of `approvals`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
pub struct ApprovalRow {
    /// Approval id.
    pub id: String,
    /// Task id.
    pub task_id: String,
    /// Project id of the task.
    pub project_id: String,
    /// Step that waits.
    pub step_id: String,
    /// Request number within the step.
    pub attempt: i64,
    /// `plan` | `tool` | `ship` | `manual` | `escalation` | `stall` | `budget`.
    pub kind: String,
    /// The question.
    pub summary: String,
    /// JSON details.
    pub details: String,
    /// `pending` | `approved` | `denied` | `expired` | `withdrawn`.
    pub state: String,
    /// JSON `Actor`, once decided.
    pub decided_by: Option<String>,
    /// Decider's note or expiry/withdrawal reason.
    pub note: Option<String>,
    /// Asked at (ms).
    pub requested_at: i64,
    /// Settled at (ms).
    pub decided_at: Option<i64>,
    /// Approved "for this task": a grant for the same tool call (migration 0006).
    pub for_task: bool,
}

/// One row of `sessions`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
pub struct SessionRow {
    /// gaffer's session id.
    pub id: String,
    /// Task id.
    pub task_id: String,
    /// Backend name.
    pub agent: String,
    /// Role.
    pub role: String,
    /// Canonical workspace path.
    pub workspace_key: String,
    /// The agent's own session id.
    pub agent_session_id: Option<String>,
    /// Confirmed by the agent.
    pub verified: bool,
    /// Step that started it.
    pub step_id: Option<String>,
    /// Why it ended.
    pub ended: Option<String>,
    /// Started at (ms).
    pub started_at: i64,
}

/// Every projection row, sorted by key: what `verify` compares.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Projections {
    /// `projects`, by id.
    pub projects: Vec<ProjectRow>,
    /// `tasks`, by id.
    pub tasks: Vec<TaskRow>,
    /// `steps`, by (task, step).
    pub steps: Vec<StepRow>,
    /// `approvals`, by id.
    pub approvals: Vec<ApprovalRow>,
    /// `sessions`, by id.
    pub sessions: Vec<SessionRow>,
}

impl Projections {
    /// Sort every table by its key so two sets compare equal regardless of origin.
    pub fn sort(&mut self) {
        self.projects.sort_by(|a, b| a.id.cmp(&b.id));
        self.tasks.sort_by(|a, b| a.id.cmp(&b.id));
        self.steps
            .sort_by(|a, b| (&a.task_id, &a.step_id).cmp(&(&b.task_id, &b.step_id)));
        self.approvals.sort_by(|a, b| a.id.cmp(&b.id));
        self.sessions.sort_by(|a, b| a.id.cmp(&b.id));
    }

    /// Add every row of one stream's state.
    pub fn add_stream(&mut self, state: &StreamState) {
        match state {
            StreamState::Project(p) => self.projects.push(project_row(p)),
            StreamState::Task(t) => {
                self.tasks.push(task_row(t));
                self.steps.extend(t.steps.values().map(|s| step_row(t, s)));
                self.approvals
                    .extend(t.approvals.values().map(|a| approval_row(t, a)));
                self.sessions
                    .extend(t.sessions.values().map(|s| session_row(t, s)));
            }
        }
    }

    /// A description of the first difference from `other`, if any.
    pub fn first_difference(&self, other: &Projections) -> Option<String> {
        fn diff<T: PartialEq + std::fmt::Debug>(table: &str, a: &[T], b: &[T]) -> Option<String> {
            if a.len() != b.len() {
                return Some(format!(
                    "{table}: {} rows live, {} rebuilt",
                    a.len(),
                    b.len()
                ));
            }
            a.iter()
                .zip(b)
                .find(|(x, y)| x != y)
                .map(|(x, y)| format!("{table}: live {x:?} != rebuilt {y:?}"))
        }
        diff("projects", &self.projects, &other.projects)
            .or_else(|| diff("tasks", &self.tasks, &other.tasks))
            .or_else(|| diff("steps", &self.steps, &other.steps))
            .or_else(|| diff("approvals", &self.approvals, &other.approvals))
            .or_else(|| diff("sessions", &self.sessions, &other.sessions))
    }
}

fn json<T: Serialize>(value: &T) -> String {
    // Serialising our own plain types to a String cannot fail.
    serde_json::to_string(value).unwrap_or_default()
}

pub(crate) fn project_row(p: &ProjectState) -> ProjectRow {
    ProjectRow {
        id: p.id.0.clone(),
        name: p.name.clone(),
        path: p.path.clone(),
        check_command: p.check_command.clone(),
        auto_approve: p.auto_approve,
        created_at: p.created_at,
        updated_at: p.updated_at,
    }
}

pub(crate) fn task_row(t: &TaskState) -> TaskRow {
    TaskRow {
        id: t.id.0.clone(),
        project_id: t.project_id.0.clone(),
        request: t.request.clone(),
        stage: t.stage.as_str().to_owned(),
        created_by: json(&t.created_by),
        options: json(&t.options),
        outcome: t.outcome.as_ref().map(json),
        created_at: t.created_at,
        updated_at: t.updated_at,
        origin_key: t.options.key.clone(),
    }
}

pub(crate) fn step_row(t: &TaskState, s: &Step) -> StepRow {
    StepRow {
        task_id: t.id.0.clone(),
        step_id: s.id.0.clone(),
        ord: i64::from(s.order),
        name: s.name.clone(),
        intent: s.intent.as_str().to_owned(),
        state: s.state.as_str().to_owned(),
        attempt: i64::from(s.attempt),
        depends_on: json(&s.depends_on),
        input: json(&s.input),
        receipt: s.receipt.as_ref().map(json),
        error: s.error.clone(),
        context: s.context.as_ref().map(json),
        recorded_at: s.recorded_at,
        updated_at: s.updated_at,
    }
}

pub(crate) fn approval_row(t: &TaskState, a: &Approval) -> ApprovalRow {
    ApprovalRow {
        id: a.id.0.clone(),
        task_id: t.id.0.clone(),
        project_id: t.project_id.0.clone(),
        step_id: a.step_id.0.clone(),
        attempt: i64::from(a.attempt),
        kind: a.kind.as_str().to_owned(),
        summary: a.summary.clone(),
        details: json(&a.details),
        state: a.state.as_str().to_owned(),
        decided_by: a.decided_by.as_ref().map(json),
        note: a.note.clone(),
        requested_at: a.requested_at,
        decided_at: a.decided_at,
        for_task: a.for_task,
    }
}

pub(crate) fn session_row(t: &TaskState, s: &Session) -> SessionRow {
    SessionRow {
        id: s.id.0.clone(),
        task_id: t.id.0.clone(),
        agent: s.agent.clone(),
        role: s.role.as_str().to_owned(),
        workspace_key: s.workspace_key.clone(),
        agent_session_id: s.agent_session_id.clone(),
        verified: s.verified,
        step_id: s.step_id.as_ref().map(|id| id.0.clone()),
        ended: s.ended.clone(),
        started_at: s.started_at,
    }
}
