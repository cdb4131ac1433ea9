//! Secure mode end to end: a `local-only` project refuses a cloud agent before anything
//! is stored; a `masked` project's cloud planner sees no identifier, string or path of
//! the repository, and its plan reaches the local owner with the real names.
use super::run::{json_of, success_json, Bench, README_DONE, REQUEST};
use gaffer_testkit::git::git;
use gaffer_testkit::llm::FakeLlmServer;
use gaffer_testkit::model::{say, ModelScript, ModelServer};
use gaffer_testkit::scenario::{LlmReply, LlmToolCall, Scenario};
use serde_json::{json, Value};

/// The source the masked test's repository holds, besides README.md and the Makefile.
pub(super) const LEDGER: &str = r#"REFUND_MARKER = "refund-line"


def settle_total(ledger_lines, customer_ref):
    """Add up the open rows of one payer."""
    # refunded rows are dropped by the caller
    return [ledger_row.row_cents for ledger_row in ledger_lines if ledger_row.row_payer == customer_ref and ledger_row.row_kind != REFUND_MARKER]
"#;

pub(super) const MASKED_REQUEST: &str =
    "Make `settle_total` in billing/ledger.py skip rows marked \"refund-line\"";

/// Python's keywords (and soft keywords): words of the source that are not names.
const PY_KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

/// The identifiers and string literals of Python `source`, found by a small tokenizer of
/// the test's own (not gaffer's masking): strings (`"…"`, `'…'`, `"""…"""`), comments
/// dropped, then every word that is not a keyword or a number.
pub(super) fn python_names_and_strings(source: &str) -> (Vec<String>, Vec<String>) {
    let mut strings = Vec::new();
    let mut code = String::new();
    let mut rest = source;
    while !rest.is_empty() {
        if rest.starts_with('#') {
            let end = rest.find('\n').unwrap_or(rest.len());
            rest = &rest[end..];
            continue;
        }
        let quote = ["\"\"\"", "'''", "\"", "'"]
            .into_iter()
            .find(|q| rest.starts_with(q));
        if let Some(q) = quote {
            let body = &rest[q.len()..];
            let end = body.find(q).expect("closed string");
            strings.push(body[..end].to_owned());
            code.push(' ');
            rest = &body[end + q.len()..];
            continue;
        }
        let c = rest.chars().next().unwrap();
        code.push(c);
        rest = &rest[c.len_utf8()..];
    }
    let mut names: Vec<String> = code
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty() && !w.starts_with(|c: char| c.is_ascii_digit()))
        .filter(|w| !PY_KEYWORDS.contains(w))
        .map(str::to_owned)
        .collect();
    names.sort();
    names.dedup();
    (names, strings)
}

/// Whether `word` occurs in `text` as a whole word.
pub(super) fn has_word(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + word.len()..].chars().next();
        let edge = |c: Option<char>| c.is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
        edge(before) && edge(after)
    })
}

#[test]
fn local_only_refuses_a_cloud_agent_with_78_before_anything_is_stored() {
    let b = Bench::new();
    b.script_all();
    b.home
        .write_config("[projects.demo]\nprivacy = \"local-only\"\n");
    // Claude Code without ANTHROPIC_BASE_URL: its endpoint is Anthropic's, a cloud.
    let out = b
        .gaffer_std()
        .args(["run", REQUEST, "--repo"])
        .arg(&b.repo)
        .args(["--yes", "--json"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{err}");
    for part in [
        "role planner",
        "agent claude",
        "ANTHROPIC_BASE_URL is not set",
        "privacy = \"local-only\"",
        "private_networks",
    ] {
        assert!(err.contains(part), "`{part}` missing from: {err}");
    }
    let listed = |what: &str| {
        json_of(
            &b.gaffer_std()
                .args([what, "list", "--json"])
                .output()
                .unwrap(),
        )
    };
    assert_eq!(listed("task"), json!([]), "a task was stored");
    assert_eq!(listed("project"), json!([]), "the project was registered");

    // `gaffer doctor` says the same about the project.
    let doctor = json_of(&b.gaffer_std().args(["doctor", "--json"]).output().unwrap());
    let check = doctor["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "privacy: demo")
        .cloned()
        .unwrap_or_else(|| panic!("no privacy check: {doctor}"));
    assert_eq!(check["status"], "fail", "{check}");
    assert!(
        check["detail"]
            .as_str()
            .unwrap()
            .starts_with("local-only: planner claude (cloud, REFUSED)"),
        "{check}"
    );

    // The same agent pointed at a model server on loopback complies: the task runs,
    // and every agent step records the mode that applied.
    let out = b
        .gaffer_std()
        .env("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
        .args(["run", REQUEST, "--repo"])
        .arg(&b.repo)
        .args(["--yes", "--json"])
        .output()
        .unwrap();
    let summary = success_json(&out);
    let task = summary["task_id"].as_str().unwrap().to_owned();
    let shown = success_json(
        &b.gaffer_std()
            .env("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
            .args(["task", "show", &task, "--json"])
            .output()
            .unwrap(),
    );
    let recorded = step_privacy(&shown);
    assert!(recorded.len() >= 3, "{recorded:?}");
    for (step, p) in &recorded {
        assert_eq!(p["mode"], "local-only", "{step}: {p}");
        assert_eq!(p["local"], true, "{step}: {p}");
        assert_eq!(p["endpoint"], "http://127.0.0.1:9", "{step}: {p}");
    }
}

/// Each agent step's recorded privacy, by step id.
pub(super) fn step_privacy(shown: &Value) -> Vec<(String, Value)> {
    shown["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| {
            let receipt = match &s["receipt"] {
                Value::String(text) => serde_json::from_str(text).ok()?,
                other => other.clone(),
            };
            let p = receipt.get("privacy")?.clone();
            Some((s["id"].as_str().or(s["step_id"].as_str())?.to_owned(), p))
        })
        .collect()
}

pub(super) fn tool(name: &str, arguments: Value) -> LlmReply {
    LlmReply {
        tool_calls: vec![LlmToolCall {
            name: name.into(),
            arguments,
        }],
        ..LlmReply::default()
    }
}

pub(super) fn text(t: &str) -> LlmReply {
    LlmReply {
        text: Some(t.into()),
        ..LlmReply::default()
    }
}

/// A bench whose repository also holds `billing/ledger.py` ([`LEDGER`]), configured
/// `privacy = "masked"` with a cloud planner (the built-in Anthropic agent) and local
/// built-in OpenAI agents for every other role.
pub(super) fn masked_bench() -> Bench {
    let b = Bench::new();
    std::fs::create_dir_all(b.repo.join("billing")).unwrap();
    std::fs::write(b.repo.join("billing/ledger.py"), LEDGER).unwrap();
    git(&b.repo, &["add", "."]);
    git(&b.repo, &["commit", "-q", "-m", "ledger"]);
    b.home.write_config(
        "[projects.demo]\nprivacy = \"masked\"\n\
         [projects.demo.roles.planner]\nagent = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\n\
         [projects.demo.roles.owner]\nagent = \"openai\"\n\
         [projects.demo.roles.reviewer]\nagent = \"openai\"\n\
         [projects.demo.roles.arbiter]\nagent = \"openai\"\n",
    );
    b
}

/// `gaffer run MASKED_REQUEST --yes --json` on a [`masked_bench`]. The planner's
/// endpoint is a host name (a cloud); a proxy on loopback carries its requests to the
/// scripted model server `cloud`. The other roles' endpoint, `local`, is on loopback.
pub(super) fn masked_run(
    b: &Bench,
    cloud: &ModelServer,
    local: &FakeLlmServer,
) -> std::process::Command {
    let mut cmd = b.gaffer_std();
    cmd.env("ANTHROPIC_BASE_URL", "http://models.cloud.example")
        .env("ANTHROPIC_API_KEY", "sk-ant-test")
        .env("HTTP_PROXY", cloud.base_url())
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env("OPENAI_BASE_URL", local.openai_base())
        .env("OPENAI_API_KEY", "sk-local")
        .args(["run", MASKED_REQUEST, "--repo"])
        .arg(&b.repo)
        .args(["--yes", "--json"]);
    cmd
}

#[test]
fn a_masked_cloud_planner_sees_no_name_or_string_and_its_plan_reaches_the_owner_unmasked() {
    let b = masked_bench();

    // The placeholders the masked pack gives (path first, then the file in order):
    // billing → id1, ledger → id2, REFUND_MARKER → id3, "refund-line" → str1,
    // settle_total → id4. The test checks below that the planner really saw them so.
    let plan = json!({ "subtasks": [{
        "title": "Skip str1 rows in id4",
        "description": "In id1/id2.py make id4 skip rows whose kind is id3 (\"str1\"), and add an installation section to README.md",
        "files": ["id1/id2.py", "README.md"],
        "acceptance": "id4 leaves out str1 rows; README has ## Installation"
    }]});
    let cloud_script = ModelScript::new().role(
        "planner",
        vec![say(&format!("The plan.\n```json\n{plan}\n```"))],
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    let cloud = rt.block_on(ModelServer::start(cloud_script)).unwrap();
    let local = rt
        .block_on(FakeLlmServer::start(&Scenario {
            llm: vec![
                tool(
                    "write_file",
                    json!({"path": "README.md", "content": README_DONE}),
                ),
                text("Added the section."),
                text("```json\n{\"verdict\":\"done\"}\n```"),
            ],
            ..Scenario::default()
        }))
        .unwrap();

    let out = masked_run(&b, &cloud, &local).output().unwrap();
    let summary = success_json(&out);

    // What the cloud received: requests, all through the proxy, all the planner's.
    let received = cloud.requests();
    assert!(!received.is_empty(), "the cloud planner was never asked");
    let cloud_text: String = received
        .iter()
        .map(|r| format!("{} {}\n", r.uri, r.body))
        .collect();
    assert!(
        received
            .iter()
            .all(|r| r.header("host") == Some("models.cloud.example")),
        "{cloud_text}"
    );
    // It saw the program's shape: the masked file, its `def` and its placeholders.
    for shown in [
        "id1/id2.py (full) -----",
        "def id4(",
        "id3 = \\\"str1\\\"",
        "`id4`",
    ] {
        assert!(
            cloud_text.contains(shown),
            "`{shown}` not in:\n{cloud_text}"
        );
    }
    // And nothing of the source: every identifier and string literal of every source
    // file of the repository, and every path segment.
    let (names, strings) = python_names_and_strings(LEDGER);
    assert!(
        names.len() == 8 && strings.len() == 2,
        "{names:?} {strings:?}"
    );
    for word in names
        .iter()
        .chain(&["billing".to_owned(), "ledger".to_owned()])
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

    // The local owner's prompt has the real names where the plan had placeholders.
    let owner = local
        .requests()
        .first()
        .map(Value::to_string)
        .expect("the owner was asked");
    for real in [
        "Skip refund-line rows in settle_total",
        "In billing/ledger.py make settle_total skip rows whose kind is REFUND_MARKER",
        "settle_total leaves out refund-line rows",
    ] {
        assert!(
            owner.contains(real),
            "`{real}` not in the owner's prompt:\n{owner}"
        );
    }
    for placeholder in ["id1", "id2", "id3", "id4", "str1"] {
        assert!(
            !has_word(&owner, placeholder),
            "`{placeholder}` reached the owner:\n{owner}"
        );
    }

    // The journal records per step what applied: the planner masked on a cloud model,
    // the others local.
    let task = summary["task_id"].as_str().unwrap().to_owned();
    let shown = success_json(
        &b.gaffer_std()
            .args(["task", "show", &task, "--json"])
            .output()
            .unwrap(),
    );
    let recorded = step_privacy(&shown);
    let plan_step = recorded
        .iter()
        .find(|(s, _)| s == "plan")
        .map(|(_, p)| p)
        .unwrap();
    assert_eq!(plan_step["mode"], "masked");
    assert_eq!(plan_step["masked"], true);
    assert_eq!(plan_step["local"], false);
    assert!(
        plan_step["placeholders"].as_u64().unwrap() >= 8,
        "{plan_step}"
    );
    let code = recorded
        .iter()
        .find(|(s, _)| s == "code/1")
        .map(|(_, p)| p)
        .unwrap();
    assert_eq!(
        (code["masked"].clone(), code["local"].clone()),
        (json!(false), json!(true))
    );
    // The plan stored (and shown for approval) is the unmasked one.
    let plan_receipt = shown.to_string();
    assert!(plan_receipt.contains("billing/ledger.py"), "{plan_receipt}");
}

/// Every event of every stream of the SQLite journal `db`, in order (kind and stream).
async fn whole_journal(db: &std::path::Path) -> Vec<(String, String)> {
    use gaffer_store::{Durability, Journal, SqliteJournal};
    let j = SqliteJournal::open(db, Durability::Normal).await.unwrap();
    j.events_after(0, 1_000_000)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.stream_id.clone(), e.event.kind().to_owned()))
        .collect()
}

/// A `local-only` project whose roles run on loopback but whose owner falls back to
/// Codex (its provider a cloud: `OPENAI_BASE_URL` is not set) is refused before
/// anything is stored, by `gaffer run` (78) and by `POST /api/tasks` (409), with the
/// same reason naming the role and the agent; the journal is left as it was.
#[tokio::test]
async fn local_only_refuses_a_cloud_fallback_up_front_from_the_cli_and_the_api() {
    let b = Bench::new();
    b.script_all();
    b.home.write_config(
        "[projects.demo]\nprivacy = \"local-only\"\n\n[roles.owner]\nagent = [\"claude\", \"codex\"]\n",
    );
    let gaffer = || {
        let mut cmd = b.gaffer_std();
        cmd.env("ANTHROPIC_BASE_URL", "http://127.0.0.1:9");
        cmd
    };
    let added = gaffer()
        .args(["project", "add"])
        .arg(&b.repo)
        .output()
        .unwrap();
    assert!(added.status.success(), "{added:?}");
    let before = whole_journal(&b.home.db()).await;
    assert!(!before.is_empty());

    let out = gaffer()
        .args(["run", REQUEST, "--repo"])
        .arg(&b.repo)
        .args(["--yes", "--json"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(78), "{err}");
    for part in [
        "role owner",
        "agent codex",
        "OPENAI_BASE_URL is not set",
        "privacy = \"local-only\"",
    ] {
        assert!(err.contains(part), "`{part}` missing from: {err}");
    }
    assert_eq!(
        whole_journal(&b.home.db()).await,
        before,
        "gaffer run stored something"
    );

    // The API, same config and environment: 409, the same reason, nothing stored.
    let mut cmd = gaffer();
    cmd.args(["serve", "--listen", "127.0.0.1:0"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let (_served, base) = super::serve::serve(&mut cmd);
    let r = b
        .home
        .http()
        .post(format!("{base}/api/tasks"))
        .json(&json!({"project": "demo", "request": REQUEST}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "privacy_refused", "{body}");
    let said = body["error"]["message"].as_str().unwrap_or_default();
    let cli_reason = err
        .lines()
        .find(|l| l.contains("role owner"))
        .unwrap()
        .trim();
    assert!(
        cli_reason.contains(said) && !said.is_empty(),
        "the API's reason {said:?} is not the CLI's {cli_reason:?}"
    );
    assert_eq!(
        whole_journal(&b.home.db()).await,
        before,
        "the API stored something"
    );
}
