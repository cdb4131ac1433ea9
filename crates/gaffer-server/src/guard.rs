//! Which names this server answers to, which pages may change things through it,
//! and the headers every response carries.
//!
//! - **Host** (every request): a loopback name (`localhost`, `*.localhost`), an IP
//!   address, or one of `[server] public_names`. A web page whose own name was
//!   made to resolve to this machine (DNS rebinding) sends its own name as `Host`
//!   and is refused before anything else runs; an IP address cannot be rebound.
//! - **Origin** (every request that changes something): a browser's `Origin` must
//!   be this very server (the same host and port as `Host`), and its
//!   `Sec-Fetch-Site`, when sent, `same-origin` or `none`. Another site — or
//!   another port on localhost, say a dev server an agent started — is refused.
//!   Requests without these headers are not from a browser page and are judged by
//!   their credential alone (`auth`).
//! - **Headers** on every response, errors included: `X-Content-Type-Options:
//!   nosniff`, `X-Frame-Options: DENY`, `Referrer-Policy: no-referrer` (a login
//!   link's code never leaves in a `Referer`) and the page's Content-Security-Policy,
//!   each unless the response set its own (a one-tap link's confirm page says
//!   `same-origin`: with `no-referrer` a browser's form post carries `Origin: null`,
//!   which the Origin check refuses).

use crate::error::ApiError;
use crate::ServerState;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use std::net::IpAddr;

/// The page's Content-Security-Policy: only gaffer's own script, style and API.
pub(crate) const CSP: &str = "default-src 'self'; style-src 'self'; script-src 'self'; connect-src 'self'; img-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The host part of an authority (`host`, `host:port`, `[v6]:port`), lower-cased,
/// without a trailing dot.
fn host_of(authority: &str) -> String {
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => authority
            .rsplit_once(':')
            .filter(|(_, port)| port.bytes().all(|b| b.is_ascii_digit()))
            .map_or(authority, |(host, _)| host),
    };
    host.trim_end_matches('.').to_ascii_lowercase()
}

/// Whether this server answers to `host` (see the module docs).
pub(crate) fn answers_to(host: &str, public_names: &[String]) -> bool {
    host == "localhost"
        || host.ends_with(".localhost")
        || host.parse::<IpAddr>().is_ok()
        || public_names.iter().any(|n| n == host)
}

fn refuse(code: &str, message: String) -> ApiError {
    ApiError::new(StatusCode::FORBIDDEN, code, message)
}

/// The Host and Origin checks.
pub async fn middleware(
    State(state): State<ServerState>,
    req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let headers = req.headers();
    let authority = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .or_else(|| req.uri().authority().map(|a| a.as_str().to_owned()))
        .unwrap_or_default();
    let host = host_of(&authority);
    if !answers_to(&host, &state.public_names) {
        return Err(refuse(
            "host",
            format!(
                "this server does not answer to `{host}` (a page whose name points at this machine is refused: DNS rebinding); use localhost or 127.0.0.1, or add the name to [server] public_names if it is this server's"
            ),
        ));
    }
    let changes = !matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    if changes {
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("null");
            let same = origin
                .split_once("://")
                .is_some_and(|(_, rest)| rest.eq_ignore_ascii_case(&authority));
            if !same {
                return Err(refuse(
                    "origin",
                    format!("a page from `{origin}` may not change anything here; use gaffer's own page"),
                ));
            }
        }
        if let Some(site) = headers.get("sec-fetch-site") {
            let site = site.to_str().unwrap_or("");
            if !matches!(site, "same-origin" | "none") {
                return Err(refuse(
                    "origin",
                    format!("a {site} page may not change anything here; use gaffer's own page"),
                ));
            }
        }
    }
    Ok(next.run(req).await)
}

/// The headers every response carries (see the module docs).
pub async fn headers(req: Request, next: Next) -> Response {
    let mut r = next.run(req).await;
    let h = r.headers_mut();
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.entry(header::REFERRER_POLICY)
        .or_insert(HeaderValue::from_static("no-referrer"));
    h.entry(header::CONTENT_SECURITY_POLICY)
        .or_insert(HeaderValue::from_static(CSP));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_names_ip_addresses_and_public_names_only() {
        let public = vec!["gaffer.example.com".to_owned()];
        for ok in [
            "localhost:7777",
            "LOCALHOST",
            "app.localhost:1",
            "127.0.0.1:7777",
            "[::1]:7777",
            "192.168.1.5:7777",
            "gaffer.example.com",
            "gaffer.example.com.:443",
        ] {
            assert!(answers_to(&host_of(ok), &public), "{ok}");
        }
        for bad in [
            "attacker.test:7777",
            "localhost.attacker.test",
            "127.0.0.1.nip.io",
            "example.com",
            "",
        ] {
            assert!(!answers_to(&host_of(bad), &public), "{bad}");
        }
    }
}
