//! The index a process keeps in memory: after any sequence of edits, refreshing it gives what
//! a build from scratch gives — the same files and facts, the same graph, the same packs.

use gaffer_index::{IndexOptions, LiveIndex, MemoryCache, PackOptions, Tokenizer, TokenizerKind};
use pretty_assertions::assert_eq;
use proptest::prelude::*;

use super::support::*;

/// A Python module whose definitions, imports and calls depend on `seed`, so edits move
/// definitions between files and change the graph's edges.
fn module(seed: u32) -> String {
    let (a, b, c, d) = (seed % 7, seed / 7 % 5, seed / 35 % 6, seed / 210 % 7);
    format!(
        "\"\"\"Module {seed}: renders widgets.\"\"\"\nfrom .m{c} import render_{d}\n\n\ndef render_{a}(frame, options=None):\n    \"\"\"Render frame {a}.\"\"\"\n    if options:\n        raise ValueError(\"bad widget option {b}\")\n    return render_{d}(frame) + Widget{b}().draw()\n\n\nclass Widget{a}:\n    def draw(self):\n        return layout_{b}(self)\n\n\ndef layout_{a}(widget):\n    return [widget] * {seed}\n"
    )
}

/// What one edit does to the tree.
#[derive(Clone, Debug)]
enum Edit {
    Create {
        name: u8,
        seed: u32,
    },
    Modify {
        pick: u8,
        seed: u32,
    },
    Delete {
        pick: u8,
    },
    Rename {
        pick: u8,
        name: u8,
    },
    /// A file that is not Python: the index keeps its words, the graph has no edges for it.
    Note {
        name: u8,
        seed: u32,
    },
    /// Binary content: skipped with a reason.
    Binary {
        name: u8,
    },
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        3 => (0u8..12, 0u32..2000).prop_map(|(name, seed)| Edit::Create { name, seed }),
        4 => (any::<u8>(), 0u32..2000).prop_map(|(pick, seed)| Edit::Modify { pick, seed }),
        2 => any::<u8>().prop_map(|pick| Edit::Delete { pick }),
        2 => (any::<u8>(), 0u8..12).prop_map(|(pick, name)| Edit::Rename { pick, name }),
        1 => (0u8..4, 0u32..2000).prop_map(|(name, seed)| Edit::Note { name, seed }),
        1 => (0u8..3).prop_map(|name| Edit::Binary { name }),
    ]
}

fn files_of(repo: &Repo) -> Vec<String> {
    let mut out: Vec<String> = walk(repo.path(), repo.path());
    out.sort();
    out
}

fn walk(root: &std::path::Path, dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(root, &p));
        } else {
            out.push(p.strip_prefix(root).unwrap().to_string_lossy().into_owned());
        }
    }
    out
}

fn apply(repo: &Repo, e: &Edit) {
    let existing = files_of(repo);
    let pick =
        |k: u8| (!existing.is_empty()).then(|| existing[k as usize % existing.len()].clone());
    match e {
        Edit::Create { name, seed } => {
            repo.write(&format!("pkg/m{name}.py"), module(*seed).as_bytes())
        }
        Edit::Modify { pick: k, seed } => {
            if let Some(p) = pick(*k) {
                repo.write(&p, module(*seed).as_bytes());
            }
        }
        Edit::Delete { pick: k } => {
            if let Some(p) = pick(*k) {
                std::fs::remove_file(repo.path().join(p)).unwrap();
            }
        }
        Edit::Rename { pick: k, name } => {
            if let Some(p) = pick(*k) {
                let to = repo.path().join(format!("pkg/sub/m{name}.py"));
                std::fs::create_dir_all(to.parent().unwrap()).unwrap();
                std::fs::rename(repo.path().join(p), to).unwrap();
            }
        }
        Edit::Note { name, seed } => repo.write(
            &format!("docs/note{name}.md"),
            format!("# Widgets\n\nCall `render_{}` with a frame.\n", seed % 7).as_bytes(),
        ),
        Edit::Binary { name } => repo.write(&format!("pkg/blob{name}.py"), b"\0\x01binary"),
    }
}

/// Everything a pack depends on must be equal: files (path, language, size, hash, facts),
/// skipped files with reasons, the graph, and the selections for task texts and for review.
fn assert_same(live: &LiveIndex, fresh: &LiveIndex, tok: &Tokenizer) {
    assert_eq!(live.index().files, fresh.index().files);
    assert_eq!(live.index().skipped, fresh.index().skipped);
    assert_eq!(live.graph(), fresh.graph());
    let opts = PackOptions {
        budget: 1500,
        ..PackOptions::default()
    };
    for text in [
        "render_3 raises ValueError: bad widget option 2",
        "Widget4.draw returns the wrong layout",
    ] {
        assert_eq!(
            live.select_context(text, &opts, tok, &MemoryCache::new())
                .unwrap(),
            fresh
                .select_context(text, &opts, tok, &MemoryCache::new())
                .unwrap(),
            "{text}"
        );
    }
    let changed: Vec<String> = live
        .index()
        .files
        .iter()
        .take(2)
        .map(|f| f.path.clone())
        .collect();
    assert_eq!(
        live.select_neighbourhood(&changed, &opts, tok, &MemoryCache::new())
            .unwrap(),
        fresh
            .select_neighbourhood(&changed, &opts, tok, &MemoryCache::new())
            .unwrap()
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

    #[test]
    fn a_refreshed_index_equals_one_built_from_scratch_after_random_edits(
        start in proptest::collection::vec(0u32..2000, 1..8),
        rounds in proptest::collection::vec(proptest::collection::vec(edit(), 1..6), 1..5),
    ) {
        let files: Vec<(String, String)> = start
            .iter()
            .enumerate()
            .map(|(i, &seed)| (format!("pkg/m{i}.py"), module(seed)))
            .collect();
        let refs: Vec<(&str, &str)> = files.iter().map(|(p, c)| (p.as_str(), c.as_str())).collect();
        let repo = Repo::new(&refs);
        let tok = Tokenizer::load(TokenizerKind::Cl100k).unwrap();
        let cache = MemoryCache::new();
        let opts = IndexOptions::default();
        let mut live = LiveIndex::build(repo.path(), &cache, &opts).unwrap();
        for round in rounds {
            // A query parses the tree-sitter tier of its candidates: it must not leak into
            // what later queries rank on.
            let pack = PackOptions { budget: 3000, ..PackOptions::default() };
            live.select_context("render widget frame", &pack, &tok, &cache).unwrap();
            for e in &round {
                apply(&repo, e);
            }
            let report = live.refresh(&cache).unwrap();
            let fresh = LiveIndex::build(repo.path(), &MemoryCache::new(), &opts).unwrap();
            assert_same(&live, &fresh, &tok);
            // Only what changed was read from the cache or extracted.
            prop_assert!(report.parsed <= round.len());
        }
    }
}

#[test]
fn a_worktree_seeded_from_its_base_extracts_only_what_differs_and_equals_a_fresh_build() {
    let base = Repo::new(&[
        ("pkg/a.py", &module(1)),
        ("pkg/b.py", &module(2)),
        ("pkg/c.py", &module(3)),
        ("README.md", "# Widgets\n"),
    ]);
    let worktree = Repo::new(&[
        ("pkg/a.py", &module(1)),
        ("pkg/b.py", &module(200)),
        ("pkg/d.py", &module(4)),
        ("README.md", "# Widgets\n"),
    ]);
    let cache = MemoryCache::new();
    let base_index = LiveIndex::build(base.path(), &cache, &IndexOptions::default()).unwrap();
    // An empty cache: whatever the seeded index did not take from its base is extracted.
    let report_cache = MemoryCache::new();
    let mut seeded = LiveIndex::seeded(worktree.path(), &base_index, &report_cache).unwrap();
    let fresh = LiveIndex::build(
        worktree.path(),
        &MemoryCache::new(),
        &IndexOptions::default(),
    )
    .unwrap();
    let tok = Tokenizer::load(TokenizerKind::Cl100k).unwrap();
    assert_same(&seeded, &fresh, &tok);
    assert_eq!(
        seeded.index().root,
        std::fs::canonicalize(worktree.path()).unwrap()
    );
    // Then it lives on its own: an edit in the worktree is one extraction.
    worktree.write("pkg/a.py", module(5).as_bytes());
    let report = seeded.refresh(&report_cache).unwrap();
    assert_eq!(
        (report.parsed, report.changed.clone()),
        (1, vec!["pkg/a.py".to_string()])
    );
    let fresh = LiveIndex::build(
        worktree.path(),
        &MemoryCache::new(),
        &IndexOptions::default(),
    )
    .unwrap();
    assert_same(&seeded, &fresh, &tok);
    // The base is untouched by its worktree's edits.
    assert_eq!(base_index.index().files.len(), 4);
    assert_eq!(
        file(base_index.index(), "pkg/b.py").facts,
        file(&base.scanned(), "pkg/b.py").facts
    );
}

#[test]
fn seeding_reads_facts_from_the_base_not_the_cache() {
    let base = Repo::new(&[("pkg/a.py", &module(1)), ("pkg/b.py", &module(2))]);
    let worktree = Repo::new(&[("pkg/a.py", &module(1)), ("pkg/b.py", &module(9))]);
    let base_index =
        LiveIndex::build(base.path(), &MemoryCache::new(), &IndexOptions::default()).unwrap();
    let cache = MemoryCache::new();
    let seeded = LiveIndex::seeded(worktree.path(), &base_index, &cache).unwrap();
    // a.py's content is the base's: its facts came from memory; b.py's was extracted.
    assert_eq!(seeded.index().report.parsed, 1);
    assert_eq!(seeded.index().report.changed, vec!["pkg/b.py".to_string()]);
}

#[test]
fn files_with_the_same_content_all_take_their_facts_from_memory() {
    // Empty `__init__.py`s and copied modules: one content, many paths. A refresh finds
    // each path's facts in memory, not one in memory and the others in the cache.
    let files = [
        ("pkg/__init__.py", ""),
        ("pkg/sub/__init__.py", ""),
        ("pkg/a.py", &module(1) as &str),
        ("pkg/copy_of_a.py", &module(1)),
    ];
    let base = Repo::new(&files);
    let worktree = Repo::new(&files);
    let base_index =
        LiveIndex::build(base.path(), &MemoryCache::new(), &IndexOptions::default()).unwrap();
    let cache = MemoryCache::new();
    let seeded = LiveIndex::seeded(worktree.path(), &base_index, &cache).unwrap();
    assert_eq!(seeded.index().report.parsed, 0);
    assert_eq!(seeded.index().report.changed, Vec::<String>::new());
}
