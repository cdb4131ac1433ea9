//! The kernel sandbox: agents that try to write where they may not are refused by
//! Landlock (not by a prompt or a tool flag), are told why, and nothing is written.
//!
//! These tests need a kernel with Landlock; on one without it they say so and check
//! that `required` refuses to start instead.

use std::path::Path;
use std::sync::Arc;

use gaffer_agents::claude::{ClaudeBackend, ClaudeConfig};
use gaffer_agents::sandbox::{self, Sandbox, SandboxMode, Support};
use gaffer_agents::tools::Worktree;
use gaffer_agents::{AgentBackend, AgentError, AllowAll, Mode, StartOptions};
use gaffer_testkit::bins::fake_bin;
use serde_json::json;

use super::support::*;

fn backend() -> ClaudeBackend {
    ClaudeBackend::new(ClaudeConfig {
        bin: Some(fake_bin("fake-claude")),
        ..Default::default()
    })
}

fn required() -> Sandbox {
    Sandbox {
        mode: SandboxMode::Required,
        network: true,
        ..Sandbox::default()
    }
}

/// An owner session of the fake Claude Code whose first turn writes `path` (relative to
/// the worktree or absolute), confined with `required`, `HOME` in the test dir.
fn owner_writing(env: &Env, path: &str, mode: Mode) -> StartOptions {
    env.set_scenario(&scenario(json!({"turns": [{"steps": [
        {"say": "writing"},
        {"write_file": {"path": path, "content": "pwned"}},
        {"say": "written"}
    ]}]})));
    let mut opts = env.opts(mode);
    opts.sandbox = env.required_sandbox();
    let home = env.dir.path().join("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    opts.env.insert("HOME".into(), home.display().to_string());
    opts
}

/// Run one turn; the agent must end it with an error that says the kernel refused and
/// what the sandbox allows.
async fn assert_refused(opts: StartOptions) {
    let ws = opts.workspace.display().to_string();
    let opts_mode = opts.mode;
    let mut s = backend().start(opts, Arc::new(AllowAll)).await.unwrap();
    let (_, r) = turn(s.as_mut(), "go").await;
    let message = match r {
        Err(e @ AgentError::ExitedMidTurn { .. }) => e.to_string(),
        other => panic!("the write should have been refused by the kernel, got {other:?}"),
    };
    assert!(message.contains("Permission denied"), "{message}");
    assert!(message.contains("sandbox (Landlock)"), "{message}");
    let may_write_worktree = opts_mode == Mode::ReadWrite;
    assert_eq!(
        message.contains(&ws),
        may_write_worktree,
        "the note names the worktree exactly when it is writable: {message}"
    );
}

fn landlock() -> bool {
    let s = sandbox::support();
    if !s.filesystem() {
        eprintln!("skipping the kernel part: {}", s.describe());
    }
    s.filesystem()
}

#[tokio::test]
async fn owner_writes_inside_its_worktree() {
    if !landlock() {
        return;
    }
    let env = Env::new(&Default::default());
    let opts = owner_writing(&env, "src/new.txt", Mode::ReadWrite);
    let mut s = backend().start(opts, Arc::new(AllowAll)).await.unwrap();
    let (_, r) = turn(s.as_mut(), "go").await;
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(
        std::fs::read_to_string(env.ws.join("src/new.txt")).unwrap(),
        "pwned"
    );
}

#[tokio::test]
async fn owner_writing_outside_its_worktree_is_refused_by_the_kernel() {
    if !landlock() {
        return;
    }
    let env = Env::new(&Default::default());
    let outside = env.dir.path().join("outside.txt");
    assert_refused(owner_writing(&env, "../outside.txt", Mode::ReadWrite)).await;
    assert!(!outside.exists());
}

#[tokio::test]
async fn owner_writing_to_home_ssh_is_refused_by_the_kernel() {
    if !landlock() {
        return;
    }
    let env = Env::new(&Default::default());
    let keys = env.dir.path().join("home/.ssh/authorized_keys");
    assert_refused(owner_writing(
        &env,
        &keys.display().to_string(),
        Mode::ReadWrite,
    ))
    .await;
    assert!(!keys.exists());
}

#[tokio::test]
async fn owner_writing_through_a_planted_symlink_is_refused_by_the_kernel() {
    if !landlock() {
        return;
    }
    let env = Env::new(&Default::default());
    let target = env.dir.path().join("elsewhere");
    std::fs::create_dir_all(&target).unwrap();
    std::os::unix::fs::symlink(&target, env.ws.join("escape")).unwrap();
    assert_refused(owner_writing(&env, "escape/pwned.txt", Mode::ReadWrite)).await;
    assert!(!target.join("pwned.txt").exists());
    assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0);
}

#[tokio::test]
async fn reviewer_editing_a_worktree_file_is_refused_and_the_file_is_unchanged() {
    if !landlock() {
        return;
    }
    let env = Env::new(&Default::default());
    std::fs::write(env.ws.join("lib.rs"), "fn main() {}\n").unwrap();
    let mut opts = owner_writing(&env, "lib.rs", Mode::ReadOnly);
    opts.role = "reviewer".into();
    assert_refused(opts).await;
    assert_eq!(
        std::fs::read_to_string(env.ws.join("lib.rs")).unwrap(),
        "fn main() {}\n"
    );
}

#[tokio::test]
async fn agent_state_dir_stays_writable_for_a_read_only_session() {
    if !landlock() {
        return;
    }
    // The reviewer may not touch the worktree, but Claude Code must still keep its
    // transcript (CLAUDE_CONFIG_DIR) or it could not be resumed.
    let env = Env::new(&scenario(
        json!({"turns": [{"steps": [{"say": "looks good"}]}]}),
    ));
    let mut opts = env.opts(Mode::ReadOnly);
    opts.sandbox = env.required_sandbox();
    let mut s = backend().start(opts, Arc::new(AllowAll)).await.unwrap();
    let (_, r) = turn(s.as_mut(), "review").await;
    assert!(r.is_ok(), "{r:?}");
    let transcripts = walk_files(&env.claude_home);
    assert!(
        transcripts.iter().any(|p| p.ends_with(".jsonl")),
        "{transcripts:?}"
    );
}

fn walk_files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk_files(&p));
        } else {
            out.push(p.display().to_string());
        }
    }
    out
}

fn run_tool_setup(mode: Mode, network: bool) -> (tempfile::TempDir, Worktree) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("wt");
    std::fs::create_dir_all(&root).unwrap();
    let wt = Worktree::new(&root, mode).unwrap().with_sandbox(Sandbox {
        network,
        ..required()
    });
    (tmp, wt)
}

#[tokio::test]
async fn run_tool_commands_write_only_inside_the_worktree() {
    if !landlock() {
        return;
    }
    let (tmp, wt) = run_tool_setup(Mode::ReadWrite, true);
    let inside = wt
        .execute(
            "run",
            &json!({"argv": ["sh", "-c", "echo hi > made.txt && echo tmp > \"$TMPDIR/t\""]}),
        )
        .await;
    assert!(!inside.is_error, "{}", inside.output);
    assert!(wt.root().join("made.txt").exists());
    let outside = wt
        .execute(
            "run",
            &json!({"argv": ["sh", "-c", "echo hi > ../escaped.txt"]}),
        )
        .await;
    assert!(outside.is_error);
    assert!(
        outside.output.contains("Permission denied"),
        "{}",
        outside.output
    );
    assert!(
        outside.output.contains("sandbox (Landlock)"),
        "{}",
        outside.output
    );
    assert!(!tmp.path().join("escaped.txt").exists());
}

#[tokio::test]
async fn network_off_blocks_tcp_connect_of_run_commands() {
    if !sandbox::support().network() {
        eprintln!("skipping: {}", sandbox::support().describe());
        return;
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // bash's /dev/tcp does a plain connect(2).
    let connect = json!({"argv": ["bash", "-c", format!("exec 3<>/dev/tcp/127.0.0.1/{port}")]});
    let (_t, on) = run_tool_setup(Mode::ReadWrite, true);
    let o = on.execute("run", &connect).await;
    assert!(!o.is_error, "with the network on it connects: {}", o.output);
    let (_t, off) = run_tool_setup(Mode::ReadWrite, false);
    let o = off.execute("run", &connect).await;
    assert!(o.is_error, "with the network off it must not connect");
    assert!(o.output.contains("Permission denied"), "{}", o.output);
    assert!(o.output.contains("network off"), "{}", o.output);
}

#[test]
fn required_refuses_without_landlock_and_auto_runs_unconfined() {
    let none = Support { abi: None };
    let v3 = Support { abi: Some(3) };
    let v7 = Support { abi: Some(7) };
    let check = |mode, network, s| sandbox::decide(mode, network, s);
    let refused = check(SandboxMode::Required, true, none).unwrap_err();
    assert!(refused.contains("required"), "{refused}");
    assert!(refused.contains("Landlock"), "{refused}");
    assert_eq!(check(SandboxMode::Auto, true, none), Ok(false));
    assert_eq!(check(SandboxMode::Off, true, v7), Ok(false));
    assert_eq!(check(SandboxMode::Auto, true, v7), Ok(true));
    assert_eq!(check(SandboxMode::Required, true, v3), Ok(true));
    let no_net = check(SandboxMode::Required, false, v3).unwrap_err();
    assert!(no_net.contains("network"), "{no_net}");
    assert_eq!(check(SandboxMode::Required, false, v7), Ok(true));
    assert_eq!(check(SandboxMode::Auto, false, v3), Ok(true));
}

#[test]
fn an_npm_cli_may_read_its_whole_node_modules_for_vendored_binaries_in_sibling_packages() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let modules = root.join("install/node_modules");
    let package = modules.join("@openai/codex");
    std::fs::create_dir_all(package.join("bin")).unwrap();
    std::fs::create_dir_all(modules.join("@openai/codex-linux-x64/vendor")).unwrap();
    std::fs::write(package.join("package.json"), "{}").unwrap();
    std::fs::write(package.join("bin/codex.js"), "").unwrap();
    let bin = modules.join(".bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(package.join("bin/codex.js"), bin.join("codex")).unwrap();
    let s = Sandbox::default();
    assert_eq!(
        sandbox::install_root(&bin.join("codex"), &s),
        Some(modules.clone())
    );
    // Not an npm package: its own directory.
    let plain = root.join("tools/bin");
    std::fs::create_dir_all(&plain).unwrap();
    std::fs::write(plain.join("agent"), "").unwrap();
    assert_eq!(sandbox::install_root(&plain.join("agent"), &s), Some(plain));
}

/// A dir named as a private temp dir (`gaffer-<agent>-<uuid>`) in `parent`, with a
/// file in it, last modified `age` ago.
fn temp_dir_named(parent: &Path, name: &str, age: std::time::Duration) -> std::path::PathBuf {
    let dir = parent.join(name);
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("scratch"), "left behind").unwrap();
    backdate(&dir, age);
    dir
}

fn backdate(path: &Path, age: std::time::Duration) {
    std::fs::File::open(path)
        .unwrap()
        .set_modified(std::time::SystemTime::now() - age)
        .unwrap();
}

fn private_name(agent: &str) -> String {
    format!("gaffer-{agent}-{}", uuid::Uuid::new_v4().simple())
}

#[test]
fn temp_dirs_of_dead_processes_are_removed_and_live_young_or_foreign_ones_kept() {
    use std::os::unix::process::CommandExt;
    let tmp = tempfile::tempdir().unwrap();
    let hour = std::time::Duration::from_secs(3600);
    let grace = std::time::Duration::from_secs(60);
    let dead = temp_dir_named(tmp.path(), &private_name("claude"), hour);
    let young = temp_dir_named(
        tmp.path(),
        &private_name("claude"),
        std::time::Duration::ZERO,
    );
    let live = temp_dir_named(tmp.path(), &private_name("codex"), hour);
    // Other `gaffer-…` entries of a temp dir (a test PostgreSQL's, say) are not ours.
    let foreign = temp_dir_named(tmp.path(), "gaffer-postgres-test-server", hour);
    let short = temp_dir_named(tmp.path(), "gaffer-claude-0123abcd", hour);
    // A symlink with a private temp dir's name is never followed.
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("keep"), "mine").unwrap();
    let link = tmp.path().join(private_name("claude"));
    std::os::unix::fs::symlink(outside.path(), &link).unwrap();

    // The process that owns `live` holds its lock, as a gaffer process does for its
    // agents' dirs (and its child, as a supervisor does); then both are killed with
    // SIGKILL.
    let mut owner = std::process::Command::new("flock")
        .arg("--nonblock")
        .arg(&live)
        .args(["sleep", "600"])
        .process_group(0)
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::fs::File::open(&live).unwrap().try_lock().is_ok() {
        assert!(
            std::time::Instant::now() < deadline,
            "flock never took the lock"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }

    assert_eq!(sandbox::remove_dead_temp_dirs_in(tmp.path(), grace), 1);
    assert!(!dead.exists(), "the dead process's dir is left");
    for kept in [&young, &live, &foreign, &short] {
        assert!(
            kept.join("scratch").exists(),
            "{} was removed",
            kept.display()
        );
    }
    assert!(link.symlink_metadata().is_ok() && outside.path().join("keep").exists());

    // SIGKILL: nothing of the owner runs any cleanup.
    let group = format!("-{}", owner.id());
    let killed = std::process::Command::new("kill")
        .args(["-KILL", "--", &group])
        .status()
        .unwrap();
    assert!(killed.success());
    owner.wait().unwrap();
    // `flock` is reaped, but its killed child (which shares the lock) may still be
    // exiting: the lock goes when the last of them has.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::fs::File::open(&live).unwrap().try_lock().is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "the killed group still holds the lock"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(sandbox::remove_dead_temp_dirs_in(tmp.path(), grace), 1);
    assert!(!live.exists(), "the killed process's dir is left");
    assert!(young.exists() && foreign.exists() && short.exists());
    assert!(outside.path().join("keep").exists());
}
