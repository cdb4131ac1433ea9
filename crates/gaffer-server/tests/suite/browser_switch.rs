//! A role moved to its fallback agent (`agent_switched`), as a person reads it on the
//! task page: who was out and why, who took over, whether a person had to allow it,
//! and when the first agent is tried again — in words, at phone and laptop width.

use super::browser::{artifact, assert_no_horizontal_scroll, driver, logged_in, LAPTOP, PHONE};
use super::scene::Scene;
use super::support::*;
use gaffer_core::{Event, Intent, Role, SessionId, Stage, StepId};
use serde_json::json;

/// 2026-12-02T12:00:00Z: when the first agent is tried again.
const UNTIL_MS: i64 = 1_796_212_800_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fallback_switch_reads_as_words_in_the_transcript_at_phone_and_laptop_width() {
    let Some(driver) = driver() else { return };
    let h = start(false).await;
    h.project("alpha").await;
    let s = Scene::new(&h.app, "alpha", "Add a --json flag to the list command").await;
    s.stage(Stage::Planning).await;
    s.stage(Stage::Coding).await;
    let session = |agent: &str| SessionId(format!("s-{}-code/1-{agent}", s.task));
    let ended = |agent: &str| Event::SessionEnded {
        session_id: session(agent),
        reason: "out of quota".into(),
    };
    let started = |agent: &str| Event::SessionStarted {
        session_id: session(agent),
        agent: agent.into(),
        role: Role::Owner,
        workspace_key: "/work/demo".into(),
        agent_session_id: None,
        step_id: Some(StepId("code/1".into())),
    };
    s.step("code/1", Intent::NonIdempotent).await;
    s.push(vec![started("claude")]).await;
    s.say(
        "code/1",
        "Let me look at how the list command prints its rows.",
    )
    .await;
    let switch =
        |from: &str, to: &str, trigger: &str, detail: &str, effects: bool| Event::AgentSwitched {
            step_id: StepId("code/1".into()),
            role: Role::Owner,
            from: from.into(),
            to: to.into(),
            trigger: trigger.into(),
            detail: detail.into(),
            until: UNTIL_MS,
            effects,
        };
    // Claude's quota ran out before the turn changed anything: Codex runs it again.
    s.push(vec![
        ended("claude"),
        switch(
            "claude",
            "codex",
            "usage_limit",
            "Claude AI usage limit reached|1796212800",
            false,
        ),
        started("codex"),
    ])
    .await;
    s.say("code/1", "Adding the flag to src/list.rs now.").await;
    // Codex was rate-limited after it had edited a file: a person decides first.
    s.push(vec![
        ended("codex"),
        switch(
            "codex",
            "gemini",
            "rate_limited",
            "429 Too Many Requests (retry-after 3600 s)",
            true,
        ),
    ])
    .await;

    for (size, name) in [(PHONE, "390"), (LAPTOP, "1280")] {
        let b = logged_in(&driver, &h, &format!("switch-{name}"), size).await;
        b.goto(&h.url(&format!("/tasks/{}", s.task))).await.unwrap();
        b.wait_for(
            "both switches in the transcript",
            "document.querySelectorAll('#transcript .entry.switch').length === 2",
        )
        .await
        .unwrap();
        let lines = b
            .eval("[...document.querySelectorAll('#transcript .entry.switch')].map((e) => e.innerText)")
            .await
            .unwrap();
        let lines: Vec<&str> = lines
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l.as_str().unwrap())
            .collect();
        assert!(
            lines[0].contains(
                "claude is out (usage limit reached); codex takes over, running the turn again."
            ),
            "{}",
            lines[0]
        );
        assert!(
            lines[0].contains("Claude AI usage limit reached"),
            "the agent's own words are shown: {}",
            lines[0]
        );
        assert!(
            lines[1].contains("codex is out (rate-limited); gemini takes over after a person's approval: the turn had already done something."),
            "{}",
            lines[1]
        );
        for line in &lines {
            // The retry time is a date a person reads, not epoch milliseconds.
            assert!(
                line.contains("is tried again after") && line.contains("2026"),
                "{line}"
            );
            assert!(
                !line.contains(&UNTIL_MS.to_string()),
                "raw timestamp: {line}"
            );
            assert!(
                !line.contains("usage_limit") && !line.contains("rate_limited"),
                "a trigger's code name: {line}"
            );
        }
        // In order: the switch between the two agents' words.
        let order = b
            .eval("[...document.querySelectorAll('#transcript .entry.text, #transcript .entry.switch')].map((e) => e.classList.contains('switch') ? 'switch' : 'text')")
            .await
            .unwrap();
        assert_eq!(order, json!(["text", "switch", "text", "switch"]));
        assert_no_horizontal_scroll(&b, &format!("the switches at {name}px")).await;
        b.eval("document.querySelector('#transcript .entry.switch').scrollIntoView()")
            .await
            .unwrap();
        b.screenshot(&artifact(&format!("agent-switched-{name}.png")))
            .await
            .unwrap();
        b.close().await.unwrap();
    }
}
