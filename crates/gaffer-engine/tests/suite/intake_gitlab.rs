//! Issue intake from GitLab through the real engine: `Issue Hook` deliveries checked
//! by the project's webhook token (`X-Gitlab-Token`), polling of the fake GitLab's v4
//! issues, one task per issue, and the merge request that closes it.
use super::intake::task_ids;
use super::support::*;
use gaffer_app::HookReceiver;
use gaffer_core::{Actor, Stage, TaskId};
use gaffer_engine::{Engine, Intake};
use gaffer_forge::{ForgeKind, Secret};
use gaffer_protocol::api::HookAnswer;
use gaffer_testkit::forge::{BareRemote, FakeGitLab, HookDelivery};
use pretty_assertions::assert_eq;
use serde_json::json;
use std::time::Duration;

const TOKEN: &str = "glpat-intake-7c2e0a";
const SECRET: &str = "gitlab-hook-token-91ab4f";
const GROUP: &str = "acme/tools";
const TITLE: &str = "Add an installation section to README";
const BODY: &str = "The README does not say how to install.";

async fn world(fake: &FakeGitLab, remote: &BareRemote) -> World {
    let (base, url) = (fake.base_url(), remote.url());
    World::build("grep -q '^## Installation' README.md", move |s| {
        let mut ship = shipping(ForgeKind::GitLab, &base, &url, TOKEN);
        ship.owner = Some(GROUP.into());
        s.shipping.insert("demo".into(), ship);
        s.intake.insert(
            "demo".into(),
            Intake {
                label: "gaffer".into(),
                assignee: Some("gaffer-bot".into()),
                secret: Some(Secret::new(SECRET)),
                poll_interval: Some(Duration::from_millis(200)),
            },
        );
    })
    .await
}

/// `d` as the server hands it over (lower-case header names), with `token`.
async fn deliver(engine: &Engine, d: &HookDelivery, token: &str) -> Option<HookAnswer> {
    let headers: Vec<(String, String)> = d
        .signed(token)
        .into_iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v))
        .collect();
    engine.receive_hook("gitlab", &headers, &d.body).await.ok()
}

#[tokio::test]
async fn a_gitlab_issue_labelled_delivered_twice_and_polled_is_one_task_whose_merge_request_closes_it(
) {
    let remote = BareRemote::new().unwrap();
    let fake = FakeGitLab::start(GROUP, "demo", TOKEN).await.unwrap();
    fake.attach_remote(&remote);
    fake.report_ci_for_every_commit("success", "ok\n");
    let n = fake.add_issue(TITLE, BODY);
    let w = world(&fake, &remote).await;

    // Opened without the label: nothing to do yet.
    let opened = fake.issue_hook(n, "open").unwrap();
    let answer = deliver(&w.engine, &opened, SECRET).await.unwrap();
    assert_eq!(answer.outcome, "ignored", "{answer:?}");

    // Labelled, but with another project's token: refused, nothing made.
    fake.label_issue(n, "gaffer");
    let labelled = fake.issue_hook(n, "update").unwrap();
    assert_eq!(deliver(&w.engine, &labelled, "not-the-token").await, None);
    assert!(task_ids(&w).await.is_empty());

    // With the token: one task, whose request is the issue.
    let answer = deliver(&w.engine, &labelled, SECRET).await.unwrap();
    assert_eq!(answer.outcome, "taken", "{answer:?}");
    assert!(answer.tasks[0].created);
    let id = answer.tasks[0].task_id.clone();
    let task = w.app.task(&id).await.unwrap().task;
    assert_eq!(task.request, format!("{TITLE}\n\n{BODY}"));

    // Delivered again (GitLab retries) and polled: the same task.
    let again = deliver(&w.engine, &labelled, SECRET).await.unwrap();
    assert_eq!(
        (again.tasks[0].task_id.as_str(), again.tasks[0].created),
        (id.as_str(), false)
    );
    let polled = w.engine.poll_intake_once().await;
    assert_eq!(polled.len(), 1, "{polled:?}");
    assert_eq!(
        (polled[0].task_id.as_str(), polled[0].created),
        (id.as_str(), false)
    );
    assert_eq!(task_ids(&w).await, vec![id.clone()]);

    // It ships: the merge request closes the issue, the issue gets the link once.
    w.app
        .set_auto_approve("demo", true, Actor::user("test", "test"))
        .await
        .unwrap();
    w.script(
        "planner",
        vec![plan_answer(&["Add an installation section"])],
    );
    w.script("owner", vec![write("README.md", README_DONE)]);
    w.script("reviewer", vec![verdict(json!({ "verdict": "done" }))]);
    assert_eq!(w.run(&TaskId(id.clone())).await, Stage::Done);
    let mrs = fake.mrs();
    assert_eq!(mrs.len(), 1, "{mrs:#?}");
    assert!(
        mrs[0].description.contains(&format!("Closes #{n}")),
        "{}",
        mrs[0].description
    );
    assert_eq!(w.engine.poll_intake_once().await[0].task_id, id);
    let links: Vec<_> = fake.notes().into_iter().filter(|c| c.issue == n).collect();
    assert_eq!(links.len(), 1, "{links:#?}");
    assert!(
        links[0]
            .body
            .contains(&format!("/-/merge_requests/{}", mrs[0].iid)),
        "{links:#?}"
    );
    assert_eq!(task_ids(&w).await.len(), 1);
}
