use super::support::*;
use gaffer_store::{Durability, SqliteJournal, StoreError};
use sqlx::{Connection, SqliteConnection};

#[tokio::test]
async fn a_database_from_a_newer_schema_is_refused_untouched() {
    let t = temp_journal().await;
    seeded(&t.journal, "p-1", "t-1").await;
    let TempJournal { dir, journal } = t;
    let path = dir.path().join("journal.db");
    journal.close().await;
    {
        let url = format!("sqlite://{}", path.display());
        let mut conn = SqliteConnection::connect(&url).await.unwrap();
        sqlx::query(
            "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time)
             VALUES (9999, 'from the future', TRUE, X'00', 1)",
        )
        .execute(&mut conn)
        .await
        .unwrap();
        conn.close().await.unwrap();
    }
    let before = std::fs::read(&path).unwrap();
    let err = SqliteJournal::open(&path, Durability::Full)
        .await
        .err()
        .unwrap();
    match &err {
        StoreError::NewerSchema {
            found, supported, ..
        } => {
            assert_eq!(*found, 9999);
            assert_eq!(*supported, SqliteJournal::supported_schema_version());
        }
        other => panic!("expected NewerSchema, got {other}"),
    }
    assert!(err.to_string().contains("upgrade gaffer"), "{err}");
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "the refused database was changed"
    );
}

#[tokio::test]
async fn a_foreign_database_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other.db");
    {
        let url = format!("sqlite://{}?mode=rwc", path.display());
        let mut conn = SqliteConnection::connect(&url).await.unwrap();
        sqlx::query("CREATE TABLE notes (body TEXT)")
            .execute(&mut conn)
            .await
            .unwrap();
        conn.close().await.unwrap();
    }
    let before = std::fs::read(&path).unwrap();
    let err = SqliteJournal::open(&path, Durability::Full)
        .await
        .err()
        .unwrap();
    assert!(matches!(err, StoreError::Foreign { .. }), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

#[tokio::test]
async fn a_file_that_is_not_a_database_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.db");
    std::fs::write(
        &path,
        b"this is a text file, not sqlite, and long enough to have a header",
    )
    .unwrap();
    let err = SqliteJournal::open(&path, Durability::Full)
        .await
        .err()
        .unwrap();
    assert!(matches!(err, StoreError::Open { .. }), "{err}");
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "{err}"
    );
}

#[tokio::test]
async fn reopening_keeps_everything() {
    let t = temp_journal().await;
    seeded(&t.journal, "p-1", "t-1").await;
    let TempJournal { dir, journal } = t;
    journal.close().await;
    let j = open(&dir.path().join("journal.db")).await;
    use gaffer_store::Journal;
    assert_eq!(j.head(&"t-1".into()).await.unwrap(), 2);
    assert_eq!(j.verify().await.unwrap().broken, None);
}
