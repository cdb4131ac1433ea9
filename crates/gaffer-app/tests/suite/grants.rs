//! "Allow for this task": a person's grant approves the same command again in the
//! same task, and nothing else.
use super::support::*;
use gaffer_app::{AppError, Scope, Subject};
use gaffer_core::{ApprovalKind, Decision, Event, StepId, TaskId};
use pretty_assertions::assert_eq;

/// The `approval_decided` event of approval `id`.
async fn decided(env: &Env, id: &str) -> Event {
    let all = env.app.journal().events_after(0, 1_000_000).await.unwrap();
    all.into_iter()
        .map(|e| e.event)
        .find(|e| matches!(e, Event::ApprovalDecided { approval_id, .. } if approval_id.as_str() == id))
        .unwrap_or_else(|| panic!("no decision of {id}"))
}

#[tokio::test]
async fn a_command_allowed_for_the_task_is_approved_again_there_and_nowhere_else() {
    let env = env("").await;
    env.project("alpha").await;
    let task = env.task_with_step("alpha", "code").await;
    let other_task = env.task_with_step("alpha", "code").await;
    let first = env
        .app
        .request_approval(tool_request(&task, "code", 1, command("cargo publish")))
        .await
        .unwrap();
    let d = env
        .app
        .allow_for_task(&first.id, user("ann"), None, Scope::default())
        .await
        .unwrap();
    assert!(d.applied);
    assert_eq!(d.approval.state, "approved");
    assert!(d.approval.for_task);
    assert!(matches!(
        decided(&env, &first.id).await,
        Event::ApprovalDecided {
            for_task: true,
            grant: None,
            ..
        }
    ));

    // The same command in the same task: approved when asked, by the grant.
    let again = env
        .app
        .request_approval(tool_request(&task, "code", 2, command("cargo publish")))
        .await
        .unwrap();
    assert_eq!(again.state, "approved");
    let by = again.decided_by.clone().unwrap();
    assert_eq!(
        (by.kind.as_str(), by.name.as_str(), by.via.as_str()),
        ("policy", "allowed for this task by ann via test", "policy")
    );
    assert!(!again.for_task, "a granted approval grants nothing itself");
    match decided(&env, &again.id).await {
        Event::ApprovalDecided {
            grant,
            for_task,
            decision,
            ..
        } => {
            assert_eq!(grant.map(|g| g.0), Some(first.id.clone()));
            assert!(!for_task);
            assert_eq!(decision, Decision::Approve);
        }
        other => panic!("{other:?}"),
    }
    assert!(env
        .app
        .wait_for_decision(&again.id)
        .await
        .unwrap()
        .approved());

    // Another command, a longer one, another tool, another task: still asked.
    let longer = env
        .app
        .request_approval(tool_request(
            &task,
            "code",
            3,
            command("cargo publish --force"),
        ))
        .await
        .unwrap();
    let other_tool = env
        .app
        .request_approval(tool_request(
            &task,
            "code",
            4,
            Subject {
                tool: Some("Bash".into()),
                ..command("cargo publish")
            },
        ))
        .await
        .unwrap();
    let elsewhere = env
        .app
        .request_approval(tool_request(
            &other_task,
            "code",
            1,
            command("cargo publish"),
        ))
        .await
        .unwrap();
    for a in [&longer, &other_tool, &elsewhere] {
        assert_eq!(a.state, "pending", "{a:?}");
    }
    // A ship approval of the same task is never covered, whatever its details say.
    let ship = env
        .app
        .request_approval(gaffer_app::ApprovalRequest {
            kind: ApprovalKind::Ship,
            ..tool_request(&task, "code", 5, command("cargo publish"))
        })
        .await
        .unwrap();
    assert_eq!(ship.state, "pending");

    // The audit trail names the grant and what it approved.
    let trail = env.app.audit(Some(&task)).await.unwrap();
    let actions: Vec<(&str, &str)> = trail
        .iter()
        .filter(|e| e.action.starts_with("approval_"))
        .map(|e| (e.action.as_str(), e.by.name.as_str()))
        .collect();
    assert_eq!(
        actions,
        [
            ("approval_allowed_for_task", "ann"),
            ("approval_approved", "allowed for this task by ann via test"),
        ]
    );
}

#[tokio::test]
async fn allow_for_task_is_refused_for_other_kinds_and_commandless_calls_with_nothing_recorded() {
    let env = env("").await;
    env.project("alpha").await;
    let task = env.task_with_step("alpha", "plan").await;
    let plan = env
        .app
        .request_approval(gaffer_app::ApprovalRequest {
            task_id: TaskId(task.clone()),
            step_id: StepId("plan".into()),
            attempt: 1,
            kind: ApprovalKind::Plan,
            summary: "Approve the plan?".into(),
            details: serde_json::json!({ "text": "1. do it" }),
            subject: Subject::default(),
        })
        .await
        .unwrap();
    let edit = env
        .app
        .request_approval(tool_request(
            &task,
            "plan",
            2,
            Subject {
                tool: Some("Edit".into()),
                paths: vec!["src/lib.rs".into()],
                ..Subject::default()
            },
        ))
        .await
        .unwrap();
    for a in [&plan, &edit] {
        let e = env
            .app
            .allow_for_task(&a.id, user("ann"), None, Scope::default())
            .await
            .unwrap_err();
        match e {
            AppError::Invalid { field, message } => {
                assert_eq!(field, "for_task");
                assert!(message.contains(&a.id), "{message}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(env.events_about(&a.id).await, ["approval_requested"]);
        assert_eq!(env.app.approval(&a.id).await.unwrap().state, "pending");
    }
}
