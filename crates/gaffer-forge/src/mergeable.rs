//! Whether a pull request can be merged into its base as it stands, as the forge says,
//! and how a task branch takes in a base that moved ([`ConflictStrategy`]).
//!
//! The forge's word is a hint, never acted on blindly: Gitea computes `mergeable` in
//! the background (it reads `false` while checking, and has been seen to stay `false`
//! after a fix), and GitHub answers `null` until it has computed it. The engine fetches
//! the base and lets git decide what really conflicts.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What the forge says about merging a pull request into its base.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mergeability {
    /// It can be merged as it is.
    Clean,
    /// The base moved and the forge requires the branch to be up to date before a
    /// merge (GitHub `mergeable_state: "behind"`), with no conflict.
    Behind,
    /// Merging it conflicts with the base (Gitea `mergeable: false`, GitHub
    /// `mergeable: false` / `mergeable_state: "dirty"`).
    Conflicted,
    /// Not known (yet): GitHub is still computing it (`mergeable: null`), or the forge
    /// did not say. Ask again later; it is not a conflict.
    #[default]
    Unknown,
}

impl Mergeability {
    /// Read a Gitea/Forgejo pull request object: `mergeable` is a boolean. A closed or
    /// merged pull request has nothing to merge.
    pub(crate) fn from_gitea(pr: &Value) -> Self {
        if pr.get("state").and_then(Value::as_str) != Some("open") {
            return Self::Unknown;
        }
        match pr.get("mergeable").and_then(Value::as_bool) {
            Some(true) => Self::Clean,
            Some(false) => Self::Conflicted,
            None => Self::Unknown,
        }
    }

    /// Read a GitHub pull request object: `mergeable` is `true`, `false` or `null`
    /// (computing), `mergeable_state` says why (`clean`, `dirty`, `behind`, `blocked`,
    /// `unstable`, `unknown`, …). Only `dirty` (or `mergeable: false`) is a conflict,
    /// and only `behind` asks for an update; a blocked or unstable pull request waits
    /// for people or CI, not for gaffer.
    pub(crate) fn from_github(pr: &Value) -> Self {
        if pr.get("state").and_then(Value::as_str) != Some("open") {
            return Self::Unknown;
        }
        let state = pr.get("mergeable_state").and_then(Value::as_str);
        match (pr.get("mergeable").and_then(Value::as_bool), state) {
            (_, Some("dirty")) | (Some(false), _) => Self::Conflicted,
            (None, _) | (_, Some("unknown")) => Self::Unknown,
            (Some(true), Some("behind")) => Self::Behind,
            (Some(true), _) => Self::Clean,
        }
    }

    /// Read a GitLab merge request object: `detailed_merge_status` (`mergeable`,
    /// `conflict`, `need_rebase` when the project merges by fast-forward, `checking`
    /// or `unchecked` while GitLab computes it, or what else holds it back: approvals,
    /// CI, discussions, a draft), with `has_conflicts` and the older `merge_status` for
    /// instances before 15.6. Only a conflict or `need_rebase` asks gaffer for work;
    /// the rest waits for people or CI.
    pub(crate) fn from_gitlab(mr: &Value) -> Self {
        if mr.get("state").and_then(Value::as_str) != Some("opened") {
            return Self::Unknown;
        }
        let s = |k: &str| mr.get(k).and_then(Value::as_str);
        match s("detailed_merge_status") {
            Some("conflict") => Self::Conflicted,
            Some("need_rebase") => Self::Behind,
            Some("unchecked" | "checking" | "preparing" | "approvals_syncing") => Self::Unknown,
            Some(_) => Self::Clean,
            None if mr.get("has_conflicts").and_then(Value::as_bool) == Some(true) => {
                Self::Conflicted
            }
            None => match s("merge_status") {
                Some("can_be_merged") => Self::Clean,
                Some("cannot_be_merged") => Self::Conflicted,
                _ => Self::Unknown,
            },
        }
    }

    /// Whether the branch must take in its base before the pull request can merge.
    pub fn needs_update(self) -> bool {
        matches!(self, Self::Behind | Self::Conflicted)
    }
}

/// How a task branch takes in a base that moved (`conflict_strategy` in a project's
/// forge settings).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConflictStrategy {
    /// Replay the branch's commits on the new base (`git rebase`): the history stays
    /// one line, and the push replaces the branch (`--force-with-lease` against the
    /// commit gaffer last pushed, so nobody else's push is overwritten). The default:
    /// what the forge's "update branch by rebase" does, and a review reads the same
    /// commits as before, without a merge commit in the middle.
    #[default]
    Rebase,
    /// Merge the base into the branch (`git merge`): nothing pushed is rewritten, the
    /// push is a plain fast-forward.
    Merge,
}

impl ConflictStrategy {
    /// The name, as in the config.
    pub fn name(self) -> &'static str {
        match self {
            Self::Rebase => "rebase",
            Self::Merge => "merge",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn github_null_is_unknown_not_a_conflict() {
        let pr = |m: Value, s: &str| json!({"state": "open", "mergeable": m, "mergeable_state": s});
        assert_eq!(
            Mergeability::from_github(&pr(Value::Null, "unknown")),
            Mergeability::Unknown
        );
        assert_eq!(
            Mergeability::from_github(&pr(json!(false), "dirty")),
            Mergeability::Conflicted
        );
        assert_eq!(
            Mergeability::from_github(&pr(json!(true), "behind")),
            Mergeability::Behind
        );
        assert_eq!(
            Mergeability::from_github(&pr(json!(true), "blocked")),
            Mergeability::Clean
        );
        assert_eq!(
            Mergeability::from_github(&pr(json!(true), "clean")),
            Mergeability::Clean
        );
    }

    #[test]
    fn gitea_reads_the_boolean_and_closed_prs_are_unknown() {
        let open = |m: Value| json!({"state": "open", "mergeable": m});
        assert_eq!(
            Mergeability::from_gitea(&open(json!(true))),
            Mergeability::Clean
        );
        assert_eq!(
            Mergeability::from_gitea(&open(json!(false))),
            Mergeability::Conflicted
        );
        assert_eq!(
            Mergeability::from_gitea(&json!({"state": "closed", "mergeable": false})),
            Mergeability::Unknown
        );
    }
}
