//! Whether a fake pull request merges: computed from the attached bare remote the way
//! the forges compute it, with `git merge-tree --write-tree` of base and head.

use std::path::Path;
use std::process::Command;

use serde_json::{json, Map, Value};

use super::{rev_parse, FakeForge, FakePr, Flavor, ForgeState};

/// How the fake reports mergeability.
#[derive(Debug, Default)]
pub(super) struct Settings {
    /// GitHub: branch protection requires the head to be up to date with the base, so
    /// a head behind its base is `mergeable_state: "behind"`.
    require_up_to_date: bool,
    /// GitHub: answer `mergeable: null` (still computing) this many more times.
    computing: u32,
}

impl FakeForge {
    /// GitHub: behave as a repository whose branch protection requires branches to be
    /// up to date before merging: an open PR whose head lacks the base's latest commit
    /// is `mergeable_state: "behind"` (still `mergeable: true`).
    pub fn require_up_to_date(&self, on: bool) {
        self.state.mergeability.lock().unwrap().require_up_to_date = on;
    }

    /// GitHub: the next `times` reads of a pull request say `mergeable: null`,
    /// `mergeable_state: "unknown"`, as while GitHub computes it in the background.
    pub fn compute_mergeability_later(&self, times: u32) {
        self.state.mergeability.lock().unwrap().computing = times;
    }
}

/// What merging head into base gives on the remote.
pub(super) enum Merge {
    Clean { behind: bool },
    Conflict,
}

fn git_ok(remote: &Path, args: &[&str]) -> Option<bool> {
    let out = Command::new("git")
        .arg("--git-dir")
        .arg(remote)
        .args(args)
        .output()
        .ok()?;
    match out.status.code() {
        Some(0) => Some(true),
        Some(1) => Some(false),
        _ => None,
    }
}

pub(super) fn merge_of(remote: &Path, base: &str, head: &str) -> Option<Merge> {
    let base = rev_parse(remote, &format!("refs/heads/{base}"))?;
    let head = rev_parse(remote, &format!("refs/heads/{head}"))?;
    let clean = git_ok(
        remote,
        &[
            "merge-tree",
            "--write-tree",
            "--name-only",
            "--no-messages",
            &base,
            &head,
        ],
    )?;
    if !clean {
        return Some(Merge::Conflict);
    }
    let up_to_date = git_ok(remote, &["merge-base", "--is-ancestor", &base, &head])?;
    Some(Merge::Clean {
        behind: !up_to_date,
    })
}

/// The mergeability fields of a pull request object, for the fake's flavor.
pub(super) fn fields(st: &ForgeState, pr: &FakePr) -> Map<String, Value> {
    let remote = st.remote.lock().unwrap().clone();
    let merge = match (&remote, pr.state.as_str()) {
        (Some(r), "open") => merge_of(r, &pr.base, &pr.head),
        _ => None,
    };
    let mut settings = st.mergeability.lock().unwrap();
    let fields = match st.flavor {
        Flavor::Gitea => {
            let merge_base = remote.as_deref().and_then(|r| {
                let out = Command::new("git")
                    .arg("--git-dir")
                    .arg(r)
                    .args([
                        "merge-base",
                        &format!("refs/heads/{}", pr.base),
                        &format!("refs/heads/{}", pr.head),
                    ])
                    .output()
                    .ok()?;
                out.status
                    .success()
                    .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
            });
            json!({
                "mergeable": matches!(merge, Some(Merge::Clean { .. })),
                "merge_base": merge_base.unwrap_or_default(),
            })
        }
        Flavor::GitHub if settings.computing > 0 && pr.state == "open" => {
            settings.computing -= 1;
            json!({"mergeable": null, "mergeable_state": "unknown", "rebaseable": null})
        }
        Flavor::GitHub => match merge {
            Some(Merge::Clean { behind }) => json!({
                "mergeable": true,
                "mergeable_state": if behind && settings.require_up_to_date { "behind" } else { "clean" },
                "rebaseable": true,
            }),
            Some(Merge::Conflict) => {
                json!({"mergeable": false, "mergeable_state": "dirty", "rebaseable": false})
            }
            None => json!({"mergeable": null, "mergeable_state": "unknown", "rebaseable": null}),
        },
    };
    match fields {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}
