mod forge_api;
mod gitlab;
mod intake;
mod mergeable;
mod push;
mod sync;
mod worktree;
