//! The command line, as clap sees it. `--help` on any command teaches its use.

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// gaffer runs a team of AI coding agents on your repositories: a planner breaks a
/// request down, an owner codes in its own git worktree, a read-only reviewer
/// checks the work, an arbiter settles deadlocks, your checks run, and the
/// result ships as a branch. Every step is journaled, so a crash never loses
/// work or repeats an effect.
#[derive(Debug, Parser)]
#[command(name = "gaffer", version, about, long_about = None, max_term_width = 100)]
#[command(
    after_help = "Start with `gaffer init`, then `gaffer doctor`.\nExit codes: 0 ok, 1 failed, 2 usage, 78 configuration or precondition."
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

/// Options every command honours.
#[derive(Debug, Args)]
pub struct Global {
    /// Config file [default: $XDG_CONFIG_HOME/gaffer/config.toml]
    #[arg(long, global = true, env = "GAFFER_CONFIG", value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Where the journal and worktrees live [default: $XDG_DATA_HOME/gaffer]
    #[arg(long, global = true, env = "GAFFER_DATA_DIR", value_name = "PATH")]
    pub data_dir: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Write a commented config file with every setting and its default.
    Init(InitArgs),
    /// Check the config, the journal, git, and which agents and API keys are available.
    Doctor(JsonFlag),
    /// List and inspect tasks.
    #[command(subcommand)]
    Task(TaskCommand),
    /// Check or repair the journal.
    #[command(subcommand)]
    Journal(JournalCommand),
}

#[derive(Debug, Args)]
pub struct InitArgs {
    /// Overwrite an existing config file.
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct JsonFlag {
    /// Print JSON for scripts instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum TaskCommand {
    /// List tasks, newest first.
    List(TaskListArgs),
    /// Show one task: stage, steps, approvals, sessions.
    Show(TaskShowArgs),
}

#[derive(Debug, Args)]
pub struct TaskListArgs {
    /// Only tasks of this project (id).
    #[arg(long)]
    pub project: Option<String>,
    /// Only tasks in this stage (queued, coding, done, failed, …).
    #[arg(long)]
    pub stage: Option<String>,
    /// At most this many.
    #[arg(long, default_value_t = 50)]
    pub limit: i64,
    /// Print JSON for scripts instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct TaskShowArgs {
    /// The task id (as printed by `gaffer task list`).
    pub id: String,
    /// Print JSON for scripts instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum JournalCommand {
    /// Check every hash chain, replay every stream, and compare the projections
    /// with a rebuild. Exits 1 naming the first broken task and seq.
    Verify(JsonFlag),
    /// Recompute every projection from the events alone.
    Rebuild(JsonFlag),
}
