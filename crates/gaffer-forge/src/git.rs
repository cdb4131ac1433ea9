use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// What can go wrong with git.
#[derive(Debug, thiserror::Error)]
pub enum ForgeError {
    /// The path is not inside a git work tree.
    #[error(
        "{path} is not a git repository; run `git init` there or point at the repository's folder"
    )]
    NotARepo {
        /// The path given.
        path: PathBuf,
    },
    /// The path does not exist or cannot be resolved.
    #[error("{path}: {source}")]
    Path {
        /// The path given.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The base branch has uncommitted changes in the main work tree.
    #[error("the branch `{branch}` has uncommitted changes in {path}; commit or stash them first (gaffer branches from the last commit)")]
    Dirty {
        /// The branch.
        branch: String,
        /// The work tree.
        path: PathBuf,
    },
    /// A branch or revision does not exist.
    #[error("`{rev}` does not exist in {path}; name an existing branch with --base")]
    UnknownRev {
        /// The revision.
        rev: String,
        /// The repository.
        path: PathBuf,
    },
    /// git itself failed.
    #[error("`git {args}` failed in {dir}: {stderr}")]
    Git {
        /// The arguments.
        args: String,
        /// Where.
        dir: PathBuf,
        /// What git said.
        stderr: String,
    },
    /// git could not be started.
    #[error("cannot run git: {0}; install git 2.20 or newer")]
    Spawn(#[source] std::io::Error),
    /// The remote refused the push (a protected branch, a hook, a non-fast-forward).
    #[error("the remote `{remote}` refused the push of `{branch}`: {reason}")]
    PushRejected {
        /// The remote (credentials removed).
        remote: String,
        /// The branch.
        branch: String,
        /// What the remote said (secrets redacted).
        reason: String,
    },
    /// The remote refused the credentials, or none were available.
    #[error("the remote `{remote}` refused gaffer's credentials: {detail}; check your git credential helper or the configured token")]
    PushAuth {
        /// The remote (credentials removed).
        remote: String,
        /// What git said (secrets redacted).
        detail: String,
    },
    /// The remote could not be reached.
    #[error("cannot reach the remote `{remote}`: {detail}; check the URL, the network and that the repository exists")]
    RemoteUnreachable {
        /// The remote (credentials removed).
        remote: String,
        /// What git said (secrets redacted).
        detail: String,
    },
}

/// The crate's result type.
pub type Result<T, E = ForgeError> = std::result::Result<T, E>;

pub(crate) fn run(dir: &Path, args: &[&str]) -> Result<Output> {
    Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .map_err(ForgeError::Spawn)
}

/// How long git's lock files (`index.lock`, `<ref>.lock`) are waited for before
/// git's own "File exists" error is returned.
const LOCK_WAIT: Duration = Duration::from_secs(15);

/// Run git and return trimmed stdout, or a [`ForgeError::Git`] with its stderr.
///
/// A lock another git process holds is waited for: the worker that held a task
/// before a takeover may still be finishing a command in the worktree. A lock
/// still there after [`LOCK_WAIT`] (left by a crashed git) is git's error, which
/// says which file to remove.
pub(crate) fn git(dir: &Path, args: &[&str]) -> Result<String> {
    let started = Instant::now();
    let mut pause = Duration::from_millis(20);
    loop {
        let out = run(dir, args)?;
        if out.status.success() {
            return Ok(String::from_utf8_lossy(&out.stdout).trim_end().to_owned());
        }
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_owned();
        if stderr.contains(".lock': File exists") && started.elapsed() < LOCK_WAIT {
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(500));
            continue;
        }
        return Err(ForgeError::Git {
            args: args.join(" "),
            dir: dir.to_owned(),
            stderr,
        });
    }
}

/// A short branch-safe name from free text: lowercase words joined by `-`, at most 40 chars.
pub fn slug(text: &str) -> String {
    let mut out = String::new();
    for word in text
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        if out.len() + word.len() + 1 > 40 {
            break;
        }
        if !out.is_empty() {
            out.push('-');
        }
        out.push_str(&word.to_ascii_lowercase());
    }
    if out.is_empty() {
        "task".into()
    } else {
        out
    }
}

/// A repository registered with gaffer.
#[derive(Debug, Clone)]
pub struct Repo {
    root: PathBuf,
}

impl Repo {
    /// Open the repository containing `path`; its root is the physical (canonical) path.
    pub fn open(path: &Path) -> Result<Self> {
        let canonical = std::fs::canonicalize(path).map_err(|source| ForgeError::Path {
            path: path.to_owned(),
            source,
        })?;
        let out = run(&canonical, &["rev-parse", "--show-toplevel"])?;
        if !out.status.success() {
            return Err(ForgeError::NotARepo { path: canonical });
        }
        let top = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        let root = std::fs::canonicalize(&top).map_err(|source| ForgeError::Path {
            path: PathBuf::from(&top),
            source,
        })?;
        Ok(Self { root })
    }

    /// The repository's root (physical path).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The branch tasks start from: the remote's default (`origin/HEAD`), else the
    /// branch checked out in the main work tree, else `main`/`master` if present.
    pub fn default_branch(&self) -> Result<String> {
        if let Ok(r) = git(
            &self.root,
            &["symbolic-ref", "--short", "refs/remotes/origin/HEAD"],
        ) {
            if let Some(b) = r.strip_prefix("origin/") {
                return Ok(b.to_owned());
            }
        }
        if let Ok(b) = git(&self.root, &["symbolic-ref", "--short", "HEAD"]) {
            return Ok(b);
        }
        for candidate in ["main", "master"] {
            if self.rev_exists(candidate) {
                return Ok(candidate.into());
            }
        }
        Err(ForgeError::UnknownRev {
            rev: "HEAD".into(),
            path: self.root.clone(),
        })
    }

    /// Whether `rev` names a commit.
    pub fn rev_exists(&self, rev: &str) -> bool {
        git(
            &self.root,
            &[
                "rev-parse",
                "--verify",
                "--quiet",
                &format!("{rev}^{{commit}}"),
            ],
        )
        .is_ok()
    }

    /// The commit `rev` points at.
    pub fn resolve(&self, rev: &str) -> Result<String> {
        git(
            &self.root,
            &["rev-parse", "--verify", &format!("{rev}^{{commit}}")],
        )
        .map_err(|_| ForgeError::UnknownRev {
            rev: rev.into(),
            path: self.root.clone(),
        })
    }

    /// Refuse when `branch` is checked out in the main work tree with uncommitted
    /// changes to tracked files: the user would expect them in the task, and they
    /// would not be.
    pub fn ensure_clean(&self, branch: &str) -> Result<()> {
        let current = git(&self.root, &["symbolic-ref", "--short", "HEAD"]).unwrap_or_default();
        if current != branch {
            return Ok(());
        }
        let status = git(
            &self.root,
            &["status", "--porcelain", "--untracked-files=no"],
        )?;
        if status.is_empty() {
            Ok(())
        } else {
            Err(ForgeError::Dirty {
                branch: branch.into(),
                path: self.root.clone(),
            })
        }
    }

    /// Create (or find, if it already exists) the worktree `dir` on a new branch
    /// `branch` from `base`. Idempotent: a second call after a crash returns the same
    /// worktree without touching its contents.
    pub fn ensure_worktree(&self, dir: &Path, branch: &str, base: &str) -> Result<Worktree> {
        let base_sha = self.resolve(base)?;
        if dir.join(".git").exists() {
            let wt = Worktree {
                path: std::fs::canonicalize(dir).map_err(|source| ForgeError::Path {
                    path: dir.to_owned(),
                    source,
                })?,
                branch: branch.into(),
                base: base_sha,
            };
            let on = git(&wt.path, &["symbolic-ref", "--short", "HEAD"])?;
            if on != branch {
                return Err(ForgeError::Git {
                    args: "worktree".into(),
                    dir: dir.to_owned(),
                    stderr: format!("{} is on `{on}`, expected `{branch}`", dir.display()),
                });
            }
            return Ok(wt);
        }
        if let Some(parent) = dir.parent() {
            std::fs::create_dir_all(parent).map_err(|source| ForgeError::Path {
                path: parent.to_owned(),
                source,
            })?;
        }
        let dir_text = dir.to_string_lossy().into_owned();
        // A branch left by an earlier attempt (crash after `branch`, before the checkout) is reused.
        if self.rev_exists(&format!("refs/heads/{branch}")) {
            git(&self.root, &["worktree", "add", &dir_text, branch])?;
        } else {
            git(
                &self.root,
                &["worktree", "add", "-b", branch, &dir_text, &base_sha],
            )?;
        }
        Ok(Worktree {
            path: std::fs::canonicalize(dir).map_err(|source| ForgeError::Path {
                path: dir.to_owned(),
                source,
            })?,
            branch: branch.into(),
            base: base_sha,
        })
    }

    /// Remove a worktree (its branch stays). Missing worktrees are fine.
    pub fn remove_worktree(&self, dir: &Path) -> Result<()> {
        if !dir.exists() {
            let _ = git(&self.root, &["worktree", "prune"]);
            return Ok(());
        }
        git(
            &self.root,
            &["worktree", "remove", "--force", &dir.to_string_lossy()],
        )?;
        Ok(())
    }
}

/// What [`Worktree::commit_step`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitOutcome {
    /// The step's commit.
    pub sha: String,
    /// False when the commit already existed (a re-run after a crash).
    pub created: bool,
}

/// A task's worktree on its own branch.
#[derive(Debug, Clone)]
pub struct Worktree {
    /// Physical path.
    pub path: PathBuf,
    /// The task branch.
    pub branch: String,
    /// The commit the branch started from.
    pub base: String,
}

impl Worktree {
    /// Open an existing worktree.
    pub fn open(path: &Path, base: &str) -> Result<Self> {
        let path = std::fs::canonicalize(path).map_err(|source| ForgeError::Path {
            path: path.to_owned(),
            source,
        })?;
        let branch = git(&path, &["symbolic-ref", "--short", "HEAD"])?;
        Ok(Self {
            path,
            branch,
            base: base.into(),
        })
    }

    /// The commit checked out now.
    pub fn head(&self) -> Result<String> {
        git(&self.path, &["rev-parse", "HEAD"])
    }

    /// Whether there are uncommitted changes (tracked or untracked).
    pub fn has_changes(&self) -> Result<bool> {
        Ok(!git(&self.path, &["status", "--porcelain"])?.is_empty())
    }

    /// The commit of step `key` on this branch since the base, if any.
    pub fn find_step_commit(&self, key: &str) -> Result<Option<String>> {
        let range = format!("{}..HEAD", self.base);
        let out = git(
            &self.path,
            &[
                "log",
                "--format=%H%x00%(trailers:key=Gaffer-Step,valueonly,separator=%x01)",
                &range,
            ],
        )?;
        Ok(out.lines().find_map(|line| {
            let (sha, trailers) = line.split_once('\0')?;
            trailers
                .split('\u{1}')
                .any(|t| t.trim() == key)
                .then(|| sha.to_owned())
        }))
    }

    /// Commit everything in the worktree as step `key`, once. If a commit for `key`
    /// already exists (the step ran before a crash), it is returned and nothing new is
    /// committed. With no changes, an empty commit still records the step.
    pub fn commit_step(&self, message: &str, key: &str) -> Result<CommitOutcome> {
        if let Some(sha) = self.find_step_commit(key)? {
            return Ok(CommitOutcome {
                sha,
                created: false,
            });
        }
        git(&self.path, &["add", "--all"])?;
        // The add may have waited for another process's commit of this very step.
        if let Some(sha) = self.find_step_commit(key)? {
            return Ok(CommitOutcome {
                sha,
                created: false,
            });
        }
        let full = format!("{}\n\nGaffer-Step: {key}\n", message.trim());
        let mut args = vec!["commit", "--allow-empty", "--no-verify", "-q", "-m", &full];
        let identity = [
            "-c",
            "user.name=gaffer",
            "-c",
            "user.email=gaffer@localhost",
        ];
        let has_identity = git(&self.path, &["config", "user.email"]).is_ok_and(|e| !e.is_empty());
        let mut full_args: Vec<&str> = Vec::new();
        if !has_identity {
            full_args.extend(identity);
        }
        full_args.append(&mut args);
        git(&self.path, &full_args)?;
        Ok(CommitOutcome {
            sha: self.head()?,
            created: true,
        })
    }

    /// The diff of the branch against its base, committed and uncommitted.
    pub fn diff(&self) -> Result<String> {
        git(&self.path, &["diff", &self.base])
    }

    /// Files changed against the base, sorted: committed or not, and new files git
    /// does not track yet (which `git diff` leaves out), but not ignored ones. Names
    /// are as on disk (`-z`: no quoting of unusual characters).
    pub fn changed_files(&self) -> Result<Vec<String>> {
        let tracked = git(&self.path, &["diff", "--name-only", "-z", &self.base])?;
        let new = git(
            &self.path,
            &["ls-files", "-z", "--others", "--exclude-standard"],
        )?;
        let files: std::collections::BTreeSet<&str> = tracked
            .split('\0')
            .chain(new.split('\0'))
            .filter(|f| !f.is_empty())
            .collect();
        Ok(files.into_iter().map(str::to_owned).collect())
    }

    /// `(sha, subject)` of each commit since the base, oldest first.
    pub fn commits(&self) -> Result<Vec<(String, String)>> {
        let range = format!("{}..HEAD", self.base);
        Ok(
            git(&self.path, &["log", "--reverse", "--format=%H %s", &range])?
                .lines()
                .filter_map(|l| l.split_once(' '))
                .map(|(a, b)| (a.to_owned(), b.to_owned()))
                .collect(),
        )
    }
}
