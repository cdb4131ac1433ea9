//! One module per command; each takes its parsed arguments and returns an exit code.

mod approvals;
mod doctor;
mod init;
mod journal;
mod serve;
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
        Command::Approvals(args) => approvals::list(&cli.global, args.json, args.all).await,
        Command::Approve(args) => {
            approvals::decide(
                &cli.global,
                &args.id,
                gaffer_core::Decision::Approve,
                args.note,
                args.json,
            )
            .await
        }
        Command::Deny(args) => {
            approvals::decide(
                &cli.global,
                &args.id,
                gaffer_core::Decision::Deny,
                args.note,
                args.json,
            )
            .await
        }
        Command::Auto(args) => {
            approvals::auto(
                &cli.global,
                args.state == crate::cli::OnOff::On,
                args.project,
                args.json,
            )
            .await
        }
        Command::Serve(args) => serve::run(&cli.global, args.listen).await,
    }
}
