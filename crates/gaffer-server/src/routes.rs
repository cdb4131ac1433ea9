//! The `/api` routes. Each handler is annotated for the OpenAPI document, which
//! is generated from these annotations and the `gaffer_protocol::api` types.

use crate::auth::Caller;
use crate::body::ApiJson;
use crate::error::{ApiError, ApiResult};
use crate::ServerState;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use gaffer_app::{AddProject, NewTask, Scope, TaskQuery};
use gaffer_core::Decision;
use gaffer_protocol::api;
use utoipa::OpenApi;

/// The OpenAPI document of every `/api` route, `/healthz` and `/metrics`.
#[derive(OpenApi)]
#[openapi(
    info(title = "gaffer API", description = "Projects, tasks, approvals, schedules (read-only: they come from the config file) and journal event streams. See crates/gaffer-server/README.md."),
    paths(
        healthz, metrics, openapi_json,
        list_projects, add_project, get_project, set_auto,
        list_tasks, create_task, get_task, cancel_task, retry_task, task_sessions, task_diff, task_history,
        send_message, list_messages, interrupt_task,
        list_approvals, get_approval, decide,
        usage,
        crate::schedules::list,
        crate::schedule_changes::add_schedule, crate::schedule_changes::remove_schedule,
        crate::sse::all_events, crate::sse::task_events,
        crate::link::confirm_page, crate::link::decide,
        crate::hooks::receive,
    ),
    modifiers(&BearerAuth, &CommonAnswers),
    security(("bearer" = [])),
)]
pub struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// What any operation may answer besides its own outcomes, added to every one of them
/// so that the document cannot leave one out: the auth middleware's 401 and 403 (every
/// route is behind it), the JSON body extractor's 400 and 413 (every route with a body),
/// and 404 for an `{id}` that names nothing. The list filters' allowed values come
/// from the domain's own lists, so the document follows when a stage is added.
struct CommonAnswers;

impl utoipa::Modify for CommonAnswers {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::path::ParameterIn;
        use utoipa::openapi::{RefOr, Schema};
        let stages: Vec<&str> = gaffer_core::Stage::ALL.iter().map(|s| s.as_str()).collect();
        let states: Vec<&str> = gaffer_core::ApprovalState::ALL
            .iter()
            .map(|s| s.as_str())
            .collect();
        for (path, item) in openapi.paths.paths.iter_mut() {
            let operations = [
                &mut item.get,
                &mut item.post,
                &mut item.put,
                &mut item.delete,
                &mut item.patch,
            ];
            for op in operations.into_iter().flatten() {
                let mut answers = vec![
                    ("401", "no token, or one that is not valid"),
                    (
                        "403",
                        "the token's role is not enough, a browser request lacks its CSRF token or comes from another origin, the Host is not this server's name, or a non-loopback client without tokens configured",
                    ),
                ];
                if op.request_body.is_some() {
                    answers.push(("400", "the body is not the JSON this operation takes; `field` names what is wrong"));
                    answers.push(("413", "the body is larger than the server accepts"));
                }
                if path.contains("{id}") {
                    answers.push(("404", "nothing has this id"));
                }
                for (status, why) in answers {
                    op.responses
                        .responses
                        .entry(status.to_owned())
                        .or_insert_with(|| error_answer(why));
                }
                for p in op.parameters.iter_mut().flatten() {
                    let allowed = match (&p.parameter_in, p.name.as_str()) {
                        (ParameterIn::Query, "stage") if path == "/api/tasks" => &stages,
                        (ParameterIn::Query, "state") if path == "/api/approvals" => &states,
                        _ => continue,
                    };
                    if let Some(RefOr::T(Schema::Object(o))) = &mut p.schema {
                        o.enum_values = Some(allowed.iter().map(|v| (*v).into()).collect());
                    }
                }
            }
        }
    }
}

fn error_answer(description: &str) -> utoipa::openapi::RefOr<utoipa::openapi::response::Response> {
    use utoipa::openapi::{ContentBuilder, Ref, ResponseBuilder};
    ResponseBuilder::new()
        .description(description)
        .content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("ErrorResponse")))
                .build(),
        )
        .build()
        .into()
}

/// Liveness.
#[utoipa::path(get, path = "/healthz", responses((status = 200, body = api::Health)))]
pub async fn healthz() -> Json<api::Health> {
    Json(api::Health {
        status: "ok".into(),
        version: env!("CARGO_PKG_VERSION").into(),
    })
}

/// Prometheus metrics (text exposition format).
#[utoipa::path(get, path = "/metrics", responses((status = 200, content_type = "text/plain", body = String)))]
pub async fn metrics(State(s): State<ServerState>) -> Response {
    let journal = s.app.journal();
    // The work as the journal has it; an unreadable table leaves its series at
    // zero rather than failing the scrape.
    let mut work = crate::metrics::Work::default();
    let all = gaffer_store::TaskFilter {
        limit: Some(i64::MAX),
        ..Default::default()
    };
    for t in journal.tasks(&all).await.unwrap_or_default() {
        *work.tasks_by_stage.entry(t.stage).or_default() += 1;
    }
    for a in journal
        .approvals(&gaffer_store::ApprovalFilter::default())
        .await
        .unwrap_or_default()
    {
        match a.decided_at {
            _ if a.state == "pending" => work.pending_approvals += 1,
            Some(at) => work
                .decision_secs
                .push((at - a.requested_at).max(0) as f64 / 1e3),
            None => {}
        }
    }
    // Every worker sharing the journal, wherever it runs; an unreadable table
    // leaves the series out rather than failing the scrape.
    let workers = journal.workers().await.unwrap_or_default();
    // The events appended since the last scrape, by every process; an unreadable
    // batch is read again at the next scrape.
    let mut tally = s.metrics.tally.lock().await;
    loop {
        const BATCH: i64 = 1000;
        let Ok(batch) = journal.events_after(tally.after, BATCH).await else {
            break;
        };
        for e in &batch {
            tally.apply(e);
        }
        if (batch.len() as i64) < BATCH {
            break;
        }
    }
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4",
        )],
        s.metrics
            .render(&work, &tally, &workers, gaffer_store::now_ms()),
    )
        .into_response()
}

/// This document.
#[utoipa::path(get, path = "/api/openapi.json", responses((status = 200, body = Object)))]
pub async fn openapi_json() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}

/// Every project, by name.
#[utoipa::path(get, path = "/api/projects", responses((status = 200, body = Vec<api::Project>)))]
pub async fn list_projects(State(s): State<ServerState>) -> ApiResult<Json<Vec<api::Project>>> {
    Ok(Json(s.app.projects().await?))
}

/// Register a git work tree (admin).
#[utoipa::path(post, path = "/api/projects", request_body = api::AddProjectParams,
    responses((status = 201, body = api::Project), (status = 400, body = api::ErrorResponse), (status = 409, body = api::ErrorResponse)))]
pub async fn add_project(
    State(s): State<ServerState>,
    Extension(caller): Extension<Caller>,
    ApiJson(p): ApiJson<api::AddProjectParams>,
) -> ApiResult<(StatusCode, Json<api::Project>)> {
    let project = s
        .app
        .add_project(
            AddProject {
                path: p.path,
                name: p.name,
                check: p.check,
            },
            caller.actor(),
        )
        .await?;
    Ok((StatusCode::CREATED, Json(project)))
}

/// One project by name or id.
#[utoipa::path(get, path = "/api/projects/{id}", params(("id" = String, Path, description = "name or id")),
    responses((status = 200, body = api::Project), (status = 404, body = api::ErrorResponse)))]
pub async fn get_project(
    State(s): State<ServerState>,
    Path(id): Path<String>,
) -> ApiResult<Json<api::Project>> {
    Ok(Json(s.app.project(&id).await?))
}

/// Flip the project-wide auto-approve toggle (admin).
#[utoipa::path(post, path = "/api/projects/{id}/auto", params(("id" = String, Path)), request_body = api::SetAutoApproveParams,
    responses((status = 200, body = api::Project), (status = 403, body = api::ErrorResponse)))]
pub async fn set_auto(
    State(s): State<ServerState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    ApiJson(p): ApiJson<api::SetAutoApproveParams>,
) -> ApiResult<Json<api::Project>> {
    Ok(Json(
        s.app
            .set_auto_approve(&id, p.enabled, caller.actor())
            .await?,
    ))
}

fn query<T: serde::de::DeserializeOwned>(raw: Option<&str>) -> ApiResult<T> {
    serde_urlencoded_like(raw.unwrap_or(""))
}

/// Parse a query string with the API's error shape.
fn serde_urlencoded_like<T: serde::de::DeserializeOwned>(raw: &str) -> ApiResult<T> {
    match Query::<T>::try_from_uri(
        &format!("/?{raw}")
            .parse()
            .map_err(|_| ApiError::bad_field("query", "the query string is not valid"))?,
    ) {
        Ok(Query(v)) => Ok(v),
        Err(e) => {
            let text = e.body_text();
            let field = text
                .split('`')
                .nth(1)
                .map(str::to_owned)
                .unwrap_or_else(|| "query".into());
            Err(ApiError::bad_field(&field, text))
        }
    }
}

/// Tasks, newest first, with filters and paging.
#[utoipa::path(get, path = "/api/tasks", params(api::TaskListQuery),
    responses((status = 200, body = Vec<api::Task>), (status = 400, body = api::ErrorResponse)))]
pub async fn list_tasks(
    State(s): State<ServerState>,
    uri: axum::http::Uri,
) -> ApiResult<Json<Vec<api::Task>>> {
    let q: api::TaskListQuery = query(uri.query())?;
    Ok(Json(
        s.app
            .tasks(&TaskQuery {
                project: q.project,
                stage: q.stage,
                limit: q.limit,
                offset: q.offset,
            })
            .await?,
    ))
}

/// Queue a request, or a forge issue of the project (approver). Answers the task
/// with its `id`. 409 `privacy_refused`, nothing stored, when the project's privacy
/// forbids an agent the task may start (a `local-only` project with a cloud agent in a
/// role's chain or the arbiter's panel); the message names the role, the agent and
/// what to change. For an issue: 404 when the forge has no such issue, 409
/// (`no_forge`, `forge_config`) when the project has no usable forge configured,
/// 502 when the forge cannot be read. With a `key` (or the `Idempotency-Key`
/// header) the task is created once: a repeat answers 200 with the task the key
/// created first and the header `Idempotent-Replayed: true`; a key used in another
/// project is 409 `key_taken`.
#[utoipa::path(post, path = "/api/tasks", request_body = api::CreateTaskParams,
    params(("Idempotency-Key" = Option<String>, Header,
        description = "Create the task once for this key (same as the body's `key`)")),
    responses((status = 201, body = api::Task),
        (status = 200, body = api::Task, description = "The key had created this task before; nothing was stored",
            headers(("Idempotent-Replayed" = String, description = "`true`"))),
        (status = 400, body = api::ErrorResponse),
        (status = 404, body = api::ErrorResponse), (status = 409, body = api::ErrorResponse),
        (status = 502, body = api::ErrorResponse)))]
pub async fn create_task(
    State(s): State<ServerState>,
    Extension(caller): Extension<Caller>,
    headers: axum::http::HeaderMap,
    ApiJson(p): ApiJson<api::CreateTaskParams>,
) -> ApiResult<Response> {
    let key = creation_key(&headers, p.key)?;
    let new = NewTask {
        project: p.project,
        request: p.request.clone().unwrap_or_default(),
        agent: p.agent,
        key,
        after: p.after,
        ..NewTask::default()
    };
    let created = match (p.request, p.issue) {
        (Some(_), Some(_)) => {
            return Err(ApiError::bad_field(
                "issue",
                "give either `request` or `issue`, not both (an issue's title and body are the request)",
            ))
        }
        (_, Some(issue)) => {
            let Some(source) = &s.issues else {
                return Err(ApiError::bad_field(
                    "issue",
                    "this server reads no issues; give `request` instead",
                ));
            };
            s.app
                .create_task_from_issue(&*source.0, &issue, new, caller.actor())
                .await?
        }
        (_, None) => s.app.create_task_once(new, caller.actor()).await?,
    };
    Ok(if created.existing {
        (
            StatusCode::OK,
            [("idempotent-replayed", "true")],
            Json(created.task),
        )
            .into_response()
    } else {
        (StatusCode::CREATED, Json(created.task)).into_response()
    })
}

/// The creation key of `POST /api/tasks`: the body's `key` or the
/// `Idempotency-Key` header; both given must agree.
fn creation_key(
    headers: &axum::http::HeaderMap,
    body: Option<String>,
) -> ApiResult<Option<String>> {
    let header = match headers.get("idempotency-key") {
        None => None,
        Some(v) => Some(
            v.to_str()
                .map_err(|_| {
                    ApiError::bad_field(
                        "key",
                        "the `Idempotency-Key` header must be printable ASCII",
                    )
                })?
                .to_owned(),
        ),
    };
    match (header, body) {
        (Some(h), Some(b)) if h != b => Err(ApiError::bad_field(
            "key",
            "the `Idempotency-Key` header and the body's `key` differ; give one of them",
        )),
        (h, b) => Ok(h.or(b)),
    }
}

/// One task with steps, approvals and sessions.
#[utoipa::path(get, path = "/api/tasks/{id}", params(("id" = String, Path)),
    responses((status = 200, body = api::TaskDetail), (status = 404, body = api::ErrorResponse)))]
pub async fn get_task(
    State(s): State<ServerState>,
    Path(id): Path<String>,
) -> ApiResult<Json<api::TaskDetail>> {
    Ok(Json(s.app.task(&id).await?))
}

/// Cancel a task (approver); its pending approvals are withdrawn.
#[utoipa::path(post, path = "/api/tasks/{id}/cancel", params(("id" = String, Path)), request_body(content = Option<api::CancelTaskParams>),
    responses((status = 200, body = api::TaskDetail), (status = 409, body = api::ErrorResponse)))]
pub async fn cancel_task(
    State(s): State<ServerState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> ApiResult<Json<api::TaskDetail>> {
    // The body is optional: none, or JSON `null` (as the document's nullable body
    // allows), means no reason.
    let p: api::CancelTaskParams = if body.iter().all(u8::is_ascii_whitespace) {
        Default::default()
    } else {
        crate::body::parse::<Option<api::CancelTaskParams>>(&body)?.unwrap_or_default()
    };
    Ok(Json(
        s.app.cancel_task(&id, caller.actor(), p.reason).await?,
    ))
}

/// Send a message to the task's running agent (approver; a person). It is recorded
/// with who sent it and delivered into the agent's live turn, or as its next turn,
/// exactly once (also across a crash of the server).
#[utoipa::path(post, path = "/api/tasks/{id}/messages", params(("id" = String, Path)), request_body = api::SendMessageParams,
    responses((status = 201, body = api::Message, description = "recorded; `delivery` is `pending` until the agent got it"),
        (status = 409, body = api::ErrorResponse, description = "`no_running_agent` (no agent session is open now) or `task_finished`")))]
pub async fn send_message(
    State(s): State<ServerState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    ApiJson(p): ApiJson<api::SendMessageParams>,
) -> ApiResult<(StatusCode, Json<api::Message>)> {
    let m = s.app.send_message(&id, &p.text, caller.actor()).await?;
    Ok((StatusCode::CREATED, Json(m)))
}

/// The messages people sent to the task's agent, oldest first, with their delivery.
#[utoipa::path(get, path = "/api/tasks/{id}/messages", params(("id" = String, Path)),
    responses((status = 200, body = Vec<api::Message>)))]
pub async fn list_messages(
    State(s): State<ServerState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Vec<api::Message>>> {
    Ok(Json(s.app.messages(&id).await?))
}

/// Stop the running agent turn without cancelling the task (approver; a person). The
/// step then waits for the next message, which starts the agent's next turn.
#[utoipa::path(post, path = "/api/tasks/{id}/interrupt", params(("id" = String, Path)),
    responses((status = 200, body = api::Interrupted),
        (status = 409, body = api::ErrorResponse, description = "`no_running_agent`, `already_interrupted` or `task_finished`")))]
pub async fn interrupt_task(
    State(s): State<ServerState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> ApiResult<Json<api::Interrupted>> {
    Ok(Json(s.app.interrupt(&id, caller.actor()).await?))
}

/// Queue the same request again as a new task (approver); for failed, cancelled or blocked tasks.
#[utoipa::path(post, path = "/api/tasks/{id}/retry", params(("id" = String, Path)),
    responses((status = 201, body = api::Task), (status = 409, body = api::ErrorResponse)))]
pub async fn retry_task(
    State(s): State<ServerState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> ApiResult<(StatusCode, Json<api::Task>)> {
    Ok((
        StatusCode::CREATED,
        Json(s.app.retry_task(&id, caller.actor()).await?),
    ))
}

/// A task's agent sessions.
#[utoipa::path(get, path = "/api/tasks/{id}/sessions", params(("id" = String, Path)),
    responses((status = 200, body = Vec<api::Session>), (status = 404, body = api::ErrorResponse)))]
pub async fn task_sessions(
    State(s): State<ServerState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Vec<api::Session>>> {
    Ok(Json(s.app.sessions(&id).await?))
}

/// The task's worktree diff against its base (404 until the worktree exists).
#[utoipa::path(get, path = "/api/tasks/{id}/diff", params(("id" = String, Path)),
    responses((status = 200, body = api::TaskDiff), (status = 404, body = api::ErrorResponse)))]
pub async fn task_diff(
    State(s): State<ServerState>,
    Path(id): Path<String>,
) -> ApiResult<Json<api::TaskDiff>> {
    Ok(Json(s.app.task_diff(&id).await?))
}

/// A task's recorded events, oldest first, a page at a time (the web page reads
/// a task's history here, then follows `/api/tasks/{id}/events` from the last
/// event's `pos`). Approval events carry the approval as it stands.
#[utoipa::path(get, path = "/api/tasks/{id}/history", params(("id" = String, Path), api::HistoryQuery),
    responses((status = 200, body = api::TaskHistory), (status = 400, body = api::ErrorResponse), (status = 404, body = api::ErrorResponse)))]
pub async fn task_history(
    State(s): State<ServerState>,
    Path(id): Path<String>,
    uri: axum::http::Uri,
) -> ApiResult<Json<api::TaskHistory>> {
    let q: api::HistoryQuery = query(uri.query())?;
    let (events, more) = s
        .app
        .task_events(&id, q.after.unwrap_or(0), q.limit.unwrap_or(2000))
        .await?;
    let approvals = if events
        .iter()
        .any(|e| crate::sse::approval_of(&e.event).is_some())
    {
        s.app.task(&id).await?.approvals
    } else {
        Vec::new()
    };
    let events = events
        .iter()
        .map(|e| {
            let approval = crate::sse::approval_of(&e.event)
                .and_then(|a| approvals.iter().find(|x| x.id == a).cloned());
            crate::sse::wire(e, approval)
        })
        .collect();
    Ok(Json(api::TaskHistory { events, more }))
}

/// Approvals, newest first; `?state=pending` for the queue.
#[utoipa::path(get, path = "/api/approvals", params(api::ApprovalListQuery),
    responses((status = 200, body = Vec<api::Approval>), (status = 400, body = api::ErrorResponse)))]
pub async fn list_approvals(
    State(s): State<ServerState>,
    uri: axum::http::Uri,
) -> ApiResult<Json<Vec<api::Approval>>> {
    let q: api::ApprovalListQuery = query(uri.query())?;
    Ok(Json(s.app.approvals(q.state.as_deref()).await?))
}

/// One approval.
#[utoipa::path(get, path = "/api/approvals/{id}", params(("id" = String, Path)),
    responses((status = 200, body = api::Approval), (status = 404, body = api::ErrorResponse)))]
pub async fn get_approval(
    State(s): State<ServerState>,
    Path(id): Path<String>,
) -> ApiResult<Json<api::Approval>> {
    Ok(Json(s.app.approval(&id).await?))
}

/// Decide an approval (approver). The first decision wins: it answers **200**
/// with the approval as recorded. `"for_task": true` with `approve` on a `tool`
/// approval also allows the same tool and exactly the same command for the rest
/// of its task (400 naming `for_task` on any other kind or with `deny`). Every later decision (repeated, concurrent
/// loser, or after expiry/withdrawal) changes nothing and answers **409**
/// `already_decided` with the recorded approval in `approval`.
#[utoipa::path(post, path = "/api/approvals/{id}/decision", params(("id" = String, Path)), request_body = api::DecisionParams,
    responses(
        (status = 200, body = api::Approval, description = "this request recorded the decision"),
        (status = 400, body = api::ErrorResponse),
        (status = 403, body = api::ErrorResponse),
        (status = 404, body = api::ErrorResponse),
        (status = 409, body = api::ErrorResponse, description = "already decided (the recorded approval is in `approval`), or `wrong_scope`"),
    ))]
pub async fn decide(
    State(s): State<ServerState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    ApiJson(p): ApiJson<api::DecisionParams>,
) -> ApiResult<Response> {
    let decision = match p.decision {
        api::DecisionChoice::Approve => Decision::Approve,
        api::DecisionChoice::Deny => Decision::Deny,
    };
    let scope = Scope {
        task_id: p.task_id,
        project_id: p.project_id,
    };
    let d = match (p.for_task, decision) {
        (true, Decision::Approve) => {
            s.app
                .allow_for_task(&id, caller.actor(), p.note, scope)
                .await?
        }
        (true, Decision::Deny) => {
            return Err(ApiError::bad_field(
                "for_task",
                "`for_task` goes with \"approve\" only: a denial is for this request alone",
            ))
        }
        (false, _) => {
            s.app
                .decide(&id, decision, caller.actor(), p.note, scope)
                .await?
        }
    };
    if d.applied {
        s.metrics.decided();
        Ok(Json(d.approval).into_response())
    } else {
        let mut e = ApiError::new(
            StatusCode::CONFLICT,
            "already_decided",
            format!(
                "approval `{}` is already {}; the first decision stands",
                d.approval.id, d.approval.state
            ),
        );
        e.body.approval = Some(d.approval);
        Ok(e.into_response())
    }
}

/// Token and cost totals.
#[utoipa::path(get, path = "/api/usage", responses((status = 200, body = api::Usage)))]
pub async fn usage(State(s): State<ServerState>) -> ApiResult<Json<api::Usage>> {
    Ok(Json(s.app.usage().await?))
}
