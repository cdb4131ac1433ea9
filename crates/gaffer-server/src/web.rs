//! The web page, embedded in the binary: `assets/` holds the HTML shell, the
//! style sheet, the page's ES modules, Preact and htm (vendored, see
//! `assets/vendor/README.md`), the service worker, the web app manifest and the
//! icons. There is no build step: what is served is what the repository holds.
//! Every page path serves the same shell; the script renders the board (`/`), a
//! task (`/tasks/{id}`), the approvals queue (`/approvals`) or the schedules
//! (`/schedules`) from the API and SSE.

use crate::auth::{find_token, SESSION_COOKIE, TOKEN_COOKIE};
use crate::ServerState;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::Form;
use sha2::{Digest, Sha256};
use std::sync::LazyLock;

const INDEX: &str = include_str!("../assets/index.html");
const LOGIN: &str = include_str!("../assets/login.html");

/// One embedded file under `/assets/`.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

macro_rules! assets {
    ($($name:literal: $content_type:literal,)*) => {
        &[$(Asset {
            name: $name,
            content_type: $content_type,
            body: include_bytes!(concat!("../assets/", $name)),
        },)*]
    };
}

const ASSETS: &[Asset] = assets! {
    "app.css": "text/css; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "lib.js": "text/javascript; charset=utf-8",
    "live.js": "text/javascript; charset=utf-8",
    "board.js": "text/javascript; charset=utf-8",
    "task.js": "text/javascript; charset=utf-8",
    "transcript.js": "text/javascript; charset=utf-8",
    "followup.js": "text/javascript; charset=utf-8",
    "approvals.js": "text/javascript; charset=utf-8",
    "schedules.js": "text/javascript; charset=utf-8",
    "steer.js": "text/javascript; charset=utf-8",
    "sw.js": "text/javascript; charset=utf-8",
    "vendor/preact.mjs": "text/javascript; charset=utf-8",
    "vendor/hooks.mjs": "text/javascript; charset=utf-8",
    "vendor/htm.mjs": "text/javascript; charset=utf-8",
    "manifest.webmanifest": "application/manifest+json",
    "icons/icon.svg": "image/svg+xml",
    "icons/icon-192.png": "image/png",
    "icons/icon-512.png": "image/png",
    "icons/maskable-512.png": "image/png",
    "icons/apple-touch-icon.png": "image/png",
    "icons/favicon.ico": "image/x-icon",
};

/// Each asset's ETag (a digest of its bytes), so a phone revalidates instead of
/// downloading the page again.
static ETAGS: LazyLock<Vec<String>> = LazyLock::new(|| {
    ASSETS
        .iter()
        .map(|a| format!("\"{}\"", hex::encode(&Sha256::digest(a.body)[..12])))
        .collect()
});

fn no_store(mut r: Response) -> Response {
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// The page, with this server's CSRF token, every event type and the approvals'
/// words ([`gaffer_protocol::words`], the same every other surface shows) in meta tags.
pub async fn page(State(s): State<ServerState>) -> Response {
    // JSON in a double-quoted attribute: `&` and `"` escaped, `<` for good measure.
    let words = gaffer_protocol::words::page_json()
        .to_string()
        .replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;");
    let html = INDEX
        .replace("{{csrf}}", &s.csrf)
        .replace("{{event_kinds}}", &gaffer_core::Event::KINDS.join(" "))
        .replace("{{approval_words}}", &words);
    no_store(Html(html).into_response())
}

/// A file under `/assets/`, revalidated by ETag.
pub async fn asset(Path(name): Path<String>, headers: HeaderMap) -> Response {
    serve(&name, &headers)
}

/// `/favicon.ico`, where browsers look for it on their own.
pub async fn favicon(headers: HeaderMap) -> Response {
    serve("icons/favicon.ico", &headers)
}

fn serve(name: &str, headers: &HeaderMap) -> Response {
    let Some(i) = ASSETS.iter().position(|a| a.name == name) else {
        return crate::error::ApiError::not_found("no such asset").into_response();
    };
    let (a, etag) = (&ASSETS[i], &ETAGS[i]);
    let fresh = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag));
    let mut r = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        ([(header::CONTENT_TYPE, a.content_type)], a.body).into_response()
    };
    let h = r.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Ok(v) = HeaderValue::from_str(etag) {
        h.insert(header::ETAG, v);
    }
    if name == "sw.js" {
        // The worker lives with the other assets but serves the whole page
        // (notifications for approvals on every screen).
        h.insert("service-worker-allowed", HeaderValue::from_static("/"));
    }
    r
}

fn login_form(status: StatusCode, error: &str) -> Response {
    let error = if error.is_empty() {
        String::new()
    } else {
        format!("<p class=\"err\">{error}</p>")
    };
    no_store((status, Html(LOGIN.replace("{{error}}", &error))).into_response())
}

/// Logged in: the cookie set, on to the page (the code leaves the address bar).
fn logged_in(cookie: &str, value: &str) -> Response {
    let cookie = format!(
        "{cookie}={value}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}",
        crate::local::SESSION_LIFETIME_MS / 1000
    );
    let mut r = no_store((StatusCode::SEE_OTHER, [(header::LOCATION, "/")]).into_response());
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    r
}

/// `?code=` of a login link.
#[derive(serde::Deserialize)]
pub struct LoginLink {
    code: Option<String>,
}

/// The login form; with `?code=` (the link `gaffer serve` prints), the login itself.
pub async fn login_page(State(s): State<ServerState>, Query(q): Query<LoginLink>) -> Response {
    match q.code {
        None => login_form(StatusCode::OK, ""),
        Some(code) => match s.local.take_code(&code, gaffer_store::now_ms()) {
            Some(session) => logged_in(SESSION_COOKIE, &session),
            None => login_form(
                StatusCode::UNAUTHORIZED,
                "That login link is not valid: it expired, was opened already, or belongs to another gaffer. Run <code>gaffer login-link</code> for a new one.",
            ),
        },
    }
}

/// The login form's fields.
#[derive(serde::Deserialize)]
pub struct LoginForm {
    token: String,
}

/// Check a token (or the local secret) and keep a session for it in an HttpOnly,
/// SameSite=Strict cookie.
pub async fn login(State(s): State<ServerState>, Form(f): Form<LoginForm>) -> Response {
    let token = f.token.trim();
    if s.local.is_secret(token) {
        return logged_in(SESSION_COOKIE, &s.local.new_session(gaffer_store::now_ms()));
    }
    if find_token(&s.tokens, token).is_none() || token.contains([';', ',', ' ']) {
        return login_form(StatusCode::UNAUTHORIZED, "That token is not valid.");
    }
    logged_in(TOKEN_COOKIE, token)
}
