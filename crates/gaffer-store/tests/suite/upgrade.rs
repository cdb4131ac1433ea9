//! Upgrades: a journal written at the previous schema (a committed fixture) is
//! opened by this build, which applies every later migration to it, and it
//! verifies with its events, heads and operational rows intact. On both backends:
//! SQLite fixtures are database files, PostgreSQL fixtures plain SQL dumps
//! (`pg_dump --inserts`) loaded into a fresh database.
//!
//! The fixtures are `tests/fixtures/journal-schema-vN.db` and
//! `journal-schema-vN.pg.sql`, N = the schema before the newest. When a migration
//! is added, keep the old fixtures (their tests then check the new migration too)
//! and add ones for the new previous schema (PostgreSQL from
//! `GAFFER_TEST_POSTGRES_URL`, `pg_dump` on the PATH):
//! `GAFFER_WRITE_FIXTURE=1 cargo test -p gaffer-store -- --ignored write_the_previous_schema_fixture`.
use super::support::*;
use gaffer_core::*;
use gaffer_store::{Durability, Journal, PgJournal, SqliteJournal, WorkerInfo};
use gaffer_testkit::postgres as pg;
use pretty_assertions::assert_eq;
use sqlx::Connection;
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Every committed fixture whose name ends in `suffix`, with the schema version
/// its name says.
fn fixture_files(suffix: &str) -> Vec<(i64, PathBuf)> {
    let mut found: Vec<(i64, PathBuf)> = std::fs::read_dir(fixtures())
        .unwrap()
        .filter_map(|e| {
            let path = e.unwrap().path();
            let name = path.file_name()?.to_str()?.to_owned();
            let v = name
                .strip_prefix("journal-schema-v")?
                .strip_suffix(suffix)?;
            Some((v.parse().ok()?, path))
        })
        .collect();
    found.sort();
    found
}

/// Rows of `sql` in the journal at `url` (a SQLite path or a PostgreSQL URL).
async fn rows<T>(url: &str, sql: &str) -> Vec<T>
where
    T: Send
        + Unpin
        + for<'r> sqlx::FromRow<'r, sqlx::sqlite::SqliteRow>
        + for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow>,
{
    if url.starts_with("postgres") {
        let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
        let got = sqlx::query_as(sql).fetch_all(&mut conn).await.unwrap();
        conn.close().await.unwrap();
        got
    } else {
        let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{url}?mode=ro"))
            .await
            .unwrap();
        let got = sqlx::query_as(sql).fetch_all(&mut conn).await.unwrap();
        conn.close().await.unwrap();
        got
    }
}

type Chain = Vec<(String, i64, String, Option<String>)>;
type Leases = Vec<(String, String, i64)>;
const CHAIN: &str = "SELECT stream_id, seq, hash, worker_id FROM events ORDER BY pos";
const LEASES: &str = "SELECT task_id, worker_id, generation FROM task_leases ORDER BY task_id";

/// The journal at `url`, written at schema `version`, opens with this build: the
/// later migrations are applied, every chain verifies, events and leases are as
/// they were, and the next append chains onto the old head.
async fn migrates_and_verifies(url: &str, version: i64, supported: i64) {
    let found = gaffer_store::schema_found(url).await.unwrap();
    assert_eq!(
        (found.found, found.pending()),
        (Some(version), supported - version)
    );
    let chain: Chain = rows(url, CHAIN).await;
    let leases: Leases = rows(url, LEASES).await;
    assert!(
        chain.len() > 10 && !leases.is_empty(),
        "the fixture holds real data"
    );

    let j = gaffer_store::open(url, Durability::Full)
        .await
        .unwrap_or_else(|e| panic!("v{version} fixture does not open: {e}"));
    assert_eq!(j.verify().await.unwrap().broken, None, "v{version} fixture");
    j.shutdown().await;
    let applied: Vec<(i64,)> = rows(
        url,
        "SELECT version FROM _sqlx_migrations WHERE success ORDER BY version",
    )
    .await;
    assert_eq!(
        applied.into_iter().map(|(v,)| v).collect::<Vec<_>>(),
        (1..=supported).collect::<Vec<_>>(),
        "every later migration applied to the v{version} fixture"
    );
    assert_eq!(
        rows::<(String, i64, String, Option<String>)>(url, CHAIN).await,
        chain
    );
    assert_eq!(rows::<(String, String, i64)>(url, LEASES).await, leases);
    // It is a working journal again: the next append chains onto the old head.
    let j = gaffer_store::open(url, Durability::Full).await.unwrap();
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

#[tokio::test]
async fn every_old_schema_fixture_is_migrated_and_verifies() {
    let supported = SqliteJournal::supported_schema_version();
    let all = fixture_files(".db");
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
        migrates_and_verifies(&path.display().to_string(), version, supported).await;
    }
}

/// The SQL of a plain dump, less psql's own commands (`\restrict`, which
/// `pg_dump` writes since 15.14 and which the server does not take).
fn dump_sql(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('\\'))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn every_old_postgres_fixture_is_loaded_migrated_and_verifies() {
    if !Backend::Postgres.available() {
        return;
    }
    let supported = PgJournal::supported_schema_version();
    let all = fixture_files(".pg.sql");
    assert!(
        all.iter().any(|(v, _)| *v == supported - 1),
        "no PostgreSQL fixture of the previous schema v{} in {}: write one (see this file's doc)",
        supported - 1,
        fixtures().display()
    );
    for (version, fixture) in all {
        let url = pg::fresh_database().await;
        let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
        sqlx::raw_sql(&dump_sql(&fixture))
            .execute(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", fixture.display()));
        conn.close().await.unwrap();
        migrates_and_verifies(&url, version, supported).await;
    }
}

/// What every fixture holds: projects, tasks, steps, approvals, sessions, a
/// worker's fenced appends, a Discord message, a rate counter and a cached blob,
/// written by this build with events the previous schema can hold.
async fn fixture_data(j: &Arc<dyn Journal>) {
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
}

/// A directory with the migrations of `backend` up to `version`.
fn migrations_up_to(backend: &str, version: i64) -> tempfile::TempDir {
    let old = tempfile::tempdir().unwrap();
    let migrations = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("migrations")
        .join(backend);
    for entry in std::fs::read_dir(&migrations).unwrap() {
        let path = entry.unwrap().path();
        let n: i64 = path.file_name().unwrap().to_str().unwrap()[..4]
            .parse()
            .unwrap();
        if n <= version {
            std::fs::copy(&path, old.path().join(path.file_name().unwrap())).unwrap();
        }
    }
    old
}

/// Writes `tests/fixtures/journal-schema-v{supported - 1}.db`: [`fixture_data`]
/// written by this build, then carried into a database made by the migrations
/// before the newest one.
#[tokio::test]
#[ignore = "writes the committed fixture: run by hand when a migration is added"]
async fn write_the_previous_schema_fixture() {
    if std::env::var_os("GAFFER_WRITE_FIXTURE").is_none() {
        return;
    }
    let version = SqliteJournal::supported_schema_version() - 1;
    let src = temp_journal(Backend::Sqlite).await;
    fixture_data(&src.journal).await;
    src.journal.shutdown().await;

    // A database at `version`, made by the migrations up to it.
    let old = migrations_up_to("sqlite", version);
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

/// Writes `tests/fixtures/journal-schema-v{supported - 1}.pg.sql`: [`fixture_data`]
/// written by this build on PostgreSQL, each row carried into a database made by
/// the migrations before the newest one (`jsonb_populate_record` keeps the columns
/// the old schema has), then dumped as plain SQL.
#[tokio::test]
#[ignore = "writes the committed fixture: run by hand when a migration is added"]
async fn write_the_previous_schema_fixture_postgres() {
    if std::env::var_os("GAFFER_WRITE_FIXTURE").is_none() {
        return;
    }
    let version = PgJournal::supported_schema_version() - 1;
    let src = temp_journal(Backend::Postgres).await;
    fixture_data(&src.journal).await;
    src.journal.shutdown().await;

    let old_url = pg::fresh_database().await;
    let mut old = sqlx::PgConnection::connect(&old_url).await.unwrap();
    sqlx::migrate::Migrator::new(migrations_up_to("postgres", version).path())
        .await
        .unwrap()
        .run(&mut old)
        .await
        .unwrap();
    let mut cur = sqlx::PgConnection::connect(&src.url()).await.unwrap();
    // Rows go in as they were (positions included), in any table order.
    sqlx::query("SET session_replication_role = replica")
        .execute(&mut old)
        .await
        .unwrap();
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables
         WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'
         AND table_name <> '_sqlx_migrations' ORDER BY 1",
    )
    .fetch_all(&mut old)
    .await
    .unwrap();
    for table in &tables {
        let rows: Vec<String> =
            sqlx::query_scalar(&format!("SELECT to_jsonb(r)::text FROM {table} r"))
                .fetch_all(&mut cur)
                .await
                .unwrap();
        for row in rows {
            sqlx::query(&format!(
                "INSERT INTO {table} OVERRIDING SYSTEM VALUE
                 SELECT * FROM jsonb_populate_record(NULL::{table}, $1::jsonb)"
            ))
            .bind(row)
            .execute(&mut old)
            .await
            .unwrap();
        }
    }
    // Identity and serial columns go on after the copied rows.
    let generated: Vec<(String, String)> = sqlx::query_as(
        "SELECT table_name::text, column_name::text FROM information_schema.columns
         WHERE table_schema = current_schema() AND table_name <> '_sqlx_migrations'
         AND (is_identity = 'YES' OR column_default LIKE 'nextval%')",
    )
    .fetch_all(&mut old)
    .await
    .unwrap();
    for (table, column) in generated {
        // As appends leave it (`verify` checks it): at the last value used.
        sqlx::query(&format!(
            "SELECT setval(pg_get_serial_sequence('{table}', '{column}'), max({column}), true)
             FROM {table} HAVING max({column}) IS NOT NULL"
        ))
        .execute(&mut old)
        .await
        .unwrap();
    }
    old.close().await.unwrap();
    cur.close().await.unwrap();
    let out = fixtures().join(format!("journal-schema-v{version}.pg.sql"));
    let dumped = std::process::Command::new("pg_dump")
        .args(["--inserts", "--no-owner", "--no-privileges", "--file"])
        .arg(&out)
        .arg(&old_url)
        .status()
        .unwrap();
    assert!(dumped.success(), "pg_dump: {dumped}");
}
