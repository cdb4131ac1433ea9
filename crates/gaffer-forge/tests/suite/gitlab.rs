//! The GitLab client against the testkit's fake GitLab (v4) and a real bare remote.
use std::time::{Duration, Instant};

use gaffer_forge::*;
use gaffer_testkit::forge::{BareRemote, FakeGitLab};
use pretty_assertions::assert_eq;

use super::push::repo_with_task_branch;

const TOKEN: &str = "glpat-0123456789abcdef";
/// A group with a sub-group: the project's path id is `acme%2Ftools%2Fapp`.
const GROUP: &str = "acme/tools";

fn config(base: &str, token: &str) -> ForgeConfig {
    let mut c = ForgeConfig::new(
        ForgeKind::GitLab,
        base,
        GROUP,
        "app",
        Secret::new(token),
        "GAFFER_GITLAB_TOKEN",
    );
    c.request_timeout = Duration::from_secs(5);
    c
}

pub(super) fn client(fake: &FakeGitLab) -> Box<dyn Forge> {
    connect(config(&fake.base_url(), TOKEN)).unwrap()
}

pub(super) fn new_mr(head: &str) -> NewPullRequest {
    NewPullRequest {
        title: "Add an installation section".into(),
        body: "What changed: INSTALL.md".into(),
        head: head.into(),
        base: "main".into(),
        labels: vec!["gaffer".into(), "bot".into()],
    }
}

/// A fake with the task branch `gaffer/t-1` pushed to its bare remote.
pub(super) async fn shipped() -> (FakeGitLab, BareRemote, tempfile::TempDir, String) {
    let fake = FakeGitLab::start(GROUP, "app", TOKEN).await.unwrap();
    let remote = BareRemote::new().unwrap();
    let (dir, repo, sha) = repo_with_task_branch();
    for branch in ["main", "gaffer/t-1"] {
        repo.push(&remote.url(), branch, &GitAuth::default())
            .unwrap();
    }
    fake.attach_remote(&remote);
    (fake, remote, dir, sha)
}

fn creates(fake: &FakeGitLab) -> usize {
    fake.requests()
        .iter()
        .filter(|r| r.starts_with("POST /api/v4/projects/acme%2Ftools%2Fapp/merge_requests "))
        .count()
}

#[tokio::test]
async fn a_merge_request_is_found_then_created_once_and_a_duplicate_is_looked_up() {
    let (fake, _remote, _dir, sha) = shipped().await;
    // A fork's MR with the same branch name is not ours.
    fake.add_fork_mr("gaffer/t-1", "main");
    let forge = client(&fake);
    assert_eq!(forge.kind(), ForgeKind::GitLab);
    assert_eq!(forge.find_open_pr("gaffer/t-1").await.unwrap(), None);
    let (mr, created) = forge.ensure_pr(&new_mr("gaffer/t-1")).await.unwrap();
    assert!(created);
    assert_eq!(
        (mr.head.as_str(), mr.base.as_str(), mr.head_sha.as_str()),
        ("gaffer/t-1", "main", sha.as_str())
    );
    assert_eq!(mr.state, "open");
    assert!(mr.warnings.is_empty(), "{:?}", mr.warnings);
    assert_eq!(
        mr.url,
        format!("{}/-/merge_requests/{}", fake.web_url(), mr.number)
    );
    // Again: found, not made.
    let (again, created) = forge.ensure_pr(&new_mr("gaffer/t-1")).await.unwrap();
    assert!(!created);
    assert_eq!(again.number, mr.number);
    // A blind second create: GitLab's 409 with its message list.
    match forge.create_pr(&new_mr("gaffer/t-1")).await.unwrap_err() {
        ApiError::Rejected {
            status, message, ..
        } => {
            assert_eq!(status, 409);
            assert_eq!(
                message,
                format!(
                    "Another open merge request already exists for this source branch: !{}",
                    mr.number
                )
            );
        }
        other => panic!("{other}"),
    }
    let ours: Vec<_> = fake
        .mrs()
        .into_iter()
        .filter(|m| m.source_project_id == 42)
        .collect();
    assert_eq!(ours.len(), 1, "{ours:#?}");
    assert_eq!(ours[0].labels, ["gaffer", "bot"]);
    assert_eq!(ours[0].description, "What changed: INSTALL.md");
    assert_eq!(creates(&fake), 2, "{:#?}", fake.requests());
    // Every request addressed the project by its encoded path and sent the token
    // as PRIVATE-TOKEN (a wrong header would be 401).
    assert_eq!(fake.unauthorized_count(), 0);

    // A closed MR is not the task's open one: a new one is made.
    fake.close_mr(mr.number);
    let (first, created) = forge.ensure_pr(&new_mr("gaffer/t-1")).await.unwrap();
    assert!(created);
    assert_ne!(first.number, mr.number);

    // Read back by number, in any state.
    let closed = forge.pull_request(mr.number).await.unwrap();
    assert_eq!((closed.state.as_str(), closed.merged), ("closed", false));
    fake.merge_mr(first.number);
    let merged = forge.pull_request(first.number).await.unwrap();
    assert_eq!((merged.state.as_str(), merged.merged), ("closed", true));
    assert!(matches!(
        forge.pull_request(999).await.unwrap_err(),
        ApiError::NotFound { .. }
    ));
}

#[tokio::test]
async fn a_create_whose_answer_hangs_or_is_cut_off_is_reconciled_to_one_merge_request() {
    let (fake, _remote, _dir, _sha) = shipped().await;
    // Hang: gaffer gives up waiting (its time limit); the MR exists.
    fake.hang_next_mr_create();
    let mut c = config(&fake.base_url(), TOKEN);
    c.request_timeout = Duration::from_millis(1500);
    let hasty = connect(c).unwrap();
    let err = hasty.create_pr(&new_mr("gaffer/t-1")).await.unwrap_err();
    assert!(err.effect_unknown(), "{err}");
    let (mr, created) = client(&fake)
        .ensure_pr(&new_mr("gaffer/t-1"))
        .await
        .unwrap();
    assert!(!created, "found, not made again");
    assert_eq!(fake.mrs().len(), 1);
    assert_eq!(fake.mrs()[0].iid, mr.number);

    // Cut off: ensure_pr sees the lost answer, looks, finds and labels it.
    fake.close_mr(mr.number);
    fake.cut_next_mr_create_answer();
    let before = creates(&fake);
    let (mr2, created) = client(&fake)
        .ensure_pr(&new_mr("gaffer/t-1"))
        .await
        .unwrap();
    assert!(created, "this call made it");
    assert_ne!(mr2.number, mr.number);
    assert_eq!(creates(&fake), before + 1, "{:#?}", fake.requests());
    let open: Vec<_> = fake
        .mrs()
        .into_iter()
        .filter(|m| m.state == "opened")
        .collect();
    assert_eq!(open.len(), 1);
    assert_eq!(open[0].labels, ["gaffer", "bot"]);
}

#[tokio::test]
async fn pipeline_jobs_are_the_ci_state_and_a_failed_jobs_trace_is_the_log() {
    let (fake, _remote, _dir, sha) = shipped().await;
    let forge = client(&fake);
    let status = forge.ci_status(&sha).await.unwrap();
    assert_eq!((status.state, status.checks.len()), (CiState::Pending, 0));

    fake.set_job(&sha, "build", "success", Some("ok"));
    fake.set_optional_job(&sha, "lint", "failed");
    let test = fake.set_job(&sha, "test", "running", None);
    let status = forge.ci_status(&sha).await.unwrap();
    assert_eq!(status.state, CiState::Pending);
    let trace = "\u{1b}[0KRunning with gitlab-runner 17.5.0\nsection_start:1764633600:step_script\r\u{1b}[0K\u{1b}[32;1m$ cargo test\u{1b}[0;m\ntest install ... FAILED\nerror: README.md: the install command must use --locked\nsection_end:1764633660:step_script\r\u{1b}[0K\n\u{1b}[31;1mERROR: Job failed: exit code 101\u{1b}[0;m\n";
    fake.set_job(&sha, "test", "failed", Some(trace));
    let status = forge.ci_status(&sha).await.unwrap();
    assert_eq!(status.state, CiState::Failure);
    let failing: Vec<_> = status.failing().collect();
    assert_eq!(failing.len(), 1, "the optional lint failure does not count");
    assert_eq!(failing[0].name, "test");
    assert_eq!(failing[0].raw_state, "failed");
    assert_eq!(failing[0].check_run_id, Some(test));
    let log = forge.failing_log(failing[0]).await.unwrap();
    assert!(log.is_log);
    assert_eq!(
        log.text,
        "Running with gitlab-runner 17.5.0\n$ cargo test\ntest install ... FAILED\nerror: README.md: the install command must use --locked\n\nERROR: Job failed: exit code 101\n"
    );
    assert_eq!(log.url, Some(format!("{}/-/jobs/{test}", fake.web_url())));

    // A retry (a new pipeline for the commit) that passes is what counts.
    fake.new_pipeline(&sha);
    fake.set_job(&sha, "test", "success", Some("ok"));
    let status = forge.ci_status(&sha).await.unwrap();
    assert_eq!(status.state, CiState::Success, "{status:#?}");
    assert_eq!(status.checks.len(), 3);

    // An external CI's status has no trace: its description and link.
    fake.set_external_status(&sha, "jenkins", "failed", "2 tests failed");
    let status = forge.ci_status(&sha).await.unwrap();
    let jenkins = status.failing().next().unwrap();
    let log = forge.failing_log(jenkins).await.unwrap();
    assert!(!log.is_log);
    assert_eq!(log.text, "jenkins reported failed: 2 tests failed");
}

#[tokio::test]
async fn a_long_trace_keeps_its_end() {
    let (fake, _remote, _dir, sha) = shipped().await;
    let mut trace = "noise line\n".repeat(20_000);
    trace.push_str("error: the real failure\n");
    fake.set_job(&sha, "test", "failed", Some(&trace));
    let forge = client(&fake);
    let status = forge.ci_status(&sha).await.unwrap();
    let log = forge
        .failing_log(status.failing().next().unwrap())
        .await
        .unwrap();
    assert!(log.text.len() <= 64 * 1024 + 40, "{}", log.text.len());
    assert!(log.text.starts_with("[… earlier lines cut …]"));
    assert!(log.text.ends_with("error: the real failure\n"));
}

#[tokio::test]
async fn ci_wait_follows_a_pipeline_to_success() {
    let (fake, _remote, _dir, sha) = shipped().await;
    fake.set_job(&sha, "test", "pending", None);
    let forge = client(&fake);
    let limits = CiWait {
        first_interval: Duration::from_millis(20),
        max_interval: Duration::from_millis(50),
        timeout: Duration::from_secs(20),
        max_transient_errors: 2,
        no_checks_after: None,
    };
    let mut seen = Vec::new();
    let wait = wait_for_ci(forge.as_ref(), &sha, &limits, |s| seen.push(s.state));
    let finish = async {
        tokio::time::sleep(Duration::from_millis(150)).await;
        fake.set_job(&sha, "test", "running", None);
        tokio::time::sleep(Duration::from_millis(150)).await;
        fake.set_job(&sha, "test", "success", None);
    };
    let (status, ()) = tokio::join!(wait, finish);
    assert_eq!(status.unwrap().state, CiState::Success);
    assert_eq!(seen.first(), Some(&CiState::Pending));
    assert_eq!(seen.last(), Some(&CiState::Success));
}

#[tokio::test]
async fn issues_are_read_and_noted_once_by_marker_across_pages() {
    let (fake, _remote, _dir, _sha) = shipped().await;
    let iid = fake.add_issue("Install docs", "The README does not say how to install.");
    let forge = client(&fake);
    let url = format!("{}/-/issues/{iid}", fake.web_url());
    for reference in [
        url.as_str(),
        &format!("{GROUP}/app#{iid}"),
        &format!("#{iid}"),
    ] {
        let issue = forge.issue(reference).await.unwrap();
        assert_eq!(
            (issue.owner.as_str(), issue.repo.as_str(), issue.number),
            (GROUP, "app", iid),
            "{reference}"
        );
        assert_eq!(issue.title, "Install docs");
        assert_eq!(issue.body, "The README does not say how to install.");
        assert_eq!(issue.state, "open");
        assert_eq!(issue.url, url);
    }
    // More than a page of people's notes: the marker is found on the second page.
    for i in 0..120 {
        fake.add_note(iid, &format!("note {i}"));
    }
    let marker = "<!-- gaffer:t-9 -->";
    assert_eq!(forge.find_comment(&url, marker).await.unwrap(), None);
    let note = forge
        .comment_on_issue(&url, &format!("MR: !1\n\n{marker}"))
        .await
        .unwrap();
    assert_eq!(note.url, format!("{url}#note_{}", note.id));
    let found = forge.find_comment(&url, marker).await.unwrap().unwrap();
    assert_eq!(found, note);
    let pages = fake
        .requests()
        .iter()
        .filter(|r| r.contains("/notes?") && r.contains("page=2"))
        .count();
    assert_eq!(pages, 2, "{:#?}", fake.requests());
    assert_eq!(fake.notes().len(), 121);

    // Unknown issue, a reference that names none, another project's issue.
    assert!(matches!(
        forge.issue("#77").await.unwrap_err(),
        ApiError::NotFound { .. }
    ));
    let e = forge
        .issue("https://gitlab.com/acme/app/-/merge_requests/3")
        .await;
    assert!(matches!(e, Err(ApiError::BadInput(_))), "{e:?}");
    assert!(matches!(
        forge.issue("other/group/app#1").await.unwrap_err(),
        ApiError::NotFound { .. }
    ));
}

#[tokio::test]
async fn a_bad_token_rate_limits_and_error_bodies_are_clear_errors() {
    let (fake, _remote, _dir, sha) = shipped().await;
    let bad = connect(config(&fake.base_url(), "glpat-wrong")).unwrap();
    let e = bad.find_open_pr("gaffer/t-1").await.unwrap_err();
    assert!(matches!(e, ApiError::Unauthorized { .. }), "{e}");
    assert!(e.to_string().contains("GAFFER_GITLAB_TOKEN"), "{e}");
    assert!(!format!("{e} {e:?}").contains("glpat-wrong"));
    assert_eq!(fake.unauthorized_count(), 1);

    // A short wait is slept out and the request sent again.
    let forge = client(&fake);
    fake.rate_limit_next(1, 1);
    let start = Instant::now();
    forge.ci_status(&sha).await.unwrap();
    assert!(start.elapsed() >= Duration::from_millis(900));
    // A long one is reported with the wait.
    let mut c = config(&fake.base_url(), TOKEN);
    c.max_rate_limit_wait = Duration::ZERO;
    fake.rate_limit_next(1, 30);
    match connect(c).unwrap().ci_status(&sha).await.unwrap_err() {
        ApiError::RateLimited {
            retry_after,
            reset_at,
            ..
        } => {
            assert_eq!(retry_after, Duration::from_secs(30));
            assert!(reset_at.is_some());
        }
        other => panic!("{other}"),
    }

    // GitLab's error bodies become messages.
    fake.refuse_mrs(Some((422, "Target branch is protected")));
    let e = forge.create_pr(&new_mr("gaffer/t-1")).await.unwrap_err();
    assert!(matches!(e, ApiError::Rejected { status: 422, .. }));
    assert!(e.to_string().contains("Target branch is protected"), "{e}");
    fake.refuse_mrs(None);
    let mut nameless = new_mr("gaffer/t-1");
    nameless.title = " ".into();
    let e = forge.create_pr(&nameless).await.unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "gitlab at {} answered 400: title is missing",
            fake.base_url()
        )
    );
    let e = forge
        .create_pr(&new_mr("no/such-branch"))
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("base Source branch \"no/such-branch\" does not exist"),
        "{e}"
    );
    let other = connect(ForgeConfig::new(
        ForgeKind::GitLab,
        fake.base_url(),
        "acme",
        "nope",
        Secret::new(TOKEN),
        "T",
    ))
    .unwrap();
    let e = other.find_open_pr("x").await.unwrap_err();
    assert!(matches!(e, ApiError::NotFound { .. }), "{e}");
    assert!(e.to_string().contains("acme/nope"), "{e}");
    assert!(fake.mrs().is_empty());
}

#[test]
fn the_kind_parses_and_the_base_url_takes_api_v4_or_not() {
    assert_eq!("GitLab".parse::<ForgeKind>().unwrap(), ForgeKind::GitLab);
    assert_eq!(ForgeKind::GitLab.name(), "gitlab");
    let e = "gitlub".parse::<ForgeKind>().unwrap_err().to_string();
    assert!(e.contains("\"gitlab\""), "{e}");
}

#[tokio::test]
async fn a_base_url_with_api_v4_reaches_the_same_api() {
    let (fake, _remote, _dir, _sha) = shipped().await;
    let forge = connect(config(&format!("{}/api/v4/", fake.base_url()), TOKEN)).unwrap();
    assert_eq!(forge.find_open_pr("gaffer/t-1").await.unwrap(), None);
    assert!(fake
        .requests()
        .iter()
        .all(|r| r.starts_with("GET /api/v4/projects/acme%2Ftools%2Fapp/")));
}

#[tokio::test]
async fn a_base_moved_onto_the_same_lines_makes_the_merge_request_conflict() {
    let (fake, remote, dir, _sha) = shipped().await;
    let forge = client(&fake);
    let (mr, _) = forge.ensure_pr(&new_mr("gaffer/t-1")).await.unwrap();
    assert_eq!(mr.mergeable, Mergeability::Clean);
    // The base adds the file the task adds, with other lines.
    let d = dir.path();
    super::push::sh(d, &["checkout", "-q", "main"]);
    std::fs::write(d.join("INSTALL.md"), "brew install gaffer\n").unwrap();
    super::push::sh(d, &["add", "."]);
    super::push::sh(d, &["commit", "-q", "-m", "the base moves"]);
    super::push::sh(d, &["push", "-q", &remote.url(), "main"]);
    let now = forge.pull_request(mr.number).await.unwrap();
    assert_eq!(now.mergeable, Mergeability::Conflicted);
    assert_eq!(
        forge
            .find_open_pr("gaffer/t-1")
            .await
            .unwrap()
            .unwrap()
            .mergeable,
        Mergeability::Conflicted
    );
    // A draft names only `draft_status`, its first blocker: the conflict is in
    // `has_conflicts`.
    fake.mark_draft(mr.number, true);
    assert_eq!(
        forge.pull_request(mr.number).await.unwrap().mergeable,
        Mergeability::Conflicted,
        "a conflicting draft is conflicted"
    );
    fake.merge_mr(mr.number);
    assert_eq!(
        forge.pull_request(mr.number).await.unwrap().mergeable,
        Mergeability::Unknown,
        "a merged MR has nothing to merge"
    );
}

#[tokio::test]
async fn open_issues_by_label_or_assignee_each_once() {
    let (fake, _remote, _dir, _sha) = shipped().await;
    let labelled = fake.add_issue("Labelled", "a");
    let assigned = fake.add_issue("Assigned", "b");
    let both = fake.add_issue("Both", "c");
    let closed = fake.add_issue("Closed", "d");
    fake.add_issue("Neither", "e");
    for iid in [labelled, both, closed] {
        fake.label_issue(iid, "gaffer");
    }
    for iid in [assigned, both] {
        fake.assign_issue(iid, "gaffer-bot");
    }
    fake.close_issue(closed);
    let forge = client(&fake);
    let filter = IssueFilter {
        label: Some("gaffer".into()),
        assignee: Some("gaffer-bot".into()),
    };
    let found = forge.open_issues(&filter).await.unwrap();
    let numbers: Vec<u64> = found.iter().map(|i| i.number).collect();
    assert_eq!(numbers, [labelled, assigned, both]);
    let b = &found[2];
    assert_eq!((b.owner.as_str(), b.repo.as_str()), (GROUP, "app"));
    assert_eq!(b.labels, ["gaffer"]);
    assert_eq!(b.assignees, ["gaffer-bot"]);
    assert_eq!(b.state, "open");
    assert_eq!(b.url, format!("{}/-/issues/{both}", fake.web_url()));
    assert!(forge
        .open_issues(&IssueFilter::default())
        .await
        .unwrap()
        .is_empty());
    assert!(fake
        .requests()
        .iter()
        .any(|r| r.contains("/issues?state=opened&assignee_username=gaffer-bot&")));
}

#[tokio::test]
async fn the_fakes_webhook_deliveries_verify_by_token_and_parse() {
    use gaffer_forge::hooks::{self, HookEvent, HookSender};
    let (fake, _remote, _dir, _sha) = shipped().await;
    let iid = fake.add_issue("Install docs", "How?");
    fake.label_issue(iid, "gaffer");
    fake.assign_issue(iid, "gaffer-bot");
    let d = fake.issue_hook(iid, "update").unwrap();
    let headers = d.signed("hook-secret");
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    };
    assert_eq!(header("x-gitlab-event").as_deref(), Some("Issue Hook"));
    assert!(hooks::verify(
        HookSender::GitLab,
        &header,
        &d.body,
        b"hook-secret"
    ));
    assert!(!hooks::verify(
        HookSender::GitLab,
        &header,
        &d.body,
        b"other"
    ));
    match hooks::parse(HookSender::GitLab, &header, &d.body).unwrap() {
        HookEvent::Issue { action, issue } => {
            assert_eq!(action, "update");
            assert_eq!(
                (issue.owner.as_str(), issue.repo.as_str(), issue.number),
                (GROUP, "app", iid)
            );
            assert_eq!(issue.labels, ["gaffer"]);
            assert_eq!(issue.assignees, ["gaffer-bot"]);
            assert_eq!(issue.state, "open");
            assert_eq!(issue.url, format!("{}/-/issues/{iid}", fake.web_url()));
        }
        other => panic!("{other:?}"),
    }
    assert!(fake.issue_hook(99, "open").is_none());

    let (mr, _) = client(&fake)
        .ensure_pr(&new_mr("gaffer/t-1"))
        .await
        .unwrap();
    let d = fake.mr_note_hook(mr.number, "Please mention --locked");
    let headers = d.signed("hook-secret");
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    };
    assert!(hooks::verify(
        HookSender::GitLab,
        &header,
        &d.body,
        b"hook-secret"
    ));
    assert_eq!(
        hooks::parse(HookSender::GitLab, &header, &d.body).unwrap(),
        HookEvent::PullRequestComment {
            owner: GROUP.into(),
            repo: "app".into(),
            number: mr.number
        }
    );
}
