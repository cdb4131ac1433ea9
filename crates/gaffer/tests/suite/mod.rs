mod cli;
mod support;
