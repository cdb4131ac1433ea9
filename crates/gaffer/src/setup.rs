//! Turning global options into a configuration and an open journal.

use crate::cli::Global;
use crate::error::{CliError, Result};
use gaffer_config::{Config, Sources};
use gaffer_store::{Durability, Journal, Location};
use std::path::PathBuf;
use std::sync::Arc;

/// The person at the keyboard, as recorded in the journal.
pub fn cli_actor() -> gaffer_core::Actor {
    let name = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| "cli".into());
    gaffer_core::Actor::user(&name, "cli")
}

/// The config file in effect and whether the user named it.
pub fn config_file(global: &Global) -> (PathBuf, bool) {
    match &global.config {
        Some(path) => (path.clone(), true),
        None => (gaffer_config::xdg_defaults().0, false),
    }
}

/// Load the configuration: file, then environment, then flags.
pub fn load_config(global: &Global) -> Result<Config> {
    let env = |name: &str| std::env::var(name).ok();
    let config = gaffer_config::load(&Sources {
        file: Some(config_file(global)),
        data_dir_flag: global.data_dir.clone(),
        database_flag: global.db.clone(),
        default_data_dir: gaffer_config::xdg_defaults().1,
        env: &env,
    })?;
    init_logging(global, &config.log_level);
    Ok(config)
}

/// What gets logged: `-v`/`-q`, else `RUST_LOG`, else `log.level` (or `GAFFER_LOG`).
pub fn log_filter(global: &Global, configured: &str) -> String {
    match (global.quiet, global.verbose) {
        (true, _) => "error".into(),
        (_, 0) => std::env::var("RUST_LOG")
            .ok()
            .filter(|f| !f.trim().is_empty())
            .unwrap_or_else(|| configured.to_owned()),
        (_, 1) => "info".into(),
        (_, 2) => "debug".into(),
        _ => "trace".into(),
    }
}

/// Logs go to stderr, coloured only for a person (not in a pipe, not with `NO_COLOR`).
pub fn init_logging(global: &Global, configured: &str) {
    let wanted = log_filter(global, configured);
    let filter = tracing_subscriber::EnvFilter::try_new(&wanted).unwrap_or_else(|e| {
        // Only RUST_LOG can get here: the config's level was checked when loaded.
        crate::term::note(format_args!(
            "gaffer: warning: RUST_LOG `{}` is not a log filter ({e}); logging warnings only",
            crate::term::line(&wanted)
        ));
        tracing_subscriber::EnvFilter::new("warn")
    });
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| RedactedLine(Vec::new()));
    let _ = match global.log_format {
        crate::cli::LogFormat::Text => logs.with_ansi(console::colors_enabled_stderr()).try_init(),
        crate::cli::LogFormat::Json => logs
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(true)
            .try_init(),
    };
}

/// The redactor log lines go through: the last one [`redactor`] built (each is a
/// superset of the one before), else the credential shapes and variables alone.
static LOG_REDACTOR: std::sync::RwLock<Option<Arc<gaffer_agents::Redactor>>> =
    std::sync::RwLock::new(None);

/// One log line, written to stderr with its secrets replaced when it is complete
/// (the formatter writes each event through one writer, then drops it).
struct RedactedLine(Vec<u8>);

impl std::io::Write for RedactedLine {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for RedactedLine {
    fn drop(&mut self) {
        let text = String::from_utf8_lossy(&self.0);
        let current = LOG_REDACTOR.read().ok().and_then(|r| r.clone());
        let redactor = current.unwrap_or_else(|| {
            Arc::new(gaffer_agents::Redactor::from_env_and(Vec::<String>::new()))
        });
        // Through the terminal's log writer: above the live view's spinner line.
        let _ = std::io::Write::write_all(
            &mut crate::term::LogWriter,
            redactor.redact(&text).as_bytes(),
        );
    }
}

/// Open the journal the configuration names (creating the data dir for a SQLite
/// file). Commands that wait for what other processes do follow them too
/// ([`follow_others`]); one-shot commands read and exit.
pub async fn open_journal(config: &Config) -> Result<Arc<dyn Journal>> {
    let location = config.database_location();
    if let Ok(Location::Sqlite(path)) = Location::parse(&location) {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| {
                CliError::config(format!(
                    "cannot create {} for the journal: {e}; set --data-dir or database.url to a writable place",
                    parent.display()
                ))
            })?;
        }
    }
    Ok(gaffer_store::open(&location, durability(config)).await?)
}

/// From now on, what other gaffer processes append (a decision in another
/// terminal, a server, another machine on the same PostgreSQL) wakes this one too.
pub async fn follow_others(journal: &dyn Journal) -> Result<()> {
    Ok(journal.follow_other_processes().await?)
}

/// The store's durability setting for the configured one.
pub fn durability(config: &Config) -> Durability {
    match config.durability {
        gaffer_config::Durability::Full => Durability::Full,
        gaffer_config::Durability::Normal => Durability::Normal,
    }
}

/// The values of the forge and tracker tokens the config names by environment
/// variable (whatever the variables are called), for the redactor.
pub fn configured_token_values(config: &Config) -> Vec<String> {
    config
        .forges
        .values()
        .filter_map(|f| f.token_env.as_deref())
        .chain(config.trackers.values().map(|t| t.token_env.as_str()))
        .filter_map(|name| std::env::var(name).ok())
        .collect()
}

/// The redactor for everything gaffer stores, logs or shows (log lines use the last
/// one built from then on): the usual credential
/// variables of this process (`*_API_KEY`, `*_TOKEN`, ...) and the values of the
/// variables `[secrets] env` names, and `extra` (tokens read for this run).
pub fn redactor(config: &Config, extra: Vec<String>) -> gaffer_agents::Redactor {
    // The local secret too, if this machine has one: it must never be shown either.
    let local = std::fs::read_to_string(config.data_dir.join(gaffer_server::local::FILE_NAME))
        .ok()
        .map(|s| s.trim().to_owned());
    let redactor = gaffer_agents::Redactor::from_env_and(
        config
            .secret_env
            .iter()
            .filter_map(|name| std::env::var(name).ok())
            .chain(extra)
            .chain(local),
    );
    if let Ok(mut logs) = LOG_REDACTOR.write() {
        *logs = Some(Arc::new(redactor.clone()));
    }
    redactor
}
