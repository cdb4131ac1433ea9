mod approvals_cli;
mod cli;
mod support;
