//! After the pull request, as people read it in the terminal: `gaffer task show`
//! names each follow-up (review comments with file and line, a base that moved),
//! what its steps did, and how following ended; `gaffer attach` on a task a
//! follow-up opened again shows the round in words until it is done again.

use super::support::{Home, DONE_TASK};
use gaffer_core::{Event, Intent, Stage, StreamId};
use gaffer_store::{Durability, Journal, NewEvent, SqliteJournal};
use serde_json::{json, Value};
use std::io::Read;
use std::process::Stdio;
use std::time::{Duration, Instant};

const PR_URL: &str = "https://git.example.com/acme/demo/pulls/7";

/// The name the engine records for step `id` (`StepKind::name`).
fn engine_name(id: &str) -> String {
    let (kind, n) = id.split_once('/').unwrap_or((id, ""));
    match kind {
        "fix" => format!("owner fix {n}"),
        "commit-fix" => format!("commit fix {n}"),
        "push-approval" => format!("approve pushing the fix for follow-up {n}"),
        "push" => format!("push, run {n}"),
        "ci" => format!("CI run {n}"),
        "reply" => format!("reply to the comments of follow-up {n}"),
        "sync" => format!("update onto the moved base, run {n}"),
        "resolve" => format!("owner resolves conflicts, round {n}"),
        "check" => format!("check run {n}"),
        _ => id.to_owned(),
    }
}

fn step(id: &str, intent: Intent, input: Value, receipt: Option<Value>) -> Vec<Event> {
    let mut events = vec![
        Event::StepIntentRecorded {
            step_id: id.into(),
            name: engine_name(id),
            intent,
            depends_on: vec![],
            input,
        },
        Event::StepStarted { step_id: id.into() },
    ];
    if let Some(receipt) = receipt {
        events.push(Event::StepCompleted {
            step_id: id.into(),
            receipt,
        });
    }
    events
}

fn review_comments() -> Event {
    Event::FollowUpOpened {
        kind: "review_comments".into(),
        keys: vec!["review-comment:41".into(), "comment:42".into()],
        detail: json!({"pull_request": 7, "url": PR_URL, "comments": [
            {"key": "review-comment:41", "id": 41, "kind": "review_comment", "author": "bob", "body": "Use `--locked`\nin the install command", "path": "README.md", "line": 7, "diff_hunk": "@@ -1,3 +1,7 @@\n+## Installation", "url": format!("{PR_URL}#issuecomment-41")},
            {"key": "comment:42", "id": 42, "kind": "comment", "author": "carol", "body": "Thanks! \u{1b}]0;pwned\u{7}One more: link it from the intro.", "url": format!("{PR_URL}#issuecomment-42")}
        ]}),
    }
}

fn merge_conflict() -> Event {
    Event::FollowUpOpened {
        kind: "merge_conflict".into(),
        keys: vec!["merge_conflict:9b1d44e0aa".into()],
        detail: json!({"head_sha": "9b1d44e0aa", "base": "main", "mergeable": "conflicted"}),
    }
}

/// The first follow-up's round, answered: fix, commit, push approval, push, CI, replies.
fn first_round() -> Vec<Event> {
    let mut e = vec![
        review_comments(),
        Event::TaskStageEntered {
            stage: Stage::Coding,
        },
    ];
    e.extend(step(
        "fix/1",
        Intent::NonIdempotent,
        json!({"reason": "review_comments", "follow_up": 1}),
        Some(json!({"summary": "used --locked; linked it", "changed_files": ["README.md"]})),
    ));
    e.extend(step(
        "commit-fix/1",
        Intent::Idempotent,
        json!({}),
        Some(json!({"sha": "9b1d44e0aa12", "created": true})),
    ));
    e.push(Event::TaskStageEntered {
        stage: Stage::Shipping,
    });
    e.extend(step(
        "push-approval/1",
        Intent::ReadOnly,
        json!({"follow_up": 1}),
        Some(json!({"decision": "approve"})),
    ));
    e.extend(step(
        "push/1",
        Intent::NonIdempotent,
        json!({}),
        Some(json!({"sha": "9b1d44e0aa12", "branch": "gaffer/x", "remote": "origin"})),
    ));
    e.extend(step(
        "ci/1",
        Intent::ReadOnly,
        json!({}),
        Some(json!({"sha": "9b1d44e0aa12", "state": "success"})),
    ));
    e.extend(step("reply/1", Intent::Idempotent, json!({"follow_up": 1}), Some(json!({"follow_up": 1, "replies": [
        {"to": "review-comment:41", "id": 51, "url": format!("{PR_URL}#issuecomment-51"), "found": false},
        {"to": "comment:42", "id": 52, "url": format!("{PR_URL}#issuecomment-52"), "found": false}
    ]}))));
    e.push(Event::TaskDone {
        summary: json!({"branch": "gaffer/x"}),
    });
    e
}

/// The second follow-up's steps after its update started: resolve, check, push.
fn conflict_resolved() -> Vec<Event> {
    let mut e = vec![Event::StepCompleted {
        step_id: "sync/1".into(),
        receipt: json!({"outcome": "conflicted", "files": ["README.md"], "strategy": "rebase", "base": "main", "base_sha": "c0ffee1234"}),
    }];
    e.push(Event::TaskStageEntered {
        stage: Stage::Coding,
    });
    e.extend(step(
        "resolve/1",
        Intent::NonIdempotent,
        json!({"sync": 1, "files": ["README.md"], "unresolved": false}),
        Some(json!({"summary": "kept both", "outcome": "updated", "head": "77aa0b5c3d"})),
    ));
    e.push(Event::TaskStageEntered {
        stage: Stage::Testing,
    });
    e.extend(step(
        "check/2",
        Intent::Idempotent,
        json!({"sync": 1}),
        Some(json!({"passed": true, "command": "make check", "exit_code": 0})),
    ));
    e.push(Event::TaskStageEntered {
        stage: Stage::Shipping,
    });
    e.extend(step(
        "push-approval/2",
        Intent::ReadOnly,
        json!({"follow_up": 2, "sync": 1}),
        Some(json!({"decision": "approve"})),
    ));
    e.extend(step(
        "push/2",
        Intent::NonIdempotent,
        json!({"sync": 1, "lease": "9b1d44e0aa12"}),
        Some(json!({"sha": "77aa0b5c3d", "branch": "gaffer/x", "remote": "origin"})),
    ));
    e.push(Event::TaskDone {
        summary: json!({"branch": "gaffer/x"}),
    });
    e
}

async fn append(home: &Home, events: Vec<Event>) {
    let j = SqliteJournal::open(&home.db(), Durability::Normal)
        .await
        .unwrap();
    let stream = StreamId::from(DONE_TASK);
    let head = j.head(&stream).await.unwrap();
    j.append(
        &stream,
        head,
        events.into_iter().map(NewEvent::now).collect(),
    )
    .await
    .unwrap();
    j.shutdown().await;
}

#[test]
fn task_show_tells_each_follow_up_what_its_steps_did_and_how_following_ended() {
    let home = Home::new();
    home.seed_finished();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut events = first_round();
        events.push(merge_conflict());
        events.extend(step(
            "sync/1",
            Intent::Idempotent,
            json!({"follow_up": 2}),
            None,
        ));
        events.extend(conflict_resolved());
        events.push(Event::FollowingEnded {
            reason: format!("the pull request {PR_URL} was merged"),
        });
        append(&home, events).await;
    });
    let out = home
        .gaffer()
        .args(["task", "show", DONE_TASK])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let section: Vec<&str> = text
        .lines()
        .skip_while(|l| *l != "follow-ups")
        .take_while(|l| !l.is_empty())
        .map(|l| l.split("  (20").next().unwrap_or(l))
        .collect();
    assert_eq!(
        section,
        vec![
            "follow-ups",
            "   1. 2 review comments on pull request #7",
            "      README.md:7  bob: Use `--locked` in the install command",
            "      (conversation)  carol: Thanks! \\x1b]0;pwned\\x07One more: link it from the intro.",
            "   2. the base main moved: the pull request no longer merges (a conflict) at 9b1d44e0",
            &format!("  no longer following the pull request: the pull request {PR_URL} was merged"),
        ],
        "{text}"
    );
    for line in [
        "  ✓ reply/1        completed       idempotent — replied to 2 review comments",
        "  ✓ sync/1         completed       idempotent — rebasing onto main c0ffee12 stopped on conflicts in README.md",
        "  ✓ resolve/1      completed       non_idempotent — conflicts resolved; the branch is at 77aa0b5c",
    ] {
        assert!(text.lines().any(|l| l == line), "{line:?} in\n{text}");
    }
    assert!(!text.contains('\x1b'), "{text}");
    assert!(!text.contains("{\""), "raw JSON in\n{text}");
}

#[test]
fn attach_to_a_task_a_follow_up_opened_again_shows_the_round_in_words_until_done_again() {
    let home = Home::new();
    home.seed_finished();
    let rt = tokio::runtime::Runtime::new().unwrap();
    // Done once, answered a review round, then the base moved: the update runs.
    rt.block_on(async {
        let mut events = first_round();
        events.push(merge_conflict());
        events.extend(step(
            "sync/1",
            Intent::Idempotent,
            json!({"follow_up": 2}),
            None,
        ));
        append(&home, events).await;
    });
    let mut attach = std::process::Command::new(assert_cmd::cargo::cargo_bin("gaffer"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home.dir.path())
        .env("GAFFER_CONFIG", home.config())
        .env("GAFFER_DATA_DIR", home.data())
        .args(["attach", "t-019a2b3c4d5e"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Let it attach (it reads the history first), then the round goes on to its end.
    std::thread::sleep(Duration::from_millis(1500));
    rt.block_on(append(&home, conflict_resolved()));
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = attach.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "attach did not end with the task"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    attach
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(status.code(), Some(0), "{err}");
    // Each line without its time stamp.
    let lines: Vec<&str> = err
        .lines()
        .filter_map(|l| l.split_once("s] ").map(|(_, rest)| rest))
        .collect();
    assert_eq!(
        lines,
        vec![
            "↻ follow-up 2: the base main moved: the pull request no longer merges (a conflict) at 9b1d44e0",
            "• sync/1: update onto the moved base, run 1",
            "✓ sync/1: rebasing onto main c0ffee12 stopped on conflicts in README.md",
            "▸ coding",
            "• resolve/1: owner resolves conflicts, round 1",
            "✓ resolve/1: conflicts resolved; the branch is at 77aa0b5c",
            "▸ testing",
            "• check/2: check run 2",
            "✓ check/2 check passed",
            "▸ shipping",
            "• push-approval/2: approve pushing the fix for follow-up 2",
            "✓ push-approval/2",
            "• push/2: push, run 2",
            "✓ push/2 77aa0b5c3d",
            "■ done again (follow-up 2 answered); the pull request is still followed",
        ],
        "{err}"
    );
}
