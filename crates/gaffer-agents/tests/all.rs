//! Integration tests of gaffer-agents: the production backends against the testkit fakes.
mod suite;
