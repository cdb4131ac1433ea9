use super::support::*;
use gaffer_app::Subject;
use gaffer_app::{AppError, Outcome, Scope};
use gaffer_core::{Actor, ApprovalKind, Decision};
use std::time::{Duration, Instant};

#[tokio::test]
async fn a_decision_wakes_the_waiter_at_once() {
    let env = env("").await;
    env.project("alpha").await;
    let task = env.task_with_step("alpha", "plan").await;
    let a = env
        .app
        .request_approval(tool_request(&task, "plan", 1, command("deploy")))
        .await
        .unwrap();
    let app = env.app.clone();
    let id = a.id.clone();
    let waiter = tokio::spawn(async move { app.wait_for_decision(&id).await });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!waiter.is_finished());
    let started = Instant::now();
    env.app
        .decide(
            &a.id,
            Decision::Deny,
            user("bob"),
            Some("too risky".into()),
            Scope::default(),
        )
        .await
        .unwrap();
    let r = waiter.await.unwrap().unwrap();
    assert!(started.elapsed() < Duration::from_millis(500));
    assert_eq!(r.outcome, Outcome::Denied);
    assert!(!r.approved());
    assert_eq!(r.reason(), "denied by bob (test): too risky");
    // Already settled: returns at once.
    let again = env.app.wait_for_decision(&a.id).await.unwrap();
    assert_eq!(again, r);
}

#[tokio::test]
async fn expiry_denies_by_default_with_the_reason_shown() {
    let env = env("[approvals]\nexpiry_secs = 1\n").await;
    env.project("alpha").await;
    let task = env.task_with_step("alpha", "plan").await;
    let a = env
        .app
        .request_approval(tool_request(&task, "plan", 1, command("deploy")))
        .await
        .unwrap();
    assert!(a.expires_at.unwrap() - a.requested_at == 1000);
    let r = tokio::time::timeout(Duration::from_secs(5), env.app.wait_for_decision(&a.id))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(r.outcome, Outcome::Expired);
    assert!(!r.approved());
    assert_eq!(
        r.reason(),
        "denied: nobody decided within 1s; denied by default"
    );
    // A late decision changes nothing.
    let late = env
        .app
        .decide(
            &a.id,
            Decision::Approve,
            user("bob"),
            None,
            Scope::default(),
        )
        .await
        .unwrap();
    assert!(!late.applied);
    assert_eq!(late.approval.state, "expired");
}

#[tokio::test]
async fn expiry_without_a_waiter_is_done_by_run_expiry() {
    let env = env("[approvals]\nexpiry_secs = 1\n").await;
    env.project("alpha").await;
    let task = env.task_with_step("alpha", "plan").await;
    let app = env.app.clone();
    let runner = tokio::spawn(async move { app.run_expiry().await });
    let a = env
        .app
        .request_approval(tool_request(&task, "plan", 1, command("deploy")))
        .await
        .unwrap();
    let mut rx = env.app.journal().subscribe();
    let e = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let e = rx.recv().await.unwrap();
            if e.event.kind() == "approval_expired" {
                return e;
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(e.stream_id, task);
    assert_eq!(env.app.approval(&a.id).await.unwrap().state, "expired");
    runner.abort();
}

#[tokio::test]
async fn cancelling_the_task_withdraws_and_wakes_the_waiter() {
    let env = env("").await;
    env.project("alpha").await;
    let task = env.task_with_step("alpha", "plan").await;
    let a = env
        .app
        .request_approval(tool_request(&task, "plan", 1, command("deploy")))
        .await
        .unwrap();
    let app = env.app.clone();
    let id = a.id.clone();
    let waiter = tokio::spawn(async move { app.wait_for_decision(&id).await });
    env.app
        .cancel_task(&task, user("alice"), Some("changed my mind".into()))
        .await
        .unwrap();
    let r = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(r.outcome, Outcome::Withdrawn);
    let err = env
        .app
        .cancel_task(&task, user("alice"), None)
        .await
        .unwrap_err();
    assert!(matches!(
        err,
        AppError::Conflict {
            code: "task_finished",
            ..
        }
    ));
    let err = env
        .app
        .request_approval(tool_request(&task, "plan", 2, command("deploy")))
        .await
        .unwrap_err();
    assert!(matches!(
        err,
        AppError::Conflict {
            code: "task_finished",
            ..
        }
    ));
}

#[tokio::test]
async fn only_listed_deciders_and_only_people_decide() {
    let env = env("[projects.alpha]\ndeciders = [\"bob\"]\n").await;
    env.project("alpha").await;
    let task = env.task_with_step("alpha", "plan").await;
    let a = env
        .app
        .request_approval(tool_request(&task, "plan", 1, command("deploy")))
        .await
        .unwrap();
    let err = env
        .app
        .decide(
            &a.id,
            Decision::Approve,
            user("mallory"),
            None,
            Scope::default(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, AppError::Forbidden(_)), "{err}");
    let err = env
        .app
        .decide(
            &a.id,
            Decision::Approve,
            Actor::policy("sneaky"),
            None,
            Scope::default(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, AppError::Forbidden(_)), "{err}");
    assert_eq!(env.app.approval(&a.id).await.unwrap().state, "pending");
    let d = env
        .app
        .decide(
            &a.id,
            Decision::Approve,
            user("bob"),
            None,
            Scope::default(),
        )
        .await
        .unwrap();
    assert!(d.applied);
    assert_eq!(d.approval.decided_by.unwrap().name, "bob");
}

#[tokio::test]
async fn bad_requests_store_nothing() {
    let env = env("").await;
    env.project("alpha").await;
    let task = env.task_with_step("alpha", "plan").await;
    let before = env
        .app
        .journal()
        .events_after(0, 10_000)
        .await
        .unwrap()
        .len();
    let mut r = tool_request(&task, "plan", 1, command("x"));
    r.summary = "  ".into();
    assert!(
        matches!(env.app.request_approval(r).await.unwrap_err(), AppError::Invalid { field, .. } if field == "summary")
    );
    let r = tool_request(&task, "nope", 1, command("x"));
    assert!(
        matches!(env.app.request_approval(r).await.unwrap_err(), AppError::Invalid { field, .. } if field == "step_id")
    );
    let r = tool_request("t-missing", "plan", 1, command("x"));
    assert!(matches!(
        env.app.request_approval(r).await.unwrap_err(),
        AppError::NotFound { .. }
    ));
    assert_eq!(
        env.app
            .journal()
            .events_after(0, 10_000)
            .await
            .unwrap()
            .len(),
        before
    );
}

/// `gaffer approve` in another terminal wakes the agent waiting in the server:
/// two journals on one file stand for two processes.
#[tokio::test]
async fn a_decision_from_another_process_wakes_the_waiter() {
    use gaffer_store::{Durability, SqliteJournal};
    use std::sync::Arc;
    let env = env("").await;
    env.project("alpha").await;
    let task = env.task_with_step("alpha", "plan").await;
    let db = env.dir.path().join("gaffer.db");
    let here = SqliteJournal::open(&db, Durability::Normal).await.unwrap();
    here.follow_other_processes().await.unwrap();
    let here = gaffer_app::App::new(Arc::new(here), gaffer_app::Policy::default());
    let a = here
        .request_approval(tool_request(&task, "plan", 1, command("deploy")))
        .await
        .unwrap();
    let waiter = {
        let here = here.clone();
        let id = a.id.clone();
        tokio::spawn(async move { here.wait_for_decision(&id).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let elsewhere = SqliteJournal::open(&db, Durability::Normal).await.unwrap();
    let elsewhere = gaffer_app::App::new(Arc::new(elsewhere), gaffer_app::Policy::default());
    let started = Instant::now();
    elsewhere
        .decide(
            &a.id,
            Decision::Approve,
            user("bob"),
            None,
            Scope::default(),
        )
        .await
        .unwrap();
    let r = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the waiter was not woken by the other process's decision")
        .unwrap()
        .unwrap();
    assert_eq!(r.outcome, Outcome::Approved);
    eprintln!("cross-process wake after {:?}", started.elapsed());
}

/// A decision note or a cancel reason quoting a secret is stored, shown and told to
/// the agent with the secret replaced, like a request.
#[tokio::test]
async fn notes_and_cancel_reasons_are_stored_redacted() {
    let env = env("").await;
    env.project("alpha").await;
    let app = env.app.with_redaction(std::sync::Arc::new(|t: &str| {
        t.replace("hunter2-secret", "[REDACTED]")
    }));
    let task = env.task_with_step("alpha", "plan").await;
    let a = app
        .request_approval(tool_request(&task, "plan", 1, command("deploy")))
        .await
        .unwrap();
    app.decide(
        &a.id,
        Decision::Deny,
        user("bob"),
        Some("use hunter2-secret instead".into()),
        Scope::default(),
    )
    .await
    .unwrap();
    let told = app.wait_for_decision(&a.id).await.unwrap();
    assert_eq!(
        told.reason(),
        "denied by bob (test): use [REDACTED] instead"
    );
    let b = app
        .request_approval(tool_request(&task, "plan", 2, command("deploy")))
        .await
        .unwrap();
    app.cancel_task(&task, user("alice"), Some("leaked hunter2-secret".into()))
        .await
        .unwrap();
    let withdrawn = app.wait_for_decision(&b.id).await.unwrap();
    assert!(
        !withdrawn.reason().contains("hunter2"),
        "{}",
        withdrawn.reason()
    );
    let journal = format!("{:?}", app.journal().events_after(0, 1000).await.unwrap());
    assert!(!journal.contains("hunter2-secret"), "{journal}");
    assert!(journal.contains("leaked [REDACTED]"), "{journal}");
}

/// A key already answered for one kind of question is never the answer to another
/// kind asked at the same key: an agent whose tool requests are approved by a rule
/// must not be able to count up to the key of a question only a person answers.
#[tokio::test]
async fn a_question_of_another_kind_at_a_taken_key_is_refused_not_answered() {
    let env = env("").await;
    env.project("alpha").await;
    let task = env.task_with_step("alpha", "plan").await;
    let tool = env
        .app
        .request_approval(tool_request(&task, "plan", 1999, command("ls")))
        .await
        .unwrap();
    env.app
        .decide(
            &tool.id,
            Decision::Approve,
            user("bob"),
            None,
            Scope::default(),
        )
        .await
        .unwrap();
    let mut memory = tool_request(&task, "plan", 1999, Subject::default());
    memory.kind = ApprovalKind::Memory;
    memory.summary = "remember: nobody reviews the deploy script".into();
    let err = env.app.request_approval(memory).await.unwrap_err();
    assert!(
        matches!(&err, AppError::Conflict { code, .. } if *code == "approval_key_taken"),
        "{err:?}"
    );
    let said = err.to_string();
    assert!(said.contains("tool") && said.contains("memory"), "{said}");
    // The same kind asked again (a re-ask after a crash) still finds its answer.
    let again = env
        .app
        .request_approval(tool_request(&task, "plan", 1999, command("ls")))
        .await
        .unwrap();
    assert_eq!(again.id, tool.id);
}
