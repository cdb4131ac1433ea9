//! A crash in the middle of a `merge_conflict` follow-up: before the owner's
//! resolving turn, during it, after it and gaffer's continue of the update but
//! before its receipt, and around the push of the updated branch. Each crash is a
//! fault point in the journal ([`Faulty`]): the run is frozen there and dropped (its
//! agent processes killed), then the task is recovered and run again by another
//! engine, a person approving what recovery asks. Every trial must end as the run
//! without a crash: the same steps, the branch pushed once with the resolution on
//! the moved base, one commit per change, the owner's turn run again only where a
//! person approved it, and never where the probe proves it finished.
use super::conflicts::{
    file_at, follow_up, is_ancestor, owner_writes, pushes, receipt, shipped, someone_pushes,
    Shipped, RESOLVED, THEIRS,
};
use super::faulty::{Death, Faulty, Point};
use super::support::*;
use gaffer_core::{Actor, ApprovalKind, Decision, Stage};
use gaffer_forge::ConflictStrategy;
use pretty_assertions::assert_eq;
use serde_json::json;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The steps of the follow-up, crashed or not.
const STEPS: [&str; 6] = [
    "sync/1",
    "resolve/1",
    "check/2",
    "push-approval/1",
    "push/2",
    "ci/2",
];

/// A shipped task whose base moved with a conflicting change, its follow-up opened.
/// The owner resolves the conflict in every turn it is given.
async fn conflicted(strategy: ConflictStrategy) -> Shipped {
    let resolve = || {
        let mut turn = write("README.md", RESOLVED);
        turn["expect_prompt_contains"] = json!("README.md");
        turn
    };
    let s = shipped(strategy, vec![resolve(), resolve()]).await;
    someone_pushes(&s, "main", "README.md", THEIRS);
    follow_up(&s).await;
    s
}

/// Run the follow-up until it dies at `point` (it must reach it).
async fn crash(s: &Shipped, point: Point) {
    let journal = Faulty::new(s.w.journal.clone(), Some(point.clone()), Death::Freeze);
    let engine = s.w.engine_on(journal.clone());
    let id = s.id.clone();
    let mut run = tokio::spawn(async move { engine.run_task(&id, CancellationToken::new()).await });
    tokio::select! {
        () = journal.died() => {}
        ended = &mut run => panic!("the run ended ({ended:?}) before {point}: {:?}", journal.written()),
        () = tokio::time::sleep(Duration::from_secs(120)) => panic!("no crash at {point} within two minutes: {:?}", journal.written()),
    }
    // The process is gone: its run and the agent processes it started.
    run.abort();
    let _ = run.await;
}

/// Recover the task and run it to its end, ana approving every question recovery
/// asks; the stage it ends in and the manual questions she approved (their steps).
async fn resume(s: &Shipped) -> (Stage, Vec<String>) {
    assert!(s.w.engine.recover_task(&s.id).await.unwrap());
    let mut run = s.w.spawn(&s.id);
    let mut approved = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        tokio::select! {
            ended = &mut run => return (ended.unwrap().unwrap(), approved),
            () = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the resumed run still goes after two minutes"
        );
        for a in s.w.app.approvals(Some("pending")).await.unwrap() {
            if a.task_id != s.id.as_str() || a.kind != ApprovalKind::Manual.as_str() {
                continue;
            }
            s.w.app
                .decide(
                    &a.id,
                    Decision::Approve,
                    Actor::user("ana", "test"),
                    None,
                    gaffer_app::Scope::default(),
                )
                .await
                .unwrap();
            approved.push(a.step_id.clone());
        }
    }
}

/// The follow-up ended as it does without a crash: the same steps, all completed;
/// the resolution on the moved base pushed once; one commit for the change (and
/// one merge for a merge); the owner's resolving turn run once, and again only for
/// a re-run a person approved.
async fn ended_as_without_a_crash(s: &Shipped, strategy: ConflictStrategy, reruns: usize) {
    let view = s.w.view(&s.id).await;
    let ids = step_ids(&view);
    let from = ids.iter().position(|i| *i == "sync/1").unwrap();
    assert_eq!(ids[from..], STEPS);
    for step in &view.steps {
        assert_eq!(step.state, "completed", "{}", step.step_id);
    }
    assert_eq!(receipt(&view, "sync/1")["outcome"], "conflicted");
    assert_eq!(receipt(&view, "resolve/1")["outcome"], "updated");
    assert_eq!(receipt(&view, "check/2")["passed"], true);
    assert_eq!(receipt(&view, "ci/2")["state"], "success");

    let head = s.remote.branch_sha(&s.branch).unwrap();
    assert_eq!(receipt(&view, "push/2")["sha"], head);
    assert_eq!(
        pushes(s, &s.branch),
        [head.clone(), s.pushed.clone()],
        "one push after the one that shipped"
    );
    assert_eq!(file_at(s, &head, "README.md"), RESOLVED.trim_end());
    let base = receipt(&view, "sync/1")["base_sha"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(is_ancestor(&s.w.repo, &base, &head));
    let commits = |extra: &str| {
        git(
            &s.w.repo,
            &["rev-list", "--count", extra, &format!("{base}..{head}")],
        )
    };
    let (changes, merges) = match strategy {
        ConflictStrategy::Rebase => ("1", "0"),
        ConflictStrategy::Merge => ("1", "1"),
    };
    assert_eq!(
        (commits("--no-merges"), commits("--merges")),
        (changes.to_owned(), merges.to_owned())
    );
    // The shipped task's turn, the resolution, and at most one more per re-run a
    // person approved (the crash may have come before the turn wrote).
    let writes = owner_writes(s);
    assert!(
        (2..=2 + reruns).contains(&writes),
        "{writes} owner writes with {reruns} approved re-runs"
    );
    assert_eq!(s.fake.prs().len(), 1);
    assert!(view.approvals.iter().all(|a| a.state != "pending"));
    assert_eq!(s.w.journal.verify().await.unwrap().broken, None);
}

fn after(signature: &str) -> Point {
    Point::After {
        signature: signature.into(),
        occurrence: 1,
    }
}

fn before(signature: &str) -> Point {
    Point::Before {
        signature: signature.into(),
        occurrence: 1,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_conflict_follow_up_crashed_around_the_owners_resolution_ends_as_without_the_crash() {
    let strategy = ConflictStrategy::Rebase;
    let s = conflicted(strategy).await;
    assert_eq!(s.w.run(&s.id).await, Stage::Done);
    ended_as_without_a_crash(&s, strategy, 0).await;

    // Where the owner's turn may have done anything: a person says whether it runs
    // again (and it does, on what it left).
    for point in [
        after("step_started(resolve/1)"),
        after("agent_activity(resolve/1)"),
    ] {
        let s = conflicted(strategy).await;
        crash(&s, point.clone()).await;
        let (stage, approved) = resume(&s).await;
        assert_eq!(stage, Stage::Done, "{point}");
        assert_eq!(approved, ["resolve/1"], "{point}");
        ended_as_without_a_crash(&s, strategy, 1).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_after_the_resolution_went_on_finds_it_done_without_running_the_owner_again() {
    // The owner resolved and gaffer continued the update (the rebased or merge
    // commit is made), and the crash came before the receipt: the probe reads the
    // finished update from the git dir; nobody is asked, the turn does not run again.
    for strategy in [ConflictStrategy::Rebase, ConflictStrategy::Merge] {
        let s = conflicted(strategy).await;
        crash(&s, before("step_completed(resolve/1)")).await;
        let (stage, approved) = resume(&s).await;
        assert_eq!(stage, Stage::Done, "{strategy:?}");
        assert_eq!(approved, Vec::<String>::new(), "{strategy:?}");
        let view = s.w.view(&s.id).await;
        assert_eq!(receipt(&view, "resolve/1")["reconciled"], true);
        ended_as_without_a_crash(&s, strategy, 0).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_around_the_push_of_the_resolved_branch_pushes_it_once() {
    let strategy = ConflictStrategy::Rebase;
    for point in [
        after("step_started(push/2)"),
        before("step_completed(push/2)"),
    ] {
        let s = conflicted(strategy).await;
        crash(&s, point.clone()).await;
        let (stage, approved) = resume(&s).await;
        assert_eq!(stage, Stage::Done, "{point}");
        assert_eq!(approved, Vec::<String>::new(), "{point}: the probe decides");
        ended_as_without_a_crash(&s, strategy, 0).await;
    }
}
