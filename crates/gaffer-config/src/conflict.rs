//! `conflict_strategy` in a project's forge settings: how a task branch takes in a
//! base that moved under its pull request. Parsed here, once: the binary maps the
//! typed value onto the forge's own type with an exhaustive match, so a spelling
//! the config accepts can never fall back to a default somewhere else.

use std::fmt;
use std::str::FromStr;

/// How the task branch takes in a base that moved under its pull request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ConflictStrategy {
    /// `rebase` (the default): replayed on the new base, pushed with
    /// `--force-with-lease`.
    #[default]
    Rebase,
    /// `merge`: the base merged in, a plain push.
    Merge,
}

impl ConflictStrategy {
    /// The name, as written in the config.
    pub fn name(self) -> &'static str {
        match self {
            Self::Rebase => "rebase",
            Self::Merge => "merge",
        }
    }
}

impl fmt::Display for ConflictStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ConflictStrategy {
    type Err = String;

    /// `rebase` or `merge`, in any case, spaces around ignored; the error says what
    /// was written and both choices.
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "rebase" => Ok(Self::Rebase),
            "merge" => Ok(Self::Merge),
            other => Err(format!(
                "is `{other}`; use \"rebase\" (replay the branch on the moved base, push with --force-with-lease) or \"merge\" (merge the base in, plain push)"
            )),
        }
    }
}
