//! gaffer-core tests: given events, when an event, expect a state or a rejection.
mod suite;
