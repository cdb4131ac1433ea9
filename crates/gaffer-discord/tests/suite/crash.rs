//! A crash between Discord making a message and the adapter recording its id:
//! after the restart each message exists once.
use super::support::*;
use gaffer_app::Scope;
use gaffer_core::{Actor, Decision};
use gaffer_discord::rest::Rest;
use pretty_assertions::assert_eq;
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn a_crash_after_posting_the_header_leaves_one_header_showing_the_current_stage() {
    let mut w = World::new().await;
    w.discord.stall_next_post("Publish the crate");
    let task = w.task("Publish the crate").await;
    w.discord
        .wait_for("the header's post to stall", WAIT, |d| {
            (d.stalled() == 1).then_some(())
        })
        .await;
    w.crash_adapter().await;
    assert_eq!(w.discord.messages(ROOM).len(), 1, "Discord made the header");
    // While the adapter is down the task moves on: the header must say so.
    w.app
        .cancel_task(&task, Actor::user("carol", "cli"), None)
        .await
        .unwrap();

    w.start_adapter().await;
    let thread = w.thread_of(&task).await;
    w.discord
        .wait_for("the final note", WAIT, |d| {
            d.messages(&thread)
                .iter()
                .any(|m| m.content.starts_with("⏹️ cancelled"))
                .then_some(())
        })
        .await;
    assert_eq!(w.discord.messages(ROOM).len(), 1, "one header");
    assert_eq!(
        w.discord.nonce_hits(),
        1,
        "the repost was answered by its nonce"
    );
    let header = w.discord.message(&thread).unwrap();
    assert!(
        header.content.starts_with("⏹️ **cancelled**") && header.edits == 1,
        "{header:?}"
    );
}

#[tokio::test]
async fn a_crash_after_posting_a_note_leaves_one_note() {
    let mut w = World::new().await;
    let task = w.task("Publish the crate").await;
    let thread = w.thread_of(&task).await;
    w.discord
        .wait_for("the status message", WAIT, |d| {
            (!d.messages(&thread).is_empty()).then_some(())
        })
        .await;
    w.discord.stall_next_post("⏹️ cancelled");
    w.app
        .cancel_task(&task, Actor::user("carol", "cli"), None)
        .await
        .unwrap();
    w.discord
        .wait_for("the note's post to stall", WAIT, |d| {
            (d.stalled() == 1).then_some(())
        })
        .await;
    w.crash_adapter().await;

    w.start_adapter().await;
    w.discord
        .wait_for("the repost to be answered by its nonce", WAIT, |d| {
            (d.nonce_hits() == 1).then_some(())
        })
        .await;
    assert_eq!(w.count(&thread, "⏹️ cancelled"), 1);
    assert_eq!(w.discord.messages(ROOM).len(), 1, "one header");
    assert_eq!(
        w.count(&thread, "**cancelled**"),
        1,
        "one status message: {:#?}",
        w.discord.messages(&thread)
    );
}

#[tokio::test]
async fn a_crash_after_posting_an_approval_leaves_one_message_even_after_the_nonce_window() {
    let mut w = World::new().await;
    let task = w.task("Publish the crate").await;
    let thread = w.thread_of(&task).await;
    w.discord.stall_next_post("**Approval**");
    let a = w.approval(&task, "publish", 1).await;
    w.discord
        .wait_for("the approval's post to stall", WAIT, |d| {
            (d.stalled() == 1).then_some(())
        })
        .await;
    w.crash_adapter().await;
    let orphan = w.approval_message(&thread, &a.id).await;
    assert_eq!(
        orphan.buttons().len(),
        3,
        "live buttons, id unknown to gaffer"
    );
    // The restart comes after Discord forgot the nonce, and the approval was
    // decided from the CLI meanwhile.
    w.discord.set_nonce_window(Duration::ZERO);
    w.app
        .decide(
            &a.id,
            Decision::Deny,
            Actor::user("carol", "cli"),
            None,
            Scope::default(),
        )
        .await
        .unwrap();

    w.start_adapter().await;
    let settled = w
        .discord
        .wait_for("the orphan to be adopted and edited", WAIT, |d| {
            d.message(&orphan.id).filter(|m| m.buttons().is_empty())
        })
        .await;
    assert!(
        settled.content.contains("denied by carol (via cli)"),
        "{}",
        settled.content
    );
    assert_eq!(
        w.count(&thread, &a.id),
        1,
        "{:#?}",
        w.discord.messages(&thread)
    );

    // A second approval after the restart is posted normally, once.
    let b = w.approval(&task, "publish", 2).await;
    let m = w.approval_message(&thread, &b.id).await;
    assert_eq!(m.buttons().len(), 3);
    assert_eq!(w.count(&thread, &b.id), 1);
    assert_eq!(w.count(&thread, "**Approval**"), 2);
}

#[tokio::test]
async fn discord_answers_a_repeated_nonce_with_the_first_message_within_its_window() {
    let w = World::new().await;
    let rest = Rest::new(&w.discord.api_url(), TOKEN).unwrap();
    let body = |text: &str| json!({ "content": text });
    let first = rest
        .create_message("300", &body("one"), &[], Some("nonce-a"))
        .await
        .unwrap();
    let again = rest
        .create_message("300", &body("one, changed"), &[], Some("nonce-a"))
        .await
        .unwrap();
    assert_eq!(again["id"], first["id"]);
    assert_eq!(again["content"], "one", "the first message, unchanged");
    // Another channel, or another nonce: a new message.
    let elsewhere = rest
        .create_message("301", &body("one"), &[], Some("nonce-a"))
        .await
        .unwrap();
    let other = rest
        .create_message("300", &body("two"), &[], Some("nonce-b"))
        .await
        .unwrap();
    assert_ne!(elsewhere["id"], first["id"]);
    assert_ne!(other["id"], first["id"]);
    assert_eq!(w.discord.messages("300").len(), 2);
    // After the window the nonce is forgotten.
    w.discord.set_nonce_window(Duration::ZERO);
    let late = rest
        .create_message("300", &body("one"), &[], Some("nonce-a"))
        .await
        .unwrap();
    assert_ne!(late["id"], first["id"]);
    // A nonce over 25 characters is refused.
    let long = rest
        .create_message("300", &body("x"), &[], Some(&"n".repeat(26)))
        .await
        .unwrap_err();
    assert_eq!(long.code(), Some(50035), "{long}");

    // The channel's messages, newest first, as many as asked.
    let recent = rest.recent_messages("300", 2).await.unwrap();
    let ids: Vec<&str> = recent.iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        [late["id"].as_str().unwrap(), other["id"].as_str().unwrap()]
    );
    assert_eq!(recent[0]["author"]["bot"], true);
}
