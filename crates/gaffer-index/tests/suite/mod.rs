mod bad_input;
mod cli;
mod incremental;
mod languages;
mod pack;
mod rank;
mod support;
mod tiers;
