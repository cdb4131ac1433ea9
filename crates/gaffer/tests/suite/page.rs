//! The web page against the real binary: what `gaffer run --json` says a task
//! cost is what the page shows (and the API answers), for a task that went
//! through the ship step, whose receipt repeats the total.

use super::run::{json_of, success_json, Bench, README_DONE, REQUEST};
use super::serve::Served;
use gaffer_testkit::browser::Driver;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::process::Stdio;

const PLANNER_COST: f64 = 0.0123;
const OWNER_COST: f64 = 0.0456;
const REVIEWER_COST: f64 = 0.0078;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_the_cost_gaffer_run_json_reports() {
    let Some(driver) = Driver::start().unwrap() else {
        return;
    };
    let b = Bench::new();
    let plan = json!({ "subtasks": [{ "title": "Add an installation section", "description": "write it", "files": ["README.md"], "acceptance": "README has ## Installation" }] });
    let turn = |steps: Value, input: u64, output: u64, cost: f64| json!({ "steps": steps, "usage": { "input_tokens": input, "output_tokens": output }, "cost_usd": cost });
    b.script(
        "planner",
        vec![turn(
            json!([{ "say": format!("```json\n{plan}\n```") }]),
            1200,
            300,
            PLANNER_COST,
        )],
    );
    b.script("owner", vec![turn(json!([{ "write_file": { "path": "README.md", "content": README_DONE } }, { "say": "added the section" }]), 5400, 800, OWNER_COST)]);
    b.script(
        "reviewer",
        vec![turn(
            json!([{ "say": "```json\n{\"verdict\":\"done\"}\n```" }]),
            2100,
            40,
            REVIEWER_COST,
        )],
    );
    let out = b
        .gaffer_std()
        .args(["run", REQUEST, "--repo"])
        .arg(&b.repo)
        .args(["--yes", "--json", "--agent", "claude"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let run = success_json(&out);
    assert_eq!(run["state"], "done", "{run}");
    let cost = run["cost_usd"].as_f64().unwrap();
    // Each turn once, to the nanodollar, without float noise.
    assert_eq!(cost, 0.0657, "{run}");
    let task = run["task_id"].as_str().unwrap().to_owned();

    let (_served, link, base) = serve(&b);

    // The API: the same number (the ship receipt's total is not added again).
    let api: Value = b
        .home
        .http()
        .get(format!("{base}/api/tasks/{task}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(api["cost_usd"].as_f64(), Some(cost), "{api}");
    let listed: Value = b
        .home
        .http()
        .get(format!("{base}/api/tasks"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed[0]["cost_usd"].as_f64(), Some(cost), "{listed}");

    // The page: the same money, rounded as the CLI rounds it.
    let shown = gaffer_core::format_usd(cost);
    assert_eq!(shown, "$0.0657");
    let page = driver.browser("cost", 390, 844).await.unwrap();
    page.goto(&link).await.unwrap();
    page.goto(&format!("{base}/tasks/{task}")).await.unwrap();
    page.wait_for("the task's spend", "document.querySelector('#task-cost')")
        .await
        .unwrap();
    assert_eq!(
        page.eval("document.querySelector('#task-cost').textContent")
            .await
            .unwrap(),
        json!(shown)
    );
    let header = page
        .eval("document.querySelector('#task-spend').textContent")
        .await
        .unwrap();
    assert!(
        header.as_str().unwrap().ends_with(&format!("· {shown}")),
        "{header}"
    );
    // Per role, and the roles add up.
    let roles = page
        .eval("[...document.querySelectorAll('.spend-table tbody tr')].map((tr) => [tr.cells[0].textContent, tr.cells[2].textContent])")
        .await
        .unwrap();
    assert_eq!(
        roles,
        json!([
            ["planner", "$0.0123"],
            ["owner", "$0.0456"],
            ["reviewer", "$0.0078"]
        ])
    );
    // How it ended, in words: done, and where the work is.
    let outcome = page
        .eval("document.querySelector('#outcome').innerText")
        .await
        .unwrap();
    let outcome = outcome.as_str().unwrap();
    assert!(
        outcome.starts_with("Done") && outcome.contains(&format!("Branch gaffer/{task}")),
        "{outcome}"
    );
    page.screenshot(&artifact("cost-390.png")).await.unwrap();
    page.close().await.unwrap();
}

/// A task whose planner never gives a usable plan still paid for its turns (the
/// answer and the retry): `gaffer run --json`, the API and the page all count
/// them, and the page says why it failed in words, without the JSON example the
/// planner was told to follow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_task_costs_what_its_failed_turns_spent_everywhere() {
    let Some(driver) = Driver::start().unwrap() else {
        return;
    };
    let b = Bench::new();
    let vague = json!({ "steps": [{ "say": "I think we should change something, but I am not sure what." }], "usage": { "input_tokens": 800, "output_tokens": 50 }, "cost_usd": 0.004 });
    b.script("planner", vec![vague.clone(), vague]);
    let out = b
        .gaffer_std()
        .args(["run", REQUEST, "--repo"])
        .arg(&b.repo)
        .args(["--yes", "--json", "--agent", "claude"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = json_of(&out);
    assert_eq!(run["state"], "failed", "{run}");
    assert_eq!(run["cost_usd"].as_f64(), Some(0.008), "{run}");
    assert_eq!(
        run["tokens"],
        json!({ "input": 1600, "output": 100, "cached_input": 0 })
    );
    let reason = run["reason"].as_str().unwrap();
    assert!(
        reason.contains("not a valid plan after a retry: its answer has no ```json block")
            && !reason.contains("{\""),
        "{reason}"
    );
    let task = run["task_id"].as_str().unwrap().to_owned();

    let (_served, link, base) = serve(&b);
    let api: Value = b
        .home
        .http()
        .get(format!("{base}/api/tasks/{task}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(api["cost_usd"].as_f64(), Some(0.008), "{api}");
    assert_eq!(api["tokens"].as_u64(), Some(1700), "{api}");

    let page = driver.browser("failed-cost", 390, 844).await.unwrap();
    page.goto(&link).await.unwrap();
    page.goto(&format!("{base}/tasks/{task}")).await.unwrap();
    page.wait_for("the task's spend", "document.querySelector('#task-cost')")
        .await
        .unwrap();
    assert_eq!(
        page.eval("[...document.querySelectorAll('.spend-table tr')].map((tr) => [...tr.cells].map((c) => c.textContent))")
            .await
            .unwrap(),
        json!([["Role", "Tokens", "Cost"], ["planner", "1.7k", "$0.0080"], ["Total", "1.7k", "$0.0080"]])
    );
    let outcome = page
        .eval("document.querySelector('#outcome').innerText")
        .await
        .unwrap();
    let outcome = outcome.as_str().unwrap();
    assert!(
        outcome.contains("its answer has no ```json block") && !outcome.contains("{\""),
        "{outcome}"
    );
    page.screenshot(&artifact("failed-cost-390.png"))
        .await
        .unwrap();
    page.close().await.unwrap();
}

/// `gaffer serve` on a free port, API and page only; its login link and base URL.
pub fn serve(b: &Bench) -> (Served, String, String) {
    let mut child = b
        .gaffer_std()
        .args(["serve", "--listen", "127.0.0.1:0", "--workers", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let served = Served(child);
    let link = lines
        .by_ref()
        .map(Result::unwrap)
        .find_map(|l| l.trim().starts_with("http://").then(|| l.trim().to_owned()))
        .expect("gaffer serve prints a login link");
    let base = link.split("/login").next().unwrap().to_owned();
    (served, link, base)
}

pub fn artifact(name: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/artifacts")
        .join(name)
}
