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

/// `gaffer ARGS` as text (exit 0 required).
fn text(b: &Bench, args: &[&str]) -> String {
    let out = b.gaffer_std().args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "gaffer {args:?}: {err}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The row of `gaffer task list` for task `id`, and the short id it shows.
fn row<'a>(list: &'a str, id: &str) -> (&'a str, &'a str) {
    list.lines()
        .skip(1)
        .find_map(|l| {
            let short = l.split_whitespace().next()?;
            id.starts_with(short).then_some((l, short))
        })
        .unwrap_or_else(|| panic!("no row for {id}:\n{list}"))
}

#[test]
fn a_blocked_task_says_why_and_runs_once_retried_after_its_dependency_is_retried_and_done() {
    let b = Bench::new();
    let plan = json!({ "subtasks": [{ "title": "Add an installation section", "description": "write it", "files": ["README.md"], "acceptance": "README has ## Installation" }] });
    let good = json!({ "steps": [{ "say": format!("```json\n{plan}\n```") }] });
    // The first task's planner answers no plan twice (slowly, so the second task is
    // created while it plans): it fails. Its retry and the dependent's retry plan.
    let slow_junk = json!({ "steps": [{ "sleep_ms": 3000 }, { "say": "no plan here" }] });
    let junk = json!({ "steps": [{ "say": "still no plan" }] });
    b.script("planner", vec![slow_junk, junk, good.clone(), good]);
    let owner = json!({ "steps": [{ "write_file": { "path": "README.md", "content": README_DONE } }, { "say": "added" }] });
    b.script("owner", vec![owner.clone(), owner]);
    let review = json!({ "steps": [{ "say": "```json\n{\"verdict\":\"done\"}\n```" }] });
    b.script("reviewer", vec![review.clone(), review]);
    let run = |request: &str, extra: &[&str]| {
        b.gaffer_std()
            .args(["run", request, "--repo"])
            .arg(&b.repo)
            .args(["--yes", "--json", "--agent", "claude"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let first = run(REQUEST, &[]);
    let deadline = Instant::now() + Duration::from_secs(120);
    let a = loop {
        if let Some(t) = tasks(&b).first() {
            break t["id"].as_str().unwrap().to_owned();
        }
        assert!(Instant::now() < deadline, "the first task never appeared");
        std::thread::sleep(Duration::from_millis(50));
    };
    let second = run(
        "Link the installation section from the intro",
        &["--after", &a],
    );
    let dependent = loop {
        let listed = tasks(&b);
        if let Some(t) = listed.iter().find(|t| t["id"] != a.as_str()) {
            break t["id"].as_str().unwrap().to_owned();
        }
        assert!(Instant::now() < deadline, "the second task never appeared");
        std::thread::sleep(Duration::from_millis(50));
    };

    // While it waits: what for, and what starts it.
    let list = text(&b, &["task", "list"]);
    let (waiting, _) = row(&list, &dependent);
    assert!(
        waiting.contains(&format!("waiting for {}", row(&list, &a).1)),
        "{list}"
    );
    let shown = text(&b, &["task", "show", &dependent]);
    assert!(shown.contains(&format!("waits    for {a} (")), "{shown}");
    assert!(
        shown.contains(&format!("`gaffer task resume {dependent}`")),
        "{shown}"
    );
    assert!(
        shown.contains(&format!("`gaffer task cancel {dependent}`")),
        "{shown}"
    );

    // The first fails, which blocks the second; both runs say so and exit 1.
    let first = first.wait_with_output().unwrap();
    let second = second.wait_with_output().unwrap();
    assert_eq!(
        first.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let err = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("task {a}, which this task runs after, failed")),
        "{err}"
    );
    assert_eq!(json_of(&second)["state"], "blocked");

    // Blocked: by which task, and the two retries that get it to run.
    let list = text(&b, &["task", "list"]);
    let (failed, a_short) = row(&list, &a);
    assert!(failed.contains("failed"), "{list}");
    assert!(
        row(&list, &dependent)
            .0
            .contains(&format!("blocked by {a_short}")),
        "{list}"
    );
    let shown = text(&b, &["task", "show", &dependent]);
    assert!(
        shown.contains(&format!("blocked  by {a} (failed)")),
        "{shown}"
    );
    assert!(
        shown.contains(&format!("`gaffer task retry {a}`")),
        "{shown}"
    );
    assert!(
        shown.contains(&format!("`gaffer task retry {dependent}` runs this one")),
        "{shown}"
    );
    assert!(!shown.contains("waits"), "{shown}");

    // As it says: the dependency retried and run to done, then the blocked one.
    let retry = |id: &str| {
        let out = b
            .gaffer_std()
            .args(["task", "retry", id, "--json"])
            .output()
            .unwrap();
        success_json(&out)["id"].as_str().unwrap().to_owned()
    };
    let resume = |id: &str| {
        let out = b
            .gaffer_std()
            .args(["task", "resume", id, "--json"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        success_json(&out)
    };
    let a2 = retry(&a);
    assert_eq!(resume(&a2)["state"], "done");
    let b2 = retry(&dependent);
    let view = success_json(
        &b.gaffer_std()
            .args(["task", "show", &b2, "--json"])
            .output()
            .unwrap(),
    );
    assert_eq!(
        view["task"]["request"],
        "Link the installation section from the intro"
    );
    assert_eq!(view["task"]["stage"], "queued", "{view}");
    let done = resume(&b2);
    assert_eq!(done["state"], "done", "{done}");
    let stages: Vec<(String, String)> = tasks(&b)
        .iter()
        .map(|t| {
            (
                t["id"].as_str().unwrap().to_owned(),
                t["stage"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    for (id, stage) in [
        (&a, "failed"),
        (&dependent, "blocked"),
        (&a2, "done"),
        (&b2, "done"),
    ] {
        assert!(
            stages.contains(&(id.clone(), stage.to_owned())),
            "{id} {stage}: {stages:?}"
        );
    }
}
