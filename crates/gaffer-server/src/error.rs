//! One error shape for every route: `{"error":{"code":…,"message":…,"field"?:…}}`.
//! User errors keep their status and message; internal errors answer a generic
//! 500 and are logged once here.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use gaffer_app::AppError;
use gaffer_protocol::api;

/// An error answer.
#[derive(Debug)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// The body.
    pub body: Box<api::ErrorResponse>,
}

impl ApiError {
    /// An error with a code and message.
    pub fn new(status: StatusCode, code: &str, message: impl Into<String>) -> Self {
        Self {
            status,
            body: Box::new(api::ErrorResponse {
                error: api::ErrorBody {
                    code: code.to_owned(),
                    message: message.into(),
                    field: None,
                },
                approval: None,
            }),
        }
    }

    /// 400 naming the bad field.
    pub fn bad_field(field: &str, message: impl Into<String>) -> Self {
        let mut e = Self::new(StatusCode::BAD_REQUEST, "bad_request", message);
        e.body.error.field = Some(field.to_owned());
        e
    }

    /// 401.
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    /// 403.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    /// 404.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }
}

impl From<AppError> for ApiError {
    fn from(e: AppError) -> Self {
        match e {
            AppError::Invalid { field, message } => Self::bad_field(&field, message),
            AppError::NotFound { .. } => Self::not_found(e.to_string()),
            AppError::Conflict { code, message } => Self::new(StatusCode::CONFLICT, code, message),
            AppError::Forbidden(m) => Self::forbidden(m),
            AppError::Upstream(m) => Self::new(StatusCode::BAD_GATEWAY, "bad_gateway", m),
            AppError::Store(s) => {
                tracing::error!(error = %s, "journal error");
                Self::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal",
                    "internal error; see the server log",
                )
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(*self.body)).into_response()
    }
}

/// The result of a handler.
pub type ApiResult<T> = Result<T, ApiError>;
