//! `backup_sqlite` while another handle appends: each backup restores to a journal
//! that verifies and is the source as of one commit (the same events and hashes
//! as a prefix of the source's global order, so the same heads); restore refuses
//! a journal that holds events and a backup that does not verify.
use super::support::*;
use gaffer_core::*;
use gaffer_store::{backup_sqlite, restore_sqlite, Durability, Journal, StoreError};
use pretty_assertions::assert_eq;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// (stream, seq, hash) of every event, in global order.
async fn chain(j: &dyn Journal) -> Vec<(String, i64, String)> {
    j.events_after(0, i64::MAX)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.stream_id, e.seq, e.hash))
        .collect()
}

/// Every stream's head (seq, hash), by stream.
fn heads(chain: &[(String, i64, String)]) -> std::collections::BTreeMap<String, (i64, String)> {
    chain
        .iter()
        .map(|(s, seq, h)| (s.clone(), (*seq, h.clone())))
        .collect()
}

/// Appends tasks (created, then a step started) to `j` until `stop`.
async fn keep_appending(j: Arc<dyn Journal>, stop: Arc<AtomicBool>) -> usize {
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        let t = StreamId::from(format!("t-load-{n}").as_str());
        j.append(
            &t,
            0,
            vec![
                at(task(t.as_str(), "p-1")),
                at(step("s", Intent::Idempotent)),
            ],
        )
        .await
        .unwrap();
        j.append(
            &t,
            2,
            vec![at(Event::StepStarted {
                step_id: "s".into(),
            })],
        )
        .await
        .unwrap();
        n += 1;
    }
    n
}

#[tokio::test]
async fn backups_taken_during_appends_restore_to_one_commit_of_the_journal() {
    let src = temp_journal(Backend::Sqlite).await;
    seeded(&src.journal, "p-1", "t-1").await;
    started_with_approval(&src.journal, "t-1").await;
    // Another process's handle does the appending.
    let writer = src.reopen().await;
    let stop = Arc::new(AtomicBool::new(false));
    let load = tokio::spawn(keep_appending(writer, stop.clone()));
    let dir = tempfile::tempdir().unwrap();
    let mut backups = Vec::new();
    for i in 0..3 {
        // Let the load get ahead before each backup.
        let before = src.journal.events_after(0, i64::MAX).await.unwrap().len();
        while src.journal.events_after(0, i64::MAX).await.unwrap().len() < before + 20 {
            tokio::task::yield_now().await;
        }
        let path = dir.path().join(format!("backup-{i}.db"));
        let b = backup_sqlite(&src.path(), &path).await.unwrap();
        assert_eq!(
            b.schema_version,
            gaffer_store::SqliteJournal::supported_schema_version()
        );
        assert!(b.bytes > 0);
        backups.push(b);
    }
    // The load goes on past the last backup, so none of them is simply the end state.
    let last = backups.last().unwrap().events as usize;
    while src.journal.events_after(0, i64::MAX).await.unwrap().len() <= last {
        tokio::task::yield_now().await;
    }
    stop.store(true, Ordering::Relaxed);
    let appended = load.await.unwrap();
    assert!(appended > 0);
    let source = chain(&*src.journal).await;
    for b in &backups {
        let target = dir
            .path()
            .join(format!("{}.restored", b.path.rsplit('/').next().unwrap()));
        let restored = restore_sqlite(b.path.as_ref(), &target, Durability::Full)
            .await
            .unwrap();
        assert_eq!(restored.events as i64, b.events);
        assert_eq!(restored.streams as i64, b.streams);
        let j = gaffer_store::open(&target.display().to_string(), Durability::Full)
            .await
            .unwrap();
        assert_eq!(j.verify().await.unwrap().broken, None);
        let got = chain(&*j).await;
        assert_eq!(got.len() as i64, b.events);
        assert!(got.len() < source.len(), "the backup is not the end state");
        // One commit of the source: exactly its first events, with their hashes.
        assert_eq!(got, source[..got.len()]);
        assert_eq!(heads(&got), heads(&source[..got.len()]));
        j.shutdown().await;
    }
}

#[tokio::test]
async fn restore_refuses_a_journal_with_events_and_leaves_both_files_alone() {
    let src = temp_journal(Backend::Sqlite).await;
    seeded(&src.journal, "p-1", "t-1").await;
    let dir = tempfile::tempdir().unwrap();
    let backup = dir.path().join("b.db");
    backup_sqlite(&src.path(), &backup).await.unwrap();
    // Backing up onto an existing file is refused too.
    let again = backup_sqlite(&src.path(), &backup).await.unwrap_err();
    assert!(again.to_string().contains("already exists"), "{again}");

    let other = temp_journal(Backend::Sqlite).await;
    seeded(&other.journal, "p-9", "t-9").await;
    other.journal.shutdown().await;
    let before = std::fs::read(other.path()).unwrap();
    let backup_bytes = std::fs::read(&backup).unwrap();
    let err = restore_sqlite(&backup, &other.path(), Durability::Full)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Backup(_)), "{err}");
    assert!(err.to_string().contains("already holds 3 events"), "{err}");
    assert_eq!(std::fs::read(other.path()).unwrap(), before);
    assert_eq!(std::fs::read(&backup).unwrap(), backup_bytes);

    // An existing journal without events is replaced.
    let empty = temp_journal(Backend::Sqlite).await;
    empty.journal.shutdown().await;
    let r = restore_sqlite(&backup, &empty.path(), Durability::Full)
        .await
        .unwrap();
    assert_eq!((r.streams, r.events), (2, 3));
    assert_eq!(
        std::fs::read(&backup).unwrap(),
        backup_bytes,
        "the backup changed"
    );
}

#[tokio::test]
async fn restore_refuses_a_backup_that_does_not_verify() {
    let mut src = temp_journal(Backend::Sqlite).await;
    seeded(&src.journal, "p-1", "t-1").await;
    src.tamper("t-1").await;
    let dir = tempfile::tempdir().unwrap();
    let backup = dir.path().join("b.db");
    backup_sqlite(&src.path(), &backup).await.unwrap();
    let target = dir.path().join("restored.db");
    let err = restore_sqlite(&backup, &target, Durability::Full)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("does not verify"), "{err}");
    assert!(err.to_string().contains("t-1"), "{err}");
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(left, ["b.db"], "a refused restore leaves nothing behind");
}
