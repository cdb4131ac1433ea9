//! Page load of a task with 5,000 journal events, in real headless Chromium: from
//! navigation start to the frame after the whole conversation is on screen (the
//! page's `gaffer:task-loaded` mark). Target: under 1 s. A task with 50 events,
//! loaded the same way in the same run, is the baseline the ratio is against.
//!
//! `cargo bench -p gaffer-server --bench page_load` loads each page 7 times; without
//! `--bench` (as `cargo test --benches` runs it) twice. Skips with a message when
//! Chromium is not installed (outside CI).

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/suite/scene.rs"]
#[allow(dead_code)]
mod scene;

use gaffer_app::{AddProject, App, Policy};
use gaffer_core::{Actor, Role, Stage};
use gaffer_server::{LocalSecret, Server, ServerConfig};
use gaffer_store::{Durability, SqliteJournal};
use gaffer_testkit::browser::{Browser, Driver};
use scene::Scene;
use serde_json::json;
use std::sync::Arc;

/// A long owner session: messages, tool calls with their outputs, edits.
async fn long_task(app: &App, events: usize) -> String {
    let s = Scene::new(app, "bench", "Port the parser to the new grammar").await;
    s.stage(Stage::Planning).await;
    s.agent_step("code/1", Role::Owner, "claude").await;
    let mut batch = Vec::new();
    let mut n = 0;
    while batch.len() + 5 < events {
        n += 1;
        batch.push(json!({"type": "assistant_text", "text": format!("Step {n}: the next rule is `expr_{n}`; I'll read how it is parsed now, then change it.\n\n- keep the precedence\n- add a test")}));
        batch.push(json!({"type": "tool_call", "call_id": format!("r{n}"), "name": "Read", "input": {"file_path": format!("src/parser/rule_{n}.rs")}}));
        batch.push(json!({"type": "tool_result", "call_id": format!("r{n}"), "output": "fn parse(input: &str) -> Result<Expr> {\n    let mut p = Parser::new(input);\n    p.expr(0)\n}\n".repeat(8), "is_error": false}));
        if n % 4 == 0 {
            batch.push(json!({"type": "file_change", "path": format!("src/parser/rule_{n}.rs"), "kind": "update", "diff": format!("diff --git a/src/parser/rule_{n}.rs b/src/parser/rule_{n}.rs\n--- a/src/parser/rule_{n}.rs\n+++ b/src/parser/rule_{n}.rs\n@@ -1,3 +1,3 @@\n-    p.expr(0)\n+    p.expr(PREC_{n})\n }}\n")}));
        } else {
            batch.push(json!({"type": "tool_call", "call_id": format!("b{n}"), "name": "Bash", "input": {"command": format!("cargo test -q rule_{n}")}}));
            batch.push(json!({"type": "tool_result", "call_id": format!("b{n}"), "output": "running 4 tests\n....\ntest result: ok. 4 passed", "is_error": false}));
        }
    }
    for chunk in batch.chunks(500) {
        s.acts("code/1", chunk.to_vec()).await;
    }
    s.task
}

/// Milliseconds from navigation start to the page's `gaffer:task-loaded` mark.
async fn load(b: &Browser, url: &str, entries: usize) -> f64 {
    b.goto("about:blank").await.unwrap();
    b.goto(url).await.unwrap();
    b.wait_for("the task loaded", "document.body.dataset.loaded === 'task'")
        .await
        .unwrap();
    let shown = b
        .eval("document.querySelectorAll('#transcript .entry').length")
        .await
        .unwrap();
    assert!(
        shown.as_u64().unwrap() as usize >= entries,
        "only {shown} entries shown"
    );
    b.eval("performance.getEntriesByName('gaffer:task-loaded')[0].startTime")
        .await
        .unwrap()
        .as_f64()
        .unwrap()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let Some(driver) = Driver::start().unwrap() else {
        return;
    };
    let runs = if full { 7 } else { 2 };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let dir = tempfile::tempdir().unwrap();
        let journal = SqliteJournal::open(&dir.path().join("gaffer.db"), Durability::Normal).await.unwrap();
        let app = App::new(Arc::new(journal), Policy::default());
        let repo = dir.path().join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        std::process::Command::new("git").args(["init", "-q"]).current_dir(&repo).status().unwrap();
        app.add_project(AddProject { path: repo.to_string_lossy().into_owned(), name: Some("bench".into()), check: None }, Actor::user("b", "bench"))
            .await
            .unwrap();
        let big = long_task(&app, 5000).await;
        let small = long_task(&app, 50).await;
        let events = |id: &str| {
            let app = app.clone();
            let id = id.to_owned();
            async move { app.task_events(&id, 0, 5000).await.unwrap().0.len() }
        };
        let (big_events, small_events) = (events(&big).await, events(&small).await);
        assert!(big_events >= 5000, "{big_events}");

        let local = LocalSecret::generate("bench");
        let server = Server::bind(app.clone(), ServerConfig::new("127.0.0.1:0".parse().unwrap(), local.clone())).await.unwrap();
        let base = format!("http://{}", server.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(server.run(async move {
            let _ = stopped.await;
        }));
        let b = driver.browser("bench", 1280, 800).await.unwrap();
        b.goto(&local.login_link(&base, gaffer_store::now_ms())).await.unwrap();
        b.wait_for("the page after logging in", "document.querySelector('#main')").await.unwrap();

        let (mut big_ms, mut small_ms) = (Vec::new(), Vec::new());
        for _ in 0..runs {
            small_ms.push(load(&b, &format!("{base}/tasks/{small}"), 10).await);
            big_ms.push(load(&b, &format!("{base}/tasks/{big}"), 120).await);
        }
        let (big_p50, small_p50) = (median(big_ms.clone()), median(small_ms));
        let worst = big_ms.iter().copied().fold(0.0, f64::max);
        println!(
            "page load [Chromium 1280x800, task page, {runs} loads each]: {big_events} events p50 {big_p50:.0} ms, max {worst:.0} ms (target < 1000 ms); {small_events} events (baseline) p50 {small_p50:.0} ms; ratio {:.1}x",
            big_p50 / small_p50
        );
        b.close().await.unwrap();
        let _ = stop.send(());
    });
}
