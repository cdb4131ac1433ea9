//! Events and approvals across nodes on one PostgreSQL: two front nodes (`gaffer
//! serve --workers 0`) and one `gaffer worker`, all separate processes. A task
//! requested on node A is run by the worker; its approvals are decided through
//! node B; node A's event stream shows every step, woken by LISTEN/NOTIFY.

use super::failover::Cluster;
use gaffer_core::StreamId;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// The `http://HOST:PORT` a `gaffer serve` announced on its first line.
fn base_of(first_line: &str) -> String {
    let addr = first_line
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("no address in {first_line:?}"));
    format!("http://{addr}")
}

/// Every journal event a node streams (`/api/events`), as `(kind, event)`.
struct Stream {
    response: reqwest::Response,
    buffer: String,
}

impl Stream {
    async fn open(http: &reqwest::Client, base: &str) -> Self {
        let response = http.get(format!("{base}/api/events")).send().await.unwrap();
        assert_eq!(response.status(), 200);
        Self {
            response,
            buffer: String::new(),
        }
    }

    /// The next event, or a panic after `deadline`.
    async fn next(&mut self, deadline: Instant) -> Value {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let frame: String = self.buffer.drain(..end + 2).collect();
                if let Some(data) = frame.lines().find_map(|l| l.strip_prefix("data:")) {
                    return serde_json::from_str(data.trim()).unwrap();
                }
                continue; // a keep-alive comment
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let chunk = tokio::time::timeout(left, self.response.chunk())
                .await
                .expect("node A streamed nothing more before the deadline")
                .unwrap()
                .expect("node A closed its event stream");
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_decided_on_one_node_wakes_the_worker_on_another_and_node_a_streams_it_all() {
    let Some(c) = Cluster::new().await else {
        return;
    };
    c.project("p0");
    c.ok(&["auto", "off", "--project", "p0"]);
    let front = ["serve", "--listen", "127.0.0.1:0", "--workers", "0"];
    let (_a, first_a) = c.start(&front, None);
    let (_b, first_b) = c.start(&front, None);
    assert!(first_a.contains("runs no tasks"), "{first_a}");
    let (a, b) = (base_of(&first_a), base_of(&first_b));
    let http = c.http();
    let mut stream = Stream::open(&http, &a).await;

    let r = http
        .post(format!("{a}/api/tasks"))
        .json(&json!({"project": "p0", "request": "Add an installation section to README"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let task = r.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (_worker, worker_id) = c.worker(None);

    // Node A streams the task as the worker runs it; each approval is decided on B.
    let deadline = Instant::now() + Duration::from_secs(240);
    let mut decided = Vec::new();
    let mut kinds = Vec::new();
    loop {
        let e = stream.next(deadline).await;
        if e["stream_id"] != task.as_str() {
            continue;
        }
        let kind = e["type"].as_str().unwrap().to_owned();
        kinds.push(kind.clone());
        match kind.as_str() {
            "approval_requested" => {
                let id = e["event"]["approval_id"].as_str().unwrap().to_owned();
                let r = http
                    .post(format!("{b}/api/approvals/{id}/decision"))
                    .json(&json!({"decision": "approve", "task_id": task}))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
                decided.push(id);
            }
            "task_done" => break,
            "task_failed" | "task_blocked" | "task_cancelled" => panic!("task ended {kind}: {e}"),
            _ => {}
        }
    }
    assert!(
        !decided.is_empty(),
        "the plan waited for a person: {kinds:?}"
    );
    assert!(kinds.contains(&"approval_decided".to_owned()), "{kinds:?}");

    // The worker process ran it all, under its lease; the decisions were people's
    // (no lease), made through node B.
    let stream_id = StreamId::from(task.as_str());
    let writers = c.journal.event_writers(&stream_id).await.unwrap();
    let events = c.journal.stream_events(&stream_id, 0).await.unwrap();
    for (w, e) in writers.iter().zip(&events).skip(1) {
        match e.event.kind() {
            "approval_decided" => assert_eq!(w.worker_id, None, "seq {}", w.seq),
            _ => assert_eq!(
                w.worker_id.as_deref(),
                Some(worker_id.as_str()),
                "seq {} ({})",
                w.seq,
                e.event.kind()
            ),
        }
    }
    for id in &decided {
        let approval: Value = http
            .get(format!("{a}/api/approvals/{id}"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(approval["state"], "approved", "{approval}");
    }
}
