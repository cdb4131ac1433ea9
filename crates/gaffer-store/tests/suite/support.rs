use gaffer_core::*;
use gaffer_store::{Durability, Journal, NewEvent, SqliteJournal};
use serde_json::json;
use std::path::{Path, PathBuf};

pub struct TempJournal {
    pub dir: tempfile::TempDir,
    pub journal: SqliteJournal,
}

impl TempJournal {
    pub fn path(&self) -> PathBuf {
        self.dir.path().join("journal.db")
    }
}

pub async fn temp_journal() -> TempJournal {
    let dir = tempfile::tempdir().unwrap();
    let journal = SqliteJournal::open(&dir.path().join("journal.db"), Durability::Normal)
        .await
        .unwrap();
    TempJournal { dir, journal }
}

pub async fn open(path: &Path) -> SqliteJournal {
    SqliteJournal::open(path, Durability::Normal).await.unwrap()
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
pub async fn seeded(j: &dyn Journal, p: &str, t: &str) {
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
