//! The step kinds: the id each step has in the journal, its intent and its name.

use gaffer_core::{Intent, StepId};
use gaffer_protocol::receipts::{CiReceipt, PullRequestReceipt};

/// What kind of step an id names, and its number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepKind {
    /// Create the task's worktree.
    Worktree,
    /// Make the worktree ready (copied files, setup commands, a port), for a project
    /// that configures it.
    Setup,
    /// The planner's turn.
    Plan,
    /// The challenger's round n on the plan (projects with a challenger).
    Challenge(u32),
    /// The planner's revision n, answering challenge round n.
    Revise(u32),
    /// A human (or policy) approves the plan.
    PlanApproval,
    /// The owner works on subtask n.
    Code(u32),
    /// Commit subtask n.
    Commit(u32),
    /// The tester's turn n (projects with a tester; once, before review).
    Test(u32),
    /// Commit the tester's tests n.
    CommitTest(u32),
    /// Run the project's check on the tester's tests, run n.
    TestRun(u32),
    /// The reviewer's round n.
    Review(u32),
    /// The owner fixes (feedback, ruling or check output), round n.
    Fix(u32),
    /// Commit fix n.
    CommitFix(u32),
    /// The arbiter's call n.
    Arbiter(u32),
    /// A human settles escalation n.
    Escalation(u32),
    /// The project's check, run n.
    Check(u32),
    /// Prepare the branch and the summary.
    Ship,
    /// Open one tracker task per plan subtask (projects with a tracker).
    TrackerOpen,
    /// A human (or policy) allows the push and the pull request.
    ShipApproval,
    /// Push the task branch, n-th time.
    Push(u32),
    /// Find or open the pull request.
    PullRequest,
    /// Wait for CI on the commit of push n.
    Ci(u32),
    /// Mark tracker tasks done, comment on the issue.
    Report,
    /// A person allows one more round of review fixes for follow-up n, past the
    /// project's `review_fix_attempts` (denied: the pull request is no longer followed).
    FollowUpApproval(u32),
    /// A human (or policy) allows pushing the fix for follow-up n.
    PushApproval(u32),
    /// Answer each review comment of follow-up n with what was done.
    Reply(u32),
    /// Bring the task branch onto its base that moved under the pull request, n-th
    /// time (fetch, rebase or merge; see `pipeline::follow_up::sync`).
    Sync(u32),
    /// The owner resolves the conflicts an update stopped on, n-th time.
    Resolve(u32),
}

impl StepKind {
    /// Steps that only wait for a person's decision: stopping one mid-wait (Ctrl-C)
    /// changes nothing, and its approval is asked again when the task resumes.
    pub fn waits_for_a_person(self) -> bool {
        matches!(
            self,
            StepKind::PlanApproval
                | StepKind::Escalation(_)
                | StepKind::ShipApproval
                | StepKind::FollowUpApproval(_)
                | StepKind::PushApproval(_)
        )
    }

    /// Parse a step id.
    pub fn of(id: &StepId) -> Option<Self> {
        let (name, n) = match id.as_str().split_once('/') {
            Some((name, n)) => (name, n.parse::<u32>().ok()?),
            None => (id.as_str(), 0),
        };
        Some(match (name, n) {
            ("worktree", 0) => Self::Worktree,
            ("setup", 0) => Self::Setup,
            ("plan", 0) => Self::Plan,
            ("plan-approval", 0) => Self::PlanApproval,
            ("ship", 0) => Self::Ship,
            ("tracker-open", 0) => Self::TrackerOpen,
            ("ship-approval", 0) => Self::ShipApproval,
            (PullRequestReceipt::STEP, 0) => Self::PullRequest,
            ("report", 0) => Self::Report,
            ("push", n) if n > 0 => Self::Push(n),
            ("ci", n) if n > 0 => Self::Ci(n),
            ("challenge", n) if n > 0 => Self::Challenge(n),
            ("revise", n) if n > 0 => Self::Revise(n),
            ("code", n) if n > 0 => Self::Code(n),
            ("commit", n) if n > 0 => Self::Commit(n),
            ("test", n) if n > 0 => Self::Test(n),
            ("commit-test", n) if n > 0 => Self::CommitTest(n),
            ("test-run", n) if n > 0 => Self::TestRun(n),
            ("review", n) if n > 0 => Self::Review(n),
            ("fix", n) if n > 0 => Self::Fix(n),
            ("commit-fix", n) if n > 0 => Self::CommitFix(n),
            ("arbiter", n) if n > 0 => Self::Arbiter(n),
            ("escalation", n) if n > 0 => Self::Escalation(n),
            ("check", n) if n > 0 => Self::Check(n),
            ("follow-up-approval", n) if n > 0 => Self::FollowUpApproval(n),
            ("push-approval", n) if n > 0 => Self::PushApproval(n),
            ("reply", n) if n > 0 => Self::Reply(n),
            ("sync", n) if n > 0 => Self::Sync(n),
            ("resolve", n) if n > 0 => Self::Resolve(n),
            _ => return None,
        })
    }

    /// The step id of this kind.
    pub fn id(self) -> StepId {
        StepId(match self {
            Self::Worktree => "worktree".into(),
            Self::Setup => "setup".into(),
            Self::Plan => "plan".into(),
            Self::PlanApproval => "plan-approval".into(),
            Self::Ship => "ship".into(),
            Self::TrackerOpen => "tracker-open".into(),
            Self::ShipApproval => "ship-approval".into(),
            Self::PullRequest => PullRequestReceipt::STEP.into(),
            Self::Report => "report".into(),
            Self::Push(n) => format!("push/{n}"),
            Self::Ci(n) => format!("{}{n}", CiReceipt::STEP_PREFIX),
            Self::Challenge(n) => format!("challenge/{n}"),
            Self::Revise(n) => format!("revise/{n}"),
            Self::Code(n) => format!("code/{n}"),
            Self::Commit(n) => format!("commit/{n}"),
            Self::Test(n) => format!("test/{n}"),
            Self::CommitTest(n) => format!("commit-test/{n}"),
            Self::TestRun(n) => format!("test-run/{n}"),
            Self::Review(n) => format!("review/{n}"),
            Self::Fix(n) => format!("fix/{n}"),
            Self::CommitFix(n) => format!("commit-fix/{n}"),
            Self::Arbiter(n) => format!("arbiter/{n}"),
            Self::Escalation(n) => format!("escalation/{n}"),
            Self::Check(n) => format!("check/{n}"),
            Self::FollowUpApproval(n) => format!("follow-up-approval/{n}"),
            Self::PushApproval(n) => format!("push-approval/{n}"),
            Self::Reply(n) => format!("reply/{n}"),
            Self::Sync(n) => format!("sync/{n}"),
            Self::Resolve(n) => format!("resolve/{n}"),
        })
    }

    /// Whether running the step again asks its approval under the same key, and so
    /// finds the one an interrupted run asked (pending or decided): the steps that
    /// only ask a person (the plan, an escalation, the ship) ask as attempt 1.
    pub fn asks_again_under_the_same_key(self) -> bool {
        matches!(
            self,
            Self::PlanApproval
                | Self::Escalation(_)
                | Self::ShipApproval
                | Self::FollowUpApproval(_)
                | Self::PushApproval(_)
        )
    }

    /// What running the step does to the world.
    pub fn intent(self) -> Intent {
        match self {
            // The planner, challenger, reviewer and arbiter run read-only; approvals only ask.
            Self::Plan
            | Self::Challenge(_)
            | Self::Revise(_)
            | Self::PlanApproval
            | Self::Review(_)
            | Self::Arbiter(_)
            | Self::Escalation(_)
            | Self::ShipApproval
            | Self::FollowUpApproval(_)
            | Self::PushApproval(_)
            | Self::Ci(_) => Intent::ReadOnly,
            // Setup commands install and generate; run again after a crash, they
            // find their own work done (`npm ci`, `make`), as after a manual rerun.
            Self::Worktree
            | Self::Setup
            | Self::CommitTest(_)
            | Self::TestRun(_)
            | Self::Commit(_)
            | Self::CommitFix(_)
            | Self::Check(_)
            | Self::Ship => Intent::Idempotent,
            // Fetching is a read, and an update already under way (or done) is found
            // again rather than started twice.
            Self::Sync(_) => Intent::Idempotent,
            // Tracker tasks and the issue comment carry a unique marker and are looked
            // up before they are created, so running them again never makes a second.
            // Replies too: each carries a marker looked up before it is posted.
            Self::TrackerOpen | Self::Report | Self::Reply(_) => Intent::Idempotent,
            // An agent turn that edits the worktree and runs commands; a push and a
            // pull request create change the forge: after a crash, a probe decides.
            Self::Code(_)
            | Self::Fix(_)
            | Self::Resolve(_)
            | Self::Test(_)
            | Self::Push(_)
            | Self::PullRequest => Intent::NonIdempotent,
        }
    }

    /// A short human name.
    pub fn name(self) -> String {
        match self {
            Self::Worktree => "create worktree".into(),
            Self::Setup => "set up worktree".into(),
            Self::Plan => "planner turn".into(),
            Self::Challenge(n) => format!("challenger turn, round {n}"),
            Self::Revise(n) => format!("planner revision {n}"),
            Self::PlanApproval => "plan approval".into(),
            Self::Code(n) => format!("owner turn, subtask {n}"),
            Self::Commit(n) => format!("commit subtask {n}"),
            Self::Test(n) => format!("tester turn {n}"),
            Self::CommitTest(n) => format!("commit tests {n}"),
            Self::TestRun(n) => format!("test run {n}"),
            Self::Review(n) => format!("review round {n}"),
            Self::Fix(n) => format!("owner fix {n}"),
            Self::CommitFix(n) => format!("commit fix {n}"),
            Self::Arbiter(n) => format!("arbiter call {n}"),
            Self::Escalation(n) => format!("escalation {n} to a human"),
            Self::Check(n) => format!("check run {n}"),
            Self::Ship => "ship".into(),
            Self::TrackerOpen => "open tracker tasks".into(),
            Self::ShipApproval => "approve push and pull request".into(),
            Self::Push(n) => format!("push, run {n}"),
            Self::PullRequest => "pull request".into(),
            Self::Ci(n) => format!("CI run {n}"),
            Self::Report => "tracker and issue report".into(),
            Self::FollowUpApproval(n) => format!("allow review round {n}"),
            Self::PushApproval(n) => format!("approve pushing the fix for follow-up {n}"),
            Self::Reply(n) => format!("reply to the comments of follow-up {n}"),
            Self::Sync(n) => format!("update onto the moved base, run {n}"),
            Self::Resolve(n) => format!("owner resolves conflicts, round {n}"),
        }
    }
}
