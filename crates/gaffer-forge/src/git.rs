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
    /// The worktree's `.git` file is not the one gaffer wrote: something (an agent)
    /// replaced it, maybe to point gaffer's git at a repository and config of its own.
    #[error("the worktree {path} was tampered with: its .git is {found}, not the `gitdir: {expected}` gaffer wrote; nothing was committed. Look at what the agent did there, restore the file, and retry the task")]
    Tampered {
        /// The worktree.
        path: PathBuf,
        /// What gaffer wrote.
        expected: PathBuf,
        /// What is there now (quoted, cut short).
        found: String,
    },
    /// A commit gaffer made is not on the task branch afterwards.
    #[error("the commit {sha} is not at the tip of `{branch}` in {repo} after committing (the tip is {tip}); nothing is recorded")]
    NotOnBranch {
        /// The commit made.
        sha: String,
        /// The task branch.
        branch: String,
        /// What the branch points at.
        tip: String,
        /// The repository.
        repo: PathBuf,
    },
    /// A push with `--force-with-lease` was refused: the remote branch is not at the
    /// commit gaffer last pushed there, so someone else pushed to it; nothing was
    /// overwritten.
    #[error("the remote `{remote}` has `{branch}` at {}, not at {expected} where gaffer last pushed it: someone else pushed to the branch, and gaffer will not overwrite their work; look at their commits, then retry or give up", found.as_deref().unwrap_or("nothing (the branch was deleted)"))]
    LeaseRefused {
        /// The remote (credentials removed).
        remote: String,
        /// The branch.
        branch: String,
        /// The commit gaffer last pushed.
        expected: String,
        /// What the remote branch points at now.
        found: Option<String>,
    },
    /// Files still hold conflict markers (or git still lists them as unmerged) after
    /// whoever resolved the conflict said they were done.
    #[error("the conflict is not resolved in {path}: {} still hold{} conflict markers or unmerged changes; resolve them (no `<<<<<<<`/`>>>>>>>` lines left) and try again", files.join(", "), if files.len() == 1 { "s" } else { "" })]
    Unresolved {
        /// The worktree.
        path: PathBuf,
        /// The files.
        files: Vec<String>,
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

/// Configuration every git gaffer runs gets on its command line, which wins over every
/// file: no hooks, no fsmonitor (both run commands), no pager, no submodule recursion
/// (a nested repository an agent made has its own config), no `ext::` transport.
const HARDENING: &[&str] = &[
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.untrackedCache=false",
    "-c",
    "core.pager=cat",
    "-c",
    "submodule.recurse=false",
    "-c",
    "diff.ignoreSubmodules=all",
    "-c",
    "status.submoduleSummary=false",
    "-c",
    "protocol.ext.allow=never",
];

/// Variables of gaffer's environment that would steer git elsewhere: another git dir,
/// work tree, index or object store, extra configuration, an external diff or pager.
const STEERING: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_COMMON_DIR",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_CONFIG",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_EXTERNAL_DIFF",
    "GIT_DIFF_OPTS",
    "GIT_PAGER",
    "GIT_EDITOR",
    "GIT_SEQUENCE_EDITOR",
];

/// A `git` that nothing in a worktree can steer: the steering variables removed, no
/// system configuration (`GIT_CONFIG_NOSYSTEM`), the [`HARDENING`] options. The user's
/// own global configuration still applies (identity, credential helpers for a push):
/// it lives outside every sandbox's writable directories.
pub(crate) fn command() -> Command {
    let mut cmd = Command::new("git");
    for var in STEERING {
        cmd.env_remove(var);
    }
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if k.starts_with("GIT_CONFIG_KEY_") || k.starts_with("GIT_CONFIG_VALUE_") {
            cmd.env_remove(k.as_ref());
        }
    }
    cmd.env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .args(HARDENING);
    cmd
}

/// Where a git command runs: a repository found from a directory, or a worktree given
/// by the git dir gaffer recorded (its `.git` file is never read).
#[derive(Clone, Copy)]
pub(crate) enum At<'a> {
    Dir(&'a Path),
    Worktree { git_dir: &'a Path, path: &'a Path },
}

impl At<'_> {
    /// The directory to name in errors.
    fn shown(self) -> PathBuf {
        match self {
            At::Dir(d) => d.to_owned(),
            At::Worktree { path, .. } => path.to_owned(),
        }
    }
}

pub(crate) fn run(at: At<'_>, args: &[&str]) -> Result<Output> {
    let mut cmd = command();
    match at {
        At::Dir(dir) => {
            cmd.arg("-C").arg(dir);
        }
        At::Worktree { git_dir, path } => {
            cmd.arg("--git-dir")
                .arg(git_dir)
                .arg("--work-tree")
                .arg(path)
                .current_dir(path);
        }
    }
    cmd.args(args).output().map_err(ForgeError::Spawn)
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
pub(crate) fn git<'a>(at: impl Into<At<'a>>, args: &[&str]) -> Result<String> {
    let at = at.into();
    let started = Instant::now();
    let mut pause = Duration::from_millis(20);
    loop {
        let out = run(at, args)?;
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
            dir: at.shown(),
            stderr,
        });
    }
}

impl<'a> From<&'a Path> for At<'a> {
    fn from(dir: &'a Path) -> Self {
        At::Dir(dir)
    }
}

impl<'a> From<&'a PathBuf> for At<'a> {
    fn from(dir: &'a PathBuf) -> Self {
        At::Dir(dir)
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
        let out = run(At::Dir(&canonical), &["rev-parse", "--show-toplevel"])?;
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
        let canonical = |dir: &Path| {
            std::fs::canonicalize(dir).map_err(|source| ForgeError::Path {
                path: dir.to_owned(),
                source,
            })
        };
        if dir.join(".git").exists() {
            let path = canonical(dir)?;
            let wt = Worktree {
                git_dir: self.worktree_git_dir(&path)?,
                path,
                branch: branch.into(),
                base: base_sha,
            };
            let on = wt.git(&["symbolic-ref", "--short", "HEAD"])?;
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
        let path = canonical(dir)?;
        Ok(Worktree {
            git_dir: self.worktree_git_dir(&path)?,
            path,
            branch: branch.into(),
            base: base_sha,
        })
    }

    /// The git dir this repository keeps for its worktree at `path`
    /// (`<.git>/worktrees/<name>`), found from the repository's own records — never from
    /// the worktree's `.git` file, which whoever works in the worktree can rewrite.
    pub fn worktree_git_dir(&self, path: &Path) -> Result<PathBuf> {
        let common = git(&self.root, &["rev-parse", "--git-common-dir"])?;
        let common = self.root.join(common);
        let want = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
        let entries =
            std::fs::read_dir(common.join("worktrees")).map_err(|source| ForgeError::Path {
                path: common.join("worktrees"),
                source,
            })?;
        for entry in entries.flatten() {
            let Ok(back) = std::fs::read_to_string(entry.path().join("gitdir")) else {
                continue;
            };
            let back = Path::new(back.trim_end_matches('\n'));
            let Some(wt) = back.parent() else { continue };
            if std::fs::canonicalize(wt).unwrap_or_else(|_| wt.to_owned()) == want {
                return std::fs::canonicalize(entry.path()).map_err(|source| ForgeError::Path {
                    path: entry.path(),
                    source,
                });
            }
        }
        Err(ForgeError::Git {
            args: "worktree list".into(),
            dir: self.root.clone(),
            stderr: format!(
                "{} is not a worktree of this repository; `git worktree list` shows its worktrees",
                path.display()
            ),
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

/// A task's worktree on its own branch. Every git command on it names the git dir and
/// the work tree gaffer recorded when it made the worktree: what the worktree's own
/// `.git` file says is never followed ([`Worktree::verify`] checks it was not changed).
#[derive(Debug, Clone)]
pub struct Worktree {
    /// Physical path.
    pub path: PathBuf,
    /// The task branch.
    pub branch: String,
    /// The commit the branch started from.
    pub base: String,
    /// The worktree's git dir in its repository (`<.git>/worktrees/<name>`).
    pub git_dir: PathBuf,
}

impl Worktree {
    pub(crate) fn git(&self, args: &[&str]) -> Result<String> {
        git(
            At::Worktree {
                git_dir: &self.git_dir,
                path: &self.path,
            },
            args,
        )
    }

    /// Run a git command that makes commits: with gaffer's own name when the user's
    /// configuration gives none, so a machine without a git identity still commits.
    pub(crate) fn git_as_committer(&self, args: &[&str]) -> Result<String> {
        let has_identity = self
            .git(&["config", "user.email"])
            .is_ok_and(|e| !e.is_empty());
        let mut full: Vec<&str> = Vec::new();
        if !has_identity {
            full.extend([
                "-c",
                "user.name=gaffer",
                "-c",
                "user.email=gaffer@localhost",
            ]);
        }
        full.extend(args);
        self.git(&full)
    }

    /// The commit checked out now.
    pub fn head(&self) -> Result<String> {
        self.git(&["rev-parse", "HEAD"])
    }

    /// Whether there are uncommitted changes (tracked or untracked).
    pub fn has_changes(&self) -> Result<bool> {
        Ok(!self
            .git(&["status", "--porcelain", "--ignore-submodules=all"])?
            .is_empty())
    }

    /// Files with uncommitted changes, new files included (`git status`), sorted.
    pub fn uncommitted_files(&self) -> Result<Vec<String>> {
        let out = self.git(&[
            "status",
            "--porcelain",
            "-z",
            "--untracked-files=all",
            "--ignore-submodules=all",
        ])?;
        let mut files: Vec<String> = Vec::new();
        let mut entries = out.split('\0');
        while let Some(e) = entries.next() {
            if e.len() < 4 {
                continue;
            }
            // A rename is followed by its source path, which is not a change of its own.
            if e.starts_with('R') || e.starts_with('C') {
                entries.next();
            }
            files.push(e[3..].to_owned());
        }
        files.sort();
        files.dedup();
        Ok(files)
    }

    /// The commit of step `key` on this branch since the base, if any.
    pub fn find_step_commit(&self, key: &str) -> Result<Option<String>> {
        let range = format!("{}..refs/heads/{}", self.base, self.branch);
        let out = self.git(&[
            "log",
            "--format=%H%x00%(trailers:key=Gaffer-Step,valueonly,separator=%x01)",
            &range,
        ])?;
        Ok(out.lines().find_map(|line| {
            let (sha, trailers) = line.split_once('\0')?;
            trailers
                .split('\u{1}')
                .any(|t| t.trim() == key)
                .then(|| sha.to_owned())
        }))
    }

    /// Check that the worktree's `.git` is still the file gaffer wrote (`gitdir: <its
    /// git dir>`), not something an agent put there.
    pub fn verify(&self) -> Result<()> {
        let dot_git = self.path.join(".git");
        let expected = format!("gitdir: {}", self.git_dir.display());
        let found = match std::fs::symlink_metadata(&dot_git) {
            Err(_) => "missing".to_string(),
            Ok(m) if m.file_type().is_symlink() => "a symbolic link".to_string(),
            Ok(m) if m.is_dir() => "a directory".to_string(),
            Ok(_) => {
                let text = std::fs::read(&dot_git).unwrap_or_default();
                let text = String::from_utf8_lossy(&text);
                if text.trim_end_matches('\n') == expected {
                    return Ok(());
                }
                let shown: String = text.chars().take(120).collect();
                format!("{shown:?}")
            }
        };
        Err(ForgeError::Tampered {
            path: self.path.clone(),
            expected: self.git_dir.clone(),
            found,
        })
    }

    /// Commit everything in the worktree as step `key`, once. If a commit for `key`
    /// already exists (the step ran before a crash), it is returned and nothing new is
    /// committed. With no changes, an empty commit still records the step. The
    /// worktree's `.git` is checked first ([`Worktree::verify`]), and the commit is read
    /// back from the task branch before it is returned.
    pub fn commit_step(&self, message: &str, key: &str) -> Result<CommitOutcome> {
        self.verify()?;
        if let Some(sha) = self.find_step_commit(key)? {
            return Ok(CommitOutcome {
                sha,
                created: false,
            });
        }
        self.git(&["add", "--all"])?;
        // The add may have waited for another process's commit of this very step.
        if let Some(sha) = self.find_step_commit(key)? {
            return Ok(CommitOutcome {
                sha,
                created: false,
            });
        }
        let full = format!("{}\n\nGaffer-Step: {key}\n", message.trim());
        self.git_as_committer(&["commit", "--allow-empty", "--no-verify", "-q", "-m", &full])?;
        let sha = self.head()?;
        let tip = self.git(&[
            "rev-parse",
            "--verify",
            &format!("refs/heads/{}^{{commit}}", self.branch),
        ])?;
        if tip != sha || self.find_step_commit(key)?.as_deref() != Some(sha.as_str()) {
            return Err(ForgeError::NotOnBranch {
                sha,
                branch: self.branch.clone(),
                tip,
                repo: self.git_dir.clone(),
            });
        }
        Ok(CommitOutcome { sha, created: true })
    }

    /// The diff of the branch against its base, committed and uncommitted.
    pub fn diff(&self) -> Result<String> {
        self.git(&["diff", "--no-ext-diff", "--no-textconv", &self.base, "--"])
    }

    /// Whether git ignores `path` (relative to the worktree) here: untracked and
    /// matched by an ignore rule, so a commit of the worktree leaves it out.
    pub fn is_ignored(&self, path: &str) -> Result<bool> {
        let at = At::Worktree {
            git_dir: &self.git_dir,
            path: &self.path,
        };
        let out = run(at, &["check-ignore", "-q", "--", path])?;
        match out.status.code() {
            Some(0) => Ok(true),
            Some(1) => Ok(false),
            _ => Err(ForgeError::Git {
                args: format!("check-ignore -q -- {path}"),
                dir: self.path.clone(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            }),
        }
    }

    /// Files changed against the base, sorted: committed or not, and new files git
    /// does not track yet (which `git diff` leaves out), but not ignored ones. Names
    /// are as on disk (`-z`: no quoting of unusual characters).
    pub fn changed_files(&self) -> Result<Vec<String>> {
        let tracked = self.git(&[
            "diff",
            "--no-ext-diff",
            "--name-only",
            "-z",
            &self.base,
            "--",
        ])?;
        let new = self.git(&["ls-files", "-z", "--others", "--exclude-standard"])?;
        let files: std::collections::BTreeSet<&str> = tracked
            .split('\0')
            .chain(new.split('\0'))
            .filter(|f| !f.is_empty())
            .collect();
        Ok(files.into_iter().map(str::to_owned).collect())
    }

    /// `(sha, subject)` of each commit since the base, oldest first.
    pub fn commits(&self) -> Result<Vec<(String, String)>> {
        let range = format!("{}..refs/heads/{}", self.base, self.branch);
        Ok(self
            .git(&["log", "--reverse", "--format=%H %s", &range])?
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
            .collect())
    }
}
