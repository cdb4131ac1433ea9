//! A reply in a task's thread: an approver's becomes a message to the task's
//! agent (journaled as theirs, via discord); anyone else's is refused and told so.

use super::support::*;
use gaffer_core::{Event, Intent, SessionId, StepId, StreamId};
use gaffer_store::{Journal, NewEvent};

/// The task's thread, once the adapter has recorded it (its status message is
/// posted after the record): a reply before that is in a channel it does not know yet.
async fn recorded_thread(w: &World, task: &str) -> String {
    let thread = w.thread_of(task).await;
    w.discord
        .wait_for("the thread's status message", WAIT, |d| {
            (!d.messages(&thread).is_empty()).then_some(())
        })
        .await;
    thread
}

/// Give `task` a running agent session, as the engine does when its owner starts.
async fn running(w: &World, task: &str) {
    let stream = StreamId(task.into());
    let head = w.journal.head(&stream).await.unwrap();
    let step = StepId("code/1".into());
    w.journal
        .append(
            &stream,
            head,
            vec![
                NewEvent::now(Event::StepIntentRecorded {
                    step_id: step.clone(),
                    name: "code".into(),
                    intent: Intent::NonIdempotent,
                    depends_on: vec![],
                    input: serde_json::Value::Null,
                }),
                NewEvent::now(Event::StepStarted {
                    step_id: step.clone(),
                }),
                NewEvent::now(Event::SessionStarted {
                    session_id: SessionId("s-1".into()),
                    agent: "claude".into(),
                    role: gaffer_core::Role::Owner,
                    workspace_key: "/wt".into(),
                    agent_session_id: None,
                    step_id: Some(step),
                }),
            ],
        )
        .await
        .unwrap();
}

/// The messages sent to `task`'s agent: (text, who, via).
async fn sent(w: &World, task: &str) -> Vec<(String, String, String)> {
    w.journal
        .stream_events(&StreamId(task.into()), 0)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|r| match r.event {
            Event::MessageSent { text, by, .. } => Some((text, by.name, by.via)),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_thread_reply_by_an_approver_reaches_the_agent_and_a_non_approvers_does_not() {
    let w = World::new().await;
    let task = w.task("tidy the README").await;
    let thread = recorded_thread(&w, &task).await;
    running(&w, &task).await;

    // Not an approver: refused, told so, nothing recorded.
    let eves = w
        .discord
        .say(&thread, &eve(), "delete the tests, they are slow");
    w.discord
        .wait_for("the refusal", WAIT, |d| {
            d.messages(&thread)
                .into_iter()
                .find(|m| m.content.contains("Only configured approvers"))
        })
        .await;
    // It answers eve's message.
    let answer = w
        .discord
        .received()
        .into_iter()
        .find(|r| String::from_utf8_lossy(&r.body).contains("Only configured approvers"))
        .unwrap();
    let answer: serde_json::Value = serde_json::from_slice(&answer.body).unwrap();
    assert_eq!(answer["message_reference"]["message_id"], eves.as_str());
    assert_eq!(sent(&w, &task).await, vec![]);

    // An approver (by user id) and one by role: each reaches the agent as theirs.
    w.discord
        .say(&thread, &ana(), "use the staging database, not prod");
    w.discord.say(&thread, &bob(), "and keep the changelog");
    w.discord
        .wait_for("two confirmations", WAIT, |d| {
            let n = d
                .messages(&thread)
                .iter()
                .filter(|m| m.content.contains("Sent to the agent"))
                .count();
            (n == 2).then_some(())
        })
        .await;
    let mut got = sent(&w, &task).await;
    got.sort();
    assert_eq!(
        got,
        vec![
            (
                "and keep the changelog".to_owned(),
                "bob".to_owned(),
                "discord".to_owned()
            ),
            (
                "use the staging database, not prod".to_owned(),
                "ana".to_owned(),
                "discord".to_owned()
            ),
        ]
    );
    let pending = w.app.messages(&task).await.unwrap();
    assert_eq!(pending.len(), 2, "{pending:?}");

    // A message in a channel that is neither a room nor a task's thread is ignored.
    let before = w.discord.received().len();
    w.discord.say("555", &ana(), "hello?");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(sent(&w, &task).await.len(), 2);
    assert!(w
        .discord
        .received()
        .iter()
        .skip(before)
        .all(|r| !r.path.contains("/channels/555/")));
}

#[tokio::test]
async fn the_agents_transcript_reaches_its_thread_in_batches_within_discords_limit() {
    let w = World::new().await;
    let task = w.task("tidy the README").await;
    let thread = recorded_thread(&w, &task).await;
    running(&w, &task).await;
    let stream = StreamId(task.clone());
    for i in 1..=150 {
        let head = w.journal.head(&stream).await.unwrap();
        let activity = if i % 50 == 0 {
            serde_json::json!({ "type": "assistant_text", "text": format!("step {i} done, going on") })
        } else {
            serde_json::json!({ "type": "tool_call", "name": "Bash", "input": { "command": format!("make test-{i:03}") } })
        };
        w.journal
            .append(
                &stream,
                head,
                vec![NewEvent::now(Event::AgentActivity {
                    step_id: StepId("code/1".into()),
                    activity,
                })],
            )
            .await
            .unwrap();
    }
    w.discord
        .wait_for("the last line in the thread", WAIT, |d| {
            d.messages(&thread)
                .into_iter()
                .find(|m| m.content.contains("step 150 done"))
        })
        .await;
    let transcript: Vec<_> = w
        .discord
        .messages(&thread)
        .into_iter()
        .filter(|m| m.content.contains("↳ **Bash**") || m.content.contains("💬"))
        .collect();
    assert!(
        transcript.len() <= 10,
        "150 lines in {} messages: not batched",
        transcript.len()
    );
    let mut lines = Vec::new();
    for m in &transcript {
        assert!(
            m.content.chars().count() <= 2000,
            "{} chars",
            m.content.len()
        );
        lines.extend(m.content.lines().map(str::to_owned));
    }
    let expected: Vec<String> = (1..=150)
        .map(|i| {
            if i % 50 == 0 {
                format!("💬 step {i} done, going on")
            } else {
                format!("↳ **Bash** `make test-{i:03}`")
            }
        })
        .collect();
    assert_eq!(lines, expected, "every line once, in order");
}

#[tokio::test]
async fn steering_from_elsewhere_shows_in_the_thread_and_a_thread_reply_is_not_repeated() {
    let w = World::new().await;
    let task = w.task("tidy the README").await;
    let thread = recorded_thread(&w, &task).await;
    running(&w, &task).await;
    w.discord
        .say(&thread, &ana(), "use the staging database, not prod");
    w.discord
        .wait_for("the confirmation", WAIT, |d| {
            d.messages(&thread)
                .into_iter()
                .find(|m| m.content.contains("Sent to the agent"))
        })
        .await;
    // From the page and the CLI: the people in the thread see them too.
    w.app
        .send_message(
            &task,
            "keep the changelog too",
            gaffer_core::Actor::user("bo", "web"),
        )
        .await
        .unwrap();
    w.app
        .interrupt(&task, gaffer_core::Actor::user("bo", "cli"))
        .await
        .unwrap();
    w.discord
        .wait_for("the page's message and the interrupt", WAIT, |d| {
            let all: Vec<String> = d.messages(&thread).into_iter().map(|m| m.content).collect();
            (all.iter()
                .any(|c| c.contains("✉ **bo** (web) to the agent: keep the changelog too"))
                && all.iter().any(|c| {
                    c.contains("‖ **bo** (cli) stopped the turn; the agent waits for a message")
                }))
            .then_some(())
        })
        .await;
    // ana's reply is in the thread as she wrote it: gaffer does not post it again.
    let repeated: Vec<String> = w
        .discord
        .messages(&thread)
        .into_iter()
        .map(|m| m.content)
        .filter(|c| c.contains("use the staging database"))
        .collect();
    assert_eq!(repeated, Vec::<String>::new());
}
