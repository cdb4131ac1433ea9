//! Who is calling, and may they.
//!
//! - Every route but `/login`, the static `/assets/*` (and `/favicon.ico`) and the
//!   one-tap links `/link/*` (signed; see [`crate::link`]) and forge webhooks
//!   `/api/hooks/*` (signed by the forge; see [`crate::hooks`]) needs a credential, on
//!   loopback too: being on this machine proves nothing (agents are here). It is
//!   `Authorization: Bearer <secret>` — an API token from policy.toml, or the local
//!   secret ([`crate::local`]) — or a cookie the login sets for the web page: the
//!   signed session of a login link (`gaffer_session`) or an API token
//!   (`gaffer_token`). Secrets are compared in constant time (SHA-256 digests
//!   compared with `subtle`).
//! - No tokens configured: only loopback clients are answered at all.
//! - Who: a token is its name; a local credential is the person running gaffer
//!   (the OS user), `via` `api:local-secret` or `web:login-link`. No request is
//!   ever an anonymous `local`.
//! - Roles: `viewer` reads; `approver` also decides approvals and creates,
//!   cancels and retries tasks; `admin` also adds projects and flips auto-approve.
//!   The local secret is admin. The middleware checks the role of every request
//!   ([`required_role`]) before routing, so a new route is protected without a
//!   line of its own.
//! - CSRF: a state-changing request authenticated by a cookie (something the
//!   browser sends on its own) must carry `X-CSRF-Token` with the token only the
//!   server's own page knows (derived from the local secret, so it survives a
//!   restart), whenever it comes from a browser (it has `Origin`,
//!   `Sec-Fetch-Site` or a cookie). A bearer credential is not ambient, so API
//!   clients need no CSRF token. Host and Origin are checked before this
//!   ([`crate::guard`]).

use crate::error::ApiError;
use crate::ServerState;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, Method};
use axum::middleware::Next;
use axum::response::Response;
use sha2::{Digest, Sha256};
use std::net::SocketAddr;
use subtle::ConstantTimeEq;

/// What a caller may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    /// Read only.
    Viewer,
    /// Read, decide approvals, create/cancel/retry tasks.
    Approver,
    /// Everything.
    Admin,
}

impl Role {
    /// Parse `viewer` / `approver` / `admin`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "viewer" => Some(Self::Viewer),
            "approver" => Some(Self::Approver),
            "admin" => Some(Self::Admin),
            _ => None,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Self::Viewer => "viewer",
            Self::Approver => "approver",
            Self::Admin => "admin",
        }
    }
}

/// A configured API token (only its digest is kept).
#[derive(Clone)]
pub struct Token {
    /// Who holds it.
    pub name: String,
    /// What it may do.
    pub role: Role,
    digest: [u8; 32],
}

impl Token {
    /// A token with its secret.
    pub fn new(name: &str, role: Role, secret: &str) -> Self {
        Self {
            name: name.to_owned(),
            role,
            digest: digest(secret),
        }
    }

    /// A token known only by the hex SHA-256 of its secret; `None` unless `sha256` is 64
    /// hex digits.
    pub fn from_sha256(name: &str, role: Role, sha256: &str) -> Option<Self> {
        let mut digest = [0u8; 32];
        hex::decode_to_slice(sha256.trim(), &mut digest).ok()?;
        Some(Self {
            name: name.to_owned(),
            role,
            digest,
        })
    }
}

/// The hex SHA-256 of a token secret, as `secret_sha256` in policy.toml holds it.
pub fn token_sha256(secret: &str) -> String {
    hex::encode(digest(secret))
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Token")
            .field("name", &self.name)
            .field("role", &self.role)
            .finish_non_exhaustive()
    }
}

impl Token {
    /// The caller this token makes: `web:<name>` through the login cookie (ambient),
    /// `api:<name>` as a bearer.
    fn caller(&self, ambient: bool) -> Caller {
        Caller {
            name: self.name.clone(),
            role: self.role,
            via: format!("{}:{}", if ambient { "web" } else { "api" }, self.name),
        }
    }
}

fn digest(s: &str) -> [u8; 32] {
    Sha256::digest(s.as_bytes()).into()
}

/// The authenticated caller, put in the request's extensions.
#[derive(Debug, Clone)]
pub struct Caller {
    /// Token name, or the person holding the local secret.
    pub name: String,
    /// Role.
    pub role: Role,
    /// `api:<token>`, `web:<token>`, `api:local-secret` or `web:login-link`.
    pub via: String,
}

impl Caller {
    /// 403 unless the caller has at least `role`.
    pub fn require(&self, role: Role) -> Result<(), ApiError> {
        if self.role >= role {
            Ok(())
        } else {
            Err(ApiError::forbidden(format!(
                "`{}` has the {} role; this needs {}",
                self.name,
                self.role.as_str(),
                role.as_str()
            )))
        }
    }

    /// The journal actor for this caller.
    pub fn actor(&self) -> gaffer_core::Actor {
        gaffer_core::Actor::user(&self.name, &self.via)
    }
}

/// Constant-time equality of two secrets (compared as digests, so length leaks nothing).
pub fn secret_eq(a: &str, b: &str) -> bool {
    digest(a).ct_eq(&digest(b)).into()
}

pub(crate) fn cookie<'a>(req: &'a Request, name: &str) -> Option<&'a str> {
    req.headers()
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// The token whose secret this is, compared in constant time.
pub fn find_token_pub<'a>(tokens: &'a [Token], secret: &str) -> Option<&'a Token> {
    find_token(tokens, secret)
}

pub(crate) fn find_token<'a>(tokens: &'a [Token], secret: &str) -> Option<&'a Token> {
    let d = digest(secret);
    // Compare against every token so timing does not tell which one matched.
    let mut found = None;
    for t in tokens {
        if bool::from(t.digest.ct_eq(&d)) {
            found = Some(t);
        }
    }
    found
}

/// A GET of the web page (not the API, health or metrics).
fn is_page(req: &Request) -> bool {
    let p = req.uri().path();
    req.method() == Method::GET
        && !p.starts_with("/api/")
        && !p.starts_with("/assets/")
        && p != "/healthz"
        && p != "/metrics"
}

fn to_login() -> Response {
    use axum::response::IntoResponse;
    (
        axum::http::StatusCode::SEE_OTHER,
        [(header::LOCATION, "/login")],
    )
        .into_response()
}

/// What a request without a credential is told.
pub(crate) const NEEDS_CREDENTIAL: &str = "a credential is required: send `Authorization: Bearer <secret>` (an API token, or the local secret in the data dir's `local-secret` file), or open the login link `gaffer serve` printed (`gaffer login-link` prints another)";

/// The caller a request's credential names, and whether the credential is ambient
/// (a cookie the browser sends by itself). `None`: no credential at all.
fn credential(state: &ServerState, req: &Request) -> Result<Option<(Caller, bool)>, ApiError> {
    let local = |via: &str| Caller {
        name: state.local.person().to_owned(),
        role: Role::Admin,
        via: via.to_owned(),
    };
    let bearer = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    if let Some(secret) = bearer {
        if state.local.is_secret(secret) {
            return Ok(Some((local("api:local-secret"), false)));
        }
        return match find_token(&state.tokens, secret) {
            Some(t) => Ok(Some((t.caller(false), false))),
            None => Err(ApiError::unauthorized("the token is not valid")),
        };
    }
    if let Some(session) = cookie(req, SESSION_COOKIE) {
        if state.local.is_session(session, gaffer_store::now_ms()) {
            return Ok(Some((local("web:login-link"), true)));
        }
    }
    if let Some(secret) = cookie(req, TOKEN_COOKIE) {
        if let Some(t) = find_token(&state.tokens, secret) {
            return Ok(Some((t.caller(true), true)));
        }
    }
    Ok(None)
}

/// The cookie a login link sets: a session signed with the local secret.
pub(crate) const SESSION_COOKIE: &str = "gaffer_session";
/// The cookie the login form sets for an API token.
pub(crate) const TOKEN_COOKIE: &str = "gaffer_token";

/// The auth and CSRF middleware.
pub async fn middleware(
    State(state): State<ServerState>,
    mut req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let path = req.uri().path();
    if path == "/login" || path.starts_with("/assets/") || path == "/favicon.ico" {
        return Ok(next.run(req).await);
    }
    let peer = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0);
    if state.tokens.is_empty() && !peer.is_some_and(|p| p.ip().is_loopback()) {
        return Err(ApiError::forbidden(
            "this server answers only loopback clients until a token is configured",
        ));
    }
    // A one-tap link is its own credential, for its one approval (see `crate::link`);
    // a forge's webhook delivery is signed (see `crate::hooks`).
    if path.starts_with("/link/") || path.starts_with("/api/hooks/") {
        return Ok(next.run(req).await);
    }
    let (caller, ambient) = match credential(&state, &req)? {
        Some(found) => found,
        None if is_page(&req) => return Ok(to_login()),
        None => return Err(ApiError::unauthorized(NEEDS_CREDENTIAL)),
    };
    let changes = !matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    let from_browser = ["origin", "sec-fetch-site", "cookie"]
        .iter()
        .any(|h| req.headers().contains_key(*h));
    if changes && ambient && from_browser {
        let sent = req
            .headers()
            .get("x-csrf-token")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if !secret_eq(sent, &state.csrf) {
            return Err(ApiError::new(
                axum::http::StatusCode::FORBIDDEN,
                "csrf",
                "missing or wrong X-CSRF-Token; submit from gaffer's own page",
            ));
        }
    }
    caller.require(required_role(req.method(), req.uri().path()))?;
    req.extensions_mut().insert(caller);
    Ok(next.run(req).await)
}

/// The role a request needs, decided before any handler or body parsing runs, so no
/// route can forget it: reading needs `viewer`; registering a project and flipping
/// auto-approve need `admin`; every other change needs `approver`.
pub fn required_role(method: &Method, path: &str) -> Role {
    if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
        return Role::Viewer;
    }
    let segments: Vec<&str> = path.trim_end_matches('/').split('/').collect();
    match segments.as_slice() {
        ["", "api", "projects"] | ["", "api", "projects", _, "auto"] => Role::Admin,
        _ => Role::Approver,
    }
}
