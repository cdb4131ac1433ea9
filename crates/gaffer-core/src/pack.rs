//! The repository context a step's agent was given: which files, whole or as signatures,
//! how many tokens each, within what budget. Recorded with the step
//! ([`crate::Event::StepContextPacked`]) so people see what an agent saw.

use serde::{Deserialize, Serialize};

/// How a file went into the pack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PackMode {
    /// The whole file.
    Full,
    /// Signatures with line spans (or one listing line).
    Skeleton,
}

impl PackMode {
    /// The snake_case name used on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            PackMode::Full => "full",
            PackMode::Skeleton => "skeleton",
        }
    }
}

/// One file of a pack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackedFile {
    /// Path relative to the worktree root, `/`-separated, redacted like everything stored.
    pub path: String,
    /// Whole or skeleton.
    pub mode: PackMode,
    /// Tokens of what the agent got for this file.
    pub tokens: u64,
}

/// The context one agent turn got, in rank order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextPack {
    /// The budget, in tokens.
    pub budget: u64,
    /// Tokens used: the sum over `files`, never above `budget`.
    pub used: u64,
    /// The files, in rank order.
    pub files: Vec<PackedFile>,
}

impl ContextPack {
    /// What is wrong with the pack, if anything: a path that is empty, absolute or climbs
    /// out of the worktree (`..`), a file listed twice, `used` not the sum of the files'
    /// tokens, or over the budget.
    pub fn problem(&self) -> Option<String> {
        let mut seen = std::collections::HashSet::new();
        for f in &self.files {
            let bad = f.path.is_empty()
                || f.path.starts_with('/')
                || f.path.split('/').any(|c| c == ".." || c.is_empty());
            if bad {
                return Some(format!("`{}` is not a path inside the worktree", f.path));
            }
            if !seen.insert(f.path.as_str()) {
                return Some(format!("`{}` is listed twice", f.path));
            }
        }
        let sum: u64 = self.files.iter().map(|f| f.tokens).sum();
        if sum != self.used {
            return Some(format!(
                "used is {} tokens but the files add up to {sum}",
                self.used
            ));
        }
        if self.used > self.budget {
            return Some(format!(
                "{} tokens used, over the budget of {}",
                self.used, self.budget
            ));
        }
        None
    }
}
