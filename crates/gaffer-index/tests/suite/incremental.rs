//! The cache: unchanged files are not parsed again.

use gaffer_index::{
    build_index, update_index, ContentKey, DirCache, IndexCache, IndexOptions, MemoryCache,
    FORMAT_VERSION,
};
use pretty_assertions::assert_eq;

use super::support::*;

#[test]
fn unchanged_files_are_not_reparsed() {
    let repo = Repo::new(&[
        ("a.py", "def a(): pass\n"),
        ("b.py", "def b(): pass\n"),
        ("c.go", "package c\nfunc C() {}\n"),
    ]);
    let cache = MemoryCache::new();
    let opts = IndexOptions::default();
    let first = build_index(repo.path(), &cache, &opts).unwrap();
    assert_eq!((first.report.parsed, first.report.reused), (3, 0));

    let again = build_index(repo.path(), &cache, &opts).unwrap();
    assert_eq!((again.report.parsed, again.report.reused), (0, 3));

    repo.write("b.py", b"def b2(): pass\n");
    let changed = build_index(repo.path(), &cache, &opts).unwrap();
    assert_eq!((changed.report.parsed, changed.report.reused), (1, 2));
    assert!(has_def(&changed, "b.py", "b2", "function"));

    repo.write("d.py", b"def d(): pass\n");
    std::fs::remove_file(repo.path().join("a.py")).unwrap();
    let added = build_index(repo.path(), &cache, &opts).unwrap();
    assert_eq!((added.report.parsed, added.report.reused), (1, 2));
    let paths: Vec<&str> = added.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, vec!["b.py", "c.go", "d.py"]);

    // Content seen before (under the same language) is a cache hit, wherever it lives.
    repo.write("e.py", b"def a(): pass\n");
    let copied = build_index(repo.path(), &cache, &opts).unwrap();
    assert_eq!(copied.report.parsed, 0);
}

#[test]
fn unchanged_files_are_not_even_read_once_their_mtime_is_settled() {
    let repo = Repo::new(&[("a.py", "def a(): pass\n"), ("b.py", "def b(): pass\n")]);
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
    for f in ["a.py", "b.py"] {
        std::fs::File::options()
            .write(true)
            .open(repo.path().join(f))
            .unwrap()
            .set_modified(old)
            .unwrap();
    }
    let cache = MemoryCache::new();
    build_index(repo.path(), &cache, &IndexOptions::default()).unwrap();
    let again = build_index(repo.path(), &cache, &IndexOptions::default()).unwrap();
    assert_eq!((again.report.hashed, again.report.parsed), (0, 0));
}

#[test]
fn the_directory_cache_round_trips_and_survives_a_new_process() {
    let repo = Repo::new(&[("a.py", "def a(): pass\n"), ("b.rs", "fn b() {}\n")]);
    let dir = tempfile::tempdir().unwrap();
    let first = build_index(
        repo.path(),
        &DirCache::new(dir.path()),
        &IndexOptions::default(),
    )
    .unwrap();
    assert_eq!(first.report.parsed, 2);
    let second = build_index(
        repo.path(),
        &DirCache::new(dir.path()),
        &IndexOptions::default(),
    )
    .unwrap();
    assert_eq!((second.report.parsed, second.report.reused), (0, 2));
    assert_eq!(
        first.files.iter().map(|f| &f.facts).collect::<Vec<_>>(),
        second.files.iter().map(|f| &f.facts).collect::<Vec<_>>()
    );

    let cache = DirCache::new(dir.path());
    let key = ContentKey::for_file(&[7; 32], "python");
    assert_eq!(cache.get_many(&[key]).unwrap(), vec![None]);
    cache.put_many(&[(key, b"v".to_vec())]).unwrap();
    assert_eq!(cache.get_many(&[key]).unwrap(), vec![Some(b"v".to_vec())]);
}

#[test]
fn keys_carry_the_format_version_and_the_language() {
    let k = ContentKey::for_file(&[1; 32], "python");
    assert_eq!(k.format, FORMAT_VERSION);
    assert!(k.to_hex().starts_with(&format!("v{FORMAT_VERSION}-")));
    assert_ne!(k, ContentKey::for_file(&[1; 32], "text"));
    assert_ne!(k, ContentKey::for_file(&[2; 32], "python"));
    let older = ContentKey {
        format: FORMAT_VERSION - 1,
        ..k
    };
    let cache = MemoryCache::new();
    cache.put_many(&[(older, b"old layout".to_vec())]).unwrap();
    assert_eq!(cache.get_many(&[k]).unwrap(), vec![None]);
}

#[test]
fn a_corrupt_cached_value_is_parsed_again() {
    let repo = Repo::new(&[("a.py", "def a(): pass\n")]);
    let cache = MemoryCache::new();
    let first = build_index(repo.path(), &cache, &IndexOptions::default()).unwrap();
    let key = ContentKey::for_file(&first.files[0].hash, "python");
    cache.put_many(&[(key, vec![0xff; 3])]).unwrap();
    let again = build_index(repo.path(), &cache, &IndexOptions::default()).unwrap();
    assert_eq!(again.report.parsed, 1);
    assert!(has_def(&again, "a.py", "a", "function"));
}

#[test]
fn update_index_parses_only_the_changed_file_and_counts_like_a_full_build() {
    let repo = Repo::new(&[
        ("a.py", "def a(): pass\n"),
        ("b.py", "def b(): pass\ndef b2(): pass\n"),
        ("r.md", "# doc\n"),
    ]);
    let cache = MemoryCache::new();
    let first = update_index(repo.path(), &cache, &IndexOptions::default()).unwrap();
    assert_eq!((first.files, first.symbols, first.report.parsed), (3, 3, 3));
    repo.write("a.py", b"def a(): pass\ndef a2(): pass\n");
    let second = update_index(repo.path(), &cache, &IndexOptions::default()).unwrap();
    assert_eq!(
        (second.files, second.symbols, second.report.parsed),
        (3, 4, 1)
    );
    let full = build_index(repo.path(), &cache, &IndexOptions::default()).unwrap();
    assert_eq!(full.report.parsed, 0);
    assert_eq!(
        full.files.iter().map(|f| f.facts.defs.len()).sum::<usize>(),
        4
    );
}

#[test]
fn identical_files_share_one_cache_entry_in_the_directory_cache() {
    // Regression: parallel writes of one key raced on a shared temporary file.
    let files: Vec<(String, &str)> = (0..64)
        .map(|i| (format!("copy_{i}.py"), "def same(): pass\n"))
        .collect();
    let refs: Vec<(&str, &str)> = files.iter().map(|(a, b)| (a.as_str(), *b)).collect();
    let repo = Repo::new(&refs);
    let dir = tempfile::tempdir().unwrap();
    let index = build_index(
        repo.path(),
        &DirCache::new(dir.path()),
        &IndexOptions::default(),
    )
    .unwrap();
    assert_eq!(index.files.len(), 64);
    let again = build_index(
        repo.path(),
        &DirCache::new(dir.path()),
        &IndexOptions::default(),
    )
    .unwrap();
    assert_eq!(again.report.parsed, 0);
}

#[test]
fn the_directory_cache_writes_a_batch_as_one_pack_and_survives_a_torn_one() {
    let dir = tempfile::tempdir().unwrap();
    let cache = DirCache::new(dir.path());
    let keys: Vec<ContentKey> = (0..50u8)
        .map(|i| ContentKey::for_file(&[i; 32], "python"))
        .collect();
    let entries: Vec<(ContentKey, Vec<u8>)> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| (*k, vec![i as u8; i + 1]))
        .collect();
    cache.put_many(&entries).unwrap();
    let packs: Vec<_> = std::fs::read_dir(dir.path().join("packs"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(packs.len(), 1);
    // Another instance (another process) reads the same values.
    let fresh = DirCache::new(dir.path());
    let got = fresh.get_many(&keys).unwrap();
    assert!(got
        .iter()
        .enumerate()
        .all(|(i, v)| v.as_deref() == Some(&vec![i as u8; i + 1][..])));
    // A torn pack is ignored, not an error: its values are simply absent.
    let pack = packs[0].path();
    let len = std::fs::metadata(&pack).unwrap().len();
    std::fs::File::options()
        .write(true)
        .open(&pack)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    let torn = DirCache::new(dir.path());
    assert!(torn.get_many(&keys).unwrap().iter().all(Option::is_none));
}
