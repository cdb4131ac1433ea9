//! Read-only roles in depth: a tool request from the planner, the reviewer or the
//! arbiter that writes, or runs a command that is not plainly a read, is refused here,
//! before any approval is asked — whatever the policy, `--yes` or the auto switch say,
//! and whether the sandbox is on or off. (The CLIs are also started in their own
//! read-only modes, and the sandbox gives them no write right on the worktree.)

use gaffer_agents::{PermissionKind, PermissionRequest};

/// Tools of the agent CLIs that only read (or only touch the agent's own notes).
const READ_TOOLS: &[&str] = &[
    "Read",
    "Glob",
    "Grep",
    "LS",
    "WebFetch",
    "WebSearch",
    "TodoWrite",
    "read_file",
    "read_many_files",
    "list_directory",
    "glob",
    "search_file_content",
    "grep_search",
    "google_web_search",
    "web_fetch",
];

/// Programs a read-only command may run, with nothing that writes or runs another
/// program among their options.
const READ_PROGRAMS: &[&str] = &[
    "cat", "head", "tail", "ls", "wc", "grep", "egrep", "fgrep", "rg", "file", "stat", "diff",
    "cmp", "cut", "tr", "nl", "pwd", "echo", "printf", "realpath", "dirname", "basename", "du",
    "which", "find", "jq", "true",
];

/// `git` subcommands that only read (`-c`, `--output` and `--ext-diff` are refused
/// below).
const READ_GIT: &[&str] = &[
    "status",
    "diff",
    "log",
    "show",
    "blame",
    "grep",
    "ls-files",
    "ls-tree",
    "rev-parse",
    "describe",
    "shortlog",
    "cat-file",
    "merge-base",
];

/// Options that make an otherwise reading program write or run something.
const WRITING_OPTIONS: &[&str] = &[
    "-exec",
    "-execdir",
    "-ok",
    "-okdir",
    "-delete",
    "-fprint",
    "-fprint0",
    "-fprintf",
    "-fls",
    "--pre",
    "--output",
    "--ext-diff",
    "--textconv",
];

/// Why a read-only role may not do what `request` asks, or `None` when it only reads.
pub(crate) fn refusal(role: &str, request: &PermissionRequest) -> Option<String> {
    let refuse = |what: String| {
        Some(format!(
            "refused by gaffer: the {role} is read-only and may not {what}; read files or run a reading command (cat, grep, git diff, ...) instead"
        ))
    };
    match request.kind {
        PermissionKind::FileChange => refuse(format!("change files ({})", request.tool_name)),
        PermissionKind::Command => match &request.command {
            Some(cmd) if reads_only(cmd) => None,
            Some(cmd) => refuse(format!("run `{cmd}`")),
            None => refuse(format!("run {}", request.tool_name)),
        },
        PermissionKind::Tool if READ_TOOLS.contains(&request.tool_name.as_str()) => None,
        PermissionKind::Tool => refuse(format!("use {}", request.tool_name)),
    }
}

/// Whether a shell command only reads: a pipeline of [`READ_PROGRAMS`] and reading
/// `git` subcommands, with no redirection, command substitution, sequencing or
/// variable assignment anywhere, and no option that writes.
pub(crate) fn reads_only(cmd: &str) -> bool {
    let cmd = cmd.trim();
    // `bash -lc '<cmd>'` and `sh -c '<cmd>'` as Codex sends them: judge the inner command.
    for shell in [
        "bash -lc ",
        "bash -c ",
        "sh -c ",
        "/bin/bash -lc ",
        "/bin/sh -c ",
    ] {
        if let Some(inner) = cmd.strip_prefix(shell) {
            let inner = inner.trim();
            let unquoted = inner
                .strip_prefix('\'')
                .and_then(|s| s.strip_suffix('\''))
                .or_else(|| inner.strip_prefix('"').and_then(|s| s.strip_suffix('"')));
            return unquoted.is_some_and(reads_only);
        }
    }
    if cmd.is_empty()
        || cmd
            .chars()
            .any(|c| matches!(c, '>' | '<' | ';' | '&' | '`' | '\n' | '\r' | '(' | ')'))
        || cmd.contains("$(")
    {
        return false;
    }
    cmd.split('|').all(|segment| {
        let words: Vec<&str> = segment.split_whitespace().collect();
        let Some((program, args)) = words.split_first() else {
            return false;
        };
        let program = program.rsplit('/').next().unwrap_or(program);
        if args.iter().any(|a| {
            WRITING_OPTIONS
                .iter()
                .any(|w| a == w || a.starts_with(&format!("{w}=")))
        }) {
            return false;
        }
        match program {
            "git" => args.first().is_some_and(|sub| READ_GIT.contains(sub)),
            p => READ_PROGRAMS.contains(&p),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::reads_only;

    #[test]
    fn reading_commands_pass_and_everything_else_is_refused() {
        for ok in [
            "git diff main",
            "git log --oneline -5 | head -3",
            "cat src/lib.rs",
            "grep -rn fn src | wc -l",
            "bash -lc 'git status'",
            "find . -name '*.rs'",
        ] {
            assert!(reads_only(ok), "{ok}");
        }
        for bad in [
            "rm -rf src",
            "cat a > b",
            "echo x >> README.md",
            "git commit -am x",
            "git -c core.pager=sh diff",
            "git diff --output=/tmp/x",
            "find . -delete",
            "find . -exec rm {} ;",
            "cat a; rm b",
            "cat $(rm b)",
            "cat `rm b`",
            "sort -o out in",
            "make test",
            "cargo test",
            "FOO=1 cat a",
            "bash -lc 'touch x'",
            "sh -c \"cat a && rm b\"",
            "",
        ] {
            assert!(!reads_only(bad), "{bad}");
        }
    }
}
