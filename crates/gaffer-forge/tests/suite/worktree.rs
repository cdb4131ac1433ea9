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
