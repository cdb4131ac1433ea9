//! Issue intake through the real engine: webhook deliveries and polling of the fake
//! forges, the origin key keeping an issue one task, and the task shipping with the
//! pull request linked back to its issue.
use super::support::*;
use gaffer_app::{HookError, HookReceiver, TaskQuery};
use gaffer_core::{Actor, Stage, TaskId};
use gaffer_engine::{Engine, Intake};
use gaffer_forge::{ForgeKind, Secret};
use gaffer_protocol::api::HookAnswer;
use gaffer_testkit::forge::{BareRemote, FakeForge, Flavor, HookDelivery};
use pretty_assertions::assert_eq;
use serde_json::json;
use std::time::Duration;

const TOKEN: &str = "forge-token-intake-31c";
const SECRET: &str = "hook-secret-5d1e0c9a7b";
const TITLE: &str = "Add an installation section to README";
const BODY: &str = "The README does not say how to install.";

fn intake() -> Intake {
    Intake {
        label: "gaffer".into(),
        assignee: Some("gaffer-bot".into()),
        secret: Some(Secret::new(SECRET)),
        poll_interval: Some(Duration::from_millis(200)),
    }
}

fn kind(flavor: Flavor) -> ForgeKind {
    match flavor {
        Flavor::Gitea => ForgeKind::Gitea,
        Flavor::GitHub => ForgeKind::GitHub,
    }
}

fn forge_name(flavor: Flavor) -> &'static str {
    match flavor {
        Flavor::Gitea => "gitea",
        Flavor::GitHub => "github",
    }
}

/// Headers as the server hands them over: lower-case names.
fn lower(headers: Vec<(String, String)>) -> Vec<(String, String)> {
    headers
        .into_iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v))
        .collect()
}

async fn deliver(
    engine: &Engine,
    flavor: Flavor,
    d: &HookDelivery,
    secret: &str,
) -> Result<HookAnswer, HookError> {
    engine
        .receive_hook(forge_name(flavor), &lower(d.signed(secret)), &d.body)
        .await
}

pub(super) async fn task_ids(w: &World) -> Vec<String> {
    w.app
        .tasks(&TaskQuery::default())
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.id)
        .collect()
}

async fn world(fake: &FakeForge, remote: &BareRemote, flavor: Flavor) -> World {
    World::build("grep -q '^## Installation' README.md", |s| {
        s.shipping.insert(
            "demo".into(),
            shipping(kind(flavor), &fake.base_url(), &remote.url(), TOKEN),
        );
        s.intake.insert("demo".into(), intake());
    })
    .await
}

#[tokio::test]
async fn an_issue_labelled_twice_delivered_twice_and_polled_is_one_task_whose_pull_request_closes_it(
) {
    for flavor in [Flavor::GitHub, Flavor::Gitea] {
        let remote = BareRemote::new().unwrap();
        let fake = FakeForge::start(flavor, "acme", "demo", TOKEN)
            .await
            .unwrap();
        fake.attach_remote(&remote);
        fake.report_ci_for_every_commit("success");
        let n = fake.add_issue(TITLE, BODY);
        let w = world(&fake, &remote, flavor).await;
        let labeled = match flavor {
            Flavor::GitHub => "labeled",
            Flavor::Gitea => "label_updated",
        };

        // Opened without the label: nothing to do yet.
        let opened = fake.issue_hook(n, "opened").unwrap();
        let answer = deliver(&w.engine, flavor, &opened, SECRET).await.unwrap();
        assert_eq!(answer.outcome, "ignored", "{answer:?}");
        assert!(task_ids(&w).await.is_empty());

        // Labelled: a task, whose request is the issue and which links back to it.
        fake.label_issue(n, "gaffer");
        let first = fake.issue_hook(n, labeled).unwrap();
        let answer = deliver(&w.engine, flavor, &first, SECRET).await.unwrap();
        assert_eq!(answer.outcome, "taken", "{answer:?}");
        assert_eq!(answer.tasks.len(), 1);
        assert!(answer.tasks[0].created);
        let id = answer.tasks[0].task_id.clone();
        let task = w.app.task(&id).await.unwrap().task;
        assert_eq!(task.request, format!("{TITLE}\n\n{BODY}"));
        assert_eq!(task.project, "demo");

        // The same delivery again (the forge retries), the label taken off and put on
        // again, the poll seeing it: the same task, nothing new.
        let again = deliver(&w.engine, flavor, &first, SECRET).await.unwrap();
        assert_eq!(
            (again.tasks[0].task_id.as_str(), again.tasks[0].created),
            (id.as_str(), false)
        );
        fake.unlabel_issue(n, "gaffer");
        let off = fake
            .issue_hook(
                n,
                if flavor == Flavor::GitHub {
                    "unlabeled"
                } else {
                    "label_updated"
                },
            )
            .unwrap();
        assert_eq!(
            deliver(&w.engine, flavor, &off, SECRET)
                .await
                .unwrap()
                .outcome,
            "ignored"
        );
        fake.label_issue(n, "gaffer");
        let relabelled = fake.issue_hook(n, labeled).unwrap();
        let answer = deliver(&w.engine, flavor, &relabelled, SECRET)
            .await
            .unwrap();
        assert_eq!(
            (answer.tasks[0].task_id.as_str(), answer.tasks[0].created),
            (id.as_str(), false)
        );
        let polled = w.engine.poll_intake_once().await;
        assert_eq!(polled.len(), 1, "{polled:?}");
        assert_eq!(
            (polled[0].task_id.as_str(), polled[0].created),
            (id.as_str(), false)
        );
        assert_eq!(task_ids(&w).await, vec![id.clone()]);
        let created = w
            .journal
            .stream_events(&gaffer_core::StreamId(id.clone()), 0)
            .await
            .unwrap();
        assert_eq!(
            created
                .iter()
                .filter(|e| e.event.kind() == "task_created")
                .count(),
            1
        );

        // It ships: the pull request closes the issue, the issue gets the link once.
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
        assert_eq!(w.run(&TaskId(id.clone())).await, Stage::Done, "{flavor:?}");
        let prs = fake.prs();
        assert_eq!(prs.len(), 1, "{prs:#?}");
        assert!(
            prs[0].body.contains(&format!("Closes #{n}\n")),
            "{}",
            prs[0].body
        );
        // Seen again after it shipped: still the one task, no second comment.
        assert_eq!(w.engine.poll_intake_once().await[0].task_id, id);
        let links: Vec<_> = fake
            .comments()
            .into_iter()
            .filter(|c| c.issue == n)
            .collect();
        assert_eq!(links.len(), 1, "{links:#?}");
        assert!(
            links[0].body.contains(&format!(
                "/pull{}/{}",
                if flavor == Flavor::Gitea { "s" } else { "" },
                prs[0].number
            )),
            "{links:#?}"
        );
        assert_eq!(task_ids(&w).await.len(), 1);
    }
}

#[tokio::test]
async fn a_delivery_without_the_right_signature_is_refused_and_creates_nothing() {
    for flavor in [Flavor::Gitea, Flavor::GitHub] {
        let remote = BareRemote::new().unwrap();
        let fake = FakeForge::start(flavor, "acme", "demo", TOKEN)
            .await
            .unwrap();
        let n = fake.add_issue(TITLE, BODY);
        fake.label_issue(n, "gaffer");
        let w = world(&fake, &remote, flavor).await;
        let d = fake.issue_hook(n, "opened").unwrap();
        let forge = forge_name(flavor);
        // No signature, another secret, the right signature over another body.
        let unsigned = lower(d.headers.clone());
        let wrong = lower(d.signed("another-secret-of-16+"));
        let mut other_body = d.body.clone();
        other_body.extend_from_slice(b"\n");
        for (headers, body) in [
            (&unsigned, &d.body),
            (&wrong, &d.body),
            (&lower(d.signed(SECRET)), &other_body),
        ] {
            let got = w.engine.receive_hook(forge, headers, body).await;
            assert!(
                matches!(got, Err(HookError::BadSignature)),
                "{flavor:?}: {got:?}"
            );
        }
        // Another forge's route, and a forge gaffer does not know.
        let got = w
            .engine
            .receive_hook(
                if flavor == Flavor::Gitea {
                    "github"
                } else {
                    "gitea"
                },
                &lower(d.signed(SECRET)),
                &d.body,
            )
            .await;
        assert!(matches!(got, Err(HookError::BadSignature)), "{got:?}");
        let got = w
            .engine
            .receive_hook("bitbucket", &lower(d.signed(SECRET)), &d.body)
            .await;
        assert!(matches!(got, Err(HookError::UnknownForge(_))), "{got:?}");
        assert!(
            task_ids(&w).await.is_empty(),
            "a refused delivery stored a task"
        );
        assert!(
            fake.requests().is_empty(),
            "a refused delivery reached the forge: {:?}",
            fake.requests()
        );
        // Signed right, it is taken.
        assert_eq!(
            deliver(&w.engine, flavor, &d, SECRET)
                .await
                .unwrap()
                .outcome,
            "taken"
        );
    }
}

#[tokio::test]
async fn a_delivery_signed_for_one_project_cannot_make_a_task_in_another() {
    let remote = BareRemote::new().unwrap();
    let fake = FakeForge::start(Flavor::GitHub, "acme", "demo", TOKEN)
        .await
        .unwrap();
    let other = FakeForge::start(Flavor::GitHub, "acme", "other", TOKEN)
        .await
        .unwrap();
    let n = other.add_issue(TITLE, BODY);
    other.label_issue(n, "gaffer");
    // Project demo's secret signs a delivery naming acme/other: demo does not watch it.
    let w = world(&fake, &remote, Flavor::GitHub).await;
    let d = other.issue_hook(n, "labeled").unwrap();
    let answer = deliver(&w.engine, Flavor::GitHub, &d, SECRET)
        .await
        .unwrap();
    assert_eq!(answer.outcome, "ignored");
    assert!(answer.reason.unwrap().contains("acme/other"));
    assert!(task_ids(&w).await.is_empty());
}

#[tokio::test]
async fn issues_assigned_to_the_bot_are_polled_in_and_others_are_left_alone() {
    let remote = BareRemote::new().unwrap();
    let fake = FakeForge::start(Flavor::Gitea, "acme", "demo", TOKEN)
        .await
        .unwrap();
    let assigned = fake.add_issue("Fix the typo", "In the README.");
    fake.assign_issue(assigned, "gaffer-bot");
    let someone_elses = fake.add_issue("Not ours", "");
    fake.assign_issue(someone_elses, "alice");
    let closed = fake.add_issue("Closed", "");
    fake.label_issue(closed, "gaffer");
    fake.close_issue(closed);
    let w = world(&fake, &remote, Flavor::Gitea).await;
    let polled = w.engine.poll_intake_once().await;
    assert_eq!(polled.len(), 1, "{polled:?}");
    let task = w.app.task(&polled[0].task_id).await.unwrap().task;
    assert_eq!(task.request, "Fix the typo\n\nIn the README.");
    assert_eq!(task_ids(&w).await.len(), 1);
}

/// Two workers (each with its own connection pool, as two processes have) poll one
/// PostgreSQL journal at once, again and again, while webhooks arrive at both: one
/// task per issue.
#[tokio::test]
async fn two_workers_polling_one_postgres_journal_make_one_task_per_issue() {
    if !Backend::Postgres.available() {
        eprintln!("skipped: no PostgreSQL");
        return;
    }
    let remote = BareRemote::new().unwrap();
    let fake = FakeForge::start(Flavor::GitHub, "acme", "demo", TOKEN)
        .await
        .unwrap();
    let issues: Vec<u64> = (0..3)
        .map(|i| {
            let n = fake.add_issue(&format!("Issue {i}"), "Do it.");
            fake.label_issue(n, "gaffer");
            n
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let (journal, url) = Backend::Postgres.journal(dir.path()).await;
    let w = World::build_on(dir, journal, "demo", "true", |s| {
        s.shipping.insert(
            "demo".into(),
            shipping(ForgeKind::GitHub, &fake.base_url(), &remote.url(), TOKEN),
        );
        s.intake.insert("demo".into(), intake());
    })
    .await;
    let second = gaffer_store::open(&url, gaffer_store::Durability::Normal)
        .await
        .unwrap();
    let other = w.engine_on(second);
    // The pollers the worker loops run, side by side, plus bursts of one-off polls
    // and deliveries racing them.
    let stop = tokio_util::sync::CancellationToken::new();
    let loops = [w.engine.clone(), other.clone()].map(|e| {
        let stop = stop.clone();
        tokio::spawn(async move { e.poll_intake(stop).await })
    });
    for _ in 0..3 {
        let d = fake.issue_hook(issues[0], "labeled").unwrap();
        let (a, b, c, d) = tokio::join!(
            w.engine.poll_intake_once(),
            other.poll_intake_once(),
            deliver(&w.engine, Flavor::GitHub, &d, SECRET),
            deliver(&other, Flavor::GitHub, &d, SECRET),
        );
        assert_eq!(a.len(), 3);
        assert_eq!(b.len(), 3);
        assert_eq!(c.unwrap().outcome, "taken");
        assert_eq!(d.unwrap().outcome, "taken");
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    stop.cancel();
    for l in loops {
        l.await.unwrap();
    }
    let tasks = w.app.tasks(&TaskQuery::default()).await.unwrap();
    let mut requests: Vec<&str> = tasks.iter().map(|t| t.request.as_str()).collect();
    requests.sort();
    assert_eq!(
        requests,
        vec![
            "Issue 0\n\nDo it.",
            "Issue 1\n\nDo it.",
            "Issue 2\n\nDo it."
        ]
    );
    let listed = fake
        .requests()
        .iter()
        .filter(|r| r.starts_with("GET /repos/acme/demo/issues?"))
        .count();
    assert!(listed >= 8, "the pollers polled: {listed}");
}
