//! `after` on `POST /api/tasks`: a task that waits for others, and every `after`
//! that cannot be waited for refused naming the field, with nothing stored.

use super::support::*;
use pretty_assertions::assert_eq;
use reqwest::StatusCode;
use serde_json::{json, Value};

async fn post(h: &Harness, body: Value) -> (StatusCode, Value) {
    let r = h
        .http
        .post(h.url("/api/tasks"))
        .json(&body)
        .send()
        .await
        .unwrap();
    (r.status(), r.json().await.unwrap())
}

#[tokio::test]
async fn a_task_after_another_waits_and_shows_what_for() {
    let h = start(false).await;
    h.project("alpha").await;
    let first = h.task("alpha").await;
    let (s, t) = post(
        &h,
        json!({"project": "alpha", "request": "next", "after": [first]}),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{t}");
    assert_eq!(t["stage"], "waiting");
    assert_eq!(t["after"], json!([{ "id": first, "stage": "queued" }]));
    let listed: Value = h
        .http
        .get(h.url("/api/tasks?stage=waiting"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert_eq!(listed[0]["id"], t["id"]);
}

#[tokio::test]
async fn an_after_that_cannot_be_waited_for_is_refused_and_nothing_is_stored() {
    let h = start(false).await;
    h.project("alpha").await;
    h.project("beta").await;
    let mine = h.task("alpha").await;
    let theirs = h.task("beta").await;
    let cancelled = h.task("alpha").await;
    let r = h
        .http
        .post(h.url(&format!("/api/tasks/{cancelled}/cancel")))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let before = h.event_count().await;
    let cases = [
        (
            json!(["t-00000000-0000-0000-0000-000000000000"]),
            "does not exist",
        ),
        (json!([mine, mine]), "is named twice"),
        (json!([theirs]), "in another project"),
        (json!([cancelled]), "is already cancelled"),
        (json!([""]), "empty task id"),
        (json!(mine), "invalid type"),
    ];
    for (after, says) in cases {
        let (s, b) = post(
            &h,
            json!({"project": "alpha", "request": "next", "after": after}),
        )
        .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{after}: {b}");
        assert_eq!(b["error"]["field"], "after", "{after}: {b}");
        let message = b["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{after}: {message}");
    }
    assert_eq!(
        h.event_count().await,
        before,
        "a refused task stored something"
    );
}
