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
    // HMAC takes keys of any length: this cannot fail.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else {
        return String::new();
    };
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}
