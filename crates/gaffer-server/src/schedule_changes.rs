//! `POST /api/schedules` and `DELETE /api/schedules/{name}`: schedules added and
//! removed at run time (approver). The config's `[[schedules]]` are read-only here.

use crate::auth::Caller;
use crate::body::ApiJson;
use crate::error::ApiResult;
use crate::ServerState;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use gaffer_config::ScheduleSpec;
use gaffer_protocol::api;

/// Add a schedule (approver): each slot of `cron` (in `tz`) becomes one task of
/// `project` asking `request`, once across every scheduler (`gaffer serve`,
/// `gaffer worker`: this process's at once, others' within seconds). Answers the
/// schedule with its next slot. 400 names the bad field (`name`, `cron`, `tz`,
/// `project`, `request`, `agent`, `missed`); 409 `name_taken` when a schedule of
/// the config or one added has the name, `privacy_refused` when the project's
/// privacy forbids the agent. Nothing is stored when refused.
#[utoipa::path(post, path = "/api/schedules", request_body = api::AddScheduleParams,
    responses((status = 201, body = api::Schedule),
        (status = 400, body = api::ErrorResponse), (status = 409, body = api::ErrorResponse)))]
pub async fn add_schedule(
    State(s): State<ServerState>,
    Extension(caller): Extension<Caller>,
    ApiJson(p): ApiJson<api::AddScheduleParams>,
) -> ApiResult<(StatusCode, Json<api::Schedule>)> {
    let added = s
        .app
        .add_schedule(
            ScheduleSpec {
                name: p.name,
                cron: p.cron,
                tz: p.tz,
                project: p.project,
                request: p.request,
                agent: p.agent,
                missed: p.missed,
            },
            &s.schedules,
            caller.actor(),
        )
        .await?;
    let view = s
        .app
        .schedule_view(&added.schedule, Some(&added.record), gaffer_store::now_ms())
        .await?;
    Ok((StatusCode::CREATED, Json(view)))
}

/// Remove a schedule added at run time (approver): it stops in every scheduler;
/// the tasks it made stay. 409 `defined_in_config` for one of the config's
/// (remove it there); 404 when no added schedule has the name.
#[utoipa::path(delete, path = "/api/schedules/{name}", params(("name" = String, Path)),
    responses((status = 204, description = "Removed"),
        (status = 404, body = api::ErrorResponse), (status = 409, body = api::ErrorResponse)))]
pub async fn remove_schedule(
    State(s): State<ServerState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> ApiResult<StatusCode> {
    s.app
        .remove_schedule(&name, &s.schedules, caller.actor())
        .await?;
    Ok(StatusCode::NO_CONTENT)
}
