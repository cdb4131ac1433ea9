//! Creating a task once per origin key (`NewTask::key`), on both backends, with
//! creators in two processes racing.
use super::support::*;
use gaffer_app::{App, AppError, CreatedTask, NewTask, Policy};
use gaffer_store::{Durability, Journal};
use std::sync::Arc;

/// Two handles on one new journal, as two processes would have: SQLite in `dir`,
/// or a fresh PostgreSQL database.
async fn two_handles(
    dir: &std::path::Path,
    postgres: bool,
) -> (Arc<dyn Journal>, Arc<dyn Journal>) {
    let url = if postgres {
        gaffer_testkit::postgres::fresh_database().await
    } else {
        dir.join("gaffer.db").display().to_string()
    };
    let a = gaffer_store::open(&url, Durability::Normal).await.unwrap();
    let b = gaffer_store::open(&url, Durability::Normal).await.unwrap();
    (a, b)
}

fn keyed(project: &str, request: &str, key: &str) -> NewTask {
    NewTask {
        project: project.into(),
        request: request.into(),
        key: Some(key.into()),
        ..NewTask::default()
    }
}

async fn task_created_events(j: &Arc<dyn Journal>) -> usize {
    j.events_after(0, 10_000)
        .await
        .unwrap()
        .iter()
        .filter(|e| e.event.kind() == "task_created")
        .count()
}

async fn racing_creators_make_one_task(postgres: bool) {
    let dir = tempfile::tempdir().unwrap();
    let (ja, jb) = two_handles(dir.path(), postgres).await;
    let a = App::new(ja.clone(), Policy::default());
    let b = App::new(jb, Policy::default());
    let repo = dir.path().join("demo");
    git_repo(&repo);
    a.add_project(
        gaffer_app::AddProject {
            path: repo.display().to_string(),
            name: Some("demo".into()),
            check: None,
        },
        user("alice"),
    )
    .await
    .unwrap();

    for round in 0..5 {
        let key = format!("nightly-build:2026-01-0{}T00:00:00Z", round + 1);
        let mut creators = Vec::new();
        for i in 0..6 {
            let app = if i % 2 == 0 { a.clone() } else { b.clone() };
            let req = keyed("demo", "update the changelog", &key);
            creators.push(tokio::spawn(async move {
                app.create_task_once(req, user("scheduler")).await
            }));
        }
        let mut got: Vec<CreatedTask> = Vec::new();
        for c in creators {
            got.push(c.await.unwrap().unwrap());
        }
        let ids: std::collections::BTreeSet<&str> =
            got.iter().map(|c| c.task.id.as_str()).collect();
        assert_eq!(ids.len(), 1, "round {round}: {ids:?}");
        assert_eq!(
            got.iter().filter(|c| !c.existing).count(),
            1,
            "round {round}"
        );
        assert_eq!(got[0].task.key.as_deref(), Some(key.as_str()));
    }
    assert_eq!(task_created_events(&ja).await, 5);

    // A repeat answers the task as first created, even with another request,
    // and stores nothing.
    let again = b
        .create_task_once(
            keyed(
                "demo",
                "something else",
                "nightly-build:2026-01-01T00:00:00Z",
            ),
            user("bob"),
        )
        .await
        .unwrap();
    assert!(again.existing);
    assert_eq!(again.task.request, "update the changelog");
    assert_eq!(task_created_events(&ja).await, 5);
}

#[tokio::test]
async fn racing_creators_make_one_task_per_key_sqlite() {
    racing_creators_make_one_task(false).await;
}

#[tokio::test]
async fn racing_creators_make_one_task_per_key_postgres() {
    if gaffer_testkit::postgres::available() {
        racing_creators_make_one_task(true).await;
    }
}

#[tokio::test]
async fn a_bad_key_or_a_key_of_another_project_is_refused_and_nothing_is_stored() {
    let env = env("").await;
    env.project("demo").await;
    env.project("other").await;
    let first = env
        .app
        .create_task_once(keyed("demo", "fix it", "issue:gitea/o/r#7"), user("a"))
        .await
        .unwrap();
    assert!(!first.existing);
    let before = task_created_events(env.app.journal()).await;

    let err = env
        .app
        .create_task_once(keyed("other", "fix it", "issue:gitea/o/r#7"), user("a"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, AppError::Conflict { code: "key_taken", message } if message.contains(&first.task.id)),
        "{err:?}"
    );
    // gaffer's own namespaces are refused to people (and taken from gaffer).
    for bad in [
        "",
        "has space",
        "tab\there",
        "é",
        &"k".repeat(201),
        "schedule:nightly:2099-01-01T00:00:00Z",
        "intake:gitea/o/r#8",
    ] {
        let err = env
            .app
            .create_task_once(keyed("demo", "fix it", bad), user("a"))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, AppError::Invalid { field, .. } if field == "key"),
            "{bad:?}: {err:?}"
        );
    }
    assert_eq!(task_created_events(env.app.journal()).await, before);
    let by_gaffer = env
        .app
        .create_task_once(
            keyed("demo", "fix it", "intake:gitea/o/r#8"),
            gaffer_core::Actor::system("intake:test"),
        )
        .await
        .unwrap();
    assert!(!by_gaffer.existing);
}

#[tokio::test]
async fn a_retry_of_a_keyed_task_is_a_new_task_without_the_key() {
    let env = env("").await;
    env.project("demo").await;
    let first = env
        .app
        .create_task(keyed("demo", "fix it", "k-1"), user("a"))
        .await
        .unwrap();
    env.app
        .cancel_task(&first.id, user("a"), None)
        .await
        .unwrap();
    let retry = env.app.retry_task(&first.id, user("a")).await.unwrap();
    assert_ne!(retry.id, first.id);
    assert_eq!(retry.key, None);
    // The key still names the first task.
    let again = env
        .app
        .create_task_once(keyed("demo", "fix it", "k-1"), user("a"))
        .await
        .unwrap();
    assert_eq!((again.task.id, again.existing), (first.id, true));
}
