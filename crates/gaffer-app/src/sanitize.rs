//! The one door every stored event goes through: each string in it — values and
//! object keys alike, at any depth (tool inputs, file names, diffs, approval
//! details, escalations, receipts, outcomes) — has its secrets replaced and is cut
//! to [`MAX_FIELD_BYTES`] with a marker, before the journal stores it. Everything
//! gaffer shows (API, SSE, page, CLI, Discord) is read from the journal, so it is
//! covered too.

use crate::Redact;
use gaffer_core::Event;
use serde_json::{Map, Value};

/// The longest string an event may hold, in bytes; longer ones are cut with a
/// marker saying how much was cut.
pub const MAX_FIELD_BYTES: usize = 64 * 1024;

/// `text` cut to its first `max` bytes (on a char boundary), marking the cut.
pub fn cap(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n…(cut: {} more bytes)…", &text[..end], text.len() - end)
}

/// Every string of `value` (object keys too) redacted and cut to `max` bytes.
pub fn sanitize_value(value: &mut Value, redact: &dyn Fn(&str) -> String, max: usize) {
    let clean = |s: &str| cap(&redact(s), max);
    match value {
        Value::String(s) => {
            let c = clean(s);
            if c != *s {
                *s = c;
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|v| sanitize_value(v, redact, max)),
        Value::Object(map) => {
            let keys_clean = map.keys().all(|k| clean(k) == *k);
            if keys_clean {
                map.values_mut()
                    .for_each(|v| sanitize_value(v, redact, max));
            } else {
                let mut out = Map::with_capacity(map.len());
                for (k, mut v) in std::mem::take(map) {
                    sanitize_value(&mut v, redact, max);
                    // Two keys redacted alike stay two entries.
                    let mut key = clean(&k);
                    let mut n = 1;
                    while out.contains_key(&key) {
                        n += 1;
                        key = format!("{} #{n}", clean(&k));
                    }
                    out.insert(key, v);
                }
                *map = out;
            }
        }
        _ => {}
    }
}

/// An agent-provided value fit for the journal: each string (and key) cut to
/// `per_string` bytes, then, if its JSON is still longer than `total` bytes, the
/// value replaced by its JSON text cut to `total` with a marker. A 5 MB tool input
/// is stored as a few KiB, however it is shaped.
pub fn cap_value(mut value: Value, per_string: usize, total: usize) -> Value {
    sanitize_value(&mut value, &str::to_owned, per_string);
    let text = value.to_string();
    if text.len() > total {
        Value::String(cap(&text, total))
    } else {
        value
    }
}

/// The journal's sanitizer for `redact`: the event as JSON, every string cleaned,
/// read back. An event the cleaning made unreadable (a configured secret that is
/// also one of gaffer's own words) is refused rather than stored as it was.
pub fn sanitizer(redact: Redact) -> gaffer_store::Sanitizer {
    std::sync::Arc::new(move |event: Event| {
        let mut v = serde_json::to_value(&event).map_err(|e| e.to_string())?;
        sanitize_value(&mut v, &*redact, MAX_FIELD_BYTES);
        serde_json::from_value(v).map_err(|e| {
            format!(
                "with its secrets replaced it no longer reads as a `{}` event ({e}); a configured secret value is one of gaffer's own words: use a longer secret",
                event.kind()
            )
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn redact(s: &str) -> String {
        s.replace("hunter2", "[REDACTED]")
    }

    #[test]
    fn keys_values_and_long_strings_at_any_depth() {
        let mut v = json!({
            "input": {"hunter2": "x", "path": "a/hunter2.txt", "list": ["ok", "hunter2"]},
            "hunter2-hunter2": 1,
            "big": "é".repeat(40),
        });
        sanitize_value(&mut v, &redact, 21);
        assert_eq!(
            v,
            json!({
                "input": {"[REDACTED]": "x", "path": "a/[REDACTED].txt", "list": ["ok", "[REDACTED]"]},
                "[REDACTED]-[REDACTED]": 1,
                "big": format!("{}\n…(cut: 60 more bytes)…", "é".repeat(10)),
            })
        );
    }

    #[test]
    fn a_value_too_big_in_total_becomes_its_cut_text() {
        let small = json!({"command": "make test"});
        assert_eq!(cap_value(small.clone(), 100, 100), small);
        let long = cap_value(json!({"content": "x".repeat(5_000_000)}), 100, 1000);
        assert!(long.to_string().len() < 300, "{long}");
        assert!(long["content"].as_str().unwrap().ends_with("more bytes)…"));
        let many = cap_value(json!(vec!["abc"; 100_000]), 100, 1000);
        let text = many.as_str().unwrap();
        assert!(text.starts_with("[\"abc\",") && text.len() < 1100, "{text}");
    }

    #[test]
    fn keys_redacted_alike_stay_apart() {
        let mut v = json!({"a hunter2": 1, "a [REDACTED]": 2});
        sanitize_value(&mut v, &redact, 100);
        assert_eq!(v, json!({"a [REDACTED]": 2, "a [REDACTED] #2": 1}));
    }
}
