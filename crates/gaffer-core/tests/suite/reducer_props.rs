//! Property tests: for random event sequences the reducer never panics, rejected
//! events change nothing, and every accepted sequence replays to the same state.
use gaffer_core::*;
use proptest::prelude::*;
use serde_json::json;

const STEPS: &[&str] = &["a", "b", "c"];
const APPROVALS: &[&str] = &["x", "y"];
const SESSIONS: &[&str] = &["s1", "s2"];

fn pick(names: &'static [&'static str]) -> impl Strategy<Value = &'static str> {
    proptest::sample::select(names)
}

fn arb_stage() -> impl Strategy<Value = Stage> {
    proptest::sample::select(Stage::ALL.to_vec())
}

fn arb_intent() -> impl Strategy<Value = Intent> {
    prop_oneof![
        Just(Intent::ReadOnly),
        Just(Intent::Idempotent),
        Just(Intent::NonIdempotent)
    ]
}

/// Task events over a small id space, so that sequences hit real transitions.
fn arb_event() -> impl Strategy<Value = Event> {
    prop_oneof![
        2 => arb_stage().prop_map(|stage| Event::TaskStageEntered { stage }),
        4 => (pick(STEPS), arb_intent(), proptest::collection::vec(pick(STEPS), 0..2)).prop_map(
            |(s, intent, deps)| Event::StepIntentRecorded {
                step_id: s.into(),
                name: s.into(),
                intent,
                depends_on: deps.into_iter().map(StepId::from).collect(),
                input: json!({}),
            }
        ),
        4 => pick(STEPS).prop_map(|s| Event::StepStarted { step_id: s.into() }),
        1 => pick(STEPS).prop_map(|s| Event::AgentActivity { step_id: s.into(), activity: json!({"type": "text"}) }),
        1 => (pick(STEPS), 0u64..3).prop_map(|(s, used)| Event::StepContextPacked {
            step_id: s.into(),
            role: Role::Owner,
            pack: ContextPack { budget: 2, used, files: vec![PackedFile { path: "a.py".into(), mode: PackMode::Full, tokens: used }] },
        }),
        3 => pick(STEPS).prop_map(|s| Event::StepCompleted { step_id: s.into(), receipt: json!({"n": 1}) }),
        2 => pick(STEPS).prop_map(|s| Event::StepFailed { step_id: s.into(), error: "e".into(), usage: None }),
        2 => pick(STEPS).prop_map(|s| Event::StepInterrupted { step_id: s.into() }),
        1 => pick(STEPS).prop_map(|s| Event::StepReconcileStarted { step_id: s.into() }),
        1 => pick(STEPS).prop_map(|s| Event::StepManualRequired { step_id: s.into(), reason: "r".into() }),
        1 => pick(STEPS).prop_map(|s| Event::StepRetried { step_id: s.into() }),
        2 => (pick(APPROVALS), pick(STEPS), 1u32..3).prop_map(|(a, s, attempt)| Event::ApprovalRequested {
            approval_id: a.into(),
            step_id: s.into(),
            attempt,
            kind: ApprovalKind::Tool,
            summary: "q".into(),
            details: json!(null),
        }),
        2 => (pick(APPROVALS), any::<bool>()).prop_map(|(a, yes)| Event::ApprovalDecided {
            approval_id: a.into(),
            decision: if yes { Decision::Approve } else { Decision::Deny },
            by: Actor::user("u", "test"),
            note: None,
            for_task: false,
            grant: None,
        }),
        1 => pick(APPROVALS).prop_map(|a| Event::ApprovalExpired { approval_id: a.into(), reason: "late".into() }),
        1 => pick(SESSIONS).prop_map(|s| Event::SessionStarted {
            session_id: s.into(),
            agent: "claude".into(),
            role: Role::Owner,
            workspace_key: "/w".into(),
            agent_session_id: None,
            step_id: None,
        }),
        1 => pick(SESSIONS).prop_map(|s| Event::SessionVerified { session_id: s.into(), agent_session_id: "id".into() }),
        1 => pick(SESSIONS).prop_map(|s| Event::SessionEnded { session_id: s.into(), reason: "r".into() }),
        1 => Just(Event::TaskDone { summary: json!({}) }),
        1 => Just(Event::TaskFailed { reason: "r".into() }),
        1 => Just(Event::TaskCancelled { by: Actor::user("u", "t"), reason: None }),
        1 => Just(Event::ProjectAutoApproveSet { enabled: true, by: Actor::user("u", "t") }),
        1 => Just(Event::TaskCreated {
            task_id: "t".into(),
            project_id: "p".into(),
            request: "again".into(),
            by: Actor::user("u", "t"),
            options: Default::default(),
        }),
    ]
}

fn creation() -> Event {
    Event::TaskCreated {
        task_id: "t".into(),
        project_id: "p".into(),
        request: "r".into(),
        by: Actor::user("u", "t"),
        options: Default::default(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn rejected_events_change_nothing_and_accepted_ones_replay(events in proptest::collection::vec(arb_event(), 0..80)) {
        let mut state = StreamState::start(0, &creation()).unwrap();
        let mut accepted = vec![(0i64, creation())];
        for (i, event) in events.iter().enumerate() {
            let at = i as i64 + 1;
            let before = state.clone();
            match state.apply(at, event) {
                Ok(()) => accepted.push((at, event.clone())),
                Err(_) => prop_assert_eq!(&state, &before, "rejected {} changed the state", event.kind()),
            }
        }
        let replayed = StreamState::replay(accepted.iter().map(|(at, e)| (*at, e)))
            .map_err(|(i, r)| TestCaseError::fail(format!("accepted event {i} rejected on replay: {r}")))?
            .unwrap();
        prop_assert_eq!(&replayed, &state);

        // The state survives the JSON round trip the store relies on.
        let json = serde_json::to_string(&state).unwrap();
        let back: StreamState = serde_json::from_str(&json).unwrap();
        prop_assert_eq!(&back, &state);

        if let StreamState::Task(task) = &state {
            // The frontier only offers steps whose dependencies are settled.
            for id in task.frontier().runnable {
                let step = &task.steps[&id];
                prop_assert_eq!(step.state, StepState::IntentRecorded);
                for dep in &step.depends_on {
                    prop_assert!(task.steps[dep].is_settled());
                }
            }
            // At most one approval per (step, attempt).
            let mut keys: Vec<_> = task.approvals.values().map(|a| (a.step_id.clone(), a.attempt)).collect();
            let n = keys.len();
            keys.sort();
            keys.dedup();
            prop_assert_eq!(keys.len(), n);
            // Recovery: interrupting whatever runs is always accepted, and leaves
            // every step where an actor takes it on (run, probe, a person, settled).
            if !task.stage.is_final() {
                let mut recovered = task.clone();
                for s in task.steps.values() {
                    if matches!(s.state, StepState::Started | StepState::Reconciling) {
                        let event = Event::StepInterrupted { step_id: s.id.clone() };
                        prop_assert!(recovered.apply(999, &event).is_ok(), "{} refused", s.id);
                    }
                }
                prop_assert!(recovered.frontier().in_flight.is_empty());
            }
            // Done implies every step settled and nothing pending.
            if task.stage == Stage::Done {
                prop_assert!(task.all_steps_settled());
                prop_assert_eq!(task.pending_approvals().count(), 0);
            }
        }
    }

    #[test]
    fn the_reducer_never_panics_on_any_first_event(event in arb_event()) {
        let _ = StreamState::start(0, &event);
    }
}
