//! gaffer's git and forge side.
//!
//! - [`Repo`]: a registered repository (its default branch, whether it is clean), and
//!   [`Repo::push`] / [`Repo::remote_branch_sha`] through the `git` CLI (what users'
//!   credential helpers, hooks and config expect).
//! - [`Worktree`]: a task's own worktree on its own branch; commits are idempotent
//!   per step (a `Gaffer-Step:` trailer marks them, so a re-run after a crash finds
//!   the commit instead of making a second one); what a commit or a push would add,
//!   line by line ([`Addition`]), for the secret scan.
//! - [`Forge`]: pull requests, CI status and issues on Gitea/Forgejo ([`Gitea`]),
//!   GitHub ([`GitHub`]) and GitLab ([`GitLab`], merge requests and pipelines' jobs); [`wait_for_ci`] polls with backoff and a time limit.
//! - [`Forge`]: pull requests, CI status and issues on Gitea/Forgejo ([`Gitea`]) and
//!   GitHub ([`GitHub`]); [`wait_for_ci`] polls with backoff and a time limit.
//! - Keeping a pull request mergeable: [`Mergeability`] as the forge reports it;
//!   [`Repo::fetch_base`], [`Worktree::update_onto`] (rebase or merge, by
//!   [`ConflictStrategy`]), [`Worktree::continue_update`] after conflicts were
//!   resolved (checked for markers, not trusted), and [`Repo::push_with_lease`] for a
//!   rewritten branch (never a plain force).
//! - [`hooks`]: webhook deliveries from the forges: their signatures and events.
//! - [`Vikunja`]: the task tracker.
//!
//! Tokens are [`Secret`]s: they never appear in errors or `Debug` output.

mod additions;
mod api;
mod ci;
mod git;
mod gitea;
mod github;
mod gitlab;
pub mod hooks;
mod http;
mod mergeable;
mod push;
mod rest;
mod review;
mod secret;
mod sync;
mod vikunja;

pub use additions::{Addition, Source};
pub use api::{
    connect, ApiError, CiCheck, CiState, CiStatus, Comment, FailingLog, Forge, ForgeConfig,
    ForgeKind, Issue, IssueFilter, IssueRef, NewPullRequest, PullRequest, RemoteRepo,
};
pub use ci::{wait_for_ci, CiWait};
pub use git::{slug, CommitOutcome, ForgeError, Repo, Result, Worktree};
pub use gitea::Gitea;
pub use github::GitHub;
pub use gitlab::GitLab;
pub use mergeable::{ConflictStrategy, Mergeability};
pub use push::{token_from_git_credentials, GitAuth, PushOutcome};
pub use review::{LineOf, PrComment, PrCommentKind};
pub use secret::{redact, Secret};
pub use sync::{Conflict, UpdateOutcome};
pub use vikunja::{TrackerTask, Vikunja};
