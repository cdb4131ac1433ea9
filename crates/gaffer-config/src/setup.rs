//! `[projects.<name>] setup`, `copy`, `port`: what a new worktree needs before the
//! owner starts (dependencies installed, files git ignores copied from the main
//! checkout, a free port for dev servers).

use crate::{invalid, ConfigError};
use std::path::{Component, Path};

/// How a project's new worktree is made ready.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorktreeSetup {
    /// Shell commands run in the worktree, in order, confined like the owner.
    pub commands: Vec<String>,
    /// Paths relative to the repository root, copied from the main checkout into the
    /// worktree; each must be ignored by git (else it would be committed).
    pub copy: Vec<String>,
    /// Whether a free TCP port is chosen for each task and exported as `GAFFER_PORT`.
    pub port: bool,
}

impl WorktreeSetup {
    /// Whether there is anything to do.
    pub fn is_empty(&self) -> bool {
        self.commands.is_empty() && self.copy.is_empty() && !self.port
    }
}

/// The project's setup, `None` when it has none; every bad entry named.
pub(crate) fn resolve(
    origin: &str,
    project: &str,
    setup: Option<Vec<String>>,
    copy: Option<Vec<String>>,
    port: Option<bool>,
) -> Result<Option<WorktreeSetup>, ConfigError> {
    let commands = setup.unwrap_or_default();
    if commands.iter().any(|c| c.trim().is_empty()) {
        return Err(invalid(
            origin,
            &format!("projects.{project}.setup"),
            "has an empty command; list shell commands like \"npm ci\"",
        ));
    }
    let copy = copy.unwrap_or_default();
    for path in &copy {
        let p = Path::new(path);
        let inside = !path.is_empty()
            && p.components()
                .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
            && p.components().any(|c| matches!(c, Component::Normal(_)));
        if !inside {
            return Err(invalid(
                origin,
                &format!("projects.{project}.copy"),
                format!("has `{path}`; list paths relative to the repository root, without `..`, like \".env\" or \"config/local.toml\""),
            ));
        }
    }
    let setup = WorktreeSetup {
        commands,
        copy,
        port: port.unwrap_or(false),
    };
    Ok((!setup.is_empty()).then_some(setup))
}
