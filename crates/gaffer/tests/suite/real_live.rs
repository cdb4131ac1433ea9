//! Live control with the real agent CLIs (Claude Code and Codex on their own
//! protocols, Gemini CLI over ACP) against the testkit's scripted model server: a
//! person's `gaffer say` while the planner's turn waits on the model reaches that
//! turn and the model sees it; one sent while gaffer lies `kill -9`ed reaches the
//! resumed turn. Either way the model is given the message once and the journal
//! records it delivered once.
use super::run::success_json;
use super::support::{events_of, never, per_cli, plan_reply, RealRun};
use gaffer_testkit::clis::Cli;
use gaffer_testkit::model::{call, say, ModelScript};
use gaffer_testkit::scenario::LlmReply;
use serde_json::{json, Value};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// What the person says; the model must see it.
const MESSAGE: &str = "Mention cargo binstall too, said-by-ana.";
/// The part of it that shows where it went (the agent sees it wrapped).
const MARK: &str = "said-by-ana";

/// The planner's first model reply, held back long enough for a message to be sent
/// while the turn waits on it: a read through the CLI's own tool (Claude Code and
/// Codex take a message into a running turn with the tool's result), or plain text
/// (Gemini CLI's turn is cancelled and prompted again with the message).
fn slow_first(cli: Cli) -> LlmReply {
    let reply = match cli {
        Cli::Claude => call("Read", json!({"file_path": "README.md"})),
        Cli::Codex => call("exec_command", json!({"cmd": "cat README.md"})),
        Cli::Gemini => say("Reading the repository first."),
    };
    LlmReply {
        delay_ms: Some(4000),
        ..reply
    }
}

/// How often the model was given the message in the planner's last request (the
/// conversation so far, so every message it was given is there).
fn times_in_last_request(r: &RealRun) -> usize {
    r.server
        .requests_of("planner")
        .last()
        .map_or(0, |q| q.body.to_string().matches(MARK).count())
}

/// The id of the one task, once `gaffer run` recorded it.
fn the_task(r: &RealRun) -> String {
    r.json(&["task", "list", "--json"])[0]["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Wait for the plan approval of the turn, `child` running, approving any other
/// approval as a person would (a crash that lost the CLI's conversation asks whether
/// to start a new one); then cancel the task and wait for `child` to end. The other
/// approvals' summaries.
fn plan_then_cancel(r: &RealRun, id: &str, mut child: Child) -> Vec<String> {
    let started = Instant::now();
    let mut approved = Vec::new();
    loop {
        let pending = r.json(&["approvals", "--json"]);
        let pending = pending.as_array().cloned().unwrap_or_default();
        if pending.iter().any(|a| a["kind"] == "plan") {
            break;
        }
        for a in pending {
            let out = r
                .gaffer()
                .args(["approve", a["id"].as_str().unwrap()])
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            approved.push(a["summary"].as_str().unwrap_or_default().to_owned());
        }
        if child.try_wait().unwrap().is_some() || started.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "no plan approval ({}): {}\nthe model saw:\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr),
                r.server.describe()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = r.gaffer().args(["task", "cancel", id]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    child.wait().unwrap();
    approved
}

/// The message was recorded delivered once, `delivery` (`live`, `next_turn`).
fn delivered_once(r: &RealRun, id: &str, sent: &Value, delivery: &str) {
    let delivered = events_of(&r.bench.home.db(), id, "message_delivered");
    assert_eq!(delivered.len(), 1, "{delivered:#?}");
    assert_eq!(delivered[0]["message_id"], sent["id"], "{delivered:#?}");
    assert_eq!(delivered[0]["delivery"], delivery, "{delivered:#?}");
}

/// `gaffer say` while the planner's CLI waits on the model: the message goes into the
/// running turn (live), and the model's next request carries it once.
fn a_message_reaches_the_running_turn(cli: Cli) {
    let r = RealRun::new(
        cli,
        ModelScript::new().role("planner", vec![slow_first(cli), plan_reply()]),
    );
    let mut child = r.start(&[]);
    r.wait_for("planner", &mut child, 1);
    let id = the_task(&r);
    let out = r
        .gaffer()
        .args(["say", &id, MESSAGE, "--json"])
        .output()
        .unwrap();
    let sent = success_json(&out);
    assert_eq!(sent["by"]["via"], "cli", "{sent}");
    let asked = plan_then_cancel(&r, &id, child);
    assert!(asked.is_empty(), "{asked:#?}");

    let planner = r.server.requests_of("planner");
    assert!(
        !planner[0].body.to_string().contains(MARK),
        "sent before the message was"
    );
    assert!(
        planner.len() >= 2,
        "the turn ended without asking the model again:\n{}",
        r.server.describe()
    );
    assert_eq!(
        times_in_last_request(&r),
        1,
        "the model was not given the message once:\n{}",
        r.server.describe()
    );
    delivered_once(&r, &id, &sent, "live");
}

/// SIGKILL gaffer while the planner's CLI waits on the model; `gaffer say` while no
/// gaffer runs (the message waits, `pending`); `gaffer task resume`: the resumed turn
/// is given the message, the model sees it once, and it is recorded delivered once.
fn a_message_sent_while_gaffer_is_dead_reaches_the_resumed_turn(cli: Cli) {
    let r = RealRun::new(
        cli,
        ModelScript::new().role("planner", vec![never(), plan_reply(), plan_reply()]),
    );
    let mut child = r.start(&[]);
    r.wait_for("planner", &mut child, 1);
    let id = the_task(&r);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();

    let out = r
        .gaffer()
        .args(["say", &id, MESSAGE, "--json"])
        .output()
        .unwrap();
    let sent = success_json(&out);
    assert_eq!(sent["delivery"], "pending", "{sent}");
    assert!(events_of(&r.bench.home.db(), &id, "message_delivered").is_empty());

    let resume = r
        .gaffer()
        .args(["task", "resume", &id, "--json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // (Gemini CLI may not have saved the conversation yet when gaffer was killed;
    // then a person is asked to start a new one, and the message goes to that.)
    let asked = plan_then_cancel(&r, &id, resume);
    assert!(
        asked
            .iter()
            .all(|a| a.contains("no longer has its conversation")),
        "{asked:#?}"
    );
    let planner = r.server.requests_of("planner");
    assert!(!planner[0].body.to_string().contains(MARK));
    assert_eq!(
        times_in_last_request(&r),
        1,
        "the resumed turn's model was not given the message once:\n{}",
        r.server.describe()
    );
    delivered_once(&r, &id, &sent, "live");
}

per_cli!(a_message_reaches_the_running_turn:
    real_claude_takes_a_message_mid_turn_and_the_model_sees_it,
    real_codex_takes_a_message_mid_turn_and_the_model_sees_it,
    real_gemini_takes_a_message_mid_turn_by_cancel_then_prompt_and_the_model_sees_it);

per_cli!(a_message_sent_while_gaffer_is_dead_reaches_the_resumed_turn:
    real_claude_gets_a_message_sent_while_gaffer_was_killed_once_after_resume,
    real_codex_gets_a_message_sent_while_gaffer_was_killed_once_after_resume,
    real_gemini_gets_a_message_sent_while_gaffer_was_killed_once_after_resume);
