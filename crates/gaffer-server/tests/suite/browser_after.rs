//! Tasks that run after others on the page, in real headless Chromium at 390 and
//! 1280 px: waiting cards on the board name what they wait for, the task page lists
//! its dependencies with their stages, a blocked one links the task that blocked
//! it, and the new-task form offers the project's open tasks to start after.

use super::browser::{artifact, assert_no_horizontal_scroll, driver, logged_in, LAPTOP, PHONE};
use super::support::*;
use gaffer_app::NewTask;
use gaffer_core::{Actor, StreamId, TaskId, TaskState};
use gaffer_store::NewEvent;
use serde_json::json;

async fn after(h: &Harness, request: &str, after: &[&str]) -> String {
    h.app
        .create_task(
            NewTask {
                project: "alpha".into(),
                request: request.into(),
                after: after.iter().map(|a| (*a).to_owned()).collect(),
                ..NewTask::default()
            },
            Actor::user("ana", "test"),
        )
        .await
        .unwrap()
        .id
}

/// What a worker records when `id`'s dependency ended: settled from the states now.
async fn settle(h: &Harness, id: &str) {
    let j = h.app.journal();
    let Some(gaffer_core::StreamState::Task(task)) = j.state(&StreamId(id.into())).await.unwrap()
    else {
        panic!("no task {id}")
    };
    let task: TaskState = *task;
    let mut deps = Vec::new();
    for d in &task.waiting_for {
        deps.push(
            j.task(d.as_str())
                .await
                .unwrap()
                .unwrap()
                .task
                .dependency()
                .unwrap(),
        );
    }
    let events = gaffer_core::dependency::settle(&task, &deps);
    let head = j.head(&StreamId(id.into())).await.unwrap();
    j.append(
        &StreamId::from(&TaskId(id.into())),
        head,
        events.into_iter().map(NewEvent::now).collect(),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn waiting_and_blocked_tasks_show_what_they_run_after_at_phone_and_laptop_width() {
    let Some(driver) = driver() else { return };
    let h = start(false).await;
    h.project("alpha").await;
    let first = after(&h, "Add a --json flag to the list command", &[]).await;
    let second = after(&h, "Document the --json flag in the README", &[&first]).await;
    let dropped = after(&h, "Rename the list command to ls", &[]).await;
    let blocked = after(&h, "Update the shell completions for ls", &[&dropped]).await;
    h.app
        .cancel_task(
            &dropped,
            Actor::user("ana", "test"),
            Some("not needed".into()),
        )
        .await
        .unwrap();
    settle(&h, &blocked).await;
    for (size, name) in [(PHONE, "390"), (LAPTOP, "1280")] {
        let b = logged_in(&driver, &h, &format!("after-{name}"), size).await;
        // The board: the waiting task sits with the queued ones and names what it waits for.
        b.goto(&h.url("/")).await.unwrap();
        let card = format!(".task-card[data-id=\"{second}\"] .waits");
        b.wait_for(
            "the waiting card",
            &format!("document.querySelector('{card}')"),
        )
        .await
        .unwrap();
        let text = b
            .eval(&format!("document.querySelector('{card}').textContent"))
            .await
            .unwrap();
        assert_eq!(text, json!(format!("Waits for {}", &first[..10])));
        assert_no_horizontal_scroll(&b, &format!("the board at {name}px")).await;
        b.screenshot(&artifact(&format!("after-board-{name}.png")))
            .await
            .unwrap();
        // The waiting task's page.
        b.goto(&h.url(&format!("/tasks/{second}"))).await.unwrap();
        b.wait_for("the dependencies", "document.querySelector('#after li a')")
            .await
            .unwrap();
        let heading = b
            .eval("document.querySelector('#after-h').textContent")
            .await
            .unwrap();
        assert_eq!(heading, json!("Waiting for 1 task"));
        let link = b
            .eval("document.querySelector('#after li a').getAttribute('href')")
            .await
            .unwrap();
        assert_eq!(link, json!(format!("/tasks/{first}")));
        assert_no_horizontal_scroll(&b, &format!("a waiting task at {name}px")).await;
        b.screenshot(&artifact(&format!("after-waiting-{name}.png")))
            .await
            .unwrap();
        // The blocked task's page: the reason names the task and what happened, and links it.
        b.goto(&h.url(&format!("/tasks/{blocked}"))).await.unwrap();
        b.wait_for("the outcome", "document.querySelector('#blocked-by')")
            .await
            .unwrap();
        let outcome = b
            .eval("document.querySelector('#outcome').textContent")
            .await
            .unwrap();
        let outcome = outcome.as_str().unwrap();
        assert!(
            outcome.contains(&format!(
                "task {dropped}, which this task runs after, was cancelled: not needed"
            )),
            "{outcome}"
        );
        let link = b
            .eval("document.querySelector('#blocked-by').getAttribute('href')")
            .await
            .unwrap();
        assert_eq!(link, json!(format!("/tasks/{dropped}")));
        assert_no_horizontal_scroll(&b, &format!("a blocked task at {name}px")).await;
        b.screenshot(&artifact(&format!("after-blocked-{name}.png")))
            .await
            .unwrap();
        b.close().await.unwrap();
    }
}
