//! Worker leases: one holder per task, takeover after expiry, fencing of appends.

use super::support::*;
use gaffer_core::*;
use gaffer_store::{Journal, Lease, LeaseEnd, LeaseState, StoreError, WorkerInfo};
use std::sync::Arc;

fn worker(id: &str) -> WorkerInfo {
    WorkerInfo {
        id: id.into(),
        host: "host".into(),
        pid: 1,
        lease_ms: 60_000,
    }
}

async fn registered(j: &Arc<dyn Journal>, id: &str) -> WorkerInfo {
    let w = worker(id);
    j.register_worker(&w).await.unwrap();
    w
}

/// Append `events` to the lease's task at its head, fenced by the lease.
async fn fenced(
    j: &Arc<dyn Journal>,
    lease: &Lease,
    events: Vec<Event>,
) -> Result<i64, StoreError> {
    let stream = StreamId::from(lease.task_id.as_str());
    let head = j.head(&stream).await.unwrap();
    j.append_fenced(&stream, head, events.into_iter().map(at).collect(), lease)
        .await
        .map(|a| a.head_seq)
}

fn leased(lease: &Lease) -> Event {
    Event::TaskLeased {
        worker_id: lease.worker_id.clone(),
        generation: lease.generation,
    }
}

each_backend! {
async fn a_claimed_task_is_held_until_its_lease_expires_then_taken_over_and_the_old_holder_is_fenced(b: Backend) {
    let t = temp_journal(b).await;
    let j = &t.journal;
    seeded(j, "p-1", "t-1").await;
    let a = registered(j, "w-a").await;
    let bw = registered(j, "w-b").await;

    let first = j.claim_task(&a, &[], None).await.unwrap().expect("a free task is claimed");
    assert_eq!((first.task_id.as_str(), first.project_id.as_str(), first.generation), ("t-1", "p-1", 1));
    assert_eq!(j.claim_task(&bw, &[], None).await.unwrap(), None, "a held lease is not taken");
    assert_eq!(fenced(j, &first, vec![leased(&first), Event::StepStarted { step_id: "s".into() }]).await.unwrap(), 4);

    // The lease lapses (as if a's heartbeats stopped): b takes the task over.
    t.sql("UPDATE task_leases SET expires_at = 1").await.unwrap();
    let second = j.claim_task(&bw, &[], None).await.unwrap().expect("an expired lease is taken over");
    assert_eq!((second.worker_id.as_str(), second.generation), ("w-b", 2));
    fenced(j, &second, vec![leased(&second)]).await.unwrap();

    // a wakes up: its append is refused, in the append's own transaction, and writes nothing.
    let err = fenced(j, &first, vec![Event::StepInterrupted { step_id: "s".into() }]).await.unwrap_err();
    match &err {
        StoreError::LeaseLost { task, worker, generation, holder } => {
            assert_eq!((task.as_str(), worker.as_str(), *generation), ("t-1", "w-a", 1));
            assert_eq!(holder, &Some(("w-b".to_owned(), 2)));
        }
        other => panic!("expected LeaseLost, got {other}"),
    }
    assert!(err.to_string().contains("worker `w-b` holds generation 2"), "{err}");
    assert_eq!(j.head(&"t-1".into()).await.unwrap(), 5);
    // Its heartbeat says so too, and does not renew b's lease for a.
    assert_eq!(j.heartbeat(&a, std::slice::from_ref(&first)).await.unwrap(), vec!["t-1".to_owned()]);
    assert_eq!(j.heartbeat(&bw, std::slice::from_ref(&second)).await.unwrap(), Vec::<String>::new());

    // The journal says who wrote what: a's events under generation 1, b's under 2.
    let writers: Vec<(i64, Option<String>, Option<i64>)> = j
        .event_writers(&"t-1".into())
        .await
        .unwrap()
        .into_iter()
        .map(|w| (w.seq, w.worker_id, w.lease_generation))
        .collect();
    assert_eq!(writers, vec![
        (1, None, None),
        (2, None, None),
        (3, Some("w-a".into()), Some(1)),
        (4, Some("w-a".into()), Some(1)),
        (5, Some("w-b".into()), Some(2)),
    ]);
    let view = j.task("t-1").await.unwrap().unwrap();
    let lease = view.lease.expect("the task view shows its lease");
    assert_eq!((lease.lease.worker_id.as_str(), lease.lease.generation), ("w-b", 2));
    assert_eq!(j.verify().await.unwrap().broken, None);
}

async fn a_task_view_shows_its_worker_and_whether_the_lease_is_held_released_or_expired(b: Backend) {
    let t = temp_journal(b).await;
    let j = &t.journal;
    seeded(j, "p-1", "t-1").await;
    assert_eq!(j.task("t-1").await.unwrap().unwrap().lease, None, "never claimed: no worker");
    let a = WorkerInfo { host: "build-7".into(), pid: 4242, ..worker("w-a") };
    j.register_worker(&a).await.unwrap();
    let lease = j.claim_task(&a, &[], None).await.unwrap().unwrap();
    let seen = |l: gaffer_store::TaskLease| (l.lease.worker_id, l.lease.generation, l.host, l.pid, l.state);

    let held = j.task("t-1").await.unwrap().unwrap().lease.unwrap();
    assert_eq!(seen(held), ("w-a".into(), 1, Some("build-7".into()), Some(4242), LeaseState::Held));

    t.sql("UPDATE task_leases SET expires_at = 1").await.unwrap();
    let lapsed = j.task("t-1").await.unwrap().unwrap().lease.unwrap();
    assert_eq!(lapsed.state, LeaseState::Expired, "a worker that stopped renewing has lost it");

    t.sql("UPDATE task_leases SET expires_at = 4102444800000").await.unwrap();
    j.release_lease(&lease, LeaseEnd::Finished).await.unwrap();
    let released = j.task("t-1").await.unwrap().unwrap().lease.unwrap();
    assert_eq!(seen(released), ("w-a".into(), 1, Some("build-7".into()), Some(4242), LeaseState::Released));
}

async fn an_append_without_any_lease_row_is_refused_when_fenced(b: Backend) {
    let t = temp_journal(b).await;
    let j = &t.journal;
    seeded(j, "p-1", "t-1").await;
    let made_up = Lease { task_id: "t-1".into(), project_id: "p-1".into(), worker_id: "w-x".into(), generation: 1 };
    let err = fenced(j, &made_up, vec![Event::StepStarted { step_id: "s".into() }]).await.unwrap_err();
    assert!(matches!(err, StoreError::LeaseLost { holder: None, .. }), "{err}");
    assert_eq!(j.head(&"t-1".into()).await.unwrap(), 2);
}

async fn claims_skip_finished_tasks_and_busy_projects_and_take_the_oldest_first(b: Backend) {
    let t = temp_journal(b).await;
    let j = &t.journal;
    for p in ["p-1", "p-2"] {
        j.append(&StreamId::from(p), 0, vec![at(project(p))]).await.unwrap();
    }
    for (i, (id, p)) in [("t-done", "p-1"), ("t-a", "p-1"), ("t-b", "p-2")].into_iter().enumerate() {
        let mut ev = at(task(id, p));
        ev.at += i as i64;
        j.append(&StreamId::from(id), 0, vec![ev]).await.unwrap();
    }
    j.append(&"t-done".into(), 1, vec![at(Event::TaskFailed { reason: "x".into() })]).await.unwrap();
    let w = registered(j, "w-a").await;
    let got = j.claim_task(&w, &["p-1".into()], None).await.unwrap().unwrap();
    assert_eq!(got.task_id, "t-b", "p-1 is busy: its task is skipped");
    assert_eq!(j.claim_task(&w, &[], Some("t-done")).await.unwrap(), None, "a finished task is never claimed");
    let got = j.claim_task(&w, &[], Some("t-a")).await.unwrap().unwrap();
    assert_eq!(got.task_id, "t-a");
    assert_eq!(j.claim_task(&w, &[], None).await.unwrap(), None);

    // Releasing hands the task to the next claimer at once, with a new generation.
    j.release_lease(&got, LeaseEnd::Handed).await.unwrap();
    let other = registered(j, "w-b").await;
    assert_eq!(j.claim_task(&other, &["t-a".into()], None).await.unwrap(), None, "a skipped task id is not claimed");
    let again = j.claim_task(&other, &[], None).await.unwrap().unwrap();
    assert_eq!((again.task_id.as_str(), again.generation), ("t-a", 2));
}

async fn a_waiting_task_is_never_claimed_until_its_last_dependency_is_done(b: Backend) {
    let t = temp_journal(b).await;
    let j = &t.journal;
    seeded(j, "p-1", "t-a").await;
    let mut waiting = task("t-b", "p-1");
    if let Event::TaskCreated { options, .. } = &mut waiting {
        options.after = vec!["t-a".into()];
    }
    // Older than t-a, so the claim would take it first if it could.
    let mut ev = at(waiting);
    ev.at -= 1_000;
    j.append(&"t-b".into(), 0, vec![ev]).await.unwrap();
    let w = registered(j, "w-a").await;
    assert_eq!(j.claim_task(&w, &[], Some("t-b")).await.unwrap(), None, "a waiting task is not claimed by id");
    let got = j.claim_task(&w, &[], None).await.unwrap().unwrap();
    assert_eq!(got.task_id, "t-a", "the waiting task is passed over");
    assert_eq!(j.claim_task(&w, &[], None).await.unwrap(), None);
    j.append(&"t-b".into(), 1, vec![at(Event::TaskDependencyDone { dependency: "t-a".into() })]).await.unwrap();
    let got = j.claim_task(&w, &[], None).await.unwrap().unwrap();
    assert_eq!(got.task_id, "t-b", "queued once its dependency is done");
}

/// A holder appending at full speed while another process takes its task over:
/// every append of the old holder commits before the takeover or is refused, so
/// once the new holder has its lease the head moves only for it.
async fn an_append_racing_a_takeover_commits_before_it_or_not_at_all(b: Backend) {
    let t = temp_journal(b).await;
    seeded(&t.journal, "p-1", "t-1").await;
    let stream = StreamId::from("t-1");
    let handles = [t.reopen().await, t.reopen().await];
    let workers = [registered(&handles[0], "w-0").await, registered(&handles[1], "w-1").await];
    let mut holder = handles[0].claim_task(&workers[0], &[], None).await.unwrap().unwrap();
    let head = t.journal.head(&stream).await.unwrap();
    fenced(&handles[0], &holder, vec![Event::StepStarted { step_id: "s".into() }]).await.unwrap();
    assert_eq!(t.journal.head(&stream).await.unwrap(), head + 1);
    let mut who = 0;
    for round in 0..40u64 {
        let (h, lease, task) = (handles[who].clone(), holder.clone(), stream.clone());
        let appender = tokio::spawn(async move {
            let mut written = 0;
            loop {
                let head = h.head(&task).await.unwrap();
                let activity = Event::AgentActivity { step_id: "s".into(), activity: serde_json::json!({"n": written}) };
                match h.append_fenced(&task, head, vec![at(activity)], &lease).await {
                    Ok(_) => written += 1,
                    Err(StoreError::Conflict { .. }) => {}
                    Err(StoreError::LeaseLost { .. }) => return written,
                    Err(e) => panic!("append: {e}"),
                }
            }
        });
        tokio::time::sleep(std::time::Duration::from_millis(1 + round % 7)).await;
        let next = 1 - who;
        t.sql("UPDATE task_leases SET expires_at = 1").await.unwrap();
        // A claim skips a task whose row an append has locked this instant: retry.
        let mut taken = None;
        for _ in 0..5000 {
            taken = handles[next].claim_task(&workers[next], &[], None).await.unwrap();
            if taken.is_some() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        let taken = taken.expect("an expired lease is taken over");
        let at_takeover = handles[next].head(&stream).await.unwrap();
        appender.await.unwrap();
        assert_eq!(
            handles[next].head(&stream).await.unwrap(),
            at_takeover,
            "round {round}: generation {} wrote after generation {} took the task",
            holder.generation,
            taken.generation
        );
        (holder, who) = (taken, next);
    }
}

async fn concurrent_claimers_in_separate_processes_never_get_the_same_task(b: Backend) {
    let t = temp_journal(b).await;
    let j = &t.journal;
    j.append(&"p-1".into(), 0, vec![at(project("p-1"))]).await.unwrap();
    for i in 0..24 {
        let id = format!("t-{i:02}");
        j.append(&StreamId::from(id.as_str()), 0, vec![at(task(&id, "p-1"))]).await.unwrap();
    }
    let mut handles = Vec::new();
    for n in 0..4 {
        let handle = t.reopen().await;
        let w = registered(&handle, &format!("w-{n}")).await;
        handles.push(tokio::spawn(async move {
            let mut got = Vec::new();
            while let Some(lease) = handle.claim_task(&w, &[], None).await.unwrap() {
                got.push(lease.task_id);
            }
            got
        }));
    }
    let mut all = Vec::new();
    for h in handles {
        all.extend(h.await.unwrap());
    }
    all.sort();
    let expected: Vec<String> = (0..24).map(|i| format!("t-{i:02}")).collect();
    assert_eq!(all, expected, "every task claimed exactly once");
}

async fn workers_are_listed_with_their_leases_heartbeats_and_counts(b: Backend) {
    let t = temp_journal(b).await;
    let j = &t.journal;
    seeded(j, "p-1", "t-1").await;
    j.append(&"t-2".into(), 0, vec![at(task("t-2", "p-1"))]).await.unwrap();
    let a = registered(j, "w-a").await;
    let bw = registered(j, "w-b").await;
    let one = j.claim_task(&a, &[], None).await.unwrap().unwrap();
    let two = j.claim_task(&a, &[], None).await.unwrap().unwrap();
    j.release_lease(&one, LeaseEnd::Finished).await.unwrap();
    j.release_lease(&two, LeaseEnd::Failed).await.unwrap();
    let three = j.claim_task(&bw, &[], None).await.unwrap().unwrap();
    let before = j.workers().await.unwrap();
    t.sql("UPDATE workers SET heartbeat_at = 0").await.unwrap();
    j.heartbeat(&bw, std::slice::from_ref(&three)).await.unwrap();

    let ws = j.workers().await.unwrap();
    assert_eq!(ws.iter().map(|w| w.id.as_str()).collect::<Vec<_>>(), ["w-a", "w-b"]);
    let (wa, wb) = (&ws[0], &ws[1]);
    assert_eq!((wa.tasks_run, wa.failures, wa.leases.len()), (2, 1, 0));
    assert!(!wa.alive, "no heartbeat within its lease length: not live");
    assert!(wb.alive);
    assert!(wb.heartbeat_at >= before[1].heartbeat_at, "the heartbeat is recorded");
    assert_eq!(wb.leases.iter().map(|l| (l.task_id.as_str(), l.generation)).collect::<Vec<_>>(), [(three.task_id.as_str(), 2)]);

    j.stop_worker("w-b").await.unwrap();
    let ws = j.workers().await.unwrap();
    assert!(!ws[1].alive && ws[1].stopped_at.is_some() && ws[1].leases.is_empty());
    assert!(j.claim_task(&a, &[], None).await.unwrap().is_some(), "a stopped worker's task is free at once");
}
}

/// A worker hung inside an append (stopped, its connection still open) holds its
/// task's row lock, and a takeover skips a locked task. The server ends such an
/// idle transaction (`idle_in_transaction_session_timeout`, 60 s unless the URL
/// says otherwise; 1 s here), so the task is taken over after all.
#[tokio::test]
async fn a_worker_hung_inside_a_transaction_does_not_keep_its_task_from_a_takeover() {
    if !Backend::Postgres.available() {
        return;
    }
    let t = temp_journal(Backend::Postgres).await;
    seeded(&t.journal, "p-1", "t-1").await;
    let plain = gaffer_store::PgJournal::open(&t.url(), gaffer_store::Durability::Normal)
        .await
        .unwrap();
    let shown: String = sqlx::query_scalar("SHOW idle_in_transaction_session_timeout")
        .fetch_one(plain.pool())
        .await
        .unwrap();
    assert_eq!(shown, "1min", "the default for the journal's sessions");

    let url = format!(
        "{}?options=-c%20idle_in_transaction_session_timeout%3D1s",
        t.url()
    );
    let hung = gaffer_store::PgJournal::open(&url, gaffer_store::Durability::Normal)
        .await
        .unwrap();
    let mut tx = hung.pool().begin().await.unwrap();
    sqlx::query("UPDATE tasks SET stage = stage WHERE id = 't-1'")
        .execute(&mut *tx)
        .await
        .unwrap();
    let w = registered(&t.journal, "w-b").await;
    assert_eq!(
        t.journal.claim_task(&w, &[], None).await.unwrap(),
        None,
        "the hung transaction's lock is skipped"
    );
    let started = std::time::Instant::now();
    let lease = loop {
        if let Some(lease) = t.journal.claim_task(&w, &[], None).await.unwrap() {
            break lease;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "the hung transaction was never ended"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert_eq!(lease.task_id, "t-1");
    assert!(
        tx.commit().await.is_err(),
        "the server ended the hung transaction"
    );
}

/// `gaffer run` and `gaffer task resume` claim one named task. An append to it in
/// flight (a person's decision, say) holds the task's row until it commits, as
/// every append does; the claim of that one task waits for it. Skipping the task
/// there, as a claim of any task does, returned "not claimable": the resume then
/// followed a task no worker ran (seen after a crash, when a person approved what
/// the crashed run had asked as the resume began).
#[tokio::test]
async fn a_claim_of_one_task_waits_for_an_append_in_flight_instead_of_skipping_it() {
    if !Backend::Postgres.available() {
        return;
    }
    let t = temp_journal(Backend::Postgres).await;
    seeded(&t.journal, "p-1", "t-1").await;
    let other = gaffer_store::PgJournal::open(&t.url(), gaffer_store::Durability::Normal)
        .await
        .unwrap();
    // What an append does first: write the task's projection row.
    let mut append = other.pool().begin().await.unwrap();
    sqlx::query("UPDATE tasks SET updated_at = updated_at WHERE id = 't-1'")
        .execute(&mut *append)
        .await
        .unwrap();
    let w = registered(&t.journal, "w-b").await;
    assert_eq!(
        t.journal.claim_task(&w, &[], None).await.unwrap(),
        None,
        "a claim of any task skips the locked one: another task will do"
    );
    let claim = tokio::spawn({
        let (j, w) = (t.journal.clone(), w.clone());
        async move { j.claim_task(&w, &[], Some("t-1")).await }
    });
    // Commit once the claim waits for the row (or has given up on it already).
    while !claim.is_finished() {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM pg_stat_activity
             WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .fetch_one(other.pool())
        .await
        .unwrap();
        if waiting > 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    append.commit().await.unwrap();
    let lease = claim
        .await
        .unwrap()
        .unwrap()
        .expect("the task is claimed once the append committed");
    assert_eq!((lease.task_id.as_str(), lease.generation), ("t-1", 1));
}
