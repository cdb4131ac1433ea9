//! Project memory: one notes file per project (conventions, lessons learned) that
//! gaffer keeps in its data dir, beside the journal, and gives every role in its
//! prompt. People write it (`gaffer memory add|edit`); agents only propose
//! additions, which a person approves (an approval of kind `memory`) before gaffer
//! writes them. The file is outside every worktree, so no agent can write it.

use std::path::{Path, PathBuf};

/// The most of a project's memory gaffer keeps and puts in a prompt, in bytes: an
/// addition that would make the file longer is refused; a file a person made
/// longer by hand is given cut at this size, with a note saying so.
pub const MEMORY_MAX_BYTES: usize = 8 * 1024;

/// The longest addition an agent may propose, in bytes.
pub const PROPOSAL_MAX_BYTES: usize = 2 * 1024;

/// What went wrong with a project's memory file.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The addition would make the memory longer than [`MEMORY_MAX_BYTES`].
    #[error("project `{project}`'s memory would be {would_be} bytes, over the {MEMORY_MAX_BYTES}-byte limit; trim it with `gaffer memory edit {project}` first")]
    Full {
        /// The project.
        project: String,
        /// Its size with the addition.
        would_be: usize,
    },
    /// Nothing to add.
    #[error("the addition is empty")]
    Empty,
}

/// Where `project`'s memory lives: `<data dir>/memory/<project>.md`. Project names
/// are letters, digits, `-`, `_` and `.` (checked when registered), so the name
/// never leaves the directory.
pub fn path(data_dir: &Path, project: &str) -> PathBuf {
    data_dir
        .join("memory")
        .join(format!("{}.md", project.replace(['/', '\\', '\0'], "_")))
}

/// The project's memory as it is on disk (empty when there is none).
pub fn read(data_dir: &Path, project: &str) -> Result<String, MemoryError> {
    let path = path(data_dir, project);
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(source) => Err(MemoryError::Io { path, source }),
    }
}

/// The memory as a prompt gives it: `None` when there is none; at most
/// [`MEMORY_MAX_BYTES`], cut at a line with a note when longer.
pub fn for_prompt(data_dir: &Path, project: &str) -> Option<String> {
    let text = match read(data_dir, project) {
        Ok(text) => text,
        Err(e) => {
            tracing::warn!("project memory not given to the agent: {e}");
            return None;
        }
    };
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    if text.len() <= MEMORY_MAX_BYTES {
        return Some(text.to_owned());
    }
    let mut end = MEMORY_MAX_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let cut = text[..end].rfind('\n').unwrap_or(end);
    Some(format!(
        "{}\n(the rest of the memory is cut: it is longer than {MEMORY_MAX_BYTES} bytes)",
        &text[..cut]
    ))
}

/// Adds `text` as a new entry at the end of the project's memory, written whole
/// (a temporary file renamed over it). `Ok(false)` when the memory already holds
/// it word for word (an addition recorded twice, after a crash, is written once).
pub fn add(data_dir: &Path, project: &str, text: &str) -> Result<bool, MemoryError> {
    let entry = text.trim();
    if entry.is_empty() {
        return Err(MemoryError::Empty);
    }
    let current = read(data_dir, project)?;
    if holds(&current, entry) {
        return Ok(false);
    }
    let mut next = current.trim_end().to_owned();
    if !next.is_empty() {
        next.push_str("\n\n");
    }
    next.push_str(entry);
    next.push('\n');
    if next.len() > MEMORY_MAX_BYTES {
        return Err(MemoryError::Full {
            project: project.to_owned(),
            would_be: next.len(),
        });
    }
    write(data_dir, project, &next)?;
    Ok(true)
}

/// Whether `memory` already holds `entry` as a whole entry (its own paragraph),
/// not merely its words inside a longer one.
pub fn holds(memory: &str, entry: &str) -> bool {
    format!("\n\n{}\n\n", memory.trim()).contains(&format!("\n\n{}\n\n", entry.trim()))
}

/// Replaces the project's memory with `text` (what a person edited).
pub fn write(data_dir: &Path, project: &str, text: &str) -> Result<(), MemoryError> {
    let path = path(data_dir, project);
    let io = |source| MemoryError::Io {
        path: path.clone(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let tmp = path.with_extension("md.tmp");
    std::fs::write(&tmp, text).map_err(io)?;
    std::fs::rename(&tmp, &path).map_err(io)
}

/// The addition an agent's answer proposes: every fenced ```` ```memory ```` block,
/// joined; `None` without one. Longer than [`PROPOSAL_MAX_BYTES`], it is cut (the
/// person approving sees exactly what would be written).
pub fn proposal(answer: &str) -> Option<String> {
    let mut found = Vec::new();
    let mut rest = answer;
    while let Some(start) = rest.find("```") {
        let after = &rest[start + 3..];
        let Some(nl) = after.find('\n') else { break };
        let lang = after[..nl].trim();
        let body = &after[nl + 1..];
        let Some(end) = body.find("```") else { break };
        if lang.eq_ignore_ascii_case("memory") {
            let block = body[..end].trim();
            if !block.is_empty() {
                found.push(block);
            }
        }
        rest = &body[end + 3..];
    }
    if found.is_empty() {
        return None;
    }
    let mut text = found.join("\n");
    if text.len() > PROPOSAL_MAX_BYTES {
        let mut end = PROPOSAL_MAX_BYTES;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    Some(text)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_proposal_is_every_memory_block_and_nothing_else() {
        let answer = "Done.\n```json\n{\"verdict\":\"done\"}\n```\n```memory\nRun `make check` first.\n```\ntext\n```Memory\nDocs live in docs/.\n```\n";
        assert_eq!(
            proposal(answer).as_deref(),
            Some("Run `make check` first.\nDocs live in docs/.")
        );
        assert_eq!(proposal("```json\n{}\n```"), None);
        assert_eq!(proposal("```memory\n   \n```"), None);
        let long = format!("```memory\n{}\n```", "é".repeat(PROPOSAL_MAX_BYTES));
        assert_eq!(proposal(&long).unwrap().len(), PROPOSAL_MAX_BYTES);
    }

    #[test]
    fn additions_are_written_once_and_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        assert_eq!(for_prompt(d, "demo"), None);
        assert!(add(d, "demo", "Use tabs.\n").unwrap());
        assert!(!add(d, "demo", "Use tabs.").unwrap(), "twice is once");
        assert!(add(d, "demo", "Run make check.").unwrap());
        assert_eq!(read(d, "demo").unwrap(), "Use tabs.\n\nRun make check.\n");
        assert_eq!(
            for_prompt(d, "demo").as_deref(),
            Some("Use tabs.\n\nRun make check.")
        );
        let big = "x".repeat(MEMORY_MAX_BYTES);
        assert!(matches!(
            add(d, "demo", &big),
            Err(MemoryError::Full { .. })
        ));
        assert_eq!(read(d, "demo").unwrap(), "Use tabs.\n\nRun make check.\n");
        // A person made it longer by hand: the prompt gets it cut, saying so.
        write(d, "demo", &format!("{}\n{big}", "line\n".repeat(10))).unwrap();
        let given = for_prompt(d, "demo").unwrap();
        assert!(given.len() <= MEMORY_MAX_BYTES + 100, "{}", given.len());
        assert!(given.ends_with("longer than 8192 bytes)"), "{given}");
        // Held means held as an entry: words inside a longer entry are not it.
        write(d, "demo", "Never run make check.\n").unwrap();
        assert!(add(d, "demo", "run make check.").unwrap());
        assert_eq!(
            read(d, "demo").unwrap(),
            "Never run make check.\n\nrun make check.\n"
        );
        // A name never leaves the memory directory.
        assert_eq!(path(d, "../x"), d.join("memory").join(".._x.md"));
    }
}
