//! The real agent CLIs (Claude Code, Codex, Gemini CLI) installed from npm by
//! `scripts/agent-clis/install`, and what each needs to talk to the [`ModelServer`]
//! instead of its provider — and to nothing else on the internet.
//!
//! [`CliHome::new`] makes a throwaway `$HOME` holding the CLI's own settings (Codex's
//! `config.toml` with a `model_providers` entry, Gemini CLI's `settings.json`) and the
//! environment that points the CLI at the server, with telemetry, error reporting and
//! update checks off by each CLI's documented switches.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::model::ModelServer;

/// Env var naming the install directory (what `scripts/agent-clis/install` prints).
pub const DIR_ENV: &str = "GAFFER_AGENT_CLIS";
/// The API key every CLI is given; the model server only checks one is sent.
pub const TEST_API_KEY: &str = "test-key-not-secret";

/// One of the agent CLIs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cli {
    /// `@anthropic-ai/claude-code`: `claude`.
    Claude,
    /// `@openai/codex`: `codex`.
    Codex,
    /// `@google/gemini-cli`: `gemini`.
    Gemini,
}

impl Cli {
    /// The executable's name.
    pub fn exe(self) -> &'static str {
        match self {
            Cli::Claude => "claude",
            Cli::Codex => "codex",
            Cli::Gemini => "gemini",
        }
    }

    /// The `GAFFER_*_BIN` variable gaffer reads for it.
    pub fn bin_env(self) -> &'static str {
        match self {
            Cli::Claude => "GAFFER_CLAUDE_BIN",
            Cli::Codex => "GAFFER_CODEX_BIN",
            Cli::Gemini => "GAFFER_GEMINI_BIN",
        }
    }

    /// gaffer's name for the agent (`[roles.*] agent`).
    pub fn agent(self) -> &'static str {
        match self {
            Cli::Claude => "claude",
            Cli::Codex => "codex",
            Cli::Gemini => "gemini",
        }
    }

    /// Path of the installed executable. Panics, saying how to install, when missing.
    pub fn bin(self) -> PathBuf {
        match install_dir() {
            Ok(dir) => dir.join("node_modules").join(".bin").join(self.exe()),
            Err(e) => panic!("{e}"),
        }
    }
}

fn scripts_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/agent-clis")
}

/// Where `scripts/agent-clis/install` put the pinned CLIs: `GAFFER_AGENT_CLIS`, else the
/// cache directory it uses for the current pins.
pub fn install_dir() -> Result<PathBuf, String> {
    let dir = match std::env::var(DIR_ENV) {
        Ok(d) if !d.is_empty() => PathBuf::from(d),
        _ => default_dir()?,
    };
    if dir.join(".installed").is_file() {
        Ok(dir)
    } else {
        Err(format!(
            "the agent CLIs are not installed at {}: run scripts/agent-clis/install (scripts/test does)",
            dir.display()
        ))
    }
}

/// The cache directory of the pinned set, as the install script names it: the first 16
/// hex digits of the SHA-256 of `package.json` followed by `package-lock.json`.
fn default_dir() -> Result<PathBuf, String> {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for f in ["package.json", "package-lock.json"] {
        let p = scripts_dir().join(f);
        h.update(std::fs::read(&p).map_err(|e| format!("reading {}: {e}", p.display()))?);
    }
    let hash: String = h
        .finalize()
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect();
    let cache = match std::env::var("GAFFER_AGENT_CLIS_CACHE") {
        Ok(c) if !c.is_empty() => PathBuf::from(c),
        _ => match std::env::var("XDG_CACHE_HOME") {
            Ok(c) if !c.is_empty() => PathBuf::from(c),
            _ => {
                PathBuf::from(std::env::var("HOME").map_err(|_| "HOME is not set")?).join(".cache")
            }
        }
        .join("gaffer/agent-clis"),
    };
    Ok(cache.join(hash))
}

/// A throwaway home for one CLI, set up to use a [`ModelServer`].
pub struct CliHome {
    /// The CLI.
    pub cli: Cli,
    /// `$HOME` for the CLI (its state dirs live below: `.claude`, `.codex`, `.gemini`).
    pub home: PathBuf,
    /// The environment to start it with (on top of a plain `PATH`).
    pub env: BTreeMap<String, String>,
    _dir: tempfile::TempDir,
}

impl CliHome {
    /// A new home for `cli` talking to `server`, whose model is `model` (Codex's
    /// `config.toml` and Gemini CLI's settings name it; Claude Code takes `--model`).
    pub fn new(cli: Cli, server: &ModelServer, model: &str) -> std::io::Result<Self> {
        let dir = tempfile::tempdir()?;
        let home = dir.path().canonicalize()?;
        let mut env = BTreeMap::new();
        env.insert("HOME".into(), home.display().to_string());
        let mut set = |k: &str, v: &str| {
            env.insert(k.into(), v.into());
        };
        // Whatever a CLI would fetch from the internet goes to the model server instead
        // (as a proxy request it refuses and records: [`ModelServer::strays`]), so a test
        // sees it rather than the network.
        for var in [
            "HTTPS_PROXY",
            "https_proxy",
            "HTTP_PROXY",
            "http_proxy",
            "ALL_PROXY",
        ] {
            set(var, &server.base_url());
        }
        set("NO_PROXY", "127.0.0.1,localhost");
        set("no_proxy", "127.0.0.1,localhost");
        match cli {
            Cli::Claude => {
                set("ANTHROPIC_BASE_URL", &server.base_url());
                set("ANTHROPIC_API_KEY", TEST_API_KEY);
                // Claude Code's side questions go to the "small fast" model: name it,
                // so they are told apart from the role's own requests.
                set("ANTHROPIC_SMALL_FAST_MODEL", "scripted-small");
                set("ANTHROPIC_DEFAULT_HAIKU_MODEL", "scripted-small");
                // Documented switches: no telemetry, error reports, update checks or
                // other non-essential traffic.
                set("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
                set("DISABLE_TELEMETRY", "1");
                set("DISABLE_ERROR_REPORTING", "1");
                set("DISABLE_AUTOUPDATER", "1");
                set("DISABLE_BUG_COMMAND", "1");
            }
            Cli::Codex => {
                let codex_home = home.join(".codex");
                std::fs::create_dir_all(&codex_home)?;
                std::fs::write(codex_home.join("config.toml"), codex_config(server, model))?;
                set("CODEX_HOME", &codex_home.display().to_string());
                set("SCRIPTED_MODEL_API_KEY", TEST_API_KEY);
            }
            Cli::Gemini => {
                let gemini = home.join(".gemini");
                std::fs::create_dir_all(&gemini)?;
                std::fs::write(
                    gemini.join("settings.json"),
                    gemini_settings(model).to_string(),
                )?;
                set("GEMINI_API_KEY", TEST_API_KEY);
                set("GOOGLE_GEMINI_BASE_URL", &server.base_url());
                // Run in this process; the relaunch only raises the heap limit.
                set("GEMINI_CLI_NO_RELAUNCH", "true");
            }
        }
        Ok(CliHome {
            cli,
            home,
            env,
            _dir: dir,
        })
    }
}

impl CliHome {
    /// Claude Code logged in through a Claude gateway instead of with an API key: its
    /// `ANTHROPIC_AUTH_TOKEN` is a token for the audience `claude-gateway` (unsigned:
    /// Claude Code only reads its claims, the model server checks nothing). Claude Code
    /// 2.1.332 reads a 429's `anthropic-ratelimit-unified-*` headers — and then says
    /// "You've hit your 5-hour limit", emits a `rate_limit_event` and reports
    /// `api_error: "usage_limit_reached"` — only for a claude.ai subscription login or
    /// such a gateway (`extractQuotaStatusFromError` returns early unless
    /// `isClaudeAISubscriber() || gateway`, the gateway being `ANTHROPIC_BASE_URL` not
    /// api.anthropic.com and a token whose `aud` has `claude-gateway`); with an API key
    /// it prints the bare "API Error: Request rejected (429)".
    pub fn claude_gateway_login(mut self) -> Self {
        use base64::Engine as _;
        let part = |v: serde_json::Value| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
        };
        let token = format!(
            "{}.{}.unsigned",
            part(serde_json::json!({"alg": "none", "typ": "JWT"})),
            part(
                serde_json::json!({"aud": "claude-gateway", "sub": "tester", "exp": 4_102_444_800u64})
            )
        );
        self.env.remove("ANTHROPIC_API_KEY");
        self.env.insert("ANTHROPIC_AUTH_TOKEN".into(), token);
        self
    }
}

/// Codex's `config.toml`: the model server as the only provider, over the Responses API
/// and plain HTTP, no retries (a scripted reply is used once), and no analytics,
/// feedback, update check, plugin sync or app connectors.
pub fn codex_config(server: &ModelServer, model: &str) -> String {
    format!(
        r#"model = "{model}"
model_provider = "scripted"
check_for_update_on_startup = false

[model_providers.scripted]
name = "scripted model server"
base_url = "{base}"
wire_api = "responses"
env_key = "SCRIPTED_MODEL_API_KEY"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false

# No plugin marketplace sync (a git clone from the internet) or app connectors.
[features]
plugins = false
remote_plugin = false
apps = false

[feedback]
enabled = false
"#,
        base = server.openai_base()
    )
}

/// Gemini CLI's `settings.json`: API-key auth, the model, and no usage statistics,
/// telemetry or update checks.
pub fn gemini_settings(model: &str) -> serde_json::Value {
    serde_json::json!({
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "model": {"name": model},
        "privacy": {"usageStatisticsEnabled": false},
        "telemetry": {"enabled": false},
        "general": {"disableAutoUpdate": true, "disableUpdateNag": true},
    })
}
