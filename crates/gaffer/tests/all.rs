//! End-to-end tests of the `gaffer` binary.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod suite;
