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
    /// The same patterns over bytes, for [`Redactor::mask_bytes`].
    byte_patterns: Vec<regex::bytes::Regex>,
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
        let byte_patterns = patterns
            .iter()
            .filter_map(|r| regex::bytes::Regex::new(r.as_str()).ok())
            .collect();
        let mut secrets: Vec<String> = secrets
            .into_iter()
            .map(Into::into)
            .filter(|s: &String| s.len() >= 4)
            .collect();
        // Longest first, so a secret containing another is replaced whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        Redactor {
            patterns,
            byte_patterns,
            secrets,
        }
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

    /// What kind of secret `text` holds, if any, in words (never the secret): a
    /// configured value, or something shaped like a known credential.
    pub fn detect(&self, text: &str) -> Option<&'static str> {
        if self.secrets.iter().any(|s| text.contains(s.as_str())) {
            Some("a configured secret value")
        } else if self.patterns.iter().any(|re| re.is_match(text)) {
            Some("what looks like an API key or token")
        } else {
            None
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

    /// Overwrite every secret in `bytes` with as many `*`: for opaque values (a cache
    /// entry) whose encoding must survive the redaction, as it keeps every length.
    pub fn mask_bytes(&self, bytes: &mut [u8]) {
        for secret in &self.secrets {
            let needle = secret.as_bytes();
            let mut from = 0;
            while let Some(at) = bytes[from..]
                .windows(needle.len())
                .position(|w| w == needle)
            {
                let start = from + at;
                bytes[start..start + needle.len()].fill(b'*');
                from = start + needle.len();
            }
        }
        for re in &self.byte_patterns {
            let found: Vec<std::ops::Range<usize>> =
                re.find_iter(bytes).map(|m| m.range()).collect();
            for range in found {
                bytes[range].fill(b'*');
            }
        }
    }

    /// Redact every string in a JSON value in place: values and object keys alike (an
    /// agent can put a secret in a key as easily as in a value).
    pub fn redact_json(&self, v: &mut Value) {
        match v {
            Value::String(s) => {
                let r = self.redact(s);
                if r != *s {
                    *s = r;
                }
            }
            Value::Array(a) => a.iter_mut().for_each(|x| self.redact_json(x)),
            Value::Object(o) => {
                if o.keys().any(|k| self.redact(k) != *k) {
                    let mut out = serde_json::Map::with_capacity(o.len());
                    for (k, v) in std::mem::take(o) {
                        // Two keys redacted alike stay two entries.
                        let redacted = self.redact(&k);
                        let mut key = redacted.clone();
                        let mut n = 1;
                        while out.contains_key(&key) {
                            n += 1;
                            key = format!("{redacted} #{n}");
                        }
                        out.insert(key, v);
                    }
                    *o = out;
                }
                o.values_mut().for_each(|x| self.redact_json(x));
            }
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
    fn object_keys_are_redacted_and_kept_apart() {
        let r = Redactor::new(["hunter2hunter2"]);
        let mut v = json!({"hunter2hunter2": {"x hunter2hunter2": 1, "x [REDACTED]": 2}});
        r.redact_json(&mut v);
        assert_eq!(
            v,
            json!({"[REDACTED]": {"x [REDACTED]": 2, "x [REDACTED] #2": 1}})
        );
    }

    #[test]
    fn detect_names_the_kind_never_the_secret() {
        let r = Redactor::new(["db-pass-9000"]);
        assert_eq!(
            r.detect("x db-pass-9000"),
            Some("a configured secret value")
        );
        assert_eq!(
            r.detect("AKIAABCDEFGHIJKLMNOP"),
            Some("what looks like an API key or token")
        );
        assert_eq!(r.detect("nothing here"), None);
    }

    #[test]
    fn masked_bytes_keep_their_length() {
        let r = Redactor::new(["db-pass-9000"]);
        let mut bytes = b"\x03path db-pass-9000 and AKIAABCDEFGHIJKLMNOP\xff".to_vec();
        let len = bytes.len();
        r.mask_bytes(&mut bytes);
        assert_eq!(bytes.len(), len);
        assert_eq!(
            bytes,
            b"\x03path ************ and ********************\xff".to_vec()
        );
    }

    #[test]
    fn short_configured_values_are_ignored() {
        let r = Redactor::new(["ab", ""]);
        assert_eq!(r.redact("abc"), "abc");
    }
}
