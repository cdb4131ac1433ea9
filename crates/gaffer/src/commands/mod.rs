//! One module per command; each takes its parsed arguments and returns an exit code.

mod after;
mod approvals;
mod audit;
mod backup;
mod db;
mod doctor;
mod gc;
mod index;
mod init;
mod intake;
mod journal;
mod live;
mod manual;
mod memory;
mod notifications;
mod project;
mod run;
mod schedule_changes;
mod schedules;
mod serve;
mod service;
mod task;
mod worker;

use crate::cli::{
    ApprovalCommand, Cli, Command, DbCommand, JournalCommand, MemoryCommand, ProjectCommand,
    SchedulesCommand, ServiceCommand, TaskCommand, TokenCommand,
};
use crate::error::Result;
use std::process::ExitCode;

/// Run the parsed command line.
pub async fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Init(args) => init::run(&cli.global, &args),
        Command::Doctor(args) => doctor::run(&cli.global, args.json).await,
        Command::Task(TaskCommand::List(args)) => task::list(&cli.global, &args).await,
        Command::Task(TaskCommand::Show(args)) => task::show(&cli.global, &args).await,
        Command::Task(TaskCommand::Cancel(args)) => run::cancel(&cli.global, &args).await,
        Command::Task(TaskCommand::Retry(args)) => run::retry(&cli.global, &args).await,
        Command::Task(TaskCommand::Resume(args)) => run::resume(&cli.global, &args).await,
        Command::Project(ProjectCommand::Add(args)) => project::add(&cli.global, &args).await,
        Command::Project(ProjectCommand::List(args)) => project::list(&cli.global, args.json).await,
        Command::Memory(MemoryCommand::Show(args)) => memory::show(&cli.global, &args).await,
        Command::Memory(MemoryCommand::Edit(args)) => memory::edit(&cli.global, &args).await,
        Command::Memory(MemoryCommand::Add(args)) => memory::add(&cli.global, &args).await,
        Command::Run(args) => run::run(&cli.global, &args).await,
        Command::Index(args) => index::index(&cli.global, args).await,
        Command::Context(args) => index::context(&cli.global, args).await,
        Command::Journal(JournalCommand::Verify(args)) => {
            journal::verify(&cli.global, args.json).await
        }
        Command::Journal(JournalCommand::Rebuild(args)) => {
            journal::rebuild(&cli.global, args.json).await
        }
        Command::Backup(args) => backup::backup(&cli.global, &args).await,
        Command::Restore(args) => backup::restore(&cli.global, &args).await,
        Command::Db(DbCommand::Copy(args)) => db::copy(&cli.global, &args).await,
        Command::Approvals(args) => approvals::list(&cli.global, args.json, args.all).await,
        Command::Approval(ApprovalCommand::Show(args)) => approvals::show(&cli.global, &args).await,
        Command::Approve(args) => {
            let approval = if args.for_task {
                approvals::Verdict::AllowForTask
            } else {
                approvals::Verdict::Once(gaffer_core::Decision::Approve)
            };
            approvals::decide(&cli.global, &args.decide, approval).await
        }
        Command::Deny(args) => {
            let denial = approvals::Verdict::Once(gaffer_core::Decision::Deny);
            approvals::decide(&cli.global, &args, denial).await
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
        Command::Say(args) => live::say(&cli.global, &args).await,
        Command::Attach(args) => live::attach(&cli.global, &args).await,
        Command::Interrupt(args) => live::interrupt(&cli.global, &args).await,
        Command::Serve(args) => serve::run(&cli.global, args).await,
        Command::LoginLink(args) => serve::login_link(&cli.global, &args),
        Command::Gc(args) => gc::run(&cli.global, &args).await,
        Command::Audit(args) => audit::run(&cli.global, &args).await,
        Command::Service(ServiceCommand::Install(args)) => {
            service::install(&cli.global, &args).await
        }
        Command::Service(ServiceCommand::Uninstall(args)) => {
            service::uninstall(&cli.global, &args).await
        }
        Command::Service(ServiceCommand::Status(args)) => service::status(&cli.global, &args).await,
        Command::Worker(args) => worker::worker(&cli.global, &args).await,
        Command::Schedules(args) => match args.command {
            None => schedules::run(&cli.global, args.json).await,
            Some(SchedulesCommand::Add(args)) => schedule_changes::add(&cli.global, &args).await,
            Some(SchedulesCommand::Remove(args)) => {
                schedule_changes::remove(&cli.global, &args).await
            }
        },
        Command::Workers(args) => worker::workers(&cli.global, &args).await,
        Command::Token(TokenCommand::New(args)) => audit::new_token(&args),
        Command::Completions(args) => manual::completions(&args),
        Command::Man(args) => manual::man(&args),
    }
}
