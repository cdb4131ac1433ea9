//! Fallback agents with the real CLIs: the scripted model server answers the owner's
//! Claude Code with a 429 whose retry-after is an hour; Claude Code gives up at once
//! (its `result`: `is_error`, `api_error_status: 429`), gaffer records the switch and
//! the real Codex does the owner's turn; `gaffer task show` and the API show it.
use super::run::{json_of, Bench};
use gaffer_testkit::clis::{Cli, CliHome};
use gaffer_testkit::model::{call, say, ModelScript, ModelServer};
use gaffer_testkit::scenario::LlmReply;
use serde_json::json;
use std::process::{Command, Stdio};

#[test]
fn real_claude_out_on_a_long_429_hands_the_owner_to_real_codex() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let plan = json!({ "subtasks": [{ "title": "Add an installation section", "description": "write it", "files": ["README.md"], "acceptance": "README has ## Installation" }] });
    let script = ModelScript::new()
        .role("planner", vec![say(&format!("The plan.\n```json\n{plan}\n```"))])
        .role(
            "owner",
            vec![
                LlmReply {
                    status: Some(429),
                    retry_after: Some(3600),
                    ..LlmReply::default()
                },
                call(
                    "exec_command",
                    json!({"cmd": "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: README.md\n@@\n A demo project.\n+\n+## Installation\n+\n+    cargo install demo\n*** End Patch\nEOF\n"}),
                ),
                say("Added the installation section."),
            ],
        )
        .role("reviewer", vec![say("```json\n{\"verdict\":\"done\"}\n```")]);
    let server = rt.block_on(ModelServer::start(script)).unwrap();
    let bench = Bench::new();
    bench
        .home
        .write_config("[roles.owner]\nagent = [\"claude\", \"codex\"]\n");
    let claude = CliHome::new(Cli::Claude, &server, "claude-sonnet-4-5").unwrap();
    let codex = CliHome::new(Cli::Codex, &server, "gpt-5-codex").unwrap();
    let gaffer = || {
        let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("gaffer"));
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("GAFFER_CONFIG", bench.home.config())
            .env("GAFFER_DATA_DIR", bench.home.data())
            .env("USER", "tester")
            .env(Cli::Claude.bin_env(), Cli::Claude.bin())
            .env(Cli::Codex.bin_env(), Cli::Codex.bin())
            .envs(&claude.env)
            .env("CODEX_HOME", &codex.env["CODEX_HOME"])
            .env(
                "SCRIPTED_MODEL_API_KEY",
                &codex.env["SCRIPTED_MODEL_API_KEY"],
            );
        cmd
    };
    let out = gaffer()
        .args(["run", "Add an installation section to README", "--repo"])
        .arg(&bench.repo)
        .args(["--json", "--yes"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\nthe model saw:\n{}",
        String::from_utf8_lossy(&out.stderr),
        server.describe()
    );
    let summary = json_of(&out);
    assert_eq!(summary["state"], "done", "{summary}");
    // Claude Code asked once and got the 429; Codex asked next, with the same role.
    let owner = server.requests_of("owner");
    assert!(
        owner[0].uri.contains("/v1/messages"),
        "{}",
        server.describe()
    );
    assert!(owner[1].uri.contains("/responses"), "{}", server.describe());
    let branch = summary["branch"].as_str().unwrap();
    let readme = gaffer_testkit::git::git(&bench.repo, &["show", &format!("{branch}:README.md")]);
    assert!(readme.contains("## Installation"), "{readme}");
    // The switch, as scripts read it and as people do.
    let id = summary["task_id"].as_str().unwrap().to_owned();
    let shown = json_of(
        &gaffer()
            .args(["task", "show", &id, "--json"])
            .output()
            .unwrap(),
    );
    let switch = &shown["switches"][0];
    assert_eq!(
        (
            &switch["role"],
            &switch["from"],
            &switch["to"],
            &switch["trigger"],
            &switch["effects"]
        ),
        (
            &json!("owner"),
            &json!("claude"),
            &json!("codex"),
            &json!("rate_limited"),
            &json!(false)
        ),
        "{shown}"
    );
    let text = gaffer().args(["task", "show", &id]).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("fallbacks"), "{text}");
    assert!(
        text.contains("claude → codex  rate_limited: the turn ran again"),
        "{text}"
    );
    assert!(text.contains("429"), "{text}");
}
