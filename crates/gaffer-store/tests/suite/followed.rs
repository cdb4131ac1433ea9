//! The follower's query: only the done tasks whose pull request is still followed.
use super::support::*;
use gaffer_core::*;
use serde_json::json;

/// Task `t`, done; with a receipt for step `pr` when `pull_request`.
async fn done(j: &std::sync::Arc<dyn gaffer_store::Journal>, t: &str, pull_request: bool) {
    let mut events = vec![at(task(t, "p-1"))];
    events.extend(
        [Stage::Planning, Stage::Coding, Stage::Shipping]
            .map(|stage| at(Event::TaskStageEntered { stage })),
    );
    if pull_request {
        events.extend([
            at(step("pr", Intent::NonIdempotent)),
            at(Event::StepStarted {
                step_id: "pr".into(),
            }),
            at(Event::StepCompleted {
                step_id: "pr".into(),
                receipt: json!({"number": 7, "url": "https://git.example.com/acme/demo/pulls/7"}),
            }),
        ]);
    }
    events.push(at(Event::TaskDone {
        summary: json!({"branch": format!("gaffer/{t}")}),
    }));
    j.append(&StreamId::from(t), 0, events).await.unwrap();
}

async fn then(j: &std::sync::Arc<dyn gaffer_store::Journal>, t: &str, event: Event) {
    let head = j.head(&StreamId::from(t)).await.unwrap();
    j.append(&StreamId::from(t), head, vec![at(event)])
        .await
        .unwrap();
}

each_backend! {
async fn only_done_tasks_with_a_pull_request_still_followed_are_listed_for_the_follower(b: Backend) {
    let t = temp_journal(b).await;
    let j = &t.journal;
    j.append(&"p-1".into(), 0, vec![at(project("p-1"))]).await.unwrap();
    // Many done tasks the follower must not read: no pull request (the branch stayed
    // local), or one whose following ended (merged, closed, a person said stop).
    for n in 0..150 {
        done(j, &format!("t-local-{n:03}"), false).await;
    }
    for n in 0..30 {
        let id = format!("t-merged-{n:02}");
        done(j, &id, true).await;
        then(j, &id, Event::FollowingEnded { reason: "the pull request was merged".into() }).await;
    }
    // A task under way with a pull request step recorded but not done.
    j.append(&"t-running".into(), 0, vec![at(task("t-running", "p-1")), at(step("pr", Intent::NonIdempotent))])
        .await
        .unwrap();
    // Followed: done with a pull request, oldest first; one of them answered a
    // follow-up already and is done again.
    done(j, "t-followed-a", true).await;
    done(j, "t-followed-b", true).await;
    then(j, "t-followed-b", Event::FollowUpOpened {
        kind: "review_comments".into(),
        keys: vec!["comment:1".into()],
        detail: json!({}),
    }).await;
    assert_eq!(j.followed_tasks("pr").await.unwrap(), vec!["t-followed-a".to_owned()], "reopened: shipping, not followed while it runs");
    then(j, "t-followed-b", Event::TaskDone { summary: json!({}) }).await;
    // (The reducer never lets anything follow `following_ended`: what the query
    // relies on to read one event per done task.)
    assert!(j
        .append(&"t-merged-00".into(), j.head(&"t-merged-00".into()).await.unwrap(), vec![at(Event::FollowUpOpened {
            kind: "review_comments".into(),
            keys: vec!["comment:9".into()],
            detail: json!({}),
        })])
        .await
        .is_err());
    assert_eq!(
        j.followed_tasks("pr").await.unwrap(),
        vec!["t-followed-a".to_owned(), "t-followed-b".to_owned()]
    );
    // Its following ends: no longer listed; another step id names no pull request.
    then(j, "t-followed-a", Event::FollowingEnded { reason: "the pull request was closed".into() }).await;
    assert_eq!(j.followed_tasks("pr").await.unwrap(), vec!["t-followed-b".to_owned()]);
    assert_eq!(j.followed_tasks("pull-request").await.unwrap(), Vec::<String>::new());
}
}
