//! Project memory end to end: `gaffer serve` with the fake agents; the owner and
//! the reviewer each propose an addition (a fenced `memory` block), a person
//! approves one and denies the other over HTTP, and the next task's agents get the
//! approved note in their prompts and never the denied one.
use super::serve::{decide_next, finished_task, serve, serve_with_fake_agents};
use super::support::{fixture_repo, Home, CHECK};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Stdio;

const APPROVED: &str = "APPROVED-NOTE: run make check before saying done.";
const DENIED: &str = "DENIED-NOTE: nobody reads the CHANGELOG.";

/// Every agent transcript (`*.jsonl`) under `dir` whose path names `task`.
fn transcripts_of(dir: &Path, task: &str, found: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let path = e.path();
        if path.is_dir() {
            transcripts_of(&path, task, found);
        } else if path.extension().is_some_and(|x| x == "jsonl")
            && path.to_string_lossy().contains(task)
        {
            found.push(path);
        }
    }
}

struct Served {
    http: reqwest::Client,
    base: String,
    _serve: super::serve::Served,
}

/// `gaffer serve` with the fake agents of `scenarios` (and `env`), the `demo`
/// repository registered.
async fn serve_demo(home: &Home, scenarios: &Path, env: &[(&str, &str)]) -> Served {
    let d = home.dir.path();
    let repo = d.join("demo");
    fixture_repo(&repo, "# demo\n", CHECK);
    let mut cmd = serve_with_fake_agents(home, d, scenarios);
    cmd.envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let (serve, base) = serve(&mut cmd);
    let http = home.http();
    let r = http
        .post(format!("{base}/api/projects"))
        .json(&json!({"path": repo}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    Served {
        http,
        base,
        _serve: serve,
    }
}

/// Writes `<role>.json` with these turns for the fake agents.
fn script(scenarios: &Path, role: &str, turns: Value) {
    std::fs::create_dir_all(scenarios).unwrap();
    std::fs::write(
        scenarios.join(format!("{role}.json")),
        json!({ "turns": turns }).to_string(),
    )
    .unwrap();
}

impl Served {
    async fn submit(&self) -> String {
        let r = self
            .http
            .post(format!("{}/api/tasks", self.base))
            .json(&json!({"project": "demo", "request": "Add an installation section to README"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201);
        r.json::<Value>().await.unwrap()["id"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// Waits for the task's pending approval of `kind`, and decides it.
    async fn decide(&self, task: &str, kind: &str, decision: &str) -> Value {
        decide_next(&self.http, &self.base, task, kind, decision).await
    }
}

#[tokio::test]
async fn an_approved_memory_proposal_reaches_the_next_tasks_prompts_a_denied_one_never() {
    let home = Home::new();
    home.write_config("");
    let d = home.dir.path().to_owned();
    let scenarios = d.join("scenarios");
    let plan = json!({ "subtasks": [{ "title": "Add an installation section", "description": "write it", "files": ["README.md"], "acceptance": "README has ## Installation" }] });
    let write = |role: &str, turns: Value| script(&scenarios, role, turns);
    let planner = json!({ "steps": [{ "say": format!("```json\n{plan}\n```") }] });
    let readme = json!({ "write_file": { "path": "README.md", "content": "# demo\n\n## Installation\n\n    cargo install demo\n" } });
    let verdict = "```json\n{\"verdict\":\"done\"}\n```";
    // The second task's agents refuse a prompt without the approved note (the
    // fake exits 2 and the task fails).
    let next = |mut turn: Value| {
        turn["expect_prompt_contains"] = json!(APPROVED);
        turn
    };
    write("planner", json!([planner.clone(), next(planner)]));
    write(
        "owner",
        json!([
            { "steps": [readme.clone(), { "say": format!("added\n```memory\n{APPROVED}\n```") }] },
            next(json!({ "steps": [readme, { "say": "added" }] })),
        ]),
    );
    write(
        "reviewer",
        json!([
            { "steps": [{ "say": format!("{verdict}\n```memory\n{DENIED}\n```") }] },
            next(json!({ "steps": [{ "say": verdict }] })),
        ]),
    );

    let s = serve_demo(&home, &scenarios, &[]).await;

    let first = s.submit().await;
    s.decide(&first, "plan", "approve").await;
    let asked = s.decide(&first, "memory", "approve").await;
    assert_eq!(asked["details"]["memory"], APPROVED, "{asked}");
    assert_eq!(asked["details"]["project"], "demo");
    let asked = s.decide(&first, "memory", "deny").await;
    assert_eq!(asked["details"]["memory"], DENIED, "{asked}");
    let done = finished_task(&s.http, &s.base, &first).await;
    assert_eq!(done["stage"], "done", "{done}");

    // Only the approved note was written, where gaffer keeps it.
    let file = home.data().join("memory/demo.md");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        format!("{APPROVED}\n")
    );
    let shown = home
        .gaffer()
        .args(["memory", "show", "demo", "--json"])
        .output()
        .unwrap();
    let shown: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(
        (&shown["text"], &shown["limit"]),
        (&json!(format!("{APPROVED}\n")), &json!(8192))
    );

    let second = s.submit().await;
    s.decide(&second, "plan", "approve").await;
    let done = finished_task(&s.http, &s.base, &second).await;
    assert_eq!(done["stage"], "done", "{done}");
    // What the second task's agents were sent: each role's prompt holds the
    // approved note and none holds the denied one.
    let mut found = Vec::new();
    transcripts_of(&d, &second, &mut found);
    assert!(
        found.len() >= 3,
        "planner, owner and reviewer transcripts: {found:?}"
    );
    for path in &found {
        let text = std::fs::read_to_string(path).unwrap();
        assert!(text.contains("APPROVED-NOTE"), "{}", path.display());
        assert!(!text.contains("DENIED-NOTE"), "{}", path.display());
    }
}

/// A secret in an agent's proposal is redacted in what the person is asked, and
/// what is written is what the person saw: the secret never reaches the memory
/// file, so never the prompts of later tasks.
#[tokio::test]
async fn a_secret_in_a_memory_proposal_is_redacted_in_the_question_and_in_the_file() {
    const CRED: &str = "correct-horse-battery-staple-42";
    let home = Home::new();
    home.write_config("[secrets]\nenv = [\"MY_SERVICE_CRED\"]\n");
    let scenarios = home.dir.path().join("scenarios");
    let plan = json!({ "subtasks": [{ "title": "Add an installation section", "description": "write it", "files": ["README.md"], "acceptance": "README has ## Installation" }] });
    script(
        &scenarios,
        "planner",
        json!([{ "steps": [{ "say": format!("```json\n{plan}\n```") }] }]),
    );
    script(
        &scenarios,
        "owner",
        json!([{ "steps": [
            { "write_file": { "path": "README.md", "content": "# demo\n\n## Installation\n" } },
            { "say": format!("added\n```memory\nThe staging password is {CRED}.\n```") }
        ] }]),
    );
    script(
        &scenarios,
        "reviewer",
        json!([{ "steps": [{ "say": "```json\n{\"verdict\":\"done\"}\n```" }] }]),
    );
    let s = serve_demo(&home, &scenarios, &[("MY_SERVICE_CRED", CRED)]).await;
    let task = s.submit().await;
    s.decide(&task, "plan", "approve").await;
    let asked = s.decide(&task, "memory", "approve").await;
    let shown = asked["details"]["memory"].as_str().unwrap();
    assert!(
        shown.starts_with("The staging password is ") && !shown.contains(CRED),
        "{asked}"
    );
    let done = finished_task(&s.http, &s.base, &task).await;
    assert_eq!(done["stage"], "done", "{done}");
    let written = std::fs::read_to_string(home.data().join("memory/demo.md")).unwrap();
    assert_eq!(
        written,
        format!("{shown}\n"),
        "the file holds what was approved"
    );
}

/// `gaffer memory` for people: add and show, an unknown project named with the
/// known ones (exit 2), an addition over the limit refused (exit 78) leaving the
/// memory as it was, and `edit` saving what the editor wrote.
#[test]
fn memory_add_show_and_edit_refuse_bad_input_clearly() {
    let home = Home::new();
    home.write_config("");
    let repo = home.dir.path().join("demo");
    fixture_repo(&repo, "# demo\n", CHECK);
    home.gaffer()
        .args(["project", "add"])
        .arg(&repo)
        .assert()
        .success();

    let out = home
        .gaffer()
        .args(["memory", "add", "demo", "Use tabs.", "--json"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["text"], "Use tabs.\n");
    let out = home
        .gaffer()
        .args(["memory", "show", "demo"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "Use tabs.\n");

    let out = home
        .gaffer()
        .args(["memory", "show", "nope"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(
        said.contains("no project named `nope`") && said.contains("demo"),
        "{said}"
    );

    let out = home
        .gaffer()
        .args(["memory", "add", "demo", &"x".repeat(9000)])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{said}");
    assert!(said.contains("8192-byte limit"), "{said}");

    // An "editor" that appends a line: what it saved is the memory.
    let editor = home.dir.path().join("editor.sh");
    std::fs::write(&editor, "#!/bin/sh\necho 'Docs in docs/.' >> \"$1\"\n").unwrap();
    std::fs::set_permissions(&editor, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = home
        .gaffer()
        .env("EDITOR", &editor)
        .args(["memory", "edit", "demo"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(home.data().join("memory/demo.md")).unwrap(),
        "Use tabs.\nDocs in docs/.\n"
    );
}
