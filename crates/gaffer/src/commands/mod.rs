//! One module per command; each takes its parsed arguments and returns an exit code.

mod doctor;
mod init;
mod journal;
mod task;

use crate::cli::{Cli, Command, JournalCommand, TaskCommand};
use crate::error::Result;
use std::process::ExitCode;

/// Run the parsed command line.
pub async fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Init(args) => init::run(&cli.global, &args),
        Command::Doctor(args) => doctor::run(&cli.global, args.json).await,
        Command::Task(TaskCommand::List(args)) => task::list(&cli.global, &args).await,
        Command::Task(TaskCommand::Show(args)) => task::show(&cli.global, &args).await,
        Command::Journal(JournalCommand::Verify(args)) => {
            journal::verify(&cli.global, args.json).await
        }
        Command::Journal(JournalCommand::Rebuild(args)) => {
            journal::rebuild(&cli.global, args.json).await
        }
    }
}
