//! `[projects.<name>.intake]`: forge issues that become tasks by themselves.
//!
//! ```toml
//! [projects.web.intake]
//! label = "gaffer"               # issues with this label (default "gaffer")
//! assignee = "gaffer-bot"        # and issues assigned to this user (optional)
//! secret_env = "GAFFER_WEB_HOOK_SECRET"  # the webhook secret's variable (optional)
//! poll_interval = "1m"           # polling; default "1m" without a webhook, "off" with one
//! ```
//!
//! The project must have a `[projects.<name>.forge]`: issues are read and answered
//! through it. Environment overrides: `GAFFER_PROJECT_<NAME>_INTAKE_LABEL`,
//! `…_INTAKE_ASSIGNEE`, `…_INTAKE_POLL_INTERVAL`.

use crate::{invalid, overlay, project_env_var, ConfigError, Sources};
use serde::Deserialize;
use std::time::Duration;

/// The label looked for when none is configured.
pub const DEFAULT_INTAKE_LABEL: &str = "gaffer";
/// How often the forge is asked when no webhook is configured and no interval is.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(60);
/// The shortest poll interval: a forge's rate limit is shared with everything else.
pub const MIN_POLL_INTERVAL: Duration = Duration::from_secs(10);

/// One project's issue intake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntakeSettings {
    /// Issues carrying this label become tasks.
    pub label: String,
    /// Issues assigned to this user (the bot's login) become tasks too.
    pub assignee: Option<String>,
    /// The NAME of the environment variable holding the webhook secret; `None`: no
    /// webhook for this project (`POST /api/hooks/{forge}` refuses its deliveries).
    pub secret_env: Option<String>,
    /// How often the forge's open issues are listed; `None`: never (the webhook
    /// brings them).
    pub poll_interval: Option<Duration>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawIntake {
    label: Option<String>,
    assignee: Option<String>,
    secret_env: Option<String>,
    poll_interval: Option<String>,
}

/// Resolve `[projects.<project>.intake]`; `has_forge`: whether the project has a forge.
pub(crate) fn resolve(
    origin: &str,
    sources: &Sources<'_>,
    project: &str,
    has_forge: bool,
    raw: RawIntake,
) -> Result<IntakeSettings, ConfigError> {
    let field = |k: &str| format!("projects.{project}.intake.{k}");
    if !has_forge {
        return Err(invalid(
            origin,
            &format!("projects.{project}.intake"),
            format!("needs the project's forge to read issues from: add [projects.{project}.forge] (kind, base_url, token_env)"),
        ));
    }
    let (label, from) = overlay(
        sources,
        &project_env_var(project, "INTAKE_LABEL"),
        raw.label,
        origin,
    );
    let label = label.unwrap_or_else(|| DEFAULT_INTAKE_LABEL.to_owned());
    let label = label.trim();
    if label.is_empty()
        || label.len() > 100
        || label.contains(',')
        || label.chars().any(char::is_control)
    {
        return Err(invalid(
            &from,
            &field("label"),
            format!("is `{label}`; write one label name (no commas, at most 100 characters), like \"gaffer\""),
        ));
    }
    let (assignee, from) = overlay(
        sources,
        &project_env_var(project, "INTAKE_ASSIGNEE"),
        raw.assignee,
        origin,
    );
    let assignee = assignee.map(|a| a.trim().to_owned());
    if let Some(a) = &assignee {
        let login = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
        if a.is_empty() || a.len() > 255 || !a.chars().all(login) {
            return Err(invalid(
                &from,
                &field("assignee"),
                format!("is `{a}`; write the bot user's login (letters, digits, -, _ and .), like \"gaffer-bot\""),
            ));
        }
    }
    let secret_env = raw.secret_env.map(|s| s.trim().to_owned());
    if let Some(s) = &secret_env {
        if s.is_empty() || !s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(invalid(
                origin,
                &field("secret_env"),
                // The value is not shown: it may be the secret pasted in by mistake.
                "must name the environment variable that holds the webhook secret (letters, digits and _, like \"GAFFER_WEB_HOOK_SECRET\"), not the secret itself",
            ));
        }
    }
    let (interval, from) = overlay(
        sources,
        &project_env_var(project, "INTAKE_POLL_INTERVAL"),
        raw.poll_interval,
        origin,
    );
    let poll_interval = match interval.as_deref().map(str::trim) {
        None if secret_env.is_some() => None,
        None => Some(DEFAULT_POLL_INTERVAL),
        Some("off") => None,
        Some(text) => match crate::parse_duration(text) {
            Some(d) if d >= MIN_POLL_INTERVAL => Some(d),
            _ => {
                return Err(invalid(
                    &from,
                    &field("poll_interval"),
                    format!(
                        "is `{text}`; write a duration of at least {}s like \"1m\" or \"90s\", or \"off\"",
                        MIN_POLL_INTERVAL.as_secs()
                    ),
                ))
            }
        },
    };
    if secret_env.is_none() && poll_interval.is_none() {
        return Err(invalid(
            &from,
            &field("poll_interval"),
            "is \"off\" and no secret_env is set: no issue would ever arrive; set secret_env for a webhook, or a poll interval",
        ));
    }
    Ok(IntakeSettings {
        label: label.to_owned(),
        assignee,
        secret_env,
        poll_interval,
    })
}
