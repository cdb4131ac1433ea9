//! `[[notify]]`: where gaffer tells people that something needs them (an approval
//! opened) or ended (a task done, failed or blocked), and `[server] public_url`,
//! the address one-tap links point at.
//!
//! Secrets never live in the file: a webhook's signing secret and an ntfy access
//! token are read from environment variables (`secret_env` / `token_env`, by
//! default `GAFFER_NOTIFY_<NAME>_SECRET` / `_TOKEN`), are redacted wherever gaffer
//! writes (their variables join `[secrets] env`), and [`Secret`]'s `Debug` hides them.

use crate::{invalid, overlay, ConfigError, Sources};

/// A secret value read from the environment; `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// A secret from its value (config reads it from the environment).
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value, for signing or an `Authorization` header only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// What a target is told about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum NotifyEvent {
    /// An approval waits for a person (auto-approved ones are not sent).
    Approval,
    /// A task finished and shipped.
    Done,
    /// A task failed.
    Failed,
    /// A task cannot go on without a person.
    Blocked,
}

impl NotifyEvent {
    /// Every event, the default of `events`.
    pub const ALL: [Self; 4] = [Self::Approval, Self::Done, Self::Failed, Self::Blocked];

    /// Its name in `events` and in payloads.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Approval => "approval",
            Self::Done => "done",
            Self::Failed => "failed",
            Self::Blocked => "blocked",
        }
    }
}

/// How a target is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotifyKind {
    /// A JSON POST signed with HMAC-SHA256 (`X-Gaffer-Signature-256`).
    Webhook {
        /// Where to POST.
        url: String,
        /// The signing secret.
        secret: Secret,
    },
    /// An ntfy server's JSON publish (`POST <url>` with `topic`).
    Ntfy {
        /// The ntfy server (`https://ntfy.sh` or your own).
        url: String,
        /// The topic the phone subscribes to.
        topic: String,
        /// An access token (`Authorization: Bearer`), for a protected topic.
        token: Option<Secret>,
    },
}

/// One `[[notify]]` target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotifyTarget {
    /// Unique among targets; part of every idempotency id.
    pub name: String,
    /// How it is reached.
    pub kind: NotifyKind,
    /// Whom its one-tap links are issued to: a decision made with one is recorded
    /// as this person, via the target's channel. `None`: no links, only news.
    pub person: Option<String>,
    /// What it is told about.
    pub events: Vec<NotifyEvent>,
    /// The variable holding its secret (shown by `doctor`, never the value).
    pub secret_env: Option<String>,
}

impl NotifyTarget {
    /// `webhook` or `ntfy`: the channel a one-tap link's decision is recorded with.
    pub fn channel(&self) -> &'static str {
        match self.kind {
            NotifyKind::Webhook { .. } => "webhook",
            NotifyKind::Ntfy { .. } => "ntfy",
        }
    }

    /// Where it sends to.
    pub fn url(&self) -> &str {
        match &self.kind {
            NotifyKind::Webhook { url, .. } | NotifyKind::Ntfy { url, .. } => url,
        }
    }
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawNotify {
    name: Option<String>,
    kind: Option<String>,
    url: Option<String>,
    secret_env: Option<String>,
    topic: Option<String>,
    token_env: Option<String>,
    person: Option<String>,
    events: Option<Vec<String>>,
}

/// The env variable a target's `key` is read from by default.
pub fn notify_env_var(target: &str, key: &str) -> String {
    format!("GAFFER_NOTIFY_{}_{key}", crate::env_name_part(target))
}

/// An http(s) URL with a host and nothing a URL cannot hold.
pub(crate) fn check_http_url(origin: &str, field: &str, url: &str) -> Result<String, ConfigError> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"));
    let host = rest.map(|r| r.split(['/', '?', '#']).next().unwrap_or(""));
    let fine = host.is_some_and(|h| !h.is_empty() && !h.starts_with(':'))
        && !url.chars().any(|c| c.is_whitespace() || c.is_control());
    if !fine {
        return Err(invalid(
            origin,
            field,
            format!("is `{url}`; write an http(s) URL with a host, like \"https://hooks.example.com/gaffer\""),
        ));
    }
    Ok(url.trim_end_matches('/').to_owned())
}

fn env_var_name(origin: &str, field: &str, var: &str) -> Result<(), ConfigError> {
    if var.is_empty() || !var.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(invalid(
            origin,
            field,
            format!("is `{var}`; name the environment variable that holds the value (letters, digits and _), never the value itself"),
        ));
    }
    Ok(())
}

/// Resolve every `[[notify]]` target; returns them and the variables whose
/// values are secrets (for the redactor).
pub(crate) fn resolve(
    origin: &str,
    sources: &Sources<'_>,
    raw: Vec<RawNotify>,
) -> Result<(Vec<NotifyTarget>, Vec<String>), ConfigError> {
    let mut targets: Vec<NotifyTarget> = Vec::new();
    let mut secret_vars = Vec::new();
    for (i, t) in raw.into_iter().enumerate() {
        let at = |key: &str| format!("notify[{i}].{key}");
        let name = t.name.unwrap_or_default();
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(invalid(
                origin,
                &at("name"),
                format!("is `{name}`; give each target a name of letters, digits, - and _ (like \"phone\"), unique among targets"),
            ));
        }
        if targets.iter().any(|o| o.name == name) {
            return Err(invalid(
                origin,
                &at("name"),
                format!("`{name}` names two targets; names must be unique (they are part of every delivery's id)"),
            ));
        }
        let at = |key: &str| format!("notify.{name}.{key}");
        let url_var = notify_env_var(&name, "URL");
        let (url, from) = overlay(sources, &url_var, t.url, origin);
        let Some(url) = url.filter(|u| !u.trim().is_empty()) else {
            return Err(invalid(
                origin,
                &at("url"),
                "is missing; write where to send (a webhook's URL, or the ntfy server like \"https://ntfy.sh\")",
            ));
        };
        let url = check_http_url(&from, &at("url"), url.trim())?;
        let mut read_secret = |key: &str, var: Option<String>, suffix: &str| {
            let var = var.unwrap_or_else(|| notify_env_var(&name, suffix));
            env_var_name(origin, &at(key), &var)?;
            secret_vars.push(var.clone());
            Ok::<_, ConfigError>(((sources.env)(&var).filter(|v| !v.is_empty()), var))
        };
        let (kind, secret_env) = match t.kind.as_deref() {
            Some("webhook") => {
                if t.topic.is_some() || t.token_env.is_some() {
                    return Err(invalid(
                        origin,
                        &at("topic"),
                        "`topic` and `token_env` are for kind = \"ntfy\"; a webhook has `url` and `secret_env`",
                    ));
                }
                let (secret, var) = read_secret("secret_env", t.secret_env, "SECRET")?;
                let Some(secret) = secret else {
                    return Err(invalid(
                        origin,
                        &at("secret_env"),
                        format!("names {var}, which is not set; put the webhook's signing secret (16+ random characters, shared with the receiver) in it"),
                    ));
                };
                if secret.len() < 16 {
                    return Err(invalid(
                        &format!("environment variable {var}"),
                        &at("secret_env"),
                        "holds fewer than 16 characters; use a long random secret (`openssl rand -hex 32`)",
                    ));
                }
                (
                    NotifyKind::Webhook {
                        url,
                        secret: Secret(secret),
                    },
                    Some(var),
                )
            }
            Some("ntfy") => {
                if t.secret_env.is_some() {
                    return Err(invalid(
                        origin,
                        &at("secret_env"),
                        "is for kind = \"webhook\"; an ntfy target takes `token_env` for an access token",
                    ));
                }
                let topic = t.topic.unwrap_or_default();
                if topic.is_empty()
                    || topic.len() > 64
                    || !topic
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                {
                    return Err(invalid(
                        origin,
                        &at("topic"),
                        format!("is `{topic}`; write the ntfy topic (1-64 letters, digits, - and _; hard to guess on a public server)"),
                    ));
                }
                let explicit = t.token_env.is_some();
                let (token, var) = read_secret("token_env", t.token_env, "TOKEN")?;
                if explicit && token.is_none() {
                    return Err(invalid(
                        origin,
                        &at("token_env"),
                        format!("names {var}, which is not set; put the ntfy access token in it, or drop token_env for a public topic"),
                    ));
                }
                let shown = token.is_some().then_some(var);
                (
                    NotifyKind::Ntfy {
                        url,
                        topic,
                        token: token.map(Secret),
                    },
                    shown,
                )
            }
            Some(other) => {
                return Err(invalid(
                    origin,
                    &at("kind"),
                    format!("is `{other}`; write \"webhook\" or \"ntfy\""),
                ))
            }
            None => {
                return Err(invalid(
                    origin,
                    &at("kind"),
                    "is missing; write \"webhook\" or \"ntfy\"",
                ))
            }
        };
        let person = t.person.map(|p| p.trim().to_owned());
        if person.as_deref() == Some("") {
            return Err(invalid(
                origin,
                &at("person"),
                "is empty; name the person this target reaches (decisions made with its links are recorded as them), or drop it for news without links",
            ));
        }
        let events = match t.events {
            None => NotifyEvent::ALL.to_vec(),
            Some(list) => {
                let mut events = Vec::new();
                for e in &list {
                    let Some(found) = NotifyEvent::ALL.iter().find(|k| k.as_str() == e) else {
                        return Err(invalid(
                            origin,
                            &at("events"),
                            format!("has `{e}`; choose from \"approval\", \"done\", \"failed\", \"blocked\""),
                        ));
                    };
                    events.push(*found);
                }
                events.sort();
                events.dedup();
                events
            }
        };
        targets.push(NotifyTarget {
            name,
            kind,
            person,
            events,
            secret_env,
        });
    }
    Ok((targets, secret_vars))
}
