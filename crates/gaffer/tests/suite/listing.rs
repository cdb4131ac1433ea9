//! Lists and details as people read them: short ids that any unique start of the
//! id names, project names, columns that fit the width, a task's outcome, plan,
//! verdicts and steps as text (insta snapshots), and output that survives a
//! closed pipe.

use super::support::{Home, DONE_TASK, PLAN_APPROVAL};
use std::process::{Command, Stdio};

/// The command's stdout, after checking it exited 0.
fn stdout_of(cmd: &mut assert_cmd::Command) -> String {
    let out = cmd.output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Snapshot settings: ages change with the clock.
fn settings() -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.add_filter(r"\b\d+[smhd] ago", "[age] ago");
    s.set_prepend_module_to_snapshot(false);
    s
}

#[test]
fn task_list_shows_short_ids_project_names_and_fits_the_width() {
    let home = Home::new();
    home.seed_finished();
    let text = stdout_of(home.gaffer().env("COLUMNS", "80").args(["task", "list"]));
    settings().bind(|| insta::assert_snapshot!("task_list", text));
    assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
}

#[test]
fn task_show_renders_the_outcome_plan_verdicts_and_steps() {
    let home = Home::new();
    home.seed_finished();
    let done = stdout_of(home.gaffer().args(["task", "show", "t-019a2b3c4d5e"]));
    let failed = stdout_of(home.gaffer().args(["task", "show", "019a2b3c4d5f"]));
    let approval = stdout_of(home.gaffer().args(["approval", "show", "ap-019a"]));
    settings().bind(|| {
        insta::assert_snapshot!("task_show_done", done);
        insta::assert_snapshot!("task_show_failed", failed);
        insta::assert_snapshot!("approval_show", approval);
    });
    // What the request and the agent said is shown, escaped; nothing raw.
    assert!(
        failed.contains("Fix the flaky retry test\\x1b]0;pwned\\x07 and"),
        "{failed}"
    );
    assert!(!failed.contains('\x1b'), "{failed}");
}

#[test]
fn any_unique_start_of_an_id_names_it_and_an_ambiguous_one_is_refused() {
    let home = Home::new();
    home.seed_finished();
    for given in [DONE_TASK, "t-019a2b3c4d5e", "019a2b3c4d5e7"] {
        let text = stdout_of(home.gaffer().args(["task", "show", given]));
        assert!(
            text.starts_with(&format!("task     t-019a2b3c4d5e ({DONE_TASK})")),
            "{given}: {text}"
        );
    }
    let out = home
        .gaffer()
        .args(["task", "show", "t-019a"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("t-019a2b3c4d5e, t-019a2b3c4d5f"), "{err}");
    let out = home
        .gaffer()
        .args(["task", "show", "t-02"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("gaffer task list"));
    // Every command that takes an id: cancel, retry, audit, approval show.
    let retried = stdout_of(home.gaffer().args(["task", "retry", "019a2b3c4d5f"]));
    assert!(retried.starts_with("queued again as task t-"), "{retried}");
    let audit = stdout_of(home.gaffer().args(["audit", "--task", "t-019a2b3c4d5e"]));
    assert!(
        audit.contains(PLAN_APPROVAL) && audit.contains("looks right"),
        "{audit}"
    );
    let approval = stdout_of(
        home.gaffer()
            .args(["approval", "show", "019a2b3c4d60", "--json"]),
    );
    assert!(
        approval.contains(&format!("\"id\": \"{PLAN_APPROVAL}\"")),
        "{approval}"
    );
}

#[test]
fn task_list_filters_by_project_name_and_refuses_an_unknown_one() {
    let home = Home::new();
    home.seed_finished();
    let text =
        stdout_of(
            home.gaffer()
                .args(["task", "list", "--project", "demo", "--stage", "failed"]),
        );
    assert!(
        text.contains("t-019a2b3c4d5f") && !text.contains("t-019a2b3c4d5e"),
        "{text}"
    );
    let out = home
        .gaffer()
        .args(["task", "list", "--project", "nope"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no project `nope`"));
    let out = home
        .gaffer()
        .args(["task", "list", "--stage", "finished"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// `gaffer ARGS | READER` with the real binary, the shell reporting the first
/// failure of the pipe: exit code, stdout, stderr.
pub fn piped(home: &Home, args: &str, reader: &str) -> (i32, String, String) {
    let bin = assert_cmd::cargo::cargo_bin("gaffer");
    let out = Command::new("bash")
        .args([
            "-c",
            &format!("set -o pipefail; '{}' {args} | {reader}", bin.display()),
        ])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home.dir.path())
        .env("GAFFER_CONFIG", home.config())
        .env("GAFFER_DATA_DIR", home.data())
        // An agent, so that the doctor finds nothing to fix.
        .env("GAFFER_CLAUDE_BIN", "/bin/true")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `| head -1` takes the first line; `| true` closes the pipe before gaffer writes
/// anything, so every write meets a closed pipe. Either way the command ends
/// quietly (exit 0, or 141 if the shell reports SIGPIPE), never with a panic.
#[test]
fn commands_piped_into_head_end_quietly() {
    let home = Home::new();
    home.seed_finished();
    for args in [
        "task list",
        "doctor",
        "approvals --all",
        "task show t-019a2b3c4d5e",
        "man",
    ] {
        for reader in ["head -1", "true"] {
            let (code, out, err) = piped(&home, args, reader);
            assert!(
                matches!(code, 0 | 141),
                "{args} | {reader}: exit {code}: {err}"
            );
            assert!(
                !err.contains("panicked") && !err.contains("Broken pipe"),
                "{args} | {reader}: {err}"
            );
            let lines = if reader == "true" { 0 } else { 1 };
            assert_eq!(out.lines().count(), lines, "{args} | {reader}: {out}");
        }
    }
}
