//! One-call entry points for the pipeline: context for a task text (the built-in agent's first
//! turn, the prompt of CLI agents) and the neighbourhood of changed files (the reviewer).

use std::collections::HashMap;
use std::path::Path;

use crate::cache::IndexCache;
use crate::error::Result;
use crate::graph::{is_test_path, EdgeKind, FileGraph};
use crate::index::{Index, IndexOptions};
use crate::live::LiveIndex;
use crate::pack::{fit_placing, PackOptions, Selection, Tokenizer, TokenizerKind, LISTED_BELOW};
use crate::rank::Ranked;

/// Indexes `repo` (incrementally, through `cache`), ranks its files for `text` and fits them
/// into `opts.budget` tokens.
pub fn select_context(
    repo: &Path,
    text: &str,
    opts: &PackOptions,
    tokenizer: TokenizerKind,
    cache: &dyn IndexCache,
) -> Result<Selection> {
    let tok = Tokenizer::load(tokenizer)?;
    LiveIndex::build(repo, cache, &IndexOptions::default())?.select_context(text, opts, &tok, cache)
}

/// Indexes `repo` and selects the `changed` files (paths relative to the root) and their
/// neighbourhood: what they import, what imports them, their tests, who defines the names they
/// use and who uses theirs; then fits them into `opts.budget` tokens.
pub fn select_neighbourhood(
    repo: &Path,
    changed: &[String],
    opts: &PackOptions,
    tokenizer: TokenizerKind,
    cache: &dyn IndexCache,
) -> Result<Selection> {
    let tok = Tokenizer::load(tokenizer)?;
    LiveIndex::build(repo, cache, &IndexOptions::default())?
        .select_neighbourhood(changed, opts, &tok, cache)
}

/// Ranks the `changed` files first (in the given order), then their neighbours by how they are
/// linked (import either way 1.0, test 0.9, names used or defined 0.5), then the rest of a
/// PageRank restarted at the changed files. Paths not in the index are ignored.
pub fn rank_neighbourhood(index: &Index, graph: &FileGraph, changed: &[String]) -> Vec<Ranked> {
    let n = index.files.len();
    let by_path: HashMap<&str, usize> = index
        .files
        .iter()
        .enumerate()
        .map(|(i, f)| (f.path.as_str(), i))
        .collect();
    let seeds: Vec<usize> = changed
        .iter()
        .filter_map(|p| by_path.get(p.trim_start_matches("./")).copied())
        .collect();
    let mut score = vec![0f32; n];
    let mut reasons: Vec<Vec<String>> = vec![Vec::new(); n];
    for (k, &s) in seeds.iter().enumerate() {
        score[s] = 3.0 - k as f32 / (seeds.len() as f32 + 1.0);
        reasons[s].push("changed".into());
    }
    for &s in &seeds {
        let src = &index.files[s].path;
        let mut give = |to: usize, how: String, w: f32| {
            if score[to] < w && !seeds.contains(&to) {
                score[to] = w;
                reasons[to] = vec![how];
            }
        };
        for e in &graph.out[s] {
            match e.kind {
                EdgeKind::Import => give(e.to, format!("imported by {src}"), 1.0),
                EdgeKind::Reference => give(e.to, format!("defines names used by {src}"), 0.5),
            }
        }
        for e in &graph.inc[s] {
            if is_test_path(&index.files[e.to].path) {
                give(e.to, format!("test of {src}"), 0.9);
            } else if e.kind == EdgeKind::Import {
                give(e.to, format!("imports {src}"), 1.0);
            } else {
                give(e.to, format!("uses names from {src}"), 0.5);
            }
        }
    }
    let teleport: Vec<f32> = (0..n)
        .map(|i| if seeds.contains(&i) { 1.0 } else { 0.0 })
        .collect();
    if !seeds.is_empty() {
        let pr = graph.pagerank(&teleport, 0.85, 25);
        let max = pr.iter().copied().fold(0.0f32, f32::max).max(1e-9);
        for i in 0..n {
            if score[i] == 0.0 && pr[i] / max > 0.05 {
                score[i] = 0.4 * pr[i] / max;
                reasons[i].push(format!(
                    "graph centrality {:.2} around the changed files",
                    pr[i] / max
                ));
            }
        }
    }
    let mut out: Vec<Ranked> = (0..n)
        .filter(|&i| score[i] > 0.0)
        .map(|i| Ranked {
            file: i,
            score: score[i],
            reasons: std::mem::take(&mut reasons[i]),
        })
        .collect();
    out.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| index.files[a.file].path.cmp(&index.files[b.file].path))
    });
    out
}

/// [`fit`](crate::fit) with the tree-sitter tier for the files it reaches, so skeletons show exact
/// signatures and doc comments: the top candidates are parsed first (a small batch), then more
/// only while the budget is not used up. The selection is the one `fit` makes with every
/// candidate parsed; a cold call parses the files the budget reaches, not all
/// `opts.max_candidates`.
pub fn parse_and_fit(
    index: &mut Index,
    ranked: &[Ranked],
    opts: &PackOptions,
    tok: &Tokenizer,
    cache: &dyn IndexCache,
) -> Result<Selection> {
    let last = opts.max_candidates.min(ranked.len());
    let mut upto = 16.min(last);
    loop {
        let top: Vec<usize> = ranked[..upto].iter().map(|r| r.file).collect();
        index.parse_symbols(&top, cache)?;
        let batch = PackOptions {
            max_candidates: upto,
            ..opts.clone()
        };
        let (sel, placed_all) = fit_placing(index, ranked, &batch, tok);
        // Stopping early changes nothing once the budget is used up, by the first pass and by
        // the listing: `fit` places in rank order and would not go further.
        if upto >= last || (placed_all && sel.budget.saturating_sub(sel.used) < LISTED_BELOW) {
            return Ok(sel);
        }
        upto = (upto * 4).min(last);
    }
}
