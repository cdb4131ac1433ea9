//! gaffer's git side. Everything goes through the `git` CLI, which is what users'
//! credential helpers, hooks and config expect.
//!
//! - [`Repo`]: a registered repository (its default branch, whether it is clean).
//! - [`Worktree`]: a task's own worktree on its own branch; commits are idempotent
//!   per step (a `Gaffer-Step:` trailer marks them, so a re-run after a crash finds
//!   the commit instead of making a second one).

mod git;

pub use git::{slug, CommitOutcome, ForgeError, Repo, Result, Worktree};
