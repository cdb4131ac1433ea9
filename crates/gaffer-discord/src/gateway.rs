//! Discord's gateway: one websocket session that stays up.
//!
//! ```text
//! connect ─► Hello (op 10, heartbeat_interval)
//!         ─► Identify (op 2: token, intents)      first time, or after Invalid Session(false)
//!            or Resume (op 6: session_id, seq)    to resume_gateway_url after a drop
//!         ◄─ READY (session_id, resume_gateway_url) / RESUMED, then dispatches (op 0, seq s)
//! every heartbeat_interval: Heartbeat (op 1, last s) ◄─ ACK (op 11)
//!   no ACK since the last one: the connection is a zombie → reconnect and resume
//! op 1 from Discord: heartbeat now;  op 7 Reconnect: reconnect and resume
//! op 9 Invalid Session: d=true resume, d=false identify afresh (after 1–5 s)
//! close 4004/4010–4014: stop for good (bad token, shard, intents); any other: resume
//! ```
//!
//! Dispatches go to the adapter through a channel, in order, each once per session
//! (a resumed session replays only what was missed).

use crate::error::{DiscordError, Result};
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_util::sync::CancellationToken;

/// GUILDS | GUILD_MESSAGES | MESSAGE_CONTENT.
pub const INTENTS: u64 = 1 | (1 << 9) | (1 << 15);

/// One event from the gateway (op 0).
#[derive(Debug, Clone)]
pub struct Dispatch {
    /// `t`: `MESSAGE_CREATE`, `INTERACTION_CREATE`, `READY`, …
    pub kind: String,
    /// `d`.
    pub data: Value,
}

/// What a session needs to resume.
#[derive(Debug, Clone)]
struct Resumable {
    session_id: String,
    resume_url: String,
}

/// Why a connection ended.
enum Ended {
    /// Reconnect and resume (drop, op 7, zombie, resumable close).
    Resume,
    /// Reconnect and identify afresh (op 9 false, session gone).
    Identify,
    /// Asked to stop.
    Stopped,
}

/// The gateway client.
pub struct Gateway {
    url: String,
    token: String,
    seq: Option<u64>,
    session: Option<Resumable>,
    out: mpsc::Sender<Dispatch>,
}

/// `url` with the gateway version and encoding, as Discord asks
/// (`wss://gateway.discord.gg` → `wss://gateway.discord.gg/?v=10&encoding=json`).
fn versioned(url: &str) -> String {
    if url.contains('?') {
        return url.to_owned();
    }
    let has_path = url
        .split_once("://")
        .is_some_and(|(_, rest)| rest.contains('/'));
    if has_path {
        format!("{url}?v=10&encoding=json")
    } else {
        format!("{url}/?v=10&encoding=json")
    }
}

impl Gateway {
    /// A client for the gateway at `url` (from `GET /gateway/bot` or the config),
    /// sending dispatches to `out`.
    pub fn new(url: &str, token: &str, out: mpsc::Sender<Dispatch>) -> Self {
        Self {
            url: url.to_owned(),
            token: token.to_owned(),
            seq: None,
            session: None,
            out,
        }
    }

    /// Stay connected until `stop`; returns only on stop or a fatal close.
    pub async fn run(mut self, stop: CancellationToken) -> Result<()> {
        // Built with the whole workspace, rustls has two providers and picks none itself.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut backoff = Duration::from_millis(250);
        loop {
            if stop.is_cancelled() {
                return Ok(());
            }
            let started = Instant::now();
            match self.connect_once(&stop).await {
                Ok(Ended::Stopped) => return Ok(()),
                Ok(Ended::Resume) => {}
                Ok(Ended::Identify) => {
                    self.session = None;
                    self.seq = None;
                    // Discord asks for a random 1–5 s wait before identifying again.
                    let jitter = u64::from(started.elapsed().subsec_millis() % 4000);
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_millis(1000 + jitter)) => {}
                        _ = stop.cancelled() => return Ok(()),
                    }
                }
                Err(e @ (DiscordError::Unauthorized(_) | DiscordError::Fatal { .. })) => {
                    return Err(e)
                }
                Err(e) => {
                    tracing::warn!(error = %e, "Discord gateway connection failed; retrying");
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {}
                        _ = stop.cancelled() => return Ok(()),
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(30));
                    continue;
                }
            }
            backoff = Duration::from_millis(250);
        }
    }

    async fn connect_once(&mut self, stop: &CancellationToken) -> Result<Ended> {
        let url = versioned(
            self.session
                .as_ref()
                .map_or(self.url.as_str(), |s| s.resume_url.as_str()),
        );
        let (mut ws, _) = tokio_tungstenite::connect_async(url.as_str())
            .await
            .map_err(|e| DiscordError::Transport(format!("gateway: {e}")))?;
        let hello = match ws.next().await {
            Some(Ok(WsMessage::Text(t))) => serde_json::from_str::<Value>(&t).unwrap_or_default(),
            other => {
                return Err(DiscordError::Transport(format!(
                    "gateway: expected Hello, got {other:?}"
                )))
            }
        };
        if hello["op"].as_u64() != Some(10) {
            return Err(DiscordError::Transport(format!(
                "gateway: expected Hello (op 10), got op {}",
                hello["op"]
            )));
        }
        let interval = Duration::from_millis(
            hello["d"]["heartbeat_interval"]
                .as_u64()
                .unwrap_or(41_250)
                .max(100),
        );
        let login = match (&self.session, self.seq) {
            (Some(s), Some(seq)) => json!({ "op": 6, "d": {
                "token": self.token, "session_id": s.session_id, "seq": seq } }),
            _ => json!({ "op": 2, "d": {
                "token": self.token, "intents": INTENTS,
                "properties": { "os": std::env::consts::OS, "browser": "gaffer", "device": "gaffer" } } }),
        };
        send(&mut ws, &login).await?;
        // The first heartbeat comes after a fraction of the interval (Discord's jitter).
        let mut next_beat = Instant::now() + interval / 3;
        let mut acked = true;
        loop {
            let frame = tokio::select! {
                _ = stop.cancelled() => {
                    let _ = ws.close(None).await;
                    return Ok(Ended::Stopped);
                }
                _ = tokio::time::sleep_until(next_beat) => {
                    if !acked {
                        tracing::info!("Discord gateway missed a heartbeat ACK; reconnecting");
                        let _ = ws.close(Some(close_frame())).await;
                        return Ok(Ended::Resume);
                    }
                    send(&mut ws, &json!({ "op": 1, "d": self.seq })).await?;
                    acked = false;
                    next_beat = Instant::now() + interval;
                    continue;
                }
                frame = ws.next() => frame,
            };
            let text = match frame {
                Some(Ok(WsMessage::Text(t))) => t,
                Some(Ok(WsMessage::Close(close))) => {
                    let (code, reason) = close
                        .map(|c| (u16::from(c.code), c.reason.to_string()))
                        .unwrap_or((1000, String::new()));
                    return match code {
                        4004 => Err(DiscordError::Unauthorized(format!(
                            "gateway close 4004 {reason}"
                        ))),
                        4010..=4014 => Err(DiscordError::Fatal { code, reason }),
                        // Invalid seq, session timed out: the session cannot be resumed.
                        4007 | 4009 => Ok(Ended::Identify),
                        _ => Ok(Ended::Resume),
                    };
                }
                Some(Ok(_)) => continue,
                Some(Err(e)) => {
                    tracing::info!(error = %e, "Discord gateway connection lost; resuming");
                    return Ok(Ended::Resume);
                }
                None => return Ok(Ended::Resume),
            };
            let v: Value = match serde_json::from_str(&text) {
                Ok(v) => v,
                Err(e) => {
                    tracing::warn!(error = %e, "Discord gateway sent a frame that is not JSON; ignored");
                    continue;
                }
            };
            match v["op"].as_u64() {
                Some(0) => {
                    if let Some(s) = v["s"].as_u64() {
                        self.seq = Some(s);
                    }
                    let kind = v["t"].as_str().unwrap_or("").to_owned();
                    if kind == "READY" {
                        let d = &v["d"];
                        self.session = Some(Resumable {
                            session_id: d["session_id"].as_str().unwrap_or("").to_owned(),
                            resume_url: d["resume_gateway_url"]
                                .as_str()
                                .unwrap_or(&self.url)
                                .to_owned(),
                        });
                    }
                    if self
                        .out
                        .send(Dispatch {
                            kind,
                            data: v["d"].clone(),
                        })
                        .await
                        .is_err()
                    {
                        let _ = ws.close(Some(close_frame())).await;
                        return Ok(Ended::Stopped);
                    }
                }
                Some(1) => send(&mut ws, &json!({ "op": 1, "d": self.seq })).await?,
                Some(7) => {
                    let _ = ws.close(Some(close_frame())).await;
                    return Ok(Ended::Resume);
                }
                Some(9) => {
                    let _ = ws.close(Some(close_frame())).await;
                    return Ok(
                        if v["d"].as_bool() == Some(true) && self.session.is_some() {
                            Ended::Resume
                        } else {
                            Ended::Identify
                        },
                    );
                }
                Some(11) => acked = true,
                _ => {}
            }
        }
    }
}

/// A close that keeps the session resumable (any code but 1000/1001).
fn close_frame() -> tokio_tungstenite::tungstenite::protocol::CloseFrame {
    tokio_tungstenite::tungstenite::protocol::CloseFrame {
        code: CloseCode::from(4000),
        reason: "reconnecting".into(),
    }
}

async fn send<S>(ws: &mut S, v: &Value) -> Result<()>
where
    S: futures::Sink<WsMessage> + Unpin,
    S::Error: std::fmt::Display,
{
    ws.send(WsMessage::Text(v.to_string().into()))
        .await
        .map_err(|e| DiscordError::Transport(format!("gateway: {e}")))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_version_is_added_once_without_breaking_a_path() {
        assert_eq!(
            super::versioned("wss://gateway.discord.gg"),
            "wss://gateway.discord.gg/?v=10&encoding=json"
        );
        assert_eq!(
            super::versioned("ws://127.0.0.1:9/gateway"),
            "ws://127.0.0.1:9/gateway?v=10&encoding=json"
        );
        assert_eq!(
            super::versioned("wss://g.example/?v=10&encoding=json"),
            "wss://g.example/?v=10&encoding=json"
        );
    }
}
