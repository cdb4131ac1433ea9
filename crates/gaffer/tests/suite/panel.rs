//! The crew's new parts through the real binary and the page: the arbiter's panel
//! (fake Claude Code, fake Codex and the built-in OpenAI loop against the scripted
//! model server) in the terminal, `task show` and the task page; the plan approval
//! with the challenger's revisions and a challenge left open. Screenshots at phone and
//! laptop width are kept in `target/artifacts`.

use super::page::{artifact, serve};
use super::run::{Bench, README_DONE, REQUEST};
use gaffer_testkit::browser::{Browser, Driver};
use gaffer_testkit::llm::FakeLlmServer;
use gaffer_testkit::scenario::Scenario;
use serde_json::{json, Value};
use std::process::Stdio;

fn say(text: &str) -> Value {
    json!({ "steps": [{ "say": text }] })
}

fn fenced(v: Value) -> String {
    format!("```json\n{v}\n```")
}

fn plan(acceptance: &str) -> Value {
    json!({ "subtasks": [{ "title": "Add an installation section", "description": "Write how to install the tool with cargo, under its own heading.", "files": ["README.md"], "acceptance": acceptance }] })
}

fn opinion(opinion: &str, reason: &str, usage: (u64, u64), cost: f64) -> Value {
    json!({
        "steps": [{ "say": format!("I read the diff and the README.\n\n{}", fenced(json!({ "opinion": opinion, "reason": reason }))) }],
        "usage": { "input_tokens": usage.0, "output_tokens": usage.1 },
        "cost_usd": cost,
    })
}

const OPINIONS: [(&str, &str, &str); 3] = [
    (
        "claude",
        "Proceed",
        "The section is there and the project's check greps for exactly that heading.",
    ),
    (
        "codex:gpt-5-codex",
        "Revise",
        "Use `cargo install --locked demo` so the install is reproducible, as CONTRIBUTING asks.",
    ),
    (
        "openai:gpt-4.1",
        "Escalate",
        "Whether `--locked` is required is the maintainers' call, not the reviewer's.",
    ),
];

/// A new login link for the running `gaffer serve` (each link works once).
fn login_link(b: &Bench) -> String {
    let out = b.gaffer_std().arg("login-link").output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.trim().starts_with("http://").then(|| l.trim().to_owned()))
        .expect("gaffer login-link prints a link")
}

/// The bench's only task, as the API lists it.
async fn the_task(b: &Bench, base: &str) -> Value {
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
    listed[0].clone()
}

async fn no_horizontal_scroll(page: &Browser, what: &str) {
    let wide = page
        .eval("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        .await
        .unwrap();
    assert_eq!(wide, json!(0), "{what} scrolls sideways");
}

/// A reviewer that blocks sends the task to the arbiter, whose panel of three gives
/// its opinions; the terminal, `task show` and the page show each with the ruling.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panel_of_three_opinions_and_one_ruling_in_the_terminal_and_on_the_page() {
    let b = Bench::new();
    b.home.write_config(
        "[roles.arbiter]\npanel = [\"claude\", \"codex:gpt-5-codex\", \"openai:gpt-4.1\"]\n",
    );
    b.script(
        "planner",
        vec![say(&fenced(plan("README has ## Installation")))],
    );
    b.script("owner", vec![json!({ "steps": [{ "write_file": { "path": "README.md", "content": README_DONE } }, { "say": "added the section" }] })]);
    b.script("reviewer", vec![say(&fenced(json!({ "verdict": "blocked", "reason": "I would pin the install with --locked; the owner disagrees" })))]);
    b.script(
        "panelist.claude",
        vec![opinion("proceed", OPINIONS[0].2, (1800, 120), 0.0061)],
    );
    b.script(
        "panelist.codex",
        vec![opinion("revise", OPINIONS[1].2, (2400, 200), 0.0093)],
    );
    let scenario: Scenario = serde_json::from_value(json!({ "llm": [{
        "text": format!("Having read it:\n\n{}", fenced(json!({ "opinion": "escalate", "reason": OPINIONS[2].2 }))),
        "usage": { "input_tokens": 900, "output_tokens": 60 }
    }] }))
    .unwrap();
    let llm = FakeLlmServer::start(&scenario).await.unwrap();
    b.script("arbiter", vec![json!({
        "steps": [{ "say": format!("Two of three members see no defect in the change itself; `--locked` is a policy question the check does not ask.\n\n{}", fenced(json!({ "ruling": "proceed", "reason": "the change meets the request and the check; pinning is a separate decision" }))) }],
        "expect_prompt_contains": "2. codex:gpt-5-codex recommends revise",
    })]);
    let out = b
        .gaffer_std()
        .env(
            "GAFFER_CODEX_BIN",
            gaffer_testkit::bins::fake_bin("fake-codex"),
        )
        .env("OPENAI_BASE_URL", llm.openai_base())
        .env("OPENAI_API_KEY", "sk-test-panel")
        .args(["run", REQUEST, "--repo"])
        .arg(&b.repo)
        .args(["--yes"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    // The terminal: each opinion as it came, with what it spent, then the ruling.
    for (member, word, reason) in OPINIONS {
        let line = stderr
            .lines()
            .find(|l| l.contains(&format!("⚖ panel {member} {}:", word.to_lowercase())))
            .unwrap_or_else(|| panic!("no opinion line for {member} in\n{stderr}"));
        assert!(line.contains(&reason[..30]), "{line}");
        assert!(line.contains(" tokens, "), "{line}");
    }
    assert!(stderr.contains("arbiter/1 ruling: proceed"), "{stderr}");
    let (_served, _, base) = serve(&b);
    let id = the_task(&b, &base).await["id"].as_str().unwrap().to_owned();

    // `task show`: the ruling and the panel under it.
    let show = b.gaffer_std().args(["task", "show", &id]).output().unwrap();
    let shown = String::from_utf8_lossy(&show.stdout);
    assert!(shown.contains("arbiter/1    proceed"), "{shown}");
    assert!(
        shown.contains("panel codex:gpt-5-codex: revise  Use `cargo install --locked demo`"),
        "{shown}"
    );
    assert!(shown.contains("panel openai:gpt-4.1: escalate"), "{shown}");

    let Some(driver) = Driver::start().unwrap() else {
        return;
    };
    for (w, h) in [(390, 844), (1280, 800)] {
        let page = driver.browser(&format!("panel-{w}"), w, h).await.unwrap();
        page.goto(&login_link(&b)).await.unwrap();
        page.goto(&format!("{base}/tasks/{id}")).await.unwrap();
        page.wait_for(
            "the panel's opinions",
            "document.querySelectorAll('[data-step=\"arbiter/1\"] .entry.opinion').length === 3",
        )
        .await
        .unwrap();
        let opinions = page
            .eval("[...document.querySelectorAll('[data-step=\"arbiter/1\"] .entry.opinion')].map((e) => [e.querySelector('.member').innerText, e.querySelector('.op-word').innerText, e.querySelector('p').innerText])")
            .await
            .unwrap();
        // As they came (in any order), each in words.
        let mut opinions: Vec<Value> = opinions.as_array().unwrap().clone();
        opinions.sort_by_key(|o| o[0].as_str().unwrap().to_owned());
        assert_eq!(
            json!(opinions),
            json!(OPINIONS
                .iter()
                .map(|(m, w, r)| [m.to_string(), w.to_string(), r.replace('`', "")])
                .collect::<Vec<_>>()),
            "every member, in words"
        );
        let step = page
            .eval("document.querySelector('[data-step=\"arbiter/1\"]').innerText")
            .await
            .unwrap();
        let step = step.as_str().unwrap();
        assert!(step.contains("Proceed to the checks"), "{step}");
        assert!(
            step.contains("Arbiter") && !step.contains("Panel member"),
            "{step}"
        );
        assert!(
            !step.contains("{\"") && !step.contains("\\n"),
            "raw JSON or escapes: {step}"
        );
        no_horizontal_scroll(&page, "the panel").await;
        // The panel's spend is the arbiter's (its members run in the arbiter's step).
        let roles = page
            .eval("[...document.querySelectorAll('.spend-table tbody tr')].map((tr) => tr.cells[0].textContent)")
            .await
            .unwrap();
        assert_eq!(roles, json!(["arbiter"]));
        // A full-page capture: from the top, so the sticky header stays on top.
        page.eval("window.scrollTo(0, 0)").await.unwrap();
        page.screenshot(&artifact(&format!("panel-{w}.png")))
            .await
            .unwrap();
        page.close().await.unwrap();
    }
}

/// The challenger raises C1, the planner adopts it in revision 2, the challenger
/// raises C2 and the round limit (2) ends the loop: the pending plan approval on the
/// page shows the plan, the revision with its change and answer, and C2 left open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plan_approval_shows_the_revisions_and_the_challenge_left_open_on_the_page() {
    let Some(driver) = Driver::start().unwrap() else {
        return;
    };
    let b = Bench::new();
    b.home
        .write_config("[roles.challenger]\nmax_challenge_rounds = 2\n");
    let challenge = |id: &str, severity: &str, claim: &str, evidence: &str| json!({ "id": id, "claim": claim, "severity": severity, "evidence": evidence });
    b.script(
        "planner",
        vec![
            say(&fenced(plan("README has an Installation section"))),
            say(&format!(
                "C1 is right: the criterion now names the command.\n\n{}",
                fenced(json!({
                    "subtasks": plan("README has ## Installation with `cargo install demo`, and the check greps for it")["subtasks"],
                    "answers": [{ "id": "C1", "decision": "adopted", "reason": "the criterion now names the command a reader copies" }],
                }))
            )),
        ],
    );
    b.script(
        "challenger",
        vec![
            say(&fenced(json!({ "challenges": [challenge("C1", "high", "The acceptance cannot be checked: it names no command.", "README.md has no install command to copy")], "agreement": false }))),
            say(&fenced(json!({ "challenges": [challenge("C2", "medium", "The plan never says which Rust version `cargo install` needs.", "Cargo.toml sets rust-version = 1.80")], "agreement": false }))),
        ],
    );
    let mut run = b
        .gaffer_std()
        .args(["run", REQUEST, "--repo"])
        .arg(&b.repo)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (_served, _, base) = serve(&b);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(180);
    let id = loop {
        assert!(run.try_wait().unwrap().is_none(), "gaffer run ended early");
        assert!(std::time::Instant::now() < deadline, "no plan approval");
        let task = the_task(&b, &base).await;
        if task["stage"] == "awaiting_plan_approval" {
            break task["id"].as_str().unwrap().to_owned();
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    for (w, h) in [(390, 844), (1280, 800)] {
        let page = driver
            .browser(&format!("challenged-{w}"), w, h)
            .await
            .unwrap();
        page.goto(&login_link(&b)).await.unwrap();
        page.goto(&format!("{base}/tasks/{id}")).await.unwrap();
        page.wait_for(
            "the open challenge",
            "document.querySelector('.open-challenges')",
        )
        .await
        .unwrap();
        page.click("details.revision summary").await.unwrap();
        let open = page
            .eval("document.querySelector('.open-challenges').innerText")
            .await
            .unwrap();
        let open = open.as_str().unwrap();
        assert!(open.starts_with("1 challenge left open"), "{open}");
        assert!(
            open.contains("C2")
                && open.contains("which Rust version")
                && open.contains("rust-version = 1.80"),
            "{open}"
        );
        let revision = page
            .eval("document.querySelector('details.revision').innerText")
            .await
            .unwrap();
        let revision = revision.as_str().unwrap();
        assert!(
            revision.starts_with("Revision 2: 1 change, 1 answer"),
            "{revision}"
        );
        assert!(
            revision.contains("C1 adopted: the criterion now names the command"),
            "{revision}"
        );
        let plan = page
            .eval("document.querySelector('.open-challenges').closest('.details').innerText")
            .await
            .unwrap();
        assert!(
            plan.as_str().unwrap().contains("with cargo install demo"),
            "the plan shown is the revision: {plan}"
        );
        no_horizontal_scroll(&page, "the challenged plan").await;
        // A full-page capture: from the top, so the sticky header stays on top.
        page.eval("window.scrollTo(0, 0)").await.unwrap();
        page.screenshot(&artifact(&format!("plan-challenged-{w}.png")))
            .await
            .unwrap();
        page.close().await.unwrap();
    }
    let _ = run.kill();
    let _ = run.wait();
}

/// A bad panel member is a configuration error: `gaffer run` exits 78 naming the
/// field and the member, before anything is stored.
#[test]
fn a_bad_panel_member_exits_78_naming_the_field() {
    let b = Bench::new();
    for (config, says) in [
        (
            "[roles.arbiter]\npanel = [\"claude\", \"codex:\"]\n",
            "has `codex:` with an empty model",
        ),
        (
            "[roles.arbiter]\npanel = [\"gpt-4.1\"]\n",
            "is `gpt-4.1`; use one of",
        ),
    ] {
        b.home.write_config(config);
        let out = b
            .gaffer_std()
            .args(["run", REQUEST, "--repo"])
            .arg(&b.repo)
            .args(["--yes"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(78), "{err}");
        assert!(
            err.contains("roles.arbiter.panel") && err.contains(says),
            "{err}"
        );
    }
    assert!(
        !b.home.data().join("gaffer.db").exists(),
        "nothing is stored"
    );
}

/// A member whose agent cannot start here (no API key) is found before the task is
/// stored, like any role's agent; `gaffer doctor` names the panel among what it plays.
#[test]
fn a_panel_member_that_cannot_start_is_refused_before_anything_is_stored() {
    let b = Bench::new();
    b.home
        .write_config("[roles.arbiter]\npanel = [\"claude\", \"openai:gpt-4.1\"]\n");
    let out = b
        .gaffer_std()
        .args(["run", REQUEST, "--repo"])
        .arg(&b.repo)
        .args(["--yes", "--agent", "claude"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{err}");
    assert!(
        err.contains("agent openai (arbiter's panel) cannot start")
            && err.contains("OPENAI_API_KEY"),
        "{err}"
    );
    let doctor = b.gaffer_std().arg("doctor").output().unwrap();
    let said = String::from_utf8_lossy(&doctor.stdout);
    assert!(said.contains("roles.arbiter.panel"), "{said}");
}
