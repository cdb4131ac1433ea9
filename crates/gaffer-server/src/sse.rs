//! Server-sent journal events. The SSE `id:` is the journal's global `pos`; a
//! client that reconnects with `Last-Event-ID` (or `?last_event_id=`, for the
//! first connection of an `EventSource`) gets every event after it from the
//! journal, then live events from the committed-event broadcast, in order and
//! without duplicates. A broadcast overflow is filled from the journal too.

use crate::error::ApiResult;
use crate::ServerState;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Uri};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use gaffer_core::StreamId;
use gaffer_protocol::api;
use gaffer_store::RecordedEvent;
use std::convert::Infallible;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

type SseStream =
    Sse<axum::response::sse::KeepAliveStream<ReceiverStream<Result<SseEvent, Infallible>>>>;

fn last_event_id(headers: &HeaderMap, uri: &Uri) -> Option<i64> {
    headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
        .or_else(|| {
            uri.query()?
                .split('&')
                .filter_map(|kv| kv.split_once('='))
                .find(|(k, _)| *k == "last_event_id")
                .and_then(|(_, v)| v.parse().ok())
        })
}

fn to_sse(e: &RecordedEvent) -> SseEvent {
    let wire = api::StreamEvent {
        pos: e.pos,
        stream_id: e.stream_id.clone(),
        seq: e.seq,
        at: e.at,
        kind: e.event.kind().to_owned(),
        event: serde_json::to_value(&e.event).unwrap_or_default(),
    };
    SseEvent::default()
        .id(e.pos.to_string())
        .event(e.event.kind())
        .data(serde_json::to_string(&wire).unwrap_or_default())
}

/// Every journal event, live; with `Last-Event-ID`, everything after it first.
#[utoipa::path(get, path = "/api/events",
    params(("Last-Event-ID" = Option<i64>, Header, description = "resume after this journal position"),
           ("last_event_id" = Option<i64>, Query, description = "same, for a first EventSource connection")),
    responses((status = 200, content_type = "text/event-stream", body = api::StreamEvent)))]
pub async fn all_events(State(s): State<ServerState>, headers: HeaderMap, uri: Uri) -> SseStream {
    stream(s, None, last_event_id(&headers, &uri)).await
}

/// One task's events: its whole history (or what follows `Last-Event-ID`), then live.
#[utoipa::path(get, path = "/api/tasks/{id}/events",
    params(("id" = String, Path), ("Last-Event-ID" = Option<i64>, Header, description = "resume after this journal position")),
    responses((status = 200, content_type = "text/event-stream", body = api::StreamEvent), (status = 404, body = api::ErrorResponse)))]
pub async fn task_events(
    State(s): State<ServerState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    uri: Uri,
) -> ApiResult<SseStream> {
    s.app.task(&id).await?;
    Ok(stream(
        s,
        Some(id),
        Some(last_event_id(&headers, &uri).unwrap_or(0)),
    )
    .await)
}

async fn stream(s: ServerState, task: Option<String>, after: Option<i64>) -> SseStream {
    let (tx, rx) = mpsc::channel::<Result<SseEvent, Infallible>>(256);
    // Subscribe before reading the backlog so nothing falls between the two.
    let live = s.app.journal().subscribe();
    let metrics = s.metrics.clone();
    metrics.sse_open();
    tokio::spawn(async move {
        let _ = pump(&s, task.as_deref(), after, live, &tx).await;
        metrics.sse_close();
    });
    Sse::new(ReceiverStream::new(rx)).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}

/// Events of interest after `after`, from the journal.
async fn backlog(s: &ServerState, task: Option<&str>, after: i64) -> Option<Vec<RecordedEvent>> {
    match task {
        Some(t) => {
            let all = s
                .app
                .journal()
                .stream_events(&StreamId(t.to_owned()), 0)
                .await
                .ok()?;
            Some(all.into_iter().filter(|e| e.pos > after).collect())
        }
        None => {
            let mut out = Vec::new();
            let mut from = after;
            loop {
                let page = s.app.journal().events_after(from, 500).await.ok()?;
                let Some(last) = page.last() else { break };
                from = last.pos;
                let full = page.len() == 500;
                out.extend(page);
                if !full || out.len() >= 10_000 {
                    break;
                }
            }
            Some(out)
        }
    }
}

async fn pump(
    s: &ServerState,
    task: Option<&str>,
    after: Option<i64>,
    mut live: tokio::sync::broadcast::Receiver<RecordedEvent>,
    tx: &mpsc::Sender<Result<SseEvent, Infallible>>,
) -> Option<()> {
    let wanted = |e: &RecordedEvent| task.is_none_or(|t| e.stream_id == t);
    let mut last = after.unwrap_or(0);
    let mut resumed = after.is_some();
    if resumed {
        for e in backlog(s, task, last).await? {
            last = last.max(e.pos);
            tx.send(Ok(to_sse(&e))).await.ok()?;
        }
    }
    loop {
        tokio::select! {
            got = live.recv() => match got {
                Ok(e) => {
                    if !resumed {
                        // A live-only stream starts at the first event it sees.
                        resumed = true;
                        last = e.pos - 1;
                    }
                    if e.pos == last + 1 {
                        last = e.pos;
                        if wanted(&e) {
                            tx.send(Ok(to_sse(&e))).await.ok()?;
                        }
                    } else if e.pos > last {
                        // A gap: appends broadcast slightly out of order, or another
                        // process wrote. Everything up to e.pos is committed: read it.
                        for b in backlog(s, task, last).await? {
                            if b.pos <= e.pos {
                                tx.send(Ok(to_sse(&b))).await.ok()?;
                            }
                        }
                        last = e.pos;
                    }
                }
                Err(RecvError::Lagged(_)) => {
                    for e in backlog(s, task, last).await? {
                        last = last.max(e.pos);
                        tx.send(Ok(to_sse(&e))).await.ok()?;
                    }
                }
                Err(RecvError::Closed) => return None,
            },
            () = tx.closed() => return None,
        }
    }
}
