//! The shared HTTP client of the forges: auth header, error mapping, rate-limit waits, redaction.

use std::time::Duration;

use reqwest::header::HeaderMap;
use reqwest::{Method, StatusCode};
use serde_json::Value;

use crate::api::ApiError;
use crate::secret::{redact, Secret};

/// An HTTP response that was not an error.
pub(crate) struct Reply {
    pub(crate) body: Value,
    /// GitLab's `x-next-page`: the next page's number, when there is one.
    pub(crate) next_page: Option<u32>,
}

/// How the token is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Auth {
    /// `Authorization: <scheme> <token>` (`token` on Gitea, `Bearer` on GitHub).
    Scheme(&'static str),
    /// GitLab's `PRIVATE-TOKEN: <token>` header.
    PrivateToken,
}

/// The shared HTTP client: auth header, error mapping, rate-limit waits, redaction.
#[derive(Clone)]
pub(crate) struct Http {
    pub(crate) client: reqwest::Client,
    /// API root, no trailing slash.
    pub(crate) api: String,
    pub(crate) token: Secret,
    pub(crate) auth: Auth,
    pub(crate) forge: String,
    pub(crate) token_source: String,
    pub(crate) max_rate_limit_wait: Duration,
}

impl std::fmt::Debug for Http {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Http")
            .field("api", &self.api)
            .field("forge", &self.forge)
            .field("token", &self.token)
            .finish()
    }
}

impl Http {
    pub(crate) fn new(
        api: String,
        token: Secret,
        auth: Auth,
        forge: String,
        token_source: String,
        timeout: Duration,
        max_rate_limit_wait: Duration,
    ) -> Result<Self, ApiError> {
        let client = reqwest::Client::builder()
            .user_agent(concat!("gaffer/", env!("CARGO_PKG_VERSION")))
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .build()
            .map_err(|e| ApiError::BadInput(format!("cannot build the HTTP client: {e}")))?;
        Ok(Self {
            client,
            api,
            token,
            auth,
            forge,
            token_source,
            max_rate_limit_wait,
        })
    }

    /// The request with the token's header.
    fn authorized(&self, req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match self.auth {
            Auth::Scheme(scheme) => req.header(
                reqwest::header::AUTHORIZATION,
                format!("{scheme} {}", self.token.expose()),
            ),
            Auth::PrivateToken => req.header("PRIVATE-TOKEN", self.token.expose()),
        }
    }

    fn clean(&self, text: &str) -> String {
        redact(text, &[&self.token])
    }

    /// Send a request to `path` (relative to the API root, or an absolute URL).
    /// `what` names the resource for a 404. Rate-limit answers whose wait is within
    /// `max_rate_limit_wait` are waited out and retried (up to 3 times): a 429/403 means
    /// the forge did nothing, so even a create is safe to resend.
    pub(crate) async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        what: &str,
    ) -> Result<Reply, ApiError> {
        let url = if path.starts_with("http://") || path.starts_with("https://") {
            path.to_owned()
        } else {
            format!("{}{path}", self.api)
        };
        let mut attempts = 0;
        loop {
            attempts += 1;
            let github = self.forge.starts_with("github");
            let mut req = self
                .authorized(self.client.request(method.clone(), &url))
                .header(
                    reqwest::header::ACCEPT,
                    if github {
                        "application/vnd.github+json"
                    } else {
                        "application/json"
                    },
                );
            if github {
                req = req.header("X-GitHub-Api-Version", "2022-11-28");
            }
            if let Some(b) = body {
                req = req.json(b);
            }
            let resp = req.send().await.map_err(|e| self.unreachable(&url, &e))?;
            let status = resp.status();
            let headers = resp.headers().clone();
            let text = resp.text().await.map_err(|e| self.unreachable(&url, &e))?;
            if status.is_success() || status.is_redirection() {
                let body = if text.trim().is_empty() {
                    Value::Null
                } else {
                    serde_json::from_str(&text).unwrap_or(Value::String(text))
                };
                let next_page = headers
                    .get("x-next-page")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse().ok());
                return Ok(Reply { body, next_page });
            }
            let err = self.error(status, &headers, &text, what);
            if let ApiError::RateLimited { retry_after, .. } = &err {
                if attempts <= 3 && *retry_after <= self.max_rate_limit_wait {
                    tokio::time::sleep(*retry_after).await;
                    continue;
                }
            }
            return Err(err);
        }
    }

    /// GET returning raw text (logs), following redirects.
    pub(crate) async fn get_text(&self, url: &str, what: &str) -> Result<String, ApiError> {
        let resp = self
            .authorized(self.client.get(url))
            .send()
            .await
            .map_err(|e| self.unreachable(url, &e))?;
        let status = resp.status();
        let headers = resp.headers().clone();
        let text = resp.text().await.map_err(|e| self.unreachable(url, &e))?;
        if status.is_success() {
            Ok(self.clean(&text))
        } else {
            Err(self.error(status, &headers, &text, what))
        }
    }

    fn unreachable(&self, url: &str, e: &reqwest::Error) -> ApiError {
        let mut detail = if e.is_timeout() {
            "timed out".to_owned()
        } else if e.is_connect() {
            "connection failed".to_owned()
        } else {
            "request failed".to_owned()
        };
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            detail.push_str(": ");
            detail.push_str(&s.to_string());
            source = s.source();
        }
        ApiError::Unreachable {
            url: self.clean(url),
            detail: self.clean(&detail),
        }
    }

    pub(crate) fn decode(&self, detail: impl std::fmt::Display) -> ApiError {
        ApiError::Decode {
            forge: self.forge.clone(),
            detail: self.clean(&detail.to_string()),
        }
    }

    fn error(&self, status: StatusCode, headers: &HeaderMap, text: &str, what: &str) -> ApiError {
        let forge = self.forge.clone();
        let message = self.clean(&message_of(text));
        let header = |n: &str| {
            headers
                .get(n)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
        };
        let retry_after = header("retry-after");
        // GitHub's `X-RateLimit-*`, GitLab's `RateLimit-*`.
        let remaining = header("x-ratelimit-remaining").or_else(|| header("ratelimit-remaining"));
        let reset = header("x-ratelimit-reset").or_else(|| header("ratelimit-reset"));
        let limited = status == StatusCode::TOO_MANY_REQUESTS
            || (status == StatusCode::FORBIDDEN && (retry_after.is_some() || remaining == Some(0)));
        if limited {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or_default();
            let secs = retry_after
                .or_else(|| reset.map(|r| r.saturating_sub(now)))
                .unwrap_or(60);
            return ApiError::RateLimited {
                forge,
                retry_after: Duration::from_secs(secs),
                reset_at: reset,
            };
        }
        match status.as_u16() {
            401 => ApiError::Unauthorized {
                forge,
                token_source: self.token_source.clone(),
            },
            403 => ApiError::Forbidden { forge, message },
            404 => ApiError::NotFound {
                what: what.into(),
                forge,
            },
            409 | 422 => ApiError::Rejected {
                forge,
                status: status.as_u16(),
                message,
            },
            s => ApiError::Http {
                forge,
                status: s,
                message,
            },
        }
    }
}

/// The human part of an error body: `message` (GitLab's may be a list, or an object
/// of field → problems), GitHub's `errors[].message`, GitLab's `error` and
/// `error_description`.
fn message_of(text: &str) -> String {
    let Ok(v) = serde_json::from_str::<Value>(text) else {
        let t = text.trim();
        return if t.is_empty() {
            "no message".into()
        } else {
            t.chars().take(300).collect()
        };
    };
    let mut parts: Vec<String> = Vec::new();
    match v.get("message") {
        Some(Value::String(m)) => parts.push(m.to_owned()),
        Some(Value::Array(list)) => parts.extend(list.iter().map(plain)),
        // GitLab's validation errors: {"message": {"title": ["can't be blank"]}}.
        Some(Value::Object(fields)) => {
            for (field, problems) in fields {
                let problems: Vec<String> = match problems {
                    Value::Array(list) => list.iter().map(plain).collect(),
                    other => vec![plain(other)],
                };
                parts.push(format!("{field} {}", problems.join(", ")));
            }
        }
        _ => {}
    }
    for key in ["error", "error_description"] {
        if let Some(m) = v.get(key).and_then(Value::as_str) {
            parts.push(m.to_owned());
        }
    }
    if let Some(errs) = v.get("errors").and_then(Value::as_array) {
        for e in errs {
            let g = |k: &str| e.get(k).and_then(Value::as_str);
            if let Some(m) = g("message") {
                parts.push(m.to_owned());
            } else if let Some(m) = e.as_str() {
                parts.push(m.to_owned());
            } else if let Some(code) = g("code") {
                // GitHub: {"resource":"PullRequest","field":"head","code":"invalid"}
                let field = g("field").unwrap_or_default();
                let resource = g("resource").unwrap_or_default();
                parts.push(format!("{resource} {field} is {code}").replace("  ", " "));
            }
        }
    }
    if parts.is_empty() {
        v.to_string().chars().take(300).collect()
    } else {
        parts.join(": ")
    }
}

/// A JSON value as text: a string without its quotes.
fn plain(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_owned)
}

/// How much of a CI log is kept: its last 64 KiB (where the failure is).
pub(crate) const LOG_TAIL: usize = 64 * 1024;

/// Keep the last `max` bytes of a log (on a char boundary).
pub(crate) fn tail(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("[… earlier lines cut …]\n{}", &text[start..])
}

/// Percent-encode one path segment or query value.
pub(crate) fn enc(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
