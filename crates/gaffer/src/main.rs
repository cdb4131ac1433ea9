//! `gaffer`: run a team of AI coding agents on your repositories.

mod cli;
mod commands;
mod error;
mod output;
mod setup;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("gaffer: cannot start the async runtime: {e}");
            return ExitCode::from(error::EXIT_FAILED);
        }
    };
    match runtime.block_on(commands::run(cli)) {
        Ok(code) => code,
        Err(e) => e.report(),
    }
}
