//! Secure mode meets live control: a person's message to a masked cloud planner is
//! masked with the planner step's own placeholders, mid-turn and when it waits for the
//! next turn, so quoting the repository to the planner leaks nothing of it; the plan
//! that answers it reaches the local owner with the real names; a message to a local
//! role is delivered as written. The journal says which applied to each message.
use super::privacy::{
    has_word, masked_bench, masked_run, python_names_and_strings, text, tool, LEDGER,
};
use super::run::{success_json, wait_for_step, README_DONE};
use super::support::events_of;
use gaffer_testkit::llm::FakeLlmServer;
use gaffer_testkit::model::{say, ModelRequest, ModelScript, ModelServer};
use gaffer_testkit::scenario::{LlmReply, Scenario};
use serde_json::{json, Value};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// How long the scripted models take to answer a request a message is sent during:
/// long enough for `gaffer say` to start and record it on a busy machine.
const SLOW_MS: u64 = 6000;

/// Quotes names of the source (one in backticks, one bare), its string literal, and a
/// new code-shaped name (`skip_refunds`) the plan then uses.
const LIVE_MESSAGE: &str = "Call the new helper skip_refunds, keep `settle_total` as the entry point, and compare row_kind with \"refund-line\" exactly";
/// Quotes more names, a path (plain words of the source, `ledger`, among them) and the
/// string literal without its quotes: sent after an interrupt, it is the session's next
/// turn.
const NEXT_TURN_MESSAGE: &str = "Also leave ledger_lines and customer_ref alone; REFUND_MARKER stays in billing/ledger.py and refund-line rows stay out";
/// To the local owner: delivered as written.
const OWNER_MESSAGE: &str = "Mention `settle_total` in the section too";

fn slow(mut reply: LlmReply) -> LlmReply {
    reply.delay_ms = Some(SLOW_MS);
    reply
}

/// Waits until `n` requests reached a server (`count` says how many did).
fn until_requests(what: &str, n: usize, count: impl Fn() -> usize) {
    let deadline = Instant::now() + Duration::from_secs(180);
    while count() < n {
        assert!(Instant::now() < deadline, "{what} never came");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn body_text(r: &ModelRequest) -> String {
    r.body.to_string()
}

#[test]
fn a_message_to_a_masked_cloud_planner_is_masked_with_the_steps_placeholders() {
    let b = masked_bench();
    // The pack's placeholders (see `a_masked_cloud_planner_sees_no_name_or_string…`):
    // settle_total → id4, "refund-line" → str1, row_kind → id10; the live message's new
    // name skip_refunds gets the next free one, id11 (the pack holds only ledger.py).
    let new_name = "id11";
    let plan = json!({ "subtasks": [{
        "title": "Skip str1 rows in id4 via id11",
        "description": "Add id11 to id1/id2.py and call it from id4, and add an installation section to README.md",
        "files": ["id1/id2.py", "README.md"],
        "acceptance": "id11 drops str1 rows; README has ## Installation"
    }]});
    let cloud_script = ModelScript::new().role(
        "planner",
        vec![
            // The turn looks around (a tool call) slowly: the first message arrives
            // meanwhile and goes into the turn with the next request.
            slow(tool("list_dir", json!({"path": "."}))),
            // Slowly again: a person stops the turn meanwhile, and their next message
            // is the session's next turn.
            slow(say("Noted; thinking it over.")),
            say(&format!("The plan.\n```json\n{plan}\n```")),
        ],
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    let cloud = rt.block_on(ModelServer::start(cloud_script)).unwrap();
    let local = rt
        .block_on(FakeLlmServer::start(&Scenario {
            llm: vec![
                slow(tool(
                    "write_file",
                    json!({"path": "README.md", "content": README_DONE}),
                )),
                text("Added the section."),
                text("```json\n{\"verdict\":\"done\"}\n```"),
            ],
            ..Scenario::default()
        }))
        .unwrap();

    let mut child = masked_run(&b, &cloud, &local)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let id = wait_for_step(&b.home.db(), "plan", &mut child, &rt);
    let say_it = |text: &str| {
        success_json(
            &b.gaffer_std()
                .args(["say", &id, text, "--json"])
                .output()
                .unwrap(),
        )
    };
    let planner = || cloud.requests_of("planner").len();
    until_requests("the planner's first request", 1, planner);
    let live = say_it(LIVE_MESSAGE);
    until_requests("the planner's second request", 2, planner);
    let out = b.gaffer_std().args(["interrupt", &id]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    // The turn is over (the agent stopped) before the message: else it would go live.
    let deadline = Instant::now() + Duration::from_secs(120);
    while !events_of(&b.home.db(), &id, "agent_activity")
        .iter()
        .any(|e| e["activity"]["type"] == "turn_ended" && e["activity"]["status"] == "interrupted")
    {
        assert!(
            Instant::now() < deadline,
            "the interrupted turn never ended"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let next_turn = say_it(NEXT_TURN_MESSAGE);
    until_requests("the owner's first request", 1, || local.requests().len());
    let to_owner = say_it(OWNER_MESSAGE);
    let out = child.wait_with_output().unwrap();
    let summary = success_json(&out);
    assert_eq!(summary["state"], "done", "{summary}");

    // The cloud got each message masked, in the turn (with its second request) and as
    // the next turn after the interrupt (the third), with the pack's placeholders and
    // a new one.
    let asked = cloud.requests_of("planner");
    assert_eq!(asked.len(), 3, "{}", cloud.describe());
    let second = body_text(&asked[1]);
    let masked_live = format!(
        "Call the new helper {new_name}, keep `id4` as the entry point, and compare id10 with \\\"str1\\\" exactly"
    );
    assert!(
        second.contains(&masked_live),
        "{masked_live}\nnot in:\n{second}"
    );
    let third = body_text(&asked[2]);
    let masked_next =
        "Also leave id5 and id6 alone; id3 stays in id1/id2.py and str1 rows stay out";
    assert!(
        third.contains(masked_next),
        "{masked_next}\nnot in:\n{third}"
    );
    assert!(!second.contains(masked_next), "delivered early:\n{second}");

    // Nothing of the source reached the cloud: every identifier and string literal of
    // the repository's source, every path segment, and the new name.
    let cloud_text: String = cloud
        .requests()
        .iter()
        .map(|r| format!("{} {}\n", r.uri, r.body))
        .collect();
    let (names, strings) = python_names_and_strings(LEDGER);
    for word in names
        .iter()
        .map(String::as_str)
        .chain(["billing", "ledger", "skip_refunds"])
    {
        assert!(
            !has_word(&cloud_text, word),
            "`{word}` reached the cloud:\n{cloud_text}"
        );
    }
    for s in &strings {
        assert!(
            !cloud_text.contains(s.trim()),
            "\"{s}\" reached the cloud:\n{cloud_text}"
        );
    }

    // The local owner reads the plan with the message's names mapped back, and its own
    // message as written.
    let owner: Vec<String> = local.requests().iter().map(Value::to_string).collect();
    for real in [
        "Skip refund-line rows in settle_total via skip_refunds",
        "Add skip_refunds to billing/ledger.py and call it from settle_total",
        "skip_refunds drops refund-line rows",
    ] {
        assert!(
            owner[0].contains(real),
            "`{real}` not in the owner's prompt:\n{}",
            owner[0]
        );
    }
    for placeholder in ["id1", "id2", "id4", "str1", new_name] {
        assert!(
            !has_word(&owner[0], placeholder),
            "`{placeholder}` reached the owner:\n{}",
            owner[0]
        );
    }
    assert!(
        owner[1].contains(OWNER_MESSAGE),
        "the owner's message is not as written:\n{}",
        owner[1]
    );

    // The journal: how and with which privacy each message was delivered.
    let delivered: Vec<(String, String, bool)> = events_of(&b.home.db(), &id, "message_delivered")
        .iter()
        .map(|e| {
            (
                e["message_id"].as_str().unwrap().to_owned(),
                e["delivery"].as_str().unwrap().to_owned(),
                e["masked"].as_bool().unwrap(),
            )
        })
        .collect();
    let id_of = |m: &Value| m["id"].as_str().unwrap().to_owned();
    assert_eq!(
        delivered,
        [
            (id_of(&live), "live".to_owned(), true),
            (id_of(&next_turn), "next_turn".to_owned(), true),
            (id_of(&to_owner), "live".to_owned(), false),
        ]
    );
}
