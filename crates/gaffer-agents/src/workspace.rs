//! The one canonical workspace key. Everything that names a workspace goes through
//! [`canonical_workspace`]: `.`, `./`, absolute, trailing `/`, `..` inside and symlinks
//! all resolve to the same physical path (like `cd -P && pwd -P`).

use std::path::{Path, PathBuf};

use crate::error::{AgentError, Result};

/// Resolve `input` (relative to the process's current directory) to its physical path.
pub fn canonical_workspace(input: &Path) -> Result<PathBuf> {
    let base = std::env::current_dir().map_err(|e| AgentError::Workspace {
        path: input.to_path_buf(),
        reason: format!("current directory unknown: {e}"),
    })?;
    canonical_workspace_from(&base, input)
}

/// Resolve `input` relative to `base` (when relative) to its physical path: symlinks,
/// `.` and `..` are resolved by the file system, so every spelling gives one key.
pub fn canonical_workspace_from(base: &Path, input: &Path) -> Result<PathBuf> {
    let joined = if input.is_absolute() {
        input.to_path_buf()
    } else {
        base.join(input)
    };
    let canon = std::fs::canonicalize(&joined).map_err(|e| AgentError::Workspace {
        path: input.to_path_buf(),
        reason: e.to_string(),
    })?;
    if !canon.is_dir() {
        return Err(AgentError::Workspace {
            path: input.to_path_buf(),
            reason: "not a directory".into(),
        });
    }
    Ok(canon)
}

/// The canonical workspace key (the physical path as a string).
pub fn workspace_key(canonical: &Path) -> String {
    canonical.to_string_lossy().into_owned()
}

/// Claude Code's project directory name for a workspace: the physical path with every
/// character outside `[A-Za-z0-9]` replaced by `-`.
pub fn claude_project_key(canonical: &Path) -> String {
    canonical
        .to_string_lossy()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}
