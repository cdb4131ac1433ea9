//! Fakes that speak the real protocols of the services gaffer talks to, for tests.
//!
//! * `fake-claude`, `fake-codex`, `fake-acp`: agent executables driven by a
//!   [`scenario::Scenario`] file named by `GAFFER_FAKE_SCENARIO`; each appends one line per
//!   side-effecting action to the file named by `GAFFER_FAKE_LOG`. Find them with
//!   [`bins::fake_bin`].
//! * [`llm::FakeLlmServer`]: an OpenAI-compatible Chat Completions + Anthropic Messages
//!   server on loopback, driven by the same scenario format.
//! * [`model::ModelServer`]: a scripted model server speaking Anthropic Messages, OpenAI
//!   Responses and Gemini `streamGenerateContent` (streaming), for the real agent CLIs
//!   [`clis`] finds (installed from npm by `scripts/agent-clis/install`).
//! * [`forge`]: fake Gitea/Forgejo, GitHub and Vikunja APIs, and a bare git remote (with git smart HTTP).
//! * [`postgres`]: a throwaway PostgreSQL server and a fresh database per test.
//! * [`discord::FakeDiscord`]: Discord's REST API and gateway websocket on loopback.
//! * [`browser`]: real headless Chromium through chromedriver, for the web page.
//!
//! Never shipped in the binary.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod bins;
pub mod browser;
pub mod clis;
pub mod discord;
pub mod fakes;
pub mod forge;
pub mod git;
pub mod llm;
pub mod model;
pub mod notify;
pub mod postgres;
pub mod scenario;
