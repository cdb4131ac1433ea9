use gaffer_forge::*;
use pretty_assertions::assert_eq;
use std::path::Path;
use std::process::Command;

fn sh(dir: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .status()
        .unwrap()
        .success();
    assert!(ok, "git {args:?}");
}

fn fixture() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    sh(dir.path(), &["init", "-q", "-b", "main"]);
    std::fs::write(dir.path().join("README.md"), "# demo\n").unwrap();
    sh(dir.path(), &["add", "."]);
    sh(dir.path(), &["commit", "-q", "-m", "init"]);
    dir
}

#[test]
fn open_finds_the_root_from_a_subdirectory_and_refuses_non_repos() {
    let repo = fixture();
    std::fs::create_dir(repo.path().join("sub")).unwrap();
    let r = Repo::open(&repo.path().join("sub/..//sub")).unwrap();
    assert_eq!(r.root(), std::fs::canonicalize(repo.path()).unwrap());
    let plain = tempfile::tempdir().unwrap();
    let err = Repo::open(plain.path()).unwrap_err();
    assert!(matches!(err, ForgeError::NotARepo { .. }), "{err}");
    assert!(Repo::open(Path::new("/definitely/not/here")).is_err());
}

#[test]
fn default_branch_and_dirty_check() {
    let repo = fixture();
    let r = Repo::open(repo.path()).unwrap();
    assert_eq!(r.default_branch().unwrap(), "main");
    r.ensure_clean("main").unwrap();
    std::fs::write(repo.path().join("untracked.txt"), "x").unwrap();
    r.ensure_clean("main").unwrap();
    std::fs::write(repo.path().join("README.md"), "# changed\n").unwrap();
    let err = r.ensure_clean("main").unwrap_err();
    assert!(err.to_string().contains("uncommitted changes"), "{err}");
}

#[test]
fn worktrees_are_idempotent_and_commits_happen_once_per_step() {
    let repo = fixture();
    let data = tempfile::tempdir().unwrap();
    let r = Repo::open(repo.path()).unwrap();
    let dir = data.path().join("wt/t-1");
    let wt = r
        .ensure_worktree(&dir, "gaffer/t-1-readme", "main")
        .unwrap();
    std::fs::write(wt.path.join("INSTALL.md"), "cargo install gaffer\n").unwrap();
    let first = wt
        .commit_step("docs: installation", "t-1/commit/1")
        .unwrap();
    assert!(first.created);
    // After a crash the step runs again: the same commit, nothing new.
    let again = r
        .ensure_worktree(&dir, "gaffer/t-1-readme", "main")
        .unwrap();
    let second = again
        .commit_step("docs: installation", "t-1/commit/1")
        .unwrap();
    assert_eq!(
        second,
        CommitOutcome {
            sha: first.sha.clone(),
            created: false
        }
    );
    assert_eq!(again.commits().unwrap().len(), 1);
    assert_eq!(again.changed_files().unwrap(), ["INSTALL.md"]);
    assert!(again.diff().unwrap().contains("+cargo install gaffer"));
    // A different step makes its own commit.
    std::fs::write(
        wt.path.join("INSTALL.md"),
        "cargo install --locked gaffer\n",
    )
    .unwrap();
    let third = wt.commit_step("docs: --locked", "t-1/commit/2").unwrap();
    assert!(third.created);
    assert_eq!(
        wt.find_step_commit("t-1/commit/1").unwrap(),
        Some(first.sha)
    );
    assert_eq!(wt.commits().unwrap().len(), 2);
    // The main work tree is untouched.
    assert!(!repo.path().join("INSTALL.md").exists());
    r.remove_worktree(&dir).unwrap();
    assert!(!dir.exists());
}

#[test]
fn an_unknown_base_is_a_clear_error() {
    let repo = fixture();
    let r = Repo::open(repo.path()).unwrap();
    let err = r
        .ensure_worktree(&repo.path().join("../wt-x"), "gaffer/x", "nope")
        .unwrap_err();
    assert!(err.to_string().contains("`nope` does not exist"), "{err}");
}

#[test]
fn slugs_are_branch_safe() {
    assert_eq!(
        slug("Add an installation section to README!"),
        "add-an-installation-section-to-readme"
    );
    assert_eq!(slug("   ***   "), "task");
    assert!(slug(&"word ".repeat(40)).len() <= 40);
}

/// A worker whose lease lapsed may still be finishing a git command in the
/// worktree when the next worker runs the same step: git's lock is waited for, not
/// taken for a failure, and the step still makes its one commit.
#[test]
fn a_commit_waits_for_a_git_lock_another_process_holds_then_commits_once() {
    let repo = fixture();
    let data = tempfile::tempdir().unwrap();
    let r = Repo::open(repo.path()).unwrap();
    let wt = r
        .ensure_worktree(&data.path().join("wt/t-1"), "gaffer/t-1-lock", "main")
        .unwrap();
    std::fs::write(wt.path.join("INSTALL.md"), "cargo install gaffer\n").unwrap();
    let git_dir = Command::new("git")
        .arg("-C")
        .arg(&wt.path)
        .args(["rev-parse", "--absolute-git-dir"])
        .output()
        .unwrap();
    let lock = Path::new(String::from_utf8_lossy(&git_dir.stdout).trim()).join("index.lock");
    std::fs::write(&lock, "").unwrap();
    let holder = {
        let lock = lock.clone();
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(700));
            std::fs::remove_file(lock).unwrap();
        })
    };
    let made = wt
        .commit_step("docs: installation", "t-1/commit/1")
        .unwrap();
    holder.join().unwrap();
    assert!(made.created);
    assert_eq!(wt.commits().unwrap().len(), 1);
    assert_eq!(wt.find_step_commit("t-1/commit/1").unwrap(), Some(made.sha));
}

#[test]
fn changed_files_lists_new_files_but_not_ignored_ones() {
    let repo = fixture();
    std::fs::write(repo.path().join(".gitignore"), "target/\n").unwrap();
    sh(repo.path(), &["add", "."]);
    sh(repo.path(), &["commit", "-q", "-m", "ignore target"]);
    let data = tempfile::tempdir().unwrap();
    let r = Repo::open(repo.path()).unwrap();
    let wt = r
        .ensure_worktree(&data.path().join("wt/t-1"), "gaffer/t-1", "main")
        .unwrap();
    std::fs::write(wt.path.join("README.md"), "# changed\n").unwrap();
    std::fs::create_dir_all(wt.path.join("docs/new dir")).unwrap();
    std::fs::write(wt.path.join("docs/new dir/Ünïcode.md"), "new\n").unwrap();
    std::fs::create_dir_all(wt.path.join("target")).unwrap();
    std::fs::write(wt.path.join("target/out.o"), "built\n").unwrap();
    assert_eq!(
        wt.changed_files().unwrap(),
        ["README.md", "docs/new dir/Ünïcode.md"]
    );
    // Committed or not, a new file is a change against the base.
    wt.commit_step("add docs", "t-1/commit/1").unwrap();
    std::fs::write(wt.path.join("NOTES.md"), "later\n").unwrap();
    assert_eq!(
        wt.changed_files().unwrap(),
        ["NOTES.md", "README.md", "docs/new dir/Ünïcode.md"]
    );
}

#[test]
fn is_ignored_says_whether_a_commit_would_leave_a_path_out() {
    let repo = fixture();
    std::fs::write(repo.path().join(".gitignore"), ".env\nconfig/local.toml\n").unwrap();
    sh(repo.path(), &["add", "."]);
    sh(repo.path(), &["commit", "-q", "-m", "ignore env"]);
    let data = tempfile::tempdir().unwrap();
    let wt = Repo::open(repo.path())
        .unwrap()
        .ensure_worktree(&data.path().join("wt/t-1"), "gaffer/t-1", "main")
        .unwrap();
    assert!(wt.is_ignored(".env").unwrap());
    assert!(wt.is_ignored("config/local.toml").unwrap());
    // Tracked or matched by no rule: a commit would take it.
    assert!(!wt.is_ignored("README.md").unwrap());
    assert!(!wt.is_ignored("notes.txt").unwrap());
}

/// A git dir of the attacker's own making, whose config and hooks run `touch marker`
/// whenever a git uses it (fsmonitor on status/diff/add, the post-commit hook).
fn attacker_git_dir(at: &Path, marker: &Path) {
    sh(
        at.parent().unwrap(),
        &["init", "-q", &at.display().to_string()],
    );
    let git_dir = at.join(".git");
    let hook = format!("#!/bin/sh\ntouch {}\n", marker.display());
    let hooks = git_dir.join("hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    for name in ["post-commit", "pre-commit", "fsmonitor"] {
        let p = hooks.join(name);
        std::fs::write(&p, &hook).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    sh(
        at,
        &[
            "config",
            "core.fsmonitor",
            &hooks.join("fsmonitor").display().to_string(),
        ],
    );
}

/// The `.git` takeover: the agent points the worktree's `.git` at a git dir it made,
/// with `core.fsmonitor` and hooks set to its own command. gaffer's git still uses the
/// git dir it recorded, runs none of it, and refuses to commit naming the tampered file.
#[test]
fn a_git_file_takeover_runs_nothing_and_the_commit_step_refuses() {
    let repo = fixture();
    let data = tempfile::tempdir().unwrap();
    let r = Repo::open(repo.path()).unwrap();
    let wt = r
        .ensure_worktree(&data.path().join("wt/t-1"), "gaffer/t-1-x", "main")
        .unwrap();
    let before = r.resolve("refs/heads/gaffer/t-1-x").unwrap();
    std::fs::write(wt.path.join("README.md"), "# demo\ncargo install gaffer\n").unwrap();
    let marker = data.path().join("attacker-ran");
    attacker_git_dir(&wt.path.join(".g"), &marker);
    std::fs::write(wt.path.join(".git"), "gitdir: .g/.git\n").unwrap();
    // A sanity check that the trap works for a git that follows `.git`.
    sh(&wt.path, &["status", "--porcelain"]);
    assert!(
        marker.exists(),
        "the attacker's fsmonitor runs for a plain git"
    );
    std::fs::remove_file(&marker).unwrap();

    assert!(wt.has_changes().unwrap());
    assert!(wt
        .changed_files()
        .unwrap()
        .contains(&"README.md".to_string()));
    assert!(wt.diff().unwrap().contains("+cargo install gaffer"));
    let err = wt.commit_step("docs", "t-1/commit/1").unwrap_err();
    assert!(matches!(err, ForgeError::Tampered { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains(".git") && text.contains("gitdir: .g/.git"),
        "{text}"
    );
    assert!(!marker.exists(), "an agent-chosen command ran");
    assert_eq!(r.resolve("refs/heads/gaffer/t-1-x").unwrap(), before);
}

/// A repository the agent nests in the worktree, with its own fsmonitor and hooks:
/// gaffer's status, diff and commit do not recurse into it.
#[test]
fn a_nested_repository_runs_nothing_of_its_own() {
    let repo = fixture();
    let data = tempfile::tempdir().unwrap();
    let r = Repo::open(repo.path()).unwrap();
    let wt = r
        .ensure_worktree(&data.path().join("wt/t-2"), "gaffer/t-2-x", "main")
        .unwrap();
    let marker = data.path().join("attacker-ran");
    attacker_git_dir(&wt.path.join("vendored"), &marker);
    std::fs::write(wt.path.join("vendored/lib.rs"), "fn x() {}\n").unwrap();
    sh(&wt.path.join("vendored"), &["add", "."]);
    sh(
        &wt.path.join("vendored"),
        &["commit", "-q", "-m", "vendored"],
    );
    assert!(
        marker.exists(),
        "the nested repository's own git runs its hooks"
    );
    std::fs::remove_file(&marker).unwrap();
    assert!(wt.has_changes().unwrap());
    wt.diff().unwrap();
    let out = wt.commit_step("vendor", "t-2/commit/1").unwrap();
    assert!(out.created);
    assert_eq!(r.resolve("refs/heads/gaffer/t-2-x").unwrap(), out.sha);
    // Now a gitlink: a git that looks into submodules would run `git status` in it.
    std::fs::write(
        wt.path.join("vendored/lib.rs"),
        "fn y() {}
",
    )
    .unwrap();
    wt.has_changes().unwrap();
    wt.diff().unwrap();
    wt.changed_files().unwrap();
    wt.commit_step("vendor again", "t-2/commit/2").unwrap();
    assert!(
        !marker.exists(),
        "the nested repository's fsmonitor or hooks ran"
    );
}
