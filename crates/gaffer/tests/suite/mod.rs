mod approvals_cli;
mod cli;
mod run;
mod support;
mod serve;
