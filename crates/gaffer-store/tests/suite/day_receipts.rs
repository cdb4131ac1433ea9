//! The daily spending cap's query: every receipt of a project's steps since a
//! time, however many tasks the project has.
use super::support::*;
use gaffer_core::*;
use gaffer_store::NewEvent;
use serde_json::json;

const DAY: i64 = 1_700_006_400_000;

/// Task `t` of `project`, created at `created`, whose step `s` ends at `ended` with
/// a receipt that spent `tokens`.
async fn spent(
    j: &std::sync::Arc<dyn gaffer_store::Journal>,
    t: &str,
    project: &str,
    created: i64,
    ended: i64,
    tokens: u64,
) {
    let on = |at, event| NewEvent { at, event };
    j.append(
        &StreamId::from(t),
        0,
        vec![
            on(created, task(t, project)),
            on(created, step("s", Intent::NonIdempotent)),
        ],
    )
    .await
    .unwrap();
    j.append(
        &StreamId::from(t),
        2,
        vec![
            on(
                ended,
                Event::StepStarted {
                    step_id: "s".into(),
                },
            ),
            on(
                ended,
                Event::StepCompleted {
                    step_id: "s".into(),
                    receipt: json!({ "usage": { "input_tokens": tokens } }),
                },
            ),
        ],
    )
    .await
    .unwrap();
}

each_backend! {
async fn a_projects_receipts_since_a_time_include_its_oldest_tasks(b: Backend) {
    let t = temp_journal(b).await;
    let j = &t.journal;
    for p in ["p-1", "p-2"] {
        j.append(&p.into(), 0, vec![at(project(p))]).await.unwrap();
    }
    // The oldest task of p-1 ends its step today, after 120 newer tasks.
    spent(j, "t-old", "p-1", DAY - 5 * 86_400_000, DAY + 10, 7).await;
    for n in 0..120 {
        j.append(&StreamId::from(format!("t-new-{n:03}").as_str()), 0, vec![NewEvent { at: DAY + 20 + n, event: task(&format!("t-new-{n:03}"), "p-1") }])
            .await
            .unwrap();
    }
    // Not counted: a step that ended yesterday, and another project's.
    spent(j, "t-yesterday", "p-1", DAY - 86_400_000, DAY - 1, 1000).await;
    spent(j, "t-other", "p-2", DAY, DAY + 5, 2000).await;
    spent(j, "t-today", "p-1", DAY + 1, DAY + 2, 30).await;
    let mut got = j.project_receipts_since("p-1", DAY).await.unwrap();
    got.sort();
    assert_eq!(
        got,
        vec![r#"{"usage":{"input_tokens":30}}"#.to_owned(), r#"{"usage":{"input_tokens":7}}"#.to_owned()]
    );
    assert_eq!(j.project_receipts_since("p-2", DAY + 6).await.unwrap(), Vec::<String>::new());
}
}
