//! The web page against the real binary: what `gaffer run --json` says a task
//! cost is what the page shows (and the API answers), for a task that went
//! through the ship step, whose receipt repeats the total.

use super::run::{success_json, Bench, README_DONE, REQUEST};
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

    let mut child = b
        .gaffer_std()
        .args(["serve", "--listen", "127.0.0.1:0", "--workers", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let _served = Served(child);
    let link = lines
        .by_ref()
        .map(Result::unwrap)
        .find_map(|l| l.trim().starts_with("http://").then(|| l.trim().to_owned()))
        .expect("gaffer serve prints a login link");
    let base = link.split("/login").next().unwrap().to_owned();

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
    page.screenshot(
        &std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../target/artifacts/cost-390.png"),
    )
    .await
    .unwrap();
    page.close().await.unwrap();
}
