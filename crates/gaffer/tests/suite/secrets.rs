//! Secrets never leak: a fake agent prints the configured API key and a configured
//! secret value in every role; after the task ran through `gaffer serve`, neither
//! appears in the database files, the server's log, the SSE stream, the web page or
//! any API answer about the task.

use super::serve::{finished_task, until, Served};
use super::support::Home;
use gaffer_testkit::git::git;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::Duration;

const API_KEY: &str = "sk-ant-api03-LEAKCANARY0123456789abcdefXYZ";
// Matches no built-in credential pattern: only `[secrets] env` can hide it.
const SERVICE_SECRET: &str = "correct-horse-battery-staple-42";

#[tokio::test]
async fn a_key_the_agent_prints_appears_nowhere() {
    let home = Home::new();
    home.write_config("[secrets]\nenv = [\"MY_SERVICE_CRED\"]\n\n[log]\nlevel = \"debug\"\n");
    let d = home.dir.path().to_owned();
    let repo = d.join("demo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("README.md"), "# demo\n").unwrap();
    std::fs::write(repo.join("Makefile"), "check:\n\ttrue\n").unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "init"]);
    let scenarios = d.join("scenarios");
    std::fs::create_dir_all(&scenarios).unwrap();
    let leak = format!("my key is {API_KEY} and the service password is {SERVICE_SECRET}");
    let plan = json!({ "subtasks": [{ "title": "Add a line", "description": leak, "files": ["README.md"], "acceptance": "README changed" }] });
    let script = |role: &str, steps: Value| {
        let turn = json!({ "steps": steps });
        std::fs::write(
            scenarios.join(format!("{role}.json")),
            json!({ "turns": [turn.clone(), turn.clone(), turn] }).to_string(),
        )
        .unwrap();
    };
    script(
        "planner",
        json!([{ "say": leak }, { "say": format!("```json\n{plan}\n```") }]),
    );
    script(
        "owner",
        json!([
            { "tool": { "name": "Bash", "input": { "command": format!("curl -H 'x-api-key: {API_KEY}' -u u:{SERVICE_SECRET}") }, "permission": false, "output": leak } },
            { "write_file": { "path": "README.md", "content": "# demo\n\nmore\n" } },
            { "say": leak }
        ]),
    );
    script(
        "reviewer",
        json!([{ "say": format!("{leak}\n```json\n{{\"verdict\":\"done\",\"summary\":\"{SERVICE_SECRET}\"}}\n```") }]),
    );

    let log_path = d.join("server.log");
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("gaffer"));
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", &d)
        .env("GAFFER_CONFIG", home.config())
        .env("GAFFER_DATA_DIR", home.data())
        .env(
            "GAFFER_CLAUDE_BIN",
            gaffer_testkit::bins::fake_bin("fake-claude"),
        )
        .env("GAFFER_FAKE_SCENARIO", &scenarios)
        .env("GAFFER_FAKE_STATE_DIR", d.join("fake-state"))
        .env("GAFFER_FAKE_LOG", d.join("effects.log"))
        .env("CLAUDE_CONFIG_DIR", d.join("fake-state/claude"))
        .env("GAFFER_SANDBOX_WRITABLE", super::run::fake_writable(&d))
        .env("ANTHROPIC_API_KEY", API_KEY)
        .env("MY_SERVICE_CRED", SERVICE_SECRET)
        .env("USER", "tester")
        .args(["serve", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log_path).unwrap());
    let mut child = cmd.spawn().unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let served = Served(child);
    let addr = first
        .split("http://")
        .nth(1)
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    let base = format!("http://{addr}");
    let http = reqwest::Client::new();

    let r = http
        .post(format!("{base}/api/projects"))
        .json(&json!({"path": repo}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let r = http
        .post(format!("{base}/api/tasks"))
        .json(&json!({"project": "demo", "request": "Add a line to README"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let id = r.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let approval = until("the plan approval", async || {
        let list: Value = http
            .get(format!("{base}/api/approvals?state=pending"))
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        list.as_array()?
            .iter()
            .find(|a| a["task_id"] == id.as_str())
            .cloned()
    })
    .await;
    let r = http
        .post(format!(
            "{base}/api/approvals/{}/decision",
            approval["id"].as_str().unwrap()
        ))
        .json(&json!({"decision": "approve"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let done = finished_task(&http, &base, &id).await;
    assert_eq!(done["stage"], "done", "{done}");

    // Everything a person or a client can see.
    let mut seen: Vec<(String, String)> = Vec::new();
    for path in [
        "/".to_owned(),
        format!("/tasks/{id}"),
        "/approvals".to_owned(),
        "/assets/app.js".to_owned(),
        format!("/api/tasks/{id}"),
        format!("/api/tasks/{id}/sessions"),
        "/api/tasks".to_owned(),
        "/api/approvals".to_owned(),
        "/metrics".to_owned(),
    ] {
        let body = http
            .get(format!("{base}{path}"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        seen.push((path, body));
    }
    // The SSE stream replays the whole journal from the start.
    let mut sse = http
        .get(format!("{base}/api/events"))
        .header("Last-Event-ID", "0")
        .send()
        .await
        .unwrap();
    let mut stream_text = String::new();
    while let Ok(Ok(Some(chunk))) = tokio::time::timeout(Duration::from_secs(3), sse.chunk()).await
    {
        stream_text.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(
        stream_text.contains("task_done"),
        "the SSE replay reached the end: {}",
        stream_text.len()
    );
    assert!(
        stream_text.contains("[REDACTED]"),
        "the agents' words were recorded, redacted"
    );
    seen.push(("SSE /api/events".into(), stream_text));
    drop(served);

    let mut log = String::new();
    std::fs::File::open(&log_path)
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    seen.push(("server log".into(), log));
    for entry in std::fs::read_dir(home.data()).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("gaffer.db") {
            let bytes = std::fs::read(entry.path()).unwrap();
            seen.push((name, String::from_utf8_lossy(&bytes).into_owned()));
        }
    }
    assert!(
        seen.iter().any(|(n, _)| n == "gaffer.db"),
        "the database was read"
    );
    for (what, text) in &seen {
        for secret in [API_KEY, SERVICE_SECRET] {
            assert!(!text.contains(secret), "{secret} leaked into {what}");
        }
    }
}
