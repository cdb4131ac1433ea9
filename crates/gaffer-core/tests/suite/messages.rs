//! People's messages to a running agent and interrupts of its turn, in the reducer.
use gaffer_core::*;
use pretty_assertions::assert_eq;
use serde_json::json;

fn created() -> Event {
    Event::TaskCreated {
        task_id: "t-1".into(),
        project_id: "p-1".into(),
        request: "add a README section".into(),
        by: Actor::user("ana", "cli"),
        options: Default::default(),
    }
}

fn session(id: &str) -> Event {
    Event::SessionStarted {
        session_id: id.into(),
        agent: "claude".into(),
        role: Role::Owner,
        workspace_key: "/work/wt".into(),
        agent_session_id: Some("c-1".into()),
        step_id: Some("code/1".into()),
    }
}

fn ended(id: &str) -> Event {
    Event::SessionEnded {
        session_id: id.into(),
        reason: "turn finished".into(),
    }
}

fn said(id: &str, by: Actor) -> Event {
    Event::MessageSent {
        message_id: id.into(),
        text: "also update the changelog".into(),
        by,
    }
}

fn delivered(id: &str, session: &str) -> Event {
    Event::MessageDelivered {
        message_id: id.into(),
        session_id: session.into(),
        delivery: Delivery::Live,
        masked: false,
    }
}

fn interrupted(session: &str, by: Actor) -> Event {
    Event::TurnInterrupted {
        session_id: session.into(),
        by,
    }
}

fn ana() -> Actor {
    Actor::user("ana", "api:phone")
}

/// The task after `events` (after its creation and a coding step), each accepted.
fn given(events: &[Event]) -> TaskState {
    let mut all = vec![
        created(),
        Event::StepIntentRecorded {
            step_id: "code/1".into(),
            name: "code".into(),
            intent: Intent::NonIdempotent,
            depends_on: vec![],
            input: json!({}),
        },
        Event::StepStarted {
            step_id: "code/1".into(),
        },
    ];
    all.extend_from_slice(events);
    match StreamState::replay(all.iter().enumerate().map(|(i, e)| (i as i64, e))) {
        Ok(Some(StreamState::Task(t))) => *t,
        other => panic!("not accepted: {other:?}"),
    }
}

fn rejects(task: &TaskState, event: Event) -> Rejected {
    let mut after = task.clone();
    let err = after.apply(999, &event).expect_err("should be rejected");
    assert_eq!(&after, task, "a rejected event changed the state");
    err
}

#[test]
fn a_message_is_recorded_with_its_sender_and_owed_until_delivered() {
    let t = given(&[session("s-1"), said("m-1", ana())]);
    let owed: Vec<_> = t.undelivered_messages().map(|m| m.id.as_str()).collect();
    assert_eq!(owed, vec!["m-1"]);
    assert_eq!(t.messages[0].by, ana());
    let t = given(&[session("s-1"), said("m-1", ana()), delivered("m-1", "s-1")]);
    assert_eq!(t.undelivered_messages().count(), 0);
    let d = t.messages[0].delivered.as_ref().unwrap();
    assert_eq!((d.session_id.as_str(), d.delivery), ("s-1", Delivery::Live));
}

#[test]
fn a_delivery_records_whether_the_message_was_masked_and_older_ones_read_as_written() {
    let masked = Event::MessageDelivered {
        message_id: "m-1".into(),
        session_id: "s-1".into(),
        delivery: Delivery::NextTurn,
        masked: true,
    };
    let t = given(&[session("s-1"), said("m-1", ana()), masked.clone()]);
    let d = t.messages[0].delivered.as_ref().unwrap();
    assert_eq!((d.delivery, d.masked), (Delivery::NextTurn, true));
    let recorded = serde_json::to_value(&masked).unwrap();
    assert_eq!(recorded["masked"], true, "{recorded}");
    // An event journaled before deliveries said so: every message then went as written.
    let old: Event = serde_json::from_value(json!({
        "type": "message_delivered",
        "message_id": "m-1",
        "session_id": "s-1",
        "delivery": "live"
    }))
    .unwrap();
    assert_eq!(old, delivered("m-1", "s-1"));
}

#[test]
fn a_message_is_delivered_once() {
    let t = given(&[session("s-1"), said("m-1", ana()), delivered("m-1", "s-1")]);
    assert_eq!(
        rejects(&t, delivered("m-1", "s-1")),
        Rejected::MessageAlreadyDelivered("m-1".into())
    );
    assert_eq!(
        rejects(&t, delivered("m-2", "s-1")),
        Rejected::UnknownMessage("m-2".into())
    );
}

#[test]
fn only_a_person_sends_a_message_or_interrupts() {
    let t = given(&[session("s-1")]);
    for who in [Actor::system("engine"), Actor::policy("auto: cargo test")] {
        assert!(matches!(
            rejects(&t, said("m-1", who.clone())),
            Rejected::NotAPerson { .. }
        ));
        assert!(matches!(
            rejects(&t, interrupted("s-1", who)),
            Rejected::NotAPerson { .. }
        ));
    }
}

#[test]
fn a_message_needs_a_running_agent_and_an_unfinished_task() {
    let none = given(&[]);
    assert!(matches!(
        rejects(&none, said("m-1", ana())),
        Rejected::NoRunningAgent { .. }
    ));
    let over = given(&[session("s-1"), ended("s-1")]);
    assert!(matches!(
        rejects(&over, said("m-1", ana())),
        Rejected::NoRunningAgent { .. }
    ));
    let cancelled = given(&[
        session("s-1"),
        Event::TaskCancelled {
            by: ana(),
            reason: None,
        },
    ]);
    assert!(matches!(
        rejects(&cancelled, said("m-1", ana())),
        Rejected::TaskFinished { .. }
    ));
    let t = given(&[session("s-1"), said("m-1", ana())]);
    assert_eq!(
        rejects(&t, said("m-1", ana())),
        Rejected::DuplicateMessage("m-1".into())
    );
    let blank = Event::MessageSent {
        message_id: "m-2".into(),
        text: "  \n".into(),
        by: ana(),
    };
    assert_eq!(rejects(&t, blank), Rejected::Empty("text"));
}

#[test]
fn an_interrupt_waits_for_the_next_message_once() {
    let t = given(&[session("s-1"), interrupted("s-1", ana())]);
    assert_eq!(t.interrupted.as_ref().unwrap().by, ana());
    assert_eq!(
        rejects(&t, interrupted("s-1", ana())),
        Rejected::AlreadyInterrupted("s-1".into())
    );
    let answered = given(&[
        session("s-1"),
        interrupted("s-1", ana()),
        said("m-1", ana()),
    ]);
    assert_eq!(answered.interrupted, None);
    let over = given(&[session("s-1"), interrupted("s-1", ana()), ended("s-1")]);
    assert_eq!(over.interrupted, None);
    // Only the session open now can be interrupted.
    let t = given(&[session("s-1")]);
    assert_eq!(
        rejects(&t, interrupted("s-0", ana())),
        Rejected::SessionEnded("s-0".into())
    );
}

fn switched(from: &str, to: &str) -> Event {
    Event::AgentSwitched {
        step_id: "code/1".into(),
        role: Role::Owner,
        from: from.into(),
        to: to.into(),
        trigger: "usage_limit".into(),
        detail: "You've hit your limit · resets 3pm (UTC)".into(),
        until: 900_000,
        effects: false,
    }
}

#[test]
fn an_agent_switch_is_kept_once_the_failed_session_ended() {
    let t = given(&[session("s-1"), ended("s-1"), switched("claude", "codex")]);
    assert_eq!(t.switches.len(), 1);
    let s = &t.switches[0];
    assert_eq!(
        (s.from.as_str(), s.to.as_str(), s.role, s.until, s.at),
        ("claude", "codex", Role::Owner, 900_000, 5)
    );
}

#[test]
fn an_agent_switch_is_refused_while_the_failed_session_is_open_or_outside_a_running_step() {
    // The failed conversation must be over before the next agent takes the step.
    let open = given(&[session("s-1")]);
    assert!(matches!(
        rejects(&open, switched("claude", "codex")),
        Rejected::BadSwitch { .. }
    ));
    let ended = given(&[session("s-1"), ended("s-1")]);
    assert!(matches!(
        rejects(&ended, switched("codex", "codex")),
        Rejected::BadSwitch { .. }
    ));
    let mut done = ended.clone();
    done.apply(
        50,
        &Event::StepCompleted {
            step_id: "code/1".into(),
            receipt: json!({}),
        },
    )
    .unwrap();
    rejects(&done, switched("claude", "codex"));
}
