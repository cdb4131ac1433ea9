mod approvals_cli;
mod cli;
mod context;
mod db;
mod run;
mod serve;
mod ship;
mod support;
