//! gaffer-core tests: given events, when an event, expect a state or a rejection.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod suite;
