//! The production Discord adapter against the testkit's fake Discord on loopback,
//! over a real journal and the real app service (and engine, where a task runs).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
