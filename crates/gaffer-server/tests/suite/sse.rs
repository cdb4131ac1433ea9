//! SSE streams: live events, resume with Last-Event-ID, one task's history.

use super::support::*;
use futures::StreamExt;
use gaffer_core::ApprovalKind;
use serde_json::Value;
use std::time::Duration;

/// Reads SSE frames (id, event, data) from a response.
pub struct SseReader {
    stream: futures::stream::BoxStream<'static, reqwest::Result<bytes_compat::Bytes>>,
    buf: String,
}

mod bytes_compat {
    pub type Bytes = axum::body::Bytes;
}

impl SseReader {
    pub fn new(r: reqwest::Response) -> Self {
        Self {
            stream: r.bytes_stream().boxed(),
            buf: String::new(),
        }
    }

    /// The next event (skipping keep-alive comments), as (id, type, data).
    pub async fn next(&mut self) -> (i64, String, Value) {
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let frame: String = self.buf.drain(..end + 2).collect();
                let (mut id, mut kind, mut data) = (None, String::new(), String::new());
                for line in frame.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        id = v.trim().parse().ok();
                    } else if let Some(v) = line.strip_prefix("event:") {
                        kind = v.trim().to_owned();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.trim_start());
                    }
                }
                if let Some(id) = id {
                    return (id, kind, serde_json::from_str(&data).unwrap());
                }
                continue;
            }
            let chunk = tokio::time::timeout(Duration::from_secs(5), self.stream.next())
                .await
                .expect("no SSE event within 5s")
                .unwrap()
                .unwrap();
            self.buf.push_str(&String::from_utf8_lossy(&chunk));
        }
    }
}

#[tokio::test]
async fn live_events_then_resume_with_last_event_id() {
    let h = start(false).await;
    h.project("alpha").await;
    let r = h.http.get(h.url("/api/events")).send().await.unwrap();
    assert_eq!(r.headers()["content-type"], "text/event-stream");
    let mut live = SseReader::new(r);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let task = h.task("alpha").await;
    let (id1, kind, data) = live.next().await;
    assert_eq!(kind, "task_created");
    assert_eq!(data["stream_id"], task);
    assert_eq!(data["pos"], id1);
    let a = h.ask(&task, "plan", ApprovalKind::Plan, "plan").await;
    let (id2, kind, _) = live.next().await;
    assert_eq!(kind, "step_intent_recorded");
    let (id3, kind, data) = live.next().await;
    assert_eq!(kind, "approval_requested");
    assert_eq!(data["event"]["approval_id"], a.id);
    assert!(id1 < id2 && id2 < id3);
    drop(live);
    // Reconnect after id1: the two later events come from the journal, then live ones.
    let r = h
        .http
        .get(h.url("/api/events"))
        .header("last-event-id", id1.to_string())
        .send()
        .await
        .unwrap();
    let mut resumed = SseReader::new(r);
    assert_eq!(resumed.next().await.0, id2);
    assert_eq!(resumed.next().await.0, id3);
    h.app.withdraw(&a.id, "moved on").await.unwrap();
    let (id4, kind, _) = resumed.next().await;
    assert_eq!(kind, "approval_withdrawn");
    assert!(id4 > id3);
    // The query form, for an EventSource's first connection.
    let r = h
        .http
        .get(h.url(&format!("/api/events?last_event_id={id3}")))
        .send()
        .await
        .unwrap();
    assert_eq!(SseReader::new(r).next().await.0, id4);
}

#[tokio::test]
async fn a_task_stream_has_its_history_and_only_its_events() {
    let h = start(false).await;
    h.project("alpha").await;
    let t1 = h.task("alpha").await;
    let t2 = h.task("alpha").await;
    let r = h
        .http
        .get(h.url(&format!("/api/tasks/{t1}/events")))
        .send()
        .await
        .unwrap();
    let mut s = SseReader::new(r);
    let (first, kind, _) = s.next().await;
    assert_eq!(kind, "task_created");
    h.ask(&t2, "x", ApprovalKind::Tool, "ls").await;
    h.ask(&t1, "y", ApprovalKind::Tool, "ls").await;
    let (_, kind, data) = s.next().await;
    assert_eq!(
        (kind.as_str(), data["stream_id"].as_str().unwrap()),
        ("step_intent_recorded", t1.as_str())
    );
    let (last, kind, _) = s.next().await;
    assert_eq!(kind, "approval_requested");
    // Resume within the task.
    let r = h
        .http
        .get(h.url(&format!("/api/tasks/{t1}/events")))
        .header("last-event-id", first.to_string())
        .send()
        .await
        .unwrap();
    let mut s = SseReader::new(r);
    s.next().await;
    assert_eq!(s.next().await.0, last);
    let r = h
        .http
        .get(h.url("/api/tasks/t-nope/events"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), reqwest::StatusCode::NOT_FOUND);
}

/// A resume position that is not a journal position (not a number, negative, past
/// i64) used to be ignored, so the client silently got a live-only stream and missed
/// what it asked to replay. It is refused with 400 naming the header or parameter.
#[tokio::test]
async fn a_last_event_id_that_is_not_a_position_is_refused() {
    let h = start(false).await;
    h.project("alpha").await;
    let task = h.task("alpha").await;
    let cases = [
        ("/api/events", Some("abc"), None, "Last-Event-ID"),
        ("/api/events", Some("-1"), None, "Last-Event-ID"),
        (
            "/api/events",
            None,
            Some("9223372036854775808"),
            "last_event_id",
        ),
        ("/api/events", Some("1"), Some("x"), "last_event_id"),
        (
            &*format!("/api/tasks/{task}/events"),
            Some("1.5"),
            None,
            "Last-Event-ID",
        ),
    ];
    for (path, header, query, field) in cases {
        let mut url = h.url(path);
        if let Some(q) = query {
            url.push_str(&format!("?last_event_id={q}"));
        }
        let mut req = h.http.get(&url);
        if let Some(v) = header {
            req = req.header("last-event-id", v);
        }
        let r = tokio::time::timeout(Duration::from_secs(10), req.send())
            .await
            .expect("an answer, not a stream")
            .unwrap();
        assert_eq!(
            r.status(),
            reqwest::StatusCode::BAD_REQUEST,
            "{path} {header:?} {query:?}"
        );
        let b: Value = r.json().await.unwrap();
        assert_eq!(b["error"]["field"], field, "{b}");
    }
    // A real position still resumes.
    let r = h
        .http
        .get(h.url("/api/events"))
        .header("last-event-id", "0")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), reqwest::StatusCode::OK);
    let (id, kind, _) = SseReader::new(r).next().await;
    assert_eq!((id, kind.as_str()), (1, "project_registered"));
}
