//! Requests, threads, approvals, restarts, reconnects and rate limits, end to end.
use super::support::*;
use gaffer_app::Scope;
use gaffer_core::{Actor, Decision, Event};
use gaffer_store::Journal;
use pretty_assertions::assert_eq;
use serde_json::json;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

async fn decided_events(w: &World, approval: &str) -> Vec<(Decision, String)> {
    w.journal
        .events_after(0, 1_000_000)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.event {
            Event::ApprovalDecided {
                approval_id,
                decision,
                by,
                ..
            } if approval_id.0 == approval => Some((decision, by.name)),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_request_in_a_room_runs_to_done_with_its_thread_updated() {
    let w = World::new().await;
    let (engine, scenarios) = engine(&w, |_| {});
    script_plan(&scenarios);
    script(
        &scenarios,
        "owner",
        vec![json!({ "steps": [
        { "write_file": { "path": "README.md", "content": "# demo\n\nA demo project.\n\n## Installation\n\n    cargo install demo\n" } },
        { "say": "wrote README.md" }] })],
    );
    script(
        &scenarios,
        "reviewer",
        vec![say("```json\n{\"verdict\": \"done\"}\n```")],
    );
    let stop = CancellationToken::new();
    let workers = {
        let (engine, stop) = (engine.clone(), stop.clone());
        tokio::spawn(async move {
            engine
                .work(
                    &gaffer_engine::this_process(std::time::Duration::from_secs(30)),
                    gaffer_engine::Concurrency {
                        workers: 1,
                        per_project: 1,
                    },
                    stop,
                )
                .await
        })
    };

    // The slash commands are registered; anyone in the room may ask.
    let names: Vec<String> = w
        .discord
        .commands()
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        names,
        ["task", "status", "tasks", "cancel", "approve", "deny", "auto", "projects"]
    );
    w.discord
        .say(ROOM, &eve(), "Add an installation section to README");
    w.header_with("Add an installation section to README").await;
    let task = w.app.tasks(&Default::default()).await.unwrap()[0].clone();
    assert_eq!(task.request, "Add an installation section to README");
    assert_eq!(task.created_by, "eve via discord");
    let thread = w.thread_of(&task.id).await;

    // The plan waits for a human: one message with Allow / Deny in the thread.
    let pending = w
        .discord
        .wait_for("the plan approval", WAIT, |d| {
            d.messages(&thread)
                .into_iter()
                .find(|m| m.content.contains("**Approval**") && !m.buttons().is_empty())
        })
        .await;
    let allow = pending.buttons()[0].clone();
    assert!(allow.starts_with("gaffer:allow:ap-"), "{allow}");
    let press = w.discord.press(&pending.id, &ana(), &allow);
    let answer = w
        .discord
        .wait_for("the press's answer", WAIT, |d| d.callback(&press))
        .await;
    assert_eq!(answer.kind, 7, "{answer:?}");
    assert!(
        answer.content().contains("approved by ana (via discord)"),
        "{}",
        answer.content()
    );

    let done = w.note_starting(&thread, "✅ Done").await;
    assert!(done.content.contains("tokens"), "{}", done.content);
    let detail = w.app.task(&task.id).await.unwrap();
    assert_eq!(detail.task.stage, "done");

    // Plan, review, check and ship each posted once; the status and header edited in place.
    for note in [
        "📝 **Plan**",
        "🔍 Review: **done**",
        "✅ Check `grep",
        "🚀 Shipped on branch `gaffer/",
    ] {
        assert_eq!(
            w.count(&thread, note),
            1,
            "{note}: {:#?}",
            w.discord.messages(&thread)
        );
    }
    assert!(w
        .discord
        .messages(&thread)
        .iter()
        .any(|m| m.content.contains("Add an installation section — write it")));
    let status = w.discord.messages(&thread).into_iter().next().unwrap();
    assert!(
        status.content.starts_with("✅ **done**"),
        "{}",
        status.content
    );
    assert!(
        status.content.contains("`ship`") && status.edits > 0,
        "{status:?}"
    );
    let header = w.discord.message(&thread).unwrap();
    assert!(
        header.content.starts_with("✅ **done**") && header.edits > 0,
        "{header:?}"
    );
    assert_eq!(w.discord.messages(ROOM).len(), 1, "one header in the room");
    let approval = w.discord.message(&pending.id).unwrap();
    assert!(
        approval.buttons().is_empty() && approval.content.contains("approved by ana (via discord)")
    );
    let ap_id = allow.trim_start_matches("gaffer:allow:");
    assert_eq!(
        decided_events(&w, ap_id).await,
        [(Decision::Approve, "ana".to_owned())]
    );

    stop.cancel();
    workers.await.unwrap().unwrap();
}

#[tokio::test]
async fn an_approval_decided_through_the_http_api_is_edited_in_discord() {
    let w = World::new().await;
    let task = w.task("Publish the crate").await;
    let thread = w.thread_of(&task).await;
    let a = w.approval(&task, "publish", 1).await;
    let m = w.approval_message(&thread, &a.id).await;
    assert_eq!(
        m.buttons(),
        [
            format!("gaffer:allow:{}", a.id),
            format!("gaffer:allow-task:{}", a.id),
            format!("gaffer:deny:{}", a.id)
        ]
    );
    assert!(m.content.contains("cargo publish"), "{}", m.content);

    let local = gaffer_server::LocalSecret::generate("ana");
    let server = gaffer_server::Server::bind(
        w.app.clone(),
        gaffer_server::ServerConfig::new(
            std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
            local.clone(),
        ),
    )
    .await
    .unwrap();
    let addr = server.local_addr().unwrap();
    let stop = CancellationToken::new();
    let serving = {
        let stop = stop.clone();
        tokio::spawn(async move { server.run(async move { stop.cancelled().await }).await })
    };
    let resp = reqwest::Client::new()
        .post(format!("http://{addr}/api/approvals/{}/decision", a.id))
        .bearer_auth(local.expose())
        .json(&json!({ "decision": "deny", "note": "not today" }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "{}", resp.text().await.unwrap());

    let edited = w
        .discord
        .wait_for("the approval message to be edited", WAIT, |d| {
            d.message(&m.id).filter(|m| m.buttons().is_empty())
        })
        .await;
    assert!(
        edited
            .content
            .contains("denied by ana (via api:local-secret)"),
        "{}",
        edited.content
    );
    assert!(edited.content.contains("not today"), "{}", edited.content);

    // A press after the decision shows the recorded one and changes nothing.
    let press = w
        .discord
        .press(&m.id, &ana(), &format!("gaffer:allow:{}", a.id));
    let answer = w
        .discord
        .wait_for("the late press's answer", WAIT, |d| d.callback(&press))
        .await;
    assert!(answer.ephemeral(), "{answer:?}");
    assert!(
        answer.content().contains("Already denied by ana"),
        "{}",
        answer.content()
    );
    assert_eq!(decided_events(&w, &a.id).await.len(), 1);
    assert_eq!(w.app.approval(&a.id).await.unwrap().state, "denied");
    stop.cancel();
    serving.await.unwrap().unwrap();
}

#[tokio::test]
async fn allow_and_deny_pressed_at_once_record_one_decision() {
    let w = World::new().await;
    let task = w.task("Publish the crate").await;
    let thread = w.thread_of(&task).await;
    let a = w.approval(&task, "publish", 1).await;
    let m = w.approval_message(&thread, &a.id).await;
    let allow = w
        .discord
        .press(&m.id, &ana(), &format!("gaffer:allow:{}", a.id));
    let deny = w
        .discord
        .press(&m.id, &bob(), &format!("gaffer:deny:{}", a.id));
    let answers = w
        .discord
        .wait_for("both answers", WAIT, |d| {
            Some((d.callback(&allow)?, d.callback(&deny)?))
        })
        .await;

    let decided = decided_events(&w, &a.id).await;
    assert_eq!(decided.len(), 1, "{decided:?}");
    let (winner, loser) = if decided[0].1 == "ana" {
        (answers.0, answers.1)
    } else {
        (answers.1, answers.0)
    };
    assert_eq!(
        winner.kind, 7,
        "the winner's press updates the message: {winner:?}"
    );
    assert!(
        loser.ephemeral() && loser.content().contains("the first decision stands"),
        "{loser:?}"
    );
    let state = w.app.approval(&a.id).await.unwrap().state;
    assert_eq!(
        state,
        if decided[0].0 == Decision::Approve {
            "approved"
        } else {
            "denied"
        }
    );
    let shown = w
        .discord
        .wait_for("the message to show the decision", WAIT, |d| {
            d.message(&m.id).filter(|m| {
                m.buttons().is_empty()
                    && m.content.contains(&format!("{state} by {}", decided[0].1))
            })
        })
        .await;
    assert!(shown.content.contains("(via discord)"));
}

#[tokio::test]
async fn a_non_approver_is_refused_and_nothing_is_decided() {
    let w = World::new().await;
    let task = w.task("Publish the crate").await;
    let thread = w.thread_of(&task).await;
    let a = w.approval(&task, "publish", 1).await;
    let m = w.approval_message(&thread, &a.id).await;
    let press = w
        .discord
        .press(&m.id, &eve(), &format!("gaffer:allow:{}", a.id));
    let answer = w
        .discord
        .wait_for("the refusal", WAIT, |d| d.callback(&press))
        .await;
    assert!(answer.ephemeral() && answer.kind == 4, "{answer:?}");
    assert!(
        answer.content().contains("Only configured approvers"),
        "{}",
        answer.content()
    );
    let slash = w.discord.slash(ROOM, &eve(), "approve", &[("id", &a.id)]);
    let answer = w
        .discord
        .wait_for("the refusal", WAIT, |d| d.callback(&slash))
        .await;
    assert!(
        answer.ephemeral() && answer.content().contains("Nothing was decided"),
        "{answer:?}"
    );

    assert_eq!(w.app.approval(&a.id).await.unwrap().state, "pending");
    assert!(decided_events(&w, &a.id).await.is_empty());
    assert_eq!(w.discord.message(&m.id).unwrap().buttons().len(), 3);

    // An approver's /approve in the room decides it, scoped to the room's project.
    let slash = w.discord.slash(ROOM, &bob(), "approve", &[("id", &a.id)]);
    let answer = w
        .discord
        .wait_for("the decision", WAIT, |d| d.callback(&slash))
        .await;
    assert!(
        !answer.ephemeral() && answer.content().contains("approved by bob (via discord)"),
        "{answer:?}"
    );
    w.discord
        .wait_for("the buttons to go", WAIT, |d| {
            d.message(&m.id).filter(|m| m.buttons().is_empty())
        })
        .await;
}

#[tokio::test]
async fn a_restart_mid_task_continues_the_same_thread_without_duplicate_messages() {
    let mut w = World::new().await;
    let task = w.task("Publish the crate").await;
    let thread = w.thread_of(&task).await;
    let first = w.approval(&task, "publish", 1).await;
    let m = w.approval_message(&thread, &first.id).await;

    w.stop_adapter().await;
    // While the adapter is down: decided from the CLI, and a new question asked.
    w.app
        .decide(
            &first.id,
            Decision::Approve,
            Actor::user("carol", "cli"),
            None,
            Scope::default(),
        )
        .await
        .unwrap();
    let second = w.approval(&task, "publish", 2).await;
    w.start_adapter().await;

    let edited = w
        .discord
        .wait_for("the old approval to be edited", WAIT, |d| {
            d.message(&m.id).filter(|m| m.buttons().is_empty())
        })
        .await;
    assert!(
        edited.content.contains("approved by carol (via cli)"),
        "{}",
        edited.content
    );
    let m2 = w.approval_message(&thread, &second.id).await;
    assert_eq!(m2.buttons().len(), 3);
    // Asking again for the same key returns the same approval: no second message.
    assert_eq!(w.approval(&task, "publish", 2).await.id, second.id);
    let press = w
        .discord
        .press(&m2.id, &ana(), &format!("gaffer:allow:{}", second.id));
    w.discord
        .wait_for("the press's answer", WAIT, |d| d.callback(&press))
        .await;

    assert_eq!(w.discord.threads().len(), 1, "the same thread continues");
    assert_eq!(w.discord.messages(ROOM).len(), 1, "one header");
    assert_eq!(w.count(&thread, &first.id), 1);
    assert_eq!(w.count(&thread, &second.id), 1);
    assert_eq!(
        w.discord
            .messages(&thread)
            .iter()
            .filter(|m| m.content.contains("**Approval**"))
            .count(),
        2
    );
    assert_eq!(
        w.discord.gateway_logins(),
        (2, 0),
        "a restarted process identifies afresh"
    );
}

#[tokio::test]
async fn a_dropped_gateway_connection_resumes_and_replays_what_was_missed() {
    let w = World::new().await;
    w.discord.drop_connection();
    // Sent while the connection is down: replayed on Resume.
    w.discord.say(ROOM, &ana(), "Write a changelog");
    w.discord
        .wait_for("a resumed session", WAIT, |d| {
            (d.gateway_logins() == (1, 1) && d.connected()).then_some(())
        })
        .await;
    w.header_with("Write a changelog").await;
    let tasks = w.app.tasks(&Default::default()).await.unwrap();
    assert_eq!(tasks.len(), 1);
    assert_eq!(tasks[0].request, "Write a changelog");

    // op 7 Reconnect: resumes too, and commands still work afterwards.
    w.discord.request_reconnect();
    w.discord
        .wait_for("a second resume", WAIT, |d| {
            (d.gateway_logins() == (1, 2) && d.connected()).then_some(())
        })
        .await;
    let slash = w.discord.slash(ROOM, &eve(), "tasks", &[]);
    let answer = w
        .discord
        .wait_for("the task list", WAIT, |d| d.callback(&slash))
        .await;
    assert!(
        answer.content().contains(&tasks[0].id),
        "{}",
        answer.content()
    );
    assert_eq!(
        w.app.tasks(&Default::default()).await.unwrap().len(),
        1,
        "nothing handled twice"
    );

    // Heartbeats carry the last sequence number seen (READY, the message, RESUMED, …).
    let beats = w
        .discord
        .wait_for("heartbeats after the resumes", WAIT, |d| {
            let h = d.heartbeats();
            h.iter()
                .any(|b| b.as_u64().is_some_and(|s| s >= 3))
                .then_some(h)
        })
        .await;
    assert!(
        beats.iter().all(|b| b.as_u64().is_some_and(|s| s >= 1)),
        "{beats:?}"
    );

    // op 9 Invalid Session: the session cannot be resumed; a fresh Identify, and
    // messages are handled again (the new task's header shows in the room).
    w.discord.invalidate_session();
    w.discord
        .wait_for("a fresh identify", WAIT, |d| {
            (d.gateway_logins() == (2, 2) && d.connected()).then_some(())
        })
        .await;
    w.discord.say(ROOM, &ana(), "Write a second changelog");
    w.header_with("Write a second changelog").await;
    assert_eq!(w.app.tasks(&Default::default()).await.unwrap().len(), 2);
}

#[tokio::test]
async fn a_429_is_retried_after_retry_after_and_buckets_are_respected() {
    let w = World::new().await;
    w.discord.fail_next_posts_with_429(1, 0.6);
    let task = w.task("One").await;
    w.thread_of(&task).await;
    let (throttled_at, retry) = w.discord.throttled()[0];
    assert_eq!(retry, Duration::from_millis(600));
    let posted = w.discord.posts_at()[0];
    assert!(
        posted >= throttled_at + retry,
        "retried {:?} after the 429",
        posted - throttled_at
    );
    assert_eq!(w.discord.messages(ROOM).len(), 1, "posted once");

    // Two posts a second per channel: three new tasks' headers must wait for the reset.
    w.discord.limit_messages(2, Duration::from_secs(1));
    let mut ids = Vec::new();
    for n in 0..3 {
        ids.push(w.task(&format!("Task {n}")).await);
    }
    for id in &ids {
        w.thread_of(id).await;
    }
    assert_eq!(w.discord.messages(ROOM).len(), 4);
    assert_eq!(
        w.discord.violations(),
        0,
        "the client waited for the bucket's reset"
    );
}

#[tokio::test]
async fn allow_for_this_task_approves_the_same_command_again_in_that_task_only() {
    let w = World::new().await;
    let task = w.task("Publish the crate").await;
    let other_task = w.task("Publish another crate").await;
    let thread = w.thread_of(&task).await;
    let a = w.approval(&task, "publish", 1).await;
    let m = w.approval_message(&thread, &a.id).await;
    let allow_task = format!("gaffer:allow-task:{}", a.id);
    assert!(m.buttons().contains(&allow_task), "{:?}", m.buttons());

    // Only approvers may grant.
    let refused = w.discord.press(&m.id, &eve(), &allow_task);
    let answer = w
        .discord
        .wait_for("the refusal", WAIT, |d| d.callback(&refused))
        .await;
    assert!(answer.ephemeral() && answer.content().contains("Only configured approvers"));
    assert_eq!(w.app.approval(&a.id).await.unwrap().state, "pending");

    let press = w.discord.press(&m.id, &ana(), &allow_task);
    let answer = w
        .discord
        .wait_for("the press's answer", WAIT, |d| d.callback(&press))
        .await;
    assert_eq!(answer.kind, 7, "{answer:?}");
    assert!(
        answer
            .content()
            .contains("approved for this task by ana (via discord)"),
        "{}",
        answer.content()
    );
    assert_eq!(
        w.discord.message(&m.id).unwrap().buttons(),
        Vec::<String>::new()
    );
    let granted = w.app.approval(&a.id).await.unwrap();
    assert!(
        granted.for_task && granted.state == "approved",
        "{granted:?}"
    );

    // The same command later in the task: approved by the grant, nobody asked.
    let again = w.approval(&task, "publish", 2).await;
    assert_eq!(again.state, "approved");
    assert_eq!(
        again.decided_by.map(|d| d.name).as_deref(),
        Some("allowed for this task by ana via discord")
    );
    // Another command in the task, or the same command in another task: asked.
    let other_command = w
        .approval_to_run(&task, "publish", 3, "cargo publish --allow-dirty")
        .await;
    let m3 = w.approval_message(&thread, &other_command.id).await;
    assert_eq!(m3.buttons().len(), 3);
    let elsewhere = w.approval(&other_task, "publish", 1).await;
    assert_eq!(elsewhere.state, "pending");
    let other_thread = w.thread_of(&other_task).await;
    w.approval_message(&other_thread, &elsewhere.id).await;
}

#[tokio::test]
async fn slash_approve_takes_a_note_and_for_task_and_cancel_takes_a_reason() {
    let w = World::new().await;
    let task = w.task("Publish the crate").await;
    let thread = w.thread_of(&task).await;
    let a = w.approval(&task, "publish", 1).await;
    w.approval_message(&thread, &a.id).await;

    let slash = w.discord.slash_with(
        ROOM,
        &bob(),
        "approve",
        &[
            ("id", json!(a.id)),
            ("note", json!("  fine for this crate ")),
            ("for_task", json!(true)),
        ],
    );
    let answer = w
        .discord
        .wait_for("the decision", WAIT, |d| d.callback(&slash))
        .await;
    assert!(
        !answer.ephemeral()
            && answer
                .content()
                .contains("approved for this task by bob (via discord)"),
        "{answer:?}"
    );
    let granted = w.app.approval(&a.id).await.unwrap();
    assert!(granted.for_task, "{granted:?}");
    assert_eq!(granted.note.as_deref(), Some("fine for this crate"));
    // The grant covers the same command later in this task.
    let again = w.approval(&task, "publish", 2).await;
    assert_eq!(again.state, "approved");

    // for_task false is a plain approval; /deny takes a note too.
    let b = w
        .approval_to_run(&task, "publish", 3, "cargo publish --allow-dirty")
        .await;
    let slash = w.discord.slash_with(
        ROOM,
        &bob(),
        "deny",
        &[("id", json!(b.id)), ("note", json!("not dirty"))],
    );
    w.discord
        .wait_for("the denial", WAIT, |d| d.callback(&slash))
        .await;
    let denied = w.app.approval(&b.id).await.unwrap();
    assert_eq!(
        (
            denied.state.as_str(),
            denied.for_task,
            denied.note.as_deref()
        ),
        ("denied", false, Some("not dirty"))
    );

    let slash = w.discord.slash_with(
        ROOM,
        &bob(),
        "cancel",
        &[("id", json!(task)), ("reason", json!("wrong crate"))],
    );
    w.discord
        .wait_for("the cancel", WAIT, |d| d.callback(&slash))
        .await;
    let reasons: Vec<Option<String>> = w
        .journal
        .events_after(0, 1_000_000)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.event {
            Event::TaskCancelled { reason, .. } if e.stream_id == task => Some(reason),
            _ => None,
        })
        .collect();
    assert_eq!(reasons, vec![Some("wrong crate".to_owned())]);
}
