//! `gaffer serve` end to end: the real binary with its workers, real git, the
//! fake Claude Code; a task submitted over HTTP waits for its plan approval,
//! which a decision over HTTP releases, and the task finishes.

use super::support::{fixture_repo, Home, CHECK};
use gaffer_testkit::git::git;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Served(pub Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Start `cmd` (a `gaffer serve` with a piped stdout) and read the address it serves on.
pub fn serve(cmd: &mut Command) -> (Served, String) {
    let mut child = cmd.spawn().unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let served = Served(child);
    let addr = first
        .split("http://")
        .nth(1)
        .unwrap_or_else(|| panic!("not serving: {first}"))
        .split('/')
        .next()
        .unwrap();
    (served, format!("http://{addr}"))
}

pub async fn until<T>(what: &str, mut f: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The task `id` once it has ended (done, failed, blocked or cancelled), read over HTTP.
pub async fn finished_task(http: &reqwest::Client, base: &str, id: &str) -> Value {
    until("the task to finish", async || {
        let t: Value = http
            .get(format!("{base}/api/tasks/{id}"))
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        let stage = t["stage"].as_str()?.to_owned();
        ["done", "failed", "blocked", "cancelled"]
            .contains(&stage.as_str())
            .then_some(t)
    })
    .await
}

/// Waits for task `id`'s first pending approval of `kind` and decides it over
/// HTTP (`decision`: `approve` or `deny`); the approval as it was asked.
pub async fn decide_next(
    http: &reqwest::Client,
    base: &str,
    id: &str,
    kind: &str,
    decision: &str,
) -> Value {
    let approval = until(&format!("a pending {kind} approval"), async || {
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
            .find(|a| a["task_id"] == id && a["kind"] == kind)
            .cloned()
    })
    .await;
    let r = http
        .post(format!(
            "{base}/api/approvals/{}/decision",
            approval["id"].as_str().unwrap()
        ))
        .json(&json!({"decision": decision, "note": "seen"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{kind}");
    approval
}

#[tokio::test]
async fn serve_runs_a_task_submitted_over_http_after_its_plan_is_approved() {
    let home = Home::new();
    home.write_config("");
    let d = home.dir.path().to_owned();
    let repo = d.join("demo");
    fixture_repo(&repo, "# demo\n", CHECK);
    let scenarios = d.join("scenarios");
    std::fs::create_dir_all(&scenarios).unwrap();
    let plan = json!({ "subtasks": [{ "title": "Add an installation section", "description": "write it", "files": ["README.md"], "acceptance": "README has ## Installation" }] });
    let turns = |role: &str, turn: Value| {
        std::fs::write(
            scenarios.join(format!("{role}.json")),
            json!({ "turns": [turn.clone(), turn.clone(), turn] }).to_string(),
        )
        .unwrap();
    };
    turns(
        "planner",
        json!({ "steps": [{ "say": format!("```json\n{plan}\n```") }] }),
    );
    turns(
        "owner",
        json!({ "steps": [{ "write_file": { "path": "README.md", "content": "# demo\n\n## Installation\n\n    cargo install demo\n" } }, { "say": "added" }] }),
    );
    turns(
        "reviewer",
        json!({ "steps": [{ "say": "```json\n{\"verdict\":\"done\"}\n```" }] }),
    );

    let mut cmd = serve_with_fake_agents(&home, &d, &scenarios);
    cmd.stdout(Stdio::piped()).stderr(Stdio::null());
    let (_served, base) = serve(&mut cmd);
    let http = home.http();

    let r = http
        .post(format!("{base}/api/projects"))
        .json(&json!({"path": repo}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let r = http
        .post(format!("{base}/api/tasks"))
        .json(&json!({"project": "demo", "request": "Add an installation section to README"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let task: Value = r.json().await.unwrap();
    let id = task["id"].as_str().unwrap().to_owned();

    // The worker plans, then waits for a person.
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
            .find(|a| a["task_id"] == id.as_str() && a["kind"] == "plan")
            .cloned()
    })
    .await;
    let stage: Value = http
        .get(format!("{base}/api/tasks/{id}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(stage["stage"], "awaiting_plan_approval");
    let r = http
        .post(format!(
            "{base}/api/approvals/{}/decision",
            approval["id"].as_str().unwrap()
        ))
        .json(&json!({"decision": "approve", "note": "go"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);

    let done = finished_task(&http, &base, &id).await;
    assert_eq!(done["stage"], "done", "{done}");
    let branch = git(
        &repo,
        &["branch", "--list", "gaffer/*", "--format=%(refname:short)"],
    );
    assert!(git(&repo, &["show", &format!("{branch}:README.md")]).contains("## Installation"));
}

#[test]
fn serve_refuses_a_discord_room_naming_an_unregistered_project() {
    let home = Home::new();
    home.write_config("[discord.rooms]\n\"100\" = \"nowhere\"\n");
    let out = home
        .gaffer()
        .env("GAFFER_DISCORD_TOKEN", "tok")
        .args(["serve", "--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(78));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("discord.rooms.100") && err.contains("`nowhere`"),
        "{err}"
    );
    assert!(!err.contains("tok\n") && !err.contains("\"tok\""), "{err}");
}

#[tokio::test]
async fn serve_starts_the_discord_adapter_when_a_token_is_set() {
    let discord = gaffer_testkit::discord::FakeDiscord::start(
        "the-bot-token",
        "4242",
        Duration::from_secs(30),
    )
    .await;
    let home = Home::new();
    home.write_config("[discord]\napplication_id = \"4242\"\n");
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("gaffer"));
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home.dir.path())
        .env("GAFFER_CONFIG", home.config())
        .env("GAFFER_DATA_DIR", home.data())
        .env("GAFFER_DISCORD_TOKEN", "the-bot-token")
        .env("GAFFER_DISCORD_API_URL", discord.api_url())
        .args(["serve", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let _served = Served(child);
    let (mut first, mut second) = (String::new(), String::new());
    out.read_line(&mut first).unwrap();
    out.read_line(&mut second).unwrap();
    assert!(first.starts_with("gaffer is serving on"), "{first}");
    assert_eq!(second.trim(), "Discord: on, 0 rooms");
    discord
        .wait_for("the bot to log in", Duration::from_secs(60), |d| {
            d.connected().then_some(())
        })
        .await;
    assert_eq!(discord.gateway_logins(), (1, 0));
    assert_eq!(discord.commands().as_array().map(Vec::len), Some(8));
}

/// `gaffer serve` on a free loopback port, the fake Claude Code playing the scenarios in
/// `scenarios`, with nothing of this process's environment; agents get only the fake's
/// own variables (the sandbox's env allowlist) and may write its state under `d`.
pub fn serve_with_fake_agents(home: &Home, d: &Path, scenarios: &Path) -> Command {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("gaffer"));
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", d)
        .env("GAFFER_CONFIG", home.config())
        .env("GAFFER_DATA_DIR", home.data())
        .env(
            "GAFFER_CLAUDE_BIN",
            gaffer_testkit::bins::fake_bin("fake-claude"),
        )
        .env("GAFFER_FAKE_SCENARIO", scenarios)
        .env("GAFFER_FAKE_STATE_DIR", d.join("fake-state"))
        .env("GAFFER_FAKE_LOG", d.join("effects.log"))
        .env(
            "GAFFER_AGENTS_ENV",
            gaffer_testkit::scenario::FAKE_ENV_NAMES,
        )
        .env("CLAUDE_CONFIG_DIR", d.join("fake-state/claude"))
        .env("USER", "tester")
        .env("GAFFER_SANDBOX_WRITABLE", super::run::fake_writable(d))
        .args(["serve", "--listen", "127.0.0.1:0"]);
    cmd
}

/// `gaffer login-link` on this data dir: the link, and what it said on stderr.
fn login_link(home: &Home) -> (String, String) {
    let out = home
        .gaffer()
        .args(["login-link", "--json"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{err}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    (v["link"].as_str().unwrap().to_owned(), err)
}

/// The configured port is taken, so the server listens elsewhere (`--listen`):
/// `gaffer login-link` links to the port served, and the link logs in there.
/// Once the server stops (or is killed), it links to the configured port again.
#[tokio::test]
async fn login_link_links_to_the_port_serve_listens_on_not_the_configured_one() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let configured = taken.local_addr().unwrap();
    let home = Home::new();
    home.write_config(&format!("[server]\nlisten = \"{configured}\"\n"));
    let start = || {
        let d = home.dir.path();
        let mut cmd = serve_with_fake_agents(&home, d, &d.join("scenarios"));
        cmd.args(["--workers", "0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        serve(&mut cmd)
    };
    let (mut served, base) = start();
    assert_ne!(base, format!("http://{configured}"));
    let (link, _) = login_link(&home);
    assert!(
        link.starts_with(&format!("{base}/login?code=")),
        "{link} for {base}"
    );
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let r = http.get(&link).send().await.unwrap();
    assert_eq!(r.status(), 303, "the server did not take the link");
    assert!(r.headers().contains_key("set-cookie"));

    // Stopped: its record goes, and the link is for the configured port again.
    let pid = served.0.id().to_string();
    let stopped = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(stopped.success());
    assert!(served.0.wait().unwrap().success());
    assert!(!home.data().join("serve.json").exists());
    let (link, err) = login_link(&home);
    assert!(
        link.starts_with(&format!("http://{configured}/login?code=")),
        "{link}"
    );
    assert!(err.contains("no `gaffer serve`"), "{err}");

    // Killed outright, it leaves its record behind; nothing answers there, so the
    // record is not trusted.
    let (served, base) = start();
    assert!(login_link(&home).0.starts_with(&format!("{base}/login")));
    drop(served);
    assert!(home.data().join("serve.json").exists());
    let (link, _) = login_link(&home);
    assert!(
        link.starts_with(&format!("http://{configured}/login?code=")),
        "{link}"
    );
}
