//! Secrets never leak: a fake agent prints the configured API key and a configured
//! secret value in every role; after the task ran through `gaffer serve` with the
//! Discord adapter on, neither appears in the database files, the server's log, the SSE
//! stream, the web page, any API answer about the task or anything Discord received.
//! Then shipping: secrets quoted by the request and the agents stay out of the pull
//! request, the issue comment, the commit messages and every process's argv.

use super::serve::{finished_task, until, Served};
use super::support::Home;
use gaffer_testkit::discord::FakeDiscord;
use gaffer_testkit::git::git;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::Duration;

const API_KEY: &str = "sk-ant-api03-LEAKCANARY0123456789abcdefXYZ";
// Matches no built-in credential pattern: only `[secrets] env` can hide it.
const SERVICE_SECRET: &str = "correct-horse-battery-staple-42";
const BOT_TOKEN: &str = "discord-bot-token-5e8d2a";

#[tokio::test]
async fn a_key_the_agent_prints_appears_nowhere() {
    let discord = FakeDiscord::start(BOT_TOKEN, "4242", Duration::from_secs(30)).await;
    let home = Home::new();
    home.write_config("[secrets]\nenv = [\"MY_SERVICE_CRED\"]\n\n[log]\nlevel = \"debug\"\n\n[discord]\napplication_id = \"4242\"\n\n[discord.rooms]\n\"100\" = \"demo\"\n");
    let d = home.dir.path().to_owned();
    let repo = d.join("demo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("README.md"), "# demo\n").unwrap();
    std::fs::write(repo.join("Makefile"), "check:\n\ttrue\n").unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "init"]);
    // The Discord room names the project, so it is registered before the server starts.
    home.gaffer()
        .args(["project", "add"])
        .arg(&repo)
        .assert()
        .success();
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
    let mut cmd = super::serve::serve_with_fake_agents(&home, &d, &scenarios);
    cmd.env("ANTHROPIC_API_KEY", API_KEY)
        .env("MY_SERVICE_CRED", SERVICE_SECRET)
        .env("GAFFER_DISCORD_TOKEN", BOT_TOKEN)
        .env("GAFFER_DISCORD_API_URL", discord.api_url())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log_path).unwrap());
    let mut child = cmd.spawn().unwrap();
    let (mut first, mut second) = (String::new(), String::new());
    // Kept open to the end: the server prints more, and a closed pipe would stop it.
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    stdout.read_line(&mut first).unwrap();
    stdout.read_line(&mut second).unwrap();
    assert_eq!(second.trim(), "Discord: on, 1 room");
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
    let http = home.http();

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
    // Everything the Discord adapter sent: the room's header, the thread's name, the
    // status, notes and approval messages with every edit, attachments, answers.
    discord
        .wait_for(
            "the thread to show the task done",
            Duration::from_secs(120),
            |d| {
                d.received()
                    .iter()
                    .any(|r| String::from_utf8_lossy(&r.body).contains("Done"))
                    .then_some(())
            },
        )
        .await;
    let received = discord.received();
    let bodies: Vec<String> = received
        .iter()
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .collect();
    assert!(
        received.iter().any(|r| r.path.ends_with("/threads")),
        "a task thread was started"
    );
    assert!(
        bodies.iter().any(|b| b.contains("[REDACTED]")),
        "the agents' words reached Discord, redacted: {bodies:#?}"
    );
    for (r, body) in received.iter().zip(bodies) {
        seen.push((format!("Discord {} {}", r.method, r.path), body));
    }
    drop(served);
    drop(stdout);

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
        for secret in [API_KEY, SERVICE_SECRET, BOT_TOKEN] {
            assert!(!text.contains(secret), "{secret} leaked into {what}");
        }
    }
}

/// How the forge token reaches gaffer in [`ship_quoting_secrets`].
enum ForgeToken {
    /// `token_env = "DEMO_FORGE_TOKEN"`.
    Env,
    /// No `token_env`: the user's git credential helper holds it.
    GitCredentialHelper,
}

const FORGE_TOKEN: &str = "forge-tok-7f3a9c1e5b2d4680";

/// An issue quoting the API key, a `[secrets] env` value and the forge token becomes the
/// task's request; the agents repeat them; the task ships through the fake Gitea, which
/// serves the repository over smart HTTP and wants the token for the push. Nothing the
/// forge received (pull request, issue comment, request lines), no commit message and
/// no argv of git or of an agent holds a secret; the agents got the key by environment
/// and git got the token from gaffer's credential helper; the request was stored with
/// the secrets replaced.
fn ship_quoting_secrets(how: ForgeToken) {
    use gaffer_testkit::forge::{BareRemote, FakeForge, Flavor};
    let rt = tokio::runtime::Runtime::new().unwrap();
    let remote = BareRemote::new().unwrap();
    let fake = rt
        .block_on(FakeForge::start(Flavor::Gitea, "acme", "demo", FORGE_TOKEN))
        .unwrap();
    fake.serve_git(&remote);
    fake.report_ci_for_every_commit("success");
    let secrets = [API_KEY, SERVICE_SECRET, FORGE_TOKEN];
    let leak = format!("key {API_KEY}, password {SERVICE_SECRET}, token {FORGE_TOKEN}");
    let issue = fake.add_issue(
        &format!("Document the setup with {API_KEY}"),
        &format!("Our {leak} must work."),
    );

    let b = super::run::Bench::new();
    let d = b.home.dir.path().to_owned();
    let token_env = match how {
        ForgeToken::Env => "token_env = \"DEMO_FORGE_TOKEN\"\n",
        ForgeToken::GitCredentialHelper => {
            // The user's own helper, in the test's HOME, answering for the fake forge.
            let helper =
                format!("!f() {{ echo username=gaffer; echo password={FORGE_TOKEN}; }}; f");
            std::fs::write(
                d.join(".gitconfig"),
                format!(
                    "[credential]\n\thelper = \"{}\"\n",
                    helper.replace('"', "\\\"")
                ),
            )
            .unwrap();
            ""
        }
    };
    b.home.write_config(&format!(
        "[secrets]\nenv = [\"MY_SERVICE_CRED\"]\n\n[projects.demo.forge]\nkind = \"gitea\"\nbase_url = \"{}\"\nowner = \"acme\"\nrepo = \"demo\"\nremote = \"{}\"\npush_with_token = true\n{token_env}",
        fake.base_url(),
        fake.git_url()
    ));
    let plan = json!({ "subtasks": [{ "title": format!("Write {SERVICE_SECRET} down"), "description": leak, "files": ["README.md"], "acceptance": "README changed" }] });
    b.script(
        "planner",
        vec![json!({ "steps": [{ "say": format!("{leak}\n```json\n{plan}\n```") }] })],
    );
    b.script(
        "owner",
        vec![json!({ "steps": [
            { "write_file": { "path": "README.md", "content": "# demo\n\n## Installation\n\n    cargo install demo\n" } },
            { "say": leak }
        ] })],
    );
    b.script(
        "reviewer",
        vec![json!({ "steps": [{ "say": format!("```json\n{{\"verdict\":\"done\",\"summary\":\"{SERVICE_SECRET}\",\"feedback\":\"{leak}\"}}\n```") }] })],
    );

    // Every git command gaffer runs goes through a wrapper that records its argv.
    let bin = d.join("wrapped-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let real_git = String::from_utf8(
        Command::new("sh")
            .args(["-c", "command -v git"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap()
    .trim()
    .to_owned();
    let git_argv = d.join("git-argv.log");
    let wrapper = bin.join("git");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{}'\nexec '{real_git}' \"$@\"\n",
            git_argv.display()
        ),
    )
    .unwrap();
    std::os::unix::fs::PermissionsExt::set_mode(
        &mut std::fs::metadata(&wrapper).unwrap().permissions(),
        0o755,
    );
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let path = std::env::join_paths(
        std::iter::once(bin.clone())
            .chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
    )
    .unwrap();

    let issue_url = format!("{}/acme/demo/issues/{issue}", fake.base_url());
    let mut cmd = b.gaffer_std();
    cmd.args(["run", "--issue", &issue_url, "--repo"])
        .arg(&b.repo)
        .args(["--yes", "--json", "--agent", "claude"])
        .env("PATH", path)
        .env("ANTHROPIC_API_KEY", API_KEY)
        .env("MY_SERVICE_CRED", SERVICE_SECRET)
        .stdin(Stdio::null());
    if let ForgeToken::Env = how {
        cmd.env("DEMO_FORGE_TOKEN", FORGE_TOKEN);
    }
    let out = cmd.output().unwrap();
    let s = super::run::success_json(&out);
    assert_eq!(s["state"], "done", "{s}");
    let branch = s["branch"].as_str().unwrap().to_owned();
    assert!(
        remote.branch_sha(&branch).is_some(),
        "the push went through the fake forge"
    );

    let mut seen: Vec<(String, String)> = vec![
        (
            "stdout".into(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        ),
        (
            "stderr".into(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ),
    ];
    let prs = fake.prs();
    assert_eq!(prs.len(), 1, "{prs:#?}");
    assert!(
        prs[0].body.contains("[REDACTED]"),
        "the request is in the body, redacted: {}",
        prs[0].body
    );
    for pr in &prs {
        seen.push((format!("PR #{} title", pr.number), pr.title.clone()));
        seen.push((format!("PR #{} body", pr.number), pr.body.clone()));
    }
    let comments = fake.comments();
    assert!(!comments.is_empty(), "the issue was told about the PR");
    for c in comments {
        seen.push((format!("comment {}", c.id), c.body));
    }
    seen.push(("forge request lines".into(), fake.requests().join("\n")));
    let messages = gaffer_testkit::git::git(remote.path(), &["log", "--format=%B", &branch]);
    assert!(
        messages.contains("[REDACTED]"),
        "the request is in the commit message, redacted: {messages}"
    );
    seen.push(("commit messages".into(), messages));
    let argv = std::fs::read_to_string(&git_argv).unwrap();
    for command in ["commit", "push"] {
        assert!(
            argv.lines().any(|l| l.split(' ').any(|w| w == command)),
            "gaffer ran git {command} through the wrapper: {argv}"
        );
    }
    seen.push(("git argv".into(), argv));
    let effects = std::fs::read_to_string(d.join("effects.log")).unwrap();
    let spawns: Vec<&str> = effects.lines().filter(|l| l.contains(" spawn ")).collect();
    assert!(
        spawns.len() >= 3,
        "planner, owner and reviewer were started: {effects}"
    );
    seen.push(("agent argv".into(), spawns.join("\n")));
    let env_lines: Vec<&str> = effects
        .lines()
        .filter(|l| l.contains(" env role="))
        .collect();
    assert_eq!(env_lines.len(), spawns.len(), "{effects}");
    for l in &env_lines {
        assert!(
            l.split("names=")
                .nth(1)
                .unwrap()
                .split(',')
                .any(|n| n == "ANTHROPIC_API_KEY"),
            "the key reaches the agent by environment: {l}"
        );
    }
    seen.push(("agent env names".into(), env_lines.join("\n")));
    // The request was stored redacted, with every secret the engine knows (the
    // credential helper's token too: the journal's door redacts with the engine's
    // redactor from before the task was stored).
    let mut stored = String::new();
    for entry in std::fs::read_dir(b.home.data()).unwrap().flatten() {
        if entry.file_name().to_string_lossy().starts_with("gaffer.db") {
            stored.push_str(&String::from_utf8_lossy(
                &std::fs::read(entry.path()).unwrap(),
            ));
        }
    }
    assert!(
        stored.contains("Document the setup with [REDACTED]"),
        "the request is stored redacted"
    );
    for secret in secrets {
        assert!(
            !stored.contains(secret),
            "{secret} leaked into the database"
        );
    }
    for (what, text) in &seen {
        for secret in secrets {
            assert!(
                !text.contains(secret),
                "{secret} leaked into {what}:\n{text}"
            );
        }
    }
}

#[test]
fn secrets_in_the_request_and_agent_output_never_reach_the_forge_commits_or_argv() {
    ship_quoting_secrets(ForgeToken::Env);
}

#[test]
fn a_token_from_the_git_credential_helper_is_redacted_like_a_configured_one() {
    ship_quoting_secrets(ForgeToken::GitCredentialHelper);
}

/// A decision over HTTP on the first pending approval of `kind` for task `id`.
async fn approve_next(http: &reqwest::Client, base: &str, id: &str, kind: &str) -> Value {
    super::serve::decide_next(http, base, id, kind, "approve").await
}

/// Redaction through structure: the secret as an object key of a tool input, as a
/// file name, inside the diff and in an arbiter's escalation. A person lets the
/// commit through (it is their call), so the secret is really in the worktree and
/// its diff; it is in none of the database, its WAL, the log, the SSE replay, the
/// pages, the API (the diff included), `gaffer task show --json` or `gaffer audit`.
#[tokio::test]
async fn a_secret_as_a_key_a_file_name_in_a_diff_and_an_escalation_appears_nowhere() {
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
    home.gaffer()
        .args(["project", "add"])
        .arg(&repo)
        .assert()
        .success();
    let scenarios = d.join("scenarios");
    std::fs::create_dir_all(&scenarios).unwrap();
    let script = |role: &str, steps: Value| {
        let turn = json!({ "steps": steps });
        std::fs::write(
            scenarios.join(format!("{role}.json")),
            json!({ "turns": [turn.clone(), turn.clone(), turn] }).to_string(),
        )
        .unwrap();
    };
    let plan = json!({ "subtasks": [{ "title": "Write the notes", "description": "notes", "files": ["notes"], "acceptance": "notes exist" }] });
    script(
        "planner",
        json!([{ "say": format!("```json\n{plan}\n```") }]),
    );
    script(
        "owner",
        json!([
            { "tool": { "name": "Bash", "input": { SERVICE_SECRET: "as a key", "command": "ls" }, "permission": false, "output": "ok" } },
            { "write_file": { "path": format!("notes/{SERVICE_SECRET}.md"), "content": format!("# notes\n\nuse {SERVICE_SECRET} to log in\n") } },
            { "say": "wrote the notes" }
        ]),
    );
    script(
        "reviewer",
        json!([{ "say": "```json\n{\"verdict\":\"blocked\",\"reason\":\"a credential is in the notes\"}\n```" }]),
    );
    script(
        "arbiter",
        json!([{ "say": format!("```json\n{{\"ruling\":\"escalate\",\"reason\":\"the notes publish {SERVICE_SECRET}; a person must decide\"}}\n```") }]),
    );

    let log_path = d.join("server.log");
    let mut cmd = super::serve::serve_with_fake_agents(&home, &d, &scenarios);
    cmd.env("MY_SERVICE_CRED", SERVICE_SECRET)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log_path).unwrap());
    let mut child = cmd.spawn().unwrap();
    let mut first = String::new();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    stdout.read_line(&mut first).unwrap();
    let served = Served(child);
    let addr = first
        .split("http://")
        .nth(1)
        .unwrap()
        .split('/')
        .next()
        .unwrap();
    let base = format!("http://{addr}");
    let http = home.http();
    let r = http
        .post(format!("{base}/api/tasks"))
        .json(&json!({"project": "demo", "request": "Write the notes", "agent": "claude"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let id = r.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    approve_next(&http, &base, &id, "plan").await;
    // The scan stops the commit, naming the file by its redacted name.
    let scan = approve_next(&http, &base, &id, "manual").await;
    let summary = scan["summary"].as_str().unwrap();
    assert!(summary.contains("`notes/[REDACTED].md`"), "{summary}");
    let escalation = approve_next(&http, &base, &id, "escalation").await;
    assert!(
        escalation["details"]["diff"]
            .as_str()
            .unwrap()
            .contains("+use [REDACTED] to log in"),
        "{escalation}"
    );
    let done = finished_task(&http, &base, &id).await;
    assert_eq!(done["stage"], "done", "{done}");

    let mut seen: Vec<(String, String)> = Vec::new();
    for path in [
        "/".to_owned(),
        format!("/tasks/{id}"),
        "/approvals".to_owned(),
        format!("/api/tasks/{id}"),
        format!("/api/tasks/{id}/diff"),
        format!("/api/tasks/{id}/sessions"),
        "/api/approvals".to_owned(),
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
    let diff = &seen[4].1;
    assert!(
        diff.contains("notes/[REDACTED].md"),
        "the diff names the file: {diff}"
    );
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
        "the replay reached the end"
    );
    seen.push(("SSE /api/events".into(), stream_text));
    for args in [
        vec!["task", "show", id.as_str(), "--json"],
        vec!["audit", "--json"],
    ] {
        let out = home
            .gaffer()
            .args(&args)
            .env("MY_SERVICE_CRED", SERVICE_SECRET)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}");
        seen.push((
            args.join(" "),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        ));
    }
    drop(served);
    drop(stdout);
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
    assert!(seen.iter().any(|(n, _)| n == "gaffer.db"));
    for (what, text) in &seen {
        if let Some(at) = text.find(SERVICE_SECRET) {
            let from = text.floor_char_boundary(at.saturating_sub(300));
            let to = text.ceil_char_boundary(at + 100);
            panic!("the secret leaked into {what}: …{}…", &text[from..to]);
        }
    }
}
