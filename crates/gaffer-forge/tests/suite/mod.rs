mod forge_api;
mod intake;
mod mergeable;
mod push;
mod sync;
mod worktree;
