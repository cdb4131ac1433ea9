//! `/metrics` after real work: a task run by `gaffer run` with the fake agents, then
//! a `gaffer serve` started afterwards on the same data dir (a restart: every
//! series is folded from the journal) shows its steps, turns, tokens and cost, in
//! a text `promtool check metrics` accepts.
use super::run::{Bench, REQUEST};
use super::serve::serve;
use super::support::local_client;
use std::io::Write;
use std::process::Stdio;

/// The value of the sample `series` (name and labels exactly as exposed).
fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no `{series}` in\n{text}"))
        .parse()
        .unwrap()
}

/// `promtool check metrics` on `text`: installed by `scripts/test` (Debian's
/// `prometheus`); without it the check is skipped with a note, except in CI.
fn promtool_accepts(text: &str) {
    let child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) if std::env::var_os("CI").is_none() => {
            eprintln!("promtool not found ({e}): the exposition is not checked by it here");
            return;
        }
        Err(e) => panic!("promtool: {e} (scripts/test installs Debian's prometheus)"),
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // promtool's lint also reports naming problems (units, `_total`) and exits 3.
    assert!(
        out.status.success() && said.trim().is_empty(),
        "promtool check metrics: {said}\n{text}"
    );
}

#[tokio::test]
async fn metrics_after_a_task_show_its_steps_turns_tokens_and_cost_and_pass_promtool() {
    let b = Bench::new();
    b.script_priced();
    b.home
        .write_config("[roles.owner]\nagent = \"claude\"\nmodel = \"opus-test\"\n");
    let out = b
        .gaffer_std()
        .args(["run", REQUEST, "--repo"])
        .arg(&b.repo)
        .arg("--yes")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let (_served, base) = serve(
        b.gaffer_std()
            .args(["serve", "--listen", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null()),
    );
    let text = local_client(&b.home.data())
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    promtool_accepts(&text);

    // Each role's spend, by the model its config names (`default`: none named).
    let who =
        |role: &str, model: &str| format!("role=\"{role}\",agent=\"claude\",model=\"{model}\"");
    for (role, model, input, output, cached, usd) in [
        ("planner", "default", 1200.0, 300.0, 0.0, 0.4123),
        ("owner", "opus-test", 2000.0, 500.0, 1000.0, 0.5),
        ("reviewer", "default", 800.0, 100.0, 0.0, 0.1),
    ] {
        let w = who(role, model);
        assert_eq!(
            [
                sample(&text, &format!("gaffer_tokens_total{{{w},type=\"input\"}}")),
                sample(
                    &text,
                    &format!("gaffer_tokens_total{{{w},type=\"output\"}}")
                ),
                sample(
                    &text,
                    &format!("gaffer_tokens_total{{{w},type=\"cached_input\"}}")
                ),
                sample(&text, &format!("gaffer_cost_usd_total{{{w}}}")),
            ],
            [input, output, cached, usd],
            "{role}"
        );
        // One turn each, in its role's histogram.
        assert_eq!(
            sample(
                &text,
                &format!("gaffer_turn_duration_seconds_count{{role=\"{role}\",agent=\"claude\"}}")
            ),
            1.0,
            "{role}"
        );
    }
    // The same total as the task's cost (`gaffer run`'s summary: $1.0123).
    let total: f64 = text
        .lines()
        .filter(|l| l.starts_with("gaffer_cost_usd_total{"))
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<f64>().unwrap())
        .sum();
    assert!((total - 1.0123).abs() < 1e-9, "{total}");
    // Every step that ran, by kind: one plan, one subtask, one review, one check.
    for kind in ["plan", "code", "review", "check"] {
        assert_eq!(
            sample(
                &text,
                &format!(
                    "gaffer_step_duration_seconds_count{{kind=\"{kind}\",outcome=\"completed\"}}"
                )
            ),
            1.0,
            "{kind}"
        );
    }
    // No step failed, and no series names a task.
    assert!(!text.contains("outcome=\"failed\""), "{text}");
    assert!(!text.contains("t-0"), "{text}");
    assert_eq!(sample(&text, "gaffer_tasks{stage=\"done\"}"), 1.0);
    // The commit the binary was built from (this is a git checkout).
    let commit = text
        .lines()
        .find_map(|l| l.strip_prefix("gaffer_build_info{"))
        .unwrap();
    assert!(
        !commit.contains("commit=\"unknown\"") && commit.contains("commit=\""),
        "{commit}"
    );
}
