//! What a change adds, line by line: the input of the secret scan that runs before
//! gaffer commits a task's work and before it pushes the task branch.
//!
//! Contents are read as text whatever they are (`-a`: a secret in a "binary" file
//! is still a secret), with no external diff or text conversion (both could be
//! configured by the worktree), renames as a delete and an add (a renamed file's
//! new name and lines are all new to the scan).

use crate::git::{git, Result, Worktree};

/// Where added text is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A file, by its path in the repository (as git prints it).
    File(String),
    /// The commit's message.
    Message,
}

/// Text a change adds: a file's new lines (with their line numbers in the new
/// file), or a commit's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Addition {
    /// The commit that adds it; `None` for what is staged to be committed.
    pub commit: Option<String>,
    /// The file, or the message.
    pub source: Source,
    /// `(line number, text)` of each added line.
    pub lines: Vec<(u32, String)>,
}

/// The options every diff of the scan uses (see the module docs).
const AS_TEXT: [&str; 6] = [
    "--no-color",
    "--no-ext-diff",
    "--no-textconv",
    "--no-renames",
    "-U0",
    "-a",
];

/// `(line number, text)` of the `+` lines of a unified diff of one file.
fn added_lines(patch: &str) -> Vec<(u32, String)> {
    let mut out = Vec::new();
    let mut next: Option<u32> = None;
    for line in patch.split('\n') {
        if let Some(header) = line.strip_prefix("@@ ") {
            // `@@ -a[,b] +c[,d] @@`: new lines start at c.
            next = header
                .split_whitespace()
                .find_map(|p| p.strip_prefix('+'))
                .and_then(|p| p.split(',').next())
                .and_then(|n| n.parse().ok());
            continue;
        }
        let Some(n) = next.as_mut() else { continue };
        if let Some(text) = line.strip_prefix('+') {
            out.push((*n, text.trim_end_matches('\r').to_owned()));
            *n += 1;
        } else if line.starts_with(' ') {
            *n += 1;
        }
    }
    out
}

/// The paths a `-z --name-only` listing names.
fn paths(listing: &str) -> impl Iterator<Item = &str> {
    listing.split('\0').filter(|p| !p.is_empty())
}

fn literal(path: &str) -> String {
    format!(":(literal){path}")
}

impl Worktree {
    /// Stage everything (`git add --all`, as the commit will) and list what the
    /// index adds to `HEAD`: each added or changed file's new lines. Deleted files
    /// add nothing.
    pub fn staged_additions(&self) -> Result<Vec<Addition>> {
        git(&self.path, &["add", "--all"])?;
        let listing = git(
            &self.path,
            &[
                "diff",
                "--cached",
                "--name-only",
                "-z",
                "--no-renames",
                "--diff-filter=d",
            ],
        )?;
        paths(&listing)
            .map(|path| {
                let mut args = vec!["diff", "--cached"];
                args.extend(AS_TEXT);
                let spec = literal(path);
                args.extend(["--", spec.as_str()]);
                Ok(Addition {
                    commit: None,
                    source: Source::File(path.to_owned()),
                    lines: added_lines(&git(&self.path, &args)?),
                })
            })
            .collect()
    }

    /// What pushing the branch sends: for every commit since the base (merged ones
    /// included), its message and what it adds against its first parent.
    pub fn branch_additions(&self) -> Result<Vec<Addition>> {
        let range = format!("{}..HEAD", self.base);
        let commits = git(&self.path, &["rev-list", "--reverse", &range])?;
        let mut out = Vec::new();
        for commit in commits.lines().filter(|c| !c.is_empty()) {
            let message = git(&self.path, &["log", "-1", "--format=%B", commit])?;
            out.push(Addition {
                commit: Some(commit.to_owned()),
                source: Source::Message,
                lines: (1..).zip(message.lines().map(str::to_owned)).collect(),
            });
            let tree = [
                "diff-tree",
                "-r",
                "--root",
                "-m",
                "--first-parent",
                "--no-commit-id",
            ];
            let mut list = tree.to_vec();
            list.extend([
                "--name-only",
                "-z",
                "--no-renames",
                "--diff-filter=d",
                commit,
            ]);
            let listing = git(&self.path, &list)?;
            for path in paths(&listing) {
                let mut args = tree.to_vec();
                args.push("-p");
                args.extend(AS_TEXT);
                let spec = literal(path);
                args.extend([commit, "--", spec.as_str()]);
                out.push(Addition {
                    commit: Some(commit.to_owned()),
                    source: Source::File(path.to_owned()),
                    lines: added_lines(&git(&self.path, &args)?),
                });
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn added_lines_carry_their_numbers_in_the_new_file() {
        let patch = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,0 +2,2 @@\n+two\n+three\r\n@@ -9 +11 @@\n-old\n+eleven\n\\ No newline at end of file";
        assert_eq!(
            added_lines(patch),
            [
                (2, "two".to_owned()),
                (3, "three".to_owned()),
                (11, "eleven".to_owned())
            ]
        );
        assert_eq!(added_lines("+++ b/not-a-line\n"), []);
    }
}
