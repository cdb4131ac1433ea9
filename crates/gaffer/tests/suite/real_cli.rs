//! `gaffer run` end to end with the real agent CLIs (Claude Code, Codex, Gemini CLI from
//! npm, `scripts/agent-clis/install`) against the testkit's scripted model server: the
//! plan, the owner's edit through the CLI's own edit tool, a command approved through
//! gaffer and one denied (and the agent told), the read-only reviewer refused a write,
//! the arbiter's ruling, the check, tokens and cost.
use super::run::{json_of, Bench, README_DONE};
use gaffer_testkit::clis::{Cli, CliHome};
use gaffer_testkit::model::{call, say, ModelScript, ModelServer};
use gaffer_testkit::scenario::LlmReply;
use serde_json::{json, Value};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What the owner is told when its `rm -rf build` is denied.
const DENY_NOTE: &str = "never delete the build dir";

fn plan_reply() -> LlmReply {
    let plan = json!({ "subtasks": [{ "title": "Add an installation section", "description": "write it", "files": ["README.md"], "acceptance": "README has ## Installation" }] });
    say(&format!("Here is the plan.\n```json\n{plan}\n```"))
}

/// The model's part: each role in the CLI's own tool names.
fn script(cli: Cli) -> ModelScript {
    let (edit, approved, denied, reviewer_write) = match cli {
        Cli::Claude => (
            vec![
                call("Read", json!({"file_path": "README.md"})),
                call(
                    "Edit",
                    json!({"file_path": "README.md", "old_string": "A demo project.\n", "new_string": "A demo project.\n\n## Installation\n\n    cargo install demo\n"}),
                ),
            ],
            call("Bash", json!({"command": "touch checked.txt"})),
            call("Bash", json!({"command": "rm -rf build"})),
            call("Write", json!({"file_path": "pwned.txt", "content": "x"})),
        ),
        Cli::Codex => (
            vec![call(
                "exec_command",
                json!({"cmd": "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: README.md\n@@\n A demo project.\n+\n+## Installation\n+\n+    cargo install demo\n*** End Patch\nEOF\n"}),
            )],
            call("exec_command", json!({"cmd": "touch checked.txt"})),
            call("exec_command", json!({"cmd": "rm -rf build"})),
            call("exec_command", json!({"cmd": "touch pwned.txt"})),
        ),
        Cli::Gemini => (
            vec![call(
                "write_file",
                json!({"file_path": "README.md", "content": README_DONE}),
            )],
            call("run_shell_command", json!({"command": "touch checked.txt"})),
            call("run_shell_command", json!({"command": "rm -rf build"})),
            call(
                "write_file",
                json!({"file_path": "pwned.txt", "content": "x"}),
            ),
        ),
    };
    let mut owner = edit;
    owner.extend([approved, denied, say("Added the installation section.")]);
    ModelScript::new()
        .role("planner", vec![plan_reply()])
        .role("owner", owner)
        .role(
            "reviewer",
            vec![
                reviewer_write,
                say("```json\n{\"verdict\":\"changes_requested\",\"feedback\":\"mention the MSRV\"}\n```"),
            ],
        )
        .role(
            "arbiter",
            vec![say(
                "The section is enough.\n```json\n{\"ruling\":\"proceed\",\"instructions\":\"\",\"reason\":\"good enough\"}\n```",
            )],
        )
}

/// A fixture repository and a gaffer home (review goes to the arbiter after one round
/// of changes), the CLI's own home pointed at the model server.
struct RealRun {
    bench: Bench,
    cli: CliHome,
    server: ModelServer,
    _rt: tokio::runtime::Runtime,
}

impl RealRun {
    fn new(cli: Cli) -> RealRun {
        Self::with_script(cli, script(cli))
    }

    fn with_script(cli: Cli, script: ModelScript) -> RealRun {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let server = rt.block_on(ModelServer::start(script)).unwrap();
        let bench = Bench::new();
        bench.home.write_config("[review]\nrounds = 1\n");
        let cli = CliHome::new(cli, &server, model(cli)).unwrap();
        RealRun {
            bench,
            cli,
            server,
            _rt: rt,
        }
    }

    /// `gaffer` with only PATH, the CLI's home and what points it at the server.
    fn gaffer(&self) -> Command {
        let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("gaffer"));
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("GAFFER_CONFIG", self.bench.home.config())
            .env("GAFFER_DATA_DIR", self.bench.home.data())
            .env("USER", "tester")
            .env(self.cli.cli.bin_env(), self.cli.cli.bin())
            .envs(&self.cli.env);
        cmd
    }

    fn json(&self, args: &[&str]) -> Value {
        json_of(&self.gaffer().args(args).output().unwrap())
    }

    /// Run the request, deciding every approval as a person would from another
    /// terminal: approve, except `rm -rf` (denied with [`DENY_NOTE`]).
    fn run(&self) -> (Value, Vec<Value>) {
        let mut child = self
            .gaffer()
            .args(["run", "Add an installation section to README", "--repo"])
            .arg(&self.bench.repo)
            .args(["--json", "--agent", self.cli.cli.agent()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let started = Instant::now();
        let mut decided = Vec::new();
        loop {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(240),
                "gaffer run did not finish; the model saw:\n{}",
                self.server.describe()
            );
            let pending = self.json(&["approvals", "--json"]);
            for a in pending.as_array().cloned().unwrap_or_default() {
                let id = a["id"].as_str().unwrap().to_owned();
                let text = a.to_string();
                let out = if text.contains("rm -rf") {
                    self.gaffer()
                        .args(["deny", &id, "--note", DENY_NOTE])
                        .output()
                } else {
                    self.gaffer().args(["approve", &id]).output()
                }
                .unwrap();
                assert!(
                    out.status.success(),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
                decided.push(a);
            }
            std::thread::sleep(Duration::from_millis(300));
        }
        let out = child.wait_with_output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}\nthe model saw:\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.server.describe()
        );
        (json_of(&out), decided)
    }
}

/// Models each CLI knows, so it offers the tools it offers its users.
fn model(cli: Cli) -> &'static str {
    match cli {
        Cli::Claude => "claude-sonnet-4-5",
        Cli::Codex => "gpt-5-codex",
        Cli::Gemini => "gemini-2.5-pro",
    }
}

fn end_to_end(cli: Cli) {
    let r = RealRun::new(cli);
    let (summary, decided) = r.run();
    let s = &r.server;
    assert!(
        s.failures().is_empty(),
        "{:?}\n{}",
        s.failures(),
        s.describe()
    );
    assert!(
        s.strays().is_empty(),
        "reached past the model: {:?}",
        s.strays()
    );
    assert_eq!(summary["state"], "done", "{summary}");
    // Every role spoke to the model through the CLI, in order.
    for role in ["planner", "owner", "reviewer", "arbiter"] {
        assert!(
            s.played(role) > 0,
            "{role} never asked the model:\n{}",
            s.describe()
        );
    }
    // The owner's edit, through the CLI's own edit tool, is on the branch.
    let branch = summary["branch"].as_str().unwrap();
    let readme = gaffer_testkit::git::git(&r.bench.repo, &["show", &format!("{branch}:README.md")]);
    assert!(readme.contains("## Installation"), "{readme}");
    // The approved command ran; the denied one did not, and the agent was told.
    let files = gaffer_testkit::git::git(&r.bench.repo, &["ls-tree", "--name-only", "-r", branch]);
    assert!(files.contains("checked.txt"), "{files}");
    let commands: Vec<String> = decided
        .iter()
        .map(|a| a["summary"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert!(
        commands.iter().any(|c| c.contains("touch checked.txt")),
        "the approval names the command: {commands:#?}"
    );
    assert!(
        commands.iter().any(|c| c.contains("rm -rf build")),
        "{commands:#?}"
    );
    let owner = s.requests_of("owner");
    let after_denial = owner.last().unwrap().body.to_string();
    assert!(
        after_denial.contains("rm -rf build") && denial_told(cli, &after_denial),
        "the owner's model was not told of the denial:\n{after_denial}"
    );
    // The reviewer's write was refused: it is nowhere in the task's commits.
    assert!(!files.contains("pwned.txt"), "{files}");
    assert_eq!(s.played("reviewer"), 2, "{}", s.describe());
    // Tokens and cost were recorded for the task.
    assert!(
        summary["tokens"]["input"].as_u64().unwrap_or(0) > 0
            && summary["tokens"]["output"].as_u64().unwrap_or(0) > 0,
        "{summary}"
    );
    assert!(summary["cost_usd"].is_number(), "{summary}");
    if cli == Cli::Claude {
        // Claude Code prices its own turns; Codex and Gemini CLI report tokens only.
        assert!(summary["cost_usd"].as_f64().unwrap() > 0.0, "{summary}");
    }
}

/// How each CLI tells its model that a call was refused.
fn denial_told(cli: Cli, body: &str) -> bool {
    match cli {
        Cli::Claude => body.contains(DENY_NOTE),
        Cli::Codex | Cli::Gemini => {
            let lower = body.to_lowercase();
            lower.contains("reject")
                || lower.contains("denied")
                || lower.contains("cancel")
                || lower.contains("declin")
        }
    }
}

#[test]
fn real_claude_runs_a_task_end_to_end() {
    end_to_end(Cli::Claude);
}

#[test]
fn real_codex_runs_a_task_end_to_end() {
    end_to_end(Cli::Codex);
}

#[test]
fn real_gemini_runs_a_task_end_to_end() {
    end_to_end(Cli::Gemini);
}

/// Processes still running with this CLI home as their `HOME`: what a run left behind.
fn processes_of(home: &std::path::Path) -> Vec<String> {
    let needle = format!("HOME={}", home.display());
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let pid = entry.file_name().to_string_lossy().into_owned();
        if !pid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if environ.split(|b| *b == 0).any(|v| v == needle.as_bytes()) {
            let cmd = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            found.push(format!(
                "{pid}: {}",
                String::from_utf8_lossy(&cmd).replace('\0', " ")
            ));
        }
    }
    found
}

/// Ctrl-C while the owner's CLI waits on the model: gaffer stops and leaves none of the
/// CLI's processes running.
fn ctrl_c_leaves_no_process(cli: Cli) {
    let slow = LlmReply {
        delay_ms: Some(120_000),
        ..say("too late")
    };
    let r = RealRun::with_script(
        cli,
        ModelScript::new()
            .role("planner", vec![plan_reply()])
            .role("owner", vec![slow]),
    );
    let mut child = r
        .gaffer()
        .args(["run", "Add an installation section to README", "--repo"])
        .arg(&r.bench.repo)
        .args(["--yes", "--json", "--agent", r.cli.cli.agent()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while r.server.played("owner") == 0 {
        assert!(
            child.try_wait().unwrap().is_none(),
            "gaffer ended before the owner's turn:\n{}",
            r.server.describe()
        );
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "{}",
            r.server.describe()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        !processes_of(&r.cli.home).is_empty(),
        "the owner's CLI should be running"
    );
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let out = child.wait_with_output().unwrap();
    // (The exit status of an interrupted run is the CLI's business: not asserted here.)
    assert!(
        !out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Give a killed process's parent a moment to reap it.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut left = processes_of(&r.cli.home);
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        left = processes_of(&r.cli.home);
    }
    assert!(left.is_empty(), "Ctrl-C left these running: {left:#?}");
}

#[test]
fn real_claude_ctrl_c_leaves_no_process() {
    ctrl_c_leaves_no_process(Cli::Claude);
}

#[test]
fn real_codex_ctrl_c_leaves_no_process() {
    ctrl_c_leaves_no_process(Cli::Codex);
}

#[test]
fn real_gemini_ctrl_c_leaves_no_process() {
    ctrl_c_leaves_no_process(Cli::Gemini);
}
