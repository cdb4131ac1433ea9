use gaffer_core::*;
use pretty_assertions::assert_eq;
use serde_json::json;

pub(super) fn created() -> Event {
    Event::TaskCreated {
        task_id: "t-1".into(),
        project_id: "p-1".into(),
        request: "add a README section".into(),
        by: Actor::user("ana", "cli"),
        options: Default::default(),
    }
}

fn step(id: &str, intent: Intent, deps: &[&str]) -> Event {
    Event::StepIntentRecorded {
        step_id: id.into(),
        name: id.into(),
        intent,
        depends_on: deps.iter().map(|d| StepId::from(*d)).collect(),
        input: json!({}),
    }
}

fn started(id: &str) -> Event {
    Event::StepStarted { step_id: id.into() }
}

fn completed(id: &str) -> Event {
    Event::StepCompleted {
        step_id: id.into(),
        receipt: json!({"ok": true}),
    }
}

fn failed(id: &str) -> Event {
    Event::StepFailed {
        step_id: id.into(),
        error: "boom".into(),
        usage: None,
    }
}

pub(super) fn stage(s: Stage) -> Event {
    Event::TaskStageEntered { stage: s }
}

fn ask(approval: &str, step: &str, attempt: u32) -> Event {
    Event::ApprovalRequested {
        approval_id: approval.into(),
        step_id: step.into(),
        attempt,
        kind: ApprovalKind::Tool,
        summary: "run `rm -rf build`".into(),
        details: json!({"argv": ["rm", "-rf", "build"]}),
    }
}

fn decide(approval: &str, decision: Decision, who: &str) -> Event {
    Event::ApprovalDecided {
        approval_id: approval.into(),
        decision,
        by: Actor::user(who, "web"),
        note: None,
        for_task: false,
        grant: None,
    }
}

/// Given `events` (all must be accepted), return the task.
pub(super) fn given(events: &[Event]) -> TaskState {
    let mut state: Option<StreamState> = None;
    for (i, e) in events.iter().enumerate() {
        state = Some(
            StreamState::reduce(state.as_ref(), i as i64, e)
                .unwrap_or_else(|r| panic!("given event {i} ({}) rejected: {r}", e.kind())),
        );
    }
    match state {
        Some(StreamState::Task(t)) => *t,
        other => panic!("not a task: {other:?}"),
    }
}

/// When `event` is offered to the task, expect a rejection, and the state unchanged.
pub(super) fn rejects(task: &TaskState, event: Event) -> Rejected {
    let mut after = task.clone();
    let err = after
        .apply(999, &event)
        .expect_err("event should be rejected");
    assert_eq!(&after, task, "a rejected event changed the state");
    err
}

fn to_testing() -> Vec<Event> {
    vec![
        created(),
        stage(Stage::Planning),
        stage(Stage::Coding),
        stage(Stage::Testing),
    ]
}

#[test]
fn a_stream_must_start_with_its_creation() {
    let err = StreamState::start(0, &started("x")).unwrap_err();
    assert!(matches!(err, Rejected::NotACreation { .. }), "{err}");
}

#[test]
fn a_task_is_created_queued_with_its_request() {
    let t = given(&[created()]);
    assert_eq!(t.stage, Stage::Queued);
    assert_eq!(t.request, "add a README section");
    assert_eq!(t.project_id, ProjectId::from("p-1"));
}

#[test]
fn an_empty_request_is_refused() {
    let e = Event::TaskCreated {
        task_id: "t-1".into(),
        project_id: "p-1".into(),
        request: "   ".into(),
        by: Actor::system("test"),
        options: Default::default(),
    };
    assert_eq!(
        StreamState::start(0, &e).unwrap_err(),
        Rejected::Empty("request")
    );
}

#[test]
fn the_lifecycle_refuses_skipping_stages() {
    let t = given(&[created()]);
    let err = rejects(&t, stage(Stage::Shipping));
    assert_eq!(
        err,
        Rejected::IllegalStage {
            from: Stage::Queued,
            to: Stage::Shipping
        }
    );
}

#[test]
fn coding_and_reviewing_alternate() {
    let t = given(&[
        created(),
        stage(Stage::Planning),
        stage(Stage::AwaitingPlanApproval),
        stage(Stage::Coding),
        stage(Stage::Reviewing),
        stage(Stage::Coding),
        stage(Stage::Reviewing),
        stage(Stage::Arbitrating),
        stage(Stage::Testing),
        stage(Stage::Shipping),
    ]);
    assert_eq!(t.stage, Stage::Shipping);
}

#[test]
fn completing_a_step_that_never_started_is_rejected() {
    let t = given(&[created(), step("a", Intent::Idempotent, &[])]);
    let err = rejects(&t, completed("a"));
    assert!(
        matches!(
            err,
            Rejected::StepState {
                state: StepState::IntentRecorded,
                ..
            }
        ),
        "{err}"
    );
}

/// What a failed step's turns spent is kept (as its receipt's `usage`), so the
/// task's cost counts it; an older `step_failed` without it leaves no receipt.
#[test]
fn a_failed_step_keeps_what_its_turns_spent() {
    let usage = json!({"input_tokens": 1600, "output_tokens": 100, "cached_input_tokens": 0, "cost_usd": 0.008});
    let spent = Event::StepFailed {
        step_id: "plan".into(),
        error: "the planner's answer is not a valid plan after a retry".into(),
        usage: Some(usage.clone()),
    };
    let t = given(&[
        created(),
        step("plan", Intent::ReadOnly, &[]),
        started("plan"),
        spent,
    ]);
    let s = &t.steps[&StepId::from("plan")];
    assert_eq!(s.state, StepState::Failed);
    assert_eq!(s.receipt, Some(json!({ "usage": usage })));
    let cost = Spend::of_receipts(t.steps.values().filter_map(|s| s.receipt.as_ref()));
    assert_eq!((cost.tokens(), cost.cost_usd()), (1700, Some(0.008)));

    let t = given(&[
        created(),
        step("plan", Intent::ReadOnly, &[]),
        started("plan"),
        failed("plan"),
    ]);
    assert_eq!(t.steps[&StepId::from("plan")].receipt, None);
}

#[test]
fn completing_an_unknown_step_is_rejected() {
    let t = given(&[created()]);
    assert_eq!(
        rejects(&t, completed("ghost")),
        Rejected::UnknownStep("ghost".into())
    );
}

#[test]
fn a_step_cannot_start_before_its_dependency_settles() {
    let t = given(&[
        created(),
        step("a", Intent::Idempotent, &[]),
        step("b", Intent::Idempotent, &["a"]),
    ]);
    assert_eq!(t.frontier().runnable, vec![StepId::from("a")]);
    let err = rejects(&t, started("b"));
    assert_eq!(
        err,
        Rejected::DependencyNotReady {
            step: "b".into(),
            waiting_for: "a".into()
        }
    );
}

#[test]
fn a_dependency_must_exist() {
    let t = given(&[created()]);
    let err = rejects(&t, step("b", Intent::ReadOnly, &["nope"]));
    assert!(matches!(err, Rejected::UnknownDependency { .. }), "{err}");
}

#[test]
fn a_failed_read_only_step_is_settled_and_does_not_stop_the_task() {
    let t = given(&[
        created(),
        stage(Stage::Planning),
        stage(Stage::Coding),
        step("read", Intent::ReadOnly, &[]),
        started("read"),
        failed("read"),
        step("write", Intent::Idempotent, &["read"]),
    ]);
    let f = t.frontier();
    assert_eq!(f.runnable, vec![StepId::from("write")]);
    assert!(f.blocking.is_empty());
    let t = given(
        &[
            to_testing(),
            vec![
                step("read", Intent::ReadOnly, &[]),
                started("read"),
                failed("read"),
            ],
        ]
        .concat(),
    );
    assert!(t.all_steps_settled());
    let mut done = t.clone();
    done.apply(10, &Event::TaskDone { summary: json!({}) })
        .expect("a failed read-only step does not hold the task back");
    assert_eq!(done.stage, Stage::Done);
}

#[test]
fn a_failed_write_blocks_its_dependants_and_the_task() {
    let t = given(
        &[
            to_testing(),
            vec![
                step("write", Intent::Idempotent, &[]),
                started("write"),
                failed("write"),
                step("next", Intent::ReadOnly, &["write"]),
            ],
        ]
        .concat(),
    );
    let f = t.frontier();
    assert!(f.runnable.is_empty(), "{f:?}");
    assert_eq!(f.blocking, vec![StepId::from("write")]);
    let err = rejects(&t, Event::TaskDone { summary: json!({}) });
    assert!(matches!(err, Rejected::NotSettled(_)), "{err}");
}

#[test]
fn a_task_completes_only_when_every_step_is_settled() {
    let t = given(
        &[
            to_testing(),
            vec![step("a", Intent::Idempotent, &[]), started("a")],
        ]
        .concat(),
    );
    let err = rejects(&t, Event::TaskDone { summary: json!({}) });
    assert_eq!(err, Rejected::NotSettled("step `a` is started".into()));
    let t = given(
        &[
            to_testing(),
            vec![
                step("a", Intent::Idempotent, &[]),
                started("a"),
                completed("a"),
            ],
        ]
        .concat(),
    );
    let mut done = t.clone();
    done.apply(
        1,
        &Event::TaskDone {
            summary: json!({"branch": "gaffer/t-1"}),
        },
    )
    .unwrap();
    assert_eq!(done.stage, Stage::Done);
}

#[test]
fn no_event_is_accepted_after_a_final_state() {
    for end in [
        Event::TaskFailed { reason: "x".into() },
        Event::TaskBlocked { reason: "x".into() },
        Event::TaskCancelled {
            by: Actor::user("ana", "cli"),
            reason: None,
        },
    ] {
        let t = given(&[created(), step("a", Intent::ReadOnly, &[]), end]);
        assert!(t.stage.is_final());
        for e in [started("a"), stage(Stage::Planning), ask("ap", "a", 1)] {
            let err = rejects(&t, e);
            assert!(matches!(err, Rejected::TaskFinished { .. }), "{err}");
        }
        assert_eq!(t.frontier(), Frontier::default());
    }
}

#[test]
fn an_interrupted_read_or_idempotent_step_runs_again() {
    for intent in [Intent::ReadOnly, Intent::Idempotent] {
        let t = given(&[
            created(),
            step("a", intent, &[]),
            started("a"),
            Event::StepInterrupted {
                step_id: "a".into(),
            },
        ]);
        let s = &t.steps[&StepId::from("a")];
        assert_eq!(s.state, StepState::IntentRecorded);
        assert_eq!(s.attempt, 2);
        assert_eq!(t.frontier().runnable, vec![StepId::from("a")]);
    }
}

#[test]
fn an_interrupted_non_idempotent_step_is_never_blindly_rerun() {
    let t = given(&[
        created(),
        step("push", Intent::NonIdempotent, &[]),
        started("push"),
        Event::StepInterrupted {
            step_id: "push".into(),
        },
    ]);
    let f = t.frontier();
    assert!(f.runnable.is_empty());
    assert_eq!(f.to_reconcile, vec![StepId::from("push")]);
    let err = rejects(&t, started("push"));
    assert!(
        matches!(
            err,
            Rejected::StepState {
                state: StepState::EffectUnknown,
                ..
            }
        ),
        "{err}"
    );

    // Probe found the effect: completed with its receipt.
    let mut found = t.clone();
    found
        .apply(
            1,
            &Event::StepReconcileStarted {
                step_id: "push".into(),
            },
        )
        .unwrap();
    found.apply(2, &completed("push")).unwrap();
    assert_eq!(
        found.steps[&StepId::from("push")].state,
        StepState::Completed
    );

    // Probe could not tell: manual, then a human says run it again.
    let mut manual = t.clone();
    manual
        .apply(
            1,
            &Event::StepReconcileStarted {
                step_id: "push".into(),
            },
        )
        .unwrap();
    manual
        .apply(
            2,
            &Event::StepManualRequired {
                step_id: "push".into(),
                reason: "no PR found, push state unknown".into(),
            },
        )
        .unwrap();
    assert_eq!(manual.frontier().blocking, vec![StepId::from("push")]);
    manual
        .apply(
            3,
            &Event::StepRetried {
                step_id: "push".into(),
            },
        )
        .unwrap();
    let s = &manual.steps[&StepId::from("push")];
    assert_eq!((s.state, s.attempt), (StepState::IntentRecorded, 2));
}

fn interrupted(id: &str) -> Event {
    Event::StepInterrupted { step_id: id.into() }
}

fn reconcile_started(id: &str) -> Event {
    Event::StepReconcileStarted { step_id: id.into() }
}

/// The crash inside a crash of issue #16: the worker that took an interrupted step
/// over recorded `step_reconcile_started` and died before the probe's outcome.
fn probing_when_the_worker_died() -> Vec<Event> {
    vec![
        created(),
        step("code/1", Intent::NonIdempotent, &[]),
        started("code/1"),
        interrupted("code/1"),
        reconcile_started("code/1"),
    ]
}

#[test]
fn a_running_probe_is_in_flight_and_does_not_block_the_task() {
    let t = given(&probing_when_the_worker_died());
    let f = t.frontier();
    assert_eq!(f.in_flight, vec![StepId::from("code/1")]);
    assert!(f.blocking.is_empty(), "{f:?}");
    assert!(f.to_reconcile.is_empty(), "{f:?}");
}

#[test]
fn a_crash_during_a_probe_is_recovered_by_probing_again() {
    let mut t = given(&probing_when_the_worker_died());
    // When the next worker takes over, it interrupts the probe.
    t.apply(10, &interrupted("code/1")).unwrap();
    let s = &t.steps[&StepId::from("code/1")];
    // Then the step waits for a probe again, at the same attempt (nothing re-ran).
    assert_eq!((s.state, s.attempt), (StepState::EffectUnknown, 1));
    assert_eq!(t.frontier().to_reconcile, vec![StepId::from("code/1")]);
    t.apply(11, &reconcile_started("code/1")).unwrap();
    t.apply(
        12,
        &Event::StepManualRequired {
            step_id: "code/1".into(),
            reason: "a person decides".into(),
        },
    )
    .unwrap();
    assert_eq!(
        t.steps[&StepId::from("code/1")].state,
        StepState::ManualRequired
    );
}

#[test]
fn only_a_running_step_or_probe_can_be_interrupted() {
    let base = [created(), step("s", Intent::NonIdempotent, &[])];
    let unknown = [&base[..], &[started("s"), interrupted("s")]].concat();
    let manual = [
        &unknown[..],
        &[
            reconcile_started("s"),
            Event::StepManualRequired {
                step_id: "s".into(),
                reason: "r".into(),
            },
        ],
    ]
    .concat();
    let done = [&base[..], &[started("s"), completed("s")]].concat();
    for (events, state) in [
        (&base[..], StepState::IntentRecorded),
        (&unknown[..], StepState::EffectUnknown),
        (&manual[..], StepState::ManualRequired),
        (&done[..], StepState::Completed),
    ] {
        let err = rejects(&given(events), interrupted("s"));
        assert!(
            matches!(err, Rejected::StepState { state: s, .. } if s == state),
            "{state}: {err}"
        );
    }
}

#[test]
fn approving_an_approval_that_does_not_exist_is_rejected() {
    let t = given(&[created()]);
    assert_eq!(
        rejects(&t, decide("nope", Decision::Approve, "ana")),
        Rejected::UnknownApproval("nope".into())
    );
}

#[test]
fn the_first_decision_wins_and_a_second_is_rejected() {
    let t = given(&[
        created(),
        step("turn", Intent::NonIdempotent, &[]),
        ask("ap-1", "turn", 1),
        decide("ap-1", Decision::Approve, "ana"),
    ]);
    let a = &t.approvals[&ApprovalId::from("ap-1")];
    assert_eq!(a.state, ApprovalState::Approved);
    assert_eq!(a.decided_by.as_ref().map(|b| b.name.as_str()), Some("ana"));
    let err = rejects(&t, decide("ap-1", Decision::Deny, "bob"));
    assert_eq!(
        err,
        Rejected::ApprovalSettled {
            approval: "ap-1".into(),
            state: ApprovalState::Approved
        }
    );
}

#[test]
fn one_approval_per_step_and_attempt() {
    let t = given(&[
        created(),
        step("turn", Intent::NonIdempotent, &[]),
        ask("ap-1", "turn", 1),
    ]);
    let err = rejects(&t, ask("ap-2", "turn", 1));
    assert_eq!(
        err,
        Rejected::DuplicateApprovalKey {
            step: "turn".into(),
            attempt: 1,
            existing: "ap-1".into()
        }
    );
    assert_eq!(
        rejects(&t, ask("ap-1", "turn", 2)),
        Rejected::DuplicateApproval("ap-1".into())
    );
}

#[test]
fn a_final_task_withdraws_its_pending_approvals() {
    let t = given(&[
        created(),
        step("turn", Intent::NonIdempotent, &[]),
        ask("ap-1", "turn", 1),
        Event::TaskCancelled {
            by: Actor::user("ana", "cli"),
            reason: Some("changed my mind".into()),
        },
    ]);
    assert_eq!(
        t.approvals[&ApprovalId::from("ap-1")].state,
        ApprovalState::Withdrawn
    );
    assert_eq!(t.pending_approvals().count(), 0);
}

#[test]
fn a_task_with_a_pending_approval_cannot_be_done() {
    let t = given(
        &[
            to_testing(),
            vec![
                step("a", Intent::ReadOnly, &[]),
                started("a"),
                completed("a"),
                ask("ap", "a", 1),
            ],
        ]
        .concat(),
    );
    let err = rejects(&t, Event::TaskDone { summary: json!({}) });
    assert_eq!(err, Rejected::NotSettled("approval `ap` is pending".into()));
}

#[test]
fn sessions_are_verified_once_and_end_once() {
    let t = given(&[
        created(),
        Event::SessionStarted {
            session_id: "s-1".into(),
            agent: "claude".into(),
            role: Role::Owner,
            workspace_key: "/work/repo".into(),
            agent_session_id: Some("0b9a…".into()),
            step_id: None,
        },
        Event::SessionVerified {
            session_id: "s-1".into(),
            agent_session_id: "0b9a…".into(),
        },
        Event::SessionEnded {
            session_id: "s-1".into(),
            reason: "turn done".into(),
        },
    ]);
    assert!(t.sessions[&SessionId::from("s-1")].verified);
    let err = rejects(
        &t,
        Event::SessionEnded {
            session_id: "s-1".into(),
            reason: "again".into(),
        },
    );
    assert_eq!(err, Rejected::SessionEnded("s-1".into()));
}

#[test]
fn project_events_do_not_land_on_a_task() {
    let t = given(&[created()]);
    let err = rejects(
        &t,
        Event::ProjectAutoApproveSet {
            enabled: true,
            by: Actor::user("ana", "cli"),
        },
    );
    assert!(matches!(err, Rejected::WrongStream { .. }), "{err}");
}

#[test]
fn events_round_trip_through_json_with_a_type_tag() {
    let e = ask("ap-1", "turn", 1);
    let json = serde_json::to_value(&e).unwrap();
    assert_eq!(json["type"], "approval_requested");
    assert_eq!(json["kind"], "tool");
    let back: Event = serde_json::from_value(json).unwrap();
    assert_eq!(back, e);
}

fn ci(step: &str, state: &str) -> Event {
    Event::CiStatusChanged {
        step_id: step.into(),
        sha: "abc".into(),
        state: state.into(),
        checks: json!([{"name": "build", "state": state}]),
    }
}

#[test]
fn ci_changes_are_recorded_only_while_their_step_waits() {
    let t = given(&[created(), step("ci/1", Intent::ReadOnly, &[])]);
    assert!(matches!(
        rejects(&t, ci("ci/1", "pending")),
        Rejected::StepState {
            state: StepState::IntentRecorded,
            ..
        }
    ));
    assert_eq!(
        rejects(&t, ci("ci/9", "pending")),
        Rejected::UnknownStep("ci/9".into())
    );
    let t = given(&[
        created(),
        step("ci/1", Intent::ReadOnly, &[]),
        started("ci/1"),
        ci("ci/1", "pending"),
        ci("ci/1", "failure"),
    ]);
    // A CI change is a record, not an outcome: the step still waits.
    assert_eq!(t.steps[&StepId::from("ci/1")].state, StepState::Started);
}

#[test]
fn a_probe_that_proves_the_effect_absent_runs_the_step_again() {
    let t = given(&[
        created(),
        step("pr", Intent::NonIdempotent, &[]),
        started("pr"),
        Event::StepInterrupted {
            step_id: "pr".into(),
        },
        Event::StepReconcileStarted {
            step_id: "pr".into(),
        },
        Event::StepRetried {
            step_id: "pr".into(),
        },
    ]);
    let s = &t.steps[&StepId::from("pr")];
    assert_eq!((s.state, s.attempt), (StepState::IntentRecorded, 2));
    // Never straight from `effect_unknown`: the probe comes first.
    let unknown = given(&[
        created(),
        step("pr", Intent::NonIdempotent, &[]),
        started("pr"),
        Event::StepInterrupted {
            step_id: "pr".into(),
        },
    ]);
    assert!(matches!(
        rejects(
            &unknown,
            Event::StepRetried {
                step_id: "pr".into()
            }
        ),
        Rejected::StepState {
            state: StepState::EffectUnknown,
            ..
        }
    ));
}

#[test]
fn shipping_goes_back_to_coding_for_a_ci_fix_and_returns() {
    let mut events = to_testing();
    events.extend([
        stage(Stage::Shipping),
        stage(Stage::Coding),
        stage(Stage::Shipping),
    ]);
    assert_eq!(given(&events).stage, Stage::Shipping);
}

fn leased(worker: &str, generation: i64) -> Event {
    Event::TaskLeased {
        worker_id: worker.into(),
        generation,
    }
}

#[test]
fn each_lease_generation_is_newer_than_the_last_and_names_its_worker() {
    let t = given(&[created(), leased("host/1/a", 1), leased("host/2/b", 2)]);
    assert_eq!(t.worker.as_deref(), Some("host/2/b"));
    assert_eq!(t.lease_generation, 2);
    // A worker still holding generation 2 (or older) cannot record itself again:
    // two workers never hold one generation.
    for stale in [1, 2] {
        assert_eq!(
            rejects(&t, leased("host/1/a", stale)),
            Rejected::StaleLease {
                got: stale,
                current: 2
            }
        );
    }
    assert_eq!(rejects(&t, leased(" ", 3)), Rejected::Empty("worker_id"));
    // A finished task takes no lease.
    let done = given(&[created(), Event::TaskFailed { reason: "x".into() }]);
    assert!(matches!(
        rejects(&done, leased("host/1/a", 1)),
        Rejected::TaskFinished { .. }
    ));
}

fn ask_to_run(approval: &str, attempt: u32, kind: ApprovalKind, command: &str) -> Event {
    Event::ApprovalRequested {
        approval_id: approval.into(),
        step_id: "turn".into(),
        attempt,
        kind,
        summary: format!("run `{command}`"),
        details: json!({ "subject": { "tool": "Bash", "command": command } }),
    }
}

fn approve(approval: &str, by: Actor, for_task: bool, grant: Option<&str>) -> Event {
    Event::ApprovalDecided {
        approval_id: approval.into(),
        decision: Decision::Approve,
        by,
        note: None,
        for_task,
        grant: grant.map(ApprovalId::from),
    }
}

#[test]
fn a_grant_for_the_task_approves_only_the_same_tool_call() {
    let t = given(&[
        created(),
        step("turn", Intent::NonIdempotent, &[]),
        ask_to_run("ap-1", 1, ApprovalKind::Tool, "cargo publish"),
        approve("ap-1", Actor::user("ann", "discord"), true, None),
        ask_to_run("ap-2", 2, ApprovalKind::Tool, "cargo publish"),
        approve(
            "ap-2",
            Actor::policy("allowed for this task by ann"),
            false,
            Some("ap-1"),
        ),
        ask_to_run("ap-3", 3, ApprovalKind::Tool, "cargo publish --force"),
        ask_to_run("ap-4", 4, ApprovalKind::Ship, "cargo publish"),
        ask_to_run("ap-5", 5, ApprovalKind::Plan, "cargo publish"),
    ]);
    assert!(t.approvals[&ApprovalId::from("ap-1")].for_task);
    assert_eq!(
        t.approvals[&ApprovalId::from("ap-2")].state,
        ApprovalState::Approved
    );
    let policy = || Actor::policy("allowed for this task by ann");
    // Another command, or another kind, is not covered by the grant.
    for other in ["ap-3", "ap-4"] {
        let err = rejects(&t, approve(other, policy(), false, Some("ap-1")));
        assert!(
            matches!(err, Rejected::GrantRefused { .. }),
            "{other}: {err}"
        );
    }
    // Only an approval decided for the task is a grant.
    let err = rejects(&t, approve("ap-3", policy(), false, Some("ap-2")));
    assert!(matches!(err, Rejected::GrantRefused { .. }), "{err}");
    // Only tool approvals, approved by a person, may be allowed for the task.
    let err = rejects(&t, approve("ap-5", Actor::user("ann", "web"), true, None));
    assert!(matches!(err, Rejected::GrantRefused { .. }), "{err}");
    let err = rejects(&t, approve("ap-3", policy(), true, None));
    assert!(matches!(err, Rejected::GrantRefused { .. }), "{err}");
    let deny_for_task = Event::ApprovalDecided {
        approval_id: "ap-3".into(),
        decision: Decision::Deny,
        by: Actor::user("ann", "web"),
        note: None,
        for_task: true,
        grant: None,
    };
    assert!(matches!(
        rejects(&t, deny_for_task),
        Rejected::GrantRefused { .. }
    ));
}

#[test]
fn a_decision_without_a_grant_serialises_as_before_and_old_ones_read_back() {
    let e = decide("ap-1", Decision::Approve, "ana");
    let json = serde_json::to_value(&e).unwrap();
    assert!(
        json.get("for_task").is_none() && json.get("grant").is_none(),
        "{json}"
    );
    let old = json!({ "type": "approval_decided", "approval_id": "ap-1", "decision": "approve",
        "by": { "kind": "user", "name": "ana", "via": "web" }, "note": null });
    assert_eq!(serde_json::from_value::<Event>(old).unwrap(), e);
}

fn pack(files: &[(&str, PackMode, u64)], used: u64, budget: u64) -> Event {
    Event::StepContextPacked {
        step_id: "plan".into(),
        role: Role::Planner,
        pack: ContextPack {
            budget,
            used,
            files: files
                .iter()
                .map(|(path, mode, tokens)| PackedFile {
                    path: (*path).into(),
                    mode: *mode,
                    tokens: *tokens,
                })
                .collect(),
        },
    }
}

/// The context an agent got is kept with its step; a step run again records its new pack
/// over the old one.
#[test]
fn a_running_step_records_its_context_pack() {
    let files = [
        ("src/lib.rs", PackMode::Full, 900),
        ("src/main.rs", PackMode::Skeleton, 100),
    ];
    let t = given(&[
        created(),
        step("plan", Intent::ReadOnly, &[]),
        started("plan"),
        pack(&files, 1000, 8000),
    ]);
    let kept = t.steps[&StepId::from("plan")].context.clone().unwrap();
    assert_eq!((kept.used, kept.files.len()), (1000, 2));
    assert_eq!(kept.files[1].mode, PackMode::Skeleton);
    let again = given(&[
        created(),
        step("plan", Intent::ReadOnly, &[]),
        started("plan"),
        pack(&files, 1000, 8000),
        pack(&[("README.md", PackMode::Full, 10)], 10, 8000),
    ]);
    let kept = again.steps[&StepId::from("plan")].context.clone().unwrap();
    assert_eq!(kept.files[0].path, "README.md");
}

#[test]
fn a_context_pack_is_refused_outside_a_running_step_or_when_it_cannot_be_one() {
    let recorded = given(&[created(), step("plan", Intent::ReadOnly, &[])]);
    let ok = [("a.py", PackMode::Full, 5)];
    assert!(matches!(
        rejects(&recorded, pack(&ok, 5, 100)),
        Rejected::StepState { .. }
    ));
    let running = given(&[
        created(),
        step("plan", Intent::ReadOnly, &[]),
        started("plan"),
    ]);
    for (event, says) in [
        (pack(&ok, 6, 100), "add up to 5"),
        (pack(&ok, 5, 4), "over the budget of 4"),
        (
            pack(&[("/etc/passwd", PackMode::Full, 5)], 5, 100),
            "not a path inside",
        ),
        (
            pack(&[("../x.py", PackMode::Full, 5)], 5, 100),
            "not a path inside",
        ),
        (
            pack(&[("", PackMode::Full, 5)], 5, 100),
            "not a path inside",
        ),
        (
            pack(
                &[("a.py", PackMode::Full, 5), ("a.py", PackMode::Skeleton, 1)],
                6,
                100,
            ),
            "listed twice",
        ),
    ] {
        let err = rejects(&running, event);
        assert!(
            matches!(err, Rejected::InvalidContextPack { .. }) && err.to_string().contains(says),
            "{err}"
        );
    }
}
