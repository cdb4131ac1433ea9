mod forge_api;
mod push;
mod worktree;
