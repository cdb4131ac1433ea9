//! `decide` alone: given a task's state, what comes next. No IO.
use gaffer_core::*;
use gaffer_engine::{decide, recover, Limits, Next, StepKind};
use gaffer_protocol::receipts::PullRequestReceipt;
use pretty_assertions::assert_eq;
use serde_json::json;

struct Given {
    state: StreamState,
    at: i64,
}

impl Given {
    fn task() -> Self {
        let created = Event::TaskCreated {
            task_id: "t".into(),
            project_id: "p".into(),
            request: "r".into(),
            by: Actor::user("u", "t"),
            options: TaskOptions::default(),
        };
        Self {
            state: StreamState::start(0, &created).unwrap(),
            at: 0,
        }
    }

    fn apply(&mut self, events: Vec<Event>) {
        for e in events {
            self.at += 1;
            self.state
                .apply(self.at, &e)
                .unwrap_or_else(|r| panic!("{}: {r}", e.kind()));
        }
    }

    fn task_state(&self) -> &TaskState {
        match &self.state {
            StreamState::Task(t) => t,
            StreamState::Project(_) => unreachable!(),
        }
    }

    fn next(&self) -> Next {
        decide(self.task_state(), &Limits::default())
    }

    /// Follow the pipeline: record what it records, complete what it runs with `receipt`.
    fn advance(&mut self, receipt: impl Fn(&StepId) -> serde_json::Value) -> Next {
        loop {
            match self.next() {
                Next::Record(events) => self.apply(events),
                Next::Run(step) => {
                    let r = receipt(&step);
                    self.apply(vec![
                        Event::StepStarted {
                            step_id: step.clone(),
                        },
                        Event::StepCompleted {
                            step_id: step,
                            receipt: r,
                        },
                    ]);
                }
                other => return other,
            }
        }
    }
}

fn happy(step: &StepId) -> serde_json::Value {
    match StepKind::of(step).unwrap() {
        StepKind::Plan => json!({ "plan": { "subtasks": [
            { "title": "a", "description": "d", "files": [], "acceptance": "x" },
            { "title": "b", "description": "d", "files": [], "acceptance": "x" }
        ] } }),
        StepKind::Review(_) => json!({ "verdict": { "verdict": "done" } }),
        StepKind::Check(_) => json!({ "passed": true }),
        _ => json!({}),
    }
}

#[test]
fn a_new_task_starts_planning_with_a_worktree() {
    let g = Given::task();
    match g.next() {
        Next::Record(events) => {
            assert_eq!(
                events[0],
                Event::TaskStageEntered {
                    stage: Stage::Planning
                }
            );
            assert!(
                matches!(&events[1], Event::StepIntentRecorded { step_id, intent: Intent::Idempotent, .. } if step_id.as_str() == "worktree")
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_happy_path_codes_each_subtask_then_reviews_checks_and_ships() {
    let mut g = Given::task();
    assert_eq!(g.advance(happy), Next::Finished);
    let t = g.task_state();
    assert_eq!(t.stage, Stage::Done);
    let ids: Vec<_> = t.steps_in_order().iter().map(|s| s.id.0.clone()).collect();
    assert_eq!(
        ids,
        [
            "worktree",
            "plan",
            "plan-approval",
            "code/1",
            "commit/1",
            "code/2",
            "commit/2",
            "review/1",
            "check/1",
            "ship"
        ]
    );
    assert_eq!(
        t.steps[&StepId::from("code/1")].intent,
        Intent::NonIdempotent
    );
    assert_eq!(t.steps[&StepId::from("review/1")].intent, Intent::ReadOnly);
}

#[test]
fn changes_requested_past_the_round_limit_goes_to_the_arbiter() {
    let mut g = Given::task();
    let next = g.advance(|s| match StepKind::of(s).unwrap() {
        StepKind::Review(_) => {
            json!({ "verdict": { "verdict": "changes_requested", "feedback": "more" } })
        }
        _ => happy(s),
    });
    // 3 rounds of changes, then the arbiter; its receipt here is empty → no ruling.
    let t = g.task_state();
    let fixes = t
        .steps
        .keys()
        .filter(|k| k.as_str().starts_with("fix/"))
        .count();
    assert_eq!(
        fixes, 2,
        "two fixes after rounds 1 and 2; round 3 goes to the arbiter"
    );
    assert!(t.steps.contains_key(&StepId::from("arbiter/1")));
    assert_eq!(next, Next::Finished);
    assert_eq!(
        t.stage,
        Stage::Failed,
        "an arbiter receipt without a ruling fails the task"
    );
}

#[test]
fn an_interrupted_owner_turn_is_reconciled_then_needs_a_human() {
    let mut g = Given::task();
    loop {
        match g.next() {
            Next::Record(e) => g.apply(e),
            Next::Run(s) if s.as_str() == "code/1" => {
                g.apply(vec![
                    Event::StepStarted { step_id: s.clone() },
                    Event::StepInterrupted { step_id: s },
                ]);
                break;
            }
            Next::Run(s) => {
                let r = happy(&s);
                g.apply(vec![
                    Event::StepStarted { step_id: s.clone() },
                    Event::StepCompleted {
                        step_id: s,
                        receipt: r,
                    },
                ]);
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(g.next(), Next::Reconcile("code/1".into()));
    g.apply(vec![
        Event::StepReconcileStarted {
            step_id: "code/1".into(),
        },
        Event::StepManualRequired {
            step_id: "code/1".into(),
            reason: "unknown".into(),
        },
    ]);
    assert_eq!(g.next(), Next::AskHuman("code/1".into()));
    g.apply(vec![Event::StepRetried {
        step_id: "code/1".into(),
    }]);
    assert_eq!(g.next(), Next::Run("code/1".into()));
}

#[test]
fn an_interrupted_commit_simply_runs_again() {
    let mut g = Given::task();
    loop {
        match g.next() {
            Next::Record(e) => g.apply(e),
            Next::Run(s) if s.as_str() == "commit/1" => {
                g.apply(vec![
                    Event::StepStarted { step_id: s.clone() },
                    Event::StepInterrupted { step_id: s },
                ]);
                break;
            }
            Next::Run(s) => {
                let r = happy(&s);
                g.apply(vec![
                    Event::StepStarted { step_id: s.clone() },
                    Event::StepCompleted {
                        step_id: s,
                        receipt: r,
                    },
                ]);
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(g.next(), Next::Run("commit/1".into()));
}

#[test]
fn a_check_that_keeps_failing_fails_the_task_after_the_limit() {
    let mut g = Given::task();
    g.advance(|s| match StepKind::of(s).unwrap() {
        StepKind::Check(_) => json!({ "passed": false, "command": "make check" }),
        _ => happy(s),
    });
    let t = g.task_state();
    assert_eq!(t.stage, Stage::Failed);
    assert_eq!(
        t.steps
            .keys()
            .filter(|k| k.as_str().starts_with("check/"))
            .count(),
        3
    );
    assert!(t
        .outcome
        .as_ref()
        .unwrap()
        .to_string()
        .contains("make check"));
}

#[test]
fn step_ids_round_trip() {
    for kind in [
        StepKind::Worktree,
        StepKind::Plan,
        StepKind::PlanApproval,
        StepKind::Code(3),
        StepKind::CommitFix(2),
        StepKind::Escalation(1),
        StepKind::Ship,
        StepKind::TrackerOpen,
        StepKind::ShipApproval,
        StepKind::Push(2),
        StepKind::PullRequest,
        StepKind::Ci(3),
        StepKind::Report,
    ] {
        assert_eq!(StepKind::of(&kind.id()), Some(kind));
    }
    assert_eq!(StepKind::of(&"code/0".into()), None);
    assert_eq!(StepKind::of(&"ci/0".into()), None);
    assert_eq!(StepKind::of(&"nonsense".into()), None);
}

/// A project with a forge allowing `fixes` CI fix attempts, whose CI says `ci(n)`.
fn to_a_forge(
    fixes: u32,
    ci: impl Fn(u32) -> &'static str,
) -> impl Fn(&StepId) -> serde_json::Value {
    move |step| match StepKind::of(step).unwrap() {
        StepKind::Ship => {
            json!({ "branch": "b", "forge": { "kind": "gitea", "ci_fix_attempts": fixes } })
        }
        StepKind::Push(n) => json!({ "sha": format!("c{n}") }),
        StepKind::PullRequest => json!(PullRequestReceipt {
            number: 4,
            url: "http://forge/pr/4".into(),
            head: "b".into(),
            base: "main".into(),
            created: true,
            reconciled: false,
            warnings: vec![],
        }),
        StepKind::Ci(n) => json!({ "sha": format!("c{n}"), "state": ci(n) }),
        _ => happy(step),
    }
}

fn ids(t: &TaskState) -> Vec<String> {
    t.steps_in_order().iter().map(|s| s.id.0.clone()).collect()
}

#[test]
fn with_a_forge_shipping_asks_pushes_opens_one_pr_and_waits_for_ci() {
    let mut g = Given::task();
    assert_eq!(g.advance(to_a_forge(2, |_| "success")), Next::Finished);
    let t = g.task_state();
    assert_eq!(t.stage, Stage::Done);
    assert_eq!(
        ids(t)[9..],
        ["ship", "ship-approval", "push/1", "pr", "ci/1"]
    );
    for (step, intent) in [
        ("ship-approval", Intent::ReadOnly),
        ("push/1", Intent::NonIdempotent),
        ("pr", Intent::NonIdempotent),
        ("ci/1", Intent::ReadOnly),
    ] {
        assert_eq!(t.steps[&StepId::from(step)].intent, intent, "{step}");
    }
    let summary = t.outcome.clone().unwrap();
    assert_eq!(summary["pull_request"]["number"], 4);
    assert_eq!(
        summary["ci"],
        json!({ "state": "success", "sha": "c1", "runs": 1 })
    );
}

#[test]
fn a_ci_failure_goes_to_the_owner_is_pushed_again_and_the_attempts_are_bounded() {
    // Fails once, then passes: fix, commit, push again, CI again; still one `pr`.
    let mut g = Given::task();
    assert_eq!(
        g.advance(to_a_forge(2, |n| if n == 1 {
            "failure"
        } else {
            "success"
        })),
        Next::Finished
    );
    let t = g.task_state();
    assert_eq!(t.stage, Stage::Done);
    assert_eq!(
        ids(t)[9..],
        [
            "ship",
            "ship-approval",
            "push/1",
            "pr",
            "ci/1",
            "fix/1",
            "commit-fix/1",
            "push/2",
            "ci/2"
        ]
    );
    assert_eq!(t.steps[&StepId::from("fix/1")].input["reason"], "ci");
    assert_eq!(t.steps[&StepId::from("fix/1")].input["detail"]["sha"], "c1");
    assert_eq!(t.outcome.clone().unwrap()["ci"]["runs"], 2);

    // Always failing with one fix allowed: two CI runs, then the task fails and says
    // where the pull request is.
    let mut g = Given::task();
    assert_eq!(g.advance(to_a_forge(1, |_| "error")), Next::Finished);
    let t = g.task_state();
    assert_eq!(t.stage, Stage::Failed);
    assert_eq!(ids(t).last().map(String::as_str), Some("ci/2"));
    let reason = t.outcome.clone().unwrap()["reason"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        reason.contains("after 2 runs (1 fix attempt allowed)")
            && reason.contains("http://forge/pr/4"),
        "{reason}"
    );
}

#[test]
fn a_denied_ship_approval_fails_the_task_and_keeps_the_branch_local() {
    // Every step completes, but the ship approval is denied.
    let mut g = Given::task();
    loop {
        match g.next() {
            Next::Record(events) => g.apply(events),
            Next::Run(step) if step.as_str() == "ship-approval" => {
                g.apply(vec![
                    Event::StepStarted {
                        step_id: step.clone(),
                    },
                    Event::StepFailed {
                        step_id: step,
                        error: "denied by ana (cli): not today".into(),
                        usage: None,
                    },
                ]);
            }
            Next::Run(step) => {
                let r = to_a_forge(2, |_| "success")(&step);
                g.apply(vec![
                    Event::StepStarted {
                        step_id: step.clone(),
                    },
                    Event::StepCompleted {
                        step_id: step,
                        receipt: r,
                    },
                ]);
            }
            other => {
                assert_eq!(other, Next::Finished);
                break;
            }
        }
    }
    let t = g.task_state();
    assert_eq!(t.stage, Stage::Failed);
    assert!(!t.steps.contains_key(&StepId::from("push/1")));
    let reason = t.outcome.clone().unwrap()["reason"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        reason.contains("not approved")
            && reason.contains("not today")
            && reason.contains("stays in the repository"),
        "{reason}"
    );
}

#[test]
fn without_ci_the_open_pull_request_ends_the_task() {
    let mut g = Given::task();
    let next = g.advance(|s| match StepKind::of(s).unwrap() {
        StepKind::Ship => {
            json!({ "forge": { "kind": "github", "ci_fix_attempts": 2, "wait_for_ci": false } })
        }
        _ => to_a_forge(2, |_| "failure")(s),
    });
    assert_eq!(next, Next::Finished);
    let t = g.task_state();
    assert_eq!(t.stage, Stage::Done);
    assert_eq!(ids(t).last().map(String::as_str), Some("pr"));
    assert_eq!(t.outcome.clone().unwrap()["ci"]["runs"], 0);
}

impl Given {
    /// Follow the pipeline (as `advance`) until it says to run `step`; start it.
    fn start(&mut self, step: &str, receipt: impl Fn(&StepId) -> serde_json::Value) {
        loop {
            match self.next() {
                Next::Record(events) => self.apply(events),
                Next::Run(s) if s.as_str() == step => {
                    return self.apply(vec![Event::StepStarted { step_id: s }]);
                }
                Next::Run(s) => {
                    let r = receipt(&s);
                    self.apply(vec![
                        Event::StepStarted { step_id: s.clone() },
                        Event::StepCompleted {
                            step_id: s,
                            receipt: r,
                        },
                    ]);
                }
                other => panic!("before `{step}` the pipeline said {other:?}"),
            }
        }
    }

    /// What a takeover records now, applied.
    fn take_over(&mut self) -> Vec<Event> {
        let events = recover(self.task_state());
        self.apply(events.clone());
        events
    }
}

fn ask_tool(approval: &str, step: &str, attempt: u32) -> Event {
    Event::ApprovalRequested {
        approval_id: approval.into(),
        step_id: step.into(),
        attempt,
        kind: ApprovalKind::Tool,
        summary: "owner turn wants to run Bash: make check".into(),
        details: json!({ "tool": "Bash", "input": { "command": "make check" } }),
    }
}

#[test]
fn a_takeover_interrupts_the_running_turn_and_withdraws_what_it_asked() {
    let mut g = Given::task();
    g.start("code/1", happy);
    g.apply(vec![ask_tool("ap-1", "code/1", 1001)]);
    let found = g.take_over();
    assert_eq!(
        found,
        vec![
            Event::StepInterrupted {
                step_id: "code/1".into()
            },
            Event::ApprovalWithdrawn {
                approval_id: "ap-1".into(),
                reason: "`owner turn, subtask 1` was interrupted by a crash; it asks again if it runs again"
                    .into()
            },
        ]
    );
    assert_eq!(g.task_state().pending_approvals().count(), 0);
    assert_eq!(g.next(), Next::Reconcile("code/1".into()));
    // A second takeover finds nothing more to do.
    assert_eq!(g.take_over(), vec![]);
}

#[test]
fn a_takeover_keeps_the_approval_a_person_step_asks_again() {
    let mut g = Given::task();
    g.start("ship-approval", to_a_forge(1, |_| "success"));
    g.apply(vec![Event::ApprovalRequested {
        approval_id: "ap-ship".into(),
        step_id: "ship-approval".into(),
        attempt: 1,
        kind: ApprovalKind::Ship,
        summary: "Push and open a pull request?".into(),
        details: json!({}),
    }]);
    assert_eq!(
        g.take_over(),
        vec![Event::StepInterrupted {
            step_id: "ship-approval".into()
        }]
    );
    let pending: Vec<&str> = g
        .task_state()
        .pending_approvals()
        .map(|a| a.id.as_str())
        .collect();
    assert_eq!(pending, ["ap-ship"]);
    assert_eq!(g.next(), Next::Run("ship-approval".into()));
}

/// Issue #16: a worker took an interrupted owner turn over, recorded
/// `step_reconcile_started` and was killed. The task must not fail: the next
/// takeover probes again.
#[test]
fn a_crash_during_reconcile_is_probed_again_and_never_fails_the_task() {
    let mut g = Given::task();
    g.start("code/1", happy);
    g.take_over();
    assert_eq!(g.next(), Next::Reconcile("code/1".into()));
    g.apply(vec![Event::StepReconcileStarted {
        step_id: "code/1".into(),
    }]);
    // The prober died here. Whoever reads the task meanwhile waits; nobody fails it.
    assert_eq!(g.next(), Next::Wait);
    assert_eq!(
        g.take_over(),
        vec![Event::StepInterrupted {
            step_id: "code/1".into()
        }]
    );
    assert_eq!(g.next(), Next::Reconcile("code/1".into()));
    g.apply(vec![
        Event::StepReconcileStarted {
            step_id: "code/1".into(),
        },
        Event::StepManualRequired {
            step_id: "code/1".into(),
            reason: "a person decides".into(),
        },
    ]);
    assert_eq!(g.next(), Next::AskHuman("code/1".into()));
    g.apply(vec![Event::StepRetried {
        step_id: "code/1".into(),
    }]);
    assert_eq!(g.advance(happy), Next::Finished);
    assert_eq!(g.task_state().stage, Stage::Done);
}

#[test]
fn a_final_task_needs_no_recovery() {
    let mut g = Given::task();
    g.start("code/1", happy);
    g.apply(vec![Event::TaskFailed {
        reason: "given up".into(),
    }]);
    assert_eq!(recover(g.task_state()), vec![]);
}
