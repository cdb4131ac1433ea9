//! gaffer's configuration: one TOML file, environment overrides, one resolved [`Config`].
//!
//! The commented template ([`TEMPLATE`]) is the reference: `gaffer init` writes it,
//! the README quotes it, and a test checks that its commented values are the
//! defaults. Loading never reads the process environment directly; callers pass
//! a lookup function so tests stay hermetic.

use serde::Deserialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

mod conflict;
mod intake;
mod notify;
mod privacy;
mod schedules;
mod setup;
mod supervision;
pub use conflict::ConflictStrategy;
pub use intake::{IntakeSettings, DEFAULT_INTAKE_LABEL, DEFAULT_POLL_INTERVAL, MIN_POLL_INTERVAL};
pub use notify::{notify_env_var, NotifyEvent, NotifyKind, NotifyTarget, Secret};
pub use privacy::{Network, Privacy};
pub use schedules::{
    parse_cron, slot_text, BadScheduleField, Missed, Schedule, ScheduleSpec, MAX_SCHEDULE_NAME,
};
pub use setup::WorktreeSetup;
pub use supervision::{parse_duration, Budget, Watchdog};

/// The commented configuration file `gaffer init` writes.
pub const TEMPLATE: &str = include_str!("default.toml");

/// What went wrong with the configuration. Every variant names the file or
/// variable and the field, and the CLI exits 78 for all of them.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file named by `--config` / `GAFFER_CONFIG` is not there.
    #[error("config file {path} does not exist; create it with `gaffer init --config {path}` or drop --config to use the default location")]
    Missing {
        /// The file.
        path: PathBuf,
    },
    /// The file exists but cannot be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid TOML, or a key is unknown or of the wrong type.
    #[error("{path}:{line}:{column}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What the parser said.
        message: String,
    },
    /// A value parsed but makes no sense.
    #[error("{origin}: `{field}` {message}")]
    Invalid {
        /// The file or environment variable it came from.
        origin: String,
        /// The dotted key.
        field: String,
        /// What is wrong and what to write instead.
        message: String,
    },
}

/// How hard a journal commit waits for the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Durability {
    /// fsync every commit.
    #[default]
    Full,
    /// Survive a process crash only.
    Normal,
}

/// Whether agent processes run in the kernel sandbox (Landlock).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SandboxMode {
    /// Confine when the kernel can; warn and run unconfined when it cannot.
    #[default]
    Auto,
    /// Confine, or refuse to start the agent.
    Required,
    /// Never confine.
    Off,
}

/// `[sandbox]`: how agent processes are confined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxConfig {
    /// Whether to confine.
    pub mode: SandboxMode,
    /// `false` (`network = "off"`): agent commands get no TCP bind/connect.
    pub network: bool,
    /// Extra directories every agent may write (build caches).
    pub writable: Vec<PathBuf>,
    /// Extra directories (or files) every agent and check may read, beyond the
    /// system and toolchain directories.
    pub readable: Vec<PathBuf>,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            mode: SandboxMode::Auto,
            network: true,
            writable: Vec::new(),
            readable: Vec::new(),
        }
    }
}

/// The agent and model for one role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleConfig {
    /// Backend: `claude`, `codex`, `gemini`, `acp:<name>`, `openai`, `anthropic`.
    pub agent: String,
    /// The agents that take the role over, in order, when `agent` is out of quota,
    /// rate-limited or down (`agent = ["claude", "codex"]`: `["codex"]`).
    pub fallback: Vec<String>,
    /// Model name passed to the backend.
    pub model: Option<String>,
    /// Reasoning effort passed to the backend.
    pub effort: Option<String>,
}

impl Default for RoleConfig {
    fn default() -> Self {
        Self {
            agent: "claude".into(),
            fallback: Vec::new(),
            model: None,
            effort: None,
        }
    }
}

impl RoleConfig {
    /// The role's agents in the order they are tried: `agent`, then its fallbacks.
    pub fn chain(&self) -> Vec<&str> {
        std::iter::once(self.agent.as_str())
            .chain(self.fallback.iter().map(String::as_str))
            .collect()
    }
}

/// `[agents] fallback_cooldown_secs`, `fallback_retry_after_secs`: when a role's agent
/// is out (see `RoleConfig::fallback`), how long before it is tried again, and how long
/// a rate limit's `retry-after` may be before the role moves on instead of waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FallbackConfig {
    /// An agent that was out is tried again this long after the switch (or at the
    /// reset time the agent named, when later). Default 900 (15 minutes).
    pub cooldown_secs: u64,
    /// A rate limit whose `retry-after` is longer than this moves the step to the
    /// next agent; a shorter one is waited out by the agent. Default 60.
    pub retry_after_secs: u64,
}

impl Default for FallbackConfig {
    fn default() -> Self {
        Self {
            cooldown_secs: 900,
            retry_after_secs: 60,
        }
    }
}

/// An Agent Client Protocol agent declared in `[agents.acp.<name>]`: a role may name it
/// `acp:<name>`; nothing else may (an undeclared name would run whatever executable of
/// that name is on `PATH`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcpAgentConfig {
    /// The executable: a name looked up on `PATH`, or an absolute path.
    pub command: String,
    /// Its arguments (for most agents whatever makes it speak ACP on stdio).
    pub args: Vec<String>,
    /// Where it keeps its own state (sessions, settings, logs): writable inside the
    /// sandbox. Absolute, `~/` expanded.
    pub state_dirs: Vec<PathBuf>,
    /// Environment variables it is started with (on top of what every agent gets).
    pub env: std::collections::BTreeMap<String, String>,
    /// `local = true`: its model runs on this machine or the private network, so a
    /// `local-only` or `masked` project may give it source.
    pub local: bool,
}

/// What one model's tokens cost, in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelPrice {
    /// Prompt tokens not served from a cache.
    pub input: f64,
    /// Completion tokens.
    pub output: f64,
    /// Prompt tokens served from a cache (default: `input`).
    pub cached_input: f64,
}

/// The roles: four always, the challenger when configured.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Roles {
    /// Breaks requests down.
    pub planner: RoleConfig,
    /// Writes the code.
    pub owner: RoleConfig,
    /// Reviews, read-only.
    pub reviewer: RoleConfig,
    /// Settles deadlocks.
    pub arbiter: RoleConfig,
    /// Challenges the plan before it is approved (`[roles.challenger]`); none: plans go
    /// to approval unchallenged.
    pub challenger: Option<Challenger>,
    /// Writes tests for the acceptance criteria once before review
    /// (`[roles.tester]`); none: the owner's work goes straight to review.
    pub tester: Option<RoleConfig>,
    /// Agents whose opinions the arbiter reads before it rules
    /// (`[roles.arbiter] panel`); none: the arbiter rules alone.
    pub panel: Option<Panel>,
}

/// `[roles.arbiter] panel`: each member gives its opinion in a fresh read-only
/// session, all in parallel, before the arbiter rules with every opinion in front of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Panel {
    /// In the order configured.
    pub members: Vec<PanelMember>,
    /// How long a member may take before it is recorded as failed (default 600).
    pub timeout_secs: u64,
}

/// Seconds a panel member may take unless `panel_timeout_secs` says otherwise.
pub const DEFAULT_PANEL_TIMEOUT_SECS: u64 = 600;

/// One member of the arbiter's panel: `agent[:model]` (`claude`, `codex:gpt-5-codex`,
/// `openai:gpt-4.1`, `acp:<name>:<model>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PanelMember {
    /// Backend, as a role's `agent`.
    pub agent: String,
    /// Model passed to the backend; none: the backend's default.
    pub model: Option<String>,
}

impl PanelMember {
    /// Read `agent[:model]`; the agent of `acp:<name>:<model>` is `acp:<name>`.
    pub fn parse(spec: &str) -> Result<Self, String> {
        let spec = spec.trim();
        let (agent, model) = match spec.strip_prefix("acp:") {
            Some(rest) => match rest.split_once(':') {
                Some((name, model)) => (format!("acp:{name}"), Some(model)),
                None => (spec.to_owned(), None),
            },
            None => match spec.split_once(':') {
                Some((agent, model)) => (agent.to_owned(), Some(model)),
                None => (spec.to_owned(), None),
            },
        };
        if agent.is_empty() || agent == "acp:" {
            return Err(format!(
                "has `{spec}`, which names no agent; write agent[:model], e.g. \"codex:gpt-5-codex\""
            ));
        }
        if model.is_some_and(|m| m.trim().is_empty()) {
            return Err(format!(
                "has `{spec}` with an empty model; write `{agent}` alone for its default model"
            ));
        }
        Ok(Self {
            agent,
            model: model.map(|m| m.trim().to_owned()),
        })
    }

    /// `agent[:model]`, as configured.
    pub fn label(&self) -> String {
        match &self.model {
            Some(m) => format!("{}:{m}", self.agent),
            None => self.agent.clone(),
        }
    }
}

impl Roles {
    /// Every role that plays, by name, in pipeline order.
    pub fn each(&self) -> Vec<(&'static str, &RoleConfig)> {
        let mut all = vec![("planner", &self.planner)];
        if let Some(c) = &self.challenger {
            all.push(("challenger", &c.role));
        }
        all.push(("owner", &self.owner));
        if let Some(t) = &self.tester {
            all.push(("tester", t));
        }
        all.extend([("reviewer", &self.reviewer), ("arbiter", &self.arbiter)]);
        all
    }
}

/// `[roles.challenger]`: a read-only agent that challenges each plan; the planner
/// answers every challenge in a revision, until the challenger agrees or the rounds
/// run out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenger {
    /// Its agent, model and effort.
    pub role: RoleConfig,
    /// Challenger turns at most (default 2): a challenge still open after the last
    /// one is shown on the plan approval.
    pub max_challenge_rounds: u32,
}

/// Challenger turns per plan unless `max_challenge_rounds` says otherwise.
pub const DEFAULT_CHALLENGE_ROUNDS: u32 = 2;

/// The resolved configuration: file, then environment, then flags.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The file it was read from, if one existed.
    pub source: Option<PathBuf>,
    /// Where the journal and worktrees live.
    pub data_dir: PathBuf,
    /// Journal location: a path, or `None` for `<data_dir>/gaffer.db`.
    pub database_url: Option<String>,
    /// Journal commit durability.
    pub durability: Durability,
    /// HTTP listen address.
    pub listen: SocketAddr,
    /// Host names (besides loopback names and IP addresses) the server answers to:
    /// a request whose `Host` names anything else is refused (DNS rebinding).
    pub public_names: Vec<String>,
    /// tracing filter.
    pub log_level: String,
    /// Concurrent tasks on this machine.
    pub workers: usize,
    /// Concurrent tasks in one project.
    pub workers_per_project: usize,
    /// How long a worker's lease on a task lasts without a heartbeat, in seconds:
    /// after a worker dies, another takes its tasks over this much later.
    pub lease_secs: u64,
    /// Longest a check command may run, in seconds.
    pub check_timeout_secs: u64,
    /// Review rounds that may request changes before the arbiter is called.
    pub review_rounds: u32,
    /// Requests per minute per provider and model.
    pub requests_per_minute: u32,
    /// Requests per day per provider and model.
    pub requests_per_day: u32,
    /// Agents per role.
    pub roles: Roles,
    /// The ACP agents `[agents.acp.<name>]` declares, by name.
    pub acp_agents: std::collections::BTreeMap<String, AcpAgentConfig>,
    /// `[prices."<model>"]`: what a model's tokens cost, over the built-in list
    /// prices (the agents that report tokens but no money: Codex, Gemini CLI, ACP).
    pub prices: std::collections::BTreeMap<String, ModelPrice>,
    /// Per-project role overrides, by project name (already merged over `roles`).
    pub project_roles: std::collections::BTreeMap<String, Roles>,
    /// Where each project ships (push, pull request, CI), by project name. A project
    /// without one keeps its task branches local.
    pub forges: std::collections::BTreeMap<String, ForgeSettings>,
    /// Each project's task tracker, by project name.
    pub trackers: std::collections::BTreeMap<String, TrackerSettings>,
    /// Each project's issue intake (`[projects.<name>.intake]`), by project name.
    pub intake: std::collections::BTreeMap<String, IntakeSettings>,
    /// Days a shipped or cancelled task's worktree is kept before `gaffer gc` removes it.
    pub worktree_retention_days: u64,
    /// How agent processes are confined.
    pub sandbox: SandboxConfig,
    /// Names of environment variables whose values are secrets: redacted from
    /// everything gaffer stores, logs or shows (on top of the usual `*_API_KEY`,
    /// `*_TOKEN`, `*_SECRET`, `*_PASSWORD` variables).
    pub secret_env: Vec<String>,
    /// The Discord adapter.
    pub discord: DiscordConfig,
    /// `[agents] env`: names of variables of gaffer's environment every agent gets, on
    /// top of the allowlist (PATH, HOME, locale, ...) and its own credentials.
    pub agent_env: Vec<String>,
    /// `[agents] fallback_*`: cool-down and rate-limit threshold of fallback agents.
    pub fallback: FallbackConfig,
    /// `[projects.<name>] check_env`: names of variables of gaffer's environment the
    /// project's check gets, on top of the allowlist, by project name.
    pub check_env: std::collections::BTreeMap<String, Vec<String>>,
    /// `[projects.<name>] setup`, `copy`, `port`: how a new worktree of the project is
    /// made ready before the owner starts, by project name (absent: nothing to do).
    pub worktree_setup: std::collections::BTreeMap<String, WorktreeSetup>,
    /// `[watchdog]`: when a running agent looks stuck.
    pub watchdog: Watchdog,
    /// `[budget]`: spending caps.
    pub budget: Budget,
    /// `[projects.<name>.watchdog]`, merged over `watchdog`, by project name.
    pub project_watchdog: std::collections::BTreeMap<String, Watchdog>,
    /// `[projects.<name>.budget]`, merged over `budget`, by project name.
    pub project_budget: std::collections::BTreeMap<String, Budget>,
    /// `[projects.<name>] privacy`: what model endpoints may see the project's source,
    /// by project name (absent: standard).
    pub privacy: std::collections::BTreeMap<String, Privacy>,
    /// `[privacy] private_networks`: networks whose model servers count as local, on
    /// top of loopback.
    pub private_networks: Vec<Network>,
    /// `[[notify]]`: webhooks and ntfy topics told about approvals and finished tasks.
    pub notify: Vec<NotifyTarget>,
    /// `[[schedules]]`: requests queued on a cron schedule (read-only at run time).
    pub schedules: Vec<Schedule>,
    /// `[server] public_url`: the server's address as people reach it (one-tap links
    /// point there); `None`: `http://<listen>`.
    pub public_url: Option<String>,
}

/// Default environment variable holding the Discord bot token.
pub const DISCORD_TOKEN_ENV: &str = "GAFFER_DISCORD_TOKEN";
/// Discord's REST API.
pub const DISCORD_API_URL: &str = "https://discord.com/api/v10";

/// The Discord adapter's settings. The bot token itself is never part of the
/// configuration: it is read from the environment variable `token_env` names
/// when `gaffer serve` starts, so it cannot end up in a file, a log or `doctor`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscordConfig {
    /// The environment variable that holds the bot token.
    pub token_env: String,
    /// The application (bot) id, for registering slash commands.
    pub application_id: Option<String>,
    /// REST API base URL.
    pub api_url: String,
    /// Gateway websocket URL; `None`: ask the API (`GET /gateway/bot`).
    pub gateway_url: Option<String>,
    /// Discord user ids that may decide approvals.
    pub approver_users: Vec<String>,
    /// Discord role ids whose members may decide approvals.
    pub approver_roles: Vec<String>,
    /// Channel id → project name: where requests for a project are made.
    pub rooms: std::collections::BTreeMap<String, String>,
}

impl Default for DiscordConfig {
    fn default() -> Self {
        Self {
            token_env: DISCORD_TOKEN_ENV.into(),
            application_id: None,
            api_url: DISCORD_API_URL.into(),
            gateway_url: None,
            approver_users: Vec::new(),
            approver_roles: Vec::new(),
            rooms: Default::default(),
        }
    }
}

/// How one project ships: `[projects.<name>.forge]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForgeSettings {
    /// `gitea` (also Forgejo), `github` or `gitlab`.
    pub kind: String,
    /// Gitea: the instance URL; GitHub: the API URL (`https://api.github.com`);
    /// GitLab: the instance URL (`https://gitlab.com` or self-hosted; `/api/v4` is
    /// added).
    pub base_url: String,
    /// Repository owner; `None`: read from the remote's URL.
    pub owner: Option<String>,
    /// Repository name; `None`: read from the remote's URL.
    pub repo: Option<String>,
    /// The git remote (name or URL) the task branch is pushed to.
    pub remote: String,
    /// The NAME of the environment variable holding the API token; `None`: ask the
    /// user's git credential helper for the forge's host.
    pub token_env: Option<String>,
    /// Push over HTTPS with the token instead of the user's own git setup.
    pub push_with_token: bool,
    /// Labels put on the pull request.
    pub labels: Vec<String>,
    /// Longest gaffer waits for CI on one pushed commit, in seconds.
    pub ci_timeout_secs: u64,
    /// How many times the owner may fix what CI found before the task fails.
    pub ci_fix_attempts: u32,
    /// Wait for CI on the pushed commit (false: a repository without CI; the task is
    /// done once the pull request is open).
    pub wait_for_ci: bool,
    /// How the task branch takes in a base that moved under its pull request:
    /// `rebase` (the default: replayed on the new base, pushed with
    /// `--force-with-lease`) or `merge` (the base merged in, a plain push).
    pub conflict_strategy: ConflictStrategy,
    /// Follow the pull request after the task is done: people's review comments
    /// open it again for a fix, a reply and a new push (default true).
    pub follow: bool,
    /// How often a followed pull request is read, in seconds (default 120; a webhook
    /// wakes the follower sooner).
    pub follow_interval_secs: u64,
    /// Review rounds the owner answers by itself before a person is asked to allow
    /// one more (default 3).
    pub review_fix_attempts: u32,
    /// The forge user gaffer's token posts as: its comments never ask for a fix.
    pub bot_user: Option<String>,
}

/// One project's task tracker: `[projects.<name>.tracker]` (Vikunja).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrackerSettings {
    /// The Vikunja instance URL.
    pub base_url: String,
    /// The Vikunja project the tasks go into.
    pub project_id: u64,
    /// The NAME of the environment variable holding the API token.
    pub token_env: String,
}

impl Config {
    /// The defaults, with `data_dir` as given.
    pub fn defaults(data_dir: PathBuf) -> Self {
        Self {
            source: None,
            data_dir,
            database_url: None,
            durability: Durability::Full,
            listen: SocketAddr::from(([127, 0, 0, 1], 7777)),
            public_names: Vec::new(),
            log_level: "warn".into(),
            workers: 2,
            workers_per_project: 1,
            lease_secs: 30,
            check_timeout_secs: 1200,
            review_rounds: 3,
            requests_per_minute: 120,
            requests_per_day: 2000,
            roles: Roles::default(),
            acp_agents: Default::default(),
            prices: Default::default(),
            project_roles: Default::default(),
            forges: Default::default(),
            trackers: Default::default(),
            intake: Default::default(),
            worktree_retention_days: 7,
            sandbox: SandboxConfig::default(),
            secret_env: Vec::new(),
            discord: DiscordConfig::default(),
            agent_env: Vec::new(),
            fallback: FallbackConfig::default(),
            check_env: Default::default(),
            worktree_setup: Default::default(),
            watchdog: Watchdog::default(),
            budget: Budget::default(),
            project_watchdog: Default::default(),
            project_budget: Default::default(),
            privacy: Default::default(),
            private_networks: Vec::new(),
            notify: Vec::new(),
            schedules: Vec::new(),
            public_url: None,
        }
    }

    /// The privacy mode of `project` (standard unless its table says otherwise).
    pub fn privacy_for(&self, project: &str) -> Privacy {
        self.privacy.get(project).copied().unwrap_or_default()
    }

    /// The roles for `project`: its overrides over the global ones.
    pub fn roles_for(&self, project: &str) -> &Roles {
        self.project_roles.get(project).unwrap_or(&self.roles)
    }

    /// The watchdog for `project`: its section over the global one.
    pub fn watchdog_for(&self, project: &str) -> Watchdog {
        self.project_watchdog
            .get(project)
            .copied()
            .unwrap_or(self.watchdog)
    }

    /// The spending caps for `project`: its section over the global one.
    pub fn budget_for(&self, project: &str) -> Budget {
        self.project_budget
            .get(project)
            .copied()
            .unwrap_or(self.budget)
    }

    /// The journal to open: `database.url` as written (a path, `sqlite://PATH` or
    /// `postgres://…`), or the file `<data_dir>/gaffer.db`.
    pub fn database_location(&self) -> String {
        match &self.database_url {
            Some(url) => url.clone(),
            None => self.data_dir.join("gaffer.db").display().to_string(),
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    data_dir: Option<PathBuf>,
    #[serde(default)]
    database: RawDatabase,
    #[serde(default)]
    server: RawServer,
    #[serde(default)]
    log: RawLog,
    #[serde(default)]
    workers: RawWorkers,
    #[serde(default)]
    rate_limits: RawRateLimits,
    #[serde(default)]
    checks: RawChecks,
    #[serde(default)]
    review: RawReview,
    #[serde(default)]
    roles: RawRoles,
    #[serde(default)]
    agents: RawAgents,
    #[serde(default)]
    worktrees: RawWorktrees,
    #[serde(default)]
    projects: std::collections::BTreeMap<String, RawProject>,
    #[serde(default)]
    sandbox: RawSandbox,
    #[serde(default)]
    secrets: RawSecrets,
    #[serde(default)]
    discord: RawDiscord,
    #[serde(default)]
    prices: std::collections::BTreeMap<String, RawPrice>,
    #[serde(default)]
    watchdog: supervision::RawWatchdog,
    #[serde(default)]
    budget: supervision::RawBudget,
    #[serde(default)]
    privacy: RawPrivacy,
    #[serde(default)]
    notify: Vec<notify::RawNotify>,
    #[serde(default)]
    schedules: Vec<schedules::RawSchedule>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPrivacy {
    private_networks: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPrice {
    input: Option<f64>,
    output: Option<f64>,
    cached_input: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDiscord {
    token_env: Option<String>,
    application_id: Option<String>,
    api_url: Option<String>,
    gateway_url: Option<String>,
    #[serde(default)]
    approver_users: Vec<String>,
    #[serde(default)]
    approver_roles: Vec<String>,
    #[serde(default)]
    rooms: std::collections::BTreeMap<String, String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAgents {
    env: Option<Vec<String>>,
    fallback_cooldown_secs: Option<u64>,
    fallback_retry_after_secs: Option<u64>,
    #[serde(default)]
    acp: std::collections::BTreeMap<String, RawAcpAgent>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAcpAgent {
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    state_dirs: Vec<String>,
    #[serde(default)]
    env: std::collections::BTreeMap<String, String>,
    local: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSandbox {
    mode: Option<String>,
    network: Option<String>,
    writable: Option<Vec<PathBuf>>,
    readable: Option<Vec<PathBuf>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSecrets {
    env: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWorktrees {
    retention_days: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawChecks {
    timeout_secs: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawReview {
    rounds: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProject {
    #[serde(default)]
    roles: RawRoles,
    forge: Option<RawForge>,
    tracker: Option<RawTracker>,
    intake: Option<intake::RawIntake>,
    check_env: Option<Vec<String>>,
    setup: Option<Vec<String>>,
    copy: Option<Vec<String>>,
    port: Option<bool>,
    watchdog: Option<supervision::RawWatchdog>,
    budget: Option<supervision::RawBudget>,
    privacy: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawForge {
    kind: Option<String>,
    base_url: Option<String>,
    owner: Option<String>,
    repo: Option<String>,
    remote: Option<String>,
    token_env: Option<String>,
    push_with_token: Option<bool>,
    #[serde(default)]
    labels: Vec<String>,
    ci_timeout_secs: Option<u64>,
    ci_fix_attempts: Option<u32>,
    wait_for_ci: Option<bool>,
    conflict_strategy: Option<String>,
    follow: Option<bool>,
    follow_interval_secs: Option<u64>,
    review_fix_attempts: Option<u32>,
    bot_user: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTracker {
    kind: Option<String>,
    base_url: Option<String>,
    project_id: Option<u64>,
    token_env: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDatabase {
    url: Option<String>,
    durability: Option<Durability>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServer {
    listen: Option<String>,
    public_names: Option<Vec<String>>,
    public_url: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLog {
    level: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWorkers {
    count: Option<usize>,
    per_project: Option<usize>,
    lease_secs: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRateLimits {
    requests_per_minute: Option<u32>,
    requests_per_day: Option<u32>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRoles {
    planner: Option<RawRole>,
    owner: Option<RawRole>,
    reviewer: Option<RawRole>,
    arbiter: Option<RawRole>,
    challenger: Option<RawOptionalRole>,
    tester: Option<RawOptionalRole>,
}

/// A role that plays only when configured (`enabled = false` turns off an inherited one).
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOptionalRole {
    enabled: Option<bool>,
    agent: Option<RawAgentChain>,
    model: Option<String>,
    effort: Option<String>,
    max_challenge_rounds: Option<u32>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRole {
    agent: Option<RawAgentChain>,
    model: Option<String>,
    effort: Option<String>,
    /// `[roles.arbiter]` only.
    panel: Option<Vec<String>>,
    /// `[roles.arbiter]` only.
    panel_timeout_secs: Option<u64>,
}

/// `agent = "claude"` or, with fallbacks, `agent = ["claude", "codex"]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(
    untagged,
    expecting = "an agent name or a list of agent names tried in order, e.g. [\"claude\", \"codex\"]"
)]
enum RawAgentChain {
    One(String),
    Chain(Vec<String>),
}

/// Where the configuration comes from.
#[derive(Clone)]
pub struct Sources<'a> {
    /// The config file, and whether the user named it (a named file must exist).
    pub file: Option<(PathBuf, bool)>,
    /// `--data-dir` / `GAFFER_DATA_DIR`, already merged by the CLI.
    pub data_dir_flag: Option<PathBuf>,
    /// `--db`: the journal's URL or path, over the file and the environment.
    pub database_flag: Option<String>,
    /// The default data dir when nothing names one.
    pub default_data_dir: PathBuf,
    /// Reads an environment variable.
    pub env: &'a dyn Fn(&str) -> Option<String>,
}

/// The default config file and data dir, from the XDG base directories.
pub fn xdg_defaults() -> (PathBuf, PathBuf) {
    match directories::ProjectDirs::from("", "", "gaffer") {
        Some(dirs) => (
            dirs.config_dir().join("config.toml"),
            dirs.data_dir().to_owned(),
        ),
        None => (
            PathBuf::from(".gaffer/config.toml"),
            PathBuf::from(".gaffer"),
        ),
    }
}

/// Read the file (if any), apply environment overrides, validate.
pub fn load(sources: &Sources<'_>) -> Result<Config, ConfigError> {
    let (raw, origin, source) = match &sources.file {
        Some((path, named)) => match std::fs::read_to_string(path) {
            Ok(text) => (
                parse(path, &text)?,
                path.display().to_string(),
                Some(path.clone()),
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !named => {
                (RawConfig::default(), "defaults".into(), None)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(ConfigError::Missing { path: path.clone() })
            }
            Err(source) => {
                return Err(ConfigError::Read {
                    path: path.clone(),
                    source,
                })
            }
        },
        None => (RawConfig::default(), "defaults".into(), None),
    };
    resolve(raw, &origin, source, sources)
}

fn parse(path: &Path, text: &str) -> Result<RawConfig, ConfigError> {
    toml::from_str(text).map_err(|e| {
        let (line, column) = e
            .span()
            .map(|span| line_col(text, span.start))
            .unwrap_or((1, 1));
        ConfigError::Parse {
            path: path.to_owned(),
            line,
            column,
            message: e.message().to_owned(),
        }
    })
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

pub(crate) fn invalid(origin: &str, field: &str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        origin: origin.to_owned(),
        field: field.to_owned(),
        message: message.into(),
    }
}

/// A tracing filter: directives separated by commas, each a level (`off`,
/// `error`, `warn`, `info`, `debug`, `trace`), or `target=level` with a module
/// path as target (`gaffer_store=debug`).
fn check_log_level(origin: &str, level: &str) -> Result<(), ConfigError> {
    const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];
    let is_level = |l: &str| LEVELS.iter().any(|k| k.eq_ignore_ascii_case(l.trim()));
    let is_target = |t: &str| {
        !t.is_empty()
            && t.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | ':' | '-'))
    };
    let bad = level
        .split(',')
        .map(str::trim)
        .find(|d| match d.split_once('=') {
            _ if d.is_empty() => false,
            Some((target, l)) => !(is_target(target.trim()) && is_level(l)),
            None => !is_level(d),
        });
    if level.trim().is_empty() || bad.is_some() {
        return Err(invalid(
            origin,
            "log.level",
            format!(
                "is `{level}`; use one of {} or per module, like \"warn,gaffer_store=debug\"",
                LEVELS.join(", ")
            ),
        ));
    }
    Ok(())
}

/// A value from the environment overrides the file; errors name the variable.
pub(crate) fn overlay(
    sources: &Sources<'_>,
    var: &str,
    file_value: Option<String>,
    file_origin: &str,
) -> (Option<String>, String) {
    match (sources.env)(var) {
        Some(v) => (Some(v), format!("environment variable {var}")),
        None => (file_value, file_origin.to_owned()),
    }
}

/// `[server] public_names`: host names as a browser puts them in `Host` (no scheme,
/// port or path), lower-cased.
fn public_names<'a>(
    origin: &str,
    names: impl Iterator<Item = &'a str>,
) -> Result<Vec<String>, ConfigError> {
    names
        .map(|name| {
            let ok = !name.is_empty()
                && name.len() <= 253
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
            if ok {
                Ok(name.to_ascii_lowercase())
            } else {
                Err(invalid(
                    origin,
                    "server.public_names",
                    format!("has `{name}`; write host names only, like \"gaffer.example.com\" (no scheme, port or path)"),
                ))
            }
        })
        .collect()
}

fn resolve(
    raw: RawConfig,
    origin: &str,
    source: Option<PathBuf>,
    sources: &Sources<'_>,
) -> Result<Config, ConfigError> {
    let data_dir = sources
        .data_dir_flag
        .clone()
        .or(raw.data_dir)
        .unwrap_or_else(|| sources.default_data_dir.clone());
    let mut config = Config::defaults(data_dir);
    config.source = source;

    let (url, from) = match &sources.database_flag {
        Some(flag) => (Some(flag.clone()), "flag --db".to_owned()),
        None => overlay(sources, "GAFFER_DATABASE_URL", raw.database.url, origin),
    };
    config.database_url = url.filter(|u| !u.is_empty());
    if let Some(url) = &config.database_url {
        let lower = url.to_ascii_lowercase();
        let known = ["sqlite://", "postgres://", "postgresql://"];
        if url.contains("://") && !known.iter().any(|k| lower.starts_with(k)) {
            return Err(invalid(
                &from,
                "database.url",
                format!(
                    "`{}` is not a database gaffer can use: give a file path, sqlite://PATH or postgres://USER:PASSWORD@HOST:PORT/DATABASE",
                    url.split_once("://").map_or(url.as_str(), |(scheme, _)| scheme)
                ),
            ));
        }
    }

    let durability = raw.database.durability.map(|d| match d {
        Durability::Full => "full".to_owned(),
        Durability::Normal => "normal".to_owned(),
    });
    let (durability, from) = overlay(sources, "GAFFER_DATABASE_DURABILITY", durability, origin);
    if let Some(d) = durability {
        config.durability = match d.as_str() {
            "full" => Durability::Full,
            "normal" => Durability::Normal,
            other => {
                return Err(invalid(
                    &from,
                    "database.durability",
                    format!("is `{other}`; use \"full\" or \"normal\""),
                ))
            }
        };
    }

    let (listen, from) = overlay(sources, "GAFFER_SERVER_LISTEN", raw.server.listen, origin);
    if let Some(listen) = listen {
        config.listen = listen.parse().map_err(|_| {
            invalid(
                &from,
                "server.listen",
                format!("is `{listen}`; write an address and port like \"127.0.0.1:7777\""),
            )
        })?;
    }

    let (public_url, from) = overlay(
        sources,
        "GAFFER_SERVER_PUBLIC_URL",
        raw.server.public_url,
        origin,
    );
    config.public_url = public_url
        .filter(|u| !u.trim().is_empty())
        .map(|u| notify::check_http_url(&from, "server.public_url", u.trim()))
        .transpose()?;

    config.public_names = match (sources.env)("GAFFER_SERVER_PUBLIC_NAMES") {
        Some(v) => public_names(
            "environment variable GAFFER_SERVER_PUBLIC_NAMES",
            v.split(',').map(str::trim).filter(|n| !n.is_empty()),
        )?,
        None => public_names(
            origin,
            raw.server.public_names.iter().flatten().map(String::as_str),
        )?,
    };

    let (level, from) = overlay(sources, "GAFFER_LOG", raw.log.level, origin);
    if let Some(level) = level {
        check_log_level(&from, &level)?;
        config.log_level = level;
    }

    let workers = raw.workers.count.map(|n| n.to_string());
    let (workers, from) = overlay(sources, "GAFFER_WORKERS", workers, origin);
    if let Some(w) = workers {
        config.workers = match w.parse::<usize>() {
            Ok(n) if (1..=64).contains(&n) => n,
            _ => {
                return Err(invalid(
                    &from,
                    "workers.count",
                    format!("is `{w}`; use a whole number from 1 to 64"),
                ))
            }
        };
    }

    if let Some(n) = raw.rate_limits.requests_per_minute {
        config.requests_per_minute = positive(origin, "rate_limits.requests_per_minute", n)?;
    }
    if let Some(n) = raw.rate_limits.requests_per_day {
        config.requests_per_day = positive(origin, "rate_limits.requests_per_day", n)?;
    }

    if let Some(n) = raw.workers.per_project {
        if n == 0 {
            return Err(invalid(origin, "workers.per_project", "must be at least 1"));
        }
        config.workers_per_project = n;
    }
    let lease = raw.workers.lease_secs.map(|n| n.to_string());
    let (lease, from) = overlay(sources, "GAFFER_WORKERS_LEASE_SECS", lease, origin);
    if let Some(l) = lease {
        config.lease_secs = match l.parse::<u64>() {
            Ok(n) if (2..=3600).contains(&n) => n,
            _ => {
                return Err(invalid(
                    &from,
                    "workers.lease_secs",
                    format!("is `{l}`; use a whole number of seconds from 2 to 3600"),
                ))
            }
        };
    }
    if let Some(t) = raw.checks.timeout_secs {
        if t == 0 {
            return Err(invalid(origin, "checks.timeout_secs", "must be at least 1"));
        }
        config.check_timeout_secs = t;
    }
    if let Some(r) = raw.review.rounds {
        config.review_rounds = positive(origin, "review.rounds", r)?;
    }
    let retention = raw.worktrees.retention_days.map(|n| n.to_string());
    let (retention, from) = overlay(
        sources,
        "GAFFER_WORKTREES_RETENTION_DAYS",
        retention,
        origin,
    );
    if let Some(r) = retention {
        config.worktree_retention_days = r.parse().map_err(|_| {
            invalid(
                &from,
                "worktrees.retention_days",
                format!(
                    "is `{r}`; use a whole number of days (0 removes them at the next `gaffer gc`)"
                ),
            )
        })?;
    }
    config.sandbox = resolve_sandbox(origin, sources, raw.sandbox)?;
    config.secret_env = raw.secrets.env.unwrap_or_default();
    config.acp_agents = resolve_acp_agents(origin, sources, raw.agents.acp)?;
    config.prices = resolve_prices(origin, raw.prices)?;
    config.private_networks = match (sources.env)("GAFFER_PRIVACY_PRIVATE_NETWORKS") {
        Some(list) => privacy::networks(
            "environment variable GAFFER_PRIVACY_PRIVATE_NETWORKS",
            list.split(',').map(str::trim).filter(|n| !n.is_empty()),
        )?,
        None => privacy::networks(
            origin,
            raw.privacy
                .private_networks
                .iter()
                .flatten()
                .map(String::as_str),
        )?,
    };
    config.agent_env = match (sources.env)("GAFFER_AGENTS_ENV") {
        Some(list) => env_names(
            "environment variable GAFFER_AGENTS_ENV",
            "agents.env",
            list.split(',')
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(str::to_owned)
                .collect(),
        )?,
        None => env_names(origin, "agents.env", raw.agents.env.unwrap_or_default())?,
    };
    if let Some(secs) = raw.agents.fallback_cooldown_secs {
        config.fallback.cooldown_secs = secs;
    }
    if let Some(secs) = raw.agents.fallback_retry_after_secs {
        config.fallback.retry_after_secs = secs;
    }
    config.roles = merge_roles(
        origin,
        "roles",
        &Roles::default(),
        raw.roles,
        &config.acp_agents,
    )?;
    config.watchdog = supervision::watchdog(origin, "watchdog", Watchdog::default(), raw.watchdog)?;
    config.budget = supervision::budget(origin, "budget", Budget::default(), raw.budget)?;
    for (project, p) in raw.projects {
        if let Some(w) = p.watchdog {
            let w = supervision::watchdog(
                origin,
                &format!("projects.{project}.watchdog"),
                config.watchdog,
                w,
            )?;
            config.project_watchdog.insert(project.clone(), w);
        }
        if let Some(b) = p.budget {
            let b = supervision::budget(
                origin,
                &format!("projects.{project}.budget"),
                config.budget,
                b,
            )?;
            config.project_budget.insert(project.clone(), b);
        }
        let roles = merge_roles(
            origin,
            &format!("projects.{project}.roles"),
            &config.roles,
            p.roles,
            &config.acp_agents,
        )?;
        let has_forge = p.forge.is_some();
        if let Some(forge) = p.forge {
            let forge = resolve_forge(origin, sources, &project, forge)?;
            config.forges.insert(project.clone(), forge);
        }
        if let Some(raw) = p.intake {
            let intake = intake::resolve(origin, sources, &project, has_forge, raw)?;
            config.intake.insert(project.clone(), intake);
        }
        if let Some(tracker) = p.tracker {
            let tracker = resolve_tracker(origin, &project, tracker)?;
            config.trackers.insert(project.clone(), tracker);
        }
        if let Some(names) = p.check_env {
            let field = format!("projects.{project}.check_env");
            config
                .check_env
                .insert(project.clone(), env_names(origin, &field, names)?);
        }
        if let Some(setup) = setup::resolve(origin, &project, p.setup, p.copy, p.port)? {
            config.worktree_setup.insert(project.clone(), setup);
        }
        let (mode, from) = overlay(
            sources,
            &project_env_var(&project, "PRIVACY"),
            p.privacy,
            origin,
        );
        if let Some(mode) = mode {
            let field = format!("projects.{project}.privacy");
            config
                .privacy
                .insert(project.clone(), privacy::parse_mode(&from, &field, &mode)?);
        }
        config.project_roles.insert(project, roles);
    }
    config.discord = resolve_discord(origin, sources, raw.discord)?;
    let (targets, secret_vars) = notify::resolve(origin, sources, raw.notify)?;
    config.notify = targets;
    config.schedules = schedules::resolve(origin, raw.schedules, &config.acp_agents)?;
    for var in secret_vars {
        if !config.secret_env.contains(&var) {
            config.secret_env.push(var);
        }
    }
    Ok(config)
}

/// A Discord snowflake: the decimal digits Discord gives every id.
fn is_snowflake(s: &str) -> bool {
    !s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit())
}

fn resolve_discord(
    origin: &str,
    sources: &Sources<'_>,
    raw: RawDiscord,
) -> Result<DiscordConfig, ConfigError> {
    let mut d = DiscordConfig::default();
    if let Some(var) = raw.token_env {
        if var.is_empty() || var.contains('=') || var.bytes().any(|b| b.is_ascii_whitespace()) {
            return Err(invalid(
                origin,
                "discord.token_env",
                format!("is `{var}`; name the environment variable that holds the bot token, like \"{DISCORD_TOKEN_ENV}\" (the token itself never goes in this file)"),
            ));
        }
        d.token_env = var;
    }
    let snowflake = |field: &str, id: &str| {
        if is_snowflake(id) {
            Ok(())
        } else {
            Err(invalid(
                origin,
                field,
                format!("has `{id}`, which is not a Discord id; copy the number with Discord's \"Copy ID\" (developer mode)"),
            ))
        }
    };
    d.application_id = raw.application_id.filter(|a| !a.is_empty());
    if let Some(a) = &d.application_id {
        snowflake("discord.application_id", a)?;
    }
    let (api_url, from) = overlay(sources, "GAFFER_DISCORD_API_URL", raw.api_url, origin);
    if let Some(url) = api_url {
        if !(url.starts_with("https://") || url.starts_with("http://")) {
            return Err(invalid(
                &from,
                "discord.api_url",
                format!("is `{url}`; write an http(s) URL like \"{DISCORD_API_URL}\""),
            ));
        }
        d.api_url = url.trim_end_matches('/').to_owned();
    }
    let (gateway, from) = overlay(
        sources,
        "GAFFER_DISCORD_GATEWAY_URL",
        raw.gateway_url,
        origin,
    );
    d.gateway_url = gateway.filter(|g| !g.is_empty());
    if let Some(url) = &d.gateway_url {
        if !(url.starts_with("wss://") || url.starts_with("ws://")) {
            return Err(invalid(
                &from,
                "discord.gateway_url",
                format!("is `{url}`; write a ws(s) URL, or leave it empty to ask the API"),
            ));
        }
    }
    for u in &raw.approver_users {
        snowflake("discord.approver_users", u)?;
    }
    for r in &raw.approver_roles {
        snowflake("discord.approver_roles", r)?;
    }
    for (channel, project) in &raw.rooms {
        snowflake("discord.rooms", channel)?;
        if project.trim().is_empty() {
            return Err(invalid(
                origin,
                &format!("discord.rooms.{channel}"),
                "is empty; name the project (as `gaffer project list` shows it) this channel runs tasks in",
            ));
        }
    }
    d.approver_users = raw.approver_users;
    d.approver_roles = raw.approver_roles;
    d.rooms = raw.rooms;
    Ok(d)
}

/// `GAFFER_PROJECT_<NAME>_<KEY>`: the project name upper-cased, anything but letters
/// and digits as `_`.
pub fn project_env_var(project: &str, key: &str) -> String {
    format!("GAFFER_PROJECT_{}_{key}", env_name_part(project))
}

/// A name as part of an environment variable's: upper-cased, anything but letters
/// and digits as `_`.
pub(crate) fn env_name_part(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}

fn resolve_forge(
    origin: &str,
    sources: &Sources<'_>,
    project: &str,
    raw: RawForge,
) -> Result<ForgeSettings, ConfigError> {
    let field = |k: &str| format!("projects.{project}.forge.{k}");
    let kind = match raw.kind.as_deref().map(str::to_ascii_lowercase).as_deref() {
        Some("gitea" | "forgejo") => "gitea",
        Some("github") => "github",
        Some("gitlab") => "gitlab",
        Some(other) => {
            return Err(invalid(
                origin,
                &field("kind"),
                format!("is `{other}`; use \"gitea\" (also Forgejo), \"github\" or \"gitlab\""),
            ))
        }
        None => {
            return Err(invalid(
                origin,
                &field("kind"),
                "is missing; say \"gitea\" (also Forgejo), \"github\" or \"gitlab\"",
            ))
        }
    };
    let (base_url, from) = overlay(
        sources,
        &project_env_var(project, "FORGE_BASE_URL"),
        raw.base_url,
        origin,
    );
    let base_url = match base_url.filter(|u| !u.trim().is_empty()) {
        Some(u) if u.starts_with("http://") || u.starts_with("https://") => {
            u.trim().trim_end_matches('/').to_owned()
        }
        Some(u) => {
            return Err(invalid(
                &from,
                &field("base_url"),
                format!("is `{u}`; write the forge's http:// or https:// URL"),
            ))
        }
        None if kind == "github" => "https://api.github.com".to_owned(),
        None if kind == "gitlab" => "https://gitlab.com".to_owned(),
        None => return Err(invalid(
            &from,
            &field("base_url"),
            "is missing; write your Gitea/Forgejo instance's URL, like \"https://git.example.com\"",
        )),
    };
    let (token_env, from) = overlay(
        sources,
        &project_env_var(project, "FORGE_TOKEN_ENV"),
        raw.token_env,
        origin,
    );
    let token_env = token_env.filter(|t| !t.trim().is_empty());
    if let Some(t) = &token_env {
        if !t.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(invalid(
                &from,
                &field("token_env"),
                // The value is not shown: it may be the token pasted in by mistake.
                "must name the environment variable that holds the token (letters, digits and _, like \"GAFFER_GITEA_TOKEN\"), not the token itself",
            ));
        }
    }
    let ci_timeout_secs = raw.ci_timeout_secs.unwrap_or(3600);
    if ci_timeout_secs == 0 {
        return Err(invalid(
            origin,
            &field("ci_timeout_secs"),
            "must be at least 1",
        ));
    }
    let (strategy, from) = overlay(
        sources,
        &project_env_var(project, "FORGE_CONFLICT_STRATEGY"),
        raw.conflict_strategy,
        origin,
    );
    let conflict_strategy = match strategy.as_deref().map(str::parse::<ConflictStrategy>) {
        None => ConflictStrategy::default(),
        Some(Ok(strategy)) => strategy,
        Some(Err(why)) => return Err(invalid(&from, &field("conflict_strategy"), why)),
    };
    let follow_interval_secs = raw.follow_interval_secs.unwrap_or(120);
    if follow_interval_secs == 0 {
        return Err(invalid(
            origin,
            &field("follow_interval_secs"),
            "must be at least 1 (seconds between reads of a followed pull request); to stop following, write follow = false",
        ));
    }
    let bot_user = raw.bot_user.map(|b| b.trim().to_owned());
    if bot_user.as_deref() == Some("") {
        return Err(invalid(
            origin,
            &field("bot_user"),
            "is empty; write the forge login gaffer's token posts as, or leave it out",
        ));
    }
    Ok(ForgeSettings {
        kind: kind.into(),
        base_url,
        owner: raw.owner.filter(|o| !o.is_empty()),
        repo: raw.repo.filter(|r| !r.is_empty()),
        remote: raw
            .remote
            .filter(|r| !r.is_empty())
            .unwrap_or_else(|| "origin".into()),
        token_env,
        push_with_token: raw.push_with_token.unwrap_or(false),
        labels: raw.labels,
        ci_timeout_secs,
        ci_fix_attempts: raw.ci_fix_attempts.unwrap_or(2),
        wait_for_ci: raw.wait_for_ci.unwrap_or(true),
        conflict_strategy,
        follow: raw.follow.unwrap_or(true),
        follow_interval_secs,
        review_fix_attempts: raw.review_fix_attempts.unwrap_or(3),
        bot_user,
    })
}

fn resolve_tracker(
    origin: &str,
    project: &str,
    raw: RawTracker,
) -> Result<TrackerSettings, ConfigError> {
    let field = |k: &str| format!("projects.{project}.tracker.{k}");
    match raw.kind.as_deref() {
        Some("vikunja") => {}
        other => {
            return Err(invalid(
                origin,
                &field("kind"),
                format!(
                    "is `{}`; the tracker gaffer supports is \"vikunja\"",
                    other.unwrap_or("missing")
                ),
            ))
        }
    }
    let missing = |k: &str, what: &str| invalid(origin, &field(k), format!("is missing; {what}"));
    let base_url = raw
        .base_url
        .filter(|u| u.starts_with("http://") || u.starts_with("https://"))
        .ok_or_else(|| {
            missing(
                "base_url",
                "write the Vikunja URL, like \"https://tasks.example.com\"",
            )
        })?;
    let project_id = raw.project_id.ok_or_else(|| {
        missing(
            "project_id",
            "give the number of the Vikunja project the tasks go into",
        )
    })?;
    let token_env = raw.token_env.filter(|t| !t.is_empty()).ok_or_else(|| {
        missing(
            "token_env",
            "name the environment variable that holds the Vikunja token",
        )
    })?;
    Ok(TrackerSettings {
        base_url: base_url.trim_end_matches('/').to_owned(),
        project_id,
        token_env,
    })
}

fn resolve_sandbox(
    origin: &str,
    sources: &Sources<'_>,
    raw: RawSandbox,
) -> Result<SandboxConfig, ConfigError> {
    let mut sandbox = SandboxConfig::default();
    let (mode, from) = overlay(sources, "GAFFER_SANDBOX", raw.mode, origin);
    if let Some(m) = mode {
        sandbox.mode = match m.as_str() {
            "auto" => SandboxMode::Auto,
            "required" => SandboxMode::Required,
            "off" => SandboxMode::Off,
            other => {
                return Err(invalid(
                    &from,
                    "sandbox.mode",
                    format!("is `{other}`; use \"auto\", \"required\" or \"off\""),
                ))
            }
        };
    }
    let (network, from) = overlay(sources, "GAFFER_SANDBOX_NETWORK", raw.network, origin);
    if let Some(n) = network {
        sandbox.network = match n.as_str() {
            "on" => true,
            "off" => false,
            other => {
                return Err(invalid(
                    &from,
                    "sandbox.network",
                    format!("is `{other}`; use \"on\" or \"off\""),
                ))
            }
        };
    }
    sandbox.writable = sandbox_paths(
        origin,
        sources,
        "sandbox.writable",
        "GAFFER_SANDBOX_WRITABLE",
        raw.writable,
    )?;
    sandbox.readable = sandbox_paths(
        origin,
        sources,
        "sandbox.readable",
        "GAFFER_SANDBOX_READABLE",
        raw.readable,
    )?;
    Ok(sandbox)
}

/// A list of absolute paths from the file, or from `var` (separated by `:`), which wins.
fn sandbox_paths(
    origin: &str,
    sources: &Sources<'_>,
    field: &str,
    var: &str,
    raw: Option<Vec<PathBuf>>,
) -> Result<Vec<PathBuf>, ConfigError> {
    let from_env = (sources.env)(var).map(|v| std::env::split_paths(&v).collect::<Vec<_>>());
    let (paths, from) = match from_env {
        Some(w) => (w, format!("environment variable {var}")),
        None => (raw.unwrap_or_default(), origin.to_owned()),
    };
    for p in &paths {
        if !p.is_absolute() {
            return Err(invalid(
                &from,
                field,
                format!(
                    "has `{}`, which is not an absolute path; write the full path",
                    p.display()
                ),
            ));
        }
    }
    Ok(paths)
}

/// Names of environment variables, checked to be names (not `NAME=value`).
fn env_names(origin: &str, field: &str, names: Vec<String>) -> Result<Vec<String>, ConfigError> {
    for n in &names {
        if n.is_empty() || n.contains('=') || n.bytes().any(|b| b.is_ascii_whitespace()) {
            return Err(invalid(
                origin,
                field,
                format!("has `{n}`; list variable names like \"CARGO_HOME\" (their values are read from gaffer's environment)"),
            ));
        }
    }
    Ok(names)
}

/// A name an ACP agent may have: letters, digits, `-`, `_`, `.`.
pub fn valid_acp_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

fn resolve_prices(
    origin: &str,
    raw: std::collections::BTreeMap<String, RawPrice>,
) -> Result<std::collections::BTreeMap<String, ModelPrice>, ConfigError> {
    let mut prices = std::collections::BTreeMap::new();
    for (model, p) in raw {
        let field = |k: &str| format!("prices.\"{model}\".{k}");
        let amount = |k: &str, v: Option<f64>| match v {
            Some(v) if v.is_finite() && v >= 0.0 => Ok(Some(v)),
            Some(v) => Err(invalid(
                origin,
                &field(k),
                format!("is {v}; write US dollars per million tokens, 0 or more"),
            )),
            None => Ok(None),
        };
        let required = |k: &str, v: Option<f64>| {
            amount(k, v)?.ok_or_else(|| {
                invalid(
                    origin,
                    &field(k),
                    "is missing; write US dollars per million tokens, like input = 1.25",
                )
            })
        };
        let input = required("input", p.input)?;
        let output = required("output", p.output)?;
        let cached_input = amount("cached_input", p.cached_input)?.unwrap_or(input);
        prices.insert(
            model,
            ModelPrice {
                input,
                output,
                cached_input,
            },
        );
    }
    Ok(prices)
}

fn resolve_acp_agents(
    origin: &str,
    sources: &Sources<'_>,
    raw: std::collections::BTreeMap<String, RawAcpAgent>,
) -> Result<std::collections::BTreeMap<String, AcpAgentConfig>, ConfigError> {
    let home = (sources.env)("HOME").filter(|h| !h.is_empty());
    let mut agents = std::collections::BTreeMap::new();
    for (name, a) in raw {
        let field = |k: &str| format!("agents.acp.{name}.{k}");
        if !valid_acp_name(&name) || AGENTS.contains(&name.as_str()) {
            return Err(invalid(
                origin,
                &format!("agents.acp.{name}"),
                "is not a name an ACP agent can have: use letters, digits, `-`, `_` and `.`, and none of the built-in agents' names",
            ));
        }
        let command = match a.command.map(|c| c.trim().to_owned()) {
            Some(c) if !c.is_empty() => c,
            _ => {
                return Err(invalid(
                    origin,
                    &field("command"),
                    "is missing; write the executable that speaks ACP on stdio (a name on PATH or an absolute path), like command = \"claude-code-acp\"",
                ))
            }
        };
        let command = match command.strip_prefix("~/") {
            Some(rest) => match &home {
                Some(h) => Path::new(h).join(rest).display().to_string(),
                None => {
                    return Err(invalid(
                        origin,
                        &field("command"),
                        "starts with ~/ but HOME is not set; write the full path",
                    ))
                }
            },
            None => command,
        };
        if command.contains('/') && !Path::new(&command).is_absolute() {
            return Err(invalid(
                origin,
                &field("command"),
                format!("is `{command}`, a relative path; write an absolute path or a name found on PATH"),
            ));
        }
        let mut state_dirs = Vec::new();
        for d in a.state_dirs {
            let path = match d.strip_prefix("~/") {
                Some(rest) => match &home {
                    Some(h) => Path::new(h).join(rest),
                    None => {
                        return Err(invalid(
                            origin,
                            &field("state_dirs"),
                            format!("has `{d}` but HOME is not set; write the full path"),
                        ))
                    }
                },
                None => PathBuf::from(&d),
            };
            if !path.is_absolute() {
                return Err(invalid(
                    origin,
                    &field("state_dirs"),
                    format!("has `{d}`, which is not an absolute path; write the full path or start it with ~/"),
                ));
            }
            state_dirs.push(path);
        }
        for k in a.env.keys() {
            if k.is_empty() || k.contains('=') || k.contains('\0') {
                return Err(invalid(
                    origin,
                    &field("env"),
                    format!("has `{k}`, which cannot be an environment variable's name"),
                ));
            }
        }
        agents.insert(
            name,
            AcpAgentConfig {
                command,
                args: a.args,
                state_dirs,
                env: a.env,
                local: a.local.unwrap_or(false),
            },
        );
    }
    Ok(agents)
}

/// `raw` over `base`, validating agent names; `prefix` names the table in errors.
fn merge_roles(
    origin: &str,
    prefix: &str,
    base: &Roles,
    raw: RawRoles,
    acp_agents: &std::collections::BTreeMap<String, AcpAgentConfig>,
) -> Result<Roles, ConfigError> {
    let mut roles = base.clone();
    if let Some(raw) = &raw.arbiter {
        merge_panel(
            origin,
            &format!("{prefix}.arbiter"),
            &mut roles.panel,
            raw,
            acp_agents,
        )?;
    }
    for (name, raw_role, role) in [
        ("planner", raw.planner, &mut roles.planner),
        ("owner", raw.owner, &mut roles.owner),
        ("reviewer", raw.reviewer, &mut roles.reviewer),
        ("arbiter", raw.arbiter, &mut roles.arbiter),
    ] {
        let Some(raw_role) = raw_role else { continue };
        if name != "arbiter" {
            only_for_the_arbiter(origin, &format!("{prefix}.{name}"), &raw_role)?;
        }
        merge_role(
            origin,
            &format!("{prefix}.{name}"),
            role,
            raw_role,
            acp_agents,
        )?;
    }
    if let Some(raw) = raw.tester {
        let field = format!("{prefix}.tester");
        if raw.max_challenge_rounds.is_some() {
            return Err(invalid(
                origin,
                &format!("{field}.max_challenge_rounds"),
                "is only for [roles.challenger]; remove it here",
            ));
        }
        if raw.enabled == Some(false) {
            roles.tester = None;
        } else {
            let mut t = roles.tester.take().unwrap_or_default();
            let role = RawRole {
                agent: raw.agent,
                model: raw.model,
                effort: raw.effort,
                ..RawRole::default()
            };
            merge_role(origin, &field, &mut t, role, acp_agents)?;
            roles.tester = Some(t);
        }
    }
    if let Some(raw) = raw.challenger {
        let field = format!("{prefix}.challenger");
        // A project turns off the challenger it inherits with `enabled = false`.
        if raw.enabled == Some(false) {
            roles.challenger = None;
        } else {
            let mut c = roles.challenger.take().unwrap_or(Challenger {
                role: RoleConfig::default(),
                max_challenge_rounds: DEFAULT_CHALLENGE_ROUNDS,
            });
            if let Some(n) = raw.max_challenge_rounds {
                c.max_challenge_rounds =
                    positive(origin, &format!("{field}.max_challenge_rounds"), n)?;
            }
            let role = RawRole {
                agent: raw.agent,
                model: raw.model,
                effort: raw.effort,
                ..RawRole::default()
            };
            merge_role(origin, &field, &mut c.role, role, acp_agents)?;
            roles.challenger = Some(c);
        }
    }
    Ok(roles)
}

fn merge_role(
    origin: &str,
    field: &str,
    role: &mut RoleConfig,
    raw: RawRole,
    acp_agents: &std::collections::BTreeMap<String, AcpAgentConfig>,
) -> Result<(), ConfigError> {
    match raw.agent {
        None => {}
        Some(RawAgentChain::One(agent)) => {
            check_agent(origin, &format!("{field}.agent"), &agent, acp_agents)?;
            role.agent = agent;
            role.fallback.clear();
        }
        Some(RawAgentChain::Chain(chain)) => {
            let Some((first, rest)) = chain.split_first() else {
                return Err(invalid(
                    origin,
                    &format!("{field}.agent"),
                    "is an empty list; name at least one agent, e.g. [\"claude\", \"codex\"]",
                ));
            };
            for (i, agent) in chain.iter().enumerate() {
                let at = format!("{field}.agent[{i}]");
                check_agent(origin, &at, agent, acp_agents)?;
                if chain[..i].contains(agent) {
                    return Err(invalid(
                        origin,
                        &at,
                        format!("names `{agent}` twice; list each agent once, in the order they are tried"),
                    ));
                }
            }
            role.agent = first.clone();
            role.fallback = rest.to_vec();
        }
    }
    if let Some(m) = raw.model {
        role.model = Some(m).filter(|m| !m.is_empty());
    }
    if let Some(e) = raw.effort {
        role.effort = Some(e).filter(|e| !e.is_empty());
    }
    Ok(())
}

/// `panel` and `panel_timeout_secs` of `[roles.arbiter]` over `panel`; `panel = []`
/// turns an inherited panel off.
fn merge_panel(
    origin: &str,
    field: &str,
    panel: &mut Option<Panel>,
    raw: &RawRole,
    acp_agents: &std::collections::BTreeMap<String, AcpAgentConfig>,
) -> Result<(), ConfigError> {
    if let Some(specs) = &raw.panel {
        let field = format!("{field}.panel");
        let mut members: Vec<PanelMember> = Vec::new();
        for spec in specs {
            let member = PanelMember::parse(spec).map_err(|e| invalid(origin, &field, e))?;
            check_agent(origin, &field, &member.agent, acp_agents)?;
            if members.contains(&member) {
                return Err(invalid(
                    origin,
                    &field,
                    format!(
                        "has `{}` twice; each member gives one opinion, list it once",
                        member.label()
                    ),
                ));
            }
            members.push(member);
        }
        if members.len() > MAX_PANEL {
            return Err(invalid(
                origin,
                &field,
                format!("has {} members; at most {MAX_PANEL} are asked (each one is a session per arbiter call)", members.len()),
            ));
        }
        let timeout_secs = panel
            .as_ref()
            .map_or(DEFAULT_PANEL_TIMEOUT_SECS, |p| p.timeout_secs);
        *panel = (!members.is_empty()).then_some(Panel {
            members,
            timeout_secs,
        });
    }
    if let Some(secs) = raw.panel_timeout_secs {
        let field = format!("{field}.panel_timeout_secs");
        if secs == 0 {
            return Err(invalid(origin, &field, "must be at least 1"));
        }
        match panel {
            Some(p) => p.timeout_secs = secs,
            None => {
                return Err(invalid(
                    origin,
                    &field,
                    "is set but the arbiter has no panel; add `panel = [\"claude\", \"codex:gpt-5-codex\"]` or remove it",
                ))
            }
        }
    }
    Ok(())
}

/// Panel members at most.
pub const MAX_PANEL: usize = 8;

/// A role other than the arbiter names the arbiter's own keys.
fn only_for_the_arbiter(origin: &str, field: &str, raw: &RawRole) -> Result<(), ConfigError> {
    for (key, set) in [
        ("panel", raw.panel.is_some()),
        ("panel_timeout_secs", raw.panel_timeout_secs.is_some()),
    ] {
        if set {
            return Err(invalid(
                origin,
                &format!("{field}.{key}"),
                "is only for [roles.arbiter]; remove it here",
            ));
        }
    }
    Ok(())
}

fn positive(origin: &str, field: &str, n: u32) -> Result<u32, ConfigError> {
    if n == 0 {
        Err(invalid(origin, field, "must be at least 1"))
    } else {
        Ok(n)
    }
}

/// The agent backends a role may name.
pub const AGENTS: &[&str] = &["claude", "codex", "gemini", "openai", "anthropic"];

fn check_agent(
    origin: &str,
    field: &str,
    agent: &str,
    acp_agents: &std::collections::BTreeMap<String, AcpAgentConfig>,
) -> Result<(), ConfigError> {
    if AGENTS.contains(&agent) {
        return Ok(());
    }
    match agent.strip_prefix("acp:") {
        Some(name) if acp_agents.contains_key(name) => Ok(()),
        Some(name) => Err(invalid(origin, field, undeclared_acp(name, acp_agents.keys()))),
        None => Err(invalid(
            origin,
            field,
            format!(
                "is `{agent}`; use one of {} or acp:<name> for an agent declared in [agents.acp.<name>]",
                AGENTS.join(", ")
            ),
        )),
    }
}

/// Why `acp:<name>` is refused when no `[agents.acp.<name>]` declares it, and what to do.
pub fn undeclared_acp<'a>(name: &str, declared: impl Iterator<Item = &'a String>) -> String {
    let declared: Vec<String> = declared.map(|n| format!("acp:{n}")).collect();
    let known = if declared.is_empty() {
        "none is declared".to_owned()
    } else {
        format!("declared: {}", declared.join(", "))
    };
    format!(
        "names the ACP agent `{name}`, which the config does not declare ({known}); add [agents.acp.{name}] with its command, args and state_dirs"
    )
}
