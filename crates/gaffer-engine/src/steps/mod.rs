//! The body of each step kind, one module each. The driver records a step's
//! intent, calls its body here, and records the receipt or the failure. `scan`
//! is the secret scan the commit and push steps run first.

pub(crate) mod arbiter;
pub(crate) mod challenge;
pub(crate) mod check;
pub(crate) mod command;
pub(crate) mod follow_up;
pub(crate) mod owner;
pub(crate) mod panel;
pub(crate) mod plan;
pub(crate) mod review;
pub(crate) mod scan;
pub(crate) mod setup;
pub mod ship;
pub(crate) mod summary;
pub(crate) mod sync;
pub(crate) mod tester;
pub(crate) mod worktree;
