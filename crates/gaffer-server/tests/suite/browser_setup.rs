//! A failing worktree `setup` command, as a person reads it on the task page: the
//! message, then the command's output line by line with its last line (where it
//! says why) in sight — at phone and laptop width. The error once ran together in
//! one paragraph, its lines joined, the reason at the far end.

use super::browser::{artifact, assert_no_horizontal_scroll, driver, logged_in, LAPTOP, PHONE};
use super::scene::Scene;
use super::support::*;
use gaffer_core::{Event, Intent, Role, Stage, StepId};
use serde_json::json;

const HEAD: &str = "setup command `npm ci` failed (exit code 1); fix it in [projects.alpha] setup or in the repository, then retry the task. Its output:";
const WHY: &str =
    "npm ERR! 404 Not Found - GET https://registry.npmjs.org/left-pad-private - Not found";

fn failed(step: &str, error: &str) -> Event {
    Event::StepFailed {
        step_id: StepId(step.into()),
        error: error.into(),
        usage: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_setup_shows_its_message_and_the_end_of_its_output_line_by_line() {
    let Some(driver) = driver() else { return };
    let h = start(false).await;
    h.project("alpha").await;
    let output: String = (1..=60)
        .map(|i| format!("npm http fetch GET 200 https://registry.npmjs.org/pkg-{i} 12ms\n"))
        .collect();
    let error = format!("{HEAD}\n{output}{WHY}\n");

    let s = Scene::new(&h.app, "alpha", "Add a --json flag to the list command").await;
    s.stage(Stage::Planning).await;
    s.step("worktree", Intent::Idempotent).await;
    s.complete(
        "worktree",
        json!({ "branch": format!("gaffer/{}", s.task), "base": "0123456789abcdef" }),
    )
    .await;
    s.step("setup", Intent::Idempotent).await;
    s.push(vec![
        failed("setup", &error),
        Event::TaskFailed {
            reason: format!("worktree setup failed: {error}"),
        },
    ])
    .await;
    // The same error on an agent's step (its result card).
    let agent = Scene::new(&h.app, "alpha", "Document the --json flag").await;
    agent.stage(Stage::Planning).await;
    agent.stage(Stage::Coding).await;
    agent.agent_step("code/1", Role::Owner, "claude").await;
    agent.push(vec![failed("code/1", &error)]).await;

    for (size, name) in [(PHONE, "390"), (LAPTOP, "1280")] {
        let b = logged_in(&driver, &h, &format!("setup-{name}"), size).await;
        b.goto(&h.url(&format!("/tasks/{}", s.task))).await.unwrap();
        b.wait_for(
            "the failed setup's output",
            "!!document.querySelector('#transcript [data-step=\"setup\"] .fold.error.open pre.out')",
        )
        .await
        .unwrap();
        let shown = b
            .eval(
                "(() => { const st = document.querySelector('#transcript [data-step=\"setup\"]');
                  const pre = st.querySelector('pre.out');
                  return { head: st.querySelector('p.err').innerText,
                           lines: pre.innerText.replace(/\\n$/, '').split('\\n'),
                           wrap: getComputedStyle(pre).whiteSpace,
                           atEnd: pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 2 }; })()",
            )
            .await
            .unwrap();
        assert_eq!(shown["head"], HEAD, "the message alone: {shown}");
        let lines = shown["lines"].as_array().unwrap();
        assert_eq!(lines.len(), 61, "one line per output line: {shown}");
        assert_eq!(lines.last().unwrap(), WHY);
        assert_eq!(shown["wrap"], "pre-wrap");
        assert_eq!(
            shown["atEnd"], true,
            "the last line, which says why, is in sight"
        );
        // The task's banner says the same, its output's end in sight; the
        // transcript's "Task failed" line does not repeat the output.
        let banner = b
            .eval(
                "(() => { const o = document.querySelector('#outcome'); const pre = o.querySelector('pre.out');
                  return { head: o.querySelector('p.err').innerText,
                           last: pre.innerText.trim().split('\\n').pop(),
                           atEnd: pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 2,
                           note: [...document.querySelectorAll('#transcript .tnote')].map((n) => n.innerText).find((t) => t.includes('Task failed')) }; })()",
            )
            .await
            .unwrap();
        assert_eq!(banner["head"], format!("worktree setup failed: {HEAD}"));
        assert_eq!(banner["last"], WHY);
        assert_eq!(banner["atEnd"], true);
        let note = banner["note"]
            .as_str()
            .unwrap_or_else(|| panic!("{banner}"));
        assert!(
            note.contains("Its output: (the output is shown with the step)")
                && !note.contains("pkg-1 "),
            "{note}"
        );
        assert_no_horizontal_scroll(&b, &format!("the failed setup at {name}px")).await;
        b.eval("document.querySelector('#transcript [data-step=\"setup\"]').scrollIntoView()")
            .await
            .unwrap();
        b.screenshot(&artifact(&format!("setup-failed-{name}.png")))
            .await
            .unwrap();

        b.goto(&h.url(&format!("/tasks/{}", agent.task)))
            .await
            .unwrap();
        b.wait_for(
            "the failed turn's output",
            "!!document.querySelector('#transcript .result.bad .fold.error.open pre.out')",
        )
        .await
        .unwrap();
        let card = b
            .eval(
                "(() => { const r = document.querySelector('#transcript .result.bad');
                  return { head: r.querySelector('p.err').innerText,
                           last: r.querySelector('pre.out').innerText.trim().split('\\n').pop() }; })()",
            )
            .await
            .unwrap();
        assert_eq!(card["head"], HEAD);
        assert_eq!(card["last"], WHY);
        b.close().await.unwrap();
    }
}
