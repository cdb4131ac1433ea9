//! The web page, embedded in the binary: one HTML file with inline-free JS and CSS
//! served from `assets/`, no build step. Every page path serves the same
//! document; the script renders the task list (`/`), a task (`/tasks/{id}`) or
//! the approvals queue (`/approvals`) from the API and SSE.

use crate::auth::{find_token, SESSION_COOKIE, TOKEN_COOKIE};
use crate::ServerState;
use axum::extract::{Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::Form;

const INDEX: &str = include_str!("../assets/index.html");
const APP_JS: &str = include_str!("../assets/app.js");
const APP_CSS: &str = include_str!("../assets/app.css");
const LOGIN: &str = include_str!("../assets/login.html");

fn no_store(mut r: Response) -> Response {
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// The page, with this server's CSRF token and every event type in meta tags.
pub async fn page(State(s): State<ServerState>) -> Response {
    let html = INDEX
        .replace("{{csrf}}", &s.csrf)
        .replace("{{event_kinds}}", &gaffer_core::Event::KINDS.join(" "));
    no_store(Html(html).into_response())
}

/// The script.
pub async fn app_js() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        APP_JS,
    )
        .into_response()
}

/// The style sheet.
pub async fn app_css() -> Response {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], APP_CSS).into_response()
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
