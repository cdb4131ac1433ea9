//! Deliveries: signed webhooks, retries, ntfy publishes, and the outbox across a restart.

use super::support::{ntfy, quick, webhook, Gaffer, SECRET};
use gaffer_testkit::notify::{rfc2104_hmac_sha256, FakeNtfy, FakeWebhook};
use pretty_assertions::assert_eq;
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn a_webhook_receives_a_signed_payload_for_each_approval_with_one_tap_links() {
    let hook = FakeWebhook::start().await.unwrap();
    let g = Gaffer::start(vec![webhook("ops", &hook.url(), Some("ana"))], "").await;
    let task = g.task().await;
    let stop = CancellationToken::new();
    let _n = g.notifier(quick(), &stop);
    let approval = g.ask(&task, "cargo publish").await;
    g.until("delivered", |o| o.iter().any(|i| i.state == "delivered"))
        .await;

    let got = hook.received();
    assert_eq!(got.len(), 1, "one request: {got:#?}");
    let r = &got[0];
    let timestamp = r.header("x-gaffer-timestamp").unwrap();
    let mut signed = timestamp.as_bytes().to_vec();
    signed.push(b'.');
    signed.extend_from_slice(&r.body);
    assert_eq!(
        r.header("x-gaffer-signature-256").unwrap(),
        format!("sha256={}", rfc2104_hmac_sha256(SECRET.as_bytes(), &signed))
    );
    // A changed body or another secret does not verify.
    let mut tampered = signed.clone();
    tampered.push(b' ');
    assert_ne!(
        r.header("x-gaffer-signature-256").unwrap(),
        format!(
            "sha256={}",
            rfc2104_hmac_sha256(SECRET.as_bytes(), &tampered)
        )
    );
    let age = gaffer_store::now_ms() / 1000 - timestamp.parse::<i64>().unwrap();
    assert!(
        (0..60).contains(&age),
        "timestamp {timestamp} is {age} s old"
    );

    let body = r.json();
    let id = format!("ops/approval/{}", approval.id);
    assert_eq!(body["id"], id);
    assert_eq!(r.header("x-gaffer-delivery").unwrap(), id);
    assert_eq!(r.header("x-gaffer-event").unwrap(), "approval");
    assert_eq!(body["event"], "approval");
    assert_eq!(body["project"], "app");
    assert_eq!(body["task"]["id"], task.as_str());
    assert_eq!(body["task"]["request"], "make the build faster");
    assert_eq!(body["task"]["url"], format!("{}/tasks/{task}", g.base));
    assert_eq!(body["approval"]["id"], approval.id.as_str());
    assert_eq!(body["approval"]["summary"], "run `cargo publish`");
    assert_eq!(body["person"], "ana");
    let approve = body["links"]["approve"].as_str().unwrap();
    let deny = body["links"]["deny"].as_str().unwrap();
    assert!(
        approve.starts_with(&format!("{}/link/", g.base)),
        "{approve}"
    );
    assert_ne!(approve, deny);
    // No secret travels in the payload.
    assert!(!String::from_utf8_lossy(&r.body).contains(SECRET));

    stop.cancel();
}

#[tokio::test]
async fn a_failing_receiver_is_retried_with_backoff_until_it_takes_it_once() {
    let hook = FakeWebhook::start().await.unwrap();
    hook.fail_next(2);
    hook.hang_next(0);
    let g = Gaffer::start(vec![webhook("ops", &hook.url(), None)], "").await;
    let task = g.task().await;
    let stop = CancellationToken::new();
    let _n = g.notifier(quick(), &stop);
    let approval = g.ask(&task, "make deploy").await;
    let items = g
        .until("delivered after retries", |o| {
            o.iter().any(|i| i.state == "delivered")
        })
        .await;

    assert_eq!(items.len(), 1, "one outbox row: {items:#?}");
    let item = &items[0];
    assert_eq!(item.id, format!("ops/approval/{}", approval.id));
    assert_eq!(item.attempts, 3, "two 503s, then taken");
    assert!(item.delivered_at.is_some());
    let got = hook.received();
    let statuses: Vec<u16> = got.iter().map(|r| r.status).collect();
    assert_eq!(statuses, [503, 503, 204]);
    // Every try is the same delivery (same id), so a receiver can drop repeats.
    assert!(got
        .iter()
        .all(|r| r.header("x-gaffer-delivery") == Some(item.id.as_str())));
    // No link without a person.
    assert!(got[2].json()["links"].is_null());
    // Nothing more is sent later.
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    assert_eq!(hook.received().len(), 3);
    stop.cancel();
}

#[tokio::test]
async fn a_receiver_failing_for_ever_is_tried_a_bounded_number_of_times() {
    // 503 for ever: bounded tries, then failed.
    let hook = FakeWebhook::start().await.unwrap();
    hook.fail_next(100);
    let g = Gaffer::start(vec![webhook("ops", &hook.url(), None)], "").await;
    let task = g.task().await;
    let stop = CancellationToken::new();
    let _n = g.notifier(quick(), &stop);
    g.ask(&task, "make deploy").await;
    let items = g
        .until("given up", |o| o.iter().any(|i| i.state == "failed"))
        .await;
    assert_eq!(items[0].attempts, 5, "quick() allows 5 tries");
    assert!(
        items[0].last_error.contains("503"),
        "{}",
        items[0].last_error
    );
    assert_eq!(hook.received().len(), 5);
    stop.cancel();
}

#[tokio::test]
async fn ntfy_gets_a_json_publish_with_approve_deny_and_open_buttons() {
    let server = FakeNtfy::start(Some("tk_phone_token_123")).await.unwrap();
    let g = Gaffer::start(
        vec![ntfy(
            "phone",
            &server.url(),
            Some("tk_phone_token_123"),
            Some("ana"),
        )],
        "",
    )
    .await;
    let task = g.task().await;
    let stop = CancellationToken::new();
    let _n = g.notifier(quick(), &stop);
    g.ask(&task, "rm -rf target").await;
    g.until("delivered", |o| o.iter().any(|i| i.state == "delivered"))
        .await;

    let published = server.published();
    assert_eq!(published.len(), 1, "{:#?}", server.received());
    let p = &published[0];
    assert_eq!(p["topic"], "gaffer-ana");
    assert_eq!(p["title"], "app: Tool call — approval needed");
    assert!(
        p["message"]
            .as_str()
            .unwrap()
            .starts_with("run `rm -rf target`"),
        "{p}"
    );
    assert_eq!(p["click"], format!("{}/tasks/{task}", g.base));
    let actions = p["actions"].as_array().unwrap();
    let labels: Vec<&str> = actions
        .iter()
        .map(|a| a["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["Approve", "Deny", "Open task"]);
    assert!(actions.iter().all(|a| a["action"] == "view"));
    assert!(actions[0]["url"]
        .as_str()
        .unwrap()
        .starts_with(&format!("{}/link/", g.base)));
    let auth = server.received()[0]
        .header("authorization")
        .unwrap()
        .to_owned();
    assert_eq!(auth, "Bearer tk_phone_token_123");
    stop.cancel();
}

#[tokio::test]
async fn an_outbox_row_left_by_a_stopped_notifier_is_delivered_once_by_the_next() {
    // The receiver is down: the row stays pending with a failed try.
    let g = Gaffer::start(vec![webhook("ops", "http://127.0.0.1:9/hooks", None)], "").await;
    let task = g.task().await;
    let first = CancellationToken::new();
    let n1 = g.notifier(quick(), &first);
    let approval = g.ask(&task, "make deploy").await;
    g.until("tried", |o| o.iter().any(|i| i.attempts >= 1))
        .await;
    first.cancel();
    n1.await.unwrap();

    // The next run (another receiver URL, same target name) delivers it once and
    // enqueues nothing twice, though it re-reads pending approvals at start.
    let hook = FakeWebhook::start().await.unwrap();
    let mut g = g;
    g.targets = vec![webhook("ops", &hook.url(), None)];
    let second = CancellationToken::new();
    let _n2 = g.notifier(quick(), &second);
    let items = g
        .until("delivered", |o| o.iter().any(|i| i.state == "delivered"))
        .await;
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].id, format!("ops/approval/{}", approval.id));
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(hook.received().len(), 1);
    second.cancel();
}
