//! The control plane: only the person's credential decides, only this server's
//! names are answered, and every answer carries its security headers.

use super::support::*;
use gaffer_app::{App, Policy};
use gaffer_core::ApprovalKind;
use gaffer_server::{LocalSecret, Server, ServerConfig};
use gaffer_store::{Durability, SqliteJournal};
use pretty_assertions::assert_eq;
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::sync::Arc;

async fn code_of(r: reqwest::Response) -> (StatusCode, String) {
    let status = r.status();
    let body: Value = r.json().await.unwrap();
    (
        status,
        body["error"]["code"].as_str().unwrap_or("").to_owned(),
    )
}

#[tokio::test]
async fn a_request_naming_another_host_is_refused_and_changes_nothing() {
    let h = start(false).await;
    h.project("alpha").await;
    let task = h.task("alpha").await;
    let a = h.ask(&task, "plan", ApprovalKind::Plan, "plan").await;
    let before = h.event_count().await;
    let host = format!("attacker.test:{}", h.port());
    // Even with the person's own credential: the name is what a rebinding page sends.
    for (method, path, body) in [
        ("GET", "/".to_owned(), None),
        ("GET", "/api/tasks".to_owned(), None),
        ("GET", "/login".to_owned(), None),
        (
            "POST",
            format!("/api/approvals/{}/decision", a.id),
            Some(json!({"decision": "approve"})),
        ),
        (
            "POST",
            "/api/tasks".to_owned(),
            Some(json!({"project": "alpha", "request": "run id"})),
        ),
        (
            "POST",
            "/api/projects/alpha/auto".to_owned(),
            Some(json!({"enabled": true})),
        ),
    ] {
        let mut r = h
            .http
            .request(method.parse().unwrap(), h.url(&path))
            .header("host", &host);
        if let Some(body) = body {
            r = r.json(&body);
        }
        let (status, code) = code_of(r.send().await.unwrap()).await;
        assert_eq!(
            (status, code.as_str()),
            (StatusCode::FORBIDDEN, "host"),
            "{method} {path}"
        );
    }
    assert_eq!(h.event_count().await, before);
    assert_eq!(h.app.approval(&a.id).await.unwrap().state, "pending");
    assert!(!h.app.project("alpha").await.unwrap().auto_approve);
    // Loopback names and addresses are answered.
    for host in [
        format!("localhost:{}", h.port()),
        format!("127.0.0.1:{}", h.port()),
    ] {
        let r = h
            .http
            .get(h.url("/api/tasks"))
            .header("host", host)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
    }
}

#[tokio::test]
async fn a_configured_public_name_is_answered() {
    let dir = tempfile::tempdir().unwrap();
    let journal = SqliteJournal::open(&dir.path().join("gaffer.db"), Durability::Normal)
        .await
        .unwrap();
    let local = LocalSecret::generate("ana");
    let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap(), local.clone());
    config.public_names = vec!["gaffer.example.com".into()];
    let server = Server::bind(App::new(Arc::new(journal), Policy::default()), config)
        .await
        .unwrap();
    let base = format!("http://{}", server.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(server.run(async move {
        let _ = stopped.await;
    }));
    let http = authorized(&local);
    let r = http
        .get(format!("{base}/api/tasks"))
        .header("host", "gaffer.example.com")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let r = http
        .get(format!("{base}/api/tasks"))
        .header("host", "other.example.com")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let _ = stop.send(());
}

#[tokio::test]
async fn without_the_local_secret_nothing_is_listed_created_or_decided() {
    let h = start(false).await;
    h.project("alpha").await;
    let task = h.task("alpha").await;
    let a = h.ask(&task, "plan", ApprovalKind::Plan, "plan").await;
    let before = h.event_count().await;
    let decide = format!("/api/approvals/{}/decision", a.id);
    let wrong = LocalSecret::generate("ana");
    // On loopback, with no credential, another gaffer's secret, or a guess.
    for bearer in [None, Some(wrong.expose()), Some("gls_0000")] {
        for (method, path, body) in [
            ("GET", "/api/tasks", None),
            ("GET", "/api/approvals?state=pending", None),
            ("GET", "/api/events", None),
            ("GET", "/metrics", None),
            (
                "POST",
                "/api/tasks",
                Some(json!({"project": "alpha", "request": "x"})),
            ),
            (
                "POST",
                decide.as_str(),
                Some(json!({"decision": "approve"})),
            ),
            (
                "POST",
                "/api/projects/alpha/auto",
                Some(json!({"enabled": true})),
            ),
        ] {
            let mut r = h.anonymous.request(method.parse().unwrap(), h.url(path));
            if let Some(b) = bearer {
                r = r.bearer_auth(b);
            }
            if let Some(body) = body {
                r = r.json(&body);
            }
            let (status, code) = code_of(r.send().await.unwrap()).await;
            assert_eq!(
                (status, code.as_str()),
                (StatusCode::UNAUTHORIZED, "unauthorized"),
                "{method} {path} with {bearer:?}"
            );
        }
    }
    // The page sends such a browser to the login form.
    let r = h
        .anonymous_no_redirects()
        .get(h.url("/approvals"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(r.headers()["location"], "/login");
    // A used, forged or expired login link logs nobody in.
    let link = h.login_link();
    assert_eq!(
        h.anonymous_no_redirects()
            .get(&link)
            .send()
            .await
            .unwrap()
            .status(),
        StatusCode::SEE_OTHER
    );
    let forged = wrong.login_link(&h.base, gaffer_store::now_ms());
    let expired = h
        .local
        .login_link(&h.base, gaffer_store::now_ms() - 25 * 3600 * 1000);
    for bad in [link, forged, expired] {
        let r = h.anonymous_no_redirects().get(&bad).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "{bad}");
        assert!(r.headers().get("set-cookie").is_none());
        assert!(r.text().await.unwrap().contains("gaffer login-link"));
    }
    assert_eq!(h.event_count().await, before);
    assert_eq!(h.app.approval(&a.id).await.unwrap().state, "pending");
}

/// A server over the journal and local secret in `dir`, as `gaffer serve` runs it.
async fn serve(dir: &std::path::Path) -> (String, tokio::sync::oneshot::Sender<()>) {
    let journal = SqliteJournal::open(&dir.join("gaffer.db"), Durability::Normal)
        .await
        .unwrap();
    let local = LocalSecret::load_or_create(dir, "ana").unwrap();
    let server = Server::bind(
        App::new(Arc::new(journal), Policy::default()),
        ServerConfig::new("127.0.0.1:0".parse().unwrap(), local),
    )
    .await
    .unwrap();
    let base = format!("http://{}", server.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(server.run(async move {
        let _ = stopped.await;
    }));
    (base, stop)
}

#[tokio::test]
async fn a_logged_in_page_and_a_script_keep_working_after_a_restart_and_the_audit_names_the_person()
{
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("alpha");
    std::fs::create_dir_all(&repo).unwrap();
    gaffer_testkit::git::git(&repo, &["init", "-q"]);
    let (base, stop) = serve(dir.path()).await;
    let local = LocalSecret::load_or_create(dir.path(), "ana").unwrap();
    let script = authorized(&local);
    let r = script
        .post(format!("{base}/api/projects"))
        .json(&json!({"path": repo}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    // The page logs in with a link and keeps its session cookie and CSRF token.
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let r = browser
        .get(local.login_link(&base, gaffer_store::now_ms()))
        .send()
        .await
        .unwrap();
    let cookie = r.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let page = browser
        .get(format!("{base}/"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let csrf = page
        .split("name=\"csrf-token\" content=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .to_owned();

    // The server restarts (new process, same data dir) on another port.
    let _ = stop.send(());
    let (base, stop) = serve(dir.path()).await;
    let r = browser
        .post(format!("{base}/api/tasks"))
        .header("cookie", &cookie)
        .header("origin", &base)
        .header("x-csrf-token", &csrf)
        .json(&json!({"project": "alpha", "request": "from the page"}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        StatusCode::CREATED,
        "{}",
        r.text().await.unwrap()
    );
    let r = script
        .post(format!("{base}/api/tasks"))
        .json(&json!({"project": "alpha", "request": "from a script"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let _ = stop.send(());

    // Every change names the person and where it came from; nothing is `local`.
    let journal = SqliteJournal::open(&dir.path().join("gaffer.db"), Durability::Normal)
        .await
        .unwrap();
    let app = App::new(Arc::new(journal), Policy::default());
    let trail: Vec<(String, String, String)> = app
        .audit(None)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.action, e.by.name, e.by.via))
        .collect();
    assert_eq!(
        trail,
        [
            (
                "task_created".to_owned(),
                "ana".to_owned(),
                "web:login-link".to_owned()
            ),
            (
                "task_created".to_owned(),
                "ana".to_owned(),
                "api:local-secret".to_owned()
            ),
        ]
    );
}

#[tokio::test]
async fn every_response_says_nosniff_and_carries_the_content_security_policy() {
    let h = start(false).await;
    let task_events = format!("/api/tasks/{}/events", "t-missing");
    let cases: Vec<(&reqwest::Client, &str, StatusCode)> = vec![
        (&h.http, "/api/tasks", StatusCode::OK),
        (&h.http, "/", StatusCode::OK),
        (&h.http, "/assets/app.js", StatusCode::OK),
        (&h.http, "/metrics", StatusCode::OK),
        (&h.http, "/api/nothing", StatusCode::NOT_FOUND),
        (&h.http, &task_events, StatusCode::NOT_FOUND),
        (&h.anonymous, "/api/tasks", StatusCode::UNAUTHORIZED),
        (&h.anonymous, "/login", StatusCode::OK),
    ];
    for (client, path, status) in cases {
        let r = client.get(h.url(path)).send().await.unwrap();
        assert_eq!(r.status(), status, "{path}");
        let headers = r.headers();
        assert_eq!(headers["x-content-type-options"], "nosniff", "{path}");
        assert_eq!(headers["x-frame-options"], "DENY", "{path}");
        assert_eq!(headers["referrer-policy"], "no-referrer", "{path}");
        assert!(
            headers["content-security-policy"]
                .to_str()
                .unwrap()
                .contains("frame-ancestors 'none'"),
            "{path}"
        );
    }
    // A refused Host and an event stream too.
    let r = h
        .http
        .get(h.url("/api/tasks"))
        .header("host", "attacker.test")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-content-type-options"], "nosniff");
    let r = h.http.get(h.url("/api/events")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()["x-content-type-options"], "nosniff");
}
