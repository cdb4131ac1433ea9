//! `gaffer run` end to end with the real agent CLIs (Claude Code, Codex, Gemini CLI from
//! npm, `scripts/agent-clis/install`) against the testkit's scripted model server: the
//! plan, the owner's edit through the CLI's own edit tool, a command approved through
//! gaffer and one denied (and the agent told), the read-only reviewer refused a write,
//! the arbiter's ruling, the check, tokens and cost.
use super::run::README_DONE;
use super::support::{never, per_cli, plan_reply, RealRun, DENY_NOTE};
use gaffer_testkit::clis::Cli;
use gaffer_testkit::model::{call, say, ModelScript};
use gaffer_testkit::scenario::LlmReply;
use serde_json::json;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The owner's edit of README.md through the CLI's own edit tool.
fn owner_edit(cli: Cli) -> Vec<LlmReply> {
    match cli {
        Cli::Claude => vec![
            call("Read", json!({"file_path": "README.md"})),
            call(
                "Edit",
                json!({"file_path": "README.md", "old_string": "A demo project.\n", "new_string": "A demo project.\n\n## Installation\n\n    cargo install demo\n"}),
            ),
        ],
        Cli::Codex => vec![call(
            "exec_command",
            json!({"cmd": "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: README.md\n@@\n A demo project.\n+\n+## Installation\n+\n+    cargo install demo\n*** End Patch\nEOF\n"}),
        )],
        Cli::Gemini => vec![call(
            "write_file",
            json!({"file_path": "README.md", "content": README_DONE}),
        )],
    }
}

/// The reviewer's answer that the work is done.
fn verdict_done() -> LlmReply {
    say("```json\n{\"verdict\":\"done\"}\n```")
}

/// The model's part: each role in the CLI's own tool names.
fn script(cli: Cli) -> ModelScript {
    let (approved, denied, reviewer_write) = match cli {
        Cli::Claude => (
            call("Bash", json!({"command": "touch checked.txt"})),
            call("Bash", json!({"command": "rm -rf build"})),
            call("Write", json!({"file_path": "pwned.txt", "content": "x"})),
        ),
        Cli::Codex => (
            call("exec_command", json!({"cmd": "touch checked.txt"})),
            call("exec_command", json!({"cmd": "rm -rf build"})),
            call("exec_command", json!({"cmd": "touch pwned.txt"})),
        ),
        Cli::Gemini => (
            call("run_shell_command", json!({"command": "touch checked.txt"})),
            call("run_shell_command", json!({"command": "rm -rf build"})),
            call(
                "write_file",
                json!({"file_path": "pwned.txt", "content": "x"}),
            ),
        ),
    };
    let mut owner = owner_edit(cli);
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

fn end_to_end(cli: Cli) {
    let r = RealRun::new(cli, script(cli));
    let (summary, decided) = r.finish(r.start(&[]));
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
    // Claude Code prices its own turns; Codex's and Gemini CLI's tokens are priced
    // at their model's list price.
    assert!(
        summary["cost_usd"].as_f64().is_some_and(|c| c > 0.0),
        "{summary}"
    );
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

per_cli!(end_to_end: real_claude_runs_a_task_end_to_end, real_codex_runs_a_task_end_to_end, real_gemini_runs_a_task_end_to_end);

/// Real Codex inside gaffer's sandbox (Landlock, `mode = "required"`): the commands it
/// runs succeed the first time (Codex's own bubblewrap sandbox cannot start inside a
/// Landlock domain, so a command it sandboxed failed and Codex asked again to run it
/// unsandboxed: two approvals for one command), and stay confined by gaffer's layer: a
/// write outside the worktree is refused and Codex's model is told it was gaffer's
/// sandbox.
#[test]
fn real_codex_runs_its_commands_inside_gaffers_sandbox() {
    if !gaffer_agents::sandbox::support().filesystem() {
        eprintln!("skipping: {}", gaffer_agents::sandbox::support().describe());
        return;
    }
    let outside = tempfile::tempdir().unwrap();
    let escape = outside.path().join("escaped.txt");
    let owner = vec![
        // A reading command Codex runs without asking, in its own sandbox when it can.
        call("exec_command", json!({"cmd": "cat Makefile"})),
        call(
            "exec_command",
            json!({"cmd": "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: README.md\n@@\n A demo project.\n+\n+## Installation\n+\n+    cargo install demo\n*** End Patch\nEOF\n"}),
        ),
        call("exec_command", json!({"cmd": "touch checked.txt"})),
        call(
            "exec_command",
            json!({"cmd": format!("touch {}", escape.display())}),
        ),
        say("Added the installation section."),
    ];
    let script = ModelScript::new()
        .role("planner", vec![plan_reply()])
        .role("owner", owner)
        .role("reviewer", vec![verdict_done()]);
    let r = RealRun::new(Cli::Codex, script);
    r.bench.home.write_config(&format!(
        "[sandbox]\nmode = \"required\"\n{}",
        std::fs::read_to_string(r.bench.home.config()).unwrap()
    ));
    let (summary, decided) = r.finish(r.start(&[]));
    let s = &r.server;
    assert_eq!(summary["state"], "done", "{summary}\n{}", s.describe());
    let asked = |what: &str| {
        decided
            .iter()
            .filter(|a| a["summary"].as_str().unwrap_or_default().contains(what))
            .count()
    };
    assert_eq!(
        asked("touch checked.txt"),
        1,
        "asked again to run it unsandboxed: {decided:#?}"
    );
    assert_eq!(
        asked("README.md"),
        1,
        "the patch was asked for once: {decided:#?}"
    );
    let branch = summary["branch"].as_str().unwrap();
    let files = gaffer_testkit::git::git(&r.bench.repo, &["ls-tree", "--name-only", "-r", branch]);
    assert!(files.contains("checked.txt"), "{files}");
    assert!(!escape.exists(), "a command wrote outside the worktree");
    let seen: String = s
        .requests_of("owner")
        .iter()
        .map(|q| q.body.to_string())
        .collect();
    assert!(
        !seen.contains("bwrap"),
        "a command failed in Codex's own sandbox:\n{seen}"
    );
    assert!(
        seen.contains(&format!(
            "touch: cannot touch '{}': Permission denied",
            escape.display()
        )),
        "the refusal did not reach the model:\n{seen}"
    );
    assert!(
        seen.contains("sleep 0.2; grep -q"),
        "`cat Makefile` did not run:\n{seen}"
    );
    assert!(
        seen.contains("gaffer's sandbox"),
        "the model was not told gaffer's sandbox refused the write:\n{seen}"
    );
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
    let r = RealRun::new(
        cli,
        ModelScript::new()
            .role("planner", vec![plan_reply()])
            .role("owner", vec![never()]),
    );
    let mut child = r.start(&["--yes"]);
    r.wait_for("owner", &mut child, 1);
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

per_cli!(ctrl_c_leaves_no_process: real_claude_ctrl_c_leaves_no_process, real_codex_ctrl_c_leaves_no_process, real_gemini_ctrl_c_leaves_no_process);

/// SIGKILL gaffer while the owner's CLI waits on the model, in the middle of a turn that
/// already edited README.md through the CLI's own tool; `gaffer task resume`, a person
/// approves running the turn again, and the CLI goes on in the same conversation (Claude
/// Code `--resume`, Codex `thread/resume`, Gemini CLI `session/load`): its next request
/// to the model carries the edit it made before the crash, and the task is done.
fn crash_resumes_the_interrupted_session(cli: Cli) {
    let mut owner = owner_edit(cli);
    let before = owner.len();
    owner.extend([never(), say("Went on after the crash.")]);
    let r = RealRun::new(
        cli,
        ModelScript::new()
            .role("planner", vec![plan_reply()])
            .role("owner", owner)
            .role("reviewer", vec![verdict_done()]),
    );
    let mut child = r.start(&["--yes"]);
    r.wait_for("owner", &mut child, before + 1);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let tasks = r.json(&["task", "list", "--json"]);
    let id = tasks[0]["id"].as_str().unwrap().to_owned();
    let resume = r
        .gaffer()
        .args(["task", "resume", &id, "--json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (summary, decided) = r.finish(resume);
    assert_eq!(summary["state"], "done", "{summary}");
    // The person was asked, and told the turn goes on in the same conversation.
    let asked: Vec<&str> = decided
        .iter()
        .map(|a| a["summary"].as_str().unwrap_or_default())
        .collect();
    let same = format!("in the same {} conversation", cli.agent());
    assert!(
        asked
            .iter()
            .any(|q| q.contains("interrupted by a crash") && q.contains(&same)),
        "{asked:#?}"
    );
    // The request the resumed CLI sent carries what it did before the crash; the one
    // the crash cut short was never answered.
    let owner = r.server.requests_of("owner");
    assert_eq!(owner.len(), before + 2, "{}", r.server.describe());
    let after = owner[before + 1].body.to_string();
    assert!(
        after.contains("cargo install demo"),
        "the resumed turn is not the interrupted conversation:\n{after}"
    );
    // The README the CLI edited before the crash is what was committed.
    let branch = summary["branch"].as_str().unwrap();
    let readme = gaffer_testkit::git::git(&r.bench.repo, &["show", &format!("{branch}:README.md")]);
    assert!(readme.contains("## Installation"), "{readme}");
}

per_cli!(crash_resumes_the_interrupted_session: real_claude_resumes_the_interrupted_session_after_a_crash, real_codex_resumes_the_interrupted_session_after_a_crash, real_gemini_resumes_the_interrupted_session_after_a_crash);
