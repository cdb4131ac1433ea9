//! Fallback agents with the real CLIs: the scripted model server refuses the owner's
//! Claude Code the way Anthropic's API does — a 429 whose retry-after is an hour, a
//! plan's usage limit (429 with the unified rate-limit headers), an overload (529) that
//! lasts past Claude Code's retries; Claude Code gives up, gaffer records the switch
//! and the real Codex does the owner's turn, once; `gaffer task show` shows it.
use super::run::{json_of, Bench};
use gaffer_testkit::clis::{Cli, CliHome};
use gaffer_testkit::model::{call, say, usage_limit_reached, ModelScript, ModelServer};
use gaffer_testkit::scenario::LlmReply;
use serde_json::{json, Value};
use std::process::{Command, Stdio};

/// A run whose owner is `agent = ["claude", "codex"]`, Claude Code answered by
/// `refusals` and Codex adding the installation section.
struct Fallback {
    _rt: tokio::runtime::Runtime,
    server: ModelServer,
    bench: Bench,
    claude: CliHome,
    codex: CliHome,
}

impl Fallback {
    fn new(refusals: Vec<LlmReply>, claude: impl FnOnce(CliHome) -> CliHome) -> Self {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let plan = json!({ "subtasks": [{ "title": "Add an installation section", "description": "write it", "files": ["README.md"], "acceptance": "README has ## Installation" }] });
        let mut owner = refusals;
        owner.extend([
            call(
                "exec_command",
                json!({"cmd": "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: README.md\n@@\n A demo project.\n+\n+## Installation\n+\n+    cargo install demo\n*** End Patch\nEOF\n"}),
            ),
            say("Added the installation section."),
        ]);
        let script = ModelScript::new()
            .role(
                "planner",
                vec![say(&format!("The plan.\n```json\n{plan}\n```"))],
            )
            .role("owner", owner)
            .role(
                "reviewer",
                vec![say("```json\n{\"verdict\":\"done\"}\n```")],
            );
        let server = rt.block_on(ModelServer::start(script)).unwrap();
        let bench = Bench::new();
        bench
            .home
            .write_config("[roles.owner]\nagent = [\"claude\", \"codex\"]\n");
        let claude = claude(CliHome::new(Cli::Claude, &server, "claude-sonnet-4-5").unwrap());
        let codex = CliHome::new(Cli::Codex, &server, "gpt-5-codex").unwrap();
        Fallback {
            _rt: rt,
            server,
            bench,
            claude,
            codex,
        }
    }

    fn gaffer(&self) -> Command {
        let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("gaffer"));
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("GAFFER_CONFIG", self.bench.home.config())
            .env("GAFFER_DATA_DIR", self.bench.home.data())
            .env("USER", "tester")
            .env(Cli::Claude.bin_env(), Cli::Claude.bin())
            .env(Cli::Codex.bin_env(), Cli::Codex.bin())
            .envs(&self.claude.env)
            .env("CODEX_HOME", &self.codex.env["CODEX_HOME"])
            .env(
                "SCRIPTED_MODEL_API_KEY",
                &self.codex.env["SCRIPTED_MODEL_API_KEY"],
            );
        cmd
    }

    /// Runs the task to done; its `task show --json` and `task show` text.
    fn run(&self) -> (Value, String) {
        let out = self
            .gaffer()
            .args(["run", "Add an installation section to README", "--repo"])
            .arg(&self.bench.repo)
            .args(["--json", "--yes"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}\nthe model saw:\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.server.describe()
        );
        let summary = json_of(&out);
        assert_eq!(summary["state"], "done", "{summary}");
        // Codex did the owner's turn once: the section is there once.
        let branch = summary["branch"].as_str().unwrap();
        let readme =
            gaffer_testkit::git::git(&self.bench.repo, &["show", &format!("{branch}:README.md")]);
        assert_eq!(readme.matches("## Installation").count(), 1, "{readme}");
        let id = summary["task_id"].as_str().unwrap().to_owned();
        let shown = json_of(
            &self
                .gaffer()
                .args(["task", "show", &id, "--json"])
                .output()
                .unwrap(),
        );
        let text = self.gaffer().args(["task", "show", &id]).output().unwrap();
        (shown, String::from_utf8_lossy(&text.stdout).into_owned())
    }

    /// The owner's requests: which API each went to.
    fn owner_apis(&self) -> Vec<&'static str> {
        self.server
            .requests_of("owner")
            .iter()
            .map(|r| {
                if r.uri.contains("/v1/messages") {
                    "claude"
                } else if r.uri.contains("/responses") {
                    "codex"
                } else {
                    "other"
                }
            })
            .collect()
    }
}

/// The only switch of `shown`: role, from, to, trigger, effects.
fn the_switch(shown: &Value) -> &Value {
    let switches = shown["switches"].as_array().expect("switches");
    assert_eq!(switches.len(), 1, "{shown}");
    let switch = &switches[0];
    assert_eq!(
        (
            &switch["role"],
            &switch["from"],
            &switch["to"],
            &switch["effects"]
        ),
        (
            &json!("owner"),
            &json!("claude"),
            &json!("codex"),
            &json!(false)
        ),
        "{shown}"
    );
    switch
}

#[test]
fn real_claude_out_on_a_long_429_hands_the_owner_to_real_codex() {
    let f = Fallback::new(
        vec![LlmReply {
            status: Some(429),
            retry_after: Some(3600),
            ..LlmReply::default()
        }],
        |c| c,
    );
    let (shown, text) = f.run();
    // Claude Code asked once and got the 429; Codex asked next, with the same role.
    assert_eq!(
        f.owner_apis(),
        ["claude", "codex", "codex"],
        "{}",
        f.server.describe()
    );
    assert_eq!(the_switch(&shown)["trigger"], "rate_limited", "{shown}");
    assert!(text.contains("fallbacks"), "{text}");
    assert!(
        text.contains("claude → codex  rate_limited: the turn ran again"),
        "{text}"
    );
    assert!(text.contains("429"), "{text}");
}

/// The API's usage-limit refusal, headers as Anthropic sends them, read by the real
/// Claude Code behind a Claude gateway (the login under which it reads them; see
/// [`CliHome::claude_gateway_login`]): its own "You've hit your 5-hour limit", its
/// `rate_limit_event`'s reset time, and the switch to Codex until then.
#[test]
fn real_claude_at_its_usage_limit_hands_the_owner_to_real_codex_until_the_reset() {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let resets_at = now + 3 * 3600;
    let f = Fallback::new(
        vec![usage_limit_reached("five_hour", resets_at, now)],
        CliHome::claude_gateway_login,
    );
    let (shown, text) = f.run();
    assert_eq!(
        f.owner_apis(),
        ["claude", "codex", "codex"],
        "{}",
        f.server.describe()
    );
    let claude = &f.server.requests_of("owner")[0];
    assert!(
        claude
            .header("authorization")
            .is_some_and(|a| a.starts_with("Bearer ")),
        "Claude Code logged in through the gateway: {:?}",
        claude.headers
    );
    let switch = the_switch(&shown);
    assert_eq!(switch["trigger"], "usage_limit", "{shown}");
    assert!(
        switch["detail"]
            .as_str()
            .unwrap()
            .contains("You've hit your 5-hour limit"),
        "{shown}"
    );
    // Out until the limit resets (three hours: later than the 15-minute cool-down),
    // as Claude Code's `rate_limit_event` said.
    let reset_ms = i64::try_from(resets_at * 1000).unwrap();
    assert_eq!(switch["until"].as_i64(), Some(reset_ms), "{shown}");
    assert!(
        text.contains("claude → codex  usage_limit: the turn ran again"),
        "{text}"
    );
}

/// The API overloaded (529) on every request: Claude Code retries as told
/// (`CLAUDE_CODE_MAX_RETRIES=1`), gives up, and Codex takes the turn over.
#[test]
fn real_claude_failing_on_a_lasting_overload_hands_the_owner_to_real_codex() {
    let overloaded = LlmReply {
        status: Some(529),
        ..LlmReply::default()
    };
    let f = Fallback::new(vec![overloaded.clone(), overloaded], |mut c| {
        c.env.insert("CLAUDE_CODE_MAX_RETRIES".into(), "1".into());
        c
    });
    let (shown, text) = f.run();
    // Claude Code's first try and its one retry, then Codex.
    assert_eq!(
        f.owner_apis(),
        ["claude", "claude", "codex", "codex"],
        "{}",
        f.server.describe()
    );
    let switch = the_switch(&shown);
    assert_eq!(switch["trigger"], "server_error", "{shown}");
    assert!(
        switch["detail"].as_str().unwrap().contains("529"),
        "{shown}"
    );
    assert!(
        text.contains("claude → codex  server_error: the turn ran again"),
        "{text}"
    );
}
