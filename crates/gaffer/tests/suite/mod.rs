mod approvals_cli;
mod cli;
mod context;
mod run;
mod serve;
mod support;
