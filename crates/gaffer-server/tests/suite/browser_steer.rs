//! Steering a running agent from the task page (issue #20): the message box under
//! the conversation sends a person's message, the conversation shows it where the
//! agent reads it and says when (and how) the agent got it, Interrupt stops the turn
//! and the box says the agent waits; with no agent running the box stays in place,
//! disabled, saying why; a finished task has none. At phone and laptop width.

use super::browser::{
    artifact, assert_no_critical_axe_violations, assert_no_horizontal_scroll, driver, logged_in,
    LAPTOP, PHONE,
};
use super::scene::Scene;
use super::support::*;
use gaffer_core::{Delivery, Event, Role, SessionId, Stage};

fn messages_js() -> &'static str {
    "[...document.querySelectorAll('#transcript .entry.message')].map((e) => e.innerText)"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_typed_on_the_page_reaches_the_journal_and_shows_when_the_agent_got_it() {
    let Some(driver) = driver() else { return };
    let h = start(false).await;
    h.project("alpha").await;
    let s = Scene::new(&h.app, "alpha", "Add a --json flag to the list command").await;
    s.stage(Stage::Planning).await;
    s.stage(Stage::Coding).await;
    s.agent_step("code/1", Role::Owner, "claude").await;
    let session = SessionId(format!("s-{}-code/1", s.task));
    s.say(
        "code/1",
        "Let me look at how the list command prints its rows.",
    )
    .await;

    let b = logged_in(&driver, &h, "steer-390", PHONE).await;
    b.goto(&h.url(&format!("/tasks/{}", s.task))).await.unwrap();
    b.wait_for(
        "the message box for the running owner",
        "(document.querySelector('#steer-hint')?.innerText || '').includes('The owner (claude) gets it in its running turn')",
    )
    .await
    .unwrap();
    assert_eq!(
        b.eval("document.querySelector('#steer-send').disabled")
            .await
            .unwrap(),
        true,
        "nothing to send yet"
    );

    // Typed and sent: recorded once, by the person who is logged in, via the page.
    b.type_into("#steer-text", "Use the Row printer in src/print.rs instead")
        .await
        .unwrap();
    b.click("#steer-send").await.unwrap();
    b.wait_for(
        "the message in the conversation, waiting for the agent",
        "(document.querySelector('#transcript [data-step=\"code/1\"] .entry.message')?.innerText || '').includes('Waiting for the owner to read it')",
    )
    .await
    .unwrap();
    let sent = h.app.messages(&s.task).await.unwrap();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].text, "Use the Row printer in src/print.rs instead");
    assert_eq!(sent[0].by.name, "ana");
    assert!(sent[0].by.via.starts_with("web"), "{:?}", sent[0].by);
    assert_eq!(sent[0].delivery, "pending");
    assert_eq!(
        b.eval("document.querySelector('#steer-text').value")
            .await
            .unwrap(),
        "",
        "the box is emptied once the server recorded the message"
    );
    let said = b
        .eval("document.querySelector('.steer-said').innerText")
        .await
        .unwrap();
    assert!(
        said.as_str().unwrap().starts_with("Sent to the owner."),
        "{said}"
    );

    // The engine delivers it into the running turn: the page says so.
    s.push(vec![Event::MessageDelivered {
        message_id: sent[0].id.clone(),
        session_id: session.clone(),
        delivery: Delivery::Live,
        masked: false,
    }])
    .await;
    b.wait_for(
        "the delivery",
        "(document.querySelector('#transcript .entry.message')?.innerText || '').includes('The owner got it in its running turn')",
    )
    .await
    .unwrap();

    // Interrupt: the turn stops, the conversation says who stopped it, the box says
    // the agent waits and offers no second interrupt.
    let send_top = "document.querySelector('#steer-send').getBoundingClientRect().top - document.querySelector('#steer').getBoundingClientRect().top";
    let before = b.eval(send_top).await.unwrap().as_f64().unwrap();
    b.click("#steer-interrupt").await.unwrap();
    b.wait_for(
        "the interrupt in the conversation",
        "(document.querySelector('#transcript .entry.interrupted')?.innerText || '').includes('stopped the turn')",
    )
    .await
    .unwrap();
    b.wait_for(
        "the box saying the agent waits",
        "document.querySelector('#steer-interrupt').disabled && document.querySelector('#steer-hint').innerText.includes('stopped its turn and waits for your message')",
    )
    .await
    .unwrap();
    let after = b.eval(send_top).await.unwrap().as_f64().unwrap();
    assert!(
        (after - before).abs() < 2.0,
        "Send moved inside the box from {before} to {after}"
    );

    // The next message starts the next turn, masked for a cloud model of a masked project.
    b.type_into("#steer-text", "Now keep the old output as the default")
        .await
        .unwrap();
    b.click("#steer-send").await.unwrap();
    b.wait_for(
        "the second message",
        &format!("{}.length === 2", messages_js()),
    )
    .await
    .unwrap();
    let second = h.app.messages(&s.task).await.unwrap().remove(1);
    assert_eq!(second.text, "Now keep the old output as the default");
    s.push(vec![Event::MessageDelivered {
        message_id: second.id.clone(),
        session_id: session.clone(),
        delivery: Delivery::NextTurn,
        masked: true,
    }])
    .await;
    b.wait_for(
        "the second delivery",
        &format!(
            "({}[1] || '').includes('The owner got it as its next turn, masked')",
            messages_js()
        ),
    )
    .await
    .unwrap();
    let shown = b.eval(messages_js()).await.unwrap();
    let shown: Vec<&str> = shown
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect();
    assert!(
        shown[0].contains("ana") && shown[0].contains("via the web page"),
        "{}",
        shown[0]
    );
    assert!(
        shown[0].contains("Use the Row printer in src/print.rs instead"),
        "{}",
        shown[0]
    );
    assert!(!shown[0].contains("masked"), "{}", shown[0]);
    // In order, after what the agent said before it.
    let order = b
        .eval("[...document.querySelectorAll('[data-step=\"code/1\"] .entry')].map((e) => e.classList[1])")
        .await
        .unwrap();
    assert_eq!(
        order,
        serde_json::json!(["text", "message", "interrupted", "message"])
    );
    assert_no_horizontal_scroll(&b, "the message box at 390px").await;
    assert_no_critical_axe_violations(&b, "the message box at 390px").await;
    b.eval("document.querySelector('#steer').scrollIntoView({block: 'end'})")
        .await
        .unwrap();
    b.screenshot(&artifact("steer-390.png")).await.unwrap();

    // The session over: the box stays where it was, disabled, saying why.
    s.push(vec![Event::SessionEnded {
        session_id: session.clone(),
        reason: "turn over".into(),
    }])
    .await;
    b.wait_for(
        "the box saying no agent runs",
        "document.querySelector('#steer-text').disabled && document.querySelector('#steer-hint').innerText.includes('No agent is running right now')",
    )
    .await
    .unwrap();
    b.close().await.unwrap();

    let b = logged_in(&driver, &h, "steer-1280", LAPTOP).await;
    b.goto(&h.url(&format!("/tasks/{}", s.task))).await.unwrap();
    b.wait_for(
        "both messages after a reload",
        &format!("{}.length === 2", messages_js()),
    )
    .await
    .unwrap();
    assert_eq!(
        b.eval("document.querySelector('#steer-send').disabled && document.querySelector('#steer-interrupt').disabled")
            .await
            .unwrap(),
        true,
        "no agent runs: nothing to send or interrupt"
    );
    assert_no_horizontal_scroll(&b, "the message box at 1280px").await;
    b.eval("document.querySelector('#steer').scrollIntoView({block: 'end'})")
        .await
        .unwrap();
    b.screenshot(&artifact("steer-1280.png")).await.unwrap();

    // A finished task has no message box.
    h.app
        .cancel_task(&s.task, gaffer_core::Actor::user("ana", "web"), None)
        .await
        .unwrap();
    b.wait_for(
        "the message box gone with the task cancelled",
        "!document.querySelector('#steer') && document.querySelector('#outcome')",
    )
    .await
    .unwrap();
    b.close().await.unwrap();
}
