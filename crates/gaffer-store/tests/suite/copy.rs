//! `copy_journal`: every event, in order, with the very same hashes, into an
//! empty target of either backend; a non-empty target or a broken source is refused.
use super::support::*;
use gaffer_core::*;
use gaffer_store::{copy_journal, Durability, StoreError};

/// A SQLite source with two projects, tasks, steps, an approval.
async fn source() -> TempJournal {
    let s = temp_journal(Backend::Sqlite).await;
    seeded(&s.journal, "p-1", "t-1").await;
    seeded(&s.journal, "p-2", "t-2").await;
    started_with_approval(&s.journal, "t-1").await;
    s.journal
        .append(
            &"t-2".into(),
            2,
            vec![at(Event::TaskStageEntered {
                stage: Stage::Planning,
            })],
        )
        .await
        .unwrap();
    s
}

each_backend! {
    async fn copy_moves_every_event_with_its_hash_and_refuses_a_non_empty_target(b: Backend) {
        let src = source().await;
        let dst = temp_journal(b).await;
        let thread = gaffer_store::DiscordMessage {
            kind: "thread".into(),
            gaffer_id: "t-1".into(),
            channel_id: "100".into(),
            message_id: "100".into(),
            rendered: String::new(),
        };
        let approval = gaffer_store::DiscordMessage {
            kind: "approval".into(),
            gaffer_id: "ap-1".into(),
            channel_id: "100".into(),
            message_id: "1234".into(),
            rendered: "digest".into(),
        };
        for m in [&thread, &approval] {
            src.journal.discord_message_put(m).await.unwrap();
        }
        let copied = copy_journal(&*src.journal, &*dst.journal).await.unwrap();
        assert_eq!(
            (copied.streams, copied.events, copied.discord_messages),
            (4, 9, 2)
        );
        assert_eq!(
            dst.journal.discord_messages().await.unwrap(),
            [approval.clone(), thread.clone()]
        );
        assert_eq!(
            dst.journal.discord_message("approval", "ap-1").await.unwrap(),
            Some(approval)
        );
        let strip = |events: Vec<gaffer_store::RecordedEvent>| {
            events
                .into_iter()
                .map(|e| (e.stream_id, e.seq, e.at, e.event, e.hash))
                .collect::<Vec<_>>()
        };
        let from = strip(src.journal.events_after(0, 100).await.unwrap());
        assert_eq!(strip(dst.journal.events_after(0, 100).await.unwrap()), from);
        assert_eq!(
            dst.journal.projections().await.unwrap(),
            src.journal.projections().await.unwrap()
        );
        assert_eq!(dst.journal.verify().await.unwrap().broken, None);
        // A second copy into the now non-empty target is refused and changes nothing.
        let err = copy_journal(&*src.journal, &*dst.journal).await.unwrap_err();
        assert!(matches!(err, StoreError::Copy(_)), "{err}");
        assert!(err.to_string().contains("already holds events"), "{err}");
        assert_eq!(strip(dst.journal.events_after(0, 100).await.unwrap()), from);
    }

    async fn copy_refuses_a_source_that_does_not_verify(b: Backend) {
        let mut src = source().await;
        src.tamper("t-2").await;
        let dst = temp_journal(b).await;
        let err = copy_journal(&*src.journal, &*dst.journal).await.unwrap_err();
        assert!(err.to_string().contains("does not verify"), "{err}");
        assert!(dst.journal.events_after(0, 1).await.unwrap().is_empty());
    }
}

#[tokio::test]
async fn copy_from_a_sqlite_url_to_the_url_of_either_backend() {
    let src = source().await;
    for b in [Backend::Sqlite, Backend::Postgres] {
        if !b.available() {
            continue;
        }
        let target = temp_journal(b).await;
        let from = gaffer_store::open(
            &format!("sqlite://{}", src.path().display()),
            Durability::Full,
        )
        .await
        .unwrap();
        let to = gaffer_store::open(&target.url(), Durability::Full)
            .await
            .unwrap();
        assert_eq!(copy_journal(&*from, &*to).await.unwrap().events, 9);
    }
}
