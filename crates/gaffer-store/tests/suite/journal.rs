use super::support::*;
use gaffer_core::*;
use gaffer_store::StoreError;
use serde_json::json;

each_backend! {
async fn appends_update_projections_in_the_same_transaction(b: Backend) {
    let t = temp_journal(b).await;
    let j = &t.journal;
    seeded(j, "p-1", "t-1").await;
    let head = started_with_approval(j, "t-1").await;
    assert_eq!(head, 4);
    let view = j.task("t-1").await.unwrap().unwrap();
    assert_eq!(view.task.stage, "queued");
    assert_eq!(view.head_seq, 4);
    assert_eq!(view.steps.len(), 1);
    assert_eq!(view.steps[0].state, "started");
    assert_eq!(view.approvals[0].state, "pending");
    assert_eq!(view.approvals[0].project_id, "p-1");
    let report = j.verify().await.unwrap();
    assert_eq!(report.broken, None);
    assert_eq!(report.events, 5);
}

async fn a_rejected_event_writes_nothing(b: Backend) {
    let t = temp_journal(b).await;
    let j = &t.journal;
    seeded(j, "p-1", "t-1").await;
    let before = j.projections().await.unwrap();
    // The batch's first event is fine, the second completes a step that never started.
    let err = j
        .append(
            &"t-1".into(),
            2,
            vec![
                at(Event::TaskStageEntered {
                    stage: Stage::Planning,
                }),
                at(Event::StepCompleted {
                    step_id: "s".into(),
                    receipt: json!({}),
                }),
            ],
        )
        .await
        .unwrap_err();
    match err {
        StoreError::Rejected { index, reason, .. } => {
            assert_eq!(index, 1);
            assert!(matches!(reason, Rejected::StepState { .. }), "{reason}");
        }
        other => panic!("expected a rejection, got {other}"),
    }
    assert_eq!(j.head(&"t-1".into()).await.unwrap(), 2);
    assert_eq!(j.projections().await.unwrap(), before);
    // The stream still accepts the right next event after the refusal.
    j.append(
        &"t-1".into(),
        2,
        vec![at(Event::TaskStageEntered {
            stage: Stage::Planning,
        })],
    )
    .await
    .unwrap();
}

async fn every_append_goes_through_the_sanitizer_and_a_refused_event_writes_nothing(b: Backend) {
    let t = temp_journal(b).await;
    let j = &t.journal;
    seeded(j, "p-1", "t-1").await;
    let mut live = j.subscribe();
    // What the app service installs: every string rewritten; here, one word refused.
    j.sanitize_appends(std::sync::Arc::new(|event: Event| {
        let text = serde_json::to_string(&event).unwrap();
        if text.contains("refuse-me") {
            return Err("it holds a word this test refuses".into());
        }
        Ok(serde_json::from_str(&text.replace("hunter2", "[REDACTED]")).unwrap())
    }));
    j.append(
        &"t-1".into(),
        2,
        vec![at(Event::StepStarted { step_id: "s".into() }), at(Event::ApprovalRequested {
            approval_id: "ap-1".into(),
            step_id: "s".into(),
            attempt: 1,
            kind: ApprovalKind::Escalation,
            summary: "hunter2 asks".into(),
            details: json!({"hunter2": {"diff": "+key = hunter2"}}),
        })],
    )
    .await
    .unwrap();
    let stored = j.events_after(0, 100).await.unwrap();
    let last = serde_json::to_string(&stored.last().unwrap().event).unwrap();
    assert!(!last.contains("hunter2") && last.contains("[REDACTED]"), "{last}");
    let view = j.task("t-1").await.unwrap().unwrap();
    assert_eq!(view.approvals[0].summary, "[REDACTED] asks");
    assert!(!view.approvals[0].details.contains("hunter2"), "{:?}", view.approvals[0]);
    // Subscribers get what was stored.
    loop {
        let e = live.recv().await.unwrap();
        if let Event::ApprovalRequested { summary, .. } = e.event {
            assert_eq!(summary, "[REDACTED] asks");
            break;
        }
    }
    // A refused event fails the whole append; nothing of it is written.
    let before = j.projections().await.unwrap();
    let err = j
        .append(
            &"t-1".into(),
            4,
            vec![
                at(Event::TaskStageEntered { stage: Stage::Planning }),
                at(Event::TaskBlocked { reason: "refuse-me".into() }),
            ],
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::Constraint(m) if m.contains("event 1") && m.contains("refuses")),
        "{err}"
    );
    assert_eq!(j.head(&"t-1".into()).await.unwrap(), 4);
    assert_eq!(j.projections().await.unwrap(), before);
    assert_eq!(j.verify().await.unwrap().broken, None);
}

async fn a_stale_head_is_a_conflict_not_a_fork(b: Backend) {
    let t = temp_journal(b).await;
    let j = &t.journal;
    seeded(j, "p-1", "t-1").await;
    let err = j
        .append(
            &"t-1".into(),
            1,
            vec![at(Event::TaskStageEntered {
                stage: Stage::Planning,
            })],
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::Conflict {
                expected: 1,
                actual: 2,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(j.stream_events(&"t-1".into(), 0).await.unwrap().len(), 2);
}

async fn two_concurrent_writers_with_the_same_head_exactly_one_wins(b: Backend) {
    let t = temp_journal(b).await;
    seeded(&t.journal, "p-1", "t-1").await;
    // A second handle on the same file stands for a second process: its own
    // connections, its own cache, its own writer lock.
    let other = t.reopen().await;
    let stream = StreamId::from("t-1");
    for round in 0..20 {
        let head = t.journal.head(&stream).await.unwrap();
        let a = t.journal.append(
            &stream,
            head,
            vec![at(step(&format!("a{round}"), Intent::ReadOnly))],
        );
        let b = other.append(
            &stream,
            head,
            vec![at(step(&format!("b{round}"), Intent::ReadOnly))],
        );
        let (a, b) = tokio::join!(a, b);
        let wins = [a.is_ok(), b.is_ok()].iter().filter(|x| **x).count();
        assert_eq!(wins, 1, "round {round}: {a:?} / {b:?}");
        let loser = if a.is_ok() { b } else { a };
        assert!(
            matches!(loser, Err(StoreError::Conflict { .. })),
            "{loser:?}"
        );
        assert_eq!(t.journal.head(&"t-1".into()).await.unwrap(), head + 1);
    }
    assert_eq!(t.journal.verify().await.unwrap().broken, None);
}

/// A caller may drop a write at any await (a `select!`, a timeout, a cancelled
/// task). A write dropped after its `BEGIN` was sent but before it was answered
/// must not hand a connection still inside that transaction back to the pool:
/// the next write on it would fail, and the open transaction would keep the
/// file's write lock from every other process.
async fn a_write_dropped_at_any_await_leaves_no_transaction_open(b: Backend) {
    let t = temp_journal(b).await;
    seeded(&t.journal, "p-1", "t-1").await;
    let stream = StreamId::from("t-1");
    for polls in 1..=12 {
        let head = t.journal.head(&stream).await.unwrap();
        let write = t.journal.append(
            &stream,
            head,
            vec![at(step(&format!("dropped{polls}"), Intent::ReadOnly))],
        );
        drop_after_polls(write, polls).await;
        // A read transaction (PostgreSQL's is READ ONLY) dropped the same way
        // must not turn a later write on its connection into a read.
        drop_after_polls(t.journal.verify(), polls).await;
        for k in 0..4 {
            let head = t.journal.head(&stream).await.unwrap();
            t.journal
                .append(
                    &stream,
                    head,
                    vec![at(step(&format!("after{polls}-{k}"), Intent::ReadOnly))],
                )
                .await
                .unwrap_or_else(|e| panic!("a write after one dropped at poll {polls}: {e}"));
        }
    }
    if b == Backend::Postgres {
        // The pool's connections are all idle, none inside a forgotten transaction.
        t.sql(
            "DO $$ BEGIN IF (SELECT count(*) FROM pg_stat_activity
                  WHERE datname = current_database() AND state LIKE 'idle in transaction%') > 0
             THEN RAISE EXCEPTION 'a pooled connection is idle in a transaction'; END IF; END $$",
        )
        .await
        .unwrap();
    }
    // Another process can still write: no connection holds the write lock.
    let other = t.reopen().await;
    let head = other.head(&stream).await.unwrap();
    tokio::time::timeout(
        std::time::Duration::from_secs(20),
        other.append(&stream, head, vec![at(step("other", Intent::ReadOnly))]),
    )
    .await
    .expect("another process waited on a write lock nobody releases")
    .unwrap();
    assert_eq!(t.journal.verify().await.unwrap().broken, None);
}

async fn many_tasks_racing_on_one_handle_never_fork(b: Backend) {
    let t = temp_journal(b).await;
    seeded(&t.journal, "p-1", "t-1").await;
    let j = t.journal.clone();
    let mut handles = Vec::new();
    for i in 0..16 {
        let j = j.clone();
        handles.push(tokio::spawn(async move {
            j.append(
                &"t-1".into(),
                2,
                vec![at(step(&format!("x{i}"), Intent::ReadOnly))],
            )
            .await
            .is_ok()
        }));
    }
    let mut wins = 0;
    for h in handles {
        wins += usize::from(h.await.unwrap());
    }
    assert_eq!(wins, 1);
    assert_eq!(j.head(&"t-1".into()).await.unwrap(), 3);
}

async fn a_task_for_an_unknown_project_is_refused_and_nothing_is_stored(b: Backend) {
    let t = temp_journal(b).await;
    let err = t
        .journal
        .append(&"t-1".into(), 0, vec![at(task("t-1", "p-nope"))])
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Constraint(_)), "{err}");
    assert!(err.to_string().contains("does not exist"), "{err}");
    assert_eq!(t.journal.head(&"t-1".into()).await.unwrap(), 0);
    assert!(t.journal.events_after(0, 10).await.unwrap().is_empty());
}

async fn an_approval_id_is_unique_across_tasks(b: Backend) {
    let t = temp_journal(b).await;
    let j = &t.journal;
    seeded(j, "p-1", "t-1").await;
    j.append(
        &"t-2".into(),
        0,
        vec![at(task("t-2", "p-1")), at(step("s", Intent::ReadOnly))],
    )
    .await
    .unwrap();
    let ask = |task_step: &str| Event::ApprovalRequested {
        approval_id: "ap-same".into(),
        step_id: task_step.into(),
        attempt: 1,
        kind: ApprovalKind::Plan,
        summary: "approve the plan".into(),
        details: json!(null),
    };
    j.append(&"t-1".into(), 2, vec![at(ask("s"))])
        .await
        .unwrap();
    let err = j
        .append(&"t-2".into(), 2, vec![at(ask("s"))])
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Constraint(_)), "{err}");
    assert_eq!(j.head(&"t-2".into()).await.unwrap(), 2);
    assert_eq!(j.verify().await.unwrap().broken, None);
}

async fn subscribers_are_woken_by_committed_events_in_order(b: Backend) {
    let t = temp_journal(b).await;
    let mut rx = t.journal.subscribe();
    seeded(&t.journal, "p-1", "t-1").await;
    let kinds: Vec<_> = (0..3)
        .map(|_| rx.try_recv().unwrap().event.kind())
        .collect();
    assert_eq!(
        kinds,
        ["project_registered", "task_created", "step_intent_recorded"]
    );
    let all = t.journal.events_after(0, 100).await.unwrap();
    assert!(all.windows(2).all(|w| w[0].pos < w[1].pos));
}

async fn events_cannot_be_updated_or_deleted_through_sql(b: Backend) {
    let t = temp_journal(b).await;
    seeded(&t.journal, "p-1", "t-1").await;
    let upd = t.sql("UPDATE events SET payload = '{}' WHERE seq = 1").await;
    assert!(upd.unwrap_err().contains("append-only"));
    let del = t.sql("DELETE FROM events").await;
    assert!(del.unwrap_err().contains("append-only"));
    assert_eq!(t.journal.verify().await.unwrap().broken, None);
}

async fn a_tampered_byte_is_found_by_verify(b: Backend) {
    let mut t = temp_journal(b).await;
    seeded(&t.journal, "p-1", "t-1").await;
    seeded(&t.journal, "p-2", "t-2").await;
    assert_eq!(t.journal.verify().await.unwrap().broken, None);
    t.tamper("t-2").await;
    let report = t.journal.verify().await.unwrap();
    let broken = report.broken.expect("tampering must be found");
    assert_eq!(
        (broken.stream.as_str(), broken.seq),
        ("t-2", 1),
        "{broken:?}"
    );
    assert!(broken.problem.contains("hash"), "{broken:?}");
}

/// `type` is stored beside the payload and not hashed: verify compares the two and
/// says which column of which event is wrong.
async fn a_changed_type_column_is_found_by_verify(b: Backend) {
    let t = temp_journal(b).await;
    seeded(&t.journal, "p-1", "t-1").await;
    seeded(&t.journal, "p-2", "t-2").await;
    assert_eq!(t.journal.verify().await.unwrap().broken, None);
    let change = "UPDATE events SET type = 'task_done' WHERE stream_id = 't-2' AND seq = 2";
    match b {
        // Around the append-only trigger, which is put back as it was.
        Backend::Sqlite => t
            .sql(&format!(
                "DROP TRIGGER events_no_update; {change};
                 CREATE TRIGGER events_no_update BEFORE UPDATE ON events
                 BEGIN SELECT RAISE(ABORT, 'journal events are append-only'); END;"
            ))
            .await
            .unwrap(),
        Backend::Postgres => t
            .sql(&format!("SET session_replication_role = replica; {change}"))
            .await
            .unwrap(),
    }
    let pos = t.journal.stream_events(&StreamId::from("t-2"), 1).await.unwrap()[0].pos;
    let broken = t.journal.verify().await.unwrap().broken.expect("a changed type must be found");
    assert_eq!(
        (broken.stream.as_str(), broken.seq, broken.pos, broken.column.as_deref()),
        ("t-2", 2, Some(pos), Some("type")),
        "{broken:?}"
    );
    assert!(broken.problem.contains("task_done") && broken.problem.contains("step_intent_recorded"), "{broken:?}");
}

/// The database's own check: the triggers that keep events append-only must be
/// there and on.
async fn verify_finds_the_append_only_trigger_gone(b: Backend) {
    let t = temp_journal(b).await;
    seeded(&t.journal, "p-1", "t-1").await;
    let (drop, name) = match b {
        Backend::Sqlite => ("DROP TRIGGER events_no_delete", "events_no_delete"),
        Backend::Postgres => (
            "ALTER TABLE events DISABLE TRIGGER events_no_update_or_delete",
            "events_no_update_or_delete",
        ),
    };
    t.sql(drop).await.unwrap();
    let broken = t.journal.verify().await.unwrap().broken.expect("a missing trigger must be found");
    assert_eq!((broken.stream.as_str(), broken.pos), ("storage", None), "{broken:?}");
    assert!(broken.problem.contains(name), "{broken:?}");
}

async fn a_projection_edited_behind_the_journals_back_is_found_and_rebuild_repairs_it(b: Backend) {
    let t = temp_journal(b).await;
    seeded(&t.journal, "p-1", "t-1").await;
    t.sql("UPDATE tasks SET stage = 'done'").await.unwrap();
    let broken = t.journal.verify().await.unwrap().broken.unwrap();
    assert_eq!(broken.stream, "projections");
    assert!(broken.problem.contains("tasks"), "{broken:?}");
    t.journal.rebuild().await.unwrap();
    assert_eq!(t.journal.verify().await.unwrap().broken, None);
    assert_eq!(
        t.journal.task("t-1").await.unwrap().unwrap().task.stage,
        "queued"
    );
}

/// A rebuild while another process appends to several tasks: every append and
/// the rebuild succeed (none deadlocks), and the projections match the events.
async fn a_rebuild_runs_alongside_appends_of_another_process(b: Backend) {
    let t = temp_journal(b).await;
    for i in 0..4 {
        seeded(&t.journal, &format!("p-{i}"), &format!("t-{i}")).await;
    }
    let other = t.reopen().await;
    let writers: Vec<_> = (0..4)
        .map(|i| {
            let j = other.clone();
            tokio::spawn(async move {
                let stream = StreamId::from(format!("t-{i}").as_str());
                let head = j.head(&stream).await.unwrap();
                j.append(&stream, head, vec![at(Event::StepStarted { step_id: "s".into() })]).await.unwrap();
                for n in 0..30 {
                    let head = j.head(&stream).await.unwrap();
                    let activity = Event::AgentActivity { step_id: "s".into(), activity: json!({"n": n}) };
                    j.append(&stream, head, vec![at(activity)]).await.unwrap();
                }
            })
        })
        .collect();
    for _ in 0..5 {
        t.journal.rebuild().await.unwrap();
    }
    for w in writers {
        w.await.unwrap();
    }
    t.journal.rebuild().await.unwrap();
    assert_eq!(t.journal.verify().await.unwrap().broken, None);
    assert_eq!(t.journal.head(&"t-3".into()).await.unwrap(), 2 + 1 + 30);
}

async fn state_replays_the_stream(b: Backend) {
    let t = temp_journal(b).await;
    seeded(&t.journal, "p-1", "t-1").await;
    match t.journal.state(&"t-1".into()).await.unwrap() {
        Some(StreamState::Task(task)) => {
            assert_eq!(task.frontier().runnable, vec![StepId::from("s")]);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(t.journal.state(&"t-none".into()).await.unwrap(), None);
}

async fn events_of_another_process_reach_subscribers_once_without_polling(b: Backend) {
    let t = temp_journal(b).await;
    t.journal.follow_other_processes().await.unwrap();
    let mut rx = t.journal.subscribe();
    // Our own append: delivered once, by the append itself.
    seeded(&t.journal, "p-1", "t-1").await;
    // Another handle on the same file stands for another process.
    let other = t.reopen().await;
    other
        .append(
            &"t-1".into(),
            2,
            vec![at(Event::TaskStageEntered {
                stage: Stage::Planning,
            })],
        )
        .await
        .unwrap();
    let mut kinds = Vec::new();
    while kinds.len() < 4 {
        let e = tokio::time::timeout(std::time::Duration::from_secs(10), rx.recv())
            .await
            .expect("the other process's event never arrived")
            .unwrap();
        kinds.push(e.event.kind());
    }
    assert_eq!(
        kinds,
        [
            "project_registered",
            "task_created",
            "step_intent_recorded",
            "task_stage_entered"
        ]
    );
    // Nothing is delivered twice.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(rx.try_recv().is_err());
}

/// A follower told to deliver only some events (here: new tasks, and everything
/// of task `t-keep`) delivers exactly those of other processes, in order, and
/// still every event this process appends itself.
async fn a_follower_delivers_only_the_wanted_events_of_other_processes(b: Backend) {
    let t = temp_journal(b).await;
    t.journal.follow_other_processes().await.unwrap();
    t.journal.follow_only(std::sync::Arc::new(|stream: &str, kind: &str| {
        kind == "task_created" || stream == "t-keep"
    }));
    let mut rx = t.journal.subscribe();
    let other = t.reopen().await;
    other.append(&"p-1".into(), 0, vec![at(project("p-1"))]).await.unwrap();
    for id in ["t-skip", "t-keep"] {
        other
            .append(&id.into(), 0, vec![at(task(id, "p-1")), at(step("s", Intent::NonIdempotent))])
            .await
            .unwrap();
    }
    for id in ["t-skip", "t-keep", "t-skip"] {
        let head = other.head(&id.into()).await.unwrap();
        let e = if head == 2 { Event::StepStarted { step_id: "s".into() } } else { Event::AgentActivity { step_id: "s".into(), activity: json!({}) } };
        other.append(&id.into(), head, vec![at(e)]).await.unwrap();
    }
    // This process's own append is delivered by the append itself, wanted or not.
    t.journal.append(&"p-2".into(), 0, vec![at(project("p-2"))]).await.unwrap();
    let mut got = Vec::new();
    while got.len() < 5 {
        let e = tokio::time::timeout(std::time::Duration::from_secs(10), rx.recv())
            .await
            .unwrap_or_else(|_| panic!("only {got:?} arrived"))
            .unwrap();
        got.push(format!("{} {}", e.stream_id, e.event.kind()));
    }
    got.sort();
    assert_eq!(
        got,
        [
            "p-2 project_registered",
            "t-keep step_intent_recorded",
            "t-keep step_started",
            "t-keep task_created",
            "t-skip task_created",
        ]
    );
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(rx.try_recv().is_err(), "an unwanted event was delivered");
}

/// One commit of more events than a follower reads at once (500) arrives whole,
/// in order, from one notification.
async fn a_commit_larger_than_a_read_reaches_followers_whole(b: Backend) {
    let t = temp_journal(b).await;
    seeded(&t.journal, "p-1", "t-1").await;
    t.journal.follow_other_processes().await.unwrap();
    let mut rx = t.journal.subscribe();
    let other = t.reopen().await;
    let mut events = vec![at(Event::StepStarted { step_id: "s".into() })];
    events.extend((0..700).map(|n| at(Event::AgentActivity { step_id: "s".into(), activity: json!({"n": n}) })));
    other.append(&"t-1".into(), 2, events).await.unwrap();
    let mut seqs = Vec::new();
    while seqs.len() < 701 {
        let e = tokio::time::timeout(std::time::Duration::from_secs(10), rx.recv())
            .await
            .unwrap_or_else(|_| panic!("only {} of 701 events arrived", seqs.len()))
            .unwrap();
        seqs.push(e.seq);
    }
    assert_eq!(seqs, (3..=703).collect::<Vec<i64>>());
}

/// Regression: with `synchronous=FULL` (the default) a SQLite reader woken by the
/// WAL write found the commit not yet visible, and was never woken again for it,
/// so an approval decided in another process did not wake the waiting agent.
async fn each_commit_of_another_process_wakes_followers_at_full_durability(b: Backend) {
    let t = temp_journal(b).await;
    let here = gaffer_store::open(&t.url(), gaffer_store::Durability::Full)
        .await
        .unwrap();
    here.follow_other_processes().await.unwrap();
    let mut rx = here.subscribe();
    let other = gaffer_store::open(&t.url(), gaffer_store::Durability::Full)
        .await
        .unwrap();
    other
        .append(&"p-1".into(), 0, vec![at(project("p-1"))])
        .await
        .unwrap();
    for n in 0..20 {
        // Each append must arrive on its own: no later write comes to the rescue.
        let id = format!("t-{n}");
        other
            .append(&id.as_str().into(), 0, vec![at(task(&id, "p-1"))])
            .await
            .unwrap();
        loop {
            let e = tokio::time::timeout(std::time::Duration::from_secs(10), rx.recv())
                .await
                .unwrap_or_else(|_| panic!("append {n} of the other process never arrived"))
                .unwrap();
            if e.stream_id == id {
                break;
            }
        }
    }
}

async fn the_blob_cache_round_trips_in_order_and_replaces(b: Backend) {
    let t = temp_journal(b).await;
    t.journal
        .blobs_put(&[("a".into(), vec![1, 2]), ("b".into(), vec![3])])
        .await
        .unwrap();
    t.journal.blobs_put(&[("a".into(), vec![9])]).await.unwrap();
    let keys: Vec<String> = ["b", "missing", "a"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(
        t.journal.blobs_get(&keys).await.unwrap(),
        vec![Some(vec![3]), None, Some(vec![9])]
    );
    let many: Vec<(String, Vec<u8>)> = (0..1200)
        .map(|i| (format!("k{i}"), vec![i as u8]))
        .collect();
    t.journal.blobs_put(&many).await.unwrap();
    let keys: Vec<String> = many.iter().map(|(k, _)| k.clone()).collect();
    let got = t.journal.blobs_get(&keys).await.unwrap();
    assert!(got
        .iter()
        .zip(&many)
        .all(|(g, (_, v))| g.as_ref() == Some(v)));
}
}

each_backend! {
    /// Positions commit in order even with writers on two handles (two machines):
    /// a reader that follows `events_after` never skips an event that commits
    /// later with a smaller position.
    async fn a_reader_of_events_after_never_skips_a_late_commit(b: Backend) {
        let t = temp_journal(b).await;
        t.journal
            .append(&"p-1".into(), 0, vec![at(project("p-1"))])
            .await
            .unwrap();
        let other = t.reopen().await;
        let mut writers = Vec::new();
        for (h, j) in [t.journal.clone(), other.clone()].into_iter().enumerate() {
            for w in 0..3 {
                let j = j.clone();
                writers.push(tokio::spawn(async move {
                    let id = format!("t-{h}-{w}");
                    let stream = StreamId::from(id.as_str());
                    j.append(&stream, 0, vec![at(task(&id, "p-1"))]).await.unwrap();
                    for k in 1..=15 {
                        j.append(&stream, k, vec![at(step(&format!("s{k}"), Intent::ReadOnly))])
                            .await
                            .unwrap();
                    }
                }));
            }
        }
        let reader = t.journal.clone();
        let read = tokio::spawn(async move {
            let (mut cursor, mut seen) = (0, 0usize);
            while seen < 1 + 6 * 16 {
                for e in reader.events_after(cursor, 7).await.unwrap() {
                    assert!(e.pos > cursor);
                    cursor = e.pos;
                    seen += 1;
                }
                tokio::task::yield_now().await;
            }
            seen
        });
        for w in writers {
            w.await.unwrap();
        }
        let seen = tokio::time::timeout(std::time::Duration::from_secs(30), read)
            .await
            .expect("the reader skipped an event that committed late")
            .unwrap();
        assert_eq!(seen, 1 + 6 * 16);
        assert_eq!(t.journal.verify().await.unwrap().broken, None);
    }
}

/// Cross-node delivery rests on this: every committed append notifies once, with
/// its last position; a refused append notifies nothing.
#[tokio::test]
async fn postgres_notifies_once_per_committed_append_and_never_for_a_refused_one() {
    if !Backend::Postgres.available() {
        return;
    }
    let t = temp_journal(Backend::Postgres).await;
    let mut listener = sqlx::postgres::PgListener::connect(&t.url()).await.unwrap();
    listener.listen(gaffer_store::NOTIFY_CHANNEL).await.unwrap();
    seeded(&t.journal, "p-1", "t-1").await;
    let refused = t
        .journal
        .append(
            &"t-1".into(),
            1,
            vec![at(Event::TaskStageEntered {
                stage: Stage::Planning,
            })],
        )
        .await;
    assert!(refused.is_err());
    let wait = std::time::Duration::from_secs(10);
    let mut got = Vec::new();
    for _ in 0..2 {
        let n = tokio::time::timeout(wait, listener.recv())
            .await
            .expect("no notification")
            .unwrap();
        got.push(n.payload().to_owned());
    }
    assert_eq!(
        got,
        vec![
            "p-1 project_registered",
            "t-1 task_created,step_intent_recorded"
        ],
        "one notification per committed append, naming its stream and its kinds"
    );
    let more = tokio::time::timeout(std::time::Duration::from_millis(300), listener.recv()).await;
    assert!(more.is_err(), "an extra notification: {more:?}");
}

each_backend! {
    async fn approvals_are_listed_by_state_and_found_by_id(b: Backend) {
        let t = temp_journal(b).await;
        seeded(&t.journal, "p-1", "t-1").await;
        started_with_approval(&t.journal, "t-1").await;
        let by = |state: Option<&str>, id: Option<&str>| gaffer_store::ApprovalFilter {
            state: state.map(str::to_owned),
            id: id.map(str::to_owned),
        };
        let pending = t.journal.approvals(&by(Some("pending"), None)).await.unwrap();
        assert_eq!(pending.len(), 1);
        assert_eq!((pending[0].id.as_str(), pending[0].task_id.as_str()), ("ap-1", "t-1"));
        assert!(t.journal.approvals(&by(Some("approved"), None)).await.unwrap().is_empty());
        assert_eq!(t.journal.approvals(&by(None, Some("ap-1"))).await.unwrap(), pending);
        assert!(t.journal.approvals(&by(None, Some("ap-2"))).await.unwrap().is_empty());
        assert_eq!(t.journal.projections().await.unwrap().approvals, pending);
    }
}

each_backend! {
async fn a_grant_for_the_task_is_projected_live_and_by_a_rebuild(b: Backend) {
    let t = temp_journal(b).await;
    let j = &t.journal;
    seeded(j, "p-1", "t-1").await;
    let ask = |id: &str, attempt: u32| {
        at(Event::ApprovalRequested {
            approval_id: id.into(),
            step_id: "s".into(),
            attempt,
            kind: ApprovalKind::Tool,
            summary: "run `make`".into(),
            details: json!({ "subject": { "tool": "Bash", "command": "make" } }),
        })
    };
    let approve = |id: &str, by: Actor, for_task: bool, grant: Option<&str>| {
        at(Event::ApprovalDecided {
            approval_id: id.into(),
            decision: Decision::Approve,
            by,
            note: None,
            for_task,
            grant: grant.map(ApprovalId::from),
        })
    };
    // One append each: the decision updates a row the request inserted.
    let batches = vec![
        vec![ask("ap-1", 1)],
        vec![approve("ap-1", Actor::user("ann", "web"), true, None)],
        vec![
            ask("ap-2", 2),
            approve(
                "ap-2",
                Actor::policy("allowed for this task by ann via web"),
                false,
                Some("ap-1"),
            ),
        ],
    ];
    for batch in batches {
        let head = j.head(&"t-1".into()).await.unwrap();
        j.append(&"t-1".into(), head, batch).await.unwrap();
    }
    let grants = |view: gaffer_store::TaskView| {
        view.approvals
            .iter()
            .map(|a| (a.id.clone(), a.state.clone(), a.for_task))
            .collect::<Vec<_>>()
    };
    let expected = vec![
        ("ap-1".to_owned(), "approved".to_owned(), true),
        ("ap-2".to_owned(), "approved".to_owned(), false),
    ];
    assert_eq!(grants(j.task("t-1").await.unwrap().unwrap()), expected);
    let live = j.projections().await.unwrap();
    j.rebuild().await.unwrap();
    assert_eq!(j.projections().await.unwrap(), live);
    assert_eq!(grants(j.task("t-1").await.unwrap().unwrap()), expected);
}
}

/// A byte of the SQLite header that reads still pass over (the freelist's page
/// count), flipped in the file: the replay alone sees nothing wrong, SQLite's
/// `quick_check` does, and verify reports it as storage damage.
#[tokio::test]
async fn a_flipped_sqlite_header_byte_is_found_by_quick_check() {
    let mut t = temp_journal(Backend::Sqlite).await;
    seeded(&t.journal, "p-1", "t-1").await;
    assert_eq!(t.journal.verify().await.unwrap().broken, None);
    let path = t.close_into_main_file().await;
    let mut bytes = std::fs::read(&path).unwrap();
    assert_eq!(&bytes[..16], b"SQLite format 3\0");
    bytes[39] ^= 0x40; // bytes 36..40: the number of freelist pages
    std::fs::write(&path, &bytes).unwrap();
    t.journal = t.reopen().await;
    assert_eq!(t.journal.task("t-1").await.unwrap().unwrap().task.id, "t-1");
    let report = t.journal.verify().await.unwrap();
    let broken = report.broken.expect("the damage must be found");
    assert_eq!(
        (broken.stream.as_str(), broken.seq, broken.pos),
        ("storage", 0, None)
    );
    assert!(
        broken.problem.contains("quick_check: Freelist"),
        "{broken:?}"
    );
}

/// Poll `work` up to `polls` times, yielding in between, then drop it unfinished
/// (unless it finished first), as a `select!` or a timeout would.
async fn drop_after_polls<F: std::future::Future>(work: F, polls: usize) {
    let mut work = Box::pin(work);
    for _ in 0..polls {
        if futures::poll!(work.as_mut()).is_ready() {
            return;
        }
        tokio::task::yield_now().await;
    }
}
