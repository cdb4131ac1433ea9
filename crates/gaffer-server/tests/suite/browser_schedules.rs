//! The schedules view in real headless Chromium at 390 and 1280 px: each
//! configured schedule with its next run and its last slot's task linked to the
//! task's page, and an empty state that shows how to add one.

use super::browser::{
    artifact, assert_no_critical_axe_violations, assert_no_horizontal_scroll, driver, logged_in,
    LAPTOP, PHONE,
};
use super::schedules::{slot_task, TWO_SCHEDULES};
use super::support::*;
use serde_json::{json, Value};

#[tokio::test]
async fn schedules_show_the_next_run_and_link_the_last_task_at_phone_and_laptop_width() {
    let Some(driver) = driver() else { return };
    let h = start_scheduled(TWO_SCHEDULES).await;
    h.project("alpha").await;
    slot_task(&h, "nightly-deps", "2026-01-01T02:00:00Z").await;
    let last = slot_task(&h, "nightly-deps", "2026-01-02T02:00:00Z").await;
    // One added at run time (`gaffer schedules add`, POST /api/schedules).
    h.app
        .add_schedule(
            gaffer_config::ScheduleSpec {
                name: "hourly-logs".into(),
                cron: "0 * * * *".into(),
                project: "alpha".into(),
                request: "Read the logs and report anything new".into(),
                ..gaffer_config::ScheduleSpec::default()
            },
            &super::support::schedules(TWO_SCHEDULES),
            gaffer_core::Actor::user("ana", "web"),
        )
        .await
        .unwrap();
    let api: Value = h
        .http
        .get(h.url("/api/schedules"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    for (size, name) in [(PHONE, "390"), (LAPTOP, "1280")] {
        let b = logged_in(&driver, &h, &format!("schedules-{name}"), size).await;
        b.goto(&h.url("/schedules")).await.unwrap();
        b.wait_for(
            "the schedules",
            "document.querySelectorAll('#schedules li').length === 3",
        )
        .await
        .unwrap();
        let shown = b
            .eval(
                "[...document.querySelectorAll('#schedules li')].map(li => ({
                    name: li.dataset.name,
                    title: li.querySelector('.schedule-name').textContent,
                    cron: li.querySelector('.cron').textContent,
                    next: li.querySelector('.next time')?.getAttribute('datetime'),
                    soon: /\\(in [^)]+\\)$/.test(li.querySelector('.next').textContent),
                    last: li.querySelector('.last a')?.getAttribute('href') ?? null,
                    stage: li.querySelector('.last .badge')?.textContent ?? null,
                    none: li.querySelector('.last a') ? null : li.querySelector('.last').textContent,
                    from: li.querySelector('.source').textContent.replace(/ \\S+ ago$| just now$/, ''),
                }))",
            )
            .await
            .unwrap();
        assert_eq!(
            shown,
            json!([
                {
                    "name": "nightly-deps", "title": "nightly-deps", "cron": "0 3 * * *",
                    "next": api[0]["next_slot"], "soon": true,
                    "last": format!("/tasks/{last}"), "stage": "queued",
                    "none": null, "from": "the config file",
                },
                {
                    "name": "weekly-audit", "title": "weekly-audit", "cron": "30 9 * * 1",
                    "next": api[1]["next_slot"], "soon": true,
                    "last": null, "stage": null, "none": "none yet",
                    "from": "the config file",
                },
                {
                    "name": "hourly-logs", "title": "hourly-logs", "cron": "0 * * * *",
                    "next": api[2]["next_slot"], "soon": true,
                    "last": null, "stage": null, "none": "none yet",
                    "from": "added by ana via web",
                },
            ])
        );
        let current = b
            .eval("document.querySelector('#nav-schedules').getAttribute('aria-current')")
            .await
            .unwrap();
        assert_eq!(current, json!("page"));
        let text = b.eval("document.body.innerText").await.unwrap();
        assert!(
            !text.as_str().unwrap().contains("{\""),
            "raw JSON on the page: {text}"
        );
        assert_no_horizontal_scroll(&b, &format!("the schedules at {name}px")).await;
        assert_no_critical_axe_violations(&b, &format!("the schedules at {name}px")).await;
        b.screenshot(&artifact(&format!("schedules-{name}.png")))
            .await
            .unwrap();
        // The last task's link opens its page.
        b.eval("document.querySelector('#schedules li .last a').click()")
            .await
            .unwrap();
        b.wait_for(
            "the last task's page",
            &format!("location.pathname === '/tasks/{last}' && document.querySelector('#main h1')"),
        )
        .await
        .unwrap();
        b.close().await.unwrap();
    }
}

#[tokio::test]
async fn without_schedules_the_view_shows_how_to_add_one_at_phone_and_laptop_width() {
    let Some(driver) = driver() else { return };
    let h = start(false).await;
    for (size, name) in [(PHONE, "390"), (LAPTOP, "1280")] {
        let b = logged_in(&driver, &h, &format!("schedules-empty-{name}"), size).await;
        b.goto(&h.url("/schedules")).await.unwrap();
        b.wait_for(
            "the empty state",
            "document.querySelector('#schedules-empty')",
        )
        .await
        .unwrap();
        let text = b
            .eval("document.querySelector('#schedules-empty').innerText")
            .await
            .unwrap();
        let text = text.as_str().unwrap();
        for part in [
            "No schedule is configured.",
            "[[schedules]]",
            "cron = \"0 3 * * *\"",
            "request = \"Update the dependencies and fix what breaks\"",
            "gaffer init",
        ] {
            assert!(text.contains(part), "{part} missing from:\n{text}");
        }
        assert_no_horizontal_scroll(&b, &format!("the empty schedules at {name}px")).await;
        assert_no_critical_axe_violations(&b, &format!("the empty schedules at {name}px")).await;
        b.screenshot(&artifact(&format!("schedules-empty-{name}.png")))
            .await
            .unwrap();
        b.close().await.unwrap();
    }
}
