//! The server does not wait forever on a client: connections that never finish
//! their headers or sit idle are closed, a request body that never arrives gets
//! 408, and a client that stops reading its event stream is dropped.

use super::support::*;
use gaffer_core::{Event, Intent, StepId, StreamId};
use gaffer_server::Limits;
use gaffer_store::NewEvent;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn short() -> Limits {
    Limits {
        header_read: Duration::from_millis(500),
        request: Duration::from_secs(1),
        slow_reader: Duration::from_secs(1),
    }
}

/// Everything the server sends until it closes the connection, or `None` if it is
/// still open after `within` (far longer than the limits under test).
async fn until_closed(stream: &mut TcpStream, within: Duration) -> Option<String> {
    let mut got = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    tokio::time::timeout(within, async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await
    .ok()?;
    Some(String::from_utf8_lossy(&got).into_owned())
}

#[tokio::test]
async fn connections_that_never_finish_their_headers_or_sit_idle_are_closed() {
    let h = start_limited(short()).await;
    let addr = h.base.trim_start_matches("http://").to_owned();
    let mut silent = TcpStream::connect(&addr).await.unwrap();
    let mut half = TcpStream::connect(&addr).await.unwrap();
    half.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .await
        .unwrap();
    let mut idle = TcpStream::connect(&addr).await.unwrap();
    idle.write_all(b"GET /login HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    let within = Duration::from_secs(20);
    assert_eq!(until_closed(&mut silent, within).await.as_deref(), Some(""));
    assert_eq!(until_closed(&mut half, within).await.as_deref(), Some(""));
    let answered = until_closed(&mut idle, within)
        .await
        .expect("an idle kept-alive connection is closed");
    assert!(answered.starts_with("HTTP/1.1 200"), "{answered}");
    // The server still answers a prompt client.
    let ok = h.http.get(h.url("/api/tasks")).send().await.unwrap();
    assert_eq!(ok.status(), 200);
}

#[tokio::test]
async fn a_request_whose_body_never_arrives_gets_408_and_stores_nothing() {
    let h = start_limited(short()).await;
    let project = h.project("p").await;
    let before = h.event_count().await;
    let mut s = TcpStream::connect(h.base.trim_start_matches("http://"))
        .await
        .unwrap();
    let body = format!(r#"{{"project":"{}","request":"x"}}"#, project.id);
    s.write_all(
        format!(
            "POST /api/tasks HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{}",
            h.local.expose(),
            body.len() + 10,
            body
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let answer = until_closed(&mut s, Duration::from_secs(20))
        .await
        .expect("the server answers and closes");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("request_timeout"), "{answer}");
    assert_eq!(h.event_count().await, before);
}

/// A client that opens the event stream and never reads: once the socket buffers
/// are full and a write has waited `slow_reader`, the server closes the connection
/// and forgets the stream (the open-stream gauge goes back to 0).
#[tokio::test]
async fn a_client_that_stops_reading_its_event_stream_is_dropped() {
    let h = start_limited(short()).await;
    let project = h.project("p").await;
    let task = h.task(&project.id).await;
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut s = socket
        .connect(h.base.trim_start_matches("http://").parse().unwrap())
        .await
        .unwrap();
    s.write_all(
        format!(
            "GET /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\n\r\n",
            h.local.expose()
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let mut head = [0u8; 12];
    s.read_exact(&mut head).await.unwrap();
    assert_eq!(&head, b"HTTP/1.1 200");
    let open = || async {
        let metrics = h
            .http
            .get(h.url("/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        metrics
            .lines()
            .find_map(|l| l.strip_prefix("gaffer_sse_clients "))
            .unwrap()
            .parse::<i64>()
            .unwrap()
    };
    assert_eq!(open().await, 1);
    // ~13 MB of events: more than every buffer between the stream and the client.
    let stream = StreamId(task.clone());
    let big = "x".repeat(32 * 1024);
    for batch in 0..20 {
        let head = h.app.journal().head(&stream).await.unwrap();
        let events = (0..20)
            .map(|i| {
                NewEvent::now(Event::StepIntentRecorded {
                    step_id: StepId(format!("s-{batch}-{i}")),
                    name: "big".into(),
                    intent: Intent::NonIdempotent,
                    depends_on: vec![],
                    input: serde_json::json!({ "text": big }),
                })
            })
            .collect();
        h.app.journal().append(&stream, head, events).await.unwrap();
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while open().await != 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the stream of a client that does not read is still open"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
