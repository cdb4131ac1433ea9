//! Schedules added at run time: a name unique among the running ones, a removal
//! that keeps the row with who removed it, a reopen, and `gaffer db copy`.
use super::support::*;
use gaffer_core::Actor;
use gaffer_store::{copy_journal, StoreError, StoredSchedule};

fn schedule(name: &str, created_at: i64) -> StoredSchedule {
    StoredSchedule {
        id: 0,
        name: name.into(),
        cron: "0 3 * * *".into(),
        tz: "Europe/Berlin".into(),
        project: "demo".into(),
        request: "update the dependencies".into(),
        agent: Some("codex".into()),
        missed: "run_once".into(),
        created_at,
        created_by: Actor::user("ana", "api:ana"),
        removed_at: None,
        removed_by: None,
    }
}

each_backend! {
async fn a_running_name_is_unique_and_a_removed_one_keeps_its_row(b: Backend) {
    let t = temp_journal(b).await;
    let j = &t.journal;
    let first = j.schedule_add(&schedule("nightly", 1_000)).await.unwrap();
    assert_eq!(first, StoredSchedule { id: first.id, ..schedule("nightly", 1_000) });
    match j.schedule_add(&schedule("nightly", 2_000)).await {
        Err(StoreError::Constraint(m)) => assert!(m.contains("nightly"), "{m}"),
        other => panic!("a second running `nightly` was not refused: {other:?}"),
    }
    assert_eq!(j.schedules(true).await.unwrap(), vec![first.clone()]);

    let bob = Actor::user("bob", "cli");
    let removed = j.schedule_remove("nightly", &bob, 3_000).await.unwrap().unwrap();
    assert_eq!((removed.removed_at, removed.removed_by.clone()), (Some(3_000), Some(bob.clone())));
    assert_eq!(j.schedule_remove("nightly", &bob, 4_000).await.unwrap(), None);
    assert_eq!(j.schedules(false).await.unwrap(), vec![]);

    // The name is free again; the removed row stays, as it was removed.
    let again = j.schedule_add(&schedule("nightly", 5_000)).await.unwrap();
    assert!(again.id > first.id);
    let reopened = t.reopen().await;
    assert_eq!(reopened.schedules(false).await.unwrap(), vec![again.clone()]);
    assert_eq!(reopened.schedules(true).await.unwrap(), vec![removed.clone(), again.clone()]);

    // `gaffer db copy` carries both, removed one included.
    let target = temp_journal(b).await;
    let copied = copy_journal(&*reopened, &*target.journal).await.unwrap();
    assert_eq!(copied.schedules, 2);
    let strip = |v: Vec<StoredSchedule>| {
        v.into_iter().map(|s| StoredSchedule { id: 0, ..s }).collect::<Vec<_>>()
    };
    assert_eq!(
        strip(target.journal.schedules(true).await.unwrap()),
        strip(vec![removed, again])
    );
}
}
