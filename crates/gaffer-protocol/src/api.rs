//! HTTP API requests, responses and SSE events: the stable contract under `/api`.
//!
//! Ids are strings (`p-…` projects, `t-…` tasks, `ap-…` approvals), timestamps are
//! milliseconds since the Unix epoch in `*_at` fields, enums are snake_case.
//! Requests are `*Params`; every error is an [`ErrorResponse`]. With the
//! `openapi` feature each type derives a `utoipa::ToSchema`, so the server's
//! `/api/openapi.json` is generated from these very definitions.

use serde::{Deserialize, Serialize};

/// Every error answer: `{"error":{"code":…,"message":…,"field"?:…}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorResponse {
    /// What went wrong.
    pub error: ErrorBody,
    /// For `already_decided`: the approval as recorded by the first decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<Approval>,
}

/// The body of an [`ErrorResponse`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorBody {
    /// Machine-readable: `bad_request`, `unauthorized`, `forbidden`, `not_found`,
    /// `conflict`, `already_decided`, `payload_too_large`, `internal`, …
    pub code: String,
    /// For people: what was wrong and what to do.
    pub message: String,
    /// The request field at fault, when one is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

/// `POST /api/projects`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct AddProjectParams {
    /// A git work tree on the server's machine; stored as its physical path.
    #[cfg_attr(feature = "openapi", schema(min_length = 1))]
    pub path: String,
    /// Short unique name; defaults to the directory's name.
    #[serde(default)]
    pub name: Option<String>,
    /// The check command; detected from the files when absent.
    #[serde(default)]
    pub check: Option<String>,
}

/// A registered project.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Project {
    /// `p-…`.
    pub id: String,
    /// Unique short name.
    pub name: String,
    /// Canonical (physical) path.
    pub path: String,
    /// The command that checks the project.
    pub check_command: Option<String>,
    /// The project-wide auto-approve toggle.
    pub auto_approve: bool,
    /// Registered at.
    pub created_at: i64,
    /// Last change.
    pub updated_at: i64,
}

/// `POST /api/projects/{id}/auto`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SetAutoApproveParams {
    /// On or off.
    pub enabled: bool,
}

/// `POST /api/tasks`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateTaskParams {
    /// Project name or id.
    #[cfg_attr(feature = "openapi", schema(min_length = 1))]
    pub project: String,
    /// What to do, in words. Required unless `issue` is given.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(min_length = 1))]
    pub request: Option<String>,
    /// Instead of `request`: a forge issue of the project (its URL, `OWNER/REPO#N` or
    /// `N`), read through the project's forge; its title and body become the
    /// request, and the pull request link is commented on it when shipped.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(min_length = 1))]
    pub issue: Option<String>,
    /// Which agent (`claude`, `codex`, `gemini`, `openai`, `anthropic`, `acp:<name>`).
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(pattern = "^(claude|codex|gemini|openai|anthropic|acp:[A-Za-z0-9._-]+)$")
    )]
    pub agent: Option<String>,
    /// Create the task once for this key: a repeat with the same key answers the
    /// task first created (200, header `Idempotent-Replayed: true`) instead of a
    /// second one. Same as the `Idempotency-Key` header (if both are given they
    /// must be equal). Printable ASCII without spaces, at most 200 bytes, not
    /// starting with `schedule:` or `intake:` (gaffer's own: its scheduler and
    /// issue intake create tasks under them).
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(min_length = 1, max_length = 200, pattern = "^[!-~]+$")
    )]
    pub key: Option<String>,
    /// Ids of tasks of the same project this one runs after (at most 32): it waits
    /// (stage `waiting`, no worker takes it) until every one is done, and is
    /// blocked, naming the one, when one fails, is cancelled or is blocked. An
    /// unknown id, the same id twice, a task of another project or one already
    /// failed, cancelled or blocked is refused (400, field `after`) and nothing is
    /// stored.
    #[serde(default)]
    pub after: Vec<String>,
}

/// `POST /api/tasks/{id}/cancel`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CancelTaskParams {
    /// Why.
    #[serde(default)]
    pub reason: Option<String>,
}

/// `POST /api/tasks/{id}/messages`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SendMessageParams {
    /// What to tell the task's running agent (at most 8000 bytes).
    pub text: String,
}

/// A person's message to a task's running agent, as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Message {
    /// `m-…`, unique in the task.
    pub id: String,
    /// The task.
    pub task_id: String,
    /// What was sent, its secrets redacted.
    pub text: String,
    /// Who sent it, and from where.
    pub by: DecidedBy,
    /// Recorded at (ms).
    pub sent_at: i64,
    /// `pending` until the agent got it, then `live` (into the running turn) or
    /// `next_turn` (as the prompt of the session's next turn).
    pub delivery: String,
    /// When the delivery was recorded (ms).
    pub delivered_at: Option<i64>,
    /// Once delivered: whether the agent got it masked with its step's placeholders
    /// (a cloud model of a `privacy = "masked"` project) rather than as written.
    pub masked: Option<bool>,
}

/// `POST /api/tasks/{id}/interrupt`: the turn is stopped; the task and its session go on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Interrupted {
    /// The task.
    pub task_id: String,
    /// The agent session whose turn was stopped.
    pub session_id: String,
    /// Who stopped it, and from where.
    pub by: DecidedBy,
    /// What happens next, in words.
    pub next: String,
}

/// `GET /api/tasks` query.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams, utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
#[serde(deny_unknown_fields)]
pub struct TaskListQuery {
    /// Only this project (name or id).
    #[serde(default)]
    pub project: Option<String>,
    /// Only this stage.
    #[serde(default)]
    pub stage: Option<String>,
    /// At most this many (1..=500, default 50).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", param(minimum = 1, maximum = 500))]
    pub limit: Option<i64>,
    /// Skip this many.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", param(minimum = 0))]
    pub offset: Option<i64>,
}

/// A task, as listed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Task {
    /// `t-…`.
    pub id: String,
    /// Its project's id.
    pub project_id: String,
    /// Its project's name.
    pub project: String,
    /// What was asked.
    pub request: String,
    /// Lifecycle stage: `waiting` (for the tasks of `after`), `queued`, `planning`, …,
    /// `done`, `failed`, `cancelled`, `blocked`.
    pub stage: String,
    /// The tasks it runs after, each with its stage now; while `stage` is
    /// `waiting` it waits for those not `done`.
    #[serde(default)]
    pub after: Vec<TaskDependency>,
    /// Who asked (`name via`).
    pub created_by: String,
    /// The agent chosen for every role, if the request named one.
    #[serde(default)]
    pub agent: Option<String>,
    /// The origin key it was created once for (`key` / `Idempotency-Key` of its
    /// creation, `schedule:<name>:<slot>` for a schedule's slot), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Final summary or reason.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub outcome: Option<serde_json::Value>,
    /// Tokens used so far: input, output and cached input of every agent turn,
    /// each counted once (the `usage` of its step's receipt).
    pub tokens: u64,
    /// Cost so far in US dollars, the same turns' cost (exact to the nanodollar;
    /// round it for display); `null` when a turn spent tokens on a model with no
    /// known price (`[prices]` in the config): unknown, not free.
    pub cost_usd: Option<f64>,
    /// Created at.
    pub created_at: i64,
    /// Last change.
    pub updated_at: i64,
}

/// A task another task runs after.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskDependency {
    /// `t-…`.
    pub id: String,
    /// Its stage now (`unknown` if it cannot be read).
    pub stage: String,
}

/// A step of a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Step {
    /// Unique within the task.
    pub id: String,
    /// What it does.
    pub name: String,
    /// `read_only` | `idempotent` | `non_idempotent`.
    pub intent: String,
    /// Step state.
    pub state: String,
    /// Attempt number.
    pub attempt: i64,
    /// Receipt once completed.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub receipt: Option<serde_json::Value>,
    /// Error, if failed.
    pub error: Option<String>,
    /// Tokens the step's agent turns used (0 for steps without an agent).
    #[serde(default)]
    pub tokens: u64,
    /// What they cost in US dollars; `null` when unknown (no price for the model).
    #[serde(default)]
    pub cost_usd: Option<f64>,
    /// The repository context its agent was given, once packed; `null` for steps
    /// without one.
    #[serde(default)]
    pub context: Option<ContextPack>,
    /// Last change.
    pub updated_at: i64,
}

/// The repository context an agent was given: the files gaffer's context manager
/// picked, whole or as signatures, within a token budget.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ContextPack {
    /// The budget, in tokens.
    pub budget: u64,
    /// Tokens used (the sum over `files`).
    pub used: u64,
    /// The files, in rank order.
    pub files: Vec<PackedFile>,
}

/// One file of a [`ContextPack`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PackedFile {
    /// Path relative to the worktree root.
    pub path: String,
    /// `full` (the whole file) or `skeleton` (signatures with line spans).
    pub mode: String,
    /// Tokens of what the agent got for it.
    pub tokens: u64,
}

/// What one role (planner, owner, reviewer, arbiter) of a task spent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RoleSpend {
    /// The role.
    pub role: String,
    /// Prompt tokens not served from a cache.
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
    /// Prompt tokens served from a cache.
    pub cached_input_tokens: u64,
    /// Cost in US dollars; `null` when unknown (no price for the model).
    pub cost_usd: Option<f64>,
}

/// An agent session of a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Session {
    /// gaffer's session id.
    pub id: String,
    /// The task.
    pub task_id: String,
    /// Backend.
    pub agent: String,
    /// Role.
    pub role: String,
    /// Confirmed by the agent's own record.
    pub verified: bool,
    /// Why it ended.
    pub ended: Option<String>,
    /// Started at.
    pub started_at: i64,
}

/// A switch of a role to the next agent of its chain (`agent = ["claude", "codex"]`):
/// the agent that was out, why, and when it is tried again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentSwitch {
    /// The step that was running.
    pub step_id: String,
    /// The role.
    pub role: String,
    /// The agent that was out.
    pub from: String,
    /// The agent that took over.
    pub to: String,
    /// `usage_limit`, `rate_limited`, `server_error` or `cannot_start`.
    pub trigger: String,
    /// What the agent said (redacted).
    pub detail: String,
    /// `from` is not tried again before this (ms).
    pub until: i64,
    /// Whether the failed turn had done something (a person approved going on).
    pub effects: bool,
    /// When (ms).
    pub at: i64,
}

/// What a shipped task's pull request asked after the task was done (the journal's
/// `follow_up_opened` event): the task opened again to answer it, and was done again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FollowUp {
    /// 1 for the task's first follow-up, +1 for each next one. Its steps carry it in
    /// their input as `follow_up` (`push-approval/n`, `reply/n` and
    /// `follow-up-approval/n` are numbered by it).
    pub n: u32,
    /// `review_comments` (people commented on the pull request: an owner fix, a
    /// push, CI, a reply to each comment) or `merge_conflict` (the base moved and
    /// the pull request no longer merges: `sync/k`, `resolve/r` rounds, the check,
    /// a push).
    pub kind: String,
    /// What it answers, each answered once per task: `review-comment:ID`,
    /// `review:ID`, `comment:ID` for comments, `merge_conflict:SHA` for the head
    /// commit that no longer merged.
    pub keys: Vec<String>,
    /// What it is about, as the follower recorded it (redacted). `review_comments`:
    /// `{pull_request, url, comments: [{key, id, kind, author, body, path?, line?,
    /// diff_hunk?, url, …}]}`; `merge_conflict`: `{head_sha, base, mergeable}` where
    /// `mergeable` is `conflicted` or `behind`.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub detail: serde_json::Value,
    /// When it opened (ms).
    pub opened_at: i64,
}

/// One task with everything that hangs off it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskDetail {
    /// The task.
    #[serde(flatten)]
    pub task: Task,
    /// Its steps, in order.
    pub steps: Vec<Step>,
    /// Its approvals, oldest first.
    pub approvals: Vec<Approval>,
    /// Its sessions.
    pub sessions: Vec<Session>,
    /// Every switch of a role to its next agent, oldest first.
    #[serde(default)]
    pub switches: Vec<AgentSwitch>,
    /// The worker that runs it (or ran it last); `null` until a worker claims it.
    #[serde(default)]
    pub worker: Option<TaskWorker>,
    /// What each role spent, in the order the roles first ran; the sums add up to
    /// the task's `tokens` and `cost_usd`.
    #[serde(default)]
    pub spend: Vec<RoleSpend>,
    /// What its pull request asked after it was done, oldest first (empty for a
    /// task never reopened).
    #[serde(default)]
    pub follow_ups: Vec<FollowUp>,
    /// Why its pull request is no longer followed (merged, closed, a person said
    /// stop); `null` while it is, or was never followed.
    #[serde(default)]
    pub following_ended: Option<String>,
}

/// The worker holding (or last holding) a task's lease.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskWorker {
    /// The worker's id (`host/pid/…`), as `gaffer workers` lists it.
    pub id: String,
    /// Its host, if it is registered.
    pub host: Option<String>,
    /// Its process id, if it is registered.
    pub pid: Option<i64>,
    /// The lease generation: 1 for the first worker, +1 for each takeover.
    pub generation: i64,
    /// `held` (it runs the task now), `released` (it let the task go: the task
    /// ended or the worker shut down) or `expired` (it stopped renewing; the next
    /// worker to claim the task takes it over).
    pub state: String,
    /// When it took the task (ms).
    pub acquired_at: i64,
    /// When the lease runs out unless renewed (ms; 0 once released).
    pub expires_at: i64,
}

/// Who decided an approval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DecidedBy {
    /// `user`, `policy` or `system`.
    pub kind: String,
    /// The person, the rule, or `gaffer`.
    pub name: String,
    /// Where from: `cli`, `api:<token>`, `web`, `policy`, …
    pub via: String,
}

/// An approval, as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Approval {
    /// `ap-…`.
    pub id: String,
    /// The task that asks.
    pub task_id: String,
    /// The task's project.
    pub project_id: String,
    /// The project's name.
    #[serde(default)]
    pub project: String,
    /// The step that waits.
    pub step_id: String,
    /// Which request of that step.
    pub attempt: i64,
    /// `plan` | `tool` | `ship` | `manual` | `escalation` | `stall` | `budget`.
    pub kind: String,
    /// `pending` | `approved` | `denied` | `expired` | `withdrawn`.
    pub state: String,
    /// The question in words a human can judge.
    pub summary: String,
    /// Command, files, diff excerpt, reason; `policy` holds what was decided at creation.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub details: serde_json::Value,
    /// Who decided, once decided.
    pub decided_by: Option<DecidedBy>,
    /// The decider's note, or why it expired or was withdrawn.
    pub note: Option<String>,
    /// Asked at.
    pub requested_at: i64,
    /// Settled at.
    pub decided_at: Option<i64>,
    /// When it expires unanswered (and counts as denied).
    pub expires_at: Option<i64>,
    /// Approved "for this task": later `tool` approvals of the same task asking
    /// the same tool and exactly the same command are approved by this grant.
    #[serde(default)]
    pub for_task: bool,
}

/// `GET /api/approvals` query.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams, utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
#[serde(deny_unknown_fields)]
pub struct ApprovalListQuery {
    /// Only this state (`pending`, …); every approval, newest first, when absent.
    #[serde(default)]
    pub state: Option<String>,
}

/// `POST /api/approvals/{id}/decision`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct DecisionParams {
    /// Approve or deny.
    pub decision: DecisionChoice,
    /// Why, for the record and for the agent.
    #[serde(default)]
    pub note: Option<String>,
    /// Optional guard: the task the decider believes this approval belongs to.
    /// A mismatch is refused (409 `wrong_scope`) and nothing is recorded.
    #[serde(default)]
    pub task_id: Option<String>,
    /// Optional guard: the project the decider believes this approval belongs to.
    #[serde(default)]
    pub project_id: Option<String>,
    /// "Allow for this task" (with `approve`, on a `tool` approval that names a
    /// command): also approve later requests of the same task for the same tool
    /// and exactly the same command. Refused with 400 naming `for_task` for any
    /// other kind, a denial, or a tool call without a command.
    #[serde(default)]
    pub for_task: bool,
}

/// What a person decides on an approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum DecisionChoice {
    /// Go ahead.
    Approve,
    /// Do not.
    Deny,
}

/// `GET /api/tasks/{id}/diff`: the task's worktree against its base.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskDiff {
    /// The task's branch.
    pub branch: String,
    /// The commit it started from.
    pub base: String,
    /// `git diff` of the worktree (committed and uncommitted changes) against `base`.
    pub diff: String,
    /// True when the diff was cut at the size limit.
    pub truncated: bool,
}

/// Token and cost totals.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Usage {
    /// Tasks counted.
    pub tasks: u64,
    /// Tokens used.
    pub tokens: u64,
    /// Cost in US dollars; `null` when some of it is unknown (no price for a model).
    pub cost_usd: Option<f64>,
}

/// `GET /healthz`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Health {
    /// `ok`.
    pub status: String,
    /// gaffer's version.
    pub version: String,
}

/// One journal event on an SSE stream. The SSE `id:` is `pos`, so a client
/// reconnecting with `Last-Event-ID: <pos>` gets every event after it; the SSE
/// `event:` name is the event's `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StreamEvent {
    /// Global journal position.
    pub pos: i64,
    /// The stream (task or project id).
    pub stream_id: String,
    /// Position within the stream.
    pub seq: i64,
    /// When (ms).
    pub at: i64,
    /// The event's `type` (`task_created`, `approval_decided`, …).
    #[serde(rename = "type")]
    pub kind: String,
    /// The event as recorded (secrets are redacted before they reach the journal).
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub event: serde_json::Value,
    /// On `approval_*` events: the approval as it stands when the event is sent
    /// (with its project's name and `expires_at`), so a client keeps its list of
    /// approvals from the stream alone, without asking again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<Approval>,
}

/// `GET /api/tasks/{id}/history` query.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams, utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
#[serde(deny_unknown_fields)]
pub struct HistoryQuery {
    /// Events after this `seq` of the task's stream (default 0: from the start).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", param(minimum = 0))]
    pub after: Option<i64>,
    /// At most this many (1..=5000, default 2000).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", param(minimum = 1, maximum = 5000))]
    pub limit: Option<i64>,
}

/// `GET /api/tasks/{id}/history`: a page of a task's recorded events, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskHistory {
    /// The events, as the task's event stream sends them.
    pub events: Vec<StreamEvent>,
    /// More events follow: ask again with `after` = the last event's `seq`.
    pub more: bool,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn error_shape_is_stable() {
        let e = ErrorResponse {
            error: ErrorBody {
                code: "bad_request".into(),
                message: "`request` must not be empty".into(),
                field: Some("request".into()),
            },
            approval: None,
        };
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"error":{"code":"bad_request","message":"`request` must not be empty","field":"request"}})
        );
    }

    #[test]
    fn unknown_fields_are_refused() {
        let r: Result<CreateTaskParams, _> =
            serde_json::from_str(r#"{"project":"a","request":"b","agnet":"x"}"#);
        assert!(r.unwrap_err().to_string().contains("agnet"));
    }
}

/// `POST /api/hooks/{forge}`: what a verified webhook delivery did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HookAnswer {
    /// `taken` (an issue is a task: made now or before), `woken` (a pull request's
    /// follower was woken) or `ignored` (nothing to do; `reason` says why).
    pub outcome: String,
    /// The tasks the delivery's issue is, one per project watching its repository.
    #[serde(default)]
    pub tasks: Vec<HookTask>,
    /// Why nothing was done, for `ignored`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A task an issue delivery led to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HookTask {
    /// The task.
    pub task_id: String,
    /// Its project's name.
    pub project: String,
    /// Made by this delivery (false: the issue had become this task before).
    pub created: bool,
}

/// `POST /api/schedules`: a schedule to add at run time (beside the config's
/// `[[schedules]]`). Each slot becomes one task, once across every scheduler.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct AddScheduleParams {
    /// Unique among schedules, the config's included: letters, digits, `-` and `_`,
    /// at most 64.
    #[cfg_attr(
        feature = "openapi",
        schema(min_length = 1, max_length = 64, pattern = "^[A-Za-z0-9_-]+$")
    )]
    pub name: String,
    /// 5 fields (`0 3 * * *`: 03:00 every day), or 6 with seconds first; `@daily`
    /// and the other aliases too.
    #[cfg_attr(feature = "openapi", schema(min_length = 1))]
    pub cron: String,
    /// The IANA time zone the fields are read in (`Europe/Berlin`); UTC when absent.
    #[serde(default)]
    pub tz: Option<String>,
    /// Project name or id.
    #[cfg_attr(feature = "openapi", schema(min_length = 1))]
    pub project: String,
    /// What each task is asked to do.
    #[cfg_attr(feature = "openapi", schema(min_length = 1))]
    pub request: String,
    /// Which agent plays every role (`claude`, `codex`, `gemini`, `openai`,
    /// `anthropic`, `acp:<name>`); the configured ones when absent.
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(pattern = "^(claude|codex|gemini|openai|anthropic|acp:[A-Za-z0-9._-]+)$")
    )]
    pub agent: Option<String>,
    /// Slots that passed while no scheduler ran: `skip` (default) drops them,
    /// `run_once` makes one task for the newest.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(pattern = "^(skip|run_once)$"))]
    pub missed: Option<String>,
}

/// A schedule: from the config file (`source: "config"`) or added at run time
/// (`source: "api"`, with who added it and when).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Schedule {
    /// Unique among schedules (letters, digits, `-`, `_`).
    pub name: String,
    /// `config` (change it in the config file) or `api` (added at run time;
    /// `DELETE /api/schedules/{name}` removes it).
    pub source: String,
    /// The cron expression as written (5 fields, or 6 with seconds first).
    pub cron: String,
    /// The IANA time zone its fields are read in (`UTC` when none was named).
    pub tz: String,
    /// The project its tasks run in.
    pub project: String,
    /// What each task is asked to do.
    pub request: String,
    /// The agent for every role, if the schedule names one.
    #[serde(default)]
    pub agent: Option<String>,
    /// What happens to slots that passed while no scheduler ran: `skip` or `run_once`.
    pub missed: String,
    /// The next slot, RFC 3339 in UTC (`2026-01-01T03:00:00Z`); `null` when the
    /// expression has none left.
    #[serde(default)]
    pub next_slot: Option<String>,
    /// The same instant in ms since the epoch.
    #[serde(default)]
    pub next_at: Option<i64>,
    /// Who added it (`name via`), for `api`.
    #[serde(default)]
    pub created_by: Option<String>,
    /// When it was added (ms), for `api`.
    #[serde(default)]
    pub created_at: Option<i64>,
    /// The newest slot that made a task, RFC 3339 in UTC; `null` when none has yet.
    #[serde(default)]
    pub last_slot: Option<String>,
    /// The task that slot made (its origin key is `schedule:<name>:<last_slot>`).
    #[serde(default)]
    pub last_task: Option<ScheduledTask>,
}

/// The task a schedule's slot made, as [`Schedule::last_task`] shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ScheduledTask {
    /// `t-…`.
    pub id: String,
    /// Its lifecycle stage now (`queued`, …, `done`, `failed`, …).
    pub stage: String,
    /// Created at (ms).
    pub created_at: i64,
}
