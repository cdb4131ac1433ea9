//! gaffer-store tests: the journal on a real SQLite file.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod suite;
