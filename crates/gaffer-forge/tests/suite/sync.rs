//! A task branch catching up with a base that moved on a real bare remote: fetch,
//! rebase or merge, conflicts resolved and checked, pushes with a lease.
use super::push::sh;
use gaffer_forge::*;
use gaffer_testkit::forge::BareRemote;
use pretty_assertions::assert_eq;
use std::path::Path;

const BRANCH: &str = "gaffer/t-1";

/// A repository whose `main` is on a bare remote, a task worktree on `gaffer/t-1`
/// with one commit changing line 2 of `app.txt`, pushed; and a second clone standing
/// for someone else.
struct Setup {
    _dirs: Vec<tempfile::TempDir>,
    remote: BareRemote,
    repo: Repo,
    wt: Worktree,
    other: std::path::PathBuf,
    pushed: String,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir().unwrap();
    let remote = BareRemote::new().unwrap();
    sh(dir.path(), &["init", "-q", "-b", "main"]);
    std::fs::write(dir.path().join("app.txt"), "one\ntwo\nthree\n").unwrap();
    std::fs::write(dir.path().join("notes.txt"), "notes\n").unwrap();
    sh(dir.path(), &["add", "."]);
    sh(dir.path(), &["commit", "-q", "-m", "init"]);
    sh(dir.path(), &["remote", "add", "origin", &remote.url()]);
    sh(dir.path(), &["push", "-q", "origin", "main"]);
    let repo = Repo::open(dir.path()).unwrap();
    let wt = repo
        .ensure_worktree(&data.path().join("wt"), BRANCH, "main")
        .unwrap();
    std::fs::write(wt.path.join("app.txt"), "one\ntwo by the task\nthree\n").unwrap();
    wt.commit_step("task change", "t-1/code/1").unwrap();
    let pushed = repo
        .push("origin", BRANCH, &GitAuth::default())
        .unwrap()
        .sha;
    let clone = other.path().join("c");
    sh(
        other.path(),
        &["clone", "-q", &remote.url(), &clone.to_string_lossy()],
    );
    Setup {
        _dirs: vec![dir, data, other],
        remote,
        repo,
        wt,
        other: clone,
        pushed,
    }
}

/// Someone else commits `file` = `text` on `branch` and pushes it.
fn someone_pushes(s: &Setup, branch: &str, file: &str, text: &str) -> String {
    let c = &s.other;
    sh(c, &["fetch", "-q", "origin"]);
    sh(
        c,
        &["checkout", "-q", "-B", branch, &format!("origin/{branch}")],
    );
    std::fs::write(c.join(file), text).unwrap();
    sh(
        c,
        &["commit", "-q", "-am", &format!("someone changes {file}")],
    );
    sh(c, &["push", "-q", "origin", branch]);
    s.remote.branch_sha(branch).unwrap()
}

fn is_ancestor(dir: &Path, a: &str, b: &str) -> bool {
    std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["merge-base", "--is-ancestor", a, b])
        .status()
        .unwrap()
        .success()
}

fn parents(wt: &Worktree, rev: &str) -> usize {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(&wt.path)
        .args(["rev-list", "--parents", "-n", "1", rev])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .count()
        - 1
}

#[test]
fn a_base_that_moved_elsewhere_is_rebased_without_conflict_and_pushed_with_a_lease() {
    let s = setup();
    let base = someone_pushes(&s, "main", "notes.txt", "notes, longer\n");
    let auth = GitAuth::default();
    assert_eq!(s.repo.fetch_base("origin", "main", &auth).unwrap(), base);
    let head = match s.wt.update_onto(&base, ConflictStrategy::Rebase).unwrap() {
        UpdateOutcome::Updated { head } => head,
        other => panic!("{other:?}"),
    };
    assert!(is_ancestor(&s.wt.path, &base, &head));
    assert_eq!(parents(&s.wt, &head), 1, "a rebase makes no merge commit");
    assert_eq!(
        std::fs::read_to_string(s.wt.path.join("app.txt")).unwrap(),
        "one\ntwo by the task\nthree\n"
    );
    // Running it again changes nothing.
    assert_eq!(
        s.wt.update_onto(&base, ConflictStrategy::Rebase).unwrap(),
        UpdateOutcome::UpToDate { head: head.clone() }
    );
    // A plain push is refused (the branch was rewritten); the lease against what
    // gaffer pushed goes through.
    assert!(matches!(
        s.repo.push("origin", BRANCH, &auth).unwrap_err(),
        ForgeError::PushRejected { .. }
    ));
    let out = s
        .repo
        .push_with_lease("origin", BRANCH, &s.pushed, &auth)
        .unwrap();
    assert_eq!(
        out,
        PushOutcome {
            sha: head.clone(),
            pushed: true
        }
    );
    assert_eq!(s.remote.branch_sha(BRANCH), Some(head.clone()));
    // After a crash: the same push again sends nothing.
    let again = s
        .repo
        .push_with_lease("origin", BRANCH, &s.pushed, &auth)
        .unwrap();
    assert_eq!(
        again,
        PushOutcome {
            sha: head,
            pushed: false
        }
    );
}

#[test]
fn a_conflict_stops_the_rebase_shows_both_sides_and_is_continued_only_when_resolved() {
    let s = setup();
    let base = someone_pushes(&s, "main", "app.txt", "one\ntwo by someone\nthree\n");
    s.repo
        .fetch_base("origin", "main", &GitAuth::default())
        .unwrap();
    let out = s.wt.update_onto(&base, ConflictStrategy::Rebase).unwrap();
    assert_eq!(
        out,
        UpdateOutcome::Conflicted {
            files: vec!["app.txt".into()]
        }
    );
    assert_eq!(s.wt.update_in_progress(), Some(ConflictStrategy::Rebase));
    // Asked again (a run after a crash), the same stop is reported; nothing restarts.
    assert_eq!(
        s.wt.update_onto(&base, ConflictStrategy::Rebase).unwrap(),
        out
    );
    assert_eq!(
        s.wt.conflicts().unwrap(),
        vec![Conflict {
            path: "app.txt".into(),
            base_side: Some("one\ntwo by someone\nthree\n".into()),
            task_side: Some("one\ntwo by the task\nthree\n".into()),
        }]
    );
    let files = vec!["app.txt".to_owned()];
    // Markers left in: refused, and the rebase is still there to finish.
    let err = s.wt.continue_update(&files).unwrap_err();
    assert!(
        matches!(&err, ForgeError::Unresolved { files, .. } if files == &["app.txt".to_owned()]),
        "{err}"
    );
    assert!(err.to_string().contains("app.txt"), "{err}");
    assert_eq!(s.wt.update_in_progress(), Some(ConflictStrategy::Rebase));
    std::fs::write(
        s.wt.path.join("app.txt"),
        "one\ntwo by someone and the task\nthree\n",
    )
    .unwrap();
    let head = match s.wt.continue_update(&files).unwrap() {
        UpdateOutcome::Updated { head } => head,
        other => panic!("{other:?}"),
    };
    assert_eq!(s.wt.update_in_progress(), None);
    assert!(!s.wt.has_changes().unwrap());
    assert!(is_ancestor(&s.wt.path, &base, &head));
    assert_eq!(s.wt.head().unwrap(), head);
    // The step's commit is found again by its trailer after the rewrite.
    assert_eq!(s.wt.find_step_commit("t-1/code/1").unwrap(), Some(head));
}

#[test]
fn a_merge_conflict_resolved_makes_a_merge_commit_that_pushes_without_force() {
    let s = setup();
    let base = someone_pushes(&s, "main", "app.txt", "one\ntwo by someone\nthree\n");
    s.repo
        .fetch_base("origin", "main", &GitAuth::default())
        .unwrap();
    assert_eq!(
        s.wt.update_onto(&base, ConflictStrategy::Merge).unwrap(),
        UpdateOutcome::Conflicted {
            files: vec!["app.txt".into()]
        }
    );
    assert_eq!(s.wt.update_in_progress(), Some(ConflictStrategy::Merge));
    let c = &s.wt.conflicts().unwrap()[0];
    assert_eq!(c.base_side.as_deref(), Some("one\ntwo by someone\nthree\n"));
    assert_eq!(
        c.task_side.as_deref(),
        Some("one\ntwo by the task\nthree\n")
    );
    std::fs::write(s.wt.path.join("app.txt"), "one\ntwo, merged\nthree\n").unwrap();
    let head = match s.wt.continue_update(&["app.txt".into()]).unwrap() {
        UpdateOutcome::Updated { head } => head,
        other => panic!("{other:?}"),
    };
    assert_eq!(parents(&s.wt, &head), 2);
    assert!(
        is_ancestor(&s.wt.path, &s.pushed, &head),
        "nothing rewritten"
    );
    let out = s.repo.push("origin", BRANCH, &GitAuth::default()).unwrap();
    assert!(out.pushed);
    assert_eq!(s.remote.branch_sha(BRANCH), Some(head));
}

#[test]
fn a_lease_refused_because_someone_else_pushed_overwrites_nothing() {
    let s = setup();
    let base = someone_pushes(&s, "main", "notes.txt", "notes, longer\n");
    let auth = GitAuth::default();
    s.repo.fetch_base("origin", "main", &auth).unwrap();
    s.wt.update_onto(&base, ConflictStrategy::Rebase).unwrap();
    let theirs = someone_pushes(&s, BRANCH, "notes.txt", "their work on the branch\n");
    let err = s
        .repo
        .push_with_lease("origin", BRANCH, &s.pushed, &auth)
        .unwrap_err();
    match &err {
        ForgeError::LeaseRefused {
            expected, found, ..
        } => {
            assert_eq!(expected, &s.pushed);
            assert_eq!(found.as_deref(), Some(theirs.as_str()));
        }
        other => panic!("{other}"),
    }
    assert!(err.to_string().contains("someone else pushed"), "{err}");
    assert_eq!(s.remote.branch_sha(BRANCH), Some(theirs));
}

#[test]
fn an_abort_puts_the_branch_back_and_uncommitted_work_is_never_rebased() {
    let s = setup();
    let before = s.wt.head().unwrap();
    let base = someone_pushes(&s, "main", "app.txt", "one\ntwo by someone\nthree\n");
    s.repo
        .fetch_base("origin", "main", &GitAuth::default())
        .unwrap();
    std::fs::write(s.wt.path.join("wip.txt"), "not committed\n").unwrap();
    let err =
        s.wt.update_onto(&base, ConflictStrategy::Rebase)
            .unwrap_err();
    assert!(err.to_string().contains("uncommitted"), "{err}");
    std::fs::remove_file(s.wt.path.join("wip.txt")).unwrap();
    assert!(matches!(
        s.wt.update_onto(&base, ConflictStrategy::Rebase).unwrap(),
        UpdateOutcome::Conflicted { .. }
    ));
    s.wt.abort_update().unwrap();
    assert_eq!(s.wt.update_in_progress(), None);
    assert_eq!(s.wt.head().unwrap(), before);
    assert!(!s.wt.has_changes().unwrap());
}

#[test]
fn fetching_a_missing_base_names_it() {
    let s = setup();
    let err = s
        .repo
        .fetch_base("origin", "no-such-branch", &GitAuth::default())
        .unwrap_err();
    assert!(err.to_string().contains("no-such-branch"), "{err}");
}
