//! Tasks created once per origin key (`TaskOptions::key`, migration 0009).
use super::support::*;
use gaffer_core::*;
use gaffer_store::StoreError;

fn keyed_task(id: &str, project: &str, key: &str) -> Event {
    let Event::TaskCreated {
        task_id,
        project_id,
        request,
        by,
        ..
    } = task(id, project)
    else {
        unreachable!()
    };
    Event::TaskCreated {
        task_id,
        project_id,
        request,
        by,
        options: TaskOptions {
            key: Some(key.into()),
            ..Default::default()
        },
    }
}

each_backend! {
async fn a_second_task_for_a_taken_key_is_refused_and_writes_nothing(b: Backend) {
    let t = temp_journal(b).await;
    let j = &t.journal;
    j.append(&"p-1".into(), 0, vec![at(project("p-1"))]).await.unwrap();
    j.append(&"t-1".into(), 0, vec![at(keyed_task("t-1", "p-1", "schedule:n:1"))])
        .await
        .unwrap();
    let events_before = j.events_after(0, 100).await.unwrap().len();
    let err = j
        .append(&"t-2".into(), 0, vec![at(keyed_task("t-2", "p-1", "schedule:n:1"))])
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Constraint(_)), "{err}");
    assert!(err.to_string().contains("schedule:n:1"), "{err}");
    assert_eq!(j.head(&"t-2".into()).await.unwrap(), 0);
    assert_eq!(j.events_after(0, 100).await.unwrap().len(), events_before);
    assert_eq!(j.task_by_key("schedule:n:1").await.unwrap().unwrap().id, "t-1");
    assert_eq!(j.task_by_key("schedule:n:2").await.unwrap(), None);

    // Another key, and any number of tasks without one, are fine.
    j.append(&"t-3".into(), 0, vec![at(keyed_task("t-3", "p-1", "schedule:n:2"))])
        .await
        .unwrap();
    j.append(&"t-4".into(), 0, vec![at(task("t-4", "p-1"))]).await.unwrap();
    j.append(&"t-5".into(), 0, vec![at(task("t-5", "p-1"))]).await.unwrap();
    assert_eq!(j.task_by_key("schedule:n:2").await.unwrap().unwrap().id, "t-3");
    assert_eq!(j.task("t-4").await.unwrap().unwrap().task.origin_key, None);
    // The newest of a prefix: by key, not by creation.
    j.append(&"t-6".into(), 0, vec![at(keyed_task("t-6", "p-1", "schedule:n:0"))])
        .await
        .unwrap();
    j.append(&"t-7".into(), 0, vec![at(keyed_task("t-7", "p-1", "schedule:nx:9"))])
        .await
        .unwrap();
    let newest = j.newest_task_with_key_prefix("schedule:n:").await.unwrap();
    assert_eq!(newest.map(|t| t.id).as_deref(), Some("t-3"));
    assert_eq!(j.newest_task_with_key_prefix("schedule:none:").await.unwrap(), None);

    // The key is derived from the events alone: a rebuild gives the same rows.
    let live = j.projections().await.unwrap();
    j.rebuild().await.unwrap();
    assert_eq!(j.projections().await.unwrap(), live);
    assert_eq!(j.verify().await.unwrap().broken, None);
}

async fn two_processes_creating_for_one_key_at_once_make_one_task(b: Backend) {
    let t = temp_journal(b).await;
    t.journal.append(&"p-1".into(), 0, vec![at(project("p-1"))]).await.unwrap();
    let other = t.reopen().await;
    for round in 0..10 {
        let key = format!("schedule:race:{round}");
        let (a_id, b_id) = (format!("t-a{round}"), format!("t-b{round}"));
        let (a_stream, b_stream) = (StreamId::from(a_id.as_str()), StreamId::from(b_id.as_str()));
        let a = t.journal.append(&a_stream, 0, vec![at(keyed_task(&a_id, "p-1", &key))]);
        let b = other.append(&b_stream, 0, vec![at(keyed_task(&b_id, "p-1", &key))]);
        let (a, b) = tokio::join!(a, b);
        assert_eq!(usize::from(a.is_ok()) + usize::from(b.is_ok()), 1, "round {round}: {a:?} / {b:?}");
        let (winner, loser) = if a.is_ok() { (a_id, b) } else { (b_id, a) };
        assert!(matches!(loser, Err(StoreError::Constraint(_))), "{loser:?}");
        assert_eq!(t.journal.task_by_key(&key).await.unwrap().unwrap().id, winner);
    }
    let tasks = t.journal.projections().await.unwrap().tasks;
    assert_eq!(tasks.len(), 10);
    assert_eq!(t.journal.verify().await.unwrap().broken, None);
}
}
