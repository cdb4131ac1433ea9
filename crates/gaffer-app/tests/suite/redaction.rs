//! Redaction through structure: a secret as an object key, in a file name, inside a
//! diff, in an escalation, a note, an outcome — stored, served or replayed, it is
//! never there, because every string of every event passes one door.

use super::support::*;
use gaffer_app::{ApprovalRequest, Scope, Subject};
use gaffer_core::{ApprovalKind, Decision, Event, StepId, StreamId, TaskId};
use gaffer_store::NewEvent;
use serde_json::json;
use std::sync::Arc;

const SECRET: &str = "hunter2-correct-horse";

fn redacting(e: &Env) -> gaffer_app::App {
    e.app
        .with_redaction(Arc::new(|t: &str| t.replace(SECRET, "[REDACTED]")))
}

#[tokio::test]
async fn secrets_in_keys_file_names_diffs_escalations_and_outcomes_are_stored_nowhere() {
    let e = env("").await;
    e.project("demo").await;
    let app = redacting(&e);
    let task = e.task_with_step("demo", "code/1").await;
    let stream = StreamId(task.clone());
    // An agent's tool call with the secret as a key, and a file it made named after it.
    let head = app.journal().head(&stream).await.unwrap();
    app.journal()
        .append(
            &stream,
            head,
            vec![
                NewEvent::now(Event::StepStarted {
                    step_id: StepId("code/1".into()),
                }),
                NewEvent::now(Event::AgentActivity {
                    step_id: StepId("code/1".into()),
                    activity: json!({"type": "tool_call", "name": "Write", "input": {SECRET: "v", "file_path": format!("src/{SECRET}.txt")}}),
                }),
                NewEvent::now(Event::AgentActivity {
                    step_id: StepId("code/1".into()),
                    activity: json!({"type": "file_change", "path": format!("{SECRET}.env"), "diff": format!("+KEY={SECRET}")}),
                }),
            ],
        )
        .await
        .unwrap();
    // The arbiter escalates; the approval shows the diff.
    e.record_step(&task, "escalation/1").await;
    let diff = format!(
        "diff --git a/{SECRET}.txt b/{SECRET}.txt\n+++ b/{SECRET}.txt\n+token = {SECRET}\n"
    );
    let approval = app
        .request_approval(ApprovalRequest {
            task_id: TaskId(task.clone()),
            step_id: StepId("escalation/1".into()),
            attempt: 1,
            kind: ApprovalKind::Escalation,
            summary: format!("The arbiter escalates: {SECRET} was committed"),
            details: json!({"reason": format!("it wrote {SECRET}"), "diff": diff, "files": {SECRET: 1}}),
            subject: Subject::default(),
        })
        .await
        .unwrap();
    app.decide(
        &approval.id,
        Decision::Deny,
        user("alice"),
        Some(format!("never commit {SECRET}")),
        Scope::default(),
    )
    .await
    .unwrap();
    let head = app.journal().head(&stream).await.unwrap();
    app.journal()
        .append(
            &stream,
            head,
            vec![NewEvent::now(Event::TaskFailed {
                reason: format!("blocked on {SECRET}"),
            })],
        )
        .await
        .unwrap();

    // The secret was really there to be found: the stored words around it remain.
    let shown = serde_json::to_string(&app.approval(&approval.id).await.unwrap()).unwrap();
    assert!(shown.contains("[REDACTED].txt"), "{shown}");
    let mut seen = vec![
        ("approval", shown),
        (
            "task",
            serde_json::to_string(&app.task(&task).await.unwrap()).unwrap(),
        ),
        (
            "approvals",
            serde_json::to_string(&app.approvals(None).await.unwrap()).unwrap(),
        ),
        (
            "audit",
            serde_json::to_string(&app.audit(None).await.unwrap()).unwrap(),
        ),
        (
            "events",
            serde_json::to_string(&app.journal().events_after(0, 10_000).await.unwrap()).unwrap(),
        ),
    ];
    // Even an app without a redaction of its own, on the same journal, stores nothing raw.
    let plain = e
        .app
        .create_task(
            gaffer_app::NewTask {
                project: "demo".into(),
                request: format!("deploy with {SECRET}"),
                ..Default::default()
            },
            user("alice"),
        )
        .await
        .unwrap();
    assert_eq!(plain.request, "deploy with [REDACTED]");
    e.app.journal().shutdown().await;
    for file in ["gaffer.db", "gaffer.db-wal"] {
        if let Ok(bytes) = std::fs::read(e.dir.path().join(file)) {
            seen.push((file, String::from_utf8_lossy(&bytes).into_owned()));
        }
    }
    for (what, text) in &seen {
        assert!(
            !text.contains(SECRET),
            "the secret is in the {what}: {text}"
        );
    }
}

#[tokio::test]
async fn the_served_diff_has_no_secret_in_names_or_lines_even_when_cut() {
    let e = env("").await;
    e.project("demo").await;
    let app = redacting(&e);
    let task = e.task_with_step("demo", "worktree").await;
    let wt = e.dir.path().join("wt");
    git_repo(&wt);
    let git = |args: &[&str]| {
        assert!(std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .current_dir(&wt)
            .status()
            .unwrap()
            .success())
    };
    std::fs::write(wt.join("README"), "x\n").unwrap();
    git(&["add", "."]);
    git(&["commit", "-qm", "base"]);
    let base = String::from_utf8(
        std::process::Command::new("git")
            .args(["rev-parse", "HEAD"])
            .current_dir(&wt)
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    // A file named after the secret, and a big file whose secret sits across the cut.
    std::fs::write(wt.join(format!("{SECRET}.txt")), format!("key={SECRET}\n")).unwrap();
    let filler = "a".repeat(512 * 1024 - 400);
    std::fs::write(
        wt.join("zz-big.txt"),
        format!("{filler}{}\n", SECRET.repeat(40)),
    )
    .unwrap();
    git(&["add", "."]);
    git(&["commit", "-qm", "change"]);
    let stream = StreamId(task.clone());
    let head = app.journal().head(&stream).await.unwrap();
    app.journal()
        .append(
            &stream,
            head,
            vec![
                NewEvent::now(Event::StepStarted {
                    step_id: StepId("worktree".into()),
                }),
                NewEvent::now(Event::StepCompleted {
                    step_id: StepId("worktree".into()),
                    // The git dir as the engine records it (the diff never trusts
                    // the worktree's own `.git`).
                    receipt: json!({"path": wt, "branch": "gaffer/x", "base": base.trim(),
                        "git_dir": wt.join(".git")}),
                }),
            ],
        )
        .await
        .unwrap();
    let d = app.task_diff(&task).await.unwrap();
    assert!(d.diff.contains("[REDACTED].txt"), "{}", &d.diff[..300]);
    assert!(d.truncated);
    for piece in [SECRET, &SECRET[..10]] {
        assert!(!d.diff.contains(piece), "{piece} is in the served diff");
    }
}
