//! Strict unified diffs: every hunk must match the file exactly at the line its header
//! names (no fuzz, no offset search beyond the shift of earlier hunks). A hunk that does
//! not apply is an error naming the file, the hunk and the first differing line.

/// One `--- / +++` section of a patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilePatch {
    /// Path before (`None` for `/dev/null`: a new file).
    pub old_path: Option<String>,
    /// Path after (`None` for `/dev/null`: a deletion).
    pub new_path: Option<String>,
    /// Hunks in order.
    pub hunks: Vec<Hunk>,
}

impl FilePatch {
    /// The path this patch touches.
    pub fn path(&self) -> &str {
        self.new_path
            .as_deref()
            .or(self.old_path.as_deref())
            .unwrap_or("")
    }
}

/// One `@@` hunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    /// 1-based start line in the old file (0 for an empty old side).
    pub old_start: usize,
    /// Lines of the old side.
    pub old_count: usize,
    /// 1-based start line in the new file.
    pub new_start: usize,
    /// Lines of the new side.
    pub new_count: usize,
    /// Lines: (`' '`, `'-'` or `'+'`, text without newline).
    pub lines: Vec<(char, String)>,
    /// The new side's last line has no trailing newline.
    pub new_no_newline: bool,
}

/// Why a patch was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    /// The text is not a unified diff.
    #[error("patch is not a valid unified diff: {0}")]
    Parse(String),
    /// A hunk does not match the file.
    #[error("hunk {hunk} of {path} does not apply at line {line}: expected {expected:?}, found {found:?}; the file was left unchanged. Re-read the file and regenerate the patch")]
    HunkFailed {
        /// File.
        path: String,
        /// 1-based hunk number.
        hunk: usize,
        /// 1-based line in the current file.
        line: usize,
        /// Line the patch expected.
        expected: String,
        /// Line found (or `<end of file>`).
        found: String,
    },
    /// The patch creates a file that exists or edits one that does not.
    #[error("{0}")]
    FileState(String),
}

fn strip_prefix(p: &str) -> Option<String> {
    let p = p.split('\t').next().unwrap_or(p).trim_end();
    if p == "/dev/null" {
        return None;
    }
    let p = p
        .strip_prefix("a/")
        .or_else(|| p.strip_prefix("b/"))
        .unwrap_or(p);
    Some(p.to_string())
}

fn parse_range(s: &str) -> Result<(usize, usize), PatchError> {
    let bad = || PatchError::Parse(format!("bad hunk range {s:?}"));
    let (a, b) = match s.split_once(',') {
        Some((a, b)) => (a, Some(b)),
        None => (s, None),
    };
    let start = a.parse::<usize>().map_err(|_| bad())?;
    let count = match b {
        Some(b) => b.parse::<usize>().map_err(|_| bad())?,
        None => 1,
    };
    Ok((start, count))
}

/// Parse a (possibly multi-file) unified diff.
pub fn parse_patch(text: &str) -> Result<Vec<FilePatch>, PatchError> {
    let lines: Vec<&str> = text.lines().collect();
    let mut files = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i];
        if let Some(old) = l.strip_prefix("--- ") {
            let new = lines
                .get(i + 1)
                .and_then(|n| n.strip_prefix("+++ "))
                .ok_or_else(|| PatchError::Parse(format!("line {}: `---` without `+++`", i + 1)))?;
            let mut fp = FilePatch {
                old_path: strip_prefix(old),
                new_path: strip_prefix(new),
                hunks: Vec::new(),
            };
            if fp.old_path.is_none() && fp.new_path.is_none() {
                return Err(PatchError::Parse("both sides are /dev/null".into()));
            }
            i += 2;
            while i < lines.len() && lines[i].starts_with("@@") {
                let h = lines[i];
                let inner = h
                    .strip_prefix("@@ ")
                    .and_then(|r| r.split_once(" @@"))
                    .map(|(r, _)| r)
                    .ok_or_else(|| {
                        PatchError::Parse(format!("line {}: bad hunk header {h:?}", i + 1))
                    })?;
                let mut parts = inner.split_whitespace();
                let old_r = parts
                    .next()
                    .and_then(|p| p.strip_prefix('-'))
                    .ok_or_else(|| {
                        PatchError::Parse(format!("line {}: bad hunk header {h:?}", i + 1))
                    })?;
                let new_r = parts
                    .next()
                    .and_then(|p| p.strip_prefix('+'))
                    .ok_or_else(|| {
                        PatchError::Parse(format!("line {}: bad hunk header {h:?}", i + 1))
                    })?;
                let (old_start, old_count) = parse_range(old_r)?;
                let (new_start, new_count) = parse_range(new_r)?;
                let mut hunk = Hunk {
                    old_start,
                    old_count,
                    new_start,
                    new_count,
                    lines: Vec::new(),
                    new_no_newline: false,
                };
                i += 1;
                let (mut o, mut n) = (0usize, 0usize);
                while i < lines.len() && (o < old_count || n < new_count) {
                    let l = lines[i];
                    let (tag, body) = match l.chars().next() {
                        Some(c @ (' ' | '-' | '+')) => (c, &l[1..]),
                        None => (' ', ""),
                        Some('\\') => {
                            i += 1;
                            continue;
                        }
                        Some(_) => {
                            return Err(PatchError::Parse(format!(
                                "line {}: hunk has fewer lines than its header says",
                                i + 1
                            )))
                        }
                    };
                    match tag {
                        ' ' => {
                            o += 1;
                            n += 1
                        }
                        '-' => o += 1,
                        _ => n += 1,
                    }
                    hunk.lines.push((tag, body.to_string()));
                    i += 1;
                }
                if o != old_count || n != new_count {
                    return Err(PatchError::Parse(format!(
                        "hunk {h:?} declares -{old_count}/+{new_count} lines but has -{o}/+{n}"
                    )));
                }
                if i < lines.len() && lines[i].starts_with('\\') {
                    if hunk.lines.last().is_some_and(|(t, _)| *t != '-') {
                        hunk.new_no_newline = true;
                    }
                    i += 1;
                }
                fp.hunks.push(hunk);
            }
            if fp.hunks.is_empty() {
                return Err(PatchError::Parse(format!("no hunks for {}", fp.path())));
            }
            files.push(fp);
        } else {
            // `diff --git`, `index`, mode lines and commentary between files are skipped.
            i += 1;
        }
    }
    if files.is_empty() {
        return Err(PatchError::Parse(
            "no `--- a/path` / `+++ b/path` file header found".into(),
        ));
    }
    Ok(files)
}

/// Apply one file's hunks to its current content (`None` = file absent). Returns the new
/// content (`None` = delete).
pub fn apply_file_patch(
    original: Option<&str>,
    fp: &FilePatch,
) -> Result<Option<String>, PatchError> {
    let path = fp.path().to_string();
    match (original.is_some(), fp.old_path.is_some()) {
        (true, false) => {
            return Err(PatchError::FileState(format!(
                "patch creates {path} but it already exists; the file was left unchanged"
            )))
        }
        (false, true) => {
            return Err(PatchError::FileState(format!(
                "patch edits {path} but it does not exist"
            )))
        }
        _ => {}
    }
    let text = original.unwrap_or("");
    let mut had_final_newline = text.ends_with('\n');
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let mut shift: isize = 0;
    for (hi, h) in fp.hunks.iter().enumerate() {
        let start0 = if h.old_count == 0 {
            h.old_start
        } else {
            h.old_start.saturating_sub(1)
        };
        let at = (start0 as isize + shift).max(0) as usize;
        let mut k = at;
        for (tag, body) in &h.lines {
            if *tag == '+' {
                continue;
            }
            let found = lines.get(k);
            if found.map(String::as_str) != Some(body.as_str()) {
                return Err(PatchError::HunkFailed {
                    path,
                    hunk: hi + 1,
                    line: k + 1,
                    expected: body.clone(),
                    found: found.cloned().unwrap_or_else(|| "<end of file>".into()),
                });
            }
            k += 1;
        }
        let new: Vec<String> = h
            .lines
            .iter()
            .filter(|(t, _)| *t != '-')
            .map(|(_, b)| b.clone())
            .collect();
        let new_len = new.len();
        lines.splice(at..at + h.old_count, new);
        shift += new_len as isize - h.old_count as isize;
        if at + new_len == lines.len() {
            had_final_newline = !h.new_no_newline;
        }
    }
    if fp.new_path.is_none() {
        return Ok(None);
    }
    let mut out = lines.join("\n");
    if !lines.is_empty() && had_final_newline {
        out.push('\n');
    }
    Ok(Some(out))
}

/// Apply a single-file unified diff to `original`.
pub fn apply_unified_diff(original: &str, patch: &str) -> Result<String, PatchError> {
    let files = parse_patch(patch)?;
    let [fp] = files.as_slice() else {
        return Err(PatchError::Parse(format!(
            "expected one file in the patch, found {}",
            files.len()
        )));
    };
    Ok(apply_file_patch(Some(original), fp)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn applies_and_refuses() {
        let orig = "a\nb\nc\nd\n";
        let p = "--- a/f\n+++ b/f\n@@ -2,2 +2,2 @@\n b\n-c\n+C\n";
        assert_eq!(apply_unified_diff(orig, p).unwrap(), "a\nb\nC\nd\n");
        let bad = "--- a/f\n+++ b/f\n@@ -2,2 +2,2 @@\n x\n-c\n+C\n";
        let e = apply_unified_diff(orig, bad).unwrap_err();
        assert!(matches!(e, PatchError::HunkFailed { line: 2, .. }), "{e}");
    }

    #[test]
    fn two_hunks_shift() {
        let orig = "1\n2\n3\n4\n5\n6\n";
        let p = "--- a/f\n+++ b/f\n@@ -1,1 +1,2 @@\n 1\n+1.5\n@@ -5,1 +6,1 @@\n-5\n+five\n";
        assert_eq!(
            apply_unified_diff(orig, p).unwrap(),
            "1\n1.5\n2\n3\n4\nfive\n6\n"
        );
    }

    #[test]
    fn new_file_and_no_newline() {
        let files = parse_patch(
            "--- /dev/null\n+++ b/n.txt\n@@ -0,0 +1,2 @@\n+x\n+y\n\\ No newline at end of file\n",
        )
        .unwrap();
        assert_eq!(apply_file_patch(None, &files[0]).unwrap().unwrap(), "x\ny");
    }

    #[test]
    fn count_mismatch_is_a_parse_error() {
        assert!(matches!(
            parse_patch("--- a/f\n+++ b/f\n@@ -1,3 +1,1 @@\n-a\n+b\n"),
            Err(PatchError::Parse(_))
        ));
    }
}
