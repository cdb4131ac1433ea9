//! Bringing a task branch up to date with a base that moved: fetch the base, rebase or
//! merge onto it, stop on conflicts for someone to resolve, continue (after checking
//! the resolution) or abort, and push a rewritten branch with a lease.
//!
//! Everything runs through the worktree's recorded git dir and work tree with the
//! hardened git of [`crate::git`] (no hooks, no editor, no configuration from the
//! worktree), so an agent resolving a conflict cannot steer what gaffer's git does.
//! Whether an update is in progress is read from the recorded git dir, which lies
//! outside everything an agent may write.

use crate::git::{ForgeError, Repo, Result, Worktree};
use crate::mergeable::ConflictStrategy;
use crate::push::{classify, GitAuth, PushOutcome};
use crate::secret::redact;

/// What [`Worktree::update_onto`] or [`Worktree::continue_update`] left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpdateOutcome {
    /// The branch already contains the base: nothing was done.
    UpToDate {
        /// The branch's commit.
        head: String,
    },
    /// The branch now contains the base, with no conflict left.
    Updated {
        /// The branch's new commit.
        head: String,
    },
    /// git stopped on conflicts in these files (sorted); the update is in progress.
    /// Resolve them in the worktree, then [`Worktree::continue_update`] (or
    /// [`Worktree::abort_update`]).
    Conflicted {
        /// The conflicted files.
        files: Vec<String>,
    },
}

/// One conflicted file's two sides, for whoever resolves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The file (relative to the worktree).
    pub path: String,
    /// The base branch's version (`None`: the base deleted it).
    pub base_side: Option<String>,
    /// The task branch's version (`None`: the task deleted it).
    pub task_side: Option<String>,
}

/// Options every update runs with, whatever the user's configuration says: no
/// automatic stash, no rewriting of other branches, no recorded resolutions replayed,
/// the plain conflict style (the one the marker check reads), and no editor.
const UPDATE_OPTIONS: &[&str] = &[
    "-c",
    "rebase.autoStash=false",
    "-c",
    "rebase.updateRefs=false",
    "-c",
    "rebase.autoSquash=false",
    "-c",
    "merge.autoStash=false",
    "-c",
    "rerere.enabled=false",
    "-c",
    "merge.conflictStyle=merge",
    "-c",
    "core.editor=true",
];

/// How the lines git writes around a conflict begin (the `=======` between the sides
/// alone is also a Markdown heading rule, so it does not count by itself).
const MARKERS: &[&str] = &["<<<<<<< ", ">>>>>>> ", "||||||| "];

impl Repo {
    /// Fetch `branch` from `remote` into gaffer's own ref `refs/gaffer/base/<branch>`
    /// (never a branch or remote-tracking ref the user works with) and return its
    /// commit. Idempotent.
    pub fn fetch_base(&self, remote: &str, branch: &str, auth: &GitAuth) -> Result<String> {
        let local = format!("refs/gaffer/base/{branch}");
        let spec = format!("+refs/heads/{branch}:{local}");
        let out = self.git_remote(
            auth,
            &[
                "fetch",
                "--no-tags",
                "--no-write-fetch-head",
                "--no-recurse-submodules",
                remote,
                &spec,
            ],
        )?;
        if !out.status.success() {
            return Err(classify(self, remote, branch, auth, &out));
        }
        self.resolve(&local)
    }

    /// Push the local `branch` over the remote one only if the remote is still at
    /// `expected` (the commit gaffer last pushed there): `git push
    /// --force-with-lease=refs/heads/<branch>:<expected>`, never a plain force. If
    /// someone else pushed meanwhile, nothing is overwritten and the answer is
    /// [`ForgeError::LeaseRefused`]. If the remote already has the local commit, nothing
    /// is sent (`pushed: false`), so a run after a crash is harmless.
    pub fn push_with_lease(
        &self,
        remote: &str,
        branch: &str,
        expected: &str,
        auth: &GitAuth,
    ) -> Result<PushOutcome> {
        let local = self.resolve(&format!("refs/heads/{branch}"))?;
        let refused = |found: Option<String>| ForgeError::LeaseRefused {
            remote: redact(remote, &auth.token.iter().collect::<Vec<_>>()),
            branch: branch.into(),
            expected: expected.into(),
            found,
        };
        match self.remote_branch_sha(remote, branch, auth)? {
            Some(there) if there == local => {
                return Ok(PushOutcome {
                    sha: local,
                    pushed: false,
                })
            }
            Some(there) if there == expected => {}
            found => return Err(refused(found)),
        }
        let refname = format!("refs/heads/{branch}");
        let lease = format!("--force-with-lease={refname}:{expected}");
        let spec = format!("{refname}:{refname}");
        let out = self.git_remote(auth, &["push", "--porcelain", &lease, remote, &spec])?;
        if !out.status.success() {
            let said = String::from_utf8_lossy(&out.stdout).to_lowercase()
                + &String::from_utf8_lossy(&out.stderr).to_lowercase();
            // The remote moved between the look and the push: the lease held.
            if said.contains("stale info") {
                return Err(refused(self.remote_branch_sha(remote, branch, auth)?));
            }
            return Err(classify(self, remote, branch, auth, &out));
        }
        Ok(PushOutcome {
            sha: local,
            pushed: true,
        })
    }
}

impl Worktree {
    /// The update under way in this worktree (a rebase or merge stopped on a
    /// conflict), read from the recorded git dir.
    pub fn update_in_progress(&self) -> Option<ConflictStrategy> {
        if self.git_dir.join("rebase-merge").exists() || self.git_dir.join("rebase-apply").exists()
        {
            Some(ConflictStrategy::Rebase)
        } else if self.git_dir.join("MERGE_HEAD").exists() {
            Some(ConflictStrategy::Merge)
        } else {
            None
        }
    }

    /// Bring the task branch onto `onto` (a commit: the fetched base) by `strategy`.
    /// Idempotent: a branch that already contains `onto` is left as it is, and an
    /// update already stopped on conflicts (a run before a crash) is reported again,
    /// not started twice. Refuses uncommitted changes: they belong to a step that has
    /// not committed yet.
    pub fn update_onto(&self, onto: &str, strategy: ConflictStrategy) -> Result<UpdateOutcome> {
        self.verify()?;
        if self.update_in_progress().is_some() {
            return self.stopped_or_done();
        }
        if self.contains(onto)? {
            return Ok(UpdateOutcome::UpToDate { head: self.head()? });
        }
        if self.has_changes()? {
            return Err(ForgeError::Git {
                args: "status".into(),
                dir: self.path.clone(),
                stderr: "the worktree has uncommitted changes; gaffer updates a branch only after its steps committed".into(),
            });
        }
        let message = format!("Merge {onto} into {}", self.branch);
        let mut args: Vec<&str> = UPDATE_OPTIONS.to_vec();
        match strategy {
            ConflictStrategy::Rebase => {
                args.extend(["rebase", "--no-autosquash", "--empty=drop", onto]);
            }
            ConflictStrategy::Merge => {
                args.extend(["merge", "--no-ff", "--no-edit", "-m", &message, onto]);
            }
        }
        match self.git_as_committer(&args) {
            Ok(_) => self.finished(),
            Err(e) => self.after_stop(e),
        }
    }

    /// The files git lists as unmerged, sorted.
    pub fn conflicted_files(&self) -> Result<Vec<String>> {
        let out = self.git(&["diff", "--name-only", "-z", "--diff-filter=U"])?;
        let mut files: Vec<String> = out
            .split('\0')
            .filter(|f| !f.is_empty())
            .map(str::to_owned)
            .collect();
        files.sort();
        files.dedup();
        Ok(files)
    }

    /// Both sides of each conflicted file, from git's index (not from the worktree,
    /// where an agent may have edited them). In a rebase git's "ours" is the base and
    /// "theirs" the task's commit; in a merge it is the other way round.
    pub fn conflicts(&self) -> Result<Vec<Conflict>> {
        let (base_stage, task_stage) = match self.update_in_progress() {
            Some(ConflictStrategy::Merge) => (3, 2),
            _ => (2, 3),
        };
        // Read whole (not trimmed): the sides are shown as they are.
        let side = |stage: u8, path: &str| {
            let out = crate::git::run(
                self.at(),
                &["cat-file", "blob", &format!(":{stage}:{path}")],
            )
            .ok()?;
            out.status
                .success()
                .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
        };
        self.conflicted_files()?
            .into_iter()
            .map(|path| {
                Ok(Conflict {
                    base_side: side(base_stage, &path),
                    task_side: side(task_stage, &path),
                    path,
                })
            })
            .collect()
    }

    /// Go on with the update after the conflicted `files` were resolved in the
    /// worktree. Checked here, not trusted from whoever resolved them: none of `files`
    /// may still hold a conflict marker, and afterwards nothing may be left unmerged or
    /// uncommitted. A rebase may stop again on a later commit (`Conflicted` again).
    pub fn continue_update(&self, files: &[String]) -> Result<UpdateOutcome> {
        self.verify()?;
        let Some(strategy) = self.update_in_progress() else {
            return self.finished();
        };
        let marked: Vec<String> = files
            .iter()
            .filter(|f| self.has_markers(f))
            .cloned()
            .collect();
        if !marked.is_empty() {
            return Err(ForgeError::Unresolved {
                path: self.path.clone(),
                files: marked,
            });
        }
        self.git(&["add", "--all"])?;
        let mut args: Vec<&str> = UPDATE_OPTIONS.to_vec();
        match strategy {
            ConflictStrategy::Rebase => args.extend(["rebase", "--continue"]),
            ConflictStrategy::Merge => args.extend(["commit", "--no-edit", "--no-verify", "-q"]),
        }
        match self.git_as_committer(&args) {
            Ok(_) => self.finished(),
            // The resolution kept nothing of this commit: the base has it all.
            Err(_)
                if strategy == ConflictStrategy::Rebase
                    && self.update_in_progress().is_some()
                    && self.conflicted_files()?.is_empty()
                    && self.git(&["diff", "--cached", "--quiet"]).is_ok() =>
            {
                let mut skip: Vec<&str> = UPDATE_OPTIONS.to_vec();
                skip.extend(["rebase", "--skip"]);
                match self.git_as_committer(&skip) {
                    Ok(_) => self.finished(),
                    Err(e) => self.after_stop(e),
                }
            }
            Err(e) => self.after_stop(e),
        }
    }

    /// Give the update up: the branch is back where it was before it.
    pub fn abort_update(&self) -> Result<()> {
        match self.update_in_progress() {
            Some(ConflictStrategy::Rebase) => self.git(&["rebase", "--abort"]).map(drop),
            Some(ConflictStrategy::Merge) => self.git(&["merge", "--abort"]).map(drop),
            None => Ok(()),
        }
    }

    fn at(&self) -> crate::git::At<'_> {
        crate::git::At::Worktree {
            git_dir: &self.git_dir,
            path: &self.path,
        }
    }

    /// Whether the branch already contains commit `rev`.
    pub fn contains(&self, rev: &str) -> Result<bool> {
        let out = crate::git::run(self.at(), &["merge-base", "--is-ancestor", rev, "HEAD"])?;
        match out.status.code() {
            Some(0) => Ok(true),
            Some(1) => Ok(false),
            _ => Err(ForgeError::Git {
                args: format!("merge-base --is-ancestor {rev} HEAD"),
                dir: self.path.clone(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            }),
        }
    }

    fn has_markers(&self, file: &str) -> bool {
        let Ok(text) = std::fs::read(self.path.join(file)) else {
            // Deleted as the resolution: nothing left to hold a marker.
            return false;
        };
        String::from_utf8_lossy(&text)
            .lines()
            .any(|l| MARKERS.iter().any(|m| l.starts_with(m)))
    }

    /// git stopped: on conflicts (reported), or for another reason (the error).
    fn after_stop(&self, error: ForgeError) -> Result<UpdateOutcome> {
        if self.update_in_progress().is_none() {
            return Err(error);
        }
        match self.stopped_or_done()? {
            UpdateOutcome::Conflicted { files } if files.is_empty() => Err(error),
            other => Ok(other),
        }
    }

    fn stopped_or_done(&self) -> Result<UpdateOutcome> {
        if self.update_in_progress().is_none() {
            return self.finished();
        }
        Ok(UpdateOutcome::Conflicted {
            files: self.conflicted_files()?,
        })
    }

    /// The update is over: the task branch is checked out again, nothing unmerged
    /// or uncommitted is left.
    fn finished(&self) -> Result<UpdateOutcome> {
        let on = self.git(&["symbolic-ref", "--short", "HEAD"])?;
        let left = self.uncommitted_files()?;
        if on != self.branch || !left.is_empty() {
            return Err(ForgeError::Unresolved {
                path: self.path.clone(),
                files: if left.is_empty() {
                    vec![format!("HEAD is on `{on}`, not `{}`", self.branch)]
                } else {
                    left
                },
            });
        }
        Ok(UpdateOutcome::Updated { head: self.head()? })
    }
}
