//! `gaffer run --after`: bad ids refused before anything is stored, and a task that
//! waits in the foreground for a task another `gaffer run` runs, then runs.

use super::run::{json_of, success_json, Bench, README_DONE, REQUEST};
use serde_json::{json, Value};
use std::process::Stdio;
use std::time::{Duration, Instant};

fn tasks(b: &Bench) -> Vec<Value> {
    let out = b
        .gaffer_std()
        .args(["task", "list", "--json"])
        .output()
        .unwrap();
    json_of(&out).as_array().cloned().unwrap_or_default()
}

/// The `pos` of the first event of `kind` in a `--json` run's stream.
fn pos_of(stream: &[u8], kind: &str) -> i64 {
    String::from_utf8_lossy(stream)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["type"] == kind)
        .and_then(|e| e["pos"].as_i64())
        .unwrap_or_else(|| panic!("no {kind} in the stream"))
}

#[test]
fn run_after_a_bad_id_exits_2_and_stores_nothing() {
    let b = Bench::new();
    for bad in ["t-nope", "   "] {
        let out = b
            .gaffer_std()
            .args(["run", REQUEST, "--repo"])
            .arg(&b.repo)
            .args(["--after", bad, "--yes", "--agent", "claude"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {err}");
        assert!(err.contains("--after"), "{bad}: {err}");
        assert_eq!(tasks(&b), Vec::<Value>::new(), "a task was stored");
        let projects = b
            .gaffer_std()
            .args(["project", "list", "--json"])
            .output()
            .unwrap();
        assert_eq!(json_of(&projects), json!([]), "the project was registered");
    }
}

#[test]
fn run_after_waits_for_the_task_another_run_runs_then_runs_it() {
    let b = Bench::new();
    let plan = json!({ "subtasks": [{ "title": "Add an installation section", "description": "write it", "files": ["README.md"], "acceptance": "README has ## Installation" }] });
    // The first planner turn is slow, so the second task is created while it runs.
    let slow =
        json!({ "steps": [{ "sleep_ms": 3000 }, { "say": format!("```json\n{plan}\n```") }] });
    let quick = json!({ "steps": [{ "say": format!("```json\n{plan}\n```") }] });
    b.script("planner", vec![slow, quick]);
    let owner = json!({ "steps": [{ "write_file": { "path": "README.md", "content": README_DONE } }, { "say": "added" }] });
    b.script("owner", vec![owner.clone(), owner]);
    let review = json!({ "steps": [{ "say": "```json\n{\"verdict\":\"done\"}\n```" }] });
    b.script("reviewer", vec![review.clone(), review]);
    let first = b
        .gaffer_std()
        .args(["run", REQUEST, "--repo"])
        .arg(&b.repo)
        .args(["--yes", "--json", "--agent", "claude"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    let id = loop {
        if let Some(t) = tasks(&b).first() {
            break t["id"].as_str().unwrap().to_owned();
        }
        assert!(Instant::now() < deadline, "the first task never appeared");
        std::thread::sleep(Duration::from_millis(50));
    };
    // A unique start of the id will do, as everywhere.
    let second = b
        .gaffer_std()
        .args([
            "run",
            "Link the installation section from the intro",
            "--repo",
        ])
        .arg(&b.repo)
        .args(["--after", &id[..12], "--yes", "--json", "--agent", "claude"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let first = first.wait_with_output().unwrap();
    let s = success_json(&second);
    assert_eq!(s["state"], "done", "{s}");
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(err.contains(&format!("waits for {id}")), "{err}");
    assert!(first.status.success());
    // It started only after the first was done, and recorded that once.
    assert!(pos_of(&first.stdout, "task_done") < pos_of(&second.stdout, "task_dependency_done"));
    assert!(pos_of(&second.stdout, "task_dependency_done") < pos_of(&second.stdout, "task_leased"));
}
