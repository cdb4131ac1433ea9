//! An index a long-lived process keeps in memory (`gaffer serve`, `gaffer worker`, `gaffer run`):
//! the per-file facts and the file graph, brought up to date before each query by a walk and a
//! stat per file, so a query costs ranking and fitting, not loading.

use std::path::Path;
use std::time::Instant;

use crate::cache::IndexCache;
use crate::error::Result;
use crate::graph::FileGraph;
use crate::index::{build_index, Index, IndexOptions, IndexReport};
use crate::pack::{PackOptions, Selection, Tokenizer};
use crate::rank::{rank, Weights};
use crate::select::{parse_and_fit, rank_neighbourhood};

/// The index of one directory and its file graph, kept up to date by [`LiveIndex::refresh`].
///
/// It holds only tier-1 facts (the scanner's): a query parses the tree-sitter tier into a
/// snapshot (a clone sharing the facts), so what a query ranks on never depends on what earlier
/// queries parsed, and the index equals one built from scratch (tested after random edits).
#[derive(Clone, Debug)]
pub struct LiveIndex {
    index: Index,
    graph: FileGraph,
    opts: IndexOptions,
}

impl LiveIndex {
    /// Indexes `root` (through `cache`: unchanged content is not parsed again) and builds its
    /// graph.
    pub fn build(root: &Path, cache: &dyn IndexCache, opts: &IndexOptions) -> Result<Self> {
        let index = build_index(root, cache, opts)?;
        let graph = FileGraph::build(&index);
        Ok(Self {
            index,
            graph,
            opts: opts.clone(),
        })
    }

    /// The index of `root` started from `base`'s (a task's worktree from its project's
    /// checkout): each file of `root` is hashed once, and content `base` holds keeps `base`'s
    /// facts, so only files that differ are loaded from the cache or extracted.
    pub fn seeded(root: &Path, base: &LiveIndex, cache: &dyn IndexCache) -> Result<Self> {
        let mut live = base.clone();
        live.index.root = std::fs::canonicalize(root).map_err(|source| crate::Error::Repo {
            path: root.to_path_buf(),
            source,
        })?;
        live.refresh(cache)?;
        Ok(live)
    }

    /// Brings the index and the graph up to date with the files on disk: a walk and a stat
    /// per file, a read of the files whose size or mtime changed (or that changed within the
    /// last two seconds), facts extracted only for content neither in memory nor in the cache,
    /// and graph edges recomputed only where the changed files can move them. Returns what was
    /// done (`changed` lists the paths whose content changed).
    pub fn refresh(&mut self, cache: &dyn IndexCache) -> Result<IndexReport> {
        let started = Instant::now();
        let mut report = self.index.refresh(cache, &self.opts)?;
        self.graph.update(&self.index, &report.changed);
        report.elapsed = started.elapsed();
        Ok(report)
    }

    /// Parses the tree-sitter tier of every file into `cache` (not into this index), a batch
    /// at a time, so that later queries find their candidates' symbols there instead of
    /// parsing them on the way (what a server does once per project, in the background).
    /// Content already in the cache is skipped. Returns how many files were parsed.
    pub fn warm_symbols(&self, cache: &dyn IndexCache) -> Result<usize> {
        let all: Vec<usize> = (0..self.index.files.len()).collect();
        let mut parsed = 0;
        for batch in all.chunks(64) {
            parsed += self.index.clone().parse_symbols(batch, cache)?;
        }
        Ok(parsed)
    }

    /// The index as of the last refresh.
    pub fn index(&self) -> &Index {
        &self.index
    }

    /// The file graph as of the last refresh.
    pub fn graph(&self) -> &FileGraph {
        &self.graph
    }

    /// Ranks the files for `text` and fits them into `opts.budget` tokens (what
    /// [`crate::select_context`] does, on this index as it is: refresh first).
    pub fn select_context(
        &self,
        text: &str,
        opts: &PackOptions,
        tok: &Tokenizer,
        cache: &dyn IndexCache,
    ) -> Result<Selection> {
        let ranked = rank(&self.index, &self.graph, text, &Weights::default());
        parse_and_fit(&mut self.index.clone(), &ranked, opts, tok, cache)
    }

    /// The `changed` files (paths relative to the root) and their neighbourhood, fitted into
    /// `opts.budget` tokens (what [`crate::select_neighbourhood`] does, on this index).
    pub fn select_neighbourhood(
        &self,
        changed: &[String],
        opts: &PackOptions,
        tok: &Tokenizer,
        cache: &dyn IndexCache,
    ) -> Result<Selection> {
        let ranked = rank_neighbourhood(&self.index, &self.graph, changed);
        parse_and_fit(&mut self.index.clone(), &ranked, opts, tok, cache)
    }
}
