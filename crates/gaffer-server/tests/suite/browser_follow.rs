//! After the pull request, as a person reads it on the task page: each follow-up of
//! a shipped task (why it opened: review comments with their file and line, a base
//! that moved with conflicts), its steps in words (the owner's fix, the update onto
//! the base, the conflict resolution, the check, the push approval, the push, CI,
//! the replies posted) and how following ended — in real Chromium at 390 and 1280 px.

use super::browser::{artifact, assert_no_horizontal_scroll, driver, logged_in, LAPTOP, PHONE};
use super::scene::{conversation, usage, Scene};
use super::support::*;
use gaffer_core::{Actor, ApprovalKind, Decision, Event, Intent, Role, SessionId, StepId};
use gaffer_testkit::browser::Browser;
use serde_json::{json, Value};

const PR_URL: &str = "https://git.example.com/acme/demo/pulls/7";
const BRANCH: &str = "gaffer/add-json-flag";
const HUNK: &str = "@@ -1,5 +1,9 @@\n-pub fn list(rows: &[Row]) {\n+pub fn list(rows: &[Row], json: bool) {\n+    if json {";

/// Record and start step `id` with `input` (the follow-up steps carry theirs).
async fn step(s: &Scene, id: &str, intent: Intent, input: Value) {
    s.push(vec![
        Event::StepIntentRecorded {
            step_id: StepId(id.into()),
            name: id.into(),
            intent,
            depends_on: vec![],
            input,
        },
        Event::StepStarted {
            step_id: StepId(id.into()),
        },
    ])
    .await;
}

/// An owner turn of a follow-up: recorded with `input`, its session, what it said.
async fn owner(s: &Scene, id: &str, input: Value, said: &str, receipt: Value) {
    step(s, id, Intent::NonIdempotent, input).await;
    s.push(vec![Event::SessionStarted {
        session_id: SessionId(format!("s-{}-{id}", s.task)),
        agent: "claude".into(),
        role: Role::Owner,
        workspace_key: "/work/demo".into(),
        agent_session_id: Some("5f0c1a".into()),
        step_id: Some(StepId(id.into())),
    }])
    .await;
    s.say(id, said).await;
    s.complete(id, receipt).await;
}

/// `push-approval/n` asked through the app and approved by a person.
async fn push_approval(s: &Scene, n: u32, sync: Option<u32>, summary: &str) {
    let id = format!("push-approval/{n}");
    let mut input = json!({ "follow_up": n });
    if let Some(sync) = sync {
        input["sync"] = json!(sync);
    }
    step(s, &id, Intent::ReadOnly, input).await;
    let a = s
        .ask(
            &id,
            ApprovalKind::Ship,
            summary,
            json!({"branch": BRANCH}),
            None,
        )
        .await;
    s.app
        .decide(
            &a.id,
            Decision::Approve,
            Actor::user("ana", "web"),
            None,
            Default::default(),
        )
        .await
        .unwrap();
    s.complete(&id, json!({"approval": a.id, "decision": "approve"}))
        .await;
}

async fn push_and_ci(s: &Scene, p: u32, sha: &str) {
    step(s, &format!("push/{p}"), Intent::NonIdempotent, json!({})).await;
    s.complete(
        &format!("push/{p}"),
        json!({"sha": sha, "branch": BRANCH, "remote": "origin"}),
    )
    .await;
    step(s, &format!("ci/{p}"), Intent::ReadOnly, json!({})).await;
    s.push(vec![Event::CiStatusChanged {
        step_id: StepId(format!("ci/{p}")),
        sha: sha.into(),
        state: "success".into(),
        checks: json!([{"name": "ci/test", "state": "success"}]),
    }])
    .await;
    s.complete(&format!("ci/{p}"), json!({"sha": sha, "state": "success"}))
        .await;
}

/// A task shipped with pull request #7, then two follow-ups answered — review
/// comments, then a base that moved with a conflict — and the pull request merged.
async fn followed(h: &Harness) -> Scene {
    let s = conversation(&h.app, "alpha").await;
    s.stage(gaffer_core::Stage::Shipping).await;
    step(&s, "ship", Intent::Idempotent, json!({})).await;
    s.complete("ship", json!({"branch": BRANCH, "commits": [{"sha": "3f9a0c7d21", "subject": "Add a --json flag"}], "forge": {"kind": "gitea", "review_fix_attempts": 3}})).await;
    push_and_ci(&s, 1, "3f9a0c7d21").await;
    step(&s, "pr", Intent::NonIdempotent, json!({})).await;
    s.complete(
        "pr",
        json!({"number": 7, "url": PR_URL, "head": BRANCH, "base": "main", "created": true}),
    )
    .await;
    s.push(vec![Event::TaskDone { summary: json!({"branch": BRANCH, "pull_request": {"number": 7, "url": PR_URL, "head": BRANCH, "base": "main", "created": true}}) }]).await;

    // Follow-up 1: two review comments from people.
    let comments = json!([
        {"key": "review-comment:41", "id": 41, "kind": "review_comment", "author": "bob", "body": "Return the error instead of `unwrap()` here: a row that cannot be serialized panics.", "path": "src/list.rs", "line": 3, "diff_hunk": HUNK, "url": format!("{PR_URL}#issuecomment-41")},
        {"key": "comment:42", "id": 42, "kind": "comment", "author": "carol", "body": "Please mention `--json` in the README too.", "url": format!("{PR_URL}#issuecomment-42")}
    ]);
    s.push(vec![Event::FollowUpOpened {
        kind: "review_comments".into(),
        keys: vec!["review-comment:41".into(), "comment:42".into()],
        detail: json!({"pull_request": 7, "url": PR_URL, "comments": comments}),
    }])
    .await;
    s.stage(gaffer_core::Stage::Coding).await;
    owner(&s, "fix/2", json!({"reason": "review_comments", "follow_up": 1}), "The serializer's error is returned now, and the README documents `--json`.", json!({"summary": "returned the error; documented --json", "changed_files": ["src/list.rs", "README.md"], "usage": usage(7300, 610, 0.0214)})).await;
    step(&s, "commit-fix/2", Intent::Idempotent, json!({})).await;
    s.complete(
        "commit-fix/2",
        json!({"sha": "9b1d44e0aa", "created": true}),
    )
    .await;
    s.stage(gaffer_core::Stage::Shipping).await;
    push_approval(&s, 1, None, "Push the fix for 2 review comments to `gaffer/add-json-flag` (new commits on the open pull request, never forced)?").await;
    push_and_ci(&s, 2, "9b1d44e0aa").await;
    step(&s, "reply/1", Intent::Idempotent, json!({"follow_up": 1})).await;
    s.complete("reply/1", json!({"follow_up": 1, "replies": [
        {"to": "review-comment:41", "id": 51, "url": format!("{PR_URL}#issuecomment-51"), "found": false},
        {"to": "comment:42", "id": 52, "url": format!("{PR_URL}#issuecomment-52"), "found": false}
    ]})).await;
    s.push(vec![Event::TaskDone {
        summary: json!({"branch": BRANCH}),
    }])
    .await;

    // Follow-up 2: main moved and the pull request conflicts with it.
    s.push(vec![Event::FollowUpOpened {
        kind: "merge_conflict".into(),
        keys: vec!["merge_conflict:9b1d44e0aa".into()],
        detail: json!({"head_sha": "9b1d44e0aa", "base": "main", "mergeable": "conflicted"}),
    }])
    .await;
    step(&s, "sync/1", Intent::Idempotent, json!({"follow_up": 2})).await;
    s.complete("sync/1", json!({"outcome": "conflicted", "files": ["src/list.rs"], "strategy": "rebase", "base": "main", "base_sha": "c0ffee1234"})).await;
    s.stage(gaffer_core::Stage::Coding).await;
    owner(&s, "resolve/1", json!({"sync": 1, "files": ["src/list.rs"], "unresolved": false}), "Kept main's new `limit` argument and this task's `json` flag in `list`.", json!({"summary": "merged both signatures", "outcome": "updated", "head": "77aa0b5c3d", "usage": usage(5400, 380, 0.0161)})).await;
    s.stage(gaffer_core::Stage::Testing).await;
    step(&s, "check/2", Intent::Idempotent, json!({"sync": 1})).await;
    s.complete("check/2", json!({"passed": true, "command": "cargo test", "exit_code": 0, "output_tail": "test result: ok. 13 passed; 0 failed", "duration_ms": 4480})).await;
    s.stage(gaffer_core::Stage::Shipping).await;
    push_approval(&s, 2, Some(1), "Push `gaffer/add-json-flag`, updated onto the moved `main` rebased, so it replaces the branch with --force-with-lease (refused if someone else pushed to it)?").await;
    push_and_ci(&s, 3, "77aa0b5c3d").await;
    s.push(vec![
        Event::TaskDone {
            summary: json!({"branch": BRANCH}),
        },
        Event::FollowingEnded {
            reason: format!("the pull request {PR_URL} was merged"),
        },
    ])
    .await;
    s
}

async fn text_of(b: &Browser, selector: &str) -> String {
    b.eval(&format!(
        "document.querySelector('{selector}')?.textContent ?? ''"
    ))
    .await
    .unwrap()
    .as_str()
    .unwrap_or_default()
    .split_whitespace()
    .collect::<Vec<_>>()
    .join(" ")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_follow_up_reads_as_words_in_the_transcript_at_phone_and_laptop_width() {
    let Some(driver) = driver() else { return };
    let h = start(false).await;
    h.project("alpha").await;
    let s = followed(&h).await;
    for (size, name) in [(PHONE, "390"), (LAPTOP, "1280")] {
        let b = logged_in(&driver, &h, &format!("follow-{name}"), size).await;
        b.goto(&h.url(&format!("/tasks/{}", s.task))).await.unwrap();
        b.wait_for("the loaded task", "document.body.dataset.loaded === 'task'")
            .await
            .unwrap();
        // Why each follow-up opened.
        let first = text_of(&b, "[data-follow-up=\"1\"]").await;
        for said in [
            "Follow-up 1",
            "2 review comments on pull request #7",
            "src/list.rs:3 bob",
            "Return the error instead of unwrap() here",
            "the conversation carol",
            "Please mention --json in the README too.",
        ] {
            assert!(first.contains(said), "{said:?} in {first:?}");
        }
        let second = text_of(&b, "[data-follow-up=\"2\"]").await;
        for said in [
            "Follow-up 2",
            "The base main moved",
            "the pull request no longer merges: it conflicts with it (at 9b1d44e0)",
        ] {
            assert!(second.contains(said), "{said:?} in {second:?}");
        }
        // Its steps, in words.
        let step = |id: &str| format!("[data-step=\"{id}\"]");
        let sync = text_of(&b, &format!("{} .body", step("sync/1"))).await;
        assert_eq!(
            sync,
            "Rebasing onto main c0ffee12 stopped on conflicts in src/list.rs"
        );
        let resolve = text_of(&b, &format!("{} .agent-head .muted", step("resolve/1"))).await;
        assert_eq!(resolve, "claude · Conflict resolution, round 1");
        let resolved = text_of(&b, &format!("{} .result strong", step("resolve/1"))).await;
        assert_eq!(resolved, "✓ Conflicts resolved");
        let resolved = text_of(&b, &format!("{} .result p", step("resolve/1"))).await;
        assert_eq!(resolved, "The update went on: the branch is at 77aa0b5c.");
        let reply = text_of(&b, &format!("{} .body", step("reply/1"))).await;
        assert_eq!(reply, "Replied to 2 review comments: reply 1, reply 2");
        let link = b
            .eval(&format!(
                "document.querySelector('{} a').getAttribute('href')",
                step("reply/1")
            ))
            .await
            .unwrap();
        assert_eq!(link, json!(format!("{PR_URL}#issuecomment-51")));
        for (id, label) in [
            ("push-approval/1", "Push approval, follow-up 1"),
            ("push-approval/2", "Push approval, follow-up 2"),
        ] {
            let text = text_of(&b, &step(id)).await;
            assert!(text.contains(label), "{label:?} in {text:?}");
        }
        // How each round ended, and following.
        // (each note without the reader's local time before it).
        let notes = b
            .eval("[...document.querySelectorAll('.tnote')].map(n => [...n.childNodes].filter(c => !(c.classList && c.classList.contains('muted'))).map(c => c.textContent).join('').trim())")
            .await
            .unwrap();
        let notes: Vec<String> = serde_json::from_value(notes).unwrap();
        let tail: Vec<&str> = notes
            .iter()
            .skip(notes.len().saturating_sub(4))
            .map(String::as_str)
            .collect();
        assert_eq!(
            tail,
            vec![
                "Task done",
                "Follow-up 1 answered: done again, and the pull request is still followed",
                "Follow-up 2 answered: done again, and the pull request is still followed",
                &format!(
                    "No longer following the pull request: the pull request {PR_URL} was merged"
                ),
            ][..]
        );
        assert_no_horizontal_scroll(&b, &format!("a followed task at {name}px")).await;
        b.screenshot(&artifact(&format!("follow-ups-{name}.png")))
            .await
            .unwrap();
        // Each follow-up close up, at its real size (the page is long).
        for (n, what) in [(1, "comments"), (2, "conflict")] {
            b.screenshot_from(
                &format!("[data-follow-up=\"{n}\"]"),
                f64::from(size.1) * 1.3,
                &artifact(&format!("follow-up-{what}-{name}.png")),
            )
            .await
            .unwrap();
        }
        b.close().await.unwrap();
    }
}

#[tokio::test]
async fn the_task_api_lists_each_follow_up_and_the_end_of_following_and_the_schema_says_so() {
    let h = start(false).await;
    h.project("alpha").await;
    let s = followed(&h).await;
    let task: Value = h
        .http
        .get(h.url(&format!("/api/tasks/{}", s.task)))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let follow_ups: Vec<(u64, &str, Vec<&str>)> = task["follow_ups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["n"].as_u64().unwrap(),
                f["kind"].as_str().unwrap(),
                f["keys"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|k| k.as_str().unwrap())
                    .collect(),
            )
        })
        .collect();
    assert_eq!(
        follow_ups,
        vec![
            (
                1,
                "review_comments",
                vec!["review-comment:41", "comment:42"]
            ),
            (2, "merge_conflict", vec!["merge_conflict:9b1d44e0aa"]),
        ]
    );
    assert_eq!(
        task["follow_ups"][0]["detail"]["comments"][0]["path"],
        "src/list.rs"
    );
    assert!(task["follow_ups"][1]["opened_at"].as_i64().unwrap() > 0);
    assert_eq!(
        task["following_ended"],
        json!(format!("the pull request {PR_URL} was merged"))
    );
    let doc: Value = h
        .http
        .get(h.url("/api/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let schemas = &doc["components"]["schemas"];
    // TaskDetail flattens Task: its own fields are in one part of an `allOf`.
    let detail = schemas["TaskDetail"]["allOf"]
        .as_array()
        .into_iter()
        .flatten()
        .chain([&schemas["TaskDetail"]])
        .map(|part| &part["properties"])
        .find(|p| p["steps"].is_object())
        .unwrap_or_else(|| panic!("{}", schemas["TaskDetail"]));
    assert_eq!(detail["follow_ups"]["type"], "array", "{detail}");
    assert!(detail["following_ended"].is_object(), "{detail}");
    for field in ["n", "kind", "keys", "detail", "opened_at"] {
        assert!(
            schemas["FollowUp"]["properties"][field].is_object(),
            "{field}: {}",
            schemas["FollowUp"]
        );
    }
}

/// A task shipped to GitLab says merge request, numbered `!N`, as GitLab's users
/// say it; one shipped to Gitea says pull request `#N`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_shipped_to_gitlab_names_its_merge_request_as_gitlab_does() {
    let Some(driver) = driver() else { return };
    let h = start(false).await;
    h.project("alpha").await;
    let mut pages = Vec::new();
    for kind in ["gitlab", "gitea"] {
        let s = conversation(&h.app, "alpha").await;
        s.stage(gaffer_core::Stage::Shipping).await;
        step(&s, "ship", Intent::Idempotent, json!({})).await;
        let forge = json!({"kind": kind});
        s.complete(
            "ship",
            json!({"branch": BRANCH, "commits": [], "forge": forge}),
        )
        .await;
        step(&s, "pr", Intent::NonIdempotent, json!({})).await;
        let pr =
            json!({"number": 7, "url": PR_URL, "head": BRANCH, "base": "main", "created": true});
        s.complete("pr", pr.clone()).await;
        s.push(vec![Event::TaskDone {
            summary: json!({"branch": BRANCH, "forge": forge, "pull_request": pr}),
        }])
        .await;
        pages.push(s.task);
    }
    let b = logged_in(&driver, &h, "gitlab-mr", PHONE).await;
    for (task, words) in pages.iter().zip(["Merge request !7", "Pull request #7"]) {
        b.goto(&h.url(&format!("/tasks/{task}"))).await.unwrap();
        b.wait_for("the loaded task", "document.body.dataset.loaded === 'task'")
            .await
            .unwrap();
        let outcome = text_of(&b, "#outcome").await;
        let first = words.split(' ').next().unwrap();
        assert!(
            outcome.contains(&format!("{first} request {PR_URL} waits for a review")),
            "{outcome}"
        );
        let links = text_of(&b, ".links").await;
        assert!(links.contains(words), "{links}");
    }
    b.close().await.unwrap();
}
