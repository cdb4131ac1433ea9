//! `GET /api/schedules` over real HTTP on loopback: every configured schedule with
//! its next slot in its own time zone, and the task its newest slot made, read from
//! the journal by the slot's origin key.

use super::support::*;
use gaffer_app::NewTask;
use gaffer_core::Actor;
use pretty_assertions::assert_eq;
use reqwest::StatusCode;
use serde_json::{json, Value};

pub const TWO_SCHEDULES: &str = r#"
[[schedules]]
name = "nightly-deps"
cron = "0 3 * * *"
tz = "Europe/Berlin"
project = "alpha"
request = "Update the dependencies and fix what breaks"
agent = "claude"
missed = "run_once"

[[schedules]]
name = "weekly-audit"
cron = "30 9 * * 1"
project = "alpha"
request = "Audit the licenses of every dependency"
"#;

/// What the scheduler does for a slot: a task created once for the slot's key.
pub async fn slot_task(h: &Harness, schedule: &str, slot: &str) -> String {
    h.app
        .create_task_once(
            NewTask {
                project: "alpha".into(),
                request: "Update the dependencies and fix what breaks".into(),
                key: Some(format!("schedule:{schedule}:{slot}")),
                ..NewTask::default()
            },
            Actor::system(&format!("schedule:{schedule}")),
        )
        .await
        .unwrap()
        .task
        .id
}

#[tokio::test]
async fn schedules_show_their_next_slot_and_the_task_their_newest_slot_made() {
    let h = start_scheduled(TWO_SCHEDULES).await;
    h.project("alpha").await;
    slot_task(&h, "nightly-deps", "2026-01-01T02:00:00Z").await;
    let newest = slot_task(&h, "nightly-deps", "2026-01-02T02:00:00Z").await;
    // Another schedule's slot and a task without a key are not this schedule's.
    h.task("alpha").await;
    h.app
        .cancel_task(&newest, Actor::user("ana", "test"), None)
        .await
        .unwrap();
    let configured = schedules(TWO_SCHEDULES);
    let before = gaffer_store::now_ms();
    let r = h.http.get(h.url("/api/schedules")).send().await.unwrap();
    let after = gaffer_store::now_ms();
    assert_eq!(r.status(), StatusCode::OK);
    let mut body: Value = r.json().await.unwrap();
    let list = body.as_array_mut().unwrap();
    assert_eq!(list.len(), 2);
    // The next slot is the schedule's next one after now (read at either side of the request).
    for (shown, s) in list.iter_mut().zip(&configured) {
        let next_at = shown["next_at"].as_i64().unwrap();
        assert!(
            [s.next_after(before), s.next_after(after)].contains(&Some(next_at)),
            "{shown}"
        );
        assert!(next_at > before);
        assert_eq!(shown["next_slot"], json!(gaffer_config::slot_text(next_at)));
        let map = shown.as_object_mut().unwrap();
        map.remove("next_at");
        map.remove("next_slot");
    }
    let last_task = h.app.task(&newest).await.unwrap().task;
    assert_eq!(
        body,
        json!([
            {
                "name": "nightly-deps",
                "source": "config",
                "created_by": null,
                "created_at": null,
                "cron": "0 3 * * *",
                "tz": "Europe/Berlin",
                "project": "alpha",
                "request": "Update the dependencies and fix what breaks",
                "agent": "claude",
                "missed": "run_once",
                "last_slot": "2026-01-02T02:00:00Z",
                "last_task": { "id": newest, "stage": "cancelled", "created_at": last_task.created_at },
            },
            {
                "name": "weekly-audit",
                "source": "config",
                "created_by": null,
                "created_at": null,
                "cron": "30 9 * * 1",
                "tz": "UTC",
                "project": "alpha",
                "request": "Audit the licenses of every dependency",
                "agent": null,
                "missed": "skip",
                "last_slot": null,
                "last_task": null,
            },
        ])
    );
}

#[tokio::test]
async fn a_schedules_next_slot_is_read_in_its_time_zone() {
    let h = start_scheduled(TWO_SCHEDULES).await;
    let body: Value = h
        .http
        .get(h.url("/api/schedules"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    // 03:00 in Berlin is 02:00 UTC in winter and 01:00 in summer, never 03:00 UTC.
    let next = body[0]["next_slot"].as_str().unwrap();
    assert!(
        next.ends_with("T02:00:00Z") || next.ends_with("T01:00:00Z"),
        "{next}"
    );
    // Monday 09:30 UTC.
    let weekly: jiff::Timestamp = body[1]["next_slot"].as_str().unwrap().parse().unwrap();
    let weekly = weekly.to_zoned(jiff::tz::TimeZone::UTC);
    assert_eq!(
        (weekly.weekday(), weekly.hour(), weekly.minute()),
        (jiff::civil::Weekday::Monday, 9, 30)
    );
}

#[tokio::test]
async fn without_schedules_the_list_is_empty_and_the_spec_says_config_ones_are_read_only() {
    let h = start(false).await;
    let r = h.http.get(h.url("/api/schedules")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.json::<Value>().await.unwrap(), json!([]));
    // Config schedules are only read: added ones come from POST (see
    // schedule_changes.rs), which refuses a body without its fields.
    let r = h
        .http
        .post(h.url("/api/schedules"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let doc: Value = h
        .http
        .get(h.url("/api/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let op = &doc["paths"]["/api/schedules"]["get"];
    assert!(
        op["description"]
            .as_str()
            .unwrap()
            .contains("change only in the config file"),
        "{op}"
    );
    let item = &doc["components"]["schemas"]["Schedule"]["properties"];
    for field in [
        "name",
        "cron",
        "tz",
        "project",
        "request",
        "agent",
        "missed",
        "next_slot",
        "last_slot",
        "last_task",
    ] {
        assert!(
            item.get(field).is_some(),
            "Schedule.{field} is not documented"
        );
    }
    assert!(doc["components"]["schemas"]["ScheduledTask"].is_object());
}
