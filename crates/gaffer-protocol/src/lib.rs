//! gaffer's wire types. This crate depends on serde and nothing of the engine or
//! store, so clients, agents and the server agree on one definition.
//!
//! - [`activity`]: reading an agent's normalized activity (tool calls, text).
//! - [`api`]: HTTP API requests and responses, and SSE events.
//! - [`contracts`]: what the planner, reviewer and arbiter must answer with.
//! - [`receipts`]: what the shipping steps record (the pull request, CI results).

pub mod activity;
pub mod api;
pub mod contracts;
pub mod receipts;
pub mod words;
