//! Notifications from every command that runs tasks: `gaffer serve`, and also
//! `gaffer run` / `gaffer task resume` and `gaffer worker`, so a person who starts
//! a task in a terminal and walks away hears about its approvals on their phone.
//!
//! Any number of these processes may notify on one journal: each notification is
//! delivered once (a claim in the outbox, see `gaffer-notify`).
//!
//! One-tap links and task pages need a server to open them. `gaffer serve` is
//! one. Another command links only to a `gaffer serve` of this data dir that
//! answers when the notification is sent (its links are signed with this data
//! dir's secret, so only that server takes them), at `[server] public_url` if
//! set, else at the address it recorded. With no such server, a notification
//! carries no link at all, and an approval's names the commands that decide it.

use crate::cli::Global;
use crate::error::{CliError, Result};
use gaffer_app::App;
use gaffer_config::Config;
use gaffer_notify::{LinkKey, Notifier, Reach, Retry, ServerUrl};
use std::path::Path;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How long a command that is about to exit waits for its last notifications.
const FLUSH_WITHIN: Duration = Duration::from_secs(15);

/// A notifier running beside a command.
pub struct Running {
    notifier: Notifier,
    handle: JoinHandle<()>,
    stop: CancellationToken,
}

impl Running {
    /// Stop following, then send what is due (the task's end) before the command
    /// exits; say so when something is left for the next notifier.
    pub async fn finish(self) {
        self.stop.cancel();
        let _ = self.handle.await;
        let left = self.notifier.flush(FLUSH_WITHIN).await;
        if left > 0 {
            crate::term::note(format_args!(
                "gaffer: {left} notification{} not delivered yet; the next `gaffer serve`, `gaffer run` or `gaffer worker` on this journal retries",
                if left == 1 { " is" } else { "s are" }
            ));
        }
    }

    /// Stop and wait for it (a server or worker stopping: what is left stays in
    /// the outbox for the next notifier).
    pub async fn stop(self) {
        self.stop.cancel();
        let _ = self.handle.await;
    }
}

/// Start the notifier when `[[notify]]` names targets; its links and task pages
/// lead to what `server` finds.
pub fn start(
    global: &Global,
    config: &Config,
    app: &App,
    key: LinkKey,
    server: ServerUrl,
    stop: &CancellationToken,
) -> Result<Option<Running>> {
    if config.notify.is_empty() {
        return Ok(None);
    }
    let reach = Reach {
        links: Some(key),
        server,
        gaffer: gaffer_command(global),
    };
    let notifier = Notifier::new(app.clone(), config.notify.clone(), reach, Retry::default())
        .map_err(|e| CliError::config(e.to_string()))?;
    let stop = stop.child_token();
    let handle = {
        let (notifier, stop) = (notifier.clone(), stop.clone());
        tokio::spawn(async move {
            if let Err(e) = notifier.run(stop).await {
                errln!("gaffer: notifications stopped: {e}");
            }
        })
    };
    Ok(Some(Running {
        notifier,
        handle,
        stop,
    }))
}

/// For a command that is not a server: the `gaffer serve` of this data dir, if
/// one answers when asked.
pub fn server_of_data_dir(config: &Config) -> ServerUrl {
    let (data_dir, public) = (config.data_dir.clone(), config.public_url.clone());
    ServerUrl::found_by(move || served_base(&data_dir, public.as_deref()))
}

/// Where a running `gaffer serve` of `data_dir` is reached: `public_url`, else its
/// recorded address; `None` when none answers.
fn served_base(data_dir: &Path, public_url: Option<&str>) -> Option<String> {
    let addr = super::serve::served_address(data_dir)?;
    Some(public_url.map_or_else(|| super::serve::page_base(addr), str::to_owned))
}

/// The targets, for a line saying notifications are on.
pub fn targets(config: &Config) -> String {
    let names: Vec<String> = config
        .notify
        .iter()
        .map(|t| format!("{} ({})", t.name, t.channel()))
        .collect();
    names.join(", ")
}

/// Start notifying beside a command that runs tasks but serves nothing, saying
/// so (unless `quiet`) and where links will lead.
pub fn start_beside(
    global: &Global,
    config: &Config,
    app: &App,
    stop: &CancellationToken,
) -> Result<Option<Running>> {
    if config.notify.is_empty() {
        return Ok(None);
    }
    let key = LinkKey::new(super::serve::local_secret(config)?.derived_key("notify-link"));
    let running = start(global, config, app, key, server_of_data_dir(config), stop)?;
    if !global.quiet {
        let links = match served_base(&config.data_dir, config.public_url.as_deref()) {
            Some(base) => format!("links open on {base}"),
            None => "without links (no `gaffer serve` of this data dir is running): approvals name the `gaffer approve` command".to_owned(),
        };
        crate::term::note(format_args!(
            "notifications: on, to {}; {links}",
            targets(config)
        ));
    }
    Ok(running)
}

/// How a person runs gaffer on this journal: `gaffer` with the flags this
/// command was given that choose the journal (a database password is masked:
/// it is never sent anywhere).
pub fn gaffer_command(global: &Global) -> String {
    let mut command = "gaffer".to_owned();
    let mut flag = |name: &str, value: &str| {
        command.push_str(&format!(" --{name} {}", shell_word(value)));
    };
    if let Some(c) = &global.config {
        flag("config", &c.to_string_lossy());
    }
    if let Some(d) = &global.data_dir {
        flag("data-dir", &d.to_string_lossy());
    }
    if let Some(db) = &global.db {
        flag("db", &gaffer_store::mask_url(db));
    }
    command
}

/// `word` as one shell word: as it is when that is safe, else single-quoted.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:@=,".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::shell_word;

    #[test]
    fn a_path_with_spaces_or_quotes_stays_one_shell_word() {
        assert_eq!(
            shell_word("/srv/gaffer/config.toml"),
            "/srv/gaffer/config.toml"
        );
        assert_eq!(
            shell_word("/home/ana/my gaffer.toml"),
            "'/home/ana/my gaffer.toml'"
        );
        assert_eq!(shell_word("it's;rm -rf"), r"'it'\''s;rm -rf'");
        assert_eq!(shell_word(""), "''");
    }
}
