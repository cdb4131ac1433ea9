//! Which backend plays a role: the name in config or `--agent` → a running backend.

use gaffer_agents::accounting::{PriceTable, Pricing};
use gaffer_agents::acp::{AcpBackend, AcpConfig};
use gaffer_agents::claude::{ClaudeBackend, ClaudeConfig};
use gaffer_agents::codex::{CodexBackend, CodexConfig};
use gaffer_agents::llm::ProviderConfig;
use gaffer_agents::ratelimit::{CounterStore, Limiters, MemoryCounterStore, RateLimits};
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
    /// `anthropic`) with `model` and reasoning `effort` if given; an error says what
    /// is missing.
    fn backend(
        &self,
        agent: &str,
        model: Option<&str>,
        effort: Option<&str>,
    ) -> Result<Arc<dyn AgentBackend>, String>;

    /// Whether `agent` can start here at all (its executable installed, its API key
    /// set), checked before a task is stored; the error names the missing binary or
    /// variable and what to do. By default: whether [`AgentFactory::backend`] can
    /// make it.
    fn ready(&self, agent: &str) -> Result<(), String> {
        self.backend(agent, None, None).map(|_| ())
    }
}

/// An agent CLI gaffer drives: its executable, the variable naming another one,
/// and how to install it.
pub struct AgentCli {
    /// The agent's name in config and `--agent`.
    pub agent: &'static str,
    /// The executable looked up on `PATH`.
    pub bin: &'static str,
    /// The variable that names the executable instead.
    pub env_var: &'static str,
    /// How to install it.
    pub install: &'static str,
}

/// The agent CLIs, for `gaffer doctor` and the checks before a run.
pub const AGENT_CLIS: [AgentCli; 3] = [
    AgentCli {
        agent: "claude",
        bin: "claude",
        env_var: "GAFFER_CLAUDE_BIN",
        install: "npm install -g @anthropic-ai/claude-code",
    },
    AgentCli {
        agent: "codex",
        bin: "codex",
        env_var: "GAFFER_CODEX_BIN",
        install: "npm install -g @openai/codex",
    },
    AgentCli {
        agent: "gemini",
        bin: "gemini",
        env_var: "GAFFER_GEMINI_BIN",
        install: "npm install -g @google/gemini-cli",
    },
];

/// The executable of an agent CLI, or why there is none (naming the variable and
/// the install command). A name in the variable is looked up on `PATH`.
pub fn agent_cli_path(cli: &AgentCli) -> Result<std::path::PathBuf, String> {
    let path = find_executable(cli.env_var, cli.bin).map_err(|_| {
        format!(
            "`{}` is not installed: it is not on PATH and {} is not set; install it with `{}` or set {} to its executable",
            cli.bin, cli.env_var, cli.install, cli.env_var
        )
    })?;
    // A bare name in the variable is looked up on PATH when the agent starts.
    let found = if path.components().count() > 1 {
        path.is_file()
    } else {
        find_executable("", &path.to_string_lossy()).is_ok()
    };
    if found {
        Ok(path)
    } else {
        Err(format!(
            "{} names {}, which is not an executable file; point it at `{}` or unset it to search PATH",
            cli.env_var,
            path.display(),
            cli.bin
        ))
    }
}

/// Whether the built-in agent `agent` (`openai`, `anthropic`) has what it needs: an
/// API key, or for OpenAI a base URL of a server that needs none.
pub fn api_key_ready(agent: &str) -> Result<(), String> {
    let set = |var: &str| std::env::var(var).is_ok_and(|v| !v.trim().is_empty());
    match agent {
        "openai" if !set("OPENAI_API_KEY") && !set("OPENAI_BASE_URL") => Err(
            "OPENAI_API_KEY is not set; export OPENAI_API_KEY=… (or OPENAI_BASE_URL for an OpenAI-compatible server that needs no key), or pick another agent".into(),
        ),
        "anthropic" if !set("ANTHROPIC_API_KEY") => Err(
            "ANTHROPIC_API_KEY is not set; export ANTHROPIC_API_KEY=… or pick another agent".into(),
        ),
        _ => Ok(()),
    }
}

/// How a role's `effort` reaches Claude Code: its thinking budget, by environment.
pub fn claude_thinking_tokens(effort: &str) -> Option<String> {
    match effort {
        "low" => Some("4000".into()),
        "medium" => Some("10000".into()),
        "high" => Some("31999".into()),
        n if n.parse::<u32>().is_ok() => Some(n.into()),
        _ => None,
    }
}

/// Requests per day persisted in the journal's database, so a limit holds across
/// restarts and across every gaffer process sharing the database.
pub struct JournalCounters(pub Arc<dyn gaffer_store::Journal>);

#[async_trait::async_trait]
impl CounterStore for JournalCounters {
    async fn get(&self, key: &str, day: &str) -> gaffer_agents::Result<u64> {
        self.0
            .counter_get(key, day)
            .await
            .map_err(|e| gaffer_agents::AgentError::Counters(e.to_string()))
    }

    async fn add(&self, key: &str, day: &str, by: u64) -> gaffer_agents::Result<u64> {
        self.0
            .counter_add(key, day, by)
            .await
            .map_err(|e| gaffer_agents::AgentError::Counters(e.to_string()))
    }
}

/// The agents' sandbox as the config says: `[sandbox]` mode, network, extra writable
/// and readable paths; gaffer's own listen port closed to agents; its data dir and
/// config file (and `protected`, such as the policy file) never readable.
pub fn sandbox_from_config(
    c: &gaffer_config::Config,
    protected: &[std::path::PathBuf],
) -> gaffer_agents::sandbox::Sandbox {
    use gaffer_agents::sandbox::{Sandbox, SandboxMode};
    let mut guarded = vec![c.data_dir.clone()];
    guarded.extend(c.source.iter().cloned());
    guarded.extend(protected.iter().cloned());
    Sandbox {
        mode: match c.sandbox.mode {
            gaffer_config::SandboxMode::Auto => SandboxMode::Auto,
            gaffer_config::SandboxMode::Required => SandboxMode::Required,
            gaffer_config::SandboxMode::Off => SandboxMode::Off,
        },
        network: c.sandbox.network,
        writable: c.sandbox.writable.clone(),
        readable: c.sandbox.readable.clone(),
        private_ports: vec![c.listen.port()],
        protected: guarded,
    }
}

/// The list prices with `[prices]` of `config` over them.
pub fn prices_from_config(config: &gaffer_config::Config) -> PriceTable {
    PriceTable::list_prices().with(config.prices.iter().map(|(model, p)| {
        (
            model.clone(),
            Pricing {
                input_per_mtok: p.input,
                output_per_mtok: p.output,
                cached_input_per_mtok: p.cached_input,
            },
        )
    }))
}

/// The real backends, with one redactor and one set of rate limiters for all of them.
pub struct Backends {
    redactor: Arc<Redactor>,
    limiters: Arc<Limiters>,
    claude_bin: Option<std::path::PathBuf>,
    codex_bin: Option<std::path::PathBuf>,
    acp_agents: std::collections::BTreeMap<String, gaffer_config::AcpAgentConfig>,
    prices: PriceTable,
}

impl Backends {
    /// Backends that redact `redactor`'s secrets from everything they emit; executables
    /// come from `GAFFER_*_BIN` or `PATH`. Rate limits are the defaults, counted in
    /// memory until [`Backends::with_rate_limits`].
    pub fn new(redactor: Arc<Redactor>) -> Self {
        Self {
            redactor,
            limiters: Arc::new(Limiters::new(
                Arc::new(MemoryCounterStore::default()),
                RateLimits::default(),
            )),
            claude_bin: None,
            codex_bin: None,
            acp_agents: Default::default(),
            prices: PriceTable::list_prices(),
        }
    }

    /// Use these executables for Claude Code and Codex instead of looking them up.
    pub fn with_bins(
        mut self,
        claude: Option<std::path::PathBuf>,
        codex: Option<std::path::PathBuf>,
    ) -> Self {
        self.claude_bin = claude;
        self.codex_bin = codex;
        self
    }

    /// The ACP agents `[agents.acp.<name>]` declares: the only ones `acp:<name>` starts.
    pub fn with_acp_agents(
        mut self,
        agents: std::collections::BTreeMap<String, gaffer_config::AcpAgentConfig>,
    ) -> Self {
        self.acp_agents = agents;
        self
    }

    /// Price the models' tokens with `prices` (`[prices]` over the list prices): turns
    /// of agents that report tokens but no money get their cost from it.
    pub fn with_prices(mut self, prices: PriceTable) -> Self {
        self.prices = prices;
        self
    }

    /// Limit the built-in agent's model calls per provider + model with `limits`,
    /// shared by every session of this process and counted in `counters`.
    pub fn with_rate_limits(mut self, counters: Arc<dyn CounterStore>, limits: RateLimits) -> Self {
        self.limiters = Arc::new(Limiters::new(counters, limits));
        self
    }
}

/// Whether `agent` can start on this machine as far as the machine goes: an
/// agent CLI's executable, the built-in agent's API key. The error says what is
/// missing and what to do. (An ACP agent is checked against its declaration by
/// [`AgentFactory::ready`].)
pub fn agent_ready(agent: &str) -> Result<(), String> {
    match AGENT_CLIS.iter().find(|c| c.agent == agent) {
        Some(cli) => agent_cli_path(cli).map(|_| ()),
        None => api_key_ready(agent),
    }
}

impl AgentFactory for Backends {
    fn ready(&self, agent: &str) -> Result<(), String> {
        let given = match agent {
            "claude" => self.claude_bin.is_some(),
            "codex" => self.codex_bin.is_some(),
            _ => false,
        };
        if !given {
            agent_ready(agent)?;
        }
        self.backend(agent, None, None).map(|_| ())
    }

    fn backend(
        &self,
        agent: &str,
        model: Option<&str>,
        effort: Option<&str>,
    ) -> Result<Arc<dyn AgentBackend>, String> {
        let redactor = self.redactor.clone();
        Ok(match agent {
            // Claude Code's effort is its thinking budget, set per session (StartOptions.env).
            "claude" => Arc::new(ClaudeBackend::new(ClaudeConfig {
                bin: self.claude_bin.clone(),
                redactor,
                prices: self.prices.clone(),
                ..ClaudeConfig::default()
            })),
            "codex" => Arc::new(CodexBackend::new(CodexConfig {
                bin: self.codex_bin.clone(),
                // `-c` overrides Codex's own config for this process.
                args: effort.map(|e| {
                    vec!["-c".into(), format!("model_reasoning_effort={e}"), "app-server".into()]
                }),
                redactor,
                prices: self.prices.clone(),
            })),
            "gemini" => {
                let mut cfg = AcpConfig::gemini();
                cfg.redactor = redactor;
                cfg.prices = self.prices.clone();
                Arc::new(AcpBackend::new(cfg))
            }
            "openai" | "anthropic" => {
                let mut provider = if agent == "openai" {
                    ProviderConfig::openai_from_env(model.unwrap_or(DEFAULT_OPENAI_MODEL))
                } else {
                    ProviderConfig::anthropic_from_env(model.unwrap_or(DEFAULT_ANTHROPIC_MODEL))
                };
                if provider.api_key.is_none() && agent == "anthropic" {
                    return Err("ANTHROPIC_API_KEY is not set; export it or pick another --agent".into());
                }
                if provider.pricing.is_none() {
                    provider.pricing = self.prices.price(&provider.model).copied();
                }
                let limiter = self.limiters.get(&provider.name, &provider.model);
                let mut cfg = BuiltinConfig::new(provider);
                cfg.redactor = redactor;
                cfg.limiter = limiter;
                Arc::new(BuiltinBackend::new(cfg))
            }
            other => match other.strip_prefix("acp:") {
                Some(name) => {
                    let Some(declared) = self.acp_agents.get(name) else {
                        return Err(format!(
                            "agent `{other}` {}",
                            gaffer_config::undeclared_acp(name, self.acp_agents.keys())
                        ));
                    };
                    let var = format!("GAFFER_{}_BIN", name.to_ascii_uppercase().replace(['-', '.'], "_"));
                    let bin = find_executable(&var, &declared.command).map_err(|e| {
                        format!("ACP agent `{name}`: {e}; fix [agents.acp.{name}] command or set {var}")
                    })?;
                    let mut cfg = AcpConfig::command(name, bin, declared.args.clone());
                    cfg.state_dirs = declared.state_dirs.clone();
                    cfg.env = declared.env.clone();
                    cfg.redactor = redactor;
                    cfg.prices = self.prices.clone();
                    Arc::new(AcpBackend::new(cfg))
                }
                None => {
                    return Err(format!(
                        "unknown agent `{other}`; use claude, codex, gemini, acp:<name>, openai or anthropic"
                    ))
                }
            },
        })
    }
}
