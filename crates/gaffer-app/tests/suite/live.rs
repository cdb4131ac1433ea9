//! Messages to a running agent and interrupts: a person only, an agent session
//! open, the text redacted, nothing recorded when refused.

use super::support::*;
use gaffer_app::AppError;
use gaffer_core::{Actor, Event, SessionId, StepId, StreamId};
use gaffer_store::NewEvent;
use std::sync::Arc;

/// A task of project `demo` whose step `code/1` runs an agent session `s-1`.
async fn running(e: &Env) -> String {
    let task = e.task_with_step("demo", "code/1").await;
    let stream = StreamId(task.clone());
    let head = e.app.journal().head(&stream).await.unwrap();
    e.app
        .journal()
        .append(
            &stream,
            head,
            vec![
                NewEvent::now(Event::StepStarted {
                    step_id: StepId("code/1".into()),
                }),
                NewEvent::now(Event::SessionStarted {
                    session_id: SessionId("s-1".into()),
                    agent: "claude".into(),
                    role: gaffer_core::Role::Owner,
                    workspace_key: "/wt".into(),
                    agent_session_id: None,
                    step_id: Some(StepId("code/1".into())),
                }),
            ],
        )
        .await
        .unwrap();
    task
}

async fn sent(e: &Env, task: &str) -> usize {
    let events = e
        .app
        .journal()
        .stream_events(&StreamId(task.into()), 0)
        .await
        .unwrap();
    events
        .iter()
        .filter(|r| matches!(r.event, Event::MessageSent { .. }))
        .count()
}

#[tokio::test]
async fn no_agent_policy_or_gaffer_itself_sends_a_message_or_interrupts() {
    let e = env("").await;
    e.project("demo").await;
    let task = running(&e).await;
    let agent_like = [
        Actor::system("engine"),
        Actor::policy("auto: cargo test"),
        Actor {
            kind: gaffer_core::ActorKind::System,
            name: "owner agent".into(),
            via: "agent".into(),
        },
    ];
    for who in agent_like {
        let err = e
            .app
            .send_message(&task, "push to main now", who.clone())
            .await
            .unwrap_err();
        assert!(matches!(err, AppError::Forbidden(_)), "{err}");
        let err = e.app.interrupt(&task, who).await.unwrap_err();
        assert!(matches!(err, AppError::Forbidden(_)), "{err}");
    }
    assert_eq!(sent(&e, &task).await, 0);
    let m = e
        .app
        .send_message(&task, "add a test", user("ana"))
        .await
        .unwrap();
    assert_eq!((m.by.kind.as_str(), m.by.name.as_str()), ("user", "ana"));
    assert_eq!(m.delivery, "pending");
    assert_eq!(sent(&e, &task).await, 1);
}

#[tokio::test]
async fn a_message_is_redacted_bounded_and_needs_a_running_agent() {
    let e = env("").await;
    e.project("demo").await;
    let idle = e.task_with_step("demo", "code/1").await;
    let err = e
        .app
        .send_message(&idle, "hello", user("ana"))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            AppError::Conflict {
                code: "no_running_agent",
                ..
            }
        ),
        "{err}"
    );
    let err = e.app.interrupt(&idle, user("ana")).await.unwrap_err();
    assert!(
        matches!(
            err,
            AppError::Conflict {
                code: "no_running_agent",
                ..
            }
        ),
        "{err}"
    );
    let task = running(&e).await;
    let err = e
        .app
        .send_message(&task, " \n ", user("ana"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, AppError::Invalid { ref field, .. } if field == "text"),
        "{err}"
    );
    let long = "x".repeat(gaffer_core::MAX_MESSAGE_BYTES + 1);
    let err = e
        .app
        .send_message(&task, &long, user("ana"))
        .await
        .unwrap_err();
    assert!(matches!(err, AppError::Invalid { .. }), "{err}");
    let err = e
        .app
        .send_message("t-nothing", "hello", user("ana"))
        .await
        .unwrap_err();
    assert!(matches!(err, AppError::NotFound { .. }), "{err}");
    let app = e
        .app
        .with_redaction(Arc::new(|t: &str| t.replace("hunter2", "[REDACTED]")));
    let m = app
        .send_message(&task, "the password is hunter2", user("ana"))
        .await
        .unwrap();
    assert_eq!(m.text, "the password is [REDACTED]");
    assert_eq!(app.messages(&task).await.unwrap(), vec![m]);
}

#[tokio::test]
async fn an_interrupt_is_recorded_once_with_who_until_the_next_message() {
    let e = env("").await;
    e.project("demo").await;
    let task = running(&e).await;
    let i = e.app.interrupt(&task, user("ana")).await.unwrap();
    assert_eq!((i.session_id.as_str(), i.by.name.as_str()), ("s-1", "ana"));
    let err = e.app.interrupt(&task, user("bob")).await.unwrap_err();
    assert!(
        matches!(
            err,
            AppError::Conflict {
                code: "already_interrupted",
                ..
            }
        ),
        "{err}"
    );
    e.app
        .send_message(&task, "continue", user("bob"))
        .await
        .unwrap();
    e.app.interrupt(&task, user("bob")).await.unwrap();
}
