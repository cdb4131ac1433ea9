//! What an agent session that must stay local gets, and never gets
//! ([`crate::StartOptions::local_only`]: a role of a `local-only` or `masked` project).
//! gaffer already builds each agent's environment from an allowlist; for such a session
//! it also leaves out every setting of its own that would send the agent to another
//! provider than the endpoint its privacy check read, pins that endpoint against the
//! agent's settings files, and turns off what the agent would send its vendor besides
//! the model's requests (telemetry, error reports, update checks).

use std::collections::BTreeMap;

use serde_json::json;

/// Claude Code's switches to another provider than its base URL, each with the
/// variable of that provider's base URL. A session that must stay local never gets
/// them ([`CLAUDE_WITHHELD`]); elsewhere gaffer's privacy check reads them.
pub const CLAUDE_PROVIDER_SWITCHES: &[(&str, &str)] = &[
    ("CLAUDE_CODE_USE_BEDROCK", "ANTHROPIC_BEDROCK_BASE_URL"),
    ("CLAUDE_CODE_USE_VERTEX", "ANTHROPIC_VERTEX_BASE_URL"),
    ("CLAUDE_CODE_USE_FOUNDRY", "ANTHROPIC_FOUNDRY_BASE_URL"),
];

/// What a session that must stay local ([`crate::StartOptions::local_only`]) never gets of
/// gaffer's environment, though [`crate::claude::PASSED_ENV`] or `[agents] env` would pass it: the
/// switches to Amazon Bedrock, Google Vertex AI and Microsoft Foundry with their
/// settings, and the AWS and Google Cloud credentials they log in with.
pub const CLAUDE_WITHHELD: &[&str] = &[
    "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_USE_VERTEX",
    "CLAUDE_CODE_USE_FOUNDRY",
    "CLAUDE_CODE_SKIP_BEDROCK_AUTH",
    "CLAUDE_CODE_SKIP_VERTEX_AUTH",
    "CLAUDE_CODE_SKIP_FOUNDRY_AUTH",
    "ANTHROPIC_BEDROCK_BASE_URL",
    "ANTHROPIC_VERTEX_BASE_URL",
    "ANTHROPIC_VERTEX_PROJECT_ID",
    "ANTHROPIC_FOUNDRY_*",
    "VERTEX_REGION_*",
    "CLOUD_ML_REGION",
    "AWS_*",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "GOOGLE_CLOUD_PROJECT",
    "GCLOUD_PROJECT",
];

/// Set for a session that must stay local: nothing but the model's requests leaves it
/// (no telemetry, error reports, update checks, feedback or other non-essential
/// traffic to Anthropic), and each provider switch is off.
pub fn claude_env(base_url: Option<&str>) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = [
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
        "DISABLE_TELEMETRY",
        "DISABLE_ERROR_REPORTING",
        "DISABLE_AUTOUPDATER",
        "DISABLE_BUG_COMMAND",
    ]
    .into_iter()
    .map(|k| (k.to_owned(), "1".to_owned()))
    .chain(
        CLAUDE_PROVIDER_SWITCHES
            .iter()
            .map(|(switch, _)| (switch.to_string(), "0".to_owned())),
    )
    .collect();
    if let Some(url) = base_url {
        env.insert("ANTHROPIC_BASE_URL".into(), url.to_owned());
    }
    env
}

/// The arguments a session that must stay local gets on top of [`crate::claude::claude_args`]: only
/// the user's settings (gaffer's private copy) are read, not the worktree's
/// `.claude/settings*.json`, which an agent or the repository wrote; and settings given
/// on the command line, which win over the user's, pin the environment of
/// [`claude_env`] (the endpoint gaffer checked, every provider switch off, no
/// non-essential traffic), so no settings file's `env` can send the agent elsewhere.
pub fn claude_args(base_url: Option<&str>) -> Vec<String> {
    vec![
        "--setting-sources=user".into(),
        format!("--settings={}", json!({ "env": claude_env(base_url) })),
    ]
}

/// Configuration overrides (`-c key=value`, which win over `config.toml`) for a session
/// that must stay local ([`crate::StartOptions::local_only`]): nothing but the model's requests
/// leaves it — no analytics, feedback uploads, update check or OpenTelemetry export
/// (Codex's exporters include OpenAI's own `statsig`). Where the model is, Codex reads
/// from `model_provider` and `OPENAI_BASE_URL`, which gaffer's privacy check reads too.
pub const CODEX_CONFIG: &[&str] = &[
    "analytics.enabled=false",
    "feedback.enabled=false",
    "check_for_update_on_startup=false",
    "otel.exporter=\"none\"",
    "otel.trace_exporter=\"none\"",
    "otel.metrics_exporter=\"none\"",
];
