//! Secrets (tokens) that must never reach errors, logs or `Debug` output.

use std::fmt;

/// A token or password. `Debug` and `Display` print `***`; only [`Secret::expose`]
/// gives the value, at the point where it goes into a request header or a child's
/// environment.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wrap a value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// Read a secret from the environment variable `name` (`None` when unset or empty).
    pub fn from_env(name: &str) -> Option<Self> {
        std::env::var(name)
            .ok()
            .filter(|v| !v.trim().is_empty())
            .map(|v| Self(v.trim().to_owned()))
    }

    /// The value. Use it only to authenticate, never to format a message.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// Remove every secret and any `user:password@` in URLs from `text`.
pub fn redact(text: &str, secrets: &[&Secret]) -> String {
    let mut out = strip_userinfo(text);
    for s in secrets {
        let v = s.expose();
        if v.len() >= 4 {
            out = out.replace(v, "***");
        }
    }
    out
}

/// `scheme://user:pass@host/...` → `scheme://***@host/...`, everywhere in `text`.
pub fn strip_userinfo(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        let end = tail
            .find(|c: char| c.is_whitespace() || c == '/' || c == '\'' || c == '"')
            .unwrap_or(tail.len());
        let authority = &tail[..end];
        match authority.rfind('@') {
            Some(at) => {
                out.push_str("***@");
                out.push_str(&authority[at + 1..]);
            }
            None => out.push_str(authority),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}
