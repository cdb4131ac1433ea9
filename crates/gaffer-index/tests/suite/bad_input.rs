//! Bad input is indexed as far as possible or skipped with a reason; never a crash.

use gaffer_index::{build_index, Error, IndexOptions, MemoryCache};

use super::support::*;

fn reason<'a>(index: &'a gaffer_index::Index, path: &str) -> &'a str {
    index
        .skipped
        .iter()
        .find(|s| s.path == path)
        .map(|s| s.reason.as_str())
        .unwrap_or_else(|| panic!("{path} not skipped; skipped: {:?}", index.skipped))
}

#[test]
fn a_non_utf8_file_is_indexed_lossily_with_a_note() {
    let repo = Repo::new(&[]);
    repo.write(
        "latin1.py",
        b"# caf\xe9\ndef brewed():\n    return '\xff'\n",
    );
    let index = repo.index();
    assert!(has_def(&index, "latin1.py", "brewed", "function"));
    let notes = &file(&index, "latin1.py").facts.notes;
    assert!(
        notes.iter().any(|n| n.contains("invalid UTF-8")),
        "{notes:?}"
    );
}

#[test]
fn a_50_mb_file_is_skipped_as_too_large() {
    let repo = Repo::new(&[("small.py", "def small(): pass\n")]);
    let line = "x = 1  # padding padding padding padding padding padding padding\n";
    let big = line.repeat(50 * 1024 * 1024 / line.len() + 1);
    repo.write("huge.py", big.as_bytes());
    let index = repo.index();
    assert!(
        reason(&index, "huge.py").starts_with("too large"),
        "{:?}",
        index.skipped
    );
    assert!(has_def(&index, "small.py", "small", "function"));
}

#[test]
fn binary_files_are_skipped() {
    let repo = Repo::new(&[("ok.py", "def ok(): pass\n")]);
    repo.write("blob.dat", &[0, 1, 2, 3, 0, 0, 255]);
    repo.write("fake.py", b"def x(): pass\n\0\0\0binary tail");
    repo.write("logo.png", b"\x89PNG\r\n\x1a\n");
    let index = repo.index();
    assert!(reason(&index, "fake.py").contains("binary"));
    assert!(reason(&index, "blob.dat").contains("binary"));
    assert!(reason(&index, "logo.png").contains("binary"));
    assert_eq!(index.files.len(), 1);
}

#[cfg(unix)]
#[test]
fn broken_and_escaping_symlinks_are_skipped() {
    let repo = Repo::new(&[("real.py", "def real(): pass\n")]);
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.py"), "def secret(): pass\n").unwrap();
    std::os::unix::fs::symlink(
        repo.path().join("missing.py"),
        repo.path().join("dangling.py"),
    )
    .unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("secret.py"),
        repo.path().join("escape.py"),
    )
    .unwrap();
    std::os::unix::fs::symlink(repo.path().join("real.py"), repo.path().join("alias.py")).unwrap();
    let index = repo.index();
    assert_eq!(reason(&index, "dangling.py"), "broken symlink");
    assert!(reason(&index, "escape.py").contains("outside"));
    assert!(has_def(&index, "alias.py", "real", "function"));
}

#[test]
fn a_file_tree_sitter_cannot_parse_keeps_what_it_can() {
    let repo = Repo::new(&[(
        "broken.py",
        "def good_before():\n    return 1\n\ndef broken(:\n    return ]\n\nclass StillFound:\n    def method(self):\n        pass\n",
    )]);
    let index = repo.index();
    assert!(has_def(&index, "broken.py", "good_before", "function"));
    assert!(
        has_def(&index, "broken.py", "StillFound", "class"),
        "{:?}",
        def_names(&index, "broken.py")
    );
    let notes = &file(&index, "broken.py").facts.notes;
    assert!(
        notes.iter().any(|n| n.contains("syntax errors")),
        "{notes:?}"
    );
    // The words are indexed either way.
    assert!(file(&index, "broken.py")
        .facts
        .terms
        .get("broken")
        .is_some());
}

#[test]
fn a_missing_repository_or_a_file_is_a_clear_error() {
    let repo = Repo::new(&[("a.py", "x = 1\n")]);
    let err = build_index(
        &repo.path().join("nope"),
        &MemoryCache::new(),
        &IndexOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(err, Error::Repo { .. }), "{err}");
    assert!(err.to_string().contains("nope"), "{err}");
    let err = build_index(
        &repo.path().join("a.py"),
        &MemoryCache::new(),
        &IndexOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(err, Error::NotADirectory { .. }), "{err}");
}

#[test]
fn an_empty_repository_gives_an_empty_selection() {
    let repo = Repo::new(&[]);
    let index = repo.index();
    assert!(index.files.is_empty());
    let graph = gaffer_index::FileGraph::build(&index);
    assert!(gaffer_index::rank(
        &index,
        &graph,
        "anything",
        &gaffer_index::Weights::default()
    )
    .is_empty());
}
