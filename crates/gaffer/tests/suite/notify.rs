//! Notifications from the commands that run tasks, end to end: the real binary,
//! a real webhook receiver on loopback, the fake Claude Code. `gaffer run` in a
//! terminal tells a person's phone about the plan approval (signed, once, with the
//! command that decides it and no link, since no server is there to open one);
//! two `gaffer serve` on one journal send each notification once.

use super::run::Bench;
use super::serve::{decide_next, finished_task, serve, until};
use super::support::local_client;
use super::terminal::{Screen, PROMPT};
use gaffer_testkit::notify::{FakeWebhook, Received};
use serde_json::Value;
use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::{Duration, Instant};

const SECRET_ENV: &str = "GAFFER_NOTIFY_PHONE_SECRET";
const SECRET: &str = "whsec-phone-0123456789abcdef";

fn notify_config(b: &Bench, url: &str) {
    b.home.write_config(&format!(
        "[[notify]]\nname = \"phone\"\nkind = \"webhook\"\nurl = \"{url}\"\nperson = \"ana\"\n"
    ));
}

/// Wait (at most 60 s) until the receiver has `n` requests.
fn received(hook: &FakeWebhook, n: usize) -> Vec<Received> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let got = hook.received();
        if got.len() >= n {
            return got;
        }
        assert!(
            Instant::now() < deadline,
            "{} of {n} requests: {got:#?}",
            got.len()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Each delivery id the receiver saw, with how often.
fn deliveries(hook: &FakeWebhook) -> BTreeMap<String, usize> {
    let mut seen = BTreeMap::new();
    for r in hook.received() {
        *seen
            .entry(r.header("x-gaffer-delivery").unwrap().to_owned())
            .or_insert(0) += 1;
    }
    seen
}

#[test]
fn gaffer_run_without_a_server_sends_the_plan_approval_once_signed_with_the_command_and_no_link() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let hook = rt.block_on(FakeWebhook::start()).unwrap();
    let b = Bench::new();
    notify_config(&b, &hook.url());
    b.script_all();
    let mut cmd = b.gaffer_std();
    cmd.env(SECRET_ENV, SECRET)
        .args(["run", super::run::REQUEST, "--repo"])
        .arg(&b.repo);
    let mut screen = Screen::spawn(cmd);
    // The person is told, before anything else, where notifications go and how.
    screen.expect("notifications: on, to phone (webhook); without links (no `gaffer serve`");
    screen.expect(PROMPT);

    let got = received(&hook, 1);
    let r = &got[0];
    assert_eq!(
        r.header("x-gaffer-signature-256").unwrap(),
        r.expected_signature(SECRET),
        "signed with the target's secret over the timestamp and the body"
    );
    let body = r.json();
    let approval = body["approval"]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        (&body["event"], &body["approval"]["kind"]),
        (&Value::from("approval"), &Value::from("plan"))
    );
    assert_eq!(
        r.header("x-gaffer-delivery").unwrap(),
        format!("phone/approval/{approval}")
    );
    assert_eq!(body["links"], Value::Null, "no server: no one-tap link");
    assert_eq!(body["task"]["url"], Value::Null, "no server: no task page");
    let raw = String::from_utf8_lossy(&r.body).into_owned();
    assert!(!raw.contains("http"), "no link of any kind: {raw}");
    let (config, data) = (b.home.config(), b.home.data());
    let approve = format!(
        "gaffer --config {} --data-dir {} approve {approval}",
        config.display(),
        data.display()
    );
    assert_eq!(body["commands"]["approve"], approve.as_str());
    assert_eq!(
        body["commands"]["deny"],
        approve.replace(" approve ", " deny ").as_str()
    );

    // The command, exactly as sent, decides it (from another shell).
    let words: Vec<&str> = approve.split(' ').collect();
    let out = b
        .gaffer_std()
        .env(SECRET_ENV, SECRET)
        .args(&words[1..])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    screen.expect("approved by tester (cli)");
    assert_eq!(screen.finish(), 0, "{}", screen.text());

    // The task's end is sent before `gaffer run` exits; nothing is sent twice.
    let seen = deliveries(&hook);
    let ended: Vec<&String> = seen
        .keys()
        .filter(|k| k.starts_with("phone/done/"))
        .collect();
    assert_eq!(ended.len(), 1, "{seen:?}");
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(seen.values().all(|n| *n == 1), "{seen:?}");
    drop(rt);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_serves_on_one_journal_deliver_each_approval_once_with_a_link_that_opens() {
    let hook = FakeWebhook::start().await.unwrap();
    let b = Bench::new();
    notify_config(&b, &hook.url());
    b.script_all();
    let start = |extra: &[&str]| {
        let mut cmd = b.gaffer_std();
        cmd.env(SECRET_ENV, SECRET)
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        serve(&mut cmd)
    };
    let (_runs, base_a) = start(&[]);
    let (_serves, base_b) = start(&["--workers", "0"]);
    let http = local_client(&b.home.data());
    let r = http
        .post(format!("{base_b}/api/projects"))
        .json(&serde_json::json!({ "path": b.repo }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let task: Value = http
        .post(format!("{base_b}/api/tasks"))
        .json(&serde_json::json!({ "project": "demo", "request": super::run::REQUEST }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = task["id"].as_str().unwrap().to_owned();

    let got = until("the plan approval's notification", async || {
        let got = hook.received();
        (!got.is_empty()).then_some(got)
    })
    .await;
    let body = got[0].json();
    assert_eq!(
        got[0].header("x-gaffer-signature-256").unwrap(),
        got[0].expected_signature(SECRET)
    );
    // The link leads to one of the two servers, and opens its confirm page.
    let link = body["links"]["approve"].as_str().unwrap().to_owned();
    assert!(
        link.starts_with(&format!("{base_a}/link/"))
            || link.starts_with(&format!("{base_b}/link/")),
        "{link}"
    );
    let page = reqwest::get(&link).await.unwrap();
    assert_eq!(page.status(), 200, "{link}");

    decide_next(&http, &base_b, &id, "plan", "approve").await;
    let done = finished_task(&http, &base_a, &id).await;
    assert_eq!(done["stage"], "done", "{done}");
    until("the end's notification", async || {
        deliveries(&hook)
            .keys()
            .any(|k| k.starts_with("phone/done/"))
            .then_some(())
    })
    .await;
    // Both servers stay up a while longer: neither sends anything again.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let seen = deliveries(&hook);
    assert_eq!(seen.len(), 2, "the plan approval and the end: {seen:?}");
    assert!(seen.values().all(|n| *n == 1), "each once: {seen:?}");
}
