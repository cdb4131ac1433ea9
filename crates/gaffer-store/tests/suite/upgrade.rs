//! Upgrades: a journal written at the previous schema (a committed fixture) is
//! opened by this build, which applies every later migration to it, and it
//! verifies with its events, heads and operational rows intact.
//!
//! The fixture is `tests/fixtures/journal-schema-vN.db`, N = the schema before the
//! newest. When a migration is added, keep the old fixture (its test then checks
//! the new migration too) and add one for the new previous schema:
//! `GAFFER_WRITE_FIXTURE=1 cargo test -p gaffer-store -- --ignored write_the_previous_schema_fixture`.
use super::support::*;
use gaffer_core::*;
use gaffer_store::{Durability, SqliteJournal, WorkerInfo};
use pretty_assertions::assert_eq;
use sqlx::Connection;
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Every committed fixture with the schema version its name says.
fn fixture_files() -> Vec<(i64, PathBuf)> {
    let mut found: Vec<(i64, PathBuf)> = std::fs::read_dir(fixtures())
        .unwrap()
        .filter_map(|e| {
            let path = e.unwrap().path();
            let name = path.file_name()?.to_str()?.to_owned();
            let v = name.strip_prefix("journal-schema-v")?.strip_suffix(".db")?;
            Some((v.parse().ok()?, path))
        })
        .collect();
    found.sort();
    found
}

async fn rows<T>(path: &Path, sql: &str) -> Vec<T>
where
    T: Send + Unpin + for<'r> sqlx::FromRow<'r, sqlx::sqlite::SqliteRow>,
{
    let url = format!("sqlite://{}?mode=ro", path.display());
    let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
    let got = sqlx::query_as(sql).fetch_all(&mut conn).await.unwrap();
    conn.close().await.unwrap();
    got
}

#[tokio::test]
async fn every_old_schema_fixture_is_migrated_and_verifies() {
    let supported = SqliteJournal::supported_schema_version();
    let all = fixture_files();
    assert!(
        all.iter().any(|(v, _)| *v == supported - 1),
        "no fixture of the previous schema v{} in {}: write one (see this file's doc)",
        supported - 1,
        fixtures().display()
    );
    for (version, fixture) in all {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.db");
        std::fs::copy(&fixture, &path).unwrap();
        let found = gaffer_store::schema_found(&path.display().to_string())
            .await
            .unwrap();
        assert_eq!(
            (found.found, found.pending()),
            (Some(version), supported - version)
        );
        let chain: Vec<(String, i64, String, Option<String>)> = rows(
            &path,
            "SELECT stream_id, seq, hash, worker_id FROM events ORDER BY pos",
        )
        .await;
        let leases: Vec<(String, String, i64)> = rows(
            &path,
            "SELECT task_id, worker_id, generation FROM task_leases ORDER BY task_id",
        )
        .await;
        assert!(
            chain.len() > 10 && !leases.is_empty(),
            "the fixture holds real data"
        );

        let j = gaffer_store::open(&path.display().to_string(), Durability::Full)
            .await
            .unwrap_or_else(|e| panic!("v{version} fixture does not open: {e}"));
        assert_eq!(j.verify().await.unwrap().broken, None, "v{version} fixture");
        j.shutdown().await;
        let applied: Vec<(i64,)> = rows(
            &path,
            "SELECT version FROM _sqlx_migrations WHERE success ORDER BY version",
        )
        .await;
        assert_eq!(
            applied.into_iter().map(|(v,)| v).collect::<Vec<_>>(),
            (1..=supported).collect::<Vec<_>>(),
            "every later migration applied to the v{version} fixture"
        );
        assert_eq!(
            rows::<(String, i64, String, Option<String>)>(
                &path,
                "SELECT stream_id, seq, hash, worker_id FROM events ORDER BY pos"
            )
            .await,
            chain
        );
        assert_eq!(
            rows::<(String, String, i64)>(
                &path,
                "SELECT task_id, worker_id, generation FROM task_leases ORDER BY task_id"
            )
            .await,
            leases
        );
        // It is a working journal again: the next append chains onto the old head.
        let j = gaffer_store::open(&path.display().to_string(), Durability::Full)
            .await
            .unwrap();
        let head = j.head(&"t-1".into()).await.unwrap();
        j.append(
            &"t-1".into(),
            head,
            vec![at(Event::TaskStageEntered {
                stage: Stage::Planning,
            })],
        )
        .await
        .unwrap();
        assert_eq!(j.verify().await.unwrap().broken, None);
        j.shutdown().await;
    }
}

/// Writes `tests/fixtures/journal-schema-v{supported - 1}.db`: a journal with
/// projects, tasks, steps, approvals, sessions, a worker's fenced appends, a
/// Discord message, a rate counter and a cached blob, written by this build and
/// then carried into a database made by the migrations before the newest one.
#[tokio::test]
#[ignore = "writes the committed fixture: run by hand when a migration is added"]
async fn write_the_previous_schema_fixture() {
    if std::env::var_os("GAFFER_WRITE_FIXTURE").is_none() {
        return;
    }
    let version = SqliteJournal::supported_schema_version() - 1;
    let src = temp_journal(Backend::Sqlite).await;
    let j = &src.journal;
    seeded(j, "p-1", "t-1").await;
    let head = started_with_approval(j, "t-1").await;
    j.append(
        &"t-1".into(),
        head,
        vec![
            at(Event::ApprovalDecided {
                approval_id: "ap-1".into(),
                decision: Decision::Approve,
                by: Actor::user("ana", "web"),
                note: Some("fine".into()),
                // The previous schema has no column for these: its release never wrote them.
                for_task: false,
                grant: None,
            }),
            at(Event::SessionStarted {
                session_id: "se-1".into(),
                agent: "claude".into(),
                role: Role::Owner,
                workspace_key: "/work/t-1".into(),
                agent_session_id: None,
                step_id: Some("s".into()),
            }),
            at(Event::StepCompleted {
                step_id: "s".into(),
                receipt: serde_json::json!({"commit": "abc123"}),
            }),
        ],
    )
    .await
    .unwrap();
    j.append(&"t-2".into(), 0, vec![at(task("t-2", "p-1"))])
        .await
        .unwrap();
    let worker = WorkerInfo {
        id: "host-a/4242/x1".into(),
        host: "host-a".into(),
        pid: 4242,
        lease_ms: 30_000,
    };
    j.register_worker(&worker).await.unwrap();
    let lease = j
        .claim_task(&worker, &[], Some("t-2"))
        .await
        .unwrap()
        .unwrap();
    j.append_fenced(
        &"t-2".into(),
        1,
        vec![
            at(Event::TaskLeased {
                worker_id: lease.worker_id.clone(),
                generation: lease.generation,
            }),
            at(step("plan", Intent::ReadOnly)),
            at(Event::StepStarted {
                step_id: "plan".into(),
            }),
        ],
        &lease,
    )
    .await
    .unwrap();
    seeded(j, "p-2", "t-3").await;
    j.discord_message_put(&gaffer_store::DiscordMessage {
        kind: "thread".into(),
        gaffer_id: "t-1".into(),
        channel_id: "100".into(),
        message_id: "101".into(),
        rendered: "digest".into(),
    })
    .await
    .unwrap();
    j.counter_add("anthropic/claude", "2026-12-01", 7)
        .await
        .unwrap();
    j.blobs_put(&[("file:README.md".into(), b"facts".to_vec())])
        .await
        .unwrap();
    j.shutdown().await;

    // A database at `version`, made by the migrations up to it.
    let old = tempfile::tempdir().unwrap();
    let migrations = Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations/sqlite");
    for entry in std::fs::read_dir(&migrations).unwrap() {
        let path = entry.unwrap().path();
        let n: i64 = path.file_name().unwrap().to_str().unwrap()[..4]
            .parse()
            .unwrap();
        if n <= version {
            std::fs::copy(&path, old.path().join(path.file_name().unwrap())).unwrap();
        }
    }
    let out = fixtures().join(format!("journal-schema-v{version}.db"));
    std::fs::create_dir_all(fixtures()).unwrap();
    let _ = std::fs::remove_file(&out);
    let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}?mode=rwc", out.display()))
        .await
        .unwrap();
    sqlx::migrate::Migrator::new(old.path())
        .await
        .unwrap()
        .run(&mut conn)
        .await
        .unwrap();
    sqlx::query("ATTACH DATABASE ? AS cur")
        .bind(src.path().display().to_string())
        .execute(&mut conn)
        .await
        .unwrap();
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT name FROM main.sqlite_master WHERE type = 'table'
         AND name NOT IN ('_sqlx_migrations', 'sqlite_sequence')",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    for table in tables {
        // The columns the old schema has (the newer ones are what migrations add).
        let columns: Vec<String> =
            sqlx::query_scalar(&format!("SELECT name FROM pragma_table_info('{table}')"))
                .fetch_all(&mut conn)
                .await
                .unwrap();
        let list = columns.join(", ");
        sqlx::query(&format!(
            "INSERT INTO main.{table} ({list}) SELECT {list} FROM cur.{table}"
        ))
        .execute(&mut conn)
        .await
        .unwrap();
    }
    sqlx::query("DETACH DATABASE cur")
        .execute(&mut conn)
        .await
        .unwrap();
    sqlx::query("VACUUM").execute(&mut conn).await.unwrap();
    conn.close().await.unwrap();
}
