//! No secret leaves through the work itself: the scan before each commit and each
//! push, through the real engine, real git, a bare remote and the fake Gitea.
use super::support::*;
use gaffer_app::{NewTask, Scope};
use gaffer_core::{Actor, ApprovalKind, Decision, Event, Stage, TaskId};
use gaffer_forge::ForgeKind;
use gaffer_store::RecordedEvent;
use gaffer_testkit::forge::{BareRemote, FakeForge, Flavor};
use serde_json::json;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::Receiver;

const TOKEN: &str = "forge-token-5f1e2d";
const SECRET: &str = "prod-db-password-8c1f27";

/// A project shipping to a fake Gitea, with `SECRET` a configured secret.
async fn world(fake: &FakeForge, remote: &BareRemote) -> World {
    let redactor = Arc::new(gaffer_agents::Redactor::new([SECRET]));
    let w = World::build("true", |s| {
        s.redactor = redactor.clone();
        s.shipping.insert(
            "demo".into(),
            shipping(ForgeKind::Gitea, &fake.base_url(), &remote.url(), TOKEN),
        );
    })
    .await;
    // As `gaffer` sets it up: everything stored goes through the same redactor.
    w.app
        .with_redaction(Arc::new(move |t: &str| redactor.redact(t)));
    w
}

async fn task(w: &World) -> TaskId {
    let t = w
        .app
        .create_task(
            NewTask {
                project: "demo".into(),
                request: "Document the database setup".into(),
                agent: Some("claude".into()),
                auto_approve: true,
                ..NewTask::default()
            },
            Actor::user("test", "test"),
        )
        .await
        .unwrap();
    TaskId(t.id)
}

/// The next `manual` approval of task `id`: its id and summary.
async fn manual_approval(events: &mut Receiver<RecordedEvent>, id: &TaskId) -> (String, String) {
    let wait = async {
        loop {
            match events.recv().await {
                Ok(e) if e.stream_id == id.0 => {
                    if let Event::ApprovalRequested {
                        approval_id,
                        kind: ApprovalKind::Manual,
                        summary,
                        ..
                    } = e.event
                    {
                        return (approval_id.0, summary);
                    }
                }
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(e) => panic!("event stream ended: {e}"),
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(120), wait)
        .await
        .expect("no manual approval came")
}

fn git_out(dir: &std::path::Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Everything that could carry the secret out: the branch's commits (names and
/// contents), the remote, the forge's requests, the journal.
async fn assert_nothing_left(w: &World, id: &TaskId, fake: &FakeForge, remote: &BareRemote) {
    let view = w.view(id).await;
    let wt = view
        .steps
        .iter()
        .find(|s| s.step_id == "worktree")
        .and_then(|s| s.receipt.as_deref())
        .map(|r| serde_json::from_str::<serde_json::Value>(r).unwrap())
        .unwrap();
    let path = std::path::PathBuf::from(wt["path"].as_str().unwrap());
    let history = git_out(
        &path,
        &[
            "log",
            "-p",
            "--name-only",
            &format!("{}..HEAD", wt["base"].as_str().unwrap()),
        ],
    );
    assert!(!history.contains(SECRET), "a commit carries it:\n{history}");
    assert_eq!(
        remote.branch_sha(wt["branch"].as_str().unwrap()),
        None,
        "nothing pushed"
    );
    assert!(fake.prs().is_empty());
    assert!(
        fake.requests().iter().all(|r| !r.contains("/pulls")),
        "{:?}",
        fake.requests()
    );
    let journal = format!("{:?}", w.journal.events_after(0, 100_000).await.unwrap());
    assert!(!journal.contains(SECRET), "the journal holds it");
}

#[tokio::test]
async fn a_secret_written_into_a_file_is_not_committed_or_pushed_and_the_approval_names_the_line() {
    let remote = BareRemote::new().unwrap();
    let fake = FakeForge::start(Flavor::Gitea, "acme", "demo", TOKEN)
        .await
        .unwrap();
    fake.attach_remote(&remote);
    let w = world(&fake, &remote).await;
    w.script("planner", vec![plan_answer(&["Document the setup"])]);
    w.script(
        "owner",
        vec![json!({ "steps": [
            { "write_file": { "path": "README.md", "content": README_DONE } },
            { "write_file": { "path": "config/db.env", "content": format!("HOST=db\nPASSWORD={SECRET}\n") } },
            { "say": "done" }
        ] })],
    );
    w.script("reviewer", vec![verdict(json!({ "verdict": "done" }))]);
    let id = task(&w).await;
    let mut events = w.journal.subscribe();
    let run = w.spawn(&id);
    let (approval, summary) = manual_approval(&mut events, &id).await;
    assert!(summary.starts_with("Not committed"), "{summary}");
    assert!(
        summary.contains("`config/db.env` line 2: a configured secret value"),
        "{summary}"
    );
    assert!(!summary.contains(SECRET));
    // Auto-approve is on for this task, yet a person must answer; they deny.
    w.app
        .decide(
            &approval,
            Decision::Deny,
            Actor::user("ana", "test"),
            None,
            Scope::default(),
        )
        .await
        .unwrap();
    assert_eq!(run.await.unwrap().unwrap(), Stage::Failed);
    let view = w.view(&id).await;
    let outcome = view.task.outcome.clone().unwrap_or_default();
    assert!(outcome.contains("nothing was committed"), "{outcome}");
    assert_nothing_left(&w, &id, &fake, &remote).await;
}

#[tokio::test]
async fn a_secret_in_a_file_name_is_named_redacted_and_nothing_leaves() {
    let remote = BareRemote::new().unwrap();
    let fake = FakeForge::start(Flavor::Gitea, "acme", "demo", TOKEN)
        .await
        .unwrap();
    fake.attach_remote(&remote);
    let w = world(&fake, &remote).await;
    w.script("planner", vec![plan_answer(&["Document the setup"])]);
    w.script(
        "owner",
        vec![json!({ "steps": [
            { "write_file": { "path": "README.md", "content": README_DONE } },
            { "write_file": { "path": format!("notes/{SECRET}.txt"), "content": "harmless\n" } },
            { "say": "done" }
        ] })],
    );
    w.script("reviewer", vec![verdict(json!({ "verdict": "done" }))]);
    let id = task(&w).await;
    let mut events = w.journal.subscribe();
    let run = w.spawn(&id);
    let (approval, summary) = manual_approval(&mut events, &id).await;
    assert!(
        summary.contains("`notes/[REDACTED].txt` (its name): a configured secret value"),
        "{summary}"
    );
    w.app
        .decide(
            &approval,
            Decision::Deny,
            Actor::user("ana", "test"),
            None,
            Scope::default(),
        )
        .await
        .unwrap();
    assert_eq!(run.await.unwrap().unwrap(), Stage::Failed);
    assert_nothing_left(&w, &id, &fake, &remote).await;
}

#[tokio::test]
async fn a_secret_committed_behind_gaffers_back_stops_the_push() {
    let remote = BareRemote::new().unwrap();
    let fake = FakeForge::start(Flavor::Gitea, "acme", "demo", TOKEN)
        .await
        .unwrap();
    fake.attach_remote(&remote);
    let w = world(&fake, &remote).await;
    w.script("planner", vec![plan_answer(&["Document the setup"])]);
    w.script("owner", vec![write("README.md", README_DONE)]);
    w.script("reviewer", vec![verdict(json!({ "verdict": "done" }))]);
    // Auto-approve off: the ship approval waits, and meanwhile a process the agent
    // left behind commits a secret on the task branch (gaffer never committed it).
    let t = w
        .app
        .create_task(
            NewTask {
                project: "demo".into(),
                request: "Document the database setup".into(),
                agent: Some("claude".into()),
                ..NewTask::default()
            },
            Actor::user("test", "test"),
        )
        .await
        .unwrap();
    let id = TaskId(t.id);
    let mut events = w.journal.subscribe();
    let run = w.spawn(&id);
    let wait_for = |kind: ApprovalKind| {
        let app = w.app.clone();
        let id = id.clone();
        async move {
            for _ in 0..1200 {
                if let Some(a) = app
                    .task(&id.0)
                    .await
                    .unwrap()
                    .approvals
                    .into_iter()
                    .find(|a| a.kind == kind.as_str() && a.state == "pending")
                {
                    return a.id;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            panic!("no pending {kind:?} approval");
        }
    };
    let plan = wait_for(ApprovalKind::Plan).await;
    w.app
        .decide(
            &plan,
            Decision::Approve,
            Actor::user("ana", "test"),
            None,
            Scope::default(),
        )
        .await
        .unwrap();
    let ship = wait_for(ApprovalKind::Ship).await;
    let view = w.view(&id).await;
    let wt_path = view
        .steps
        .iter()
        .find(|s| s.step_id == "worktree")
        .and_then(|s| s.receipt.as_deref())
        .map(|r| {
            serde_json::from_str::<serde_json::Value>(r).unwrap()["path"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .unwrap();
    let wt = std::path::Path::new(&wt_path);
    std::fs::write(
        wt.join("deploy.sh"),
        format!("#!/bin/sh\nexport PGPASSWORD={SECRET}\n"),
    )
    .unwrap();
    for args in [
        vec!["add", "deploy.sh"],
        vec![
            "-c",
            "user.name=agent",
            "-c",
            "user.email=a@x",
            "commit",
            "-qm",
            "deploy script",
        ],
    ] {
        assert!(Command::new("git")
            .args(&args)
            .current_dir(wt)
            .status()
            .unwrap()
            .success());
    }
    w.app
        .decide(
            &ship,
            Decision::Approve,
            Actor::user("ana", "test"),
            None,
            Scope::default(),
        )
        .await
        .unwrap();
    let (approval, summary) = manual_approval(&mut events, &id).await;
    assert!(summary.starts_with("Not pushed"), "{summary}");
    assert!(
        summary.contains("`deploy.sh` line 2 in commit "),
        "{summary}"
    );
    w.app
        .decide(
            &approval,
            Decision::Deny,
            Actor::user("ana", "test"),
            None,
            Scope::default(),
        )
        .await
        .unwrap();
    assert_eq!(run.await.unwrap().unwrap(), Stage::Failed);
    let branch = serde_json::from_str::<serde_json::Value>(
        w.view(&id)
            .await
            .steps
            .iter()
            .find(|s| s.step_id == "worktree")
            .and_then(|s| s.receipt.clone())
            .as_deref()
            .unwrap(),
    )
    .unwrap()["branch"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(remote.branch_sha(&branch), None, "nothing pushed");
    assert!(fake.prs().is_empty());
}

#[tokio::test]
async fn a_finding_a_person_lets_through_at_the_commit_is_not_asked_again_at_the_push() {
    let remote = BareRemote::new().unwrap();
    let fake = FakeForge::start(Flavor::Gitea, "acme", "demo", TOKEN)
        .await
        .unwrap();
    fake.attach_remote(&remote);
    fake.report_ci_for_every_commit("success");
    let w = world(&fake, &remote).await;
    w.script("planner", vec![plan_answer(&["Document the setup"])]);
    w.script(
        "owner",
        vec![json!({ "steps": [
            { "write_file": { "path": "README.md", "content": format!("{README_DONE}\nThe test fixture password is {SECRET}.\n") } },
            { "say": "done" }
        ] })],
    );
    w.script("reviewer", vec![verdict(json!({ "verdict": "done" }))]);
    let id = task(&w).await;
    let mut events = w.journal.subscribe();
    let run = w.spawn(&id);
    let (approval, summary) = manual_approval(&mut events, &id).await;
    assert!(summary.contains("`README.md` line"), "{summary}");
    w.app
        .decide(
            &approval,
            Decision::Approve,
            Actor::user("ana", "test"),
            Some("a test fixture, not a secret".into()),
            Scope::default(),
        )
        .await
        .unwrap();
    assert_eq!(run.await.unwrap().unwrap(), Stage::Done);
    let manual: Vec<_> = w
        .view(&id)
        .await
        .approvals
        .into_iter()
        .filter(|a| a.kind == "manual")
        .collect();
    assert_eq!(manual.len(), 1, "{manual:?}");
    assert_eq!(fake.prs().len(), 1);
}
