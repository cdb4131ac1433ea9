use gaffer_core::*;
use gaffer_store::{Durability, Journal, NewEvent};
use gaffer_testkit::postgres as pg;
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;

/// The backends every test in the suite runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    /// Whether this backend can run here (PostgreSQL may skip outside CI).
    pub fn available(self) -> bool {
        match self {
            Backend::Sqlite => true,
            Backend::Postgres => pg::available(),
        }
    }
}

/// One test per backend from one body: `suite::journal::NAME::sqlite` and `::postgres`.
macro_rules! each_backend {
    ($(#[$meta:meta])* async fn $name:ident($b:ident: Backend) $body:block $($rest:tt)*) => {
        $(#[$meta])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            #[allow(unused_imports)]
            use pretty_assertions::assert_eq;
            async fn run($b: Backend) $body
            #[tokio::test]
            async fn sqlite() {
                run(Backend::Sqlite).await
            }
            #[tokio::test]
            async fn postgres() {
                if Backend::Postgres.available() {
                    run(Backend::Postgres).await
                }
            }
        }
        each_backend!($($rest)*);
    };
    () => {};
}
pub(crate) use each_backend;

/// Where a test journal lives.
pub enum Target {
    Sqlite(tempfile::TempDir),
    Postgres(String),
}

pub struct TempJournal {
    pub target: Target,
    pub journal: Arc<dyn Journal>,
}

impl TempJournal {
    /// The SQLite file (SQLite tests only).
    pub fn path(&self) -> PathBuf {
        match &self.target {
            Target::Sqlite(dir) => dir.path().join("journal.db"),
            Target::Postgres(_) => panic!("a PostgreSQL journal has no file"),
        }
    }

    /// What `gaffer_store::open` takes: the path or the URL.
    pub fn url(&self) -> String {
        match &self.target {
            Target::Sqlite(_) => self.path().display().to_string(),
            Target::Postgres(url) => url.clone(),
        }
    }

    /// A second handle on the same journal: its own connections, cache and
    /// writer lock, as another process would have.
    pub async fn reopen(&self) -> Arc<dyn Journal> {
        open_url(&self.url()).await
    }

    /// Run raw SQL on a connection of its own; the database's error as text.
    pub async fn sql(&self, sql: &str) -> Result<(), String> {
        use sqlx::Connection;
        match &self.target {
            Target::Sqlite(_) => {
                let url = format!("sqlite://{}", self.path().display());
                let mut conn = sqlx::SqliteConnection::connect(&url)
                    .await
                    .map_err(|e| e.to_string())?;
                let done = sqlx::raw_sql(sql).execute(&mut conn).await;
                conn.close().await.ok();
                done.map(|_| ()).map_err(|e| e.to_string())
            }
            Target::Postgres(url) => {
                let mut conn = sqlx::PgConnection::connect(url)
                    .await
                    .map_err(|e| e.to_string())?;
                let done = sqlx::raw_sql(sql).execute(&mut conn).await;
                conn.close().await.ok();
                done.map(|_| ()).map_err(|e| e.to_string())
            }
        }
    }

    /// Close a SQLite journal with everything in its main file, for a test that
    /// edits that file. Shutdown's checkpoint is best effort (a reader may still
    /// hold the WAL); a page left there would shadow the edited main file.
    pub async fn close_into_main_file(&mut self) -> PathBuf {
        self.journal.shutdown().await;
        self.sql("PRAGMA wal_checkpoint(TRUNCATE)").await.unwrap();
        self.path()
    }

    /// Change one byte of a stored event (`installation` → `installatioX` in the
    /// request of the event whose request names `task`) behind the journal's back:
    /// in the SQLite file itself, or in PostgreSQL with triggers disabled.
    pub async fn tamper(&mut self, task: &str) {
        let needle = format!("request for {task}: add an installation");
        match &self.target {
            Target::Sqlite(_) => {
                let path = self.close_into_main_file().await;
                let mut bytes = std::fs::read(&path).unwrap();
                let at = bytes
                    .windows(needle.len())
                    .position(|w| w == needle.as_bytes())
                    .expect("the event is in the main file after close");
                bytes[at + needle.len() - 1] = b'X'; // "installatioX"
                std::fs::write(&path, &bytes).unwrap();
                self.journal = open_url(&self.url()).await;
            }
            Target::Postgres(_) => {
                self.sql(&format!(
                    "SET session_replication_role = replica;
                     UPDATE events SET payload = replace(payload, '{needle}', '{}X')
                     WHERE stream_id = '{task}' AND seq = 1",
                    &needle[..needle.len() - 1]
                ))
                .await
                .unwrap();
            }
        }
    }

    /// See [`fingerprint`].
    pub async fn fingerprint(&self) -> Vec<u8> {
        fingerprint(&self.target).await
    }
}

/// Everything a refused open must leave unchanged: the SQLite file's bytes, or the
/// PostgreSQL database's tables, migrations and events.
pub async fn fingerprint(target: &Target) -> Vec<u8> {
    match target {
        Target::Sqlite(dir) => std::fs::read(dir.path().join("journal.db")).unwrap(),
        Target::Postgres(url) => {
            use sqlx::Connection;
            let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
            let tables: Vec<String> = sqlx::query_scalar(
                "SELECT table_name::text FROM information_schema.tables
                 WHERE table_schema = current_schema() ORDER BY 1",
            )
            .fetch_all(&mut conn)
            .await
            .unwrap();
            let mut out = tables.join(",");
            if tables.iter().any(|t| t == "_sqlx_migrations") {
                let v: Vec<i64> =
                    sqlx::query_scalar("SELECT version FROM _sqlx_migrations ORDER BY 1")
                        .fetch_all(&mut conn)
                        .await
                        .unwrap();
                out.push_str(&format!(" {v:?}"));
            }
            if tables.iter().any(|t| t == "events") {
                let rows: Vec<(String, i64, String)> =
                    sqlx::query_as("SELECT stream_id, seq, hash FROM events ORDER BY pos")
                        .fetch_all(&mut conn)
                        .await
                        .unwrap();
                out.push_str(&format!(" {rows:?}"));
            }
            out.into_bytes()
        }
    }
}

/// A fresh, empty target for `backend` (no journal opened on it yet).
pub async fn empty_target(backend: Backend) -> Target {
    match backend {
        Backend::Sqlite => Target::Sqlite(tempfile::tempdir().unwrap()),
        Backend::Postgres => Target::Postgres(pg::fresh_database().await),
    }
}

pub async fn temp_journal(backend: Backend) -> TempJournal {
    let target = empty_target(backend).await;
    let url = match &target {
        Target::Sqlite(dir) => dir.path().join("journal.db").display().to_string(),
        Target::Postgres(url) => url.clone(),
    };
    TempJournal {
        target,
        journal: open_url(&url).await,
    }
}

/// Open a journal by path or URL, as the CLI will.
pub async fn open_url(url: &str) -> Arc<dyn Journal> {
    gaffer_store::open(url, Durability::Normal).await.unwrap()
}

pub fn at(event: Event) -> NewEvent {
    NewEvent {
        at: 1_700_000_000_000,
        event,
    }
}

pub fn project(id: &str) -> Event {
    Event::ProjectRegistered {
        project_id: id.into(),
        name: format!("name-{id}"),
        path: format!("/repos/{id}"),
        check_command: Some("cargo test".into()),
    }
}

pub fn task(id: &str, project: &str) -> Event {
    Event::TaskCreated {
        task_id: id.into(),
        project_id: project.into(),
        request: format!("request for {id}: add an installation section to README"),
        by: Actor::user("ana", "cli"),
        options: Default::default(),
    }
}

pub fn step(id: &str, intent: Intent) -> Event {
    Event::StepIntentRecorded {
        step_id: id.into(),
        name: id.into(),
        intent,
        depends_on: vec![],
        input: json!({"what": id}),
    }
}

/// A project `p` and a task `t` with one step `s` recorded.
pub async fn seeded(j: &Arc<dyn Journal>, p: &str, t: &str) {
    j.append(&StreamId::from(p), 0, vec![at(project(p))])
        .await
        .unwrap();
    j.append(
        &StreamId::from(t),
        0,
        vec![at(task(t, p)), at(step("s", Intent::NonIdempotent))],
    )
    .await
    .unwrap();
}

/// Starts step `s` of `t` (seeded) and asks for approval `ap-1`; the new head.
pub async fn started_with_approval(j: &Arc<dyn Journal>, t: &str) -> i64 {
    j.append(
        &StreamId::from(t),
        2,
        vec![
            at(Event::StepStarted {
                step_id: "s".into(),
            }),
            at(Event::ApprovalRequested {
                approval_id: "ap-1".into(),
                step_id: "s".into(),
                attempt: 1,
                kind: ApprovalKind::Tool,
                summary: "run `cargo publish`".into(),
                details: json!({"argv": ["cargo", "publish"], "n": 1.5}),
            }),
        ],
    )
    .await
    .unwrap()
    .head_seq
}
