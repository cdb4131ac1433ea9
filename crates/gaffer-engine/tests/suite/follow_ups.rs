//! After the pull request: review comments on a shipped task's pull request open it
//! again (the real engine, real git with a bare remote, the fake Gitea and GitHub).
use super::support::*;
use gaffer_core::{ApprovalKind, Decision, Event, Stage, StreamId, TaskId};
use gaffer_engine::Engine;
use gaffer_forge::ForgeKind;
use gaffer_store::Journal;
use gaffer_testkit::forge::{BareRemote, FakeForge, FakeGitLab, Flavor, HookDelivery, Verdict};
use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

const TOKEN: &str = "forge-token-follow-9c1";
const REQUEST: &str = "Add an installation section to README";
const HUNK: &str = "@@ -1,3 +1,7 @@\n # demo\n \n A demo project.\n+\n+## Installation\n+\n+    cargo install demo";
const ASK: &str = "Use --locked in the install command";
const FIXED: &str =
    "# demo\n\nA demo project.\n\n## Installation\n\n    cargo install --locked demo\n";

struct Shipped {
    w: World,
    fake: FakeForge,
    remote: BareRemote,
    id: TaskId,
    pr: u64,
    branch: String,
    first_sha: String,
}

fn kind_of(flavor: Flavor) -> ForgeKind {
    match flavor {
        Flavor::Gitea => ForgeKind::Gitea,
        Flavor::GitHub => ForgeKind::GitHub,
    }
}

/// A task shipped to a fake forge (CI green on every commit) and done; the owner's
/// next turn is the fix for the review comment, which it must be shown.
async fn shipped_on(
    flavor: Flavor,
    journal: Option<Arc<dyn Journal>>,
    review_fix_attempts: u32,
) -> Shipped {
    shipped_with(flavor, journal, review_fix_attempts, |_| {}).await
}

/// [`shipped_on`], with more settings.
async fn shipped_with(
    flavor: Flavor,
    journal: Option<Arc<dyn Journal>>,
    review_fix_attempts: u32,
    more: impl Fn(&mut gaffer_engine::Settings) + Send + Sync + 'static,
) -> Shipped {
    let remote = BareRemote::new().unwrap();
    let fake = FakeForge::start(flavor, "acme", "demo", TOKEN)
        .await
        .unwrap();
    fake.attach_remote(&remote);
    fake.report_ci_for_every_commit("success");
    let mut ship = shipping(kind_of(flavor), &fake.base_url(), &remote.url(), TOKEN);
    ship.review_fix_attempts = review_fix_attempts;
    let tune = move |s: &mut gaffer_engine::Settings| {
        s.shipping.insert("demo".into(), ship.clone());
        more(s);
    };
    let check = "grep -q '^## Installation' README.md";
    let w = match journal {
        Some(j) => World::build_on(tempfile::tempdir().unwrap(), j, "demo", check, tune).await,
        None => World::build(check, tune).await,
    };
    // The base is on the remote, as on a real forge (without it the pull request
    // could not merge, and the follower would rightly open a conflict follow-up).
    git(&w.repo, &["push", "-q", &remote.url(), "main"]);
    w.script(
        "planner",
        vec![plan_answer(&["Add an installation section"])],
    );
    let mut fix = write("README.md", FIXED);
    fix["expect_prompt_contains"] = json!(ASK);
    let mut second = write("README.md", &format!("{FIXED}\nMSRV: 1.80\n"));
    second["expect_prompt_contains"] = json!("mention the MSRV");
    w.script("owner", vec![write("README.md", README_DONE), fix, second]);
    w.script("reviewer", vec![verdict(json!({ "verdict": "done" }))]);
    let id = w.task(REQUEST, true).await;
    assert_eq!(finish(&w, &id, w.spawn(&id)).await, Stage::Done);
    let prs = fake.prs();
    assert_eq!(prs.len(), 1);
    let branch = prs[0].head.clone();
    let first_sha = remote.branch_sha(&branch).unwrap();
    Shipped {
        pr: prs[0].number,
        w,
        fake,
        remote,
        id,
        branch,
        first_sha,
    }
}

fn step_input(view: &gaffer_store::TaskView, step: &str) -> Value {
    let s = view.steps.iter().find(|s| s.step_id == step).unwrap();
    serde_json::from_str(&s.input).unwrap()
}

/// gaffer's replies on the pull request (in a thread on GitHub, quoting on Gitea).
fn replies(s: &Shipped) -> Vec<String> {
    let threaded = s
        .fake
        .review_comments()
        .into_iter()
        .filter(|c| c.author == "gaffer")
        .map(|c| c.body);
    let quoting = s
        .fake
        .comments()
        .into_iter()
        .filter(|c| c.author == "gaffer")
        .map(|c| c.body);
    threaded.chain(quoting).collect()
}

fn is_ancestor(remote: &BareRemote, old: &str, new: &str) -> bool {
    Command::new("git")
        .arg("--git-dir")
        .arg(remote.path())
        .args(["merge-base", "--is-ancestor", old, new])
        .status()
        .unwrap()
        .success()
}

async fn follow_ups(journal: &Arc<dyn Journal>, id: &TaskId) -> Vec<Event> {
    journal
        .stream_events(&StreamId::from(id), 0)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.event)
        .filter(|e| matches!(e, Event::FollowUpOpened { .. }))
        .collect()
}

async fn a_review_comment_is_fixed_pushed_and_answered_once(flavor: Flavor) {
    let s = shipped_on(flavor, None, 3).await;
    // gaffer's own words on the pull request never ask for anything.
    s.fake.add_pr_comment(
        s.pr,
        "someone",
        "gaffer addressed this <!-- gaffer:reply:t-x:comment:1 -->",
    );
    let before = s.w.engine.follow_once().await.unwrap();
    assert_eq!(before.opened, Vec::<String>::new(), "{flavor:?}");
    assert_eq!(before.read, 1);

    let comment = s
        .fake
        .add_review_comment(s.pr, "ana", "README.md", 7, HUNK, ASK);
    let pass = s.w.engine.follow_once().await.unwrap();
    assert_eq!(pass.opened, std::slice::from_ref(&s.id.0), "{flavor:?}");
    assert_eq!(s.w.view(&s.id).await.task.stage, "shipping");
    assert_eq!(finish(&s.w, &s.id, s.w.spawn(&s.id)).await, Stage::Done);

    let view = s.w.view(&s.id).await;
    let ids = step_ids(&view);
    assert_eq!(
        ids[ids.len() - 6..],
        [
            "fix/1",
            "commit-fix/1",
            "push-approval/1",
            "push/2",
            "ci/2",
            "reply/1"
        ],
        "{flavor:?}"
    );
    // The owner's fix turn was given the comment with its file, line and hunk (the
    // fake agent refuses a prompt without the comment's words).
    let fix = step_input(&view, "fix/1");
    assert_eq!(fix["reason"], "review_comments");
    assert_eq!(fix["follow_up"], 1);
    let c = &fix["detail"]["comments"][0];
    assert_eq!(
        (c["author"].as_str(), c["path"].as_str(), c["line"].as_u64()),
        (Some("ana"), Some("README.md"), Some(7))
    );
    assert_eq!(c["diff_hunk"], HUNK);
    // The push approval was asked as a ship approval (approved by the task's --yes).
    let push = view
        .approvals
        .iter()
        .find(|a| a.step_id == "push-approval/1")
        .unwrap();
    assert_eq!(
        (push.kind.as_str(), push.state.as_str()),
        ("ship", "approved")
    );
    // A new commit on the branch, on top of the first: never forced.
    let new_sha = s.remote.branch_sha(&s.branch).unwrap();
    assert_ne!(new_sha, s.first_sha);
    assert!(
        is_ancestor(&s.remote, &s.first_sha, &new_sha),
        "{flavor:?}: not a fast-forward"
    );
    assert!(git(&s.w.repo, &["show", &format!("{}:README.md", s.branch)]).contains("--locked"));
    // One reply, answering that comment with the fix's commit.
    let replies = replies(&s);
    assert_eq!(replies.len(), 1, "{flavor:?}: {replies:#?}");
    assert!(replies[0].contains(&new_sha[..7]), "{}", replies[0]);
    assert!(replies[0].contains(&format!("review-comment:{comment}")));
    if flavor == Flavor::GitHub {
        let thread = s.fake.review_comments();
        assert_eq!(thread.last().unwrap().in_reply_to, Some(comment));
    }
    let summary = World::summary(&view);
    assert_eq!(
        summary["follow_ups"][0]["keys"],
        json!([format!("review-comment:{comment}")])
    );

    // Followed again: gaffer's reply opens nothing; merging ends following.
    let again = s.w.engine.follow_once().await.unwrap();
    assert_eq!(again.opened, Vec::<String>::new(), "{flavor:?}");
    s.fake.merge_pr(s.pr);
    let ended = s.w.engine.follow_once().await.unwrap();
    assert_eq!(ended.ended, std::slice::from_ref(&s.id.0));
    assert_eq!(s.w.engine.follow_once().await.unwrap().read, 0);
    assert_eq!(follow_ups(&s.w.journal, &s.id).await.len(), 1);
    assert_eq!(s.w.journal.verify().await.unwrap().broken, None);
}

#[tokio::test]
async fn on_gitea_a_review_comment_is_fixed_pushed_and_answered_once() {
    a_review_comment_is_fixed_pushed_and_answered_once(Flavor::Gitea).await;
}

#[tokio::test]
async fn on_github_a_review_comment_is_fixed_pushed_and_answered_once() {
    a_review_comment_is_fixed_pushed_and_answered_once(Flavor::GitHub).await;
}

#[tokio::test]
async fn a_crash_after_the_reply_was_sent_resumes_to_exactly_one_reply() {
    let s = shipped_on(Flavor::GitHub, None, 3).await;
    s.fake
        .add_review_comment(s.pr, "ana", "README.md", 7, HUNK, ASK);
    s.w.engine.follow_once().await.unwrap();
    // The forge records the reply, and its answer never comes: gaffer dies there.
    s.fake.hang_next_comment();
    let run = s.w.spawn(&s.id);
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    while replies(&s).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the reply never reached the forge"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    run.abort();
    assert!(run.await.unwrap_err().is_cancelled());
    let view = s.w.view(&s.id).await;
    let reply = view.steps.iter().find(|s| s.step_id == "reply/1").unwrap();
    assert_eq!(reply.state, "started");

    // Restart: the reply step runs again, finds its reply by the marker, posts none.
    assert!(s.w.engine.recover_task(&s.id).await.unwrap());
    assert_eq!(finish(&s.w, &s.id, s.w.spawn(&s.id)).await, Stage::Done);
    assert_eq!(replies(&s).len(), 1, "{:#?}", replies(&s));
    let view = s.w.view(&s.id).await;
    let receipt: Value = serde_json::from_str(
        view.steps
            .iter()
            .find(|s| s.step_id == "reply/1")
            .unwrap()
            .receipt
            .as_deref()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(receipt["replies"][0]["found"], true);
}

async fn two_followers_open_one_follow_up(backend: Backend) {
    if !backend.available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (journal, _) = backend.journal(dir.path()).await;
    let s = shipped_on(Flavor::Gitea, Some(journal.clone()), 3).await;
    s.fake
        .add_review_comment(s.pr, "ana", "README.md", 7, HUNK, ASK);
    // Two processes' followers on one journal, at the same time.
    let other: Engine = s.w.engine_on(journal.clone());
    let (a, b) = tokio::join!(s.w.engine.follow_once(), other.follow_once());
    let opened = a.unwrap().opened.len() + b.unwrap().opened.len();
    assert_eq!(opened, 1, "{backend:?}");
    let events = follow_ups(&journal, &s.id).await;
    assert_eq!(events.len(), 1, "{backend:?}");
    // Still working, the task takes no follow-up; done again, it takes no second
    // one for the same comment: a follower that read before the first append and
    // offers it again is refused by the store.
    let head = journal.head(&StreamId::from(&s.id)).await.unwrap();
    let working = journal
        .append(
            &StreamId::from(&s.id),
            head,
            vec![gaffer_store::NewEvent::now(events[0].clone())],
        )
        .await
        .unwrap_err();
    assert!(
        working.to_string().contains("only a done task"),
        "{working}"
    );
    assert_eq!(finish(&s.w, &s.id, s.w.spawn(&s.id)).await, Stage::Done);
    let head = journal.head(&StreamId::from(&s.id)).await.unwrap();
    let err = journal
        .append(
            &StreamId::from(&s.id),
            head,
            vec![gaffer_store::NewEvent::now(events[0].clone())],
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("already followed up"),
        "{backend:?}: {err}"
    );
    assert_eq!(follow_ups(&journal, &s.id).await.len(), 1);
}

/// Done tasks the follower must pass over: `n` without a pull request (the branch
/// stayed local), and one whose following ended.
async fn done_and_not_followed(journal: &Arc<dyn Journal>, project: &str, n: usize) {
    let done = |id: &str| {
        vec![
            Event::TaskCreated {
                task_id: id.into(),
                project_id: project.into(),
                request: format!("local work {id}"),
                by: gaffer_core::Actor::user("ana", "cli"),
                options: Default::default(),
            },
            Event::TaskStageEntered {
                stage: Stage::Planning,
            },
            Event::TaskStageEntered {
                stage: Stage::Coding,
            },
            Event::TaskStageEntered {
                stage: Stage::Shipping,
            },
            Event::TaskDone {
                summary: json!({ "branch": format!("gaffer/{id}") }),
            },
        ]
    };
    for i in 0..n {
        let id = format!("t-local-{i:03}");
        let events = done(&id)
            .into_iter()
            .map(gaffer_store::NewEvent::now)
            .collect();
        journal.append(&StreamId(id), 0, events).await.unwrap();
    }
    let mut ended = done("t-merged");
    ended.push(Event::FollowingEnded {
        reason: "the pull request was merged".into(),
    });
    let events = ended.into_iter().map(gaffer_store::NewEvent::now).collect();
    journal
        .append(&StreamId("t-merged".into()), 0, events)
        .await
        .unwrap();
}

async fn the_follower_reads_only_followed_tasks(backend: Backend) {
    if !backend.available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (journal, _) = backend.journal(dir.path()).await;
    let counted = super::faulty::Faulty::new(journal.clone(), None, super::faulty::Death::Freeze);
    let s = shipped_on(Flavor::Gitea, Some(counted.clone()), 3).await;
    let project = journal
        .task(s.id.as_str())
        .await
        .unwrap()
        .unwrap()
        .task
        .project_id;
    // More done tasks than one page of a task list (100), none followed.
    done_and_not_followed(&journal, &project, 150).await;
    counted.take_reads();
    // Only the followed task (and its project) is read, none of the done ones.
    let only_the_followed = |reads: Vec<String>| {
        assert!(reads.contains(&s.id.0), "{backend:?}: {reads:?}");
        assert!(
            reads.iter().all(|r| *r == s.id.0 || *r == project),
            "{backend:?}: {reads:?}"
        );
    };
    let pass = s.w.engine.follow_once().await.unwrap();
    assert_eq!(pass.read, 1, "{backend:?}: {pass:?}");
    only_the_followed(counted.take_reads());
    // And it still does its job: a comment on the followed task opens a follow-up.
    s.fake
        .add_review_comment(s.pr, "ana", "README.md", 7, HUNK, ASK);
    let pass = s.w.engine.follow_once().await.unwrap();
    assert_eq!(pass.opened, vec![s.id.0.clone()], "{backend:?}");
    only_the_followed(counted.take_reads());
}

#[tokio::test]
async fn the_follower_reads_only_followed_tasks_on_sqlite() {
    the_follower_reads_only_followed_tasks(Backend::Sqlite).await;
}

#[tokio::test]
async fn the_follower_reads_only_followed_tasks_on_postgres() {
    the_follower_reads_only_followed_tasks(Backend::Postgres).await;
}

#[tokio::test]
async fn two_followers_open_one_follow_up_on_sqlite() {
    two_followers_open_one_follow_up(Backend::Sqlite).await;
}

#[tokio::test]
async fn two_followers_open_one_follow_up_on_postgres() {
    two_followers_open_one_follow_up(Backend::Postgres).await;
}

#[tokio::test]
async fn comments_past_review_fix_attempts_ask_a_person_who_may_stop_following() {
    let s = shipped_on(Flavor::Gitea, None, 1).await;
    // Round 1 is within the limit.
    s.fake
        .add_review_comment(s.pr, "ana", "README.md", 7, HUNK, ASK);
    s.w.engine.follow_once().await.unwrap();
    assert_eq!(finish(&s.w, &s.id, s.w.spawn(&s.id)).await, Stage::Done);
    // Round 2 is past it: a person is asked before the owner works.
    s.fake
        .add_pr_comment(s.pr, "bo", "Please also mention the MSRV");
    let mut events = s.w.journal.subscribe();
    assert_eq!(s.w.engine.follow_once().await.unwrap().opened.len(), 1);
    let run = s.w.spawn(&s.id);
    let (approval, summary, details) = next_approval(&mut events, ApprovalKind::Manual).await;
    assert!(
        summary.contains("round 2 of review fixes; 1 allowed"),
        "{summary}"
    );
    assert_eq!(details["comments"][0]["author"], "bo");
    decide_as_ana(&s.w, &approval, Decision::Deny, Some("enough")).await;
    assert_eq!(finish(&s.w, &s.id, run).await, Stage::Done);
    let view = s.w.view(&s.id).await;
    assert!(!step_ids(&view).contains(&"fix/2"), "{:?}", step_ids(&view));
    // No longer followed: new comments open nothing.
    s.fake.add_pr_comment(s.pr, "bo", "ping");
    let pass = s.w.engine.follow_once().await.unwrap();
    assert_eq!((pass.read, pass.opened.len()), (0, 0));
    assert_eq!(replies(&s).len(), 1, "only round 1 was answered");
}

#[tokio::test]
async fn on_gitlab_a_diff_note_is_fixed_pushed_and_answered_in_its_discussion() {
    let remote = BareRemote::new().unwrap();
    let fake = FakeGitLab::start("acme", "demo", TOKEN).await.unwrap();
    fake.attach_remote(&remote);
    fake.report_ci_for_every_commit("success", "all green\n");
    let ship = shipping(ForgeKind::GitLab, &fake.base_url(), &remote.url(), TOKEN);
    let w = World::build("grep -q '^## Installation' README.md", |s| {
        s.shipping.insert("demo".into(), ship);
    })
    .await;
    w.script(
        "planner",
        vec![plan_answer(&["Add an installation section"])],
    );
    let mut fix = write("README.md", FIXED);
    fix["expect_prompt_contains"] = json!(ASK);
    w.script("owner", vec![write("README.md", README_DONE), fix]);
    w.script("reviewer", vec![verdict(json!({ "verdict": "done" }))]);
    let id = w.task(REQUEST, true).await;
    assert_eq!(finish(&w, &id, w.spawn(&id)).await, Stage::Done);
    let mr = fake.mrs()[0].clone();
    let first_sha = remote.branch_sha(&mr.source_branch).unwrap();

    let note = fake.add_mr_comment(mr.iid, "ana", Some(("README.md", 7)), ASK);
    let pass = w.engine.follow_once().await.unwrap();
    assert_eq!(pass.opened, std::slice::from_ref(&id.0));
    assert_eq!(finish(&w, &id, w.spawn(&id)).await, Stage::Done);

    let new_sha = remote.branch_sha(&mr.source_branch).unwrap();
    assert!(
        is_ancestor(&remote, &first_sha, &new_sha),
        "not a fast-forward"
    );
    assert_ne!(new_sha, first_sha);
    // One reply, in the note's discussion; gaffer's reply opens nothing more.
    let thread = fake
        .discussions()
        .into_iter()
        .find(|d| d.notes[0].id == note)
        .unwrap();
    assert_eq!(thread.notes.len(), 2, "{thread:#?}");
    assert!(thread.notes[1].body.contains(&new_sha[..7]));
    assert_eq!(w.engine.follow_once().await.unwrap().opened.len(), 0);
    fake.merge_mr(mr.iid);
    assert_eq!(w.engine.follow_once().await.unwrap().ended.len(), 1);
}

/// A pull-request comment delivered by webhook wakes the follower at once: with an
/// hour between its own passes, only the wake explains a follow-up within seconds.
/// `deliver` adds the comment on the fake forge and gives the delivery it sends.
async fn a_webhook_wakes_the_follower_at_once(
    flavor: Flavor,
    deliver: impl Fn(&FakeForge, u64) -> HookDelivery,
) {
    const SECRET: &str = "hook-secret-follow-77e2a";
    let s = shipped_with(flavor, None, 3, |st| {
        if let Some(f) = st.shipping.get_mut("demo").and_then(|s| s.follow.as_mut()) {
            f.every = Duration::from_secs(3600);
        }
        st.intake.insert(
            "demo".into(),
            gaffer_engine::Intake {
                label: "gaffer".into(),
                assignee: None,
                secret: Some(gaffer_forge::Secret::new(SECRET)),
                poll_interval: None,
            },
        );
    })
    .await;
    assert_eq!(
        s.w.engine.follow_interval(),
        Some(Duration::from_secs(3600))
    );
    let shutdown = tokio_util::sync::CancellationToken::new();
    let follower = {
        let engine = s.w.engine.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move { engine.follow(shutdown).await })
    };
    // Its first pass (at start) finds nothing to do; then it sleeps for an hour.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(follow_ups(&s.w.journal, &s.id).await.is_empty());

    let d = deliver(&s.fake, s.pr);
    let lower = |headers: Vec<(String, String)>| -> Vec<(String, String)> {
        headers
            .into_iter()
            .map(|(k, v)| (k.to_ascii_lowercase(), v))
            .collect()
    };
    let headers = lower(d.signed(SECRET));
    let forge = match flavor {
        Flavor::Gitea => "gitea",
        Flavor::GitHub => "github",
    };
    // A delivery without the project's signature wakes nothing.
    let forged = lower(d.signed("another-secret-of-16+"));
    assert!(
        gaffer_app::HookReceiver::receive_hook(&s.w.engine, forge, &forged, &d.body)
            .await
            .is_err()
    );
    let answer = gaffer_app::HookReceiver::receive_hook(&s.w.engine, forge, &headers, &d.body)
        .await
        .unwrap();
    assert_eq!(answer.outcome, "woken", "{flavor:?}: {answer:?}");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while follow_ups(&s.w.journal, &s.id).await.is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the woken follower opened no follow-up"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(follow_ups(&s.w.journal, &s.id).await.len(), 1);
    shutdown.cancel();
    follower.await.unwrap();
}

#[tokio::test]
async fn a_review_comment_webhook_wakes_the_follower_at_once() {
    a_webhook_wakes_the_follower_at_once(Flavor::GitHub, |fake, pr| {
        fake.add_review_comment(pr, "ana", "README.md", 7, HUNK, ASK);
        fake.pr_comment_hook(pr, ASK)
    })
    .await;
}

/// Gitea and Forgejo send a review that requests changes as `X-Gitea-Event:
/// pull_request_rejected`, not as a comment event.
#[tokio::test]
async fn a_gitea_review_requesting_changes_wakes_the_follower_at_once() {
    a_webhook_wakes_the_follower_at_once(Flavor::Gitea, |fake, pr| {
        let review = fake.add_review(pr, "ana", Verdict::RequestChanges, ASK);
        fake.review_hook(review).unwrap()
    })
    .await;
}

/// What bots say (coverage reports, CI summaries) and an approval's "LGTM" open no
/// fix round; a person's comment after them does.
#[tokio::test]
async fn bots_and_approvals_open_no_fix_round() {
    for flavor in [Flavor::Gitea, Flavor::GitHub] {
        let s = shipped_on(flavor, None, 3).await;
        let bot = match flavor {
            Flavor::GitHub => "github-actions[bot]",
            Flavor::Gitea => "gitea-actions",
        };
        s.fake.add_pr_comment(
            s.pr,
            bot,
            "Coverage: 81% (+0.4%). Please review the report.",
        );
        s.fake
            .add_review(s.pr, "ana", Verdict::Approve, "LGTM, maybe rename it later");
        let pass = s.w.engine.follow_once().await.unwrap();
        assert_eq!(pass.opened, Vec::<String>::new(), "{flavor:?}");
        assert_eq!(pass.read, 1, "{flavor:?}");

        s.fake.add_pr_comment(s.pr, "bo", ASK);
        let pass = s.w.engine.follow_once().await.unwrap();
        assert_eq!(pass.opened, std::slice::from_ref(&s.id.0), "{flavor:?}");
        let opened = follow_ups(&s.w.journal, &s.id).await;
        let Event::FollowUpOpened { keys, .. } = &opened[0] else {
            unreachable!()
        };
        assert_eq!(
            keys.len(),
            1,
            "{flavor:?}: only the person's comment: {keys:?}"
        );
    }
}
