//! The page as served (its behaviour in a browser is in `browser.rs`).

use super::support::*;

#[tokio::test]
async fn the_page_names_every_event_type_for_its_live_listeners() {
    let h = start(false).await;
    let html = h
        .http
        .get(h.url("/"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let kinds = html
        .split("<meta name=\"event-kinds\" content=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("no event-kinds meta tag in\n{html}"));
    let kinds: Vec<&str> = kinds.split(' ').collect();
    assert_eq!(kinds, gaffer_core::Event::KINDS);
    // Types added after the page was first written (a listener missing for them
    // would drop them silently).
    for late in ["task_leased", "ci_status_changed"] {
        assert!(kinds.contains(&late), "{late} missing from {kinds:?}");
    }
}
