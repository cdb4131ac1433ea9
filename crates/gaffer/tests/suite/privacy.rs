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

/// `gaffer doctor`'s privacy line for project `demo`, and its hint.
fn doctor_privacy(b: &Bench, env: &[(&str, &str)]) -> (String, String, String) {
    let mut cmd = b.gaffer_std();
    cmd.envs(env.iter().copied()).args(["doctor", "--json"]);
    let doctor = json_of(&cmd.output().unwrap());
    let check = doctor["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "privacy: demo")
        .cloned()
        .unwrap_or_else(|| panic!("no privacy check: {doctor}"));
    let text = |k: &str| check[k].as_str().unwrap_or_default().to_owned();
    (text("status"), text("detail"), text("hint"))
}

/// The audit's URLs: what the agents parse as a cloud host is a cloud for doctor and
/// for `gaffer run` (78, naming why, nothing stored), whatever a naive split would read.
#[test]
fn a_cloud_url_dressed_as_loopback_is_refused_by_run_and_doctor() {
    let b = Bench::new();
    b.home.write_config(
        "[projects.demo]\nprivacy = \"local-only\"\n\n[roles]\nplanner = { agent = \"anthropic\" }\nowner = { agent = \"anthropic\" }\nreviewer = { agent = \"anthropic\" }\narbiter = { agent = \"anthropic\" }\n",
    );
    for (url, why) in [
        (
            "http://evil.example\\@127.0.0.1/",
            "its host `evil.example` is a name",
        ),
        ("http://a@127.0.0.1@evil.example/", "user name or password"),
        (
            "http://llm.localhost:8080/",
            "its host `llm.localhost` is a name",
        ),
    ] {
        let env = [
            ("ANTHROPIC_BASE_URL", url),
            ("ANTHROPIC_API_KEY", "sk-test"),
        ];
        let (status, detail, hint) = doctor_privacy(&b, &env);
        assert_eq!(status, "fail", "{url}: {detail}");
        assert!(
            detail.starts_with("local-only: planner anthropic (cloud, REFUSED)"),
            "{url}: {detail}"
        );
        assert!(hint.contains(why), "{url}: {hint}");
        let out = b
            .gaffer_std()
            .envs(env)
            .args(["run", REQUEST, "--repo"])
            .arg(&b.repo)
            .args(["--yes", "--json"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(78), "{url}: {err}");
        assert!(err.contains(why), "{url}: {err}");
        let tasks = json_of(
            &b.gaffer_std()
                .args(["task", "list", "--json"])
                .output()
                .unwrap(),
        );
        assert_eq!(tasks, json!([]), "{url}: a task was stored");
    }
    // The same agent on plain loopback complies.
    let (status, detail, _) = doctor_privacy(&b, &[("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/")]);
    assert_eq!(status, "ok", "{detail}");
    assert!(detail.contains("planner anthropic (local)"), "{detail}");
}

/// Codex goes where its `config.toml` says: a cloud provider there is refused naming
/// it, though `OPENAI_BASE_URL` is on loopback; a provider declared on loopback is local.
#[test]
fn codexs_provider_in_its_config_decides_where_it_runs() {
    let b = Bench::new();
    b.home.write_config(
        "[projects.demo]\nprivacy = \"local-only\"\n\n[roles]\nplanner = { agent = \"codex\" }\nowner = { agent = \"codex\" }\nreviewer = { agent = \"codex\" }\narbiter = { agent = \"codex\" }\n",
    );
    let codex_home = b.home.dir.path().join(".codex");
    std::fs::create_dir_all(&codex_home).unwrap();
    let write = |toml: &str| std::fs::write(codex_home.join("config.toml"), toml).unwrap();
    let env = [("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")];
    write("model_provider = \"azure\"\n[model_providers.azure]\nbase_url = \"https://corp.openai.azure.com/openai\"\n");
    let (status, detail, hint) = doctor_privacy(&b, &env);
    assert_eq!(status, "fail", "{detail}");
    assert!(
        detail.contains("planner codex (cloud, REFUSED)"),
        "{detail}"
    );
    assert!(
        hint.contains("[model_providers.azure] base_url in Codex's config.toml"),
        "{hint}"
    );
    write("model_provider = \"llama\"\n[model_providers.llama]\nbase_url = \"http://127.0.0.1:8080/v1\"\n");
    let (status, detail, _) = doctor_privacy(&b, &[]);
    assert_eq!(status, "ok", "{detail}");
    assert!(detail.contains("planner codex (local)"), "{detail}");
}

/// A local-only task's Claude Code never gets gaffer's switch to Bedrock nor its AWS
/// credentials, and runs with its telemetry off and only its private settings; a
/// standard project's gets them, and doctor counts the switch there as a cloud.
#[test]
fn a_local_only_claude_runs_without_the_bedrock_switch_aws_keys_or_telemetry() {
    let b = Bench::new();
    b.script_all();
    let bedrock = [
        ("ANTHROPIC_BASE_URL", "http://127.0.0.1:9"),
        ("CLAUDE_CODE_USE_BEDROCK", "1"),
        ("AWS_SECRET_ACCESS_KEY", "aws-s3cret"),
    ];
    let run = |b: &Bench| {
        let _ = std::fs::remove_file(b.log());
        let out = b
            .gaffer_std()
            .envs(bedrock)
            .args(["run", REQUEST, "--repo"])
            .arg(&b.repo)
            .args(["--yes", "--json"])
            .output()
            .unwrap();
        success_json(&out);
        let log = std::fs::read_to_string(b.log()).unwrap();
        let lines = |what: &str| -> Vec<String> {
            log.lines()
                .filter(|l| l.starts_with(&format!("fake-claude {what} ")))
                .map(str::to_owned)
                .collect()
        };
        (lines("env"), lines("spawn"))
    };
    let has = |line: &str, name: &str| {
        line.split_once("names=")
            .unwrap()
            .1
            .split(',')
            .any(|n| n == name)
    };

    b.home
        .write_config("[projects.demo]\nprivacy = \"local-only\"\n");
    let (status, detail, _) = doctor_privacy(&b, &bedrock);
    assert_eq!(
        status, "ok",
        "withheld, the switch does not count: {detail}"
    );
    let (envs, spawns) = run(&b);
    assert!(envs.len() >= 3, "{envs:?}");
    for line in &envs {
        assert!(!has(line, "CLAUDE_CODE_USE_BEDROCK"), "{line}");
        assert!(!has(line, "AWS_SECRET_ACCESS_KEY"), "{line}");
        assert!(has(line, "DISABLE_TELEMETRY"), "{line}");
        assert!(
            has(line, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"),
            "{line}"
        );
    }
    assert!(
        spawns.iter().all(|s| s.contains("--setting-sources=user")),
        "{spawns:?}"
    );

    b.home
        .write_config("[projects.demo]\nprivacy = \"standard\"\n");
    let (status, detail, _) = doctor_privacy(&b, &bedrock);
    assert_eq!(status, "ok", "{detail}");
    assert!(
        detail.contains("planner claude (cloud)"),
        "Bedrock is a cloud: {detail}"
    );
    let (envs, spawns) = run(&b);
    assert!(
        envs.iter().all(|l| has(l, "CLAUDE_CODE_USE_BEDROCK")),
        "{envs:?}"
    );
    assert!(
        spawns.iter().all(|s| !s.contains("--setting-sources")),
        "{spawns:?}"
    );
}
