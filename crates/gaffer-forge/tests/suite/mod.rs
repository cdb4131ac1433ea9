mod forge_api;
mod gitlab;
mod intake;
mod mergeable;
mod push;
mod reviews;
mod sync;
mod worktree;
