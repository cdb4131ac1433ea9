mod forge_api;
mod mergeable;
mod push;
mod sync;
mod worktree;
