//! Integration tests of gaffer-agents: the production backends against the testkit fakes.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly

mod suite;
