//! What an agent does, as the journal's `agent_activity` events hold it (a
//! normalized `activity` object with a `type`: `tool_call`, `file_change`,
//! `assistant_text`, `rate_limited`, `usage`, …), read by every renderer.

use serde_json::Value;

/// A tool call's input in words: its command, path, pattern, URL or query when it
/// has one, else its fields as `key value` (never JSON braces).
pub fn tool_input(input: &Value) -> String {
    const MAIN: &[&str] = &[
        "command",
        "cmd",
        "file_path",
        "path",
        "pattern",
        "url",
        "query",
    ];
    fn plain(v: &Value) -> String {
        match v {
            Value::String(s) => s.clone(),
            Value::Array(items) => items.iter().map(plain).collect::<Vec<_>>().join(" "),
            other => other.to_string(),
        }
    }
    match input {
        Value::Object(fields) => match MAIN.iter().find_map(|k| fields.get(*k)) {
            Some(main) => plain(main),
            None => fields
                .iter()
                .map(|(k, v)| format!("{k} {}", plain(v)))
                .collect::<Vec<_>>()
                .join(" · "),
        },
        other => plain(other),
    }
}
