//! Without a server to open them, a notification carries no link at all (no task
//! page, no one-tap link) and an approval names the commands that decide it.

use super::support::{ntfy, quick, webhook, Gaffer};
use gaffer_notify::ServerUrl;
use gaffer_testkit::notify::{FakeNtfy, FakeWebhook};
use pretty_assertions::assert_eq;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn without_a_server_an_approval_has_no_link_and_names_the_commands_that_decide_it() {
    let hook = FakeWebhook::start().await.unwrap();
    let phone = FakeNtfy::start(None).await.unwrap();
    let g = Gaffer::start(
        vec![
            webhook("ops", &hook.url(), Some("ana")),
            ntfy("phone", &phone.url(), None, Some("ana")),
        ],
        "",
    )
    .await;
    let task = g.task().await;
    let stop = CancellationToken::new();
    let _n = g.notifier_reaching(ServerUrl::found_by(|| None), quick(), &stop);
    let approval = g.ask(&task, "cargo publish").await;
    g.until("both delivered", |o| {
        o.len() == 2 && o.iter().all(|i| i.state == "delivered")
    })
    .await;

    let got = hook.received();
    assert_eq!(got.len(), 1);
    let body = got[0].json();
    assert_eq!(body["links"], serde_json::Value::Null, "{body}");
    assert_eq!(body["task"]["url"], serde_json::Value::Null, "{body}");
    assert_eq!(
        body["commands"],
        serde_json::json!({
            "approve": format!("gaffer --config /srv/gaffer.toml approve {}", approval.id),
            "deny": format!("gaffer --config /srv/gaffer.toml deny {}", approval.id),
        })
    );
    let raw = String::from_utf8_lossy(&got[0].body).into_owned();
    assert!(!raw.contains("http"), "no URL of any kind: {raw}");

    let published = phone.published();
    assert_eq!(published.len(), 1);
    let p = &published[0];
    assert!(p.get("click").is_none(), "{p}");
    assert_eq!(p["actions"], serde_json::json!([]), "{p}");
    let message = p["message"].as_str().unwrap();
    assert!(
        message.ends_with(&format!(
            "To decide, run:\ngaffer --config /srv/gaffer.toml approve {id}\nor:\ngaffer --config /srv/gaffer.toml deny {id}",
            id = approval.id
        )),
        "{message}"
    );
    assert!(!p.to_string().contains("http"), "{p}");
    stop.cancel();
}

#[tokio::test]
async fn the_server_is_looked_for_at_each_delivery_so_links_appear_once_one_runs() {
    let hook = FakeWebhook::start().await.unwrap();
    let g = Gaffer::start(vec![webhook("ops", &hook.url(), Some("ana"))], "").await;
    let task = g.task().await;
    let up = Arc::new(AtomicBool::new(false));
    let (seen, base) = (up.clone(), g.base.clone());
    let server = ServerUrl::found_by(move || seen.load(Ordering::SeqCst).then(|| base.clone()));
    let stop = CancellationToken::new();
    let _n = g.notifier_reaching(server, quick(), &stop);

    g.ask(&task, "make one").await;
    g.until("first", |o| o.iter().any(|i| i.state == "delivered"))
        .await;
    up.store(true, Ordering::SeqCst);
    let second = g.ask_again(&task, "make two").await;
    g.until("second", |o| {
        o.len() == 2 && o.iter().all(|i| i.state == "delivered")
    })
    .await;

    let got = hook.received();
    assert_eq!(got.len(), 2);
    assert!(got[0].json()["links"].is_null());
    let later = got[1].json();
    assert_eq!(later["approval"]["id"], second.id.as_str());
    assert!(later["links"]["approve"]
        .as_str()
        .unwrap()
        .starts_with(&format!("{}/link/", g.base)));
    assert_eq!(later["task"]["url"], format!("{}/tasks/{task}", g.base));
    // The commands come with every approval, links or not.
    assert_eq!(
        later["commands"]["deny"],
        format!("gaffer --config /srv/gaffer.toml deny {}", second.id)
    );
    stop.cancel();
}
