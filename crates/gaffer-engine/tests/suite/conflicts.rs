//! A shipped task's pull request whose base moved: the `merge_conflict` follow-up
//! through the real engine, real git (a bare repository as the remote), the fake
//! forge computing mergeability from it, and a scripted owner.
use super::support::*;
use gaffer_core::{ApprovalKind, Decision, Event, Stage, TaskId};
use gaffer_forge::{connect, ConflictStrategy, ForgeConfig, ForgeKind, Mergeability, Secret};
use gaffer_store::NewEvent;
use gaffer_testkit::forge::{BareRemote, FakeForge, Flavor};
use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use std::path::Path;

const TOKEN: &str = "forge-token-conflicts-9a8b";
const REQUEST: &str = "Add an installation section to README";
const CHECK: &str = "grep -q '^## Installation' README.md";
pub(super) const THEIRS: &str =
    "# demo\n\nA demo project.\n\n## Installation\n\n    brew install demo\n";
pub(super) const RESOLVED: &str =
    "# demo\n\nA demo project.\n\n## Installation\n\n    cargo install demo\n    brew install demo\n";

pub(super) struct Shipped {
    pub w: World,
    pub fake: FakeForge,
    pub remote: BareRemote,
    pub id: TaskId,
    pub branch: String,
    /// The commit gaffer pushed when it shipped.
    pub pushed: String,
    other: tempfile::TempDir,
}

/// A task shipped to the fake GitHub with `strategy`, done with CI green; the
/// owner's later turns are `later` (after the first, which writes `README_DONE`).
pub(super) async fn shipped(strategy: ConflictStrategy, later: Vec<Value>) -> Shipped {
    shipped_with(strategy, CHECK, later, |_| {}).await
}

/// [`shipped`] with the project's check `check` and the settings changed by `tune`.
/// The remote keeps a reflog of every branch, so each push shows.
pub(super) async fn shipped_with(
    strategy: ConflictStrategy,
    check: &str,
    later: Vec<Value>,
    tune: impl FnOnce(&mut gaffer_engine::Settings),
) -> Shipped {
    let remote = BareRemote::new().unwrap();
    git(
        remote.path(),
        &["config", "core.logAllRefUpdates", "always"],
    );
    let fake = FakeForge::start(Flavor::GitHub, "acme", "demo", TOKEN)
        .await
        .unwrap();
    fake.attach_remote(&remote);
    fake.report_ci_for_every_commit("success");
    let w = World::build(check, |s| {
        let mut ship = shipping(ForgeKind::GitHub, &fake.base_url(), &remote.url(), TOKEN);
        ship.conflict_strategy = strategy;
        s.shipping.insert("demo".into(), ship);
        tune(s);
    })
    .await;
    git(&w.repo, &["push", "-q", &remote.url(), "main"]);
    w.script(
        "planner",
        vec![plan_answer(&["Add an installation section"])],
    );
    let mut owner = vec![write("README.md", README_DONE)];
    owner.extend(later);
    w.script("owner", owner);
    w.script("reviewer", vec![verdict(json!({ "verdict": "done" }))]);
    let id = w.task(REQUEST, true).await;
    assert_eq!(w.run(&id).await, Stage::Done);
    let view = w.view(&id).await;
    let branch = receipt(&view, "worktree")["branch"]
        .as_str()
        .unwrap()
        .to_owned();
    let pushed = receipt(&view, "push/1")["sha"].as_str().unwrap().to_owned();
    Shipped {
        w,
        fake,
        remote,
        id,
        branch,
        pushed,
        other: tempfile::tempdir().unwrap(),
    }
}

pub(super) fn receipt(view: &gaffer_store::TaskView, step: &str) -> Value {
    let s = view.steps.iter().find(|s| s.step_id == step).unwrap();
    serde_json::from_str(s.receipt.as_deref().unwrap_or("null")).unwrap()
}

pub(super) fn input(view: &gaffer_store::TaskView, step: &str) -> Value {
    let s = view.steps.iter().find(|s| s.step_id == step).unwrap();
    serde_json::from_str(&s.input).unwrap()
}

/// Someone else commits `file` = `text` on `branch` of the remote.
pub(super) fn someone_pushes(s: &Shipped, branch: &str, file: &str, text: &str) -> String {
    let clone = s.other.path().join("c");
    if !clone.exists() {
        git(
            s.other.path(),
            &["clone", "-q", &s.remote.url(), &clone.to_string_lossy()],
        );
    }
    git(&clone, &["fetch", "-q", "origin"]);
    git(
        &clone,
        &["checkout", "-q", "-B", branch, &format!("origin/{branch}")],
    );
    std::fs::write(clone.join(file), text).unwrap();
    git(&clone, &["add", "."]);
    git(
        &clone,
        &["commit", "-q", "-m", &format!("someone changes {file}")],
    );
    git(&clone, &["push", "-q", "origin", branch]);
    s.remote.branch_sha(branch).unwrap()
}

async fn mergeability(s: &Shipped) -> Mergeability {
    let forge = connect(ForgeConfig::new(
        ForgeKind::GitHub,
        s.fake.base_url(),
        "acme",
        "demo",
        Secret::new(TOKEN),
        "T",
    ))
    .unwrap();
    let n = s.fake.prs()[0].number;
    forge.pull_request(n).await.unwrap().mergeable
}

/// What a follower records when the forge says the pull request no longer merges.
pub(super) async fn follow_up(s: &Shipped) {
    let stream = s.id.0.as_str().into();
    let head = s.w.journal.head(&stream).await.unwrap();
    let sha = s.remote.branch_sha(&s.branch).unwrap();
    s.w.journal
        .append(
            &stream,
            head,
            vec![NewEvent::now(Event::FollowUpOpened {
                kind: gaffer_engine::pipeline::MERGE_CONFLICT.into(),
                keys: vec![format!("merge_conflict:{sha}")],
                detail: json!({ "head_sha": sha }),
            })],
        )
        .await
        .unwrap();
}

pub(super) fn is_ancestor(dir: &Path, a: &str, b: &str) -> bool {
    std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["merge-base", "--is-ancestor", a, b])
        .status()
        .unwrap()
        .success()
}

pub(super) fn file_at(s: &Shipped, rev: &str, file: &str) -> String {
    // `git` trims its output: compare trimmed.
    git(&s.w.repo, &["show", &format!("{rev}:{file}")])
        .trim_end()
        .to_owned()
}

#[tokio::test]
async fn a_conflict_from_a_moved_base_is_resolved_by_the_owner_checked_and_pushed_by_each_strategy()
{
    for strategy in [ConflictStrategy::Rebase, ConflictStrategy::Merge] {
        let mut resolve = write("README.md", RESOLVED);
        resolve["expect_prompt_contains"] = json!("brew install demo");
        let s = shipped(strategy, vec![resolve]).await;
        assert_eq!(mergeability(&s).await, Mergeability::Clean);
        // Another commit on the base touches the same lines: the PR conflicts.
        let base = someone_pushes(&s, "main", "README.md", THEIRS);
        assert_eq!(mergeability(&s).await, Mergeability::Conflicted);
        follow_up(&s).await;
        assert_eq!(s.w.run(&s.id).await, Stage::Done, "{strategy:?}");

        let view = s.w.view(&s.id).await;
        let ids = step_ids(&view);
        let after: Vec<&str> = ids[ids.iter().position(|i| *i == "sync/1").unwrap()..].to_vec();
        assert_eq!(
            after,
            [
                "sync/1",
                "resolve/1",
                "check/2",
                "push-approval/1",
                "push/2",
                "ci/2"
            ],
            "{strategy:?}"
        );
        let sync = receipt(&view, "sync/1");
        assert_eq!(sync["outcome"], "conflicted");
        assert_eq!(sync["files"], json!(["README.md"]));
        assert_eq!(sync["strategy"], strategy.name());
        assert_eq!(sync["base_sha"], base);
        assert_eq!(receipt(&view, "resolve/1")["outcome"], "updated");
        // The owner's conflict turn records the privacy that applied, as every turn.
        let privacy = &receipt(&view, "resolve/1")["privacy"];
        assert_eq!(
            (privacy["role"].as_str(), privacy["mode"].as_str()),
            (Some("owner"), Some("standard")),
            "{privacy}"
        );
        assert_eq!(receipt(&view, "check/2")["passed"], true);
        // The push went through the ship approval rules (the task's auto-approval).
        assert!(view
            .approvals
            .iter()
            .any(|a| a.kind == "ship" && a.step_id == "push-approval/1" && a.state == "approved"));

        let head = s.remote.branch_sha(&s.branch).unwrap();
        assert_eq!(receipt(&view, "push/2")["sha"], head);
        assert_eq!(file_at(&s, &head, "README.md"), RESOLVED.trim_end());
        assert!(
            is_ancestor(&s.w.repo, &base, &head),
            "the branch holds the base"
        );
        match strategy {
            ConflictStrategy::Rebase => {
                // Replaced with a lease on what gaffer pushed before: the old commit is
                // not in the new branch.
                assert_eq!(input(&view, "push/2")["lease"], s.pushed);
                assert!(!is_ancestor(&s.w.repo, &s.pushed, &head));
            }
            ConflictStrategy::Merge => {
                assert_eq!(input(&view, "push/2").get("lease"), None);
                assert!(
                    is_ancestor(&s.w.repo, &s.pushed, &head),
                    "nothing rewritten"
                );
            }
        }
        assert_eq!(receipt(&view, "ci/2")["state"], "success");
        assert_eq!(mergeability(&s).await, Mergeability::Clean);
        assert_eq!(s.fake.prs().len(), 1, "still one pull request");
        assert_eq!(s.w.journal.verify().await.unwrap().broken, None);
    }
}

#[tokio::test]
async fn a_base_moved_elsewhere_is_rebased_without_an_owner_turn() {
    // No owner turn is scripted after the first: one would fail the task.
    let s = shipped(ConflictStrategy::Rebase, vec![]).await;
    s.fake.require_up_to_date(true);
    let base = someone_pushes(&s, "main", "NOTES.md", "notes\n");
    assert_eq!(mergeability(&s).await, Mergeability::Behind);
    follow_up(&s).await;
    assert_eq!(s.w.run(&s.id).await, Stage::Done);
    let view = s.w.view(&s.id).await;
    let ids = step_ids(&view);
    assert!(!ids.iter().any(|i| i.starts_with("resolve/")), "{ids:?}");
    assert_eq!(receipt(&view, "sync/1")["outcome"], "updated");
    let head = s.remote.branch_sha(&s.branch).unwrap();
    assert!(is_ancestor(&s.w.repo, &base, &head));
    assert_eq!(file_at(&s, &head, "README.md"), README_DONE.trim_end());
    assert_eq!(input(&view, "push/2")["lease"], s.pushed);
    assert_eq!(mergeability(&s).await, Mergeability::Clean);
}

#[tokio::test]
async fn a_lease_refused_because_someone_pushed_to_the_branch_asks_a_person_and_overwrites_nothing()
{
    let s = shipped(ConflictStrategy::Rebase, vec![]).await;
    someone_pushes(&s, "main", "NOTES.md", "notes\n");
    let theirs = someone_pushes(&s, &s.branch.clone(), "THEIRS.md", "their work\n");
    follow_up(&s).await;
    let mut events = s.w.journal.subscribe();
    let run = s.w.spawn(&s.id);
    let (approval, summary, _) = next_approval(&mut events, ApprovalKind::Manual).await;
    assert!(summary.contains("someone else pushed"), "{summary}");
    decide_as_ana(&s.w, &approval, Decision::Deny, Some("I will look")).await;
    assert_eq!(finish(&s.w, &s.id, run).await, Stage::Failed);
    assert_eq!(
        s.remote.branch_sha(&s.branch),
        Some(theirs),
        "nothing overwritten"
    );
}

#[tokio::test]
async fn the_follower_opens_one_conflict_follow_up_per_head_when_the_base_moves_under_the_pull_request(
) {
    let mut resolve = write("README.md", RESOLVED);
    resolve["expect_prompt_contains"] = json!("brew install demo");
    let s = shipped(ConflictStrategy::Rebase, vec![resolve]).await;
    let quiet = s.w.engine.follow_once().await.unwrap();
    assert_eq!((quiet.read, quiet.opened.len()), (1, 0), "it still merges");

    let base = someone_pushes(&s, "main", "README.md", THEIRS);
    let head = s.remote.branch_sha(&s.branch).unwrap();
    let pass = s.w.engine.follow_once().await.unwrap();
    assert_eq!(pass.opened, vec![s.id.0.clone()]);
    let opened = opened_follow_ups(&s).await;
    let [Event::FollowUpOpened { kind, keys, detail }] = opened.as_slice() else {
        panic!("one follow-up: {opened:?}");
    };
    assert_eq!(kind, "merge_conflict");
    assert_eq!(keys, &vec![format!("merge_conflict:{head}")]);
    assert_eq!(detail["head_sha"], head);

    assert_eq!(s.w.run(&s.id).await, Stage::Done);
    let new_head = s.remote.branch_sha(&s.branch).unwrap();
    assert_ne!(new_head, head);
    assert!(is_ancestor(&s.w.repo, &base, &new_head));
    assert_eq!(file_at(&s, &new_head, "README.md"), RESOLVED.trim_end());
    // Merging again, the pull request opens nothing more.
    let after = s.w.engine.follow_once().await.unwrap();
    assert_eq!((after.read, after.opened.len()), (1, 0));
    assert_eq!(opened_follow_ups(&s).await.len(), 1);
}

async fn opened_follow_ups(s: &Shipped) -> Vec<Event> {
    s.w.journal
        .stream_events(&s.id.0.as_str().into(), 0)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.event)
        .filter(|e| matches!(e, Event::FollowUpOpened { .. }))
        .collect()
}

#[tokio::test]
async fn a_check_failing_after_the_update_goes_to_an_owner_fix_then_the_check_again_before_any_push(
) {
    // The owner's resolution drops the heading the check looks for; its fix, given
    // the failing check, puts it back.
    let broken = "# demo\n\nA demo project.\n\n    cargo install demo\n    brew install demo\n";
    let mut fix = write("README.md", RESOLVED);
    fix["expect_prompt_contains"] = json!("grep -q '^## Installation' README.md");
    let s = shipped(
        ConflictStrategy::Rebase,
        vec![write("README.md", broken), fix],
    )
    .await;
    someone_pushes(&s, "main", "README.md", THEIRS);
    assert_eq!(s.w.engine.follow_once().await.unwrap().opened.len(), 1);
    assert_eq!(s.w.run(&s.id).await, Stage::Done);

    let view = s.w.view(&s.id).await;
    let ids = step_ids(&view);
    let after: Vec<&str> = ids[ids.iter().position(|i| *i == "sync/1").unwrap()..].to_vec();
    assert_eq!(
        after,
        [
            "sync/1",
            "resolve/1",
            "check/2",
            "fix/1",
            "commit-fix/1",
            "check/3",
            "push-approval/1",
            "push/2",
            "ci/2"
        ]
    );
    assert_eq!(receipt(&view, "check/2")["passed"], false);
    assert_eq!(input(&view, "check/3")["sync"], 1);
    let head = s.remote.branch_sha(&s.branch).unwrap();
    assert_eq!(receipt(&view, "push/2")["sha"], head);
    assert_eq!(file_at(&s, &head, "README.md"), RESOLVED.trim_end());
}

/// The commits `branch` of the remote was set to, newest first: one per push.
pub(super) fn pushes(s: &Shipped, branch: &str) -> Vec<String> {
    git(
        s.remote.path(),
        &[
            "reflog",
            "show",
            "--format=%H",
            &format!("refs/heads/{branch}"),
        ],
    )
    .lines()
    .map(str::to_owned)
    .collect()
}

/// The owner's file writes for this task (the fake agent logs each one).
pub(super) fn owner_writes(s: &Shipped) -> usize {
    let line = format!("fake-claude write README.md task={}", s.id);
    s.w.effects().iter().filter(|l| **l == line).count()
}

#[tokio::test]
async fn resolutions_that_keep_leaving_markers_stop_at_the_round_limit_blocked_with_nothing_pushed()
{
    // Every round leaves the markers in; a turn after the limit would resolve them,
    // and must never run.
    let marked = "# demo\n\nA demo project.\n\n## Installation\n\n<<<<<<< HEAD\n    brew install demo\n=======\n    cargo install demo\n>>>>>>> task\n";
    let mut later: Vec<Value> = (0..gaffer_engine::pipeline::RESOLVE_ROUNDS)
        .map(|_| write("README.md", marked))
        .collect();
    later[1]["expect_prompt_contains"] =
        json!("The previous attempt left conflict markers in these files");
    later.push(write("README.md", RESOLVED));
    let s = shipped(ConflictStrategy::Rebase, later).await;
    someone_pushes(&s, "main", "README.md", THEIRS);
    follow_up(&s).await;
    assert_eq!(s.w.run(&s.id).await, Stage::Blocked);

    let view = s.w.view(&s.id).await;
    let ids = step_ids(&view);
    let after: Vec<&str> = ids[ids.iter().position(|i| *i == "sync/1").unwrap()..].to_vec();
    assert_eq!(
        after,
        [
            "sync/1",
            "resolve/1",
            "resolve/2",
            "resolve/3",
            "resolve/4",
            "resolve/5"
        ]
    );
    for r in 1..=5 {
        let got = receipt(&view, &format!("resolve/{r}"));
        assert_eq!(
            (got["outcome"].as_str(), got["files"].clone()),
            (Some("unresolved"), json!(["README.md"])),
            "resolve/{r}"
        );
        assert_eq!(input(&view, &format!("resolve/{r}"))["unresolved"], r > 1);
    }
    assert_eq!(owner_writes(&s), 1 + 5, "no sixth round");
    let reason = World::summary(&view)["reason"].as_str().unwrap().to_owned();
    let worktree = receipt(&view, "worktree")["path"]
        .as_str()
        .unwrap()
        .to_owned();
    for says in [
        "after 5 owner rounds",
        "conflict markers are left in README.md",
        "nothing was pushed",
        worktree.as_str(),
    ] {
        assert!(reason.contains(says), "{says:?} in {reason}");
    }
    // Nothing pushed, forced or not: the remote branch is where gaffer shipped it,
    // and the update is still under way in the worktree for a person to finish.
    assert_eq!(pushes(&s, &s.branch), std::slice::from_ref(&s.pushed));
    assert_eq!(s.fake.prs().len(), 1);
    assert!(view.approvals.iter().all(|a| a.state != "pending"));
    assert!(std::path::Path::new(&worktree).join("README.md").exists());
    let status = git(Path::new(&worktree), &["status"]);
    assert!(status.contains("rebase in progress"), "{status}");
}

#[tokio::test]
async fn a_check_failing_after_every_update_fix_ends_the_follow_up_at_the_check_attempts_with_its_output_and_nothing_pushed(
) {
    // The base gains a file the project's check refuses; the owner's fixes never
    // remove it.
    let check = "grep -q '^## Installation' README.md && if test -e NOTES.md; then echo 'NOTES.md is not allowed: fold it into README.md' >&2; exit 3; fi";
    let fix = |n: u32| write("README.md", &format!("{README_DONE}\nFix {n}.\n"));
    let s = shipped_with(
        ConflictStrategy::Merge,
        check,
        vec![fix(1), fix(2), fix(3)],
        |settings| settings.limits.check_attempts = 2,
    )
    .await;
    s.fake.require_up_to_date(true);
    someone_pushes(&s, "main", "NOTES.md", "notes\n");
    follow_up(&s).await;
    assert_eq!(s.w.run(&s.id).await, Stage::Failed);

    let view = s.w.view(&s.id).await;
    let ids = step_ids(&view);
    let after: Vec<&str> = ids[ids.iter().position(|i| *i == "sync/1").unwrap()..].to_vec();
    assert_eq!(
        after,
        ["sync/1", "check/2", "fix/1", "commit-fix/1", "check/3"],
        "two check runs, as configured"
    );
    assert_eq!(receipt(&view, "sync/1")["outcome"], "updated");
    for c in ["check/2", "check/3"] {
        assert_eq!(receipt(&view, c)["passed"], false, "{c}");
        assert_eq!(input(&view, c)["sync"], 1, "{c}");
    }
    assert_eq!(owner_writes(&s), 1 + 1, "one fix between the two runs");
    let reason = World::summary(&view)["reason"].as_str().unwrap().to_owned();
    for says in [
        "after 2 runs",
        "nothing was pushed",
        "exits 3",
        "NOTES.md is not allowed: fold it into README.md",
    ] {
        assert!(reason.contains(says), "{says:?} in {reason}");
    }
    assert_eq!(
        pushes(&s, &s.branch),
        std::slice::from_ref(&s.pushed),
        "nothing pushed"
    );
    assert_eq!(s.fake.prs().len(), 1);
}
