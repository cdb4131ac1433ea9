//! Shipping through the real engine, real git (a bare repository as the remote) and
//! the fake Gitea/GitHub and Vikunja on loopback.
use super::support::*;
use gaffer_app::{NewTask, Scope};
use gaffer_core::{Actor, ApprovalKind, Decision, Event, Stage, TaskId};
use gaffer_engine::{Credential, Tracker};
use gaffer_forge::{ForgeKind, Secret};
use gaffer_store::RecordedEvent;
use gaffer_testkit::forge::{BareRemote, FakeForge, FakeVikunja, Flavor};
use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use std::time::Duration;
use tokio::sync::broadcast::Receiver;

pub(super) const REQUEST: &str = "Add an installation section to README";
pub(super) const TOKEN: &str = "forge-token-5f1e2d";
const VIKUNJA_TOKEN: &str = "vikunja-token-77a1";
const CI_LOG: &str = "running 3 tests\ntest install_section ... FAILED\nerror: README.md: the install command must use --locked\n";

/// The next event of task `id` that `pick` accepts (waiting at most two minutes).
pub(super) async fn next_event<T>(
    events: &mut Receiver<RecordedEvent>,
    id: &TaskId,
    mut pick: impl FnMut(&Event) -> Option<T>,
) -> T {
    let wait = async {
        loop {
            match events.recv().await {
                Ok(e) if e.stream_id == id.0 => {
                    if let Some(t) = pick(&e.event) {
                        return t;
                    }
                }
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(e) => panic!("event stream ended: {e}"),
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(120), wait)
        .await
        .expect("the awaited event never came")
}

/// The commit CI is now waiting for on step `step` (its first, pending, state).
pub(super) async fn ci_waits(
    events: &mut Receiver<RecordedEvent>,
    id: &TaskId,
    step: &str,
) -> String {
    next_event(events, id, |e| match e {
        Event::CiStatusChanged {
            step_id,
            sha,
            state,
            ..
        } if step_id.as_str() == step && state == "pending" => Some(sha.clone()),
        _ => None,
    })
    .await
}

pub(super) fn receipt(view: &gaffer_store::TaskView, step: &str) -> Value {
    let s = view.steps.iter().find(|s| s.step_id == step).unwrap();
    serde_json::from_str(s.receipt.as_deref().unwrap_or("null")).unwrap()
}

pub(super) async fn issue_task(w: &World, issue: Option<String>) -> TaskId {
    let t = w
        .app
        .create_task(
            NewTask {
                project: "demo".into(),
                request: REQUEST.into(),
                agent: Some("claude".into()),
                auto_approve: true,
                issue,
                ..NewTask::default()
            },
            Actor::user("test", "test"),
        )
        .await
        .unwrap();
    TaskId(t.id)
}

pub(super) fn script_one_subtask(w: &World) {
    w.script(
        "planner",
        vec![plan_answer(&["Add an installation section"])],
    );
    w.script("owner", vec![write("README.md", README_DONE)]);
    w.script("reviewer", vec![verdict(json!({ "verdict": "done" }))]);
}

#[tokio::test]
async fn a_task_ships_waits_for_ci_fixes_its_failure_and_reports_to_tracker_and_issue() {
    let remote = BareRemote::new().unwrap();
    let fake = FakeForge::start(Flavor::GitHub, "acme", "demo", TOKEN)
        .await
        .unwrap();
    fake.attach_remote(&remote);
    let issue = fake.add_issue(REQUEST, "The README does not say how to install.");
    let vikunja = FakeVikunja::start(VIKUNJA_TOKEN, &[7]).await.unwrap();
    let w = World::build("grep -q '^## Installation' README.md", |s| {
        s.shipping.insert(
            "demo".into(),
            shipping(ForgeKind::GitHub, &fake.base_url(), &remote.url(), TOKEN),
        );
        s.trackers.insert(
            "demo".into(),
            Tracker {
                base_url: vikunja.base_url(),
                project_id: 7,
                token: Credential::Value(Secret::new(VIKUNJA_TOKEN)),
            },
        );
    })
    .await;
    w.script(
        "planner",
        vec![plan_answer(&[
            "Add an installation section",
            "Show cargo install",
        ])],
    );
    // Subtask 1, subtask 2, then the fix for what CI found: its prompt has the log.
    let mut fix = write(
        "README.md",
        "# demo\n\nA demo project.\n\n## Installation\n\n    cargo install --locked demo\n",
    );
    fix["expect_prompt_contains"] = json!("the install command must use --locked");
    w.script(
        "owner",
        vec![write("README.md", README_DONE), say("already covered"), fix],
    );
    w.script("reviewer", vec![verdict(json!({ "verdict": "done" }))]);
    let issue_url = format!("https://github.com/acme/demo/issues/{issue}");
    let id = issue_task(&w, Some(issue_url.clone())).await;
    let mut events = w.journal.subscribe();
    let run = w.spawn(&id);

    // CI starts pending on the first push, then fails with a log.
    let first = ci_waits(&mut events, &id, "ci/1").await;
    fake.set_check_run(&first, "build", "in_progress", None, None);
    next_event(&mut events, &id, |e| match e {
        Event::CiStatusChanged {
            step_id, checks, ..
        } if step_id.as_str() == "ci/1" && checks[0]["raw_state"] == "in_progress" => Some(()),
        _ => None,
    })
    .await;
    fake.set_check_run(&first, "build", "completed", Some("failure"), Some(CI_LOG));
    // The owner's fix is pushed and CI runs again on the new commit.
    let second = ci_waits(&mut events, &id, "ci/2").await;
    assert_ne!(first, second, "the fix is a new commit");
    fake.set_check_run(&second, "build", "completed", Some("success"), None);
    assert_eq!(run.await.unwrap().unwrap(), Stage::Done);

    let view = w.view(&id).await;
    assert_eq!(
        step_ids(&view),
        [
            "worktree",
            "plan",
            "plan-approval",
            "tracker-open",
            "code/1",
            "commit/1",
            "code/2",
            "commit/2",
            "review/1",
            "check/1",
            "ship",
            "ship-approval",
            "push/1",
            "pr",
            "ci/1",
            "fix/1",
            "commit-fix/1",
            "push/2",
            "ci/2",
            "report"
        ]
    );
    // The push and the pull request were approved once, by policy (--yes), as `ship`.
    let ship_approval = view.approvals.iter().find(|a| a.kind == "ship").unwrap();
    assert_eq!(ship_approval.state, "approved");

    // One pull request, for the task branch, whose head is the fixed commit.
    let branch = receipt(&view, "worktree")["branch"]
        .as_str()
        .unwrap()
        .to_owned();
    let prs = fake.prs();
    assert_eq!(prs.len(), 1, "{prs:#?}");
    let pr = &prs[0];
    assert_eq!(
        (pr.head.as_str(), pr.base.as_str()),
        (branch.as_str(), "main")
    );
    assert_eq!(pr.title, REQUEST);
    assert_eq!(pr.labels, ["gaffer"]);
    for part in [
        "## Plan",
        "Show cargo install",
        "## What changed",
        "`README.md`",
        "## Review",
        "round 1: done",
        "`grep -q '^## Installation' README.md` passed",
        "## Cost",
        &issue_url,
    ] {
        assert!(
            pr.body.contains(part),
            "PR body lacks {part:?}:\n{}",
            pr.body
        );
    }
    assert_eq!(remote.branch_sha(&branch).as_deref(), Some(second.as_str()));
    assert!(git(&w.repo, &["show", &format!("{branch}:README.md")]).contains("--locked"));

    // The failing log reached the owner through the fix step's input.
    let fix_input: Value = serde_json::from_str(
        &view
            .steps
            .iter()
            .find(|s| s.step_id == "fix/1")
            .unwrap()
            .input,
    )
    .unwrap();
    assert_eq!(fix_input["reason"], "ci");
    assert!(fix_input["detail"]["failing"][0]["text"]
        .as_str()
        .unwrap()
        .contains("must use --locked"));
    assert_eq!(fix_input["detail"]["failing"][0]["is_log"], true);

    // Every CI state change is on record, in order.
    let changes: Vec<(String, String)> = w
        .journal
        .stream_events(&gaffer_core::StreamId::from(&id), 0)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.event {
            Event::CiStatusChanged { step_id, state, .. } => Some((step_id.0, state)),
            _ => None,
        })
        .collect();
    let expected: Vec<(String, String)> = [
        ("ci/1", "pending"),
        ("ci/1", "pending"),
        ("ci/1", "failure"),
        ("ci/2", "pending"),
        ("ci/2", "success"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(changes, expected);

    // One Vikunja task per subtask, both done.
    let tasks = vikunja.tasks();
    assert_eq!(tasks.len(), 2, "{tasks:#?}");
    for (i, t) in tasks.iter().enumerate() {
        assert!(
            t.title.contains(&format!("[gaffer {id}/{}]", i + 1)),
            "{t:?}"
        );
        assert!(t.done, "{t:?}");
        assert_eq!(t.project_id, 7);
    }
    // The issue got one comment with the PR's link.
    let comments = fake.comments();
    assert_eq!(comments.len(), 1, "{comments:#?}");
    assert_eq!(comments[0].issue, issue);
    let pr_url = receipt(&view, "pr")["url"].as_str().unwrap().to_owned();
    assert!(!pr_url.is_empty());
    assert!(comments[0].body.contains(&pr_url), "{}", comments[0].body);

    let summary = World::summary(&view);
    assert_eq!(summary["pull_request"]["number"], pr.number);
    assert_eq!(summary["ci"]["state"], "success");
    assert_eq!(summary["ci"]["runs"], 2);
    assert_eq!(summary["report"]["warnings"], json!([]));
    // No token anywhere in the journal.
    let all = serde_json::to_string(
        &w.journal
            .stream_events(&gaffer_core::StreamId::from(&id), 0)
            .await
            .unwrap()
            .iter()
            .map(|e| &e.event)
            .collect::<Vec<_>>(),
    )
    .unwrap();
    assert!(!all.contains(TOKEN) && !all.contains(VIKUNJA_TOKEN));
    assert_eq!(w.journal.verify().await.unwrap().broken, None);
}

#[tokio::test]
async fn a_crash_after_the_pr_create_was_sent_reconciles_to_exactly_one_pr() {
    let remote = BareRemote::new().unwrap();
    let fake = FakeForge::start(Flavor::Gitea, "acme", "demo", TOKEN)
        .await
        .unwrap();
    fake.attach_remote(&remote);
    let w = World::build("true", |s| {
        s.shipping.insert(
            "demo".into(),
            shipping(ForgeKind::Gitea, &fake.base_url(), &remote.url(), TOKEN),
        );
    })
    .await;
    script_one_subtask(&w);
    let id = issue_task(&w, None).await;
    // The forge records the create, and its answer never comes.
    fake.hang_next_pr_create();
    let mut events = w.journal.subscribe();
    let run = w.spawn(&id);
    next_event(&mut events, &id, |e| match e {
        Event::StepStarted { step_id } if step_id.as_str() == "pr" => Some(()),
        _ => None,
    })
    .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while fake.prs().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the create never reached the forge"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // gaffer dies here: the create was sent, its answer never recorded.
    run.abort();
    assert!(run.await.unwrap_err().is_cancelled());
    let view = w.view(&id).await;
    let pr_step = view.steps.iter().find(|s| s.step_id == "pr").unwrap();
    assert_eq!(pr_step.state, "started");

    // Restart: recovery marks the step interrupted; the probe finds the PR.
    assert!(w.engine.recover_task(&id).await.unwrap());
    let mut events = w.journal.subscribe();
    let run = w.spawn(&id);
    let sha = ci_waits(&mut events, &id, "ci/1").await;
    fake.set_status(&sha, "ci/woodpecker", "success", "all green", "http://ci/1");
    assert_eq!(run.await.unwrap().unwrap(), Stage::Done);

    assert_eq!(fake.prs().len(), 1, "exactly one PR: {:#?}", fake.prs());
    // The fake logs a request when it answers: the hung create is not there, and no
    // second create was sent after the restart.
    let creates = fake
        .requests()
        .iter()
        .filter(|r| r.starts_with("POST /api/v1/repos/acme/demo/pulls"))
        .count();
    assert_eq!(creates, 0, "{:#?}", fake.requests());
    let view = w.view(&id).await;
    let pr = receipt(&view, "pr");
    assert_eq!(pr["reconciled"], true);
    assert_eq!(pr["number"], fake.prs()[0].number);
    let kinds: Vec<String> = w
        .journal
        .stream_events(&gaffer_core::StreamId::from(&id), 0)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| {
            matches!(&e.event,
                Event::StepInterrupted { step_id } | Event::StepReconcileStarted { step_id }
                    if step_id.as_str() == "pr")
        })
        .map(|e| e.event.kind().to_owned())
        .collect();
    assert_eq!(kinds, ["step_interrupted", "step_reconcile_started"]);
}

/// Waits for the approval that asks what to do about a forge error; returns its id
/// and summary.
pub(super) async fn trouble(events: &mut Receiver<RecordedEvent>, id: &TaskId) -> (String, String) {
    next_event(events, id, |e| match e {
        Event::ApprovalRequested {
            approval_id,
            kind: ApprovalKind::Manual,
            summary,
            ..
        } => Some((approval_id.0.clone(), summary.clone())),
        _ => None,
    })
    .await
}

#[tokio::test]
async fn a_protected_branch_asks_a_human_and_a_retry_after_lifting_it_ships() {
    let remote = BareRemote::new().unwrap();
    remote.protect(&["gaffer/*"]).unwrap();
    let fake = FakeForge::start(Flavor::Gitea, "acme", "demo", TOKEN)
        .await
        .unwrap();
    fake.attach_remote(&remote);
    let w = World::build("true", |s| {
        s.shipping.insert(
            "demo".into(),
            shipping(ForgeKind::Gitea, &fake.base_url(), &remote.url(), TOKEN),
        );
    })
    .await;
    script_one_subtask(&w);
    let id = issue_task(&w, None).await;
    let mut events = w.journal.subscribe();
    let run = w.spawn(&id);
    let (approval, summary) = trouble(&mut events, &id).await;
    assert!(summary.contains("pushing `gaffer/"), "{summary}");
    assert!(summary.contains("is protected"), "{summary}");
    assert!(summary.contains("Approve to try again"), "{summary}");
    assert!(!run.is_finished());
    // A person lifts the protection and says try again.
    remote.protect(&[]).unwrap();
    w.app
        .decide(
            &approval,
            Decision::Approve,
            Actor::user("ana", "test"),
            Some("unprotected gaffer/*".into()),
            Scope::default(),
        )
        .await
        .unwrap();
    let sha = ci_waits(&mut events, &id, "ci/1").await;
    fake.set_status(&sha, "ci/woodpecker", "success", "ok", "http://ci/1");
    assert_eq!(run.await.unwrap().unwrap(), Stage::Done);
    assert_eq!(fake.prs().len(), 1);
    let view = w.view(&id).await;
    let branch = receipt(&view, "worktree")["branch"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(remote.branch_sha(&branch).as_deref(), Some(sha.as_str()));
}

#[tokio::test]
async fn a_bad_token_or_an_unreachable_forge_asks_a_human_and_giving_up_keeps_the_work() {
    for (case, base, token) in [
        ("bad token", None, "not-the-token"),
        ("unreachable", Some("http://127.0.0.1:9"), TOKEN),
    ] {
        let remote = BareRemote::new().unwrap();
        let fake = FakeForge::start(Flavor::Gitea, "acme", "demo", TOKEN)
            .await
            .unwrap();
        fake.attach_remote(&remote);
        let base = base.map_or_else(|| fake.base_url(), str::to_owned);
        let w = World::build("true", |s| {
            s.shipping.insert(
                "demo".into(),
                shipping(ForgeKind::Gitea, &base, &remote.url(), token),
            );
        })
        .await;
        script_one_subtask(&w);
        let id = issue_task(&w, None).await;
        let mut events = w.journal.subscribe();
        let run = w.spawn(&id);
        let (approval, summary) = trouble(&mut events, &id).await;
        assert!(
            summary.contains("opening the pull request failed"),
            "{case}: {summary}"
        );
        match case {
            "bad token" => assert!(
                summary.contains("(401)") && summary.contains("token"),
                "{summary}"
            ),
            _ => assert!(summary.contains("cannot reach"), "{summary}"),
        }
        assert!(!summary.contains(TOKEN), "{summary}");
        w.app
            .decide(
                &approval,
                Decision::Deny,
                Actor::user("ana", "test"),
                Some("give up".into()),
                Scope::default(),
            )
            .await
            .unwrap();
        assert_eq!(run.await.unwrap().unwrap(), Stage::Failed, "{case}");
        let view = w.view(&id).await;
        let reason = World::summary(&view)["reason"].as_str().unwrap().to_owned();
        assert!(
            reason.contains("opening the pull request failed"),
            "{case}: {reason}"
        );
        assert!(reason.contains("kept"), "{case}: {reason}");
        // Nothing lost: the worktree with its commit, the branch (pushed already).
        let wt = receipt(&view, "worktree");
        let path = std::path::PathBuf::from(wt["path"].as_str().unwrap());
        let branch = wt["branch"].as_str().unwrap();
        assert!(path.join("README.md").exists(), "{case}: worktree removed");
        let head = git(&w.repo, &["rev-parse", branch]);
        assert_eq!(receipt(&view, "push/1")["sha"], head.as_str(), "{case}");
        assert_eq!(remote.branch_sha(branch).as_deref(), Some(head.as_str()));
        assert!(fake.prs().is_empty(), "{case}");
    }
}

#[tokio::test]
async fn without_a_forge_the_branch_stays_local_and_the_summary_says_so() {
    let w = World::new().await;
    script_one_subtask(&w);
    let id = w.task(REQUEST, true).await;
    assert_eq!(w.run(&id).await, Stage::Done);
    let view = w.view(&id).await;
    assert_eq!(step_ids(&view).last(), Some(&"ship"));
    let summary = World::summary(&view);
    assert_eq!(summary["forge"], Value::Null);
    let note = summary["note"].as_str().unwrap();
    assert!(
        note.contains("no forge is configured") && note.contains("[projects.demo.forge]"),
        "{note}"
    );
}

#[tokio::test]
async fn owner_and_repo_come_from_the_remote_url_and_the_token_pushes_over_https() {
    let remote = BareRemote::new().unwrap();
    let fake = FakeForge::start(Flavor::Gitea, "acme", "demo", TOKEN)
        .await
        .unwrap();
    // The forge serves the repository over git's smart HTTP, asking for the token.
    fake.serve_git(&remote);
    fake.report_ci_for_every_commit("success");
    let w = World::build("true", |s| {
        let mut ship = shipping(ForgeKind::Gitea, &fake.base_url(), "origin", TOKEN);
        ship.owner = None;
        ship.repo = None;
        ship.push_with_token = true;
        s.shipping.insert("demo".into(), ship);
    })
    .await;
    git(&w.repo, &["remote", "add", "origin", &fake.git_url()]);
    script_one_subtask(&w);
    let id = issue_task(&w, None).await;
    assert_eq!(w.run(&id).await, Stage::Done);
    let view = w.view(&id).await;
    let branch = receipt(&view, "worktree")["branch"]
        .as_str()
        .unwrap()
        .to_owned();
    let prs = fake.prs();
    assert_eq!(prs.len(), 1);
    assert_eq!(prs[0].head, branch);
    assert_eq!(
        remote.branch_sha(&branch).as_deref(),
        receipt(&view, "push/1")["sha"].as_str()
    );
    // The token went to git through the environment, never into the remote URL.
    assert_eq!(
        git(&w.repo, &["remote", "get-url", "origin"]),
        fake.git_url()
    );
}

#[tokio::test]
async fn a_crash_while_waiting_for_the_ship_approval_asks_the_same_approval_again() {
    let remote = BareRemote::new().unwrap();
    let fake = FakeForge::start(Flavor::Gitea, "acme", "demo", TOKEN)
        .await
        .unwrap();
    fake.attach_remote(&remote);
    fake.report_ci_for_every_commit("success");
    let w = World::build("true", |s| {
        s.shipping.insert(
            "demo".into(),
            shipping(ForgeKind::Gitea, &fake.base_url(), &remote.url(), TOKEN),
        );
    })
    .await;
    script_one_subtask(&w);
    // Without --yes: the plan and the ship each wait for a person.
    let id = w.task(REQUEST, false).await;
    let mut events = w.journal.subscribe();
    let run = w.spawn(&id);
    let asked = |kind: ApprovalKind| {
        move |e: &Event| match e {
            Event::ApprovalRequested {
                approval_id,
                kind: k,
                ..
            } if *k == kind => Some(approval_id.0.clone()),
            _ => None,
        }
    };
    let plan = next_event(&mut events, &id, asked(ApprovalKind::Plan)).await;
    w.app
        .decide(
            &plan,
            Decision::Approve,
            Actor::user("ana", "test"),
            None,
            Scope::default(),
        )
        .await
        .unwrap();
    let ship = next_event(&mut events, &id, asked(ApprovalKind::Ship)).await;
    // gaffer dies while the question is open.
    run.abort();
    assert!(run.await.unwrap_err().is_cancelled());
    assert!(w.engine.recover_task(&id).await.unwrap());
    let run = w.spawn(&id);
    // The restarted step finds the same, still pending, approval; a person answers it.
    let pending = w.app.approvals(Some("pending")).await.unwrap();
    assert_eq!(
        pending.iter().map(|a| a.id.as_str()).collect::<Vec<_>>(),
        [ship.as_str()]
    );
    w.app
        .decide(
            &ship,
            Decision::Approve,
            Actor::user("ana", "test"),
            None,
            Scope::default(),
        )
        .await
        .unwrap();
    // A second approval would leave the run waiting for it.
    let stage = tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect("the run waits for a second ship approval");
    assert_eq!(stage.unwrap().unwrap(), Stage::Done);
    let view = w.view(&id).await;
    let ships: Vec<_> = view.approvals.iter().filter(|a| a.kind == "ship").collect();
    assert_eq!(ships.len(), 1, "one ship approval, never a second");
    assert_eq!(fake.prs().len(), 1);
}

/// A request of exactly 200 characters on one line, in words.
fn long_request() -> String {
    let words =
        "so that it explains cargo install with the locked flag and the minimum Rust version";
    let mut r = String::from("Rewrite the installation section of the README");
    for w in words.split(' ').cycle() {
        if r.len() + 1 + w.len() > 200 {
            break;
        }
        r.push(' ');
        r.push_str(w);
    }
    while r.len() < 200 {
        r.push('!');
    }
    r
}

#[tokio::test]
async fn a_long_request_gives_a_one_line_title_a_readable_body_and_a_clean_ci_question() {
    let request = long_request();
    assert_eq!(request.chars().count(), 200);
    let remote = BareRemote::new().unwrap();
    let fake = FakeForge::start(Flavor::GitHub, "acme", "demo", TOKEN)
        .await
        .unwrap();
    fake.attach_remote(&remote);
    let w = World::build("true", |s| {
        let mut ship = shipping(ForgeKind::GitHub, &fake.base_url(), &remote.url(), TOKEN);
        // No check reports at first: the wait ends and a person is asked.
        ship.ci.no_checks_after = Some(Duration::from_millis(300));
        s.shipping.insert("demo".into(), ship);
    })
    .await;
    script_one_subtask(&w);
    w.script(
        "reviewer",
        vec![
            verdict(json!({ "verdict": "changes_requested", "feedback": format!("Mention the MSRV.\n\nAlso: {}", "long feedback ".repeat(40)) })),
            verdict(json!({ "verdict": "done" })),
        ],
    );
    w.script(
        "owner",
        vec![
            write("README.md", README_DONE),
            write("README.md", &format!("{README_DONE}\nMSRV: 1.80\n")),
        ],
    );
    let id = w.task(&request, true).await;
    let mut events = w.journal.subscribe();
    let run = w.spawn(&id);
    let sha = ci_waits(&mut events, &id, "ci/1").await;
    let (approval, summary) = trouble(&mut events, &id).await;
    assert!(
        summary.starts_with(&format!("waiting for CI on {} failed: ", &sha[..10])),
        "{summary}"
    );
    assert!(!summary.contains("(cut"), "{summary}");
    fake.set_check_run(&sha, "build", "completed", Some("success"), None);
    w.app
        .decide(
            &approval,
            Decision::Approve,
            Actor::user("ana", "test"),
            None,
            Scope::default(),
        )
        .await
        .unwrap();
    assert_eq!(run.await.unwrap().unwrap(), Stage::Done);

    let prs = fake.prs();
    assert_eq!(prs.len(), 1);
    let (title, body) = (&prs[0].title, &prs[0].body);
    assert!(!title.contains('\n'), "{title:?}");
    assert!(
        title.chars().count() <= 72,
        "{} chars: {title:?}",
        title.chars().count()
    );
    let kept = title.strip_suffix('…').expect("a cut title ends with …");
    assert!(request.starts_with(kept), "{title:?}");
    assert!(
        request[kept.len()..].starts_with(' '),
        "cut at a word boundary: {title:?}"
    );
    // The body: the whole request, one line per commit, one line per verdict.
    assert!(!body.contains("(cut"), "{body}");
    assert!(body.starts_with(&format!("{request}\n\n")), "{body}");
    let view = w.view(&id).await;
    let commits: Vec<Value> = receipt(&view, "ship")["commits"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(commits.len(), 2);
    for c in &commits {
        let line = format!(
            "- {} {}\n",
            &c["sha"].as_str().unwrap()[..10],
            c["subject"].as_str().unwrap()
        );
        assert!(body.contains(&line), "no line {line:?} in\n{body}");
    }
    let review: Vec<&str> = body
        .lines()
        .skip_while(|l| *l != "## Review")
        .skip(1)
        .take_while(|l| !l.starts_with("## "))
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(review.len(), 2, "{review:#?}");
    assert!(
        review[0]
            .starts_with("- round 1: changes_requested: Mention the MSRV. Also: long feedback"),
        "{review:#?}"
    );
    assert!(review[0].chars().count() <= 340, "{review:#?}");
    assert_eq!(review[1], "- round 2: done");
}

#[tokio::test]
async fn a_lost_answer_to_the_pr_create_finds_the_pr_without_asking_anyone() {
    let remote = BareRemote::new().unwrap();
    let fake = FakeForge::start(Flavor::Gitea, "acme", "demo", TOKEN)
        .await
        .unwrap();
    fake.attach_remote(&remote);
    fake.report_ci_for_every_commit("success");
    let w = World::build("true", |s| {
        s.shipping.insert(
            "demo".into(),
            shipping(ForgeKind::Gitea, &fake.base_url(), &remote.url(), TOKEN),
        );
    })
    .await;
    script_one_subtask(&w);
    let id = issue_task(&w, None).await;
    // The forge makes the PR; its answer is lost on the way (no crash).
    fake.cut_next_pr_create_answer();
    let mut events = w.journal.subscribe();
    tokio::select! {
        stage = w.spawn(&id) => assert_eq!(stage.unwrap().unwrap(), Stage::Done),
        (_, summary) = trouble(&mut events, &id) => panic!("a person was asked: {summary}"),
    }

    let prs = fake.prs();
    assert_eq!(prs.len(), 1, "{prs:#?}");
    assert_eq!(prs[0].labels, ["gaffer"]);
    let creates = fake
        .requests()
        .iter()
        .filter(|r| r.starts_with("POST /api/v1/repos/acme/demo/pulls"))
        .count();
    assert_eq!(creates, 1, "{:#?}", fake.requests());
    let view = w.view(&id).await;
    let kinds: Vec<&str> = view.approvals.iter().map(|a| a.kind.as_str()).collect();
    assert_eq!(kinds, ["plan", "ship"], "nobody was asked about the forge");
    let pr = receipt(&view, "pr");
    assert_eq!(pr["number"], prs[0].number);
    assert_eq!(pr["created"], true);
}
