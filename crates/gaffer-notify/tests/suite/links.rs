//! One-tap links, end to end: the link ntfy got opens a confirm page on the server
//! (which decides nothing), its POST decides once as the link's person via ntfy,
//! and a second use, its twin, an expired or a forged link are refused with a page.

use super::support::{ntfy, quick, Gaffer};
use gaffer_notify::Link;
use gaffer_testkit::notify::FakeNtfy;
use pretty_assertions::assert_eq;
use tokio_util::sync::CancellationToken;

async fn page(r: reqwest::Response) -> (u16, String) {
    let status = r.status().as_u16();
    let ty = r
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    assert!(ty.starts_with("text/html"), "{status} answered {ty}");
    (status, r.text().await.unwrap())
}

#[tokio::test]
async fn a_one_tap_link_decides_once_and_a_second_use_or_an_expired_link_is_refused() {
    let phone = FakeNtfy::start(None).await.unwrap();
    let g = Gaffer::start(vec![ntfy("phone", &phone.url(), None, Some("ana"))], "").await;
    let task = g.task().await;
    let stop = CancellationToken::new();
    let _n = g.notifier(quick(), &stop);
    let approval = g.ask(&task, "cargo publish").await;
    g.until("delivered", |o| o.iter().any(|i| i.state == "delivered"))
        .await;
    let actions = phone.published()[0]["actions"].clone();
    let approve = actions[0]["url"].as_str().unwrap().to_owned();
    let deny = actions[1]["url"].as_str().unwrap().to_owned();
    // A browser with no session or token: the link is the credential.
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();

    // Opening it (a preview, a prefetcher, the person) decides nothing.
    for _ in 0..2 {
        let (status, html) = page(browser.get(&approve).send().await.unwrap()).await;
        assert_eq!(status, 200, "{html}");
        assert!(html.contains("Approve? (Tool call)"), "{html}");
        assert!(html.contains("run `cargo publish`"), "{html}");
        assert!(html.contains("make the build faster"), "{html}");
        assert!(html.contains("for ana via ntfy"), "{html}");
        assert!(html.contains("<form method=\"post\""), "{html}");
    }
    assert_eq!(g.app.approval(&approval.id).await.unwrap().state, "pending");

    // A POST from another site is refused before the link is looked at.
    let foreign = browser
        .post(&approve)
        .header("origin", "https://evil.example")
        .form(&[("note", "")])
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status(), 403);
    assert_eq!(g.app.approval(&approval.id).await.unwrap().state, "pending");

    // The confirm button: the page's own form post (same origin).
    let origin = g.base.clone();
    let (status, html) = page(
        browser
            .post(&approve)
            .header("origin", &origin)
            .header("sec-fetch-site", "same-origin")
            .form(&[("note", "ship it")])
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200, "{html}");
    assert!(html.contains("Approved"), "{html}");
    let decided = g.app.approval(&approval.id).await.unwrap();
    assert_eq!(decided.state, "approved");
    let by = decided.decided_by.unwrap();
    assert_eq!((by.name.as_str(), by.via.as_str()), ("ana", "ntfy"));
    assert_eq!(decided.note.as_deref(), Some("ship it"));

    // Second use, and the deny twin: refused with a page saying who decided.
    for (url, method) in [(&approve, "POST"), (&approve, "GET"), (&deny, "POST")] {
        let r = if method == "POST" {
            browser
                .post(url)
                .form(&[("note", "")])
                .send()
                .await
                .unwrap()
        } else {
            browser.get(url).send().await.unwrap()
        };
        let (status, html) = page(r).await;
        assert_eq!(status, 409, "{method} {url}: {html}");
        assert!(html.contains("already approved by ana via ntfy"), "{html}");
    }
    assert_eq!(
        g.app.approval(&approval.id).await.unwrap().state,
        "approved",
        "still the first decision"
    );

    // An expired link (signed by this server) and a forged one decide nothing.
    let second = g.ask_again(&task, "make deploy").await;
    let now = gaffer_store::now_ms();
    let expired = Link {
        approval_id: second.id.clone(),
        task_id: task.clone(),
        approve: true,
        target: "phone".into(),
        channel: "ntfy".into(),
        person: "ana".into(),
        issued_at: now - 120_000,
        expires_at: now - 60_000,
    };
    let (status, html) = page(
        browser
            .post(expired.url(&g.base, &g.key))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 410, "{html}");
    assert!(html.contains("expired"), "{html}");
    let mut forged = expired.clone();
    forged.expires_at = now + 3_600_000;
    let stolen_mac = expired.token(&g.key).split_once('.').unwrap().1.to_owned();
    let forged_token = format!(
        "{}.{stolen_mac}",
        forged
            .token(&gaffer_notify::LinkKey::new([1; 32]))
            .split_once('.')
            .unwrap()
            .0
    );
    let (status, html) = page(
        browser
            .post(format!("{}/link/{forged_token}", g.base))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 403, "{html}");
    assert_eq!(g.app.approval(&second.id).await.unwrap().state, "pending");
    stop.cancel();
}

fn artifact(name: &str) -> std::path::PathBuf {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// The confirm page in real Chromium at a phone's and a desktop's width: a page, not
/// JSON; nothing wider than the screen; its button posts the form (the browser's own
/// Origin passes the server's checks) and the decision is recorded once.
#[tokio::test]
async fn the_confirm_page_is_a_clean_page_at_phone_and_desktop_widths_and_its_button_decides() {
    let Some(driver) = gaffer_testkit::browser::Driver::start().unwrap() else {
        eprintln!("no chromedriver: skipped");
        return;
    };
    let phone = FakeNtfy::start(None).await.unwrap();
    let g = Gaffer::start(vec![ntfy("phone", &phone.url(), None, Some("ana"))], "").await;
    let task = g.task().await;
    let stop = CancellationToken::new();
    let _n = g.notifier(quick(), &stop);
    for (width, height, command) in [
        (
            390,
            844,
            "cargo publish --allow-dirty --registry crates-io-mirror-with-a-very-long-name",
        ),
        (1280, 800, "make deploy"),
    ] {
        let step = format!("w{width}");
        let approval = g.ask_in(&task, &step, command).await;
        let url = g
            .until("delivered", |o| {
                o.iter()
                    .any(|i| i.state == "delivered" && i.id.ends_with(&approval.id))
            })
            .await;
        drop(url);
        let published = phone.published();
        let last = published
            .iter()
            .rev()
            .find(|p| p["message"].as_str().unwrap().contains(command))
            .unwrap();
        let approve = last["actions"][0]["url"].as_str().unwrap().to_owned();

        let b = driver.browser(&step, width, height).await.unwrap();
        b.goto(&approve).await.unwrap();
        b.wait_for(
            "the confirm page",
            "!!document.querySelector('form button')",
        )
        .await
        .unwrap();
        let shown = b
            .eval("[document.body.innerText, document.documentElement.scrollWidth <= window.innerWidth, getComputedStyle(document.body).fontFamily !== '', document.querySelector('form button').getBoundingClientRect().height]")
            .await
            .unwrap();
        let text = shown[0].as_str().unwrap();
        assert!(
            text.contains("Approve? (Tool call)") && text.contains(command),
            "{text}"
        );
        assert!(!text.trim_start().starts_with('{'), "raw JSON: {text}");
        assert_eq!(shown[1], true, "wider than the screen at {width}px");
        assert!(
            shown[3].as_f64().unwrap() >= 40.0,
            "a button a thumb can hit: {shown}"
        );
        b.screenshot(&artifact(&format!("link-confirm-{width}.png")))
            .await
            .unwrap();
        assert_eq!(g.app.approval(&approval.id).await.unwrap().state, "pending");

        b.click("form button").await.unwrap();
        b.wait_for(
            "the outcome",
            "document.body.innerText.includes('Approved')",
        )
        .await
        .unwrap();
        b.screenshot(&artifact(&format!("link-approved-{width}.png")))
            .await
            .unwrap();
        let decided = g.app.approval(&approval.id).await.unwrap();
        assert_eq!(decided.state, "approved");
        assert_eq!(decided.decided_by.unwrap().via, "ntfy");

        // Back and again: the second use is a page saying it was used.
        b.goto(&approve).await.unwrap();
        b.wait_for(
            "the refusal",
            "document.body.innerText.includes('Already decided')",
        )
        .await
        .unwrap();
        b.screenshot(&artifact(&format!("link-used-{width}.png")))
            .await
            .unwrap();
        b.close().await.unwrap();
    }
    stop.cancel();
}
