//! A tiny stand-in for the `gaffer` binary: `gaffer_dev index ...` / `gaffer_dev context ...`
//! with the same arguments, a directory cache under `$XDG_CACHE_HOME/gaffer/index` (or
//! `--cache-dir`). Used for development and by the eval (`score.py --gaffer`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use gaffer_index::cli::{run_context, run_index, ContextArgs, IndexArgs};
use gaffer_index::DirCache;

#[derive(Parser)]
#[command(name = "gaffer_dev")]
struct Cli {
    /// Where the index cache lives.
    #[arg(long, global = true)]
    cache_dir: Option<PathBuf>,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Index a repository.
    Index(IndexArgs),
    /// Select context for a task text.
    Context(ContextArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let cache = DirCache::new(cli.cache_dir.unwrap_or_else(DirCache::default_dir));
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let r = match &cli.cmd {
        Cmd::Index(a) => run_index(a, &cache, &mut out),
        Cmd::Context(a) => run_context(a, &cache, &mut out),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(gaffer_index::Error::Io(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("gaffer_dev: {e}");
            ExitCode::FAILURE
        }
    }
}
