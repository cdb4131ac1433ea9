//! The forge clients against the testkit's fake Gitea, GitHub and Vikunja.
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gaffer_forge::*;
use gaffer_testkit::forge::{BareRemote, FakeForge, FakeVikunja, Flavor};
use pretty_assertions::assert_eq;

use super::push::repo_with_task_branch;

pub(super) const TOKEN: &str = "tok-0123456789-secret";
pub(super) const BOTH: [Flavor; 2] = [Flavor::Gitea, Flavor::GitHub];

fn config(base: &str, flavor: Flavor, token: &str) -> ForgeConfig {
    let kind = match flavor {
        Flavor::Gitea => ForgeKind::Gitea,
        Flavor::GitHub => ForgeKind::GitHub,
    };
    let mut c = ForgeConfig::new(
        kind,
        base,
        "acme",
        "app",
        Secret::new(token),
        "GAFFER_TEST_TOKEN",
    );
    c.request_timeout = Duration::from_secs(5);
    c
}

pub(super) fn client(fake: &FakeForge, flavor: Flavor) -> Box<dyn Forge> {
    connect(config(&fake.base_url(), flavor, TOKEN)).unwrap()
}

pub(super) fn new_pr(head: &str) -> NewPullRequest {
    NewPullRequest {
        title: "Add an installation section".into(),
        body: "What changed: INSTALL.md\n\nReview: done".into(),
        head: head.into(),
        base: "main".into(),
        labels: vec!["gaffer".into()],
    }
}

fn no_secret(text: &str) {
    assert!(!text.contains(TOKEN), "the token leaked: {text}");
}

/// A fake with the task branch pushed to its bare remote.
pub(super) async fn shipped(flavor: Flavor) -> (FakeForge, BareRemote, tempfile::TempDir, String) {
    let fake = FakeForge::start(flavor, "acme", "app", TOKEN)
        .await
        .unwrap();
    let remote = BareRemote::new().unwrap();
    let (dir, repo, sha) = repo_with_task_branch();
    repo.push(&remote.url(), "main", &GitAuth::default())
        .unwrap();
    repo.push(&remote.url(), "gaffer/t-1", &GitAuth::default())
        .unwrap();
    fake.attach_remote(&remote);
    (fake, remote, dir, sha)
}

#[tokio::test]
async fn find_before_create_yields_exactly_one_pr_on_both_forges() {
    for flavor in BOTH {
        let (fake, _remote, _dir, sha) = shipped(flavor).await;
        let forge = client(&fake, flavor);
        assert_eq!(forge.find_open_pr("gaffer/t-1").await.unwrap(), None);
        let (pr, created) = forge.ensure_pr(&new_pr("gaffer/t-1")).await.unwrap();
        assert!(created);
        assert_eq!(pr.head, "gaffer/t-1");
        assert_eq!(pr.base, "main");
        assert_eq!(pr.head_sha, sha);
        assert!(pr.warnings.is_empty(), "{:?}", pr.warnings);
        assert!(pr.url.contains("/acme/app/"), "{}", pr.url);
        // The ship step runs again: it finds the PR.
        let (again, created) = forge.ensure_pr(&new_pr("gaffer/t-1")).await.unwrap();
        assert!(!created);
        assert_eq!(again.number, pr.number);
        // A blind second create is refused by the forge, with its own message.
        let err = forge.create_pr(&new_pr("gaffer/t-1")).await.unwrap_err();
        let expected = if flavor == Flavor::Gitea { 409 } else { 422 };
        match &err {
            ApiError::Rejected {
                status, message, ..
            } => {
                assert_eq!(*status, expected);
                assert!(message.contains("already exists"), "{message}");
            }
            other => panic!("{flavor:?}: {other}"),
        }
        let prs = fake.prs();
        assert_eq!(prs.len(), 1, "{flavor:?}");
        assert_eq!(prs[0].labels, ["gaffer"]);
        assert_eq!(prs[0].body, new_pr("x").body);
    }
}

#[tokio::test]
async fn a_crash_between_create_sent_and_response_recorded_is_reconciled_by_lookup() {
    for flavor in BOTH {
        let (fake, _remote, _dir, _sha) = shipped(flavor).await;
        fake.hang_next_pr_create();
        {
            let forge = client(&fake, flavor);
            // The forge creates the PR; gaffer dies before it reads the answer.
            // It dies (the future is dropped) once the forge has the PR.
            let pr = new_pr("gaffer/t-1");
            let create = forge.create_pr(&pr);
            tokio::pin!(create);
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                tokio::select! {
                    r = &mut create => panic!("the answer should never arrive: {r:?}"),
                    _ = tokio::time::sleep(Duration::from_millis(20)) => {
                        if !fake.prs().is_empty() {
                            break;
                        }
                        assert!(Instant::now() < deadline, "the create never reached the forge");
                    }
                }
            }
        }
        assert_eq!(fake.prs().len(), 1);
        // Restart: the step's effect is unknown; the probe finds the PR.
        let forge = client(&fake, flavor);
        let found = forge.find_open_pr("gaffer/t-1").await.unwrap().unwrap();
        let (pr, created) = forge.ensure_pr(&new_pr("gaffer/t-1")).await.unwrap();
        assert!(!created);
        assert_eq!(pr.number, found.number);
        assert_eq!(fake.prs().len(), 1, "{flavor:?}: exactly one PR");
        // A create that times out after the forge acted: the error says the effect is
        // unknown, and the lookup finds the PR.
        fake.close_pr(pr.number);
        fake.hang_next_pr_create();
        let mut c = config(&fake.base_url(), flavor, TOKEN);
        c.request_timeout = Duration::from_millis(1500);
        let hasty = connect(c).unwrap();
        let err = hasty.create_pr(&new_pr("gaffer/t-1")).await.unwrap_err();
        assert!(matches!(err, ApiError::Unreachable { .. }), "{err}");
        assert!(err.effect_unknown(), "{err}");
        no_secret(&err.to_string());
        let (pr, created) = forge.ensure_pr(&new_pr("gaffer/t-1")).await.unwrap();
        assert!(!created);
        assert_eq!(fake.prs().iter().filter(|p| p.state == "open").count(), 1);
        assert!(!ApiError::Rejected {
            forge: "x".into(),
            status: 422,
            message: "m".into()
        }
        .effect_unknown());
        // A closed PR is not the open one.
        fake.close_pr(pr.number);
        assert_eq!(forge.find_open_pr("gaffer/t-1").await.unwrap(), None);
    }
}

#[tokio::test]
async fn a_create_whose_answer_is_lost_is_looked_up_and_labelled_without_a_second_create() {
    for flavor in BOTH {
        let (fake, _remote, _dir, sha) = shipped(flavor).await;
        let mut c = config(&fake.base_url(), flavor, TOKEN);
        c.request_timeout = Duration::from_millis(1500);
        let forge = connect(c).unwrap();
        // The answer never comes (a timeout), then the connection is cut mid-answer.
        for lose in [
            FakeForge::hang_next_pr_create,
            FakeForge::cut_next_pr_create_answer,
        ] {
            for pr in fake.prs() {
                fake.close_pr(pr.number);
            }
            lose(&fake);
            let before = fake.prs().len();
            let (pr, created) = forge.ensure_pr(&new_pr("gaffer/t-1")).await.unwrap();
            let prs = fake.prs();
            assert_eq!(prs.len(), before + 1, "{flavor:?}: one create, no second");
            let made = prs.last().unwrap();
            assert!(created, "{flavor:?}: this call made it");
            assert_eq!(
                (pr.number, pr.head_sha.as_str()),
                (made.number, sha.as_str())
            );
            assert_eq!(made.labels, ["gaffer"], "{flavor:?}");
            assert!(pr.warnings.is_empty(), "{flavor:?}: {:?}", pr.warnings);
        }
    }
}

#[tokio::test]
async fn ci_on_github_pending_then_failure_with_log_then_success_on_a_new_commit() {
    let fake = Arc::new(
        FakeForge::start(Flavor::GitHub, "acme", "app", TOKEN)
            .await
            .unwrap(),
    );
    let forge = client(&fake, Flavor::GitHub);
    let limits = CiWait {
        first_interval: Duration::from_millis(40),
        max_interval: Duration::from_millis(160),
        timeout: Duration::from_secs(10),
        max_transient_errors: 2,
        no_checks_after: None,
    };
    fake.set_check_run("sha1", "test", "in_progress", None, None);
    fake.set_status("sha1", "ci/lint", "success", "lint passed", "");
    let later = fake.clone();
    let flip = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        later.set_check_run(
            "sha1",
            "test",
            "completed",
            Some("failure"),
            Some("running 3 tests\ntest retry ... FAILED\nerror: 1 test failed\n"),
        );
    });
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let status = wait_for_ci(forge.as_ref(), "sha1", &limits, move |s| {
        log.lock().unwrap().push(s.state)
    })
    .await
    .unwrap();
    flip.await.unwrap();
    assert_eq!(*seen.lock().unwrap(), [CiState::Pending, CiState::Failure]);
    assert_eq!(status.state, CiState::Failure);
    assert_eq!(status.checks.len(), 2);
    let failing: Vec<_> = status.failing().collect();
    assert_eq!(failing.len(), 1);
    let log = forge.failing_log(failing[0]).await.unwrap();
    assert!(log.is_log);
    assert!(log.text.contains("test retry ... FAILED"), "{}", log.text);
    // The owner fixes; a new commit goes green.
    fake.set_check_run("sha2", "test", "queued", None, None);
    let later = fake.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        later.set_check_run("sha2", "test", "completed", Some("success"), None);
    });
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let ok = wait_for_ci(forge.as_ref(), "sha2", &limits, move |s| {
        log.lock().unwrap().push(s.state)
    })
    .await
    .unwrap();
    assert_eq!(ok.state, CiState::Success);
    assert_eq!(*seen.lock().unwrap(), [CiState::Pending, CiState::Success]);
}

#[tokio::test]
async fn ci_on_gitea_statuses_failure_gives_description_and_link_then_success() {
    let fake = Arc::new(
        FakeForge::start(Flavor::Gitea, "acme", "app", TOKEN)
            .await
            .unwrap(),
    );
    let forge = client(&fake, Flavor::Gitea);
    let limits = CiWait {
        first_interval: Duration::from_millis(40),
        max_interval: Duration::from_millis(160),
        timeout: Duration::from_secs(10),
        max_transient_errors: 2,
        no_checks_after: None,
    };
    fake.set_status(
        "sha1",
        "ci/woodpecker/push/test",
        "pending",
        "Pipeline is pending",
        "",
    );
    let later = fake.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(250)).await;
        later.set_status(
            "sha1",
            "ci/woodpecker/push/test",
            "failure",
            "Pipeline failed",
            "https://ci.example/repos/1/pipeline/7",
        );
    });
    let changes = Arc::new(Mutex::new(Vec::new()));
    let log = changes.clone();
    let status = wait_for_ci(forge.as_ref(), "sha1", &limits, move |s| {
        log.lock().unwrap().push(s.state)
    })
    .await
    .unwrap();
    assert_eq!(
        *changes.lock().unwrap(),
        [CiState::Pending, CiState::Failure]
    );
    let check = status.failing().next().unwrap().clone();
    assert_eq!(check.name, "ci/woodpecker/push/test");
    let log = forge.failing_log(&check).await.unwrap();
    assert!(!log.is_log);
    assert!(log.text.contains("Pipeline failed"), "{}", log.text);
    assert!(log.text.contains("pipeline/7"), "{}", log.text);
    fake.set_status(
        "sha2",
        "ci/woodpecker/push/test",
        "success",
        "Pipeline succeeded",
        "",
    );
    let ok = wait_for_ci(forge.as_ref(), "sha2", &limits, |_| {})
        .await
        .unwrap();
    assert_eq!(ok.state, CiState::Success);
}

#[tokio::test]
async fn ci_wait_backs_off_and_honours_the_time_limit() {
    let fake = FakeForge::start(Flavor::Gitea, "acme", "app", TOKEN)
        .await
        .unwrap();
    let forge = client(&fake, Flavor::Gitea);
    fake.set_status("sha1", "ci", "pending", "", "");
    let limits = CiWait {
        first_interval: Duration::from_millis(50),
        max_interval: Duration::from_millis(400),
        timeout: Duration::from_millis(1200),
        max_transient_errors: 2,
        no_checks_after: None,
    };
    let start = Instant::now();
    let mut changes = 0;
    let err = wait_for_ci(forge.as_ref(), "sha1", &limits, |_| changes += 1)
        .await
        .unwrap_err();
    let took = start.elapsed();
    assert!(
        matches!(
            err,
            ApiError::CiTimedOut {
                last: CiState::Pending,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("did not finish"), "{err}");
    assert!(took >= Duration::from_millis(1200), "{took:?}");
    assert!(took < Duration::from_secs(4), "{took:?}");
    assert_eq!(changes, 1, "one state, reported once");
    // 50, 100, 200, 400, 400 … ms: far fewer polls than a fixed 50 ms would make.
    let polls = fake
        .requests()
        .iter()
        .filter(|r| r.contains("/commits/sha1/status"))
        .count();
    assert!((4..=9).contains(&polls), "{polls} polls");
}

#[tokio::test]
async fn a_bad_token_is_refused_clearly_and_never_echoed() {
    for flavor in BOTH {
        let fake = FakeForge::start(flavor, "acme", "app", "the-right-token")
            .await
            .unwrap();
        let forge = connect(config(&fake.base_url(), flavor, TOKEN)).unwrap();
        assert!(!format!("{:?}", config(&fake.base_url(), flavor, TOKEN)).contains(TOKEN));
        let err = forge.find_open_pr("gaffer/t-1").await.unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, ApiError::Unauthorized { .. }), "{text}");
        assert!(text.contains("the token for"), "{text}");
        assert!(text.contains("GAFFER_TEST_TOKEN"), "{text}");
        no_secret(&text);
        no_secret(&format!("{err:?}"));
        let err = forge.create_pr(&new_pr("gaffer/t-1")).await.unwrap_err();
        assert!(matches!(err, ApiError::Unauthorized { .. }), "{err}");
        assert_eq!(fake.prs().len(), 0);
    }
}

#[tokio::test]
async fn an_unreachable_forge_names_the_url() {
    for flavor in BOTH {
        let forge = connect(config("http://127.0.0.1:9", flavor, TOKEN)).unwrap();
        let err = forge.ci_status("abc").await.unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, ApiError::Unreachable { .. }), "{text}");
        assert!(text.contains("127.0.0.1:9"), "{text}");
        assert!(text.contains("check the base URL"), "{text}");
        no_secret(&text);
        no_secret(&format!("{err:?}"));
    }
}

#[tokio::test]
async fn unknown_repositories_and_refusals_are_typed_errors() {
    for flavor in BOTH {
        let (fake, _remote, _dir, _sha) = shipped(flavor).await;
        let mut c = config(&fake.base_url(), flavor, TOKEN);
        c.repo = "nope".into();
        let err = connect(c).unwrap().find_open_pr("x").await.unwrap_err();
        assert!(matches!(err, ApiError::NotFound { .. }), "{err}");
        assert!(err.to_string().contains("acme/nope"), "{err}");
        let forge = client(&fake, flavor);
        // A head branch that was never pushed.
        let err = forge
            .create_pr(&new_pr("gaffer/missing"))
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                ApiError::NotFound { .. } | ApiError::Rejected { status: 422, .. }
            ),
            "{flavor:?}: {err}"
        );
        let text = err.to_string();
        assert!(
            text.contains("gaffer/missing") || text.contains("head is invalid"),
            "{text}"
        );
        // Branch protection on the base: the forge's own message, no PR, no retry loop.
        fake.refuse_prs(Some((
            422,
            "base branch main is protected: changes need an approved review",
        )));
        let err = forge.ensure_pr(&new_pr("gaffer/t-1")).await.unwrap_err();
        let text = err.to_string();
        assert!(
            matches!(err, ApiError::Rejected { status: 422, .. }),
            "{text}"
        );
        assert!(text.contains("protected"), "{text}");
        no_secret(&text);
        assert_eq!(fake.prs().len(), 0);
    }
}

#[tokio::test]
async fn rate_limits_are_waited_out_or_reported_with_the_wait() {
    for flavor in BOTH {
        let fake = FakeForge::start(flavor, "acme", "app", TOKEN)
            .await
            .unwrap();
        let forge = client(&fake, flavor);
        // A short Retry-After is honoured, then the request goes through.
        fake.rate_limit_next(1, Some(1), None);
        let start = Instant::now();
        assert_eq!(forge.find_open_pr("gaffer/t-1").await.unwrap(), None);
        assert!(
            start.elapsed() >= Duration::from_millis(950),
            "{:?}",
            start.elapsed()
        );
        // A wait longer than allowed comes back as an error with the hint.
        let mut c = config(&fake.base_url(), flavor, TOKEN);
        c.max_rate_limit_wait = Duration::ZERO;
        let impatient = connect(c).unwrap();
        fake.rate_limit_next(1, Some(30), None);
        let err = impatient.find_open_pr("gaffer/t-1").await.unwrap_err();
        match &err {
            ApiError::RateLimited { retry_after, .. } => assert_eq!(retry_after.as_secs(), 30),
            other => panic!("{other}"),
        }
        assert!(err.to_string().contains("retry after 30s"), "{err}");
    }
    // GitHub's primary limit: 403 with X-RateLimit-Remaining: 0 and X-RateLimit-Reset.
    let fake = FakeForge::start(Flavor::GitHub, "acme", "app", TOKEN)
        .await
        .unwrap();
    let mut c = config(&fake.base_url(), Flavor::GitHub, TOKEN);
    c.max_rate_limit_wait = Duration::ZERO;
    fake.rate_limit_next(1, None, Some(120));
    let err = connect(c).unwrap().ci_status("abc").await.unwrap_err();
    match &err {
        ApiError::RateLimited {
            retry_after,
            reset_at,
            ..
        } => {
            assert!(reset_at.is_some());
            assert!(
                (110..=121).contains(&retry_after.as_secs()),
                "{retry_after:?}"
            );
        }
        other => panic!("403 primary limit: {other}"),
    }
    assert!(fake.requests().iter().any(|r| r.ends_with("-> 403")));
}

#[tokio::test]
async fn issues_are_read_by_url_and_commented() {
    for flavor in BOTH {
        let fake = FakeForge::start(flavor, "acme", "app", TOKEN)
            .await
            .unwrap();
        let forge = client(&fake, flavor);
        let n = fake.add_issue("Retry test is flaky", "It fails one run in ten.");
        let url = format!("{}/acme/app/issues/{n}", fake.base_url());
        let issue = forge.issue(&url).await.unwrap();
        assert_eq!(issue.title, "Retry test is flaky");
        assert_eq!(issue.body, "It fails one run in ten.");
        assert_eq!(issue.number, n);
        assert_eq!(issue.url, url);
        assert_eq!(
            forge.issue(&format!("#{n}")).await.unwrap().title,
            issue.title
        );
        let c = forge
            .comment_on_issue(&url, "Shipped in acme/app#2")
            .await
            .unwrap();
        assert!(c.url.contains("issuecomment"), "{}", c.url);
        // After a crash mid-comment, a marker finds it.
        let marked = forge
            .comment_on_issue(&url, "Shipped.\n<!-- gaffer:t-1 -->")
            .await
            .unwrap();
        assert_eq!(
            forge
                .find_comment(&url, "<!-- gaffer:t-1 -->")
                .await
                .unwrap(),
            Some(marked)
        );
        assert_eq!(
            forge
                .find_comment(&url, "<!-- gaffer:t-9 -->")
                .await
                .unwrap(),
            None
        );
        let comments = fake.comments();
        assert_eq!(comments.len(), 2);
        assert_eq!(comments[0].issue, n);
        assert_eq!(comments[0].body, "Shipped in acme/app#2");
        let err = forge.issue("acme/app#99").await.unwrap_err();
        assert!(matches!(err, ApiError::NotFound { .. }), "{err}");
        let err = forge
            .issue("https://example.com/nothing")
            .await
            .unwrap_err();
        assert!(matches!(err, ApiError::BadInput(_)), "{err}");
    }
}

#[test]
fn issue_references_parse() {
    let r = IssueRef::parse("https://github.com/o/r/issues/12", "a", "b").unwrap();
    assert_eq!(
        (r.owner.as_str(), r.repo.as_str(), r.number),
        ("o", "r", 12)
    );
    let r = IssueRef::parse("https://git.example.com/sub/o/r/pulls/3?x=1", "a", "b").unwrap();
    assert_eq!((r.owner.as_str(), r.repo.as_str(), r.number), ("o", "r", 3));
    let r = IssueRef::parse("o/r#5", "a", "b").unwrap();
    assert_eq!((r.owner.as_str(), r.number), ("o", 5));
    let r = IssueRef::parse("7", "a", "b").unwrap();
    assert_eq!((r.owner.as_str(), r.repo.as_str(), r.number), ("a", "b", 7));
    assert!(IssueRef::parse("seven", "a", "b").is_err());
}

#[tokio::test]
async fn vikunja_tasks_are_created_per_subtask_and_marked_done() {
    let fake = FakeVikunja::start("vik-secret-token", &[7]).await.unwrap();
    let v = Vikunja::new(
        &fake.base_url(),
        Secret::new("vik-secret-token"),
        "GAFFER_VIKUNJA_TOKEN",
        7,
    )
    .unwrap();
    let a = v
        .create_task("Write INSTALL.md", "gaffer task t-1, subtask 1")
        .await
        .unwrap();
    let b = v
        .create_task("Link it from README", "gaffer task t-1, subtask 2")
        .await
        .unwrap();
    assert_ne!(a.id, b.id);
    assert!(!a.done);
    assert_eq!(a.project_id, 7);
    // After a crash mid-create, the marker in the title finds the task.
    let c = v
        .create_task("Update CHANGELOG [gaffer t-1/3]", "subtask 3")
        .await
        .unwrap();
    assert_eq!(
        v.find_task("[gaffer t-1/3]").await.unwrap(),
        Some(c.clone())
    );
    assert_eq!(v.find_task("[gaffer t-1/9]").await.unwrap(), None);
    let done = v.mark_done(a.id).await.unwrap();
    assert!(done.done);
    assert_eq!(done.title, "Write INSTALL.md");
    // Marking done again is harmless.
    assert!(v.mark_done(a.id).await.unwrap().done);
    let tasks = fake.tasks();
    assert_eq!(tasks.len(), 3);
    assert!(tasks[0].done && !tasks[1].done);
    assert_eq!(tasks[0].description, "gaffer task t-1, subtask 1");
    assert!(v.task(b.id).await.unwrap().title.contains("README"));
    // Errors.
    let bad = Vikunja::new(
        &fake.base_url(),
        Secret::new("wrong-vik-token"),
        "GAFFER_VIKUNJA_TOKEN",
        7,
    )
    .unwrap();
    let err = bad.create_task("x", "").await.unwrap_err();
    assert!(matches!(err, ApiError::Unauthorized { .. }), "{err}");
    assert!(!err.to_string().contains("wrong-vik-token"));
    let other = Vikunja::new(
        &fake.base_url(),
        Secret::new("vik-secret-token"),
        "GAFFER_VIKUNJA_TOKEN",
        8,
    )
    .unwrap();
    let err = other.create_task("x", "").await.unwrap_err();
    assert!(matches!(err, ApiError::NotFound { .. }), "{err}");
    assert!(matches!(
        v.mark_done(999).await.unwrap_err(),
        ApiError::NotFound { .. }
    ));
    assert_eq!(fake.tasks().len(), 3);
}

#[tokio::test]
async fn ci_wait_sleeps_out_rate_limits_and_goes_on() {
    let fake = FakeForge::start(Flavor::GitHub, "acme", "app", TOKEN)
        .await
        .unwrap();
    let mut c = config(&fake.base_url(), Flavor::GitHub, TOKEN);
    c.max_rate_limit_wait = Duration::ZERO; // the wait loop, not the client, waits
    let forge = connect(c).unwrap();
    fake.set_check_run("sha1", "build", "completed", Some("success"), None);
    fake.rate_limit_next(2, Some(1), None);
    let limits = CiWait {
        first_interval: Duration::from_millis(20),
        max_interval: Duration::from_millis(40),
        timeout: Duration::from_secs(10),
        max_transient_errors: 2,
        no_checks_after: None,
    };
    let start = Instant::now();
    let status = wait_for_ci(forge.as_ref(), "sha1", &limits, |_| {})
        .await
        .unwrap();
    assert_eq!(status.state, CiState::Success);
    // Two refusals, each with Retry-After: 1.
    assert!(
        start.elapsed() >= Duration::from_millis(1900),
        "{:?}",
        start.elapsed()
    );
    let limited = fake
        .requests()
        .iter()
        .filter(|r| r.ends_with("-> 429"))
        .count();
    assert_eq!(limited, 2);
}

/// The ship sequence the engine will drive, on both forges: push → PR → CI pending →
/// failure with its log → a fix pushed → CI success → tracker tasks done → issue
/// commented. Exactly one PR, one comment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ship_sequence_end_to_end_on_both_forges() {
    for flavor in BOTH {
        let fake = Arc::new(
            FakeForge::start(flavor, "acme", "app", TOKEN)
                .await
                .unwrap(),
        );
        let remote = BareRemote::new().unwrap();
        fake.serve_git(&remote);
        let tracker = FakeVikunja::start("vik-token-1234", &[7]).await.unwrap();
        let forge = client(&fake, flavor);
        let vikunja = Vikunja::new(
            &tracker.base_url(),
            Secret::new("vik-token-1234"),
            "GAFFER_VIKUNJA_TOKEN",
            7,
        )
        .unwrap();
        let issue_no = fake.add_issue("Document installation", "Add an INSTALL section.");
        let issue_url = format!("{}/acme/app/issues/{issue_no}", fake.base_url());

        // `gaffer run --issue URL` starts from the issue's text.
        let issue = forge.issue(&issue_url).await.unwrap();
        assert_eq!(issue.title, "Document installation");
        // One tracker task per plan subtask.
        let t1 = vikunja
            .create_task("Write INSTALL.md [gaffer t-1/1]", "")
            .await
            .unwrap();
        let t2 = vikunja
            .create_task("Link it from README [gaffer t-1/2]", "")
            .await
            .unwrap();

        // Push with the token over HTTP.
        let (dir, repo, sha1) = repo_with_task_branch();
        let auth = GitAuth::token(Secret::new(TOKEN));
        let url = fake.git_url();
        let (r, a, u) = (repo.clone(), auth.clone(), url.clone());
        tokio::task::spawn_blocking(move || {
            r.push(&u, "main", &a).unwrap();
            r.push(&u, "gaffer/t-1", &a).unwrap()
        })
        .await
        .unwrap();

        // PR (find before create).
        let (pr, created) = forge.ensure_pr(&new_pr("gaffer/t-1")).await.unwrap();
        assert!(created);
        assert_eq!(pr.head_sha, sha1);

        // CI: pending, then failure with a log.
        let limits = CiWait {
            first_interval: Duration::from_millis(30),
            max_interval: Duration::from_millis(120),
            timeout: Duration::from_secs(10),
            max_transient_errors: 2,
            no_checks_after: None,
        };
        let set = move |f: &FakeForge, sha: &str, state: &str, log: Option<&str>| match flavor {
            Flavor::Gitea => f.set_status(
                sha,
                "ci/woodpecker/pr/test",
                state,
                log.unwrap_or(state),
                "https://ci.example/1",
            ),
            Flavor::GitHub => {
                let (status, conclusion) = match state {
                    "pending" => ("in_progress", None),
                    other => ("completed", Some(other)),
                };
                f.set_check_run(sha, "test", status, conclusion, log);
            }
        };
        set(&fake, &sha1, "pending", None);
        let later = fake.clone();
        let s1 = sha1.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            set(&later, &s1, "failure", Some("test install_docs ... FAILED"));
        });
        let events = Arc::new(Mutex::new(Vec::new()));
        let ev = events.clone();
        let failed = wait_for_ci(forge.as_ref(), &sha1, &limits, move |s| {
            ev.lock().unwrap().push((s.sha.clone(), s.state))
        })
        .await
        .unwrap();
        assert_eq!(failed.state, CiState::Failure);
        let log = forge
            .failing_log(failed.failing().next().unwrap())
            .await
            .unwrap();
        assert!(log.text.contains("install_docs ... FAILED"), "{}", log.text);

        // The owner fixes; the fix is committed and pushed; CI goes green.
        std::fs::write(dir.path().join("fix.txt"), "fixed\n").unwrap();
        super::push::sh(dir.path(), &["checkout", "-q", "gaffer/t-1"]);
        super::push::sh(dir.path(), &["add", "."]);
        super::push::sh(dir.path(), &["commit", "-q", "-m", "fix"]);
        super::push::sh(dir.path(), &["checkout", "-q", "main"]);
        let sha2 = repo.resolve("gaffer/t-1").unwrap();
        let (r, a, u) = (repo.clone(), auth.clone(), url.clone());
        let pushed = tokio::task::spawn_blocking(move || r.push(&u, "gaffer/t-1", &a))
            .await
            .unwrap()
            .unwrap();
        assert!(pushed.pushed);
        set(&fake, &sha2, "pending", None);
        let later = fake.clone();
        let s2 = sha2.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(150)).await;
            set(&later, &s2, "success", None);
        });
        let ev = events.clone();
        let green = wait_for_ci(forge.as_ref(), &sha2, &limits, move |s| {
            ev.lock().unwrap().push((s.sha.clone(), s.state))
        })
        .await
        .unwrap();
        assert_eq!(green.state, CiState::Success);
        assert_eq!(
            *events.lock().unwrap(),
            [
                (sha1.clone(), CiState::Pending),
                (sha1.clone(), CiState::Failure),
                (sha2.clone(), CiState::Pending),
                (sha2.clone(), CiState::Success),
            ]
        );
        // The PR follows the branch; still one PR.
        let open = forge.find_open_pr("gaffer/t-1").await.unwrap().unwrap();
        assert_eq!(open.head_sha, sha2);
        assert_eq!(fake.prs().len(), 1);

        // Tracker tasks done; the issue gets the PR link.
        vikunja.mark_done(t1.id).await.unwrap();
        vikunja.mark_done(t2.id).await.unwrap();
        assert!(tracker.tasks().iter().all(|t| t.done));
        forge
            .comment_on_issue(
                &issue_url,
                &format!("Shipped in {}\n<!-- gaffer:t-1 -->", pr.url),
            )
            .await
            .unwrap();
        let comments = fake.comments();
        assert_eq!(comments.len(), 1);
        assert!(comments[0].body.contains(&pr.url));
    }
}

#[tokio::test]
async fn ci_wait_stops_early_when_no_check_ever_reports() {
    let fake = FakeForge::start(Flavor::GitHub, "acme", "app", TOKEN)
        .await
        .unwrap();
    let forge = client(&fake, Flavor::GitHub);
    let limits = CiWait {
        first_interval: Duration::from_millis(30),
        max_interval: Duration::from_millis(60),
        timeout: Duration::from_secs(30),
        max_transient_errors: 2,
        no_checks_after: Some(Duration::from_millis(300)),
    };
    let start = Instant::now();
    let err = wait_for_ci(forge.as_ref(), "nothing", &limits, |_| {})
        .await
        .unwrap_err();
    assert!(matches!(err, ApiError::NoChecks { .. }), "{err}");
    assert!(start.elapsed() < Duration::from_secs(3));
    assert!(err.to_string().contains("no CI check reported"), "{err}");
}

#[test]
fn clients_never_print_their_tokens() {
    for kind in [ForgeKind::Gitea, ForgeKind::GitHub] {
        let mut c = config("http://127.0.0.1:9", Flavor::Gitea, TOKEN);
        c.kind = kind;
        assert!(!format!("{c:?}").contains(TOKEN));
        let gitea = Gitea::new(c.clone()).unwrap();
        assert!(!format!("{gitea:?}").contains(TOKEN));
        let github = GitHub::new(c).unwrap();
        assert!(!format!("{github:?}").contains(TOKEN));
    }
    let v = Vikunja::new("http://127.0.0.1:9", Secret::new(TOKEN), "V", 1).unwrap();
    assert!(!format!("{v:?}").contains(TOKEN));
}

#[test]
fn config_helpers_parse_kinds_remotes_and_read_tokens_from_the_environment() {
    assert_eq!("Forgejo".parse::<ForgeKind>().unwrap(), ForgeKind::Gitea);
    assert_eq!("github".parse::<ForgeKind>().unwrap(), ForgeKind::GitHub);
    assert_eq!("gitlab".parse::<ForgeKind>().unwrap(), ForgeKind::GitLab);
    let err = "bitbucket".parse::<ForgeKind>().unwrap_err();
    assert!(
        err.to_string().contains("unknown forge kind `bitbucket`"),
        "{err}"
    );
    for (url, host, owner, repo) in [
        (
            "https://github.com/acme/app.git",
            "github.com",
            "acme",
            "app",
        ),
        (
            "https://u:p@git.example.com:3000/acme/app",
            "git.example.com",
            "acme",
            "app",
        ),
        ("git@github.com:acme/app.git", "github.com", "acme", "app"),
        (
            "ssh://git@git.example.com:2222/team/sub/app.git",
            "git.example.com",
            "team/sub",
            "app",
        ),
    ] {
        assert_eq!(
            RemoteRepo::parse(url),
            Some(RemoteRepo {
                host: host.into(),
                owner: owner.into(),
                repo: repo.into()
            }),
            "{url}"
        );
    }
    assert_eq!(RemoteRepo::parse("/srv/git/app.git"), None);
    let err = ForgeConfig::from_env(
        ForgeKind::Gitea,
        "http://x",
        "a",
        "b",
        "GAFFER_TEST_SURELY_UNSET_VAR",
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("GAFFER_TEST_SURELY_UNSET_VAR"),
        "{err}"
    );
    let ok = ForgeConfig::from_env(ForgeKind::GitHub, "http://x/", "a", "b", "PATH").unwrap();
    assert_eq!(ok.base_url, "http://x");
    assert_eq!(ok.token_source, "PATH");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merged_prs_are_seen_and_their_branches_pruned() {
    for flavor in BOTH {
        let (fake, remote, dir, _sha) = shipped(flavor).await;
        let forge = client(&fake, flavor);
        let (pr, _) = forge.ensure_pr(&new_pr("gaffer/t-1")).await.unwrap();
        assert!(!forge.pull_request(pr.number).await.unwrap().merged);
        fake.merge_pr(pr.number);
        let merged = forge.pull_request(pr.number).await.unwrap();
        assert!(merged.merged);
        assert_eq!(merged.state, "closed");
        assert_eq!(forge.find_open_pr("gaffer/t-1").await.unwrap(), None);
        let err = forge.pull_request(999).await.unwrap_err();
        assert!(matches!(err, ApiError::NotFound { .. }), "{err}");
        // Prune: remote then local; both idempotent.
        let repo = Repo::open(dir.path()).unwrap();
        let url = remote.url();
        let auth = GitAuth::default();
        assert!(repo
            .delete_remote_branch(&url, "gaffer/t-1", &auth)
            .unwrap());
        assert!(!repo
            .delete_remote_branch(&url, "gaffer/t-1", &auth)
            .unwrap());
        assert_eq!(remote.branch_sha("gaffer/t-1"), None);
        assert!(repo.delete_branch("gaffer/t-1").unwrap());
        assert!(!repo.delete_branch("gaffer/t-1").unwrap());
    }
}
