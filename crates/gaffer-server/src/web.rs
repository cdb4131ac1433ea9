//! The web page, embedded in the binary: one HTML file with inline-free JS and CSS
//! served from `assets/`, no build step. Every page path serves the same
//! document; the script renders the task list (`/`), a task (`/tasks/{id}`) or
//! the approvals queue (`/approvals`) from the API and SSE.

use crate::auth::{find_token_pub, secret_eq};
use crate::ServerState;
use axum::extract::State;
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
    r.headers_mut()
        .insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    r.headers_mut().insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'self'; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'"),
    );
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

/// The login form (only useful when tokens are configured).
pub async fn login_page() -> Response {
    no_store(Html(LOGIN.replace("{{error}}", "")).into_response())
}

/// The login form's fields.
#[derive(serde::Deserialize)]
pub struct LoginForm {
    token: String,
}

/// Check a token and keep it in an HttpOnly, SameSite=Strict cookie.
pub async fn login(State(s): State<ServerState>, Form(f): Form<LoginForm>) -> Response {
    if find_token_pub(&s.tokens, &f.token).is_none() || f.token.contains([';', ',', ' ']) {
        let _ = secret_eq("", "");
        return no_store(
            (
                StatusCode::UNAUTHORIZED,
                Html(LOGIN.replace("{{error}}", "<p class=\"err\">That token is not valid.</p>")),
            )
                .into_response(),
        );
    }
    let cookie = format!(
        "gaffer_token={}; HttpOnly; SameSite=Strict; Path=/; Max-Age=2592000",
        f.token
    );
    let mut r = (StatusCode::SEE_OTHER, [(header::LOCATION, "/")]).into_response();
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    r
}
