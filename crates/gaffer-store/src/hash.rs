//! The hash chain: each event's hash covers the previous event's hash and its
//! own bytes, so changing any stored byte breaks every later link.

use sha2::{Digest, Sha256};

/// The `prev_hash` of a stream's first event.
pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// SHA-256 (hex) of an event, chained to the previous one of its stream.
pub fn event_hash(prev_hash: &str, stream_id: &str, seq: i64, at: i64, payload: &str) -> String {
    let mut h = Sha256::new();
    h.update(prev_hash.as_bytes());
    h.update(b"\n");
    h.update(stream_id.as_bytes());
    h.update(b"\n");
    h.update(seq.to_string().as_bytes());
    h.update(b"\n");
    h.update(at.to_string().as_bytes());
    h.update(b"\n");
    h.update(payload.as_bytes());
    hex::encode(h.finalize())
}
