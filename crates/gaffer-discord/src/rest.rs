//! Discord's REST API, with its rate limits respected.
//!
//! Discord names a bucket for each route in `X-RateLimit-Bucket` and says how
//! many requests it has left (`X-RateLimit-Remaining`) and when it refills
//! (`X-RateLimit-Reset-After`). A bucket is shared per top-level resource (the
//! channel id in the path), so the limiter keys buckets by (bucket, channel).
//! Before a request, a known exhausted bucket is waited out; requests of one
//! route go one at a time so they cannot overrun a bucket together. A 429 is
//! waited out for its `retry_after` (the whole client for a global limit) and
//! the request is sent again, a few times at most.

use crate::error::{DiscordError, Result};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// How often one request is tried when Discord keeps answering 429.
const MAX_TRIES: usize = 5;
/// Longest `retry_after` honoured before giving up (a longer one means the bot
/// is banned for a while; waiting would only hold the adapter).
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy)]
struct BucketState {
    remaining: u64,
    reset_at: Instant,
}

#[derive(Default)]
struct Limits {
    /// Route key → Discord's bucket hash.
    routes: HashMap<String, String>,
    /// (bucket hash, major parameter) → what is left.
    buckets: HashMap<String, BucketState>,
    /// Until when every request waits (a global 429).
    global_until: Option<Instant>,
    /// Route key → the lock that sends its requests one at a time.
    queues: HashMap<String, Arc<tokio::sync::Mutex<()>>>,
}

/// A file sent with a message.
#[derive(Debug, Clone)]
pub struct Attachment {
    /// Shown name.
    pub filename: String,
    /// Contents.
    pub bytes: Vec<u8>,
}

/// The REST client. Cheap to clone.
#[derive(Clone)]
pub struct Rest {
    http: reqwest::Client,
    base: String,
    /// `Bot <token>`; only ever put in the Authorization header.
    auth: Arc<str>,
    limits: Arc<Mutex<Limits>>,
}

/// `METHOD /path` with every id but the major one replaced, and the major id
/// (channel, guild or webhook) that buckets are shared by.
pub fn route_key(method: &reqwest::Method, path: &str) -> (String, String) {
    let mut major = String::new();
    let mut out: Vec<&str> = Vec::new();
    let mut prev = "";
    // The query (`?limit=…`) is no part of the route.
    let path = path.split('?').next().unwrap_or(path);
    // After `interactions` come the interaction id and its token (a secret).
    let mut hide = 0;
    for seg in path.split('/').filter(|s| !s.is_empty()) {
        let is_id = seg.bytes().all(|b| b.is_ascii_digit());
        if hide > 0 {
            hide -= 1;
            out.push(":id");
        } else if seg == "interactions" {
            hide = 2;
            out.push(seg);
        } else if is_id && major.is_empty() && matches!(prev, "channels" | "guilds" | "webhooks") {
            major = seg.to_owned();
            out.push(seg);
        } else if is_id {
            out.push(":id");
        } else {
            out.push(seg);
        }
        prev = seg;
    }
    (format!("{method} /{}", out.join("/")), major)
}

fn header_f64(h: &reqwest::header::HeaderMap, name: &str) -> Option<f64> {
    h.get(name)?.to_str().ok()?.parse().ok()
}

impl Rest {
    /// A client for the API at `base` (e.g. `https://discord.com/api/v10`).
    pub fn new(base: &str, token: &str) -> Result<Self> {
        let http = reqwest::Client::builder()
            .user_agent(concat!(
                "DiscordBot (https://example.invalid/gaffer, ",
                env!("CARGO_PKG_VERSION"),
                ")"
            ))
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| DiscordError::Transport(e.to_string()))?;
        Ok(Self {
            http,
            base: base.trim_end_matches('/').to_owned(),
            auth: format!("Bot {token}").into(),
            limits: Arc::new(Mutex::new(Limits::default())),
        })
    }

    fn limits(&self) -> std::sync::MutexGuard<'_, Limits> {
        // A poisoned lock only means another request panicked; the numbers are still usable.
        self.limits
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// How long to wait before a request on `route` with `major`, if at all.
    fn wait_before(&self, route: &str, major: &str) -> Option<Instant> {
        let l = self.limits();
        let now = Instant::now();
        let global = l.global_until.filter(|g| *g > now);
        let bucket = l
            .routes
            .get(route)
            .and_then(|b| l.buckets.get(&format!("{b}:{major}")))
            .filter(|b| b.remaining == 0 && b.reset_at > now)
            .map(|b| b.reset_at);
        global.max(bucket)
    }

    fn remember(&self, route: &str, major: &str, h: &reqwest::header::HeaderMap) {
        let Some(bucket) = h.get("x-ratelimit-bucket").and_then(|v| v.to_str().ok()) else {
            return;
        };
        let mut l = self.limits();
        l.routes.insert(route.to_owned(), bucket.to_owned());
        if let (Some(remaining), Some(after)) = (
            header_f64(h, "x-ratelimit-remaining"),
            header_f64(h, "x-ratelimit-reset-after"),
        ) {
            l.buckets.insert(
                format!("{bucket}:{major}"),
                BucketState {
                    remaining: remaining.max(0.0) as u64,
                    reset_at: Instant::now() + Duration::from_secs_f64(after.max(0.0)),
                },
            );
        }
    }

    /// Send one request through the limiter; JSON or multipart body.
    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
        files: &[Attachment],
    ) -> Result<Value> {
        let (route, major) = route_key(&method, path);
        let queue = self
            .limits()
            .queues
            .entry(route.clone())
            .or_default()
            .clone();
        let _turn = queue.lock().await;
        for _ in 0..MAX_TRIES {
            if let Some(until) = self.wait_before(&route, &major) {
                tokio::time::sleep_until(until).await;
            }
            let mut req = self
                .http
                .request(method.clone(), format!("{}{path}", self.base))
                .header(reqwest::header::AUTHORIZATION, &*self.auth);
            if files.is_empty() {
                if let Some(b) = body {
                    req = req.json(b);
                }
            } else {
                let mut form = reqwest::multipart::Form::new().text(
                    "payload_json",
                    body.map(Value::to_string).unwrap_or_else(|| "{}".into()),
                );
                for (n, f) in files.iter().enumerate() {
                    form = form.part(
                        format!("files[{n}]"),
                        reqwest::multipart::Part::bytes(f.bytes.clone())
                            .file_name(f.filename.clone())
                            .mime_str("text/plain")
                            .map_err(|e| DiscordError::Transport(e.to_string()))?,
                    );
                }
                req = req.multipart(form);
            }
            let resp = req
                .send()
                .await
                .map_err(|e| DiscordError::Transport(e.without_url().to_string()))?;
            let status = resp.status();
            let headers = resp.headers().clone();
            self.remember(&route, &major, &headers);
            let text = resp
                .text()
                .await
                .map_err(|e| DiscordError::Transport(e.without_url().to_string()))?;
            let json: Value = if text.is_empty() {
                Value::Null
            } else {
                serde_json::from_str(&text).unwrap_or(Value::Null)
            };
            if status.as_u16() == 429 {
                let retry_after = json["retry_after"]
                    .as_f64()
                    .or_else(|| header_f64(&headers, "retry-after"))
                    .unwrap_or(1.0);
                let wait = Duration::from_secs_f64(retry_after.max(0.0));
                if wait > MAX_RETRY_AFTER {
                    return Err(DiscordError::RateLimited(route.clone()));
                }
                let until = Instant::now() + wait;
                let global = json["global"].as_bool().unwrap_or(false)
                    || headers.get("x-ratelimit-global").is_some();
                tracing::debug!(route = %route, retry_after, global, "Discord rate limit");
                {
                    let mut l = self.limits();
                    if global {
                        l.global_until = Some(until);
                    } else if let Some(b) = l.routes.get(&route).cloned() {
                        l.buckets.insert(
                            format!("{b}:{major}"),
                            BucketState {
                                remaining: 0,
                                reset_at: until,
                            },
                        );
                    }
                }
                tokio::time::sleep_until(until).await;
                continue;
            }
            if status.as_u16() == 401 {
                return Err(DiscordError::Unauthorized(format!("401 on {route}")));
            }
            if !status.is_success() {
                return Err(DiscordError::Api {
                    status: status.as_u16(),
                    code: json["code"].as_u64().unwrap_or(0),
                    message: json["message"].as_str().unwrap_or(&text).to_owned(),
                    route: route.clone(),
                });
            }
            return Ok(json);
        }
        Err(DiscordError::RateLimited(route.clone()))
    }

    /// `GET /gateway/bot`: the gateway URL to connect to.
    pub async fn gateway_url(&self) -> Result<String> {
        let v = self
            .send(reqwest::Method::GET, "/gateway/bot", None, &[])
            .await?;
        v["url"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| DiscordError::Transport("GET /gateway/bot had no url".into()))
    }

    /// `POST /channels/{id}/messages`, with files as a multipart body. Returns the
    /// message as Discord holds it.
    ///
    /// With a `nonce` (at most 25 characters) the post is sent with
    /// `enforce_nonce`: if this bot posted a message with the same nonce in the
    /// channel in the past few minutes, Discord returns that message and creates
    /// none — so a post repeated after a crash does not show twice. The returned
    /// message then shows what was sent the first time.
    pub async fn create_message(
        &self,
        channel: &str,
        body: &Value,
        files: &[Attachment],
        nonce: Option<&str>,
    ) -> Result<Value> {
        let mut body = body.clone();
        if let Some(n) = nonce {
            body["nonce"] = Value::from(n);
            body["enforce_nonce"] = Value::Bool(true);
        }
        if !files.is_empty() {
            body["attachments"] = files
                .iter()
                .enumerate()
                .map(|(n, f)| serde_json::json!({ "id": n, "filename": f.filename }))
                .collect();
        }
        let v = self
            .send(
                reqwest::Method::POST,
                &format!("/channels/{channel}/messages"),
                Some(&body),
                files,
            )
            .await?;
        id_of(&v)?;
        Ok(v)
    }

    /// `GET /channels/{id}/messages?limit=…`: the channel's newest messages (at most
    /// 100), newest first.
    pub async fn recent_messages(&self, channel: &str, limit: u8) -> Result<Vec<Value>> {
        let v = self
            .send(
                reqwest::Method::GET,
                &format!("/channels/{channel}/messages?limit={}", limit.clamp(1, 100)),
                None,
                &[],
            )
            .await?;
        match v {
            Value::Array(list) => Ok(list),
            _ => Err(DiscordError::Transport(
                "Discord's message list was not an array".into(),
            )),
        }
    }

    /// `PATCH /channels/{id}/messages/{id}`.
    pub async fn edit_message(&self, channel: &str, message: &str, body: &Value) -> Result<()> {
        self.send(
            reqwest::Method::PATCH,
            &format!("/channels/{channel}/messages/{message}"),
            Some(body),
            &[],
        )
        .await
        .map(drop)
    }

    /// `POST /channels/{id}/messages/{id}/threads`: a public thread on a message.
    /// Returns the thread's id.
    pub async fn start_thread(&self, channel: &str, message: &str, name: &str) -> Result<String> {
        let v = self
            .send(
                reqwest::Method::POST,
                &format!("/channels/{channel}/messages/{message}/threads"),
                Some(&serde_json::json!({ "name": name, "auto_archive_duration": 1440 })),
                &[],
            )
            .await?;
        id_of(&v)
    }

    /// `POST /interactions/{id}/{token}/callback`.
    pub async fn callback(&self, id: &str, token: &str, body: &Value) -> Result<()> {
        self.send(
            reqwest::Method::POST,
            &format!("/interactions/{id}/{token}/callback"),
            Some(body),
            &[],
        )
        .await
        .map(drop)
    }

    /// `PUT /applications/{id}/commands`: replace the global slash commands.
    pub async fn put_commands(&self, application: &str, commands: &Value) -> Result<()> {
        self.send(
            reqwest::Method::PUT,
            &format!("/applications/{application}/commands"),
            Some(commands),
            &[],
        )
        .await
        .map(drop)
    }
}

/// The `id` of a Discord object.
pub fn id_of(v: &Value) -> Result<String> {
    v["id"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| DiscordError::Transport("Discord's answer had no id".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_keep_the_major_id_and_hide_the_others() {
        let post = reqwest::Method::POST;
        assert_eq!(
            route_key(&post, "/channels/123/messages"),
            ("POST /channels/123/messages".into(), "123".into())
        );
        assert_eq!(
            route_key(&reqwest::Method::GET, "/channels/123/messages?limit=50"),
            ("GET /channels/123/messages".into(), "123".into())
        );
        assert_eq!(
            route_key(&reqwest::Method::PATCH, "/channels/123/messages/456"),
            ("PATCH /channels/123/messages/:id".into(), "123".into())
        );
        // The interaction token is a secret and differs per call: neither is in the key.
        let (route, major) = route_key(&post, "/interactions/789/tok-en/callback");
        assert_eq!(route, "POST /interactions/:id/:id/callback");
        assert_eq!(major, "");
    }
}
