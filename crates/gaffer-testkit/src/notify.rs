//! Receivers of gaffer's notifications, over real HTTP on loopback:
//!
//! - [`FakeNtfy`]: an ntfy server's JSON publish (`POST /` with a JSON body naming
//!   the `topic`; see ntfy's "Publish as JSON" docs). It refuses what ntfy refuses
//!   (no topic, a bad topic name, more than 3 actions, an action without `action`,
//!   `label`, or the `url` a `view`/`http` action needs, a wrong bearer token) with
//!   ntfy's error shape, and answers a publish with the message ntfy returns.
//! - [`FakeWebhook`]: records every POST (headers and raw body) and can be told to
//!   fail the next requests with 503 or to hang, to exercise retries.

use crate::forge::serve;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// HMAC-SHA256 (hex) written out from RFC 2104 over plain SHA-256, so a test
/// does not trust the code under test's HMAC.
pub fn rfc2104_hmac_sha256(key: &[u8], message: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    let mut block = [0u8; 64];
    if key.len() > 64 {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block.iter().map(|b| b ^ byte).collect::<Vec<u8>>();
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    let outer = Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize();
    outer.iter().map(|b| format!("{b:02x}")).collect()
}

/// One request a fake received.
#[derive(Debug, Clone)]
pub struct Received {
    /// Request headers, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// The raw body.
    pub body: Vec<u8>,
    /// What the fake answered.
    pub status: u16,
}

impl Received {
    /// The header `name` (lower case), if sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The `X-Gaffer-Signature-256` a webhook signed with `secret` carries for
    /// this request's timestamp and body.
    pub fn expected_signature(&self, secret: &str) -> String {
        let mut signed = self
            .header("x-gaffer-timestamp")
            .unwrap_or_default()
            .as_bytes()
            .to_vec();
        signed.push(b'.');
        signed.extend_from_slice(&self.body);
        format!("sha256={}", rfc2104_hmac_sha256(secret.as_bytes(), &signed))
    }

    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

fn headers_of(h: &HeaderMap) -> Vec<(String, String)> {
    h.iter()
        .map(|(k, v)| {
            (
                k.as_str().to_owned(),
                v.to_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

#[derive(Default)]
struct Shared {
    received: Mutex<Vec<Received>>,
    fail_next: Mutex<u32>,
    hang_next: Mutex<u32>,
    token: Option<String>,
}

impl Shared {
    /// 503 or a hang for the next request, when asked.
    async fn sabotage(&self) -> Option<StatusCode> {
        let hang = {
            let mut h = self.hang_next.lock().unwrap();
            let hang = *h > 0;
            *h = h.saturating_sub(1);
            hang
        };
        if hang {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
        let mut f = self.fail_next.lock().unwrap();
        if *f > 0 {
            *f -= 1;
            return Some(StatusCode::SERVICE_UNAVAILABLE);
        }
        None
    }

    fn record(&self, headers: &HeaderMap, body: &Bytes, status: StatusCode) {
        self.received.lock().unwrap().push(Received {
            headers: headers_of(headers),
            body: body.to_vec(),
            status: status.as_u16(),
        });
    }
}

/// A webhook receiver.
pub struct FakeWebhook {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeWebhook {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn webhook(State(s): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let status = s.sabotage().await.unwrap_or(StatusCode::NO_CONTENT);
    s.record(&headers, &body, status);
    status.into_response()
}

impl FakeWebhook {
    /// Listen on loopback.
    pub async fn start() -> anyhow::Result<Self> {
        let shared = Arc::new(Shared::default());
        let router = Router::new().fallback(webhook).with_state(shared.clone());
        let (addr, task) = serve(router).await?;
        Ok(Self { addr, shared, task })
    }

    /// Where to POST.
    pub fn url(&self) -> String {
        format!("http://{}/hooks/gaffer", self.addr)
    }

    /// Answer the next `n` requests with 503.
    pub fn fail_next(&self, n: u32) {
        *self.shared.fail_next.lock().unwrap() = n;
    }

    /// Never answer the next `n` requests.
    pub fn hang_next(&self, n: u32) {
        *self.shared.hang_next.lock().unwrap() = n;
    }

    /// Every request so far, failed ones included.
    pub fn received(&self) -> Vec<Received> {
        self.shared.received.lock().unwrap().clone()
    }
}

/// An ntfy server (the JSON publish endpoint).
pub struct FakeNtfy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeNtfy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn ntfy_error(code: u32, http: StatusCode, error: &str) -> Response {
    (
        http,
        Json(json!({ "code": code, "http": http.as_u16(), "error": error, "link": "https://ntfy.sh/docs/publish/" })),
    )
        .into_response()
}

/// What ntfy refuses in a JSON publish: its error code and text.
fn check_publish(m: &Value) -> Result<(), (u32, &'static str)> {
    let bad = |e: &'static str| Err((40001, e));
    let Some(topic) = m["topic"].as_str() else {
        return bad("invalid request: topic invalid");
    };
    let topic_ok = !topic.is_empty()
        && topic.len() <= 64
        && topic
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !topic_ok {
        return bad("invalid request: topic invalid");
    }
    for key in ["message", "title", "click"] {
        if !(m[key].is_null() || m[key].is_string()) {
            return bad("invalid request: JSON body malformed");
        }
    }
    if let Some(actions) = m.get("actions") {
        let Some(actions) = actions.as_array() else {
            return bad("invalid request: actions invalid");
        };
        if actions.len() > 3 {
            return Err((
                40018,
                "invalid request: actions invalid, only 3 actions allowed",
            ));
        }
        for a in actions {
            let kind = a["action"].as_str().unwrap_or("");
            if !matches!(kind, "view" | "broadcast" | "http" | "copy") {
                return bad("invalid request: actions invalid, action type invalid");
            }
            if a["label"].as_str().unwrap_or("").is_empty() {
                return bad("invalid request: actions invalid, label is required");
            }
            if matches!(kind, "view" | "http") && a["url"].as_str().unwrap_or("").is_empty() {
                return bad("invalid request: actions invalid, url is required");
            }
        }
    }
    Ok(())
}

async fn ntfy(State(s): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    if let Some(status) = s.sabotage().await {
        s.record(&headers, &body, status);
        return ntfy_error(50301, status, "service unavailable");
    }
    if let Some(token) = &s.token {
        let sent = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if sent != Some(token.as_str()) {
            s.record(&headers, &body, StatusCode::FORBIDDEN);
            return ntfy_error(40301, StatusCode::FORBIDDEN, "forbidden");
        }
    }
    let parsed: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(_) => {
            s.record(&headers, &body, StatusCode::BAD_REQUEST);
            return ntfy_error(
                40001,
                StatusCode::BAD_REQUEST,
                "invalid request: JSON body malformed",
            );
        }
    };
    if let Err((code, error)) = check_publish(&parsed) {
        s.record(&headers, &body, StatusCode::BAD_REQUEST);
        return ntfy_error(code, StatusCode::BAD_REQUEST, error);
    }
    s.record(&headers, &body, StatusCode::OK);
    let time = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let mut answer = json!({
        "id": uuid::Uuid::new_v4().simple().to_string()[..12],
        "time": time,
        "expires": time + 43200,
        "event": "message",
        "topic": parsed["topic"],
        "message": parsed["message"].as_str().unwrap_or("triggered"),
    });
    for key in ["title", "actions", "click", "tags", "priority"] {
        if !parsed[key].is_null() {
            answer[key] = parsed[key].clone();
        }
    }
    Json(answer).into_response()
}

impl FakeNtfy {
    /// Listen on loopback; with `token`, publishes need `Authorization: Bearer <token>`.
    pub async fn start(token: Option<&str>) -> anyhow::Result<Self> {
        let shared = Arc::new(Shared {
            token: token.map(str::to_owned),
            ..Shared::default()
        });
        let router = Router::new().fallback(ntfy).with_state(shared.clone());
        let (addr, task) = serve(router).await?;
        Ok(Self { addr, shared, task })
    }

    /// The server's base URL (what `[[notify]] url` holds).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Answer the next `n` publishes with 503.
    pub fn fail_next(&self, n: u32) {
        *self.shared.fail_next.lock().unwrap() = n;
    }

    /// Every request so far, refused ones included.
    pub fn received(&self) -> Vec<Received> {
        self.shared.received.lock().unwrap().clone()
    }

    /// The publishes ntfy accepted.
    pub fn published(&self) -> Vec<Value> {
        self.received()
            .into_iter()
            .filter(|r| r.status == 200)
            .map(|r| r.json())
            .collect()
    }
}
