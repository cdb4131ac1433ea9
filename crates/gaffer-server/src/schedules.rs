//! `GET /api/schedules`: the `[[schedules]]` of the server's config, each with its
//! next slot and the task its newest slot made. Read-only: schedules are changed
//! in the config file, and take effect when `gaffer serve` / `gaffer worker` start.

use crate::error::ApiResult;
use crate::ServerState;
use axum::extract::State;
use axum::Json;
use gaffer_protocol::api;

/// What the spec says of `GET /api/schedules`.
const DESCRIPTION: &str = "Every configured schedule, in config order: its cron expression, time zone, project, request, agent and missed-slot policy, its next slot (RFC 3339, UTC), and its newest slot that made a task, with that task's id and stage (read from the journal by the slot's origin key `schedule:<name>:<slot>`). Then every schedule added at run time (`POST /api/schedules`), oldest first, with `source: \"api\"`, `created_by` and `created_at`; the config's have `source: \"config\"` and change only in the config file. An empty list: there is none.";

/// Every configured schedule (see [`DESCRIPTION`]).
#[utoipa::path(get, path = "/api/schedules", operation_id = "list_schedules",
    summary = "Every schedule (config and added), with its next slot and last task", description = DESCRIPTION,
    responses((status = 200, description = "the config's schedules in config order, then the added ones; empty when there is none", body = Vec<api::Schedule>)))]
pub async fn list(State(s): State<ServerState>) -> ApiResult<Json<Vec<api::Schedule>>> {
    Ok(Json(
        s.app
            .schedules(&s.schedules, gaffer_store::now_ms())
            .await?,
    ))
}
