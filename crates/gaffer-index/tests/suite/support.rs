//! Fixture repositories written into temp dirs.

use std::path::Path;

use gaffer_index::{build_index, FileGraph, Index, IndexOptions, MemoryCache};

pub struct Repo {
    pub dir: tempfile::TempDir,
}

impl Repo {
    pub fn new(files: &[(&str, &str)]) -> Self {
        let repo = Repo {
            dir: tempfile::tempdir().unwrap(),
        };
        for (path, content) in files {
            repo.write(path, content.as_bytes());
        }
        repo
    }

    pub fn write(&self, path: &str, content: &[u8]) {
        let full = self.dir.path().join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, content).unwrap();
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The index with every file's tree-sitter symbols (what a ranking's candidates get).
    pub fn index(&self) -> Index {
        let cache = MemoryCache::new();
        let mut index = build_index(self.path(), &cache, &IndexOptions::default()).unwrap();
        let all: Vec<usize> = (0..index.files.len()).collect();
        index.parse_symbols(&all, &cache).unwrap();
        index
    }

    /// The index as a full build leaves it: the scanner's definitions and references.
    pub fn scanned(&self) -> Index {
        build_index(self.path(), &MemoryCache::new(), &IndexOptions::default()).unwrap()
    }
}

pub fn file<'a>(index: &'a Index, path: &str) -> &'a gaffer_index::IndexedFile {
    index
        .files
        .iter()
        .find(|f| f.path == path)
        .unwrap_or_else(|| {
            panic!(
                "{path} not indexed; have {:?}",
                index.files.iter().map(|f| &f.path).collect::<Vec<_>>()
            )
        })
}

pub fn pos(index: &Index, path: &str) -> usize {
    index.files.iter().position(|f| f.path == path).unwrap()
}

/// Paths `from` imports (resolved import edges).
pub fn imports_of(index: &Index, graph: &FileGraph, from: &str) -> Vec<String> {
    let i = pos(index, from);
    let mut v: Vec<String> = graph.out[i]
        .iter()
        .filter(|e| e.kind == gaffer_index::graph::EdgeKind::Import)
        .map(|e| index.files[e.to].path.clone())
        .collect();
    v.sort();
    v
}

pub fn def_names(index: &Index, path: &str) -> Vec<(String, String)> {
    file(index, path)
        .facts
        .defs
        .iter()
        .map(|d| (d.name.clone(), d.kind.clone()))
        .collect()
}

pub fn has_def(index: &Index, path: &str, name: &str, kind: &str) -> bool {
    def_names(index, path)
        .iter()
        .any(|(n, k)| n == name && k == kind)
}

pub fn refs(index: &Index, path: &str) -> Vec<String> {
    file(index, path)
        .facts
        .refs
        .iter()
        .map(|(n, _)| n.to_string())
        .collect()
}
