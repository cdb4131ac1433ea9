//! The pipeline end to end: real git, a real journal, the testkit's fake agents.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod suite;
