//! The audit trail: who decided what, from where, in journal order.

use super::support::*;
use gaffer_app::{AppError, Scope};
use gaffer_core::{Actor, ActorKind, Decision};
use pretty_assertions::assert_eq;

#[tokio::test]
async fn the_trail_names_who_decided_and_from_where_in_order() {
    let env = env("").await;
    env.project("alpha").await;
    let task = env.task_with_step("alpha", "plan").await;
    let a = env
        .app
        .request_approval(tool_request(&task, "plan", 1, command("make deploy")))
        .await
        .unwrap();
    env.app
        .decide(
            &a.id,
            Decision::Deny,
            Actor::user("ann", "api:ann"),
            Some("not on a Friday".into()),
            Scope::default(),
        )
        .await
        .unwrap();
    // A late second decision changes nothing, so it is not in the trail.
    env.app
        .decide(
            &a.id,
            Decision::Approve,
            Actor::user("bob", "discord"),
            None,
            Scope::default(),
        )
        .await
        .unwrap();
    env.app
        .cancel_task(
            &task,
            Actor::user("carol", "cli"),
            Some("wrong repo".into()),
        )
        .await
        .unwrap();
    env.app
        .set_auto_approve("alpha", true, Actor::user("root", "web:root"))
        .await
        .unwrap();

    let trail = env.app.audit(Some(&task)).await.unwrap();
    let seen: Vec<(String, String, String, Option<String>)> = trail
        .iter()
        .map(|e| {
            (
                e.action.clone(),
                e.by.name.clone(),
                e.by.via.clone(),
                e.note.clone(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            ("task_created".into(), "alice".into(), "test".into(), None),
            (
                "approval_denied".into(),
                "ann".into(),
                "api:ann".into(),
                Some("not on a Friday".into())
            ),
            ("task_cancelled".into(), "carol".into(), "cli".into(), None),
        ]
    );
    assert!(trail[1].subject.contains("make deploy") || trail[1].subject.contains(&a.id));
    assert_eq!(trail[2].subject, "wrong repo");
    assert!(trail.windows(2).all(|w| w[0].pos < w[1].pos));

    // The whole journal also has the project's toggle, by whom.
    let all = env.app.audit(None).await.unwrap();
    let toggle = all.iter().find(|e| e.action == "auto_approve_on").unwrap();
    assert_eq!(
        (toggle.by.kind, toggle.by.via.as_str()),
        (ActorKind::User, "web:root")
    );
    assert_eq!(all.len(), trail.len() + 1);
}

#[tokio::test]
async fn auditing_an_unknown_task_says_so() {
    let env = env("").await;
    match env.app.audit(Some("t-nope")).await {
        Err(AppError::NotFound { what, id }) => assert_eq!((what, id.as_str()), ("task", "t-nope")),
        other => panic!("{other:?}"),
    }
}
