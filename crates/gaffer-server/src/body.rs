//! A JSON body extractor whose errors have the API's shape and name the field.

use crate::error::ApiError;
use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::header::CONTENT_TYPE;
use serde::de::DeserializeOwned;

/// Like `axum::Json`, but a bad body is a 400 naming the field (or 413 when too large).
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let json = req
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        if !json {
            return Err(ApiError::bad_field(
                "body",
                "send the body as JSON with `Content-Type: application/json`",
            ));
        }
        let bytes = Bytes::from_request(req, state).await.map_err(unreadable)?;
        parse(&bytes).map(ApiJson)
    }
}

/// A body that could not be read, in the API's shape: 413 when too large, else 400.
pub fn unreadable(e: axum::extract::rejection::BytesRejection) -> ApiError {
    if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::new(
            e.status(),
            "payload_too_large",
            "the body is larger than the server accepts",
        )
    } else {
        ApiError::bad_field("body", e.body_text())
    }
}

/// Parse a JSON body, naming the field at fault.
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    // serde reads a struct from a JSON array too (fields by position), which no
    // operation documents: every body is an object.
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[') {
        return Err(ApiError::bad_field(
            "body",
            "the body must be a JSON object, not an array",
        ));
    }
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let message = inner.to_string();
        // `missing field `x`` / `unknown field `x`` name it in backquotes.
        let named = message
            .split('`')
            .nth(1)
            .filter(|_| {
                message.starts_with("missing field") || message.starts_with("unknown field")
            })
            .map(str::to_owned);
        let syntax = inner.is_syntax() || inner.is_eof();
        let field = match (path.as_str(), named) {
            _ if syntax => "body".to_owned(),
            (".", Some(n)) => n,
            (".", None) => "body".to_owned(),
            (p, Some(n)) if message.starts_with("missing field") => format!("{p}.{n}"),
            (p, _) => p.to_owned(),
        };
        let message = if syntax {
            format!("the body is not valid JSON: {message}")
        } else {
            format!("`{field}`: {message}")
        };
        ApiError::bad_field(&field, message)
    })
}
