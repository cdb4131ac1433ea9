//! Random workloads: whatever mix of accepted and refused appends, the live
//! projections equal a rebuild from events alone, and the journal verifies.
use super::support::*;
use gaffer_core::*;
use pretty_assertions::assert_eq;
use proptest::prelude::*;
use serde_json::json;

const TASKS: &[&str] = &["t-a", "t-b", "t-c"];
const STEPS: &[&str] = &["s1", "s2", "s3"];

#[derive(Debug, Clone)]
enum Op {
    Append { task: usize, event: Box<Event> },
    Stale { task: usize },
}

fn arb_event() -> impl Strategy<Value = Event> {
    let step = proptest::sample::select(STEPS);
    let approval = proptest::sample::select(&["a1", "a2", "a3"][..]);
    prop_oneof![
        proptest::sample::select(Stage::ALL.to_vec())
            .prop_map(|stage| Event::TaskStageEntered { stage }),
        (step.clone(), 0..3u8).prop_map(|(s, i)| Event::StepIntentRecorded {
            step_id: s.into(),
            name: s.into(),
            intent: [Intent::ReadOnly, Intent::Idempotent, Intent::NonIdempotent][i as usize],
            depends_on: vec![],
            input: json!({"n": i}),
        }),
        step.clone()
            .prop_map(|s| Event::StepStarted { step_id: s.into() }),
        step.clone().prop_map(|s| Event::StepCompleted {
            step_id: s.into(),
            receipt: json!({"ok": s})
        }),
        step.clone().prop_map(|s| Event::StepFailed {
            step_id: s.into(),
            error: "x".into(),
            usage: None,
        }),
        step.clone()
            .prop_map(|s| Event::StepInterrupted { step_id: s.into() }),
        (approval.clone(), step.clone()).prop_map(|(a, s)| Event::ApprovalRequested {
            approval_id: a.into(),
            step_id: s.into(),
            attempt: 1,
            kind: ApprovalKind::Tool,
            summary: "q".into(),
            details: json!({"cmd": a}),
        }),
        (approval, any::<bool>()).prop_map(|(a, yes)| Event::ApprovalDecided {
            approval_id: a.into(),
            decision: if yes {
                Decision::Approve
            } else {
                Decision::Deny
            },
            by: Actor::user("u", "web"),
            note: Some("n".into()),
            for_task: false,
            grant: None,
        }),
        Just(Event::SessionStarted {
            session_id: "ss".into(),
            agent: "claude".into(),
            role: Role::Reviewer,
            workspace_key: "/w".into(),
            agent_session_id: None,
            step_id: None,
        }),
        Just(Event::TaskCancelled {
            by: Actor::user("u", "cli"),
            reason: None
        }),
    ]
}

fn arb_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => (0..TASKS.len(), arb_event()).prop_map(|(task, event)| Op::Append {
            task,
            event: Box::new(event),
        }),
        1 => (0..TASKS.len()).prop_map(|task| Op::Stale { task }),
    ]
}

async fn workload(b: Backend, ops: Vec<Op>) {
    let t = temp_journal(b).await;
    let j = &t.journal;
    j.append(&"p".into(), 0, vec![at(project("p"))])
        .await
        .unwrap();
    for id in TASKS {
        j.append(&(*id).into(), 0, vec![at(task(id, "p"))])
            .await
            .unwrap();
    }
    for op in ops {
        match op {
            Op::Append { task, event } => {
                let stream = StreamId::from(TASKS[task]);
                let head = j.head(&stream).await.unwrap();
                let before = j.projections().await.unwrap();
                if j.append(&stream, head, vec![at(*event)]).await.is_err() {
                    assert_eq!(
                        j.projections().await.unwrap(),
                        before,
                        "a refused append changed projections"
                    );
                }
            }
            Op::Stale { task } => {
                let stream = StreamId::from(TASKS[task]);
                let head = j.head(&stream).await.unwrap();
                let stale = j
                    .append(
                        &stream,
                        head - 1,
                        vec![at(Event::TaskStageEntered {
                            stage: Stage::Planning,
                        })],
                    )
                    .await;
                assert!(stale.is_err());
            }
        }
    }
    let live = j.projections().await.unwrap();
    assert_eq!(j.verify().await.unwrap().broken, None);
    j.rebuild().await.unwrap();
    assert_eq!(j.projections().await.unwrap(), live);
    j.shutdown().await;
}

fn block_on(f: impl std::future::Future<Output = ()>) {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn rebuild_equals_live_after_a_random_workload_sqlite(ops in proptest::collection::vec(arb_op(), 1..120)) {
        block_on(workload(Backend::Sqlite, ops));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10, ..ProptestConfig::default() })]

    #[test]
    fn rebuild_equals_live_after_a_random_workload_postgres(ops in proptest::collection::vec(arb_op(), 1..120)) {
        if Backend::Postgres.available() {
            block_on(workload(Backend::Postgres, ops));
        }
    }
}
