//! `gaffer`: run a team of AI coding agents on your repositories.

#[macro_use]
mod term;
mod cli;
mod commands;
mod error;
mod follow_up;
mod ids;
mod live;
mod output;
mod render;
mod setup;

use clap::Parser;
use std::process::ExitCode;

/// `0.1.0 (1a2b3c4d5e 2026-01-31)`: the version and the commit it was built from.
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("GAFFER_COMMIT"), ")");

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            term::note(format_args!("gaffer: cannot start the async runtime: {e}"));
            return ExitCode::from(error::EXIT_FAILED);
        }
    };
    let code = match runtime.block_on(commands::run(cli)) {
        Ok(code) => code,
        Err(e) => e.report(),
    };
    // Work still waiting (a question nobody answers any more) must not hold the exit.
    runtime.shutdown_background();
    code
}
