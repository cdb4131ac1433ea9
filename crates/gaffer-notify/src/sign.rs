//! The webhook signature: `X-Gaffer-Signature-256: sha256=<hex>` with
//! `<hex>` = HMAC-SHA256(secret, `<X-Gaffer-Timestamp>.<raw body>`).

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The header holding the signature.
pub const SIGNATURE_HEADER: &str = "x-gaffer-signature-256";
/// The header holding the signing time (Unix seconds), part of what is signed.
pub const TIMESTAMP_HEADER: &str = "x-gaffer-timestamp";
/// The header holding the delivery's idempotency id (also the body's `id`).
pub const DELIVERY_HEADER: &str = "x-gaffer-delivery";
/// The header naming the event (`approval`, `done`, `failed`, `blocked`).
pub const EVENT_HEADER: &str = "x-gaffer-event";

/// `sha256=<hex>` over `<timestamp>.<body>`.
pub fn signature(secret: &str, timestamp: i64, body: &[u8]) -> String {
    let timestamp = timestamp.to_string();
    let mac = hmac_hex(secret.as_bytes(), &[timestamp.as_bytes(), b".", body]);
    format!("sha256={mac}")
}

/// Hex HMAC-SHA256 with `key` over `parts`, one after another (the webhook
/// signature and the one-tap links' MAC).
pub(crate) fn hmac_hex(key: &[u8], parts: &[&[u8]]) -> String {
    // HMAC takes keys of any length: this cannot fail.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(key) else {
        return String::new();
    };
    for p in parts {
        mac.update(p);
    }
    hex::encode(mac.finalize().into_bytes())
}
