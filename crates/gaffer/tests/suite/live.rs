//! Live control end to end: a person's message reaches the running agent's turn
//! (over HTTP and from `gaffer say`), exactly once also across a `kill -9`; an
//! interrupt stops the turn without cancelling the task, and the next message
//! goes on.

use super::run::{json_of, success_json, wait_for_step, Bench, REQUEST};
use super::serve::{finished_task, serve, serve_with_fake_agents, until};
use super::support::{events_of, Home};
use gaffer_testkit::git::git;
use serde_json::{json, Value};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

const PLAN: &str = r#"{"subtasks":[{"title":"Add an installation section","description":"write it","files":["README.md"],"acceptance":"README has ## Installation"}]}"#;

/// Lines of the fakes' effect log that say the agent took a message with `text`.
fn taken(log: &Path, text: &str) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("fake-claude message") && l.contains(text))
        .count()
}

/// A repository whose check passes once README has an Installation section, and
/// scenarios where the planner's first turn waits for a person's message.
fn repo_and_scenarios(d: &Path, planner: Value) -> std::path::PathBuf {
    let repo = d.join("demo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("README.md"), "# demo\n").unwrap();
    std::fs::write(
        repo.join("Makefile"),
        "check:\n\tgrep -q '^## Installation' README.md\n",
    )
    .unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "init"]);
    let scenarios = d.join("scenarios");
    std::fs::create_dir_all(&scenarios).unwrap();
    let write = |role: &str, turns: Value| {
        std::fs::write(
            scenarios.join(format!("{role}.json")),
            json!({ "turns": turns }).to_string(),
        )
        .unwrap();
    };
    write("planner", planner);
    let owner = json!({ "steps": [{ "write_file": { "path": "README.md", "content": "# demo\n\n## Installation\n\n    cargo install demo\n" } }, { "say": "added" }] });
    write("owner", json!([owner.clone(), owner]));
    let review = json!({ "steps": [{ "say": "```json\n{\"verdict\":\"done\"}\n```" }] });
    write("reviewer", json!([review.clone(), review]));
    scenarios
}

async fn approve_the_plan(http: &reqwest::Client, base: &str, id: &str) {
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
            .find(|a| a["task_id"] == id && a["kind"] == "plan")
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
}

/// The task's agent session once one is open.
async fn open_session(http: &reqwest::Client, base: &str, id: &str) -> Value {
    until("an agent session", async || {
        let list: Value = http
            .get(format!("{base}/api/tasks/{id}/sessions"))
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        list.as_array()?
            .iter()
            .find(|s| s["ended"].is_null())
            .cloned()
    })
    .await
}

#[tokio::test]
async fn a_message_posted_over_http_reaches_the_agent_in_its_running_turn() {
    let home = Home::new();
    home.write_config("");
    let d = home.dir.path().to_owned();
    let planner = json!([{ "steps": [
        { "say": "reading the repository" },
        { "await_message": null },
        { "say": format!("```json\n{PLAN}\n```") }
    ] }]);
    let scenarios = repo_and_scenarios(&d, planner);
    let mut cmd = serve_with_fake_agents(&home, &d, &scenarios);
    cmd.stdout(Stdio::piped()).stderr(Stdio::null());
    let (_served, base) = serve(&mut cmd);
    let http = home.http();
    let r = http
        .post(format!("{base}/api/projects"))
        .json(&json!({"path": d.join("demo")}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let r = http
        .post(format!("{base}/api/tasks"))
        .json(&json!({"project": "demo", "request": REQUEST}))
        .send()
        .await
        .unwrap();
    let id = r.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();

    // The planner's turn runs and waits; the message goes into it.
    open_session(&http, &base, &id).await;
    let r = http
        .post(format!("{base}/api/tasks/{id}/messages"))
        .json(&json!({"text": "  also mention cargo binstall  "}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let sent: Value = r.json().await.unwrap();
    assert_eq!(sent["text"], "also mention cargo binstall");
    assert_eq!(sent["by"]["kind"], "user");
    assert!(
        sent["by"]["via"].as_str().unwrap().starts_with("api:"),
        "{sent}"
    );
    let log = d.join("effects.log");
    until("the agent to take the message", async || {
        (taken(&log, "also mention cargo binstall") > 0).then_some(())
    })
    .await;
    // The turn went on from the message to its plan, and the task to its end.
    approve_the_plan(&http, &base, &id).await;
    let done = finished_task(&http, &base, &id).await;
    assert_eq!(done["stage"], "done", "{done}");
    assert_eq!(taken(&log, "also mention cargo binstall"), 1);
    let messages: Value = http
        .get(format!("{base}/api/tasks/{id}/messages"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(messages.as_array().unwrap().len(), 1, "{messages}");
    assert_eq!(messages[0]["id"], sent["id"]);
    assert_eq!(messages[0]["delivery"], "live", "{messages}");
    assert_eq!(messages[0]["masked"], false, "{messages}");
    assert!(messages[0]["delivered_at"].is_i64(), "{messages}");

    // Nothing runs any more: refused, naming why, and nothing recorded.
    let r = http
        .post(format!("{base}/api/tasks/{id}/messages"))
        .json(&json!({"text": "too late"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "task_finished", "{body}");
    let r = http
        .post(format!("{base}/api/tasks/{id}/interrupt"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409);
}

#[test]
fn a_message_sent_while_gaffer_is_killed_is_delivered_once_after_resume() {
    let b = Bench::new();
    b.script_all();
    // The planner waits for a message in every turn (a resumed session plays its next turn).
    let planner = json!({ "steps": [
        { "await_message": null },
        { "say": format!("```json\n{PLAN}\n```") }
    ] });
    b.script("planner", vec![planner.clone(), planner]);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut child = b
        .gaffer_std()
        .args(["run", REQUEST, "--repo"])
        .arg(&b.repo)
        .args(["--yes", "--json"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let id = wait_for_step(&b.home.db(), "plan", &mut child, &rt);
    let log = b.home.dir.path().join("effects.log");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("fake-claude turn")
    {
        assert!(Instant::now() < deadline, "the planner's turn never began");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL, the turn waiting for a message
    child.wait().unwrap();

    // The session the crash left open takes the message; nothing delivers it yet.
    let short = &id[..10];
    let out = b
        .gaffer_std()
        .args(["say", short, "use", "cargo", "binstall", "--json"])
        .output()
        .unwrap();
    let sent = success_json(&out);
    assert_eq!(sent["delivery"], "pending", "{sent}");
    assert_eq!(sent["by"]["via"], "cli", "{sent}");
    assert_eq!(taken(&log, "use cargo binstall"), 0);

    let out = b
        .gaffer_std()
        .args(["task", "resume", &id, "--json"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let s = json_of(&out);
    assert_eq!(s["state"], "done", "{s}");
    assert_eq!(taken(&log, "use cargo binstall"), 1);
    let delivered = events_of(&b.home.db(), &id, "message_delivered");
    assert_eq!(delivered.len(), 1, "{delivered:?}");
    assert_eq!(delivered[0]["message_id"], sent["id"]);
}

#[test]
fn gaffer_say_is_refused_when_no_agent_runs() {
    let b = Bench::new();
    b.script_all();
    let out = b
        .gaffer_std()
        .args(["run", REQUEST, "--repo"])
        .arg(&b.repo)
        .args(["--yes", "--json"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let s = success_json(&out);
    let id = s["task_id"].as_str().unwrap();
    let out = b.gaffer_std().args(["say", id, "hello"]).output().unwrap();
    assert_eq!(out.status.code(), Some(78));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("already done"), "{err}");
    let out = b.gaffer_std().args(["interrupt", id]).output().unwrap();
    assert_eq!(out.status.code(), Some(78));
    assert!(events_of(&b.home.db(), id, "message_sent").is_empty());
}

#[tokio::test]
async fn an_interrupt_stops_the_turn_keeps_the_task_and_the_next_message_goes_on() {
    let home = Home::new();
    home.write_config("");
    let d = home.dir.path().to_owned();
    let planner = json!([
        { "steps": [{ "say": "reading everything, slowly" }, { "await_message": null }] },
        { "expect_prompt_contains": "only README matters",
          "steps": [{ "say": format!("```json\n{PLAN}\n```") }] }
    ]);
    let scenarios = repo_and_scenarios(&d, planner);
    let mut cmd = serve_with_fake_agents(&home, &d, &scenarios);
    cmd.stdout(Stdio::piped()).stderr(Stdio::null());
    let (_served, base) = serve(&mut cmd);
    let http = home.http();
    http.post(format!("{base}/api/projects"))
        .json(&json!({"path": d.join("demo")}))
        .send()
        .await
        .unwrap();
    let r = http
        .post(format!("{base}/api/tasks"))
        .json(&json!({"project": "demo", "request": REQUEST}))
        .send()
        .await
        .unwrap();
    let id = r.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let session = open_session(&http, &base, &id).await;
    let r = http
        .post(format!("{base}/api/tasks/{id}/interrupt"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let i: Value = r.json().await.unwrap();
    assert_eq!(i["session_id"], session["id"], "{i}");
    assert!(i["by"]["via"].as_str().unwrap().starts_with("api:"), "{i}");
    // A second interrupt of the same stopped turn is refused.
    let r = http
        .post(format!("{base}/api/tasks/{id}/interrupt"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409);

    // The turn ended, the task and the session did not: they wait for a message.
    let history = |kind: &'static str| {
        let db = home.db();
        let id = id.clone();
        async move {
            tokio::task::spawn_blocking(move || events_of(&db, &id, kind))
                .await
                .unwrap()
        }
    };
    // (Nothing in the journal marks the turn's end; give the agent time to stop.
    // Were it not stopped, the message below would go live into this turn, and the
    // scenario's second turn, which needs the message as its prompt, never play.)
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let t: Value = http
        .get(format!("{base}/api/tasks/{id}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(t["stage"], "planning", "{t}");
    assert!(t["sessions"][0]["ended"].is_null(), "{t}");
    assert!(history("session_ended").await.is_empty());

    let r = http
        .post(format!("{base}/api/tasks/{id}/messages"))
        .json(&json!({"text": "only README matters; go on"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    approve_the_plan(&http, &base, &id).await;
    let done = finished_task(&http, &base, &id).await;
    assert_eq!(done["stage"], "done", "{done}");
    let delivered = history("message_delivered").await;
    assert_eq!(delivered.len(), 1, "{delivered:?}");
    assert_eq!(delivered[0]["delivery"], "next_turn");
    assert_eq!(delivered[0]["session_id"], session["id"]);
    let interrupted = history("turn_interrupted").await;
    assert_eq!(interrupted.len(), 1);
    assert_eq!(interrupted[0]["by"]["kind"], "user");
}
