//! `POST /api/hooks/{forge}`: forge webhook deliveries. No user credential: the
//! delivery's signature is its credential, checked (in constant time, over the raw
//! body, before anything parses it) by the [`gaffer_app::HookReceiver`] against each
//! project's `[projects.<name>.intake] secret_env`. A bad or missing signature is 401
//! and nothing is stored. The body is limited like every other.

use crate::error::ApiError;
use crate::ServerState;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use gaffer_app::HookError;
use gaffer_protocol::api;
use std::sync::Arc;

/// The webhook receiver a server uses (see [`crate::ServerConfig::hooks`]).
#[derive(Clone)]
pub struct HookSink(pub Arc<dyn gaffer_app::HookReceiver>);

impl std::fmt::Debug for HookSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HookSink")
    }
}

/// A forge's webhook delivery (Gitea/Forgejo, GitHub, GitLab): an issue opened,
/// reopened, labelled or assigned becomes a task of each project that watches the
/// repository (once per issue, however often it is delivered); other events are
/// acknowledged and ignored. Authenticated by the forge's signature, not a token:
/// `X-Gitea-Signature`/`X-Forgejo-Signature` (hex HMAC-SHA256 of the body),
/// `X-Hub-Signature-256` (`sha256=` and the same), `X-Gitlab-Token` (the secret).
#[utoipa::path(post, path = "/api/hooks/{forge}",
    params(("forge" = String, Path, description = "`gitea`, `forgejo`, `github` or `gitlab`")),
    security(()),
    request_body(content = Object, content_type = "application/json",
        description = "the forge's webhook payload, as the forge sends it"),
    responses(
        (status = 200, body = api::HookAnswer, description = "an issue is a task (`taken`): made now, or before"),
        (status = 202, body = api::HookAnswer, description = "acknowledged, nothing to do (`ignored`, with the reason)"),
        (status = 400, body = api::ErrorResponse, description = "a verified body that is not the forge's JSON"),
        (status = 401, body = api::ErrorResponse, description = "the signature is missing or matches no project's secret; nothing stored"),
        (status = 404, body = api::ErrorResponse, description = "not a forge gaffer takes webhooks from"),
        (status = 409, body = api::ErrorResponse, description = "the project's forge settings cannot name its repository"),
        (status = 413, body = api::ErrorResponse)))]
pub async fn receive(
    State(s): State<ServerState>,
    Path(forge): Path<String>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body.map_err(crate::body::unreadable)?;
    let Some(sink) = &s.hooks else {
        return Err(ApiError::unauthorized(HookError::BadSignature.to_string()));
    };
    let headers: Vec<(String, String)> = headers
        .iter()
        .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
        .collect();
    let answer = sink
        .0
        .receive_hook(&forge, &headers, &body)
        .await
        .map_err(|e| match e {
            HookError::UnknownForge(m) => ApiError::not_found(m),
            HookError::BadSignature => ApiError::unauthorized(e.to_string()),
            HookError::BadBody(m) => ApiError::bad_field("body", m),
            HookError::App(e) => e.into(),
        })?;
    let status = if answer.outcome == "ignored" {
        StatusCode::ACCEPTED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(answer)).into_response())
}
