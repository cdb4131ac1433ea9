use super::support::*;
use gaffer_store::{Durability, Journal, PgJournal, SqliteJournal, StoreError};

/// Open what `target` holds, as the CLI will.
async fn try_open(target: &Target) -> Result<std::sync::Arc<dyn Journal>, StoreError> {
    let url = match target {
        Target::Sqlite(dir) => dir.path().join("journal.db").display().to_string(),
        Target::Postgres(url) => url.clone(),
    };
    gaffer_store::open(&url, Durability::Full).await
}

each_backend! {
    async fn a_database_from_a_newer_schema_is_refused_untouched(b: Backend) {
        let t = temp_journal(b).await;
        seeded(&t.journal, "p-1", "t-1").await;
        t.journal.shutdown().await;
        let checksum = match b {
            Backend::Sqlite => "X'00'",
            Backend::Postgres => "'\\x00'::bytea",
        };
        t.sql(&format!(
            "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time)
             VALUES (9999, 'from the future', TRUE, {checksum}, 1)"
        ))
        .await
        .unwrap();
        let before = t.fingerprint().await;
        let err = try_open(&t.target).await.err().unwrap();
        let supported = match b {
            Backend::Sqlite => SqliteJournal::supported_schema_version(),
            Backend::Postgres => PgJournal::supported_schema_version(),
        };
        match &err {
            StoreError::NewerSchema {
                found, supported: s, ..
            } => {
                assert_eq!(*found, 9999);
                assert_eq!(*s, supported);
            }
            other => panic!("expected NewerSchema, got {other}"),
        }
        assert!(err.to_string().contains("upgrade gaffer"), "{err}");
        assert_eq!(t.fingerprint().await, before, "the refused database was changed");
    }

    async fn a_foreign_database_is_refused_untouched(b: Backend) {
        let target = empty_target(b).await;
        let t = match target {
            Target::Sqlite(dir) => {
                let url = format!("sqlite://{}?mode=rwc", dir.path().join("journal.db").display());
                use sqlx::Connection;
                let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
                sqlx::query("CREATE TABLE notes (body TEXT)").execute(&mut conn).await.unwrap();
                conn.close().await.unwrap();
                Target::Sqlite(dir)
            }
            Target::Postgres(url) => {
                use sqlx::Connection;
                let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
                sqlx::query("CREATE TABLE notes (body TEXT)").execute(&mut conn).await.unwrap();
                conn.close().await.unwrap();
                Target::Postgres(url)
            }
        };
        let before = fingerprint(&t).await;
        let err = try_open(&t).await.err().unwrap();
        assert!(matches!(err, StoreError::Foreign { .. }), "{err}");
        assert_eq!(fingerprint(&t).await, before);
    }

    async fn reopening_keeps_everything(b: Backend) {
        let t = temp_journal(b).await;
        seeded(&t.journal, "p-1", "t-1").await;
        t.journal.shutdown().await;
        let j = t.reopen().await;
        assert_eq!(j.head(&"t-1".into()).await.unwrap(), 2);
        assert_eq!(j.verify().await.unwrap().broken, None);
    }
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
async fn an_unreachable_postgres_is_a_clear_error_with_the_password_masked() {
    // A port nothing listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgres://gaffer:s3cret-pw@127.0.0.1:{port}/journal");
    let started = std::time::Instant::now();
    let err = gaffer_store::open(&url, Durability::Full)
        .await
        .err()
        .unwrap();
    let message = err.to_string();
    assert!(matches!(err, StoreError::Open { .. }), "{message}");
    assert!(!message.contains("s3cret-pw"), "{message}");
    assert!(
        message.contains(&format!("postgres://gaffer:***@127.0.0.1:{port}/journal")),
        "{message}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(15));
}

#[test]
fn urls_are_masked_and_parsed() {
    use gaffer_store::{mask_url, Location};
    assert_eq!(
        mask_url("postgresql://u:p%40ss@db.example:5432/g?sslmode=require&password=x"),
        "postgresql://u:***@db.example:5432/g?sslmode=require&password=***"
    );
    assert_eq!(mask_url("postgres://u@h/db"), "postgres://u@h/db");
    assert_eq!(
        Location::parse("sqlite:///var/lib/gaffer/gaffer.db").unwrap(),
        Location::Sqlite("/var/lib/gaffer/gaffer.db".into())
    );
    assert_eq!(
        Location::parse("data/gaffer.db").unwrap(),
        Location::Sqlite("data/gaffer.db".into())
    );
    assert!(matches!(
        Location::parse("postgres://u:p@h/db").unwrap(),
        Location::Postgres(_)
    ));
    assert!(Location::parse("mysql://h/db")
        .unwrap_err()
        .contains("mysql://"));
}

#[tokio::test]
async fn processes_opening_a_new_database_at_once_all_succeed() {
    // Several handles stand for several gaffer processes started together on a
    // fresh data dir: each must open it, none may fail on the others' migration.
    for _ in 0..5 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.db");
        let opens = (0..6).map(|_| {
            let path = path.clone();
            tokio::spawn(async move { SqliteJournal::open(&path, Durability::Normal).await })
        });
        for open in opens.collect::<Vec<_>>() {
            let j = open
                .await
                .unwrap()
                .unwrap_or_else(|e| panic!("a concurrent open failed: {e}"));
            assert_eq!(j.head(&"t-none".into()).await.unwrap(), 0);
        }
    }
}
