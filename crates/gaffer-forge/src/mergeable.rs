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

    /// Read a GitLab merge request object. `detailed_merge_status` names only the
    /// first check that holds the merge request back (`draft_status`,
    /// `not_approved`, `ci_must_pass`, `discussions_not_resolved`, … come before
    /// `conflict` and `need_rebase`), so `has_conflicts` is read as well: a draft
    /// that also conflicts is conflicted. `need_rebase` (the project merges by
    /// fast-forward and the base moved) is behind. While GitLab computes it
    /// (`unchecked`, `checking`, `preparing`, `approvals_syncing`) it is unknown, as
    /// `has_conflicts` may be from before the last push. Without
    /// `detailed_merge_status` (before GitLab 15.6), `has_conflicts` and
    /// `merge_status`. Anything else waits for people or CI, not gaffer.
    pub(crate) fn from_gitlab(mr: &Value) -> Self {
        if mr.get("state").and_then(Value::as_str) != Some("opened") {
            return Self::Unknown;
        }
        let s = |k: &str| mr.get(k).and_then(Value::as_str);
        let conflicts = mr.get("has_conflicts").and_then(Value::as_bool) == Some(true);
        match s("detailed_merge_status") {
            Some("unchecked" | "checking" | "preparing" | "approvals_syncing") => Self::Unknown,
            Some("conflict") => Self::Conflicted,
            Some(_) if conflicts => Self::Conflicted,
            Some("need_rebase") => Self::Behind,
            Some("not_open") => Self::Unknown,
            Some(_) => Self::Clean,
            None if conflicts => Self::Conflicted,
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
    fn gitlab_reads_a_conflict_behind_any_other_blocker() {
        let mr = |detailed: Option<&str>, conflicts: bool| {
            let mut v = json!({"state": "opened", "has_conflicts": conflicts,
                "merge_status": if conflicts { "cannot_be_merged" } else { "can_be_merged" }});
            if let Some(d) = detailed {
                v["detailed_merge_status"] = json!(d);
            }
            Mergeability::from_gitlab(&v)
        };
        use Mergeability::*;
        for (detailed, conflicts, want) in [
            (Some("mergeable"), false, Clean),
            (Some("conflict"), true, Conflicted),
            // Only the first blocker is named: the conflict is in `has_conflicts`.
            (Some("draft_status"), true, Conflicted),
            (Some("not_approved"), true, Conflicted),
            (Some("ci_must_pass"), true, Conflicted),
            (Some("discussions_not_resolved"), true, Conflicted),
            (Some("need_rebase"), false, Behind),
            (Some("need_rebase"), true, Conflicted),
            // Blocked by people or CI, not by the base: nothing for gaffer to do.
            (Some("draft_status"), false, Clean),
            (Some("ci_must_pass"), false, Clean),
            (Some("ci_still_running"), false, Clean),
            (Some("not_approved"), false, Clean),
            (Some("requested_changes"), false, Clean),
            // Still computing: `has_conflicts` may be from before the last push.
            (Some("checking"), true, Unknown),
            (Some("unchecked"), false, Unknown),
            (Some("preparing"), false, Unknown),
            (Some("approvals_syncing"), true, Unknown),
            // Before GitLab 15.6.
            (None, true, Conflicted),
            (None, false, Clean),
        ] {
            assert_eq!(mr(detailed, conflicts), want, "{detailed:?} {conflicts}");
        }
        assert_eq!(
            Mergeability::from_gitlab(&json!({"state": "opened", "merge_status": "unchecked"})),
            Unknown
        );
        assert_eq!(
            Mergeability::from_gitlab(
                &json!({"state": "merged", "detailed_merge_status": "not_open", "has_conflicts": true})
            ),
            Unknown
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
