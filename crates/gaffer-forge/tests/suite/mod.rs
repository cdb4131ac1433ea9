mod worktree;
