#![allow(clippy::unwrap_used, clippy::expect_used)]
//! gaffer-forge tests on real git repositories.
mod suite;
