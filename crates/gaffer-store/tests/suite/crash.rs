//! Crash safety: a child process appends in a loop and is SIGKILLed at random
//! moments. After every kill the journal verifies, projections equal a rebuild,
//! and no batch is half-written.
use super::support::*;
use gaffer_core::*;
use gaffer_store::Durability;
use pretty_assertions::assert_eq;
use rand::Rng;
use serde_json::json;
use std::process::{Command, Stdio};
use std::time::Duration;

const DB_ENV: &str = "GAFFER_TEST_CRASH_DB";
/// Every append after a task's creation is a batch of this many events.
const BATCH: i64 = 4;

/// The child: appends batches forever. Runs only when the parent test starts it.
#[tokio::test]
#[ignore = "started by kill_the_writer_at_random_moments"]
async fn child_writer() {
    let Ok(path) = std::env::var(DB_ENV) else {
        return;
    };
    let j = gaffer_store::open(&path, Durability::Full).await.unwrap();
    let p = StreamId::from("p");
    if j.head(&p).await.unwrap() == 0 {
        j.append(&p, 0, vec![at(project("p"))]).await.unwrap();
    }
    for n in 0.. {
        let id = format!("t-{}-{n}", std::process::id());
        let stream = StreamId::from(id.as_str());
        j.append(&stream, 0, vec![at(task(&id, "p"))])
            .await
            .unwrap();
        let mut head = 1;
        for k in 0..6 {
            let s = format!("s{k}");
            let batch = vec![
                at(step(&s, Intent::Idempotent)),
                at(Event::StepStarted {
                    step_id: s.as_str().into(),
                }),
                at(Event::StepCompleted {
                    step_id: s.as_str().into(),
                    receipt: json!({"k": k, "pad": "x".repeat(300)}),
                }),
                at(Event::SessionStarted {
                    session_id: format!("{id}-{k}").into(),
                    agent: "claude".into(),
                    role: Role::Owner,
                    workspace_key: "/w".into(),
                    agent_session_id: None,
                    step_id: Some(s.as_str().into()),
                }),
            ];
            head = j.append(&stream, head, batch).await.unwrap().head_seq;
        }
    }
}

#[tokio::test]
async fn kill_the_writer_at_random_moments_sqlite() {
    kill_the_writer_at_random_moments(Backend::Sqlite, 30).await;
}

#[tokio::test]
async fn kill_the_writer_at_random_moments_postgres() {
    if Backend::Postgres.available() {
        kill_the_writer_at_random_moments(Backend::Postgres, 15).await;
    }
}

async fn kill_the_writer_at_random_moments(b: Backend, rounds: usize) {
    let target = empty_target(b).await;
    let path = match &target {
        Target::Sqlite(dir) => dir.path().join("journal.db").display().to_string(),
        Target::Postgres(url) => url.clone(),
    };
    let exe = std::env::current_exe().unwrap();
    let mut rng = rand::thread_rng();
    let mut last_total = 0;
    for round in 0..rounds {
        let mut child = Command::new(&exe)
            .args([
                "suite::crash::child_writer",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(DB_ENV, &path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        tokio::time::sleep(Duration::from_millis(rng.gen_range(60..400))).await;
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();

        let j = gaffer_store::open(&path, Durability::Full).await.unwrap();
        let report = j.verify().await.unwrap();
        assert_eq!(report.broken, None, "round {round}");
        for t in j.tasks(&Default::default()).await.unwrap() {
            let head = j.head(&t.id.as_str().into()).await.unwrap();
            assert_eq!(
                (head - 1) % BATCH,
                0,
                "round {round}: task {} has a half-written batch (head {head})",
                t.id
            );
        }
        let live = j.projections().await.unwrap();
        j.rebuild().await.unwrap();
        assert_eq!(j.projections().await.unwrap(), live, "round {round}");
        last_total = report.events;
        j.shutdown().await;
    }
    assert!(
        last_total > 30,
        "the child barely wrote anything ({last_total} events): the test proves nothing"
    );
}
