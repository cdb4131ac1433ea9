//! Server-sent journal events. The SSE `id:` is the journal's global `pos`; a
//! client that reconnects with `Last-Event-ID` (or `?last_event_id=`, for the
//! first connection of an `EventSource`) gets every event after it from the
//! journal, then live events from the committed-event broadcast, in order and
//! without duplicates. A broadcast overflow is filled from the journal too.
//! The journal is read a page at a time, each page once the client has taken
//! the one before, so a client's memory does not grow with the history's length.

use crate::error::{ApiError, ApiResult};
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

/// Where a stream resumes: after `Last-Event-ID`, else after `?last_event_id=` (an
/// `EventSource` cannot set the header on its first connection). Either one that is
/// not a journal position is refused, naming it, rather than silently streaming from
/// now on without the events the client asked for.
fn last_event_id(headers: &HeaderMap, uri: &Uri) -> ApiResult<Option<i64>> {
    let position = |name: &str, value: Option<&str>| {
        value
            .and_then(|v| v.trim().parse::<i64>().ok())
            .filter(|p| *p >= 0)
            .ok_or_else(|| {
                ApiError::bad_field(
                    name,
                    format!("`{name}` must be a journal position (an SSE `id:` this server sent)"),
                )
            })
    };
    let header = headers
        .get("last-event-id")
        .map(|v| position("Last-Event-ID", v.to_str().ok()))
        .transpose()?;
    let query = uri
        .query()
        .unwrap_or("")
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == "last_event_id")
        .map(|(_, v)| position("last_event_id", Some(v)))
        .transpose()?;
    Ok(header.or(query))
}

/// An event as the streams and the history send it, with `approval` on approval events.
pub(crate) fn wire(e: &RecordedEvent, approval: Option<api::Approval>) -> api::StreamEvent {
    api::StreamEvent {
        pos: e.pos,
        stream_id: e.stream_id.clone(),
        seq: e.seq,
        at: e.at,
        kind: e.event.kind().to_owned(),
        event: serde_json::to_value(&e.event).unwrap_or_default(),
        approval,
    }
}

/// The approval an event is about, if it is an approval event.
pub(crate) fn approval_of(e: &gaffer_core::Event) -> Option<&str> {
    use gaffer_core::Event as E;
    match e {
        E::ApprovalRequested { approval_id, .. }
        | E::ApprovalDecided { approval_id, .. }
        | E::ApprovalExpired { approval_id, .. }
        | E::ApprovalWithdrawn { approval_id, .. } => Some(approval_id.as_str()),
        _ => None,
    }
}

/// The SSE frame of an event; an approval event carries the approval as it stands.
async fn to_sse(s: &ServerState, e: &RecordedEvent) -> SseEvent {
    let approval = match approval_of(&e.event) {
        Some(id) => s.app.approval(id).await.ok(),
        None => None,
    };
    SseEvent::default()
        .id(e.pos.to_string())
        .event(e.event.kind())
        .data(serde_json::to_string(&wire(e, approval)).unwrap_or_default())
}

/// How the document describes one event of a stream: before OpenAPI 3.2 a
/// `text/event-stream` schema describes each event as its fields, so `data` is a string
/// holding a [`api::StreamEvent`] as JSON (`contentSchema`, which utoipa has no keyword
/// for, so it is added as a raw key).
pub struct EventFrame;

impl utoipa::PartialSchema for EventFrame {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        use utoipa::openapi::Ref;
        let data = ObjectBuilder::new()
            .schema_type(Type::String)
            .description(Some("the event as JSON"))
            .content_media_type("application/json")
            .extensions(Some(
                [(
                    "contentSchema",
                    serde_json::to_value(Ref::from_schema_name("StreamEvent")).unwrap_or_default(),
                )]
                .into_iter()
                .collect(),
            ));
        ObjectBuilder::new()
            .description(Some(
                "One server-sent event: `id` is the journal position, `event` the event's type",
            ))
            .property(
                "id",
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .pattern(Some("^[0-9]+$")),
            )
            .property("event", ObjectBuilder::new().schema_type(Type::String))
            .property("data", data)
            .required("id")
            .required("event")
            .required("data")
            .into()
    }
}

impl utoipa::ToSchema for EventFrame {
    fn schemas(
        schemas: &mut Vec<(
            String,
            utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>,
        )>,
    ) {
        use utoipa::PartialSchema;
        schemas.push((api::StreamEvent::name().into(), api::StreamEvent::schema()));
        api::StreamEvent::schemas(schemas);
    }
}

/// Every journal event, live; with `Last-Event-ID`, everything after it first.
#[utoipa::path(get, path = "/api/events",
    params(("Last-Event-ID" = Option<i64>, Header, minimum = 0, nullable = false, description = "resume after this journal position"),
           ("last_event_id" = Option<i64>, Query, minimum = 0, description = "same, for a first EventSource connection")),
    responses((status = 200, content_type = "text/event-stream", body = EventFrame),
              (status = 400, body = api::ErrorResponse, description = "`Last-Event-ID` or `last_event_id` is not a journal position")))]
pub async fn all_events(
    State(s): State<ServerState>,
    headers: HeaderMap,
    uri: Uri,
) -> ApiResult<SseStream> {
    let after = last_event_id(&headers, &uri)?;
    Ok(stream(s, None, after).await)
}

/// One task's events: its whole history (or what follows `Last-Event-ID`), then live.
#[utoipa::path(get, path = "/api/tasks/{id}/events",
    params(("id" = String, Path),
           ("Last-Event-ID" = Option<i64>, Header, minimum = 0, nullable = false, description = "resume after this journal position"),
           ("last_event_id" = Option<i64>, Query, minimum = 0, description = "same, for a first EventSource connection")),
    responses((status = 200, content_type = "text/event-stream", body = EventFrame),
              (status = 400, body = api::ErrorResponse, description = "`Last-Event-ID` or `last_event_id` is not a journal position"),
              (status = 404, body = api::ErrorResponse)))]
pub async fn task_events(
    State(s): State<ServerState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    uri: Uri,
) -> ApiResult<SseStream> {
    let after = last_event_id(&headers, &uri)?;
    // Whether it is a task, from its first event alone: the task's view (every step
    // with its input) would cost each new client as much as the history.
    let first = s
        .app
        .journal()
        .stream_events_after(&StreamId(id.clone()), 0, 1)
        .await
        .map_err(|e| ApiError::from(gaffer_app::AppError::Store(e)))?;
    if !matches!(
        first.first().map(|e| &e.event),
        Some(gaffer_core::Event::TaskCreated { .. })
    ) {
        return Err(gaffer_app::AppError::NotFound { what: "task", id }.into());
    }
    Ok(stream(s, Some(id), Some(after.unwrap_or(0))).await)
}

/// Events read from the journal at a time while catching a client up.
const PAGE: i64 = 32;
/// Frames made ahead of what the client's socket has taken. With [`PAGE`] and the
/// connection's write buffer (see [`crate::serve`]), this is what bounds a client's
/// memory, however long the history it replays.
const QUEUE: usize = 8;

async fn stream(s: ServerState, task: Option<String>, after: Option<i64>) -> SseStream {
    let (tx, rx) = mpsc::channel::<Result<SseEvent, Infallible>>(QUEUE);
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

/// Sends the events of interest after `after` (up to `until`, if given) from the
/// journal, a page at a time, each page only once the client has taken the one
/// before. Returns the last position read.
async fn replay(
    s: &ServerState,
    task: Option<&str>,
    after: i64,
    until: Option<i64>,
    tx: &mpsc::Sender<Result<SseEvent, Infallible>>,
) -> Option<i64> {
    let journal = s.app.journal();
    let mut last = after;
    loop {
        let page = match task {
            Some(t) => {
                journal
                    .stream_events_after(&StreamId(t.to_owned()), last, PAGE)
                    .await
            }
            None => journal.events_after(last, PAGE).await,
        }
        .ok()?;
        let full = page.len() as i64 == PAGE;
        for e in page {
            if until.is_some_and(|u| e.pos > u) {
                return Some(last);
            }
            last = e.pos;
            tx.send(Ok(to_sse(s, &e).await)).await.ok()?;
        }
        if !full {
            return Some(last);
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
        last = replay(s, task, last, None, tx).await?;
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
                            tx.send(Ok(to_sse(s, &e).await)).await.ok()?;
                        }
                    } else if e.pos > last {
                        // A gap: appends broadcast slightly out of order, or another
                        // process wrote. Everything up to e.pos is committed: read it.
                        replay(s, task, last, Some(e.pos), tx).await?;
                        last = e.pos;
                    }
                }
                Err(RecvError::Lagged(_)) => {
                    last = replay(s, task, last, None, tx).await?;
                }
                Err(RecvError::Closed) => return None,
            },
            () = tx.closed() => return None,
        }
    }
}
