//! The pipeline as a pure function: given a task's state, what happens next.
//!
//! Steps are named by what they do (`worktree`, `setup` for a project that sets
//! its worktrees up, `plan`, `plan-approval`,
//! `tracker-open`, `code/2`, `commit/2`, `review/1`, `fix/1`, `commit-fix/1`,
//! `arbiter/1`, `escalation/1`, `check/1`, `ship`, and for a project with a forge
//! `ship-approval`, `push/1`, `pr`, `ci/1`, `report`). Their receipts carry what later
//! decisions need (the plan, verdicts, rulings, check and CI results, whether the
//! project has a forge or a tracker), so the next move is derived from the journal
//! alone: after a crash, the same state gives the same decision.
//!
//! Shipping with a forge: `ship` (the summary) → `ship-approval` (a human or policy
//! allows the push and the pull request) → `push/1` → `pr` → `ci/1`; a CI failure
//! goes to the owner (`fix/n` with the failing log) → `commit-fix/n` → `push/2` →
//! `ci/2`, bounded by the project's `ci_fix_attempts`; on success `report` marks the
//! tracker tasks done and comments on the issue, and the task is done.
//!
//! After the pull request: a done task whose pull request gets review comments, or
//! no longer merges with its moved base, opens again; [`follow_up`] says how each
//! kind is answered (`review` for comments, `sync` for the base).

mod challenge;
pub(crate) mod follow_up;
mod kind;
mod tester;

pub use challenge::{challenges_of, revision_of};
pub(crate) use challenge::{current_plan, history as challenge_history};
pub use follow_up::sync::{
    follow_up_for as merge_conflict_follow_up, KIND as MERGE_CONFLICT, RESOLVE_ROUNDS,
};
pub use kind::StepKind;

use gaffer_core::{Event, Stage, Step, StepId, StepState, TaskState};
use gaffer_protocol::contracts::{Plan, Ruling, Verdict};
use gaffer_protocol::receipts::{CiReceipt, PullRequestReceipt};
use serde_json::{json, Value};

/// Bounds of the loops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Review rounds that may request changes before the arbiter is called (default 3).
    pub review_rounds: u32,
    /// Check runs before the task fails (default 3).
    pub check_attempts: u32,
    /// Arbiter calls before the task is blocked (default 2).
    pub arbiter_calls: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            review_rounds: 3,
            check_attempts: 3,
            arbiter_calls: 2,
        }
    }
}

/// What the driver should do next.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// Append these events (stage changes, new step intents, the end).
    Record(Vec<Event>),
    /// Run this step: its intent is recorded and its dependencies settled.
    Run(StepId),
    /// A non-idempotent step was interrupted: probe it before anything else.
    Reconcile(StepId),
    /// A step needs a human (`manual_required`): ask and wait.
    AskHuman(StepId),
    /// Something else must happen first (an approval, another writer).
    Wait,
    /// The task is over.
    Finished,
}

fn record(kind: StepKind, depends_on: Option<&Step>, input: Value) -> Event {
    Event::StepIntentRecorded {
        step_id: kind.id(),
        name: kind.name(),
        intent: kind.intent(),
        depends_on: depends_on.map(|s| vec![s.id.clone()]).unwrap_or_default(),
        input,
    }
}

fn count(task: &TaskState, pred: impl Fn(StepKind) -> bool) -> u32 {
    task.steps
        .values()
        .filter(|s| StepKind::of(&s.id).is_some_and(&pred))
        .count() as u32
}

/// The plan the task works to: the planner's, or its last revision after challenges.
pub fn plan_of(task: &TaskState) -> Option<Plan> {
    current_plan(task)
}

fn verdict_of(step: &Step) -> Option<Verdict> {
    serde_json::from_value(step.receipt.as_ref()?.get("verdict")?.clone()).ok()
}

fn ruling_of(step: &Step) -> Option<Ruling> {
    serde_json::from_value(step.receipt.as_ref()?.get("ruling")?.clone()).ok()
}

/// The receipt of the step `kind` names, once it completed.
pub(crate) fn receipt_of(task: &TaskState, kind: StepKind) -> Option<&Value> {
    task.steps.get(&kind.id())?.receipt.as_ref()
}

/// How much of a failed check's output a task's failure reason shows (the end).
const CHECK_OUTPUT_SHOWN: usize = 1500;

/// What a failed check's receipt says, for a task's failure reason: its command and
/// exit code, the sandbox's note if any, and the end of its (redacted) output.
fn failed_check(receipt: &Value) -> String {
    let command = receipt
        .get("command")
        .and_then(Value::as_str)
        .unwrap_or("check");
    let exit = receipt
        .get("exit_code")
        .filter(|c| !c.is_null())
        .map_or_else(|| "?".to_owned(), Value::to_string);
    let sandbox = receipt
        .get("sandbox")
        .and_then(Value::as_str)
        .map(|s| format!("; {s}"))
        .unwrap_or_default();
    let output = receipt
        .get("output_tail")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .trim_end();
    let shown = if output.is_empty() {
        "; it printed nothing".to_owned()
    } else {
        format!(
            "; the end of its output:\n{}",
            crate::prompts::tail(output, CHECK_OUTPUT_SHOWN)
        )
    };
    format!("`{command}` exits {exit}{sandbox}{shown}")
}

/// Whether the `worktree` step found the project has a setup to run (`setup`,
/// `copy` or `port` in its config): decided once, there, so a config change does not
/// change a task already under way.
fn needs_setup(worktree: &Step) -> bool {
    worktree.receipt.as_ref().and_then(|r| r.get("setup")) == Some(&Value::Bool(true))
}

/// Whether the project has a tracker (the worktree step records it).
fn has_tracker(task: &TaskState) -> bool {
    receipt_of(task, StepKind::Worktree)
        .and_then(|r| r.get("tracker"))
        .and_then(Value::as_bool)
        == Some(true)
}

/// The project's forge as the `ship` step found it; `None`: the branch stays local.
fn forge_of(task: &TaskState) -> Option<&Value> {
    receipt_of(task, StepKind::Ship)
        .and_then(|r| r.get("forge"))
        .filter(|f| f.is_object())
}

/// Whether the project waits for CI (`wait_for_ci = false`: a repository without CI).
fn waits_for_ci(task: &TaskState) -> bool {
    forge_of(task).and_then(|f| f.get("wait_for_ci")) != Some(&Value::Bool(false))
}

/// What the finished task shipped: the `ship` summary plus the pull request, the last
/// CI state and the report.
fn shipped_summary(task: &TaskState, ci: &Value) -> Value {
    let mut summary = receipt_of(task, StepKind::Ship)
        .cloned()
        .unwrap_or(Value::Null);
    if let Value::Object(map) = &mut summary {
        if let Some(pr) = receipt_of(task, StepKind::PullRequest) {
            map.insert(PullRequestReceipt::SUMMARY_KEY.into(), pr.clone());
        }
        map.insert(
            "ci".into(),
            json!({ "state": ci.get("state"), "sha": ci.get("sha"), "runs": count(task, |k| matches!(k, StepKind::Ci(_))) }),
        );
        if let Some(report) = receipt_of(task, StepKind::Report) {
            map.insert("report".into(), report.clone());
        }
        if !task.follow_ups.is_empty() {
            let rounds: Vec<Value> = task
                .follow_ups
                .iter()
                .map(|f| {
                    json!({
                        "n": f.n,
                        "kind": f.kind,
                        "keys": f.keys,
                        "reply": receipt_of(task, StepKind::Reply(f.n)),
                    })
                })
                .collect();
            map.insert("follow_ups".into(), Value::Array(rounds));
        }
    }
    summary
}

/// After CI passed (or, without CI, the pull request opened): report (tracker, issue)
/// if there is anything to report, else done.
fn after_ci_success(task: &TaskState, last: &Step) -> Next {
    if let Some(reply) = follow_up::review::reply_due(task, last) {
        return reply;
    }
    if (has_tracker(task) || task.options.issue.is_some())
        && !task.steps.contains_key(&StepKind::Report.id())
    {
        return Next::Record(vec![record(StepKind::Report, Some(last), json!({}))]);
    }
    Next::Record(done_again(task))
}

/// `task_done` with what the task shipped, its last CI run included: the end of
/// shipping, and of each follow-up round.
fn done_again(task: &TaskState) -> Vec<Event> {
    let ci = task
        .steps_in_order()
        .into_iter()
        .rev()
        .find(|s| matches!(StepKind::of(&s.id), Some(StepKind::Ci(_))))
        .and_then(|s| s.receipt.clone())
        .unwrap_or(Value::Null);
    vec![Event::TaskDone {
        summary: shipped_summary(task, &ci),
    }]
}

/// Moves to `stage` (if not there already) and records `kind`.
fn go(task: &TaskState, stage: Stage, kind: StepKind, after: &Step, input: Value) -> Next {
    let mut events = Vec::new();
    if task.stage != stage {
        events.push(Event::TaskStageEntered { stage });
    }
    events.push(record(kind, Some(after), input));
    Next::Record(events)
}

fn fail(reason: impl Into<String>) -> Next {
    Next::Record(vec![Event::TaskFailed {
        reason: reason.into(),
    }])
}

/// The next owner fix, with why.
fn fix(task: &TaskState, after: &Step, reason: &str, detail: Value) -> Next {
    let n = count(task, |k| matches!(k, StepKind::Fix(_))) + 1;
    go(
        task,
        Stage::Coding,
        StepKind::Fix(n),
        after,
        json!({ "reason": reason, "detail": detail }),
    )
}

fn check(task: &TaskState, after: &Step) -> Next {
    let c = count(task, |k| matches!(k, StepKind::Check(_))) + 1;
    go(task, Stage::Testing, StepKind::Check(c), after, json!({}))
}

fn arbiter(task: &TaskState, after: &Step, limits: &Limits, trigger: Value) -> Next {
    let k = count(task, |k| matches!(k, StepKind::Arbiter(_)));
    if k >= limits.arbiter_calls {
        return Next::Record(vec![Event::TaskBlocked {
            reason: format!(
                "owner and reviewer did not converge after {k} arbiter rulings; start a new task with clearer instructions"
            ),
        }]);
    }
    go(
        task,
        Stage::Arbitrating,
        StepKind::Arbiter(k + 1),
        after,
        trigger,
    )
}

/// What recovery records for a task whose runner died (a worker taking it over
/// records it with its `task_leased`, in one append). Pure.
///
/// - Every step something was running for is interrupted: its effect (`started`) or
///   the probe of an effect an earlier crash left unknown (`reconciling`). The
///   reducer then re-queues reads and idempotent steps, and sends non-idempotent
///   ones and interrupted probes to `effect_unknown`, to be probed (again).
/// - The pending approvals those steps asked are withdrawn: nobody waits for them
///   any more, and the step's next run asks under a new key (its attempt grew). Not
///   those of the steps that only ask a person: they ask again under the same key
///   and find their approval, pending or decided.
///
/// A task that is final, or where nothing was running, needs nothing.
pub fn recover(task: &TaskState) -> Vec<Event> {
    if task.stage.is_final() {
        return Vec::new();
    }
    let running: Vec<&Step> = task
        .steps_in_order()
        .into_iter()
        .filter(|s| matches!(s.state, StepState::Started | StepState::Reconciling))
        .collect();
    let mut events: Vec<Event> = running
        .iter()
        .map(|s| Event::StepInterrupted {
            step_id: s.id.clone(),
        })
        .collect();
    for step in running {
        if StepKind::of(&step.id).is_some_and(StepKind::asks_again_under_the_same_key) {
            continue;
        }
        events.extend(
            task.pending_approvals()
                .filter(|a| a.step_id == step.id)
                .map(|a| Event::ApprovalWithdrawn {
                    approval_id: a.id.clone(),
                    reason: format!(
                        "`{}` was interrupted by a crash; it asks again if it runs again",
                        step.name
                    ),
                }),
        );
    }
    events
}

/// Decide what happens next. Pure: the same state always gives the same answer.
pub fn decide(task: &TaskState, limits: &Limits) -> Next {
    if task.stage.is_final() {
        return Next::Finished;
    }
    let frontier = task.frontier();
    if let Some(step) = frontier.to_reconcile.first() {
        return Next::Reconcile(step.clone());
    }
    if !frontier.in_flight.is_empty() {
        return Next::Wait;
    }
    if let Some(step) = task
        .steps
        .values()
        .find(|s| s.state == StepState::ManualRequired)
    {
        return Next::AskHuman(step.id.clone());
    }
    if let Some(step) = frontier.runnable.first() {
        return Next::Run(step.clone());
    }
    if let Some(id) = frontier.blocking.first() {
        let step = &task.steps[id];
        return fail(format!(
            "{} failed: {}",
            step.name,
            step.error.as_deref().unwrap_or("no reason given")
        ));
    }
    let Some(last) = task.last_step() else {
        return Next::Record(vec![
            Event::TaskStageEntered {
                stage: Stage::Planning,
            },
            record(StepKind::Worktree, None, json!({})),
        ]);
    };
    if let Some(next) = follow_up::start(task, last) {
        return next;
    }
    let Some(kind) = StepKind::of(&last.id) else {
        return fail(format!("unknown step `{}` in the journal", last.id));
    };
    let failed = last.state == StepState::Failed;
    let why = || last.error.clone().unwrap_or_default();
    match kind {
        StepKind::Worktree if needs_setup(last) => {
            Next::Record(vec![record(StepKind::Setup, Some(last), json!({}))])
        }
        StepKind::Worktree | StepKind::Setup => {
            Next::Record(vec![record(StepKind::Plan, Some(last), json!({}))])
        }
        StepKind::Plan if failed => fail(format!("planning failed: {}", why())),
        StepKind::Plan => challenge::after_plan(task, last),
        StepKind::Challenge(n) if failed => fail(format!("challenger round {n} failed: {}", why())),
        StepKind::Challenge(n) => challenge::after_challenge(task, last, n),
        StepKind::Revise(n) if failed => fail(format!("plan revision {n} failed: {}", why())),
        StepKind::Revise(n) => challenge::after_revision(last, n),
        StepKind::PlanApproval if failed => fail(why()),
        StepKind::PlanApproval if has_tracker(task) => {
            Next::Record(vec![record(StepKind::TrackerOpen, Some(last), json!({}))])
        }
        StepKind::PlanApproval | StepKind::TrackerOpen => go(
            task,
            Stage::Coding,
            StepKind::Code(1),
            last,
            json!({ "subtask": 1 }),
        ),
        StepKind::Code(n) if failed => {
            fail(format!("owner turn for subtask {n} failed: {}", why()))
        }
        StepKind::Code(n) => Next::Record(vec![record(
            StepKind::Commit(n),
            Some(last),
            json!({ "subtask": n }),
        )]),
        StepKind::Commit(n) => {
            let subtasks = plan_of(task).map_or(0, |p| p.subtasks.len() as u32);
            if n < subtasks {
                Next::Record(vec![record(
                    StepKind::Code(n + 1),
                    Some(last),
                    json!({ "subtask": n + 1 }),
                )])
            } else if tester::has_tester(task) {
                tester::after_last_subtask(task, last)
            } else {
                let r = count(task, |k| matches!(k, StepKind::Review(_))) + 1;
                go(task, Stage::Reviewing, StepKind::Review(r), last, json!({}))
            }
        }
        StepKind::Fix(n) if failed => fail(format!("owner fix {n} failed: {}", why())),
        StepKind::Fix(n) => Next::Record(vec![record(
            StepKind::CommitFix(n),
            Some(last),
            json!({ "fix": n }),
        )]),
        StepKind::CommitFix(n) if fix_reason(task, n) == Some("tests") => {
            tester::run_tests(task, last)
        }
        StepKind::Test(n) if failed => fail(format!("tester turn {n} failed: {}", why())),
        StepKind::Test(n) => tester::after_tester(last, n),
        StepKind::CommitTest(_) => tester::run_tests(task, last),
        StepKind::TestRun(k) if failed => fail(format!("test run {k} could not run: {}", why())),
        StepKind::TestRun(k) => tester::after_test_run(task, last, k, limits),
        StepKind::CommitFix(n) if fix_reason(task, n) == Some(follow_up::review::KIND) => {
            follow_up::review::after_commit(task, last)
        }
        StepKind::CommitFix(n) if follow_up::sync::sync_of_fix(task, n).is_some() => {
            let s = follow_up::sync::sync_of_fix(task, n).unwrap_or_default();
            follow_up::sync::check(task, last, s)
        }
        StepKind::CommitFix(n) if fix_reason(task, n) == Some("ci") => {
            let p = count(task, |k| matches!(k, StepKind::Push(_))) + 1;
            go(task, Stage::Shipping, StepKind::Push(p), last, json!({}))
        }
        StepKind::CommitFix(_) => {
            let r = count(task, |k| matches!(k, StepKind::Review(_))) + 1;
            go(task, Stage::Reviewing, StepKind::Review(r), last, json!({}))
        }
        StepKind::Review(n) if failed => fail(format!("review round {n} failed: {}", why())),
        StepKind::Review(_) => match verdict_of(last) {
            Some(Verdict::Done) => check(task, last),
            Some(Verdict::ChangesRequested { feedback }) => {
                let asked = task
                    .steps
                    .values()
                    .filter(|s| matches!(verdict_of(s), Some(Verdict::ChangesRequested { .. })))
                    .count() as u32;
                if asked < limits.review_rounds {
                    fix(task, last, "review", json!(feedback))
                } else {
                    arbiter(
                        task,
                        last,
                        limits,
                        json!({ "trigger": "round_limit", "feedback": feedback }),
                    )
                }
            }
            Some(Verdict::Blocked { reason }) => arbiter(
                task,
                last,
                limits,
                json!({ "trigger": "blocked", "reason": reason }),
            ),
            None => fail(format!("step `{}` has no verdict in its receipt", last.id)),
        },
        StepKind::Arbiter(n) if failed => fail(format!("arbiter call {n} failed: {}", why())),
        StepKind::Arbiter(n) => match ruling_of(last) {
            Some(Ruling::Proceed { .. }) => check(task, last),
            Some(Ruling::Revise { instructions }) => {
                fix(task, last, "arbiter", json!(instructions))
            }
            Some(Ruling::Escalate { reason }) => Next::Record(vec![record(
                StepKind::Escalation(n),
                Some(last),
                json!({ "reason": reason }),
            )]),
            None => fail(format!("step `{}` has no ruling in its receipt", last.id)),
        },
        StepKind::Escalation(_) if failed => Next::Record(vec![Event::TaskBlocked {
            reason: format!("a human declined the arbiter's escalation: {}", why()),
        }]),
        StepKind::Escalation(_) => check(task, last),
        StepKind::Check(_) if follow_up::sync::sync_of(last).is_some() => {
            follow_up::sync::after_check(task, last, limits, failed)
        }
        StepKind::Check(c) if failed => fail(format!("check run {c} could not run: {}", why())),
        StepKind::Check(c) => {
            let receipt = last.receipt.clone().unwrap_or(Value::Null);
            if receipt.get("passed").and_then(Value::as_bool) == Some(true) {
                go(task, Stage::Shipping, StepKind::Ship, last, json!({}))
            } else if c < limits.check_attempts {
                fix(task, last, "check", receipt)
            } else {
                fail(format!(
                    "the check still fails after {c} runs: {}",
                    failed_check(&receipt)
                ))
            }
        }
        StepKind::Ship if failed => fail(format!("ship failed: {}", why())),
        StepKind::Ship if forge_of(task).is_some() => {
            Next::Record(vec![record(StepKind::ShipApproval, Some(last), json!({}))])
        }
        StepKind::Ship => Next::Record(vec![Event::TaskDone {
            summary: last.receipt.clone().unwrap_or(Value::Null),
        }]),
        StepKind::ShipApproval if failed => fail(format!(
            "push and pull request were not approved ({}); the branch stays in the repository",
            why()
        )),
        StepKind::ShipApproval => {
            Next::Record(vec![record(StepKind::Push(1), Some(last), json!({}))])
        }
        // Push, pull request, tracker and report steps are not read-only: when one
        // failed, `frontier.blocking` above already ended the task with its error.
        StepKind::Push(_) if !task.steps.contains_key(&StepKind::PullRequest.id()) => {
            Next::Record(vec![record(StepKind::PullRequest, Some(last), json!({}))])
        }
        StepKind::Push(_) if !waits_for_ci(task) => after_ci_success(task, last),
        StepKind::Push(n) => Next::Record(vec![record(
            StepKind::Ci(n),
            Some(last),
            json!({ "push": StepKind::Push(n).id() }),
        )]),
        // A repository without CI (`wait_for_ci = false`): the open pull request is the end.
        StepKind::PullRequest if !waits_for_ci(task) => after_ci_success(task, last),
        StepKind::PullRequest => {
            let p = count(task, |k| matches!(k, StepKind::Push(_)));
            Next::Record(vec![record(
                StepKind::Ci(p),
                Some(last),
                json!({ "push": StepKind::Push(p).id() }),
            )])
        }
        StepKind::Ci(n) if failed => fail(format!("waiting for CI (run {n}) failed: {}", why())),
        StepKind::Ci(n) => {
            let receipt = last.receipt.clone().unwrap_or(Value::Null);
            if CiReceipt::from_receipt(&receipt).is_some_and(|ci| ci.passed()) {
                return after_ci_success(task, last);
            }
            let fixes = forge_of(task)
                .and_then(|f| f.get("ci_fix_attempts"))
                .and_then(Value::as_u64)
                .unwrap_or(0) as u32;
            if follow_up::ci_run(task, n) <= fixes {
                fix(task, last, "ci", receipt)
            } else {
                let pr = receipt_of(task, StepKind::PullRequest)
                    .and_then(PullRequestReceipt::from_receipt)
                    .map_or_else(|| "(no pull request)".to_owned(), |p| p.url);
                fail(format!(
                    "CI still fails after {n} run{} ({} fix attempt{} allowed); the pull request stays open: {pr}",
                    if n == 1 { "" } else { "s" },
                    fixes,
                    if fixes == 1 { "" } else { "s" },
                ))
            }
        }
        StepKind::Report => Next::Record(done_again(task)),
        StepKind::FollowUpApproval(n) => follow_up::review::after_approval(task, last, n, failed),
        StepKind::PushApproval(n) if follow_up::sync::answers(task, n) => {
            follow_up::sync::after_push_approval(task, last, failed)
        }
        StepKind::PushApproval(_) => follow_up::review::after_push_approval(task, last, failed),
        StepKind::Sync(_) | StepKind::Resolve(_) => {
            follow_up::sync::after_update(task, last, failed)
        }
        StepKind::Reply(_) => Next::Record(done_again(task)),
    }
}

/// Why fix `n` was asked for (`review`, `arbiter`, `check`, `ci`).
fn fix_reason(task: &TaskState, n: u32) -> Option<&str> {
    task.steps
        .get(&StepKind::Fix(n).id())?
        .input
        .get("reason")?
        .as_str()
}
