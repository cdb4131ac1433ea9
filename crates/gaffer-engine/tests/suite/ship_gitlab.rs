//! Shipping to GitLab through the real engine, real git (a bare repository as the
//! remote) and the testkit's fake GitLab: the unchanged ship steps, through the
//! `Forge` trait, on a project in a sub-group.
use super::ship::{
    ci_waits, issue_task, next_event, receipt, script_one_subtask, trouble, REQUEST, TOKEN,
};
use super::support::*;
use gaffer_core::{Event, Stage};
use gaffer_forge::ForgeKind;
use gaffer_testkit::forge::{BareRemote, FakeGitLab};
use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use std::time::Duration;

const GROUP: &str = "acme/tools";
const TRACE: &str = "\u{1b}[0KRunning with gitlab-runner 17.5.0\nsection_start:1764633600:step_script\r\u{1b}[0K$ ./ci/check-readme\ncheck install_section ... FAILED\nerror: README.md: the install command must use --locked\nsection_end:1764633601:step_script\r\u{1b}[0K\n\u{1b}[31;1mERROR: Job failed: exit code 1\u{1b}[0;m\n";

async fn gitlab_world(fake: &FakeGitLab, remote: &BareRemote, check: &str) -> World {
    let (base, url) = (fake.base_url(), remote.url());
    World::build(check, move |s| {
        let mut ship = shipping(ForgeKind::GitLab, &base, &url, TOKEN);
        ship.owner = Some(GROUP.into());
        s.shipping.insert("demo".into(), ship);
    })
    .await
}

/// The creates of merge requests the fake answered.
fn creates(fake: &FakeGitLab) -> usize {
    fake.requests()
        .iter()
        .filter(|r| r.starts_with("POST /api/v4/projects/acme%2Ftools%2Fdemo/merge_requests "))
        .count()
}

#[tokio::test]
async fn a_failed_pipeline_trace_reaches_the_owner_the_fix_passes_and_the_issue_gets_one_note() {
    let remote = BareRemote::new().unwrap();
    let fake = FakeGitLab::start(GROUP, "demo", TOKEN).await.unwrap();
    fake.attach_remote(&remote);
    let issue = fake.add_issue(REQUEST, "The README does not say how to install.");
    let w = gitlab_world(&fake, &remote, "grep -q '^## Installation' README.md").await;
    w.script(
        "planner",
        vec![plan_answer(&["Add an installation section"])],
    );
    // The fix turn's prompt carries the failed job's trace, without its colours.
    let mut fix = write(
        "README.md",
        "# demo\n\nA demo project.\n\n## Installation\n\n    cargo install --locked demo\n",
    );
    fix["expect_prompt_contains"] = json!(
        "check install_section ... FAILED\nerror: README.md: the install command must use --locked"
    );
    w.script("owner", vec![write("README.md", README_DONE), fix]);
    w.script("reviewer", vec![verdict(json!({ "verdict": "done" }))]);
    let issue_url = format!("{}/-/issues/{issue}", fake.web_url());
    let id = issue_task(&w, Some(issue_url.clone())).await;
    let mut events = w.journal.subscribe();
    let run = w.spawn(&id);

    // The pipeline's job runs, then fails with its trace.
    let first = ci_waits(&mut events, &id, "ci/1").await;
    fake.set_job(&first, "check-readme", "running", None);
    next_event(&mut events, &id, |e| match e {
        Event::CiStatusChanged {
            step_id, checks, ..
        } if step_id.as_str() == "ci/1" && checks[0]["raw_state"] == "running" => Some(()),
        _ => None,
    })
    .await;
    fake.set_job(&first, "check-readme", "failed", Some(TRACE));
    // The owner's fix is pushed; the new commit's pipeline passes.
    let second = ci_waits(&mut events, &id, "ci/2").await;
    assert_ne!(first, second, "the fix is a new commit");
    fake.set_job(&second, "check-readme", "success", Some("ok\n"));
    assert_eq!(run.await.unwrap().unwrap(), Stage::Done);

    let view = w.view(&id).await;
    let steps = step_ids(&view);
    let from_ship: Vec<&str> = steps[steps.iter().position(|s| *s == "ship").unwrap()..].to_vec();
    assert_eq!(
        from_ship,
        [
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
    // One merge request, from the task branch, labelled, whose branch now holds the fix.
    let branch = receipt(&view, "worktree")["branch"]
        .as_str()
        .unwrap()
        .to_owned();
    let mrs = fake.mrs();
    assert_eq!(mrs.len(), 1, "{mrs:#?}");
    let mr = &mrs[0];
    assert_eq!(
        (
            mr.source_branch.as_str(),
            mr.target_branch.as_str(),
            mr.state.as_str()
        ),
        (branch.as_str(), "main", "opened")
    );
    assert_eq!(mr.title, REQUEST);
    assert_eq!(mr.labels, ["gaffer"]);
    assert!(mr.description.contains(&issue_url), "{}", mr.description);
    assert_eq!(creates(&fake), 1);
    assert_eq!(remote.branch_sha(&branch).as_deref(), Some(second.as_str()));
    let pr = receipt(&view, "pr");
    assert_eq!(pr["number"], mr.iid);
    let mr_url = format!("{}/-/merge_requests/{}", fake.web_url(), mr.iid);
    assert_eq!(pr["url"], mr_url.as_str());

    // The trace, cleaned, is the fix step's input.
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
    let failing = &fix_input["detail"]["failing"][0];
    assert_eq!(failing["is_log"], true);
    assert_eq!(failing["check"], "check-readme");
    let text = failing["text"].as_str().unwrap();
    assert!(text.contains("must use --locked"), "{text}");
    assert!(
        !text.contains('\u{1b}') && !text.contains("section_start"),
        "{text:?}"
    );

    // The issue got one note with the merge request's link.
    let notes = fake.notes();
    assert_eq!(notes.len(), 1, "{notes:#?}");
    assert_eq!(notes[0].issue, issue);
    assert!(notes[0].body.contains(&mr_url), "{}", notes[0].body);
    let summary = World::summary(&view);
    assert_eq!(summary["ci"]["state"], "success");
    assert_eq!(summary["ci"]["runs"], 2);
    assert_eq!(fake.unauthorized_count(), 0);
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
    assert!(!all.contains(TOKEN));
}

#[tokio::test]
async fn a_crash_right_after_the_merge_request_create_resumes_to_one_merge_request() {
    let remote = BareRemote::new().unwrap();
    let fake = FakeGitLab::start(GROUP, "demo", TOKEN).await.unwrap();
    fake.attach_remote(&remote);
    fake.report_ci_for_every_commit("success", "ok\n");
    let w = gitlab_world(&fake, &remote, "true").await;
    script_one_subtask(&w);
    let id = issue_task(&w, None).await;
    // GitLab makes the MR; its answer never comes.
    fake.hang_next_mr_create();
    let mut events = w.journal.subscribe();
    let run = w.spawn(&id);
    next_event(&mut events, &id, |e| match e {
        Event::StepStarted { step_id } if step_id.as_str() == "pr" => Some(()),
        _ => None,
    })
    .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while fake.mrs().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the create never reached GitLab"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // gaffer dies here: the create was sent, its answer never recorded.
    run.abort();
    assert!(run.await.unwrap_err().is_cancelled());
    assert_eq!(
        w.view(&id)
            .await
            .steps
            .iter()
            .find(|s| s.step_id == "pr")
            .unwrap()
            .state,
        "started"
    );

    // Restart: the probe finds the MR; no second create is sent.
    assert!(w.engine.recover_task(&id).await.unwrap());
    assert_eq!(w.run(&id).await, Stage::Done);
    let mrs = fake.mrs();
    assert_eq!(mrs.len(), 1, "exactly one MR: {mrs:#?}");
    assert_eq!(creates(&fake), 0, "{:#?}", fake.requests());
    let view = w.view(&id).await;
    let pr = receipt(&view, "pr");
    assert_eq!(pr["reconciled"], true);
    assert_eq!(pr["number"], mrs[0].iid);
}

#[tokio::test]
async fn a_cut_off_answer_to_the_merge_request_create_finds_it_without_asking_anyone() {
    let remote = BareRemote::new().unwrap();
    let fake = FakeGitLab::start(GROUP, "demo", TOKEN).await.unwrap();
    fake.attach_remote(&remote);
    fake.report_ci_for_every_commit("success", "ok\n");
    let w = gitlab_world(&fake, &remote, "true").await;
    script_one_subtask(&w);
    let id = issue_task(&w, None).await;
    fake.cut_next_mr_create_answer();
    let mut events = w.journal.subscribe();
    tokio::select! {
        stage = w.spawn(&id) => assert_eq!(stage.unwrap().unwrap(), Stage::Done),
        (_, summary) = trouble(&mut events, &id) => panic!("a person was asked: {summary}"),
    }
    let mrs = fake.mrs();
    assert_eq!(mrs.len(), 1, "{mrs:#?}");
    assert_eq!(mrs[0].labels, ["gaffer"], "labelled after the lookup");
    assert_eq!(creates(&fake), 1, "{:#?}", fake.requests());
    let view = w.view(&id).await;
    let pr = receipt(&view, "pr");
    assert_eq!(
        (pr["number"].as_u64(), pr["created"].as_bool()),
        (Some(mrs[0].iid), Some(true))
    );
}

#[tokio::test]
async fn a_crash_right_after_the_issue_note_was_sent_finds_it_instead_of_noting_twice() {
    let remote = BareRemote::new().unwrap();
    let fake = FakeGitLab::start(GROUP, "demo", TOKEN).await.unwrap();
    fake.attach_remote(&remote);
    fake.report_ci_for_every_commit("success", "ok\n");
    let issue = fake.add_issue(REQUEST, "The README does not say how to install.");
    let w = gitlab_world(&fake, &remote, "true").await;
    script_one_subtask(&w);
    let issue_url = format!("{}/-/issues/{issue}", fake.web_url());
    let id = issue_task(&w, Some(issue_url)).await;
    // GitLab records the note; its answer never comes.
    fake.hang_next_note();
    let run = w.spawn(&id);
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    while fake.notes().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the note never reached GitLab"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // gaffer dies here.
    run.abort();
    assert!(run.await.unwrap_err().is_cancelled());

    assert!(w.engine.recover_task(&id).await.unwrap());
    assert_eq!(w.run(&id).await, Stage::Done);
    let notes = fake.notes();
    assert_eq!(notes.len(), 1, "one note: {notes:#?}");
    let mr_url = format!("{}/-/merge_requests/{}", fake.web_url(), fake.mrs()[0].iid);
    assert!(notes[0].body.contains(&mr_url), "{}", notes[0].body);
    let report = receipt(&w.view(&id).await, "report");
    assert_eq!(report["issue_comment"]["id"], notes[0].id);
    assert_eq!(
        report["issue_comment"]["posted"], false,
        "found, not posted again"
    );
}
