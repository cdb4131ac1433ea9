mod bad_input;
mod incremental;
mod languages;
mod pack;
mod rank;
mod support;
