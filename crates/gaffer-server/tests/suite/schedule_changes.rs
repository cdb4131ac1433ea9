//! `POST /api/schedules` and `DELETE /api/schedules/{name}` over real HTTP: what is
//! stored and who is recorded, each bad field named with nothing stored, names
//! taken by the config or another schedule, and the config's schedules left alone.

use super::support::*;
use gaffer_config::{Schedule, ScheduleSpec};
use pretty_assertions::assert_eq;
use reqwest::StatusCode;
use serde_json::{json, Value};

/// The config file's one schedule, `nightly`.
fn configured() -> Vec<Schedule> {
    vec![Schedule::parse(ScheduleSpec {
        name: "nightly".into(),
        cron: "0 3 * * *".into(),
        project: "alpha".into(),
        request: "update the dependencies".into(),
        ..ScheduleSpec::default()
    })
    .unwrap()]
}

async fn harness() -> Harness {
    let h = start_with_schedules(configured()).await;
    h.project("alpha").await;
    h
}

async fn post(h: &Harness, body: &Value) -> reqwest::Response {
    h.http
        .post(h.url("/api/schedules"))
        .bearer_auth(APPROVER)
        .json(body)
        .send()
        .await
        .unwrap()
}

async fn delete(h: &Harness, name: &str) -> reqwest::Response {
    h.http
        .delete(h.url(&format!("/api/schedules/{name}")))
        .bearer_auth(APPROVER)
        .send()
        .await
        .unwrap()
}

fn hourly(name: &str) -> Value {
    json!({"name": name, "cron": "0 * * * *", "project": "alpha", "request": "look at the logs"})
}

#[tokio::test]
async fn an_added_schedule_is_answered_with_its_next_slot_and_stored_with_who_added_it() {
    let h = harness().await;
    let before = gaffer_store::now_ms();
    let r = post(
        &h,
        &json!({"name": "logs", "cron": "30 6 * * 1-5", "tz": "Europe/Berlin", "project": "alpha",
                "request": "  look at the logs  ", "agent": "codex", "missed": "run_once"}),
    )
    .await;
    assert_eq!(r.status(), StatusCode::CREATED);
    let body: Value = r.json().await.unwrap();
    let stored = h.app.journal().schedules(true).await.unwrap();
    assert_eq!(stored.len(), 1);
    let row = &stored[0];
    assert_eq!(
        (
            row.name.as_str(),
            row.cron.as_str(),
            row.tz.as_str(),
            row.project.as_str()
        ),
        ("logs", "30 6 * * 1-5", "Europe/Berlin", "alpha")
    );
    assert_eq!(
        (
            row.request.as_str(),
            row.agent.as_deref(),
            row.missed.as_str()
        ),
        ("look at the logs", Some("codex"), "run_once")
    );
    assert_eq!(
        (row.created_by.name.as_str(), row.created_by.via.as_str()),
        ("ann", "api:ann")
    );
    assert!(row.created_at >= before && row.removed_at.is_none());
    // Its next slot: 06:30 in Berlin on a weekday, after now.
    let next = body["next_at"].as_i64().unwrap();
    assert!(next > before, "{body}");
    let zoned = jiff::Timestamp::from_millisecond(next)
        .unwrap()
        .to_zoned(jiff::tz::TimeZone::get("Europe/Berlin").unwrap());
    assert_eq!((zoned.hour(), zoned.minute()), (6, 30));
    assert!(!matches!(
        zoned.weekday(),
        jiff::civil::Weekday::Saturday | jiff::civil::Weekday::Sunday
    ));
    assert_eq!(
        body["next_slot"],
        json!(gaffer_config::slot_text(next)),
        "{body}"
    );
    assert_eq!(
        (
            &body["source"],
            &body["name"],
            &body["request"],
            &body["created_by"]
        ),
        (
            &json!("api"),
            &json!("logs"),
            &json!("look at the logs"),
            &json!("ann via api:ann")
        )
    );
    assert_eq!(body["created_at"], json!(row.created_at));
}

#[tokio::test]
async fn a_bad_field_is_refused_naming_it_and_nothing_is_stored() {
    let h = harness().await;
    let with = |key: &str, value: Value| {
        let mut body = hourly("ok");
        body[key] = value;
        body
    };
    let cases = [
        (with("name", json!("no spaces")), "name", "`no spaces`"),
        (with("name", json!("x".repeat(65))), "name", "at most 64"),
        (with("cron", json!("61 * * * *")), "cron", "`61 * * * *`"),
        (with("cron", json!("* * *")), "cron", "3 fields"),
        (with("tz", json!("Mars/Olympus")), "tz", "`Mars/Olympus`"),
        (
            with("project", json!("nope")),
            "project",
            "`nope` is not registered",
        ),
        (with("request", json!("  ")), "request", "missing"),
        (with("agent", json!("agnet")), "agent", "`agnet` is unknown"),
        (with("missed", json!("all")), "missed", "`all`"),
        (with("every", json!("day")), "every", "every"),
    ];
    for (body, field, says) in cases {
        let r = post(&h, &body).await;
        let status = r.status();
        let answer: Value = r.json().await.unwrap();
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
        assert_eq!(answer["error"]["field"], json!(field), "{body}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{body}: {message}");
    }
    assert_eq!(h.app.journal().schedules(true).await.unwrap(), vec![]);
}

#[tokio::test]
async fn a_name_the_config_or_a_running_schedule_has_is_409_and_nothing_is_stored() {
    let h = harness().await;
    let r = post(&h, &hourly("nightly")).await;
    assert_eq!(r.status(), StatusCode::CONFLICT);
    let answer: Value = r.json().await.unwrap();
    assert_eq!(answer["error"]["code"], json!("name_taken"));
    assert!(answer["error"]["message"]
        .as_str()
        .unwrap()
        .contains("defined in the config file"));
    assert_eq!(
        post(&h, &hourly("logs")).await.status(),
        StatusCode::CREATED
    );
    let r = post(&h, &hourly("logs")).await;
    assert_eq!(r.status(), StatusCode::CONFLICT);
    let answer: Value = r.json().await.unwrap();
    assert_eq!(answer["error"]["code"], json!("name_taken"));
    let stored = h.app.journal().schedules(true).await.unwrap();
    assert_eq!(stored.iter().map(|s| &s.name).collect::<Vec<_>>(), ["logs"]);
}

#[tokio::test]
async fn delete_removes_an_added_schedule_keeping_who_removed_it_and_leaves_the_config_alone() {
    let h = harness().await;
    assert_eq!(
        post(&h, &hourly("logs")).await.status(),
        StatusCode::CREATED
    );
    let r = delete(&h, "nightly").await;
    assert_eq!(r.status(), StatusCode::CONFLICT);
    let answer: Value = r.json().await.unwrap();
    assert_eq!(answer["error"]["code"], json!("defined_in_config"));
    assert!(answer["error"]["message"]
        .as_str()
        .unwrap()
        .contains("defined in the config file; remove it there"));
    assert_eq!(delete(&h, "nope").await.status(), StatusCode::NOT_FOUND);
    // A viewer may not remove one.
    let r = h
        .http
        .delete(h.url("/api/schedules/logs"))
        .bearer_auth(VIEWER)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert_eq!(h.app.added_schedules().await.unwrap().len(), 1);

    let r = delete(&h, "logs").await;
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    assert!(h.app.added_schedules().await.unwrap().is_empty());
    let stored = h.app.journal().schedules(true).await.unwrap();
    let removed_by = stored[0].removed_by.clone().unwrap();
    assert_eq!(
        (removed_by.name.as_str(), removed_by.via.as_str()),
        ("ann", "api:ann")
    );
    assert!(stored[0].removed_at.is_some());
    assert_eq!(delete(&h, "logs").await.status(), StatusCode::NOT_FOUND);
    // The name is free again: a second row; the first keeps its record.
    assert_eq!(
        post(&h, &hourly("logs")).await.status(),
        StatusCode::CREATED
    );
    let stored = h.app.journal().schedules(true).await.unwrap();
    assert_eq!(
        stored
            .iter()
            .map(|s| s.removed_at.is_some())
            .collect::<Vec<_>>(),
        [true, false]
    );
}
