//! Follow-ups reopen a done task once per key, and only while it is followed.
use super::reducer::{created, given, rejects, stage};
use gaffer_core::*;
use pretty_assertions::assert_eq;
use serde_json::json;

fn done() -> Vec<Event> {
    vec![
        created(),
        stage(Stage::Planning),
        stage(Stage::Coding),
        stage(Stage::Shipping),
        Event::TaskDone {
            summary: json!({"pull_request": {"number": 3}}),
        },
    ]
}

fn comments(keys: &[&str]) -> Event {
    Event::FollowUpOpened {
        kind: "review_comments".into(),
        keys: keys.iter().map(|k| k.to_string()).collect(),
        detail: json!({"comments": keys}),
    }
}

#[test]
fn a_follow_up_reopens_a_done_task_into_shipping() {
    let mut events = done();
    events.push(comments(&["review:1", "issue:2"]));
    let t = given(&events);
    assert_eq!(t.stage, Stage::Shipping);
    assert_eq!(t.outcome, None);
    let f = t.last_follow_up().unwrap();
    assert_eq!((f.n, f.kind.as_str()), (1, "review_comments"));
    assert_eq!(f.keys, ["review:1", "issue:2"]);
    // The reopened task goes back to coding and can be done again.
    events.push(stage(Stage::Coding));
    events.push(stage(Stage::Shipping));
    events.push(Event::TaskDone { summary: json!({}) });
    events.push(comments(&["review:3"]));
    let t = given(&events);
    assert_eq!(t.follow_ups.len(), 2);
    assert_eq!(t.follow_ups[1].n, 2);
}

#[test]
fn the_same_comment_cannot_open_a_second_follow_up() {
    let mut events = done();
    events.push(comments(&["review:1"]));
    events.push(Event::TaskDone { summary: json!({}) });
    let t = given(&events);
    // A second follower, or the same after a restart, offers the comment again.
    let err = rejects(&t, comments(&["issue:9", "review:1"]));
    assert_eq!(
        err,
        Rejected::FollowUp("`review:1` was already followed up".into())
    );
    assert!(matches!(
        rejects(&t, comments(&["a", "a"])),
        Rejected::FollowUp(_)
    ));
    assert_eq!(rejects(&t, comments(&[])), Rejected::Empty("keys"));
}

#[test]
fn only_a_done_and_still_followed_task_takes_a_follow_up() {
    // Still working: the follower waits until it is done.
    let working = given(&done()[..4]);
    assert!(matches!(
        rejects(&working, comments(&["k"])),
        Rejected::FollowUp(_)
    ));
    // Failed tasks are over for good.
    let mut failed = done()[..4].to_vec();
    failed.push(Event::TaskFailed { reason: "x".into() });
    let failed = given(&failed);
    assert_eq!(
        rejects(&failed, comments(&["k"])),
        Rejected::FollowUp("only a done task is followed; this one is failed".into())
    );
    // A merged pull request is no longer followed.
    let mut ended = done();
    ended.push(Event::FollowingEnded {
        reason: "the pull request was merged".into(),
    });
    let ended = given(&ended);
    assert!(!ended.is_followed());
    assert_eq!(ended.stage, Stage::Done);
    assert_eq!(
        rejects(&ended, comments(&["k"])),
        Rejected::FollowUp("following ended: the pull request was merged".into())
    );
    // Other events stay refused on a done task.
    let t = given(&done());
    assert!(t.is_followed());
    assert!(matches!(
        rejects(&t, stage(Stage::Coding)),
        Rejected::TaskFinished { .. }
    ));
}
