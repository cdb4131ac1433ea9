//! Which backend plays a role: the name in config or `--agent` → a running backend.

use gaffer_agents::acp::{AcpBackend, AcpConfig};
use gaffer_agents::claude::{ClaudeBackend, ClaudeConfig};
use gaffer_agents::codex::{CodexBackend, CodexConfig};
use gaffer_agents::llm::ProviderConfig;
use gaffer_agents::toolloop::{BuiltinBackend, BuiltinConfig};
use gaffer_agents::{find_executable, AgentBackend, Redactor};
use std::sync::Arc;

/// Model the built-in agent uses when the role names none.
pub const DEFAULT_OPENAI_MODEL: &str = "gpt-4.1-mini";
/// Model the built-in agent uses with Anthropic when the role names none.
pub const DEFAULT_ANTHROPIC_MODEL: &str = "claude-sonnet-4-5";

/// Makes backends by name. Tests can supply their own.
pub trait AgentFactory: Send + Sync {
    /// The backend for `agent` (`claude`, `codex`, `gemini`, `acp:<name>`, `openai`,
    /// `anthropic`) with `model` if given; an error says what is missing.
    fn backend(&self, agent: &str, model: Option<&str>) -> Result<Arc<dyn AgentBackend>, String>;
}

/// The real backends, with one redactor for all of them.
pub struct Backends {
    redactor: Arc<Redactor>,
}

impl Backends {
    /// Backends that redact `redactor`'s secrets from everything they emit.
    pub fn new(redactor: Arc<Redactor>) -> Self {
        Self { redactor }
    }
}

impl AgentFactory for Backends {
    fn backend(&self, agent: &str, model: Option<&str>) -> Result<Arc<dyn AgentBackend>, String> {
        let redactor = self.redactor.clone();
        Ok(match agent {
            "claude" => Arc::new(ClaudeBackend::new(ClaudeConfig {
                redactor,
                ..ClaudeConfig::default()
            })),
            "codex" => Arc::new(CodexBackend::new(CodexConfig {
                redactor,
                ..CodexConfig::default()
            })),
            "gemini" => {
                let mut cfg = AcpConfig::gemini();
                cfg.redactor = redactor;
                Arc::new(AcpBackend::new(cfg))
            }
            "openai" | "anthropic" => {
                let provider = if agent == "openai" {
                    ProviderConfig::openai_from_env(model.unwrap_or(DEFAULT_OPENAI_MODEL))
                } else {
                    ProviderConfig::anthropic_from_env(model.unwrap_or(DEFAULT_ANTHROPIC_MODEL))
                };
                if provider.api_key.is_none() && agent == "anthropic" {
                    return Err("ANTHROPIC_API_KEY is not set; export it or pick another --agent".into());
                }
                let mut cfg = BuiltinConfig::new(provider);
                cfg.redactor = redactor;
                Arc::new(BuiltinBackend::new(cfg))
            }
            other => match other.strip_prefix("acp:") {
                Some(name) if !name.is_empty() => {
                    let var = format!("GAFFER_{}_BIN", name.to_ascii_uppercase().replace('-', "_"));
                    let bin = find_executable(&var, name).map_err(|e| {
                        format!("ACP agent `{name}`: {e}; put it on PATH or set {var}")
                    })?;
                    let mut cfg = AcpConfig::command(name, bin, Vec::new());
                    cfg.redactor = redactor;
                    Arc::new(AcpBackend::new(cfg))
                }
                _ => {
                    return Err(format!(
                        "unknown agent `{other}`; use claude, codex, gemini, acp:<name>, openai or anthropic"
                    ))
                }
            },
        })
    }
}
