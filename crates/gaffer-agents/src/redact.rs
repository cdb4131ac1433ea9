//! Redaction at the boundary: API keys, tokens and configured secret values are replaced
//! before any event is stored, logged or shown.

use regex::Regex;
use serde_json::Value;

/// Replacement text.
pub const REDACTED: &str = "[REDACTED]";

/// Replaces secrets in text and JSON.
#[derive(Debug, Clone)]
pub struct Redactor {
    patterns: Vec<Regex>,
    secrets: Vec<String>,
}

impl Default for Redactor {
    fn default() -> Self {
        Self::new(Vec::<String>::new())
    }
}

// Well-known credential shapes. Each is anchored on a distinctive prefix so ordinary
// text is not touched.
const PATTERNS: &[&str] = &[
    r"sk-ant-[A-Za-z0-9_\-]{8,}",
    r"sk-(?:proj-|or-v1-|live-|test-)?[A-Za-z0-9_\-]{16,}",
    r"gh[pousr]_[A-Za-z0-9]{20,}",
    r"github_pat_[A-Za-z0-9_]{20,}",
    r"xox[abprs]-[A-Za-z0-9\-]{10,}",
    r"AKIA[0-9A-Z]{16}",
    r"AIza[0-9A-Za-z_\-]{30,}",
    r"glpat-[A-Za-z0-9_\-]{20,}",
    r"(?i:bearer)\s+[A-Za-z0-9._~+/\-]{12,}=*",
    r"eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}",
];

impl Redactor {
    /// A redactor for the built-in patterns plus the given secret values (values shorter
    /// than 4 characters are ignored: they would redact ordinary text).
    pub fn new<S: Into<String>>(secrets: impl IntoIterator<Item = S>) -> Self {
        // One alternation: a single pass over the text instead of one per pattern.
        let joined = PATTERNS
            .iter()
            .map(|p| format!("(?:{p})"))
            .collect::<Vec<_>>()
            .join("|");
        let patterns = match Regex::new(&joined) {
            Ok(r) => vec![r],
            Err(_) => PATTERNS.iter().filter_map(|p| Regex::new(p).ok()).collect(),
        };
        let mut secrets: Vec<String> = secrets
            .into_iter()
            .map(Into::into)
            .filter(|s: &String| s.len() >= 4)
            .collect();
        // Longest first, so a secret containing another is replaced whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        Redactor { patterns, secrets }
    }

    /// A redactor that also knows the values of the usual credential variables of this
    /// process (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`, ...).
    pub fn from_env_and<S: Into<String>>(extra: impl IntoIterator<Item = S>) -> Self {
        let mut secrets: Vec<String> = extra.into_iter().map(Into::into).collect();
        for (k, v) in std::env::vars() {
            let ku = k.to_ascii_uppercase();
            if ku.ends_with("_API_KEY")
                || ku.ends_with("_TOKEN")
                || ku.ends_with("_SECRET")
                || ku.ends_with("_PASSWORD")
            {
                secrets.push(v);
            }
        }
        Self::new(secrets)
    }

    /// Add a configured secret value.
    pub fn add_secret(&mut self, value: impl Into<String>) {
        let v = value.into();
        if v.len() >= 4 {
            self.secrets.push(v);
            self.secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        }
    }

    /// Redact a string.
    pub fn redact(&self, text: &str) -> String {
        let mut out: Option<String> = None;
        for s in &self.secrets {
            let cur = out.as_deref().unwrap_or(text);
            if cur.contains(s.as_str()) {
                out = Some(cur.replace(s.as_str(), REDACTED));
            }
        }
        for re in &self.patterns {
            let cur = out.as_deref().unwrap_or(text);
            if re.is_match(cur) {
                out = Some(re.replace_all(cur, REDACTED).into_owned());
            }
        }
        out.unwrap_or_else(|| text.to_string())
    }

    /// Redact every string (values and object keys' values) in a JSON value in place.
    pub fn redact_json(&self, v: &mut Value) {
        match v {
            Value::String(s) => {
                let r = self.redact(s);
                if r != *s {
                    *s = r;
                }
            }
            Value::Array(a) => a.iter_mut().for_each(|x| self.redact_json(x)),
            Value::Object(o) => o.values_mut().for_each(|x| self.redact_json(x)),
            _ => {}
        }
    }

    /// Redact any serde value by a JSON round trip. Values that fail to round-trip are
    /// returned unchanged (they contain no strings we could have missed).
    pub fn redact_serde<T>(&self, value: T) -> T
    where
        T: serde::Serialize + serde::de::DeserializeOwned,
    {
        match serde_json::to_value(&value) {
            Ok(mut v) => {
                self.redact_json(&mut v);
                serde_json::from_value(v).unwrap_or(value)
            }
            Err(_) => value,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn known_shapes_and_configured_values_are_replaced() {
        let r = Redactor::new(["db-pass-9000"]);
        for secret in [
            "sk-ant-api03-AAAAAAAAAAAAAAAAAAAA",
            "sk-proj-abcdefghijklmnopqrstuvwx",
            "ghp_abcdefghijklmnopqrstuvwxyz0123",
            "github_pat_11ABCDEFGHIJKLMNOPQRSTUV",
            "xoxb-1234567890-abcdef",
            "AKIAABCDEFGHIJKLMNOP",
            "Bearer abcdefghijklmnop.qrstuv",
            "db-pass-9000",
        ] {
            let out = r.redact(&format!("token={secret} end"));
            assert!(!out.contains(secret), "{secret} survived: {out}");
            assert!(out.contains(REDACTED) && out.ends_with(" end"), "{out}");
        }
        // Ordinary text is untouched.
        let text = "the task-id is 42 and sk is short; bearer of news";
        assert_eq!(r.redact(text), text);
    }

    #[test]
    fn json_values_are_redacted_everywhere() {
        let r = Redactor::new(["hunter2hunter2"]);
        let mut v = json!({"a": ["x hunter2hunter2 y", {"b": "sk-ant-xxxxxxxxxxxxxxxx"}], "n": 5});
        r.redact_json(&mut v);
        assert_eq!(
            v,
            json!({"a": ["x [REDACTED] y", {"b": "[REDACTED]"}], "n": 5})
        );
    }

    #[test]
    fn short_configured_values_are_ignored() {
        let r = Redactor::new(["ab", ""]);
        assert_eq!(r.redact("abc"), "abc");
    }
}
