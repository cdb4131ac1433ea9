//! The API over real HTTP on loopback.

use super::support::*;
use gaffer_core::ApprovalKind;
use pretty_assertions::assert_eq;
use reqwest::StatusCode;
use serde_json::{json, Value};

async fn error_of(r: reqwest::Response) -> (StatusCode, Value) {
    let status = r.status();
    let body: Value = r.json().await.unwrap();
    assert!(
        body["error"]["code"].is_string(),
        "not an error shape: {body}"
    );
    assert!(
        body["error"]["message"].is_string(),
        "not an error shape: {body}"
    );
    (status, body)
}

#[tokio::test]
async fn loopback_without_tokens_creates_and_reads_tasks() {
    let h = start(false).await;
    let repo = h.dir.path().join("alpha");
    std::fs::create_dir_all(&repo).unwrap();
    std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(&repo)
        .status()
        .unwrap();
    std::fs::write(repo.join("go.mod"), "module a\n").unwrap();
    let r = h
        .http
        .post(h.url("/api/projects"))
        .json(&json!({"path": repo.join(".").to_string_lossy()}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let p: Value = r.json().await.unwrap();
    assert_eq!(p["name"], "alpha");
    assert_eq!(p["check_command"], "go test ./...");
    let r = h
        .http
        .post(h.url("/api/tasks"))
        .json(&json!({"project": "alpha", "request": "add a flag"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let t: Value = r.json().await.unwrap();
    let id = t["id"].as_str().unwrap();
    assert!(id.starts_with("t-"));
    let list: Value = h
        .http
        .get(h.url("/api/tasks?project=alpha&limit=10"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list[0]["id"], id);
    let one: Value = h
        .http
        .get(h.url(&format!("/api/tasks/{id}")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(one["stage"], "queued");
    assert_eq!(one["steps"], json!([]));
    let r = h
        .http
        .post(h.url(&format!("/api/tasks/{id}/cancel")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let r = h
        .http
        .post(h.url(&format!("/api/tasks/{id}/cancel")))
        .send()
        .await
        .unwrap();
    let (s, b) = error_of(r).await;
    assert_eq!(
        (s, b["error"]["code"].as_str().unwrap()),
        (StatusCode::CONFLICT, "task_finished")
    );
    let r = h
        .http
        .post(h.url(&format!("/api/tasks/{id}/retry")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let (s, _) = error_of(
        h.http
            .get(h.url("/api/tasks/t-missing"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let health: Value = h
        .http
        .get(h.url("/healthz"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["status"], "ok");
    let metrics = h
        .http
        .get(h.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(
            "gaffer_http_requests_total{method=\"POST\",route=\"/api/tasks\",status=\"201\"} 1"
        ),
        "{metrics}"
    );
    assert!(metrics.contains("gaffer_approvals_pending 0"));
}

#[tokio::test]
async fn tokens_and_roles() {
    let h = start(true).await;
    h.project("alpha").await;
    let task = h.task("alpha").await;
    let a = h.ask(&task, "push", ApprovalKind::Ship, "git push").await;
    // No token → 401 on every route, page routes redirect to /login.
    for path in [
        "/api/tasks",
        "/api/approvals",
        "/healthz",
        "/metrics",
        "/api/openapi.json",
        "/api/events",
    ] {
        let (s, b) = error_of(h.http.get(h.url(path)).send().await.unwrap()).await;
        assert_eq!(
            (s, b["error"]["code"].as_str().unwrap()),
            (StatusCode::UNAUTHORIZED, "unauthorized"),
            "{path}"
        );
    }
    let r = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(h.url("/"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let (s, _) = error_of(
        h.http
            .get(h.url("/api/tasks"))
            .bearer_auth("wrong-token-wrong-token")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    // Viewer reads, but cannot approve or create.
    let r = h
        .http
        .get(h.url("/api/approvals?state=pending"))
        .bearer_auth(VIEWER)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let url = h.url(&format!("/api/approvals/{}/decision", a.id));
    let (s, b) = error_of(
        h.http
            .post(&url)
            .bearer_auth(VIEWER)
            .json(&json!({"decision": "approve"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (s, b["error"]["code"].as_str().unwrap()),
        (StatusCode::FORBIDDEN, "forbidden")
    );
    let (s, _) = error_of(
        h.http
            .post(h.url("/api/tasks"))
            .bearer_auth(VIEWER)
            .json(&json!({"project": "alpha", "request": "x"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    // Approver cannot add projects or flip auto-approve.
    let (s, _) = error_of(
        h.http
            .post(h.url("/api/projects/alpha/auto"))
            .bearer_auth(APPROVER)
            .json(&json!({"enabled": true}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    assert_eq!(h.app.approval(&a.id).await.unwrap().state, "pending");
    // Approver decides: 200 once, then 409 with the recorded approval.
    let r = h
        .http
        .post(&url)
        .bearer_auth(APPROVER)
        .json(&json!({"decision": "approve", "note": "ok"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let first: Value = r.json().await.unwrap();
    assert_eq!(first["state"], "approved");
    assert_eq!(
        first["decided_by"],
        json!({"kind": "user", "name": "ann", "via": "api:ann"})
    );
    let (s, b) = error_of(
        h.http
            .post(&url)
            .bearer_auth(ADMIN)
            .json(&json!({"decision": "deny"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (s, b["error"]["code"].as_str().unwrap()),
        (StatusCode::CONFLICT, "already_decided")
    );
    assert_eq!(b["approval"], first);
    // Admin flips the toggle.
    let r = h
        .http
        .post(h.url("/api/projects/alpha/auto"))
        .bearer_auth(ADMIN)
        .json(&json!({"enabled": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
}

#[tokio::test]
async fn bad_bodies_name_the_field_and_store_nothing() {
    let h = start(false).await;
    h.project("alpha").await;
    let task = h.task("alpha").await;
    let a = h.ask(&task, "plan", ApprovalKind::Plan, "plan").await;
    let before = h.event_count().await;
    let decision = format!("/api/approvals/{}/decision", a.id);
    let cases: Vec<(&str, String, &str, &str)> = vec![
        (
            "/api/tasks",
            json!({"project": "alpha"}).to_string(),
            "application/json",
            "request",
        ),
        (
            "/api/tasks",
            json!({"project": "alpha", "request": "   "}).to_string(),
            "application/json",
            "request",
        ),
        (
            "/api/tasks",
            json!({"project": "nope", "request": "x"}).to_string(),
            "application/json",
            "project",
        ),
        (
            "/api/tasks",
            json!({"project": "alpha", "request": 5}).to_string(),
            "application/json",
            "request",
        ),
        (
            "/api/tasks",
            json!({"project": "alpha", "request": "x", "agnet": "codex"}).to_string(),
            "application/json",
            "agnet",
        ),
        (
            "/api/tasks",
            json!({"project": "alpha", "request": "x", "agent": "gpt-9"}).to_string(),
            "application/json",
            "agent",
        ),
        (
            "/api/tasks",
            "{\"project\": ".into(),
            "application/json",
            "body",
        ),
        (
            "/api/tasks",
            json!(["alpha", "x"]).to_string(),
            "application/json",
            "body",
        ),
        (
            "/api/tasks",
            "project=alpha&request=x".into(),
            "application/x-www-form-urlencoded",
            "body",
        ),
        (
            "/api/projects",
            json!({"path": "/definitely/not/here"}).to_string(),
            "application/json",
            "path",
        ),
        (
            "/api/projects",
            json!({"name": "x"}).to_string(),
            "application/json",
            "path",
        ),
        (
            &decision,
            json!({"decision": "maybe"}).to_string(),
            "application/json",
            "decision",
        ),
        (
            &decision,
            json!({"decison": "approve"}).to_string(),
            "application/json",
            "decison",
        ),
        (
            &decision,
            json!({"decision": "approve", "note": 7}).to_string(),
            "application/json",
            "note",
        ),
        // A plan cannot be allowed for the task, and a denial is never for the task.
        (
            &decision,
            json!({"decision": "approve", "for_task": true}).to_string(),
            "application/json",
            "for_task",
        ),
        (
            &decision,
            json!({"decision": "deny", "for_task": true}).to_string(),
            "application/json",
            "for_task",
        ),
    ];
    for (path, body, ctype, field) in cases {
        let r = h
            .http
            .post(h.url(path))
            .header("content-type", ctype)
            .body(body.clone())
            .send()
            .await
            .unwrap();
        let (s, b) = error_of(r).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{path} {body}: {b}");
        assert_eq!(b["error"]["field"], field, "{path} {body}: {b}");
    }
    let (s, b) = error_of(
        h.http
            .get(h.url("/api/tasks?limit=0"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (s, b["error"]["field"].as_str().unwrap()),
        (StatusCode::BAD_REQUEST, "limit")
    );
    let (s, b) = error_of(
        h.http
            .get(h.url("/api/approvals?state=bogus"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (s, b["error"]["field"].as_str().unwrap()),
        (StatusCode::BAD_REQUEST, "state")
    );
    // Too large.
    let huge = json!({"project": "alpha", "request": "x".repeat(100 * 1024)}).to_string();
    let (s, b) = error_of(
        h.http
            .post(h.url("/api/tasks"))
            .header("content-type", "application/json")
            .body(huge)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (s, b["error"]["code"].as_str().unwrap()),
        (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large")
    );
    assert_eq!(
        h.event_count().await,
        before,
        "a refused request stored something"
    );
    assert_eq!(h.app.approval(&a.id).await.unwrap().state, "pending");
}

#[tokio::test]
async fn fifty_concurrent_http_decisions_one_200_the_rest_409_with_the_same_approval() {
    let h = start(false).await;
    h.project("alpha").await;
    let task = h.task("alpha").await;
    let a = h.ask(&task, "ship", ApprovalKind::Ship, "git push").await;
    let url = h.url(&format!("/api/approvals/{}/decision", a.id));
    let mut joins = Vec::new();
    for i in 0..50 {
        let http = h.http.clone();
        let url = url.clone();
        joins.push(tokio::spawn(async move {
            let decision = if i % 2 == 0 { "approve" } else { "deny" };
            let r = http
                .post(&url)
                .json(&json!({"decision": decision}))
                .send()
                .await
                .unwrap();
            let status = r.status();
            let body: Value = r.json().await.unwrap();
            (
                status,
                if status == StatusCode::OK {
                    body
                } else {
                    body["approval"].clone()
                },
            )
        }));
    }
    let mut oks = 0;
    let mut seen = Vec::new();
    for j in joins {
        let (s, approval) = j.await.unwrap();
        match s {
            StatusCode::OK => oks += 1,
            StatusCode::CONFLICT => {}
            other => panic!("unexpected {other}"),
        }
        seen.push(approval);
    }
    assert_eq!(oks, 1);
    assert!(seen.windows(2).all(|w| w[0] == w[1]));
    let decided = h
        .app
        .journal()
        .events_after(0, 10_000)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.event.kind() == "approval_decided")
        .count();
    assert_eq!(decided, 1);
}

#[tokio::test]
async fn allow_for_this_task_over_http_approves_the_same_command_again_in_that_task_only() {
    let h = start(false).await;
    h.project("alpha").await;
    let task = h.task("alpha").await;
    let other = h.task("alpha").await;
    let a = h.ask(&task, "s1", ApprovalKind::Tool, "make deploy").await;
    let r = h
        .http
        .post(h.url(&format!("/api/approvals/{}/decision", a.id)))
        .json(&json!({"decision": "approve", "for_task": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let body: Value = r.json().await.unwrap();
    assert_eq!(
        (body["state"].as_str(), body["for_task"].as_bool()),
        (Some("approved"), Some(true))
    );

    let same = h.ask(&task, "s2", ApprovalKind::Tool, "make deploy").await;
    let shown: Value = h
        .http
        .get(h.url(&format!("/api/approvals/{}", same.id)))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(shown["state"], "approved");
    assert_eq!(shown["decided_by"]["kind"], "policy");
    assert_eq!(
        shown["decided_by"]["name"],
        format!(
            "allowed for this task by ana via {}",
            body["decided_by"]["via"].as_str().unwrap()
        )
    );
    assert_eq!(
        h.ask(&task, "s3", ApprovalKind::Tool, "make clean")
            .await
            .state,
        "pending"
    );
    assert_eq!(
        h.ask(&other, "s1", ApprovalKind::Tool, "make deploy")
            .await
            .state,
        "pending"
    );

    // The schema documents the field.
    let doc: Value = h
        .http
        .get(h.url("/api/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let params = &doc["components"]["schemas"]["DecisionParams"]["properties"];
    assert_eq!(params["for_task"]["type"], "boolean", "{params}");
    assert!(doc["components"]["schemas"]["Approval"]["properties"]["for_task"].is_object());
}

#[tokio::test]
async fn a_decision_naming_another_task_is_refused() {
    let h = start(false).await;
    h.project("alpha").await;
    h.project("beta").await;
    let ta = h.task("alpha").await;
    let tb = h.task("beta").await;
    let a = h.ask(&ta, "s", ApprovalKind::Tool, "rm -rf build").await;
    let r = h
        .http
        .post(h.url(&format!("/api/approvals/{}/decision", a.id)))
        .json(&json!({"decision": "approve", "task_id": tb}))
        .send()
        .await
        .unwrap();
    let (s, b) = error_of(r).await;
    assert_eq!(
        (s, b["error"]["code"].as_str().unwrap()),
        (StatusCode::CONFLICT, "wrong_scope")
    );
    assert_eq!(h.app.approval(&a.id).await.unwrap().state, "pending");
}

/// The page's session cookie (from a login link), as a `cookie` header value.
async fn page_session(h: &Harness) -> String {
    let r = h
        .anonymous_no_redirects()
        .get(h.login_link())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let cookie = r.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    cookie.split(';').next().unwrap().to_owned()
}

/// The CSRF token in gaffer's own page.
async fn page_csrf(h: &Harness, cookie: &str) -> String {
    let page = h
        .anonymous
        .get(h.url("/"))
        .header("cookie", cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    page.split("name=\"csrf-token\" content=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn browser_posts_need_the_csrf_token_and_this_origin() {
    let h = start(false).await;
    h.project("alpha").await;
    let before = h.event_count().await;
    let cookie = page_session(&h).await;
    let csrf = page_csrf(&h, &cookie).await;
    let post = |origin: &str, csrf: Option<&str>| {
        let mut r = h
            .anonymous
            .post(h.url("/api/tasks"))
            .header("cookie", &cookie)
            .header("origin", origin)
            .json(&json!({"project": "alpha", "request": "x"}));
        if let Some(csrf) = csrf {
            r = r.header("x-csrf-token", csrf);
        }
        r.send()
    };
    // Another site, or another port on this machine, even with the token: refused.
    let other_port = format!("http://127.0.0.1:{}", h.port() + 1);
    for origin in ["https://evil.example", "null", other_port.as_str()] {
        let (s, b) = error_of(post(origin, Some(&csrf)).await.unwrap()).await;
        assert_eq!(
            (s, b["error"]["code"].as_str().unwrap()),
            (StatusCode::FORBIDDEN, "origin"),
            "{origin}"
        );
    }
    // This origin without the token: refused.
    let (s, b) = error_of(post(&h.base, None).await.unwrap()).await;
    assert_eq!(
        (s, b["error"]["code"].as_str().unwrap()),
        (StatusCode::FORBIDDEN, "csrf")
    );
    assert_eq!(h.event_count().await, before);
    // gaffer's own page knows the token.
    let r = post(&h.base, Some(&csrf)).await.unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let task: Value = r.json().await.unwrap();
    assert_eq!(task["created_by"], "ana via web:login-link");
}

#[tokio::test]
async fn login_sets_a_cookie_the_page_and_api_accept() {
    let h = start(true).await;
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let r = client
        .post(h.url("/login"))
        .form(&[("token", "nope")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let r = client
        .post(h.url("/login"))
        .form(&[("token", VIEWER)])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let cookie = r.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"));
    let pair = cookie.split(';').next().unwrap().to_owned();
    let r = client
        .get(h.url("/api/tasks"))
        .header("cookie", &pair)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    // Cookie auth is ambient: a browser post without the CSRF token is refused.
    let r = client
        .post(h.url("/api/tasks"))
        .header("cookie", &pair)
        .json(&json!({"project": "a", "request": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn openapi_describes_exactly_the_routes_that_exist() {
    let h = start(false).await;
    let doc: Value = h
        .http
        .get(h.url("/api/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let paths = doc["paths"].as_object().unwrap();
    let mut seen = Vec::new();
    for (path, item) in paths {
        for method in item.as_object().unwrap().keys() {
            if !["get", "post", "delete"].contains(&method.as_str()) {
                continue;
            }
            seen.push(format!("{} {path}", method.to_uppercase()));
            let concrete = path.replace("{id}", "x-missing");
            let req = match method.as_str() {
                "get" => h.http.get(h.url(&concrete)),
                "delete" => h.http.delete(h.url(&concrete)),
                _ => h.http.post(h.url(&concrete)).json(&json!({})),
            };
            let r = tokio::time::timeout(std::time::Duration::from_secs(5), req.send())
                .await
                .unwrap()
                .unwrap();
            assert_ne!(
                r.status(),
                StatusCode::METHOD_NOT_ALLOWED,
                "{method} {path}"
            );
            if r.status() == StatusCode::NOT_FOUND {
                let b: Value = r.json().await.unwrap();
                assert!(
                    !b["error"]["message"]
                        .as_str()
                        .unwrap()
                        .contains("no such route"),
                    "{method} {path} is documented but not routed"
                );
            }
        }
    }
    seen.sort();
    let expected = [
        "DELETE /api/schedules/{name}",
        "GET /api/approvals",
        "GET /api/approvals/{id}",
        "GET /api/events",
        "GET /api/openapi.json",
        "GET /api/projects",
        "GET /api/projects/{id}",
        "GET /api/schedules",
        "GET /api/tasks",
        "GET /api/tasks/{id}",
        "GET /api/tasks/{id}/diff",
        "GET /api/tasks/{id}/events",
        "GET /api/tasks/{id}/history",
        "GET /api/tasks/{id}/messages",
        "GET /api/tasks/{id}/sessions",
        "GET /api/usage",
        "GET /healthz",
        "GET /link/{token}",
        "GET /metrics",
        "POST /api/approvals/{id}/decision",
        "POST /api/hooks/{forge}",
        "POST /api/projects",
        "POST /api/projects/{id}/auto",
        "POST /api/schedules",
        "POST /api/tasks",
        "POST /api/tasks/{id}/cancel",
        "POST /api/tasks/{id}/interrupt",
        "POST /api/tasks/{id}/messages",
        "POST /api/tasks/{id}/retry",
        "POST /link/{token}",
    ];
    assert_eq!(seen, expected);
    // An undocumented route is not routed either.
    let r = h.http.get(h.url("/api/nothing")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
}

#[test]
fn tokens_come_from_policy_toml_hashed_and_plaintext_or_weak_ones_are_refused() {
    use gaffer_app::Policy;
    use gaffer_server::auth::{find_token_pub, token_sha256};
    use gaffer_server::ServerConfig;
    let base = ServerConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        gaffer_server::LocalSecret::generate("ana"),
    );
    let ci_secret = "0123456789abcdef-ci";
    let policy = Policy::parse(&format!(
        "[[tokens]]\nname = \"phone\"\nrole = \"approver\"\nsecret_env = \"PHONE_TOKEN\"\n\n[[tokens]]\nname = \"ci\"\nrole = \"viewer\"\nsecret_sha256 = \"{}\"\n",
        token_sha256(ci_secret)
    ))
    .unwrap();
    let env = |k: &str| (k == "PHONE_TOKEN").then(|| "a-long-random-phone-secret".to_owned());
    let c = base.clone().with_policy_tokens(&policy, &env).unwrap();
    assert_eq!(c.tokens.len(), 2);
    // The hashed token authenticates with its secret, and only with it.
    assert_eq!(find_token_pub(&c.tokens, ci_secret).unwrap().name, "ci");
    assert!(find_token_pub(&c.tokens, &token_sha256(ci_secret)).is_none());
    assert_eq!(
        find_token_pub(&c.tokens, "a-long-random-phone-secret")
            .unwrap()
            .name,
        "phone"
    );
    assert!(
        !format!("{:?}", c.tokens).contains("a-long-random"),
        "secrets must not be printed"
    );
    let none = |_: &str| None;
    let err = base.clone().with_policy_tokens(&policy, &none).unwrap_err();
    assert!(err.to_string().contains("PHONE_TOKEN"), "{err}");
    // A plaintext secret in the file is refused, and the error gives the line to write.
    let plain = Policy::parse(&format!(
        "[[tokens]]\nname = \"w\"\nrole = \"admin\"\nsecret = \"{ci_secret}\"\n"
    ))
    .unwrap();
    let err = base
        .clone()
        .with_policy_tokens(&plain, &none)
        .unwrap_err()
        .to_string();
    assert!(err.contains("plaintext"), "{err}");
    assert!(err.contains(&token_sha256(ci_secret)), "{err}");
    let weak =
        Policy::parse("[[tokens]]\nname = \"w\"\nrole = \"admin\"\nsecret_env = \"W\"\n").unwrap();
    let short = |_: &str| Some("short".to_owned());
    assert!(base.clone().with_policy_tokens(&weak, &short).is_err());
    let bad_hash =
        Policy::parse("[[tokens]]\nname = \"h\"\nrole = \"admin\"\nsecret_sha256 = \"abc\"\n")
            .unwrap();
    let err = base
        .clone()
        .with_policy_tokens(&bad_hash, &none)
        .unwrap_err()
        .to_string();
    assert!(err.contains("64 hex digits"), "{err}");
    assert!(
        Policy::parse("[[tokens]]\nname = \"x\"\nrole = \"root\"\nsecret_env = \"X\"\n").is_err()
    );
}

/// Every operation the OpenAPI document lists is checked against each role, with a
/// body the handler could not even parse: the role is enforced before anything else,
/// so a viewer never learns more than 403, and a new route cannot forget its role.
#[tokio::test]
async fn every_route_in_the_spec_enforces_its_role_before_reading_the_body() {
    let h = start(true).await;
    let spec: Value = h
        .http
        .get(h.url("/api/openapi.json"))
        .bearer_auth(VIEWER)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let admin_only = [
        ("post", "/api/projects"),
        ("post", "/api/projects/{id}/auto"),
    ];
    let mut changes = 0;
    for (path, ops) in spec["paths"].as_object().unwrap() {
        // A one-tap link is its own credential (no role): gaffer-notify's
        // suite::links tests that only a genuine, unused, unexpired link decides.
        if path.starts_with("/link/") {
            continue;
        }
        // A forge's webhook delivery is authenticated by its signature alone: no
        // token, not even an admin's, stands in for it.
        if path.starts_with("/api/hooks/") {
            let r = h
                .http
                .post(h.url("/api/hooks/github"))
                .bearer_auth(ADMIN)
                .header("content-type", "application/json")
                .body(r#"{"action":"opened"}"#)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "{path}");
            continue;
        }
        for method in ops.as_object().unwrap().keys() {
            let url = h.url(&path.replace("{id}", "no-such-id"));
            let status = |token: &'static str| {
                let req = match method.as_str() {
                    "get" => h.http.get(&url),
                    "post" => h.http.post(&url),
                    "put" => h.http.put(&url),
                    "delete" => h.http.delete(&url),
                    other => panic!("unexpected method {other} in the spec"),
                };
                let req = req
                    .bearer_auth(token)
                    .header("content-type", "application/json")
                    .body("{not json");
                async move { req.send().await.unwrap().status() }
            };
            let is_admin_only = admin_only.contains(&(method.as_str(), path.as_str()));
            if method == "get" {
                if path.ends_with("/events") {
                    continue; // a stream that never ends; auth is checked in the SSE tests
                }
                for token in [VIEWER, APPROVER, ADMIN] {
                    let s = status(token).await;
                    assert!(
                        s != StatusCode::FORBIDDEN && s != StatusCode::UNAUTHORIZED,
                        "GET {path}: {s}"
                    );
                }
                continue;
            }
            changes += 1;
            assert_eq!(
                status(VIEWER).await,
                StatusCode::FORBIDDEN,
                "viewer {method} {path}"
            );
            let approver = status(APPROVER).await;
            if is_admin_only {
                assert_eq!(approver, StatusCode::FORBIDDEN, "approver {method} {path}");
            } else {
                assert_ne!(approver, StatusCode::FORBIDDEN, "approver {method} {path}");
            }
            assert_ne!(
                status(ADMIN).await,
                StatusCode::FORBIDDEN,
                "admin {method} {path}"
            );
        }
    }
    assert!(
        changes >= 6,
        "the spec lists the state-changing routes: {changes}"
    );
}

/// The document allows a JSON `null` cancel body (the body is optional); the server
/// used to refuse it with 400. It means "no reason", like no body at all.
#[tokio::test]
async fn a_null_cancel_body_cancels_without_a_reason() {
    let h = start(false).await;
    h.project("alpha").await;
    let task = h.task("alpha").await;
    let r = h
        .http
        .post(h.url(&format!("/api/tasks/{task}/cancel")))
        .header("content-type", "application/json")
        .body("null")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let t: Value = r.json().await.unwrap();
    assert_eq!(t["stage"], "cancelled");
    // Anything else that is not the params object is still refused.
    let other = h.task("alpha").await;
    let (s, b) = error_of(
        h.http
            .post(h.url(&format!("/api/tasks/{other}/cancel")))
            .header("content-type", "application/json")
            .body("[]")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (s, b["error"]["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("body"))
    );
    assert_eq!(h.app.task(&other).await.unwrap().task.stage, "queued");
}

/// What schemathesis (scripts/api-spec-test) holds the server to, checked on the
/// document itself: list filters are optional query parameters (they were documented
/// as required path parameters), every operation documents the auth middleware's 401
/// and 403, every body its 400 and 413, every `{id}` its 404, all in the error shape;
/// the filters' allowed values are the domain's own lists; an event stream describes
/// each event's fields with `data` holding a `StreamEvent`.
#[tokio::test]
async fn openapi_documents_every_answer_and_parameter_as_served() {
    let h = start(false).await;
    let doc: Value = h
        .http
        .get(h.url("/api/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let error_ref = json!({"$ref": "#/components/schemas/ErrorResponse"});
    let mut operations = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            operations += 1;
            if path.starts_with("/link/") {
                // One-tap links answer a person's browser: every refusal is a page.
                for status in ["403", "404", "409", "410"] {
                    assert!(
                        op["responses"][status]["content"]["text/html"].is_object(),
                        "{method} {path} does not document {status} as a page"
                    );
                }
                continue;
            }
            let mut must = vec!["401", "403"];
            if op.get("requestBody").is_some() {
                must.extend(["400", "413"]);
            }
            if path.contains("{id}") {
                must.push("404");
            }
            for status in must {
                assert_eq!(
                    op["responses"][status]["content"]["application/json"]["schema"], error_ref,
                    "{method} {path} does not document {status}"
                );
            }
            for p in op["parameters"].as_array().into_iter().flatten() {
                if p["in"] == "path" {
                    let name = p["name"].as_str().unwrap();
                    assert!(
                        path.contains(&format!("{{{name}}}")),
                        "{method} {path}: path parameter `{name}` is not in the path"
                    );
                }
            }
        }
    }
    assert_eq!(operations, 30);
    let params = |path: &str| -> Vec<Value> {
        doc["paths"][path]["get"]["parameters"]
            .as_array()
            .unwrap()
            .clone()
    };
    let tasks = params("/api/tasks");
    for name in ["project", "stage", "limit", "offset"] {
        let p = tasks.iter().find(|p| p["name"] == name).unwrap();
        assert_eq!(
            (&p["in"], &p["required"]),
            (&json!("query"), &json!(false)),
            "{name}"
        );
    }
    let stage = tasks.iter().find(|p| p["name"] == "stage").unwrap();
    let stages: Vec<&str> = gaffer_core::Stage::ALL.iter().map(|s| s.as_str()).collect();
    assert_eq!(stage["schema"]["enum"], json!(stages));
    let limit = tasks.iter().find(|p| p["name"] == "limit").unwrap();
    assert_eq!(
        (&limit["schema"]["minimum"], &limit["schema"]["maximum"]),
        (&json!(1), &json!(500))
    );
    let approvals = params("/api/approvals");
    let states: Vec<&str> = gaffer_core::ApprovalState::ALL
        .iter()
        .map(|s| s.as_str())
        .collect();
    assert_eq!(
        (
            &approvals[0]["name"],
            &approvals[0]["in"],
            &approvals[0]["schema"]["enum"]
        ),
        (&json!("state"), &json!("query"), &json!(states))
    );
    assert_eq!(
        doc["components"]["schemas"]["DecisionChoice"]["enum"],
        json!(["approve", "deny"])
    );
    for path in ["/api/events", "/api/tasks/{id}/events"] {
        let frame = &doc["paths"][path]["get"]["responses"]["200"]["content"]["text/event-stream"]
            ["schema"];
        assert_eq!(
            frame,
            &json!({"$ref": "#/components/schemas/EventFrame"}),
            "{path}"
        );
    }
    let data = &doc["components"]["schemas"]["EventFrame"]["properties"]["data"];
    assert_eq!(
        (&data["contentMediaType"], &data["contentSchema"]),
        (
            &json!("application/json"),
            &json!({"$ref": "#/components/schemas/StreamEvent"})
        )
    );
}

#[tokio::test]
async fn an_idempotency_key_creates_the_task_once_and_a_repeat_says_so() {
    let h = start(false).await;
    h.project("alpha").await;
    let post = |body: Value, key: Option<&str>| {
        let mut r = h.http.post(h.url("/api/tasks")).json(&body);
        if let Some(k) = key {
            r = r.header("Idempotency-Key", k);
        }
        r.send()
    };
    let first = post(
        json!({"project": "alpha", "request": "add a flag"}),
        Some("req-1"),
    )
    .await
    .unwrap();
    assert_eq!(first.status(), StatusCode::CREATED);
    assert_eq!(first.headers().get("idempotent-replayed"), None);
    let first: Value = first.json().await.unwrap();
    assert_eq!(first["key"], "req-1");
    let events = h.event_count().await;

    // The same key in the header or the body: the first task, 200, nothing stored.
    for (body, header) in [
        (
            json!({"project": "alpha", "request": "add a flag"}),
            Some("req-1"),
        ),
        (
            json!({"project": "alpha", "request": "add a flag", "key": "req-1"}),
            None,
        ),
        (
            json!({"project": "alpha", "request": "add a flag", "key": "req-1"}),
            Some("req-1"),
        ),
    ] {
        let r = post(body, header).await.unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(r.headers()["idempotent-replayed"], "true");
        let again: Value = r.json().await.unwrap();
        assert_eq!(again["id"], first["id"]);
    }
    assert_eq!(h.event_count().await, events);

    // A header and a body that disagree, or a bad key: 400 naming `key`, nothing stored.
    for (body, header) in [
        (
            json!({"project": "alpha", "request": "x", "key": "req-2"}),
            Some("req-1"),
        ),
        (
            json!({"project": "alpha", "request": "x"}),
            Some("two words"),
        ),
        (json!({"project": "alpha", "request": "x", "key": ""}), None),
        // gaffer's own namespaces: a client claiming a schedule's future slot or an
        // issue's intake would stop that schedule or swallow that issue.
        (
            json!({"project": "alpha", "request": "x", "key": "schedule:nightly:2099-01-01T00:00:00Z"}),
            None,
        ),
        (
            json!({"project": "alpha", "request": "x"}),
            Some("intake:gitea.example/acme/app#5"),
        ),
    ] {
        let (s, b) = error_of(post(body, header).await.unwrap()).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
        assert_eq!(b["error"]["field"], "key", "{b}");
    }
    assert_eq!(h.event_count().await, events);

    // Without a key every request is a new task.
    let a: Value = post(json!({"project": "alpha", "request": "add a flag"}), None)
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_ne!(a["id"], first["id"]);
    assert_eq!(a.get("key"), None);
}
