//! Budget fit: the top files in full, then signature skeletons (a repo map) of the next ones,
//! counted with a real tokenizer; never over budget.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use serde::Serialize;
use tiktoken_rs::CoreBPE;

use crate::error::{Error, Result};
use crate::index::{Index, IndexedFile};
use crate::rank::Ranked;

/// Which BPE counts tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum TokenizerKind {
    /// OpenAI cl100k_base (GPT-4, GPT-3.5).
    #[default]
    Cl100k,
    /// OpenAI o200k_base (GPT-4o and later).
    O200k,
}

/// A loaded tokenizer. It remembers the counts it made (by a hash of the text): a fit counts
/// the same full files and skeletons again as it widens its candidates, and a process that
/// keeps one tokenizer counts the same files for every task of a repository.
pub struct Tokenizer {
    bpe: &'static CoreBPE,
    counted: Mutex<HashMap<[u8; 32], usize>>,
}

/// How many counts a tokenizer remembers before it forgets them all (about 3 MB).
const COUNTS_REMEMBERED: usize = 64 * 1024;

/// Texts shorter than this are counted again rather than remembered (a listing line).
const REMEMBERED_FROM_BYTES: usize = 256;

impl Tokenizer {
    /// Loads `kind` (once per process).
    pub fn load(kind: TokenizerKind) -> Result<Self> {
        static CL: OnceLock<std::result::Result<CoreBPE, String>> = OnceLock::new();
        static O2: OnceLock<std::result::Result<CoreBPE, String>> = OnceLock::new();
        let (cell, name, f): (_, _, fn() -> std::result::Result<CoreBPE, String>) = match kind {
            TokenizerKind::Cl100k => (&CL, "cl100k", || {
                tiktoken_rs::cl100k_base().map_err(|e| e.to_string())
            }),
            TokenizerKind::O200k => (&O2, "o200k", || {
                tiktoken_rs::o200k_base().map_err(|e| e.to_string())
            }),
        };
        match cell.get_or_init(f) {
            Ok(bpe) => Ok(Self {
                bpe,
                counted: Mutex::default(),
            }),
            Err(message) => Err(Error::Tokenizer {
                name: name.into(),
                message: message.clone(),
            }),
        }
    }

    /// Number of tokens in `text`.
    pub fn count(&self, text: &str) -> usize {
        if text.len() < REMEMBERED_FROM_BYTES {
            return self.bpe.encode_ordinary(text).len();
        }
        let key = *blake3::hash(text.as_bytes()).as_bytes();
        let counted = |m: &Mutex<HashMap<[u8; 32], usize>>| {
            // A panic elsewhere while holding the lock leaves nothing half-written here.
            m.lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&key)
                .copied()
        };
        if let Some(n) = counted(&self.counted) {
            return n;
        }
        let n = self.bpe.encode_ordinary(text).len();
        let mut memo = self.counted.lock().unwrap_or_else(|e| e.into_inner());
        if memo.len() >= COUNTS_REMEMBERED {
            memo.clear();
        }
        memo.insert(key, n);
        n
    }
}

/// How a file is included.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// The whole file.
    Full,
    /// Signatures only.
    Skeleton,
}

/// One selected file.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// Path relative to the repository root.
    pub path: String,
    /// Tokens of `text`.
    pub tokens: usize,
    /// Full or skeleton.
    pub mode: Mode,
    /// Ranking score.
    pub score: f32,
    /// Why it was chosen.
    pub reasons: Vec<String>,
    /// What the agent gets for this file.
    pub text: String,
}

/// A selection within a budget.
#[derive(Clone, Debug, PartialEq)]
pub struct Selection {
    /// The budget asked for.
    pub budget: usize,
    /// Tokens used (sum over entries), never above `budget`.
    pub used: usize,
    /// Entries in rank order.
    pub files: Vec<Entry>,
}

impl Selection {
    /// The pack an agent gets: the entries' texts in rank order.
    pub fn pack(&self) -> String {
        self.files.iter().map(|e| e.text.as_str()).collect()
    }
}

/// Options of the fit.
#[derive(Clone, Debug)]
pub struct PackOptions {
    /// Token budget.
    pub budget: usize,
    /// Share of the budget that full files may take; the rest is for skeletons.
    pub full_share: f32,
    /// Share of the budget one full file may take (a larger one goes in as a skeleton).
    pub file_share: f32,
    /// Share of the budget one skeleton may take (a larger one is cut).
    pub skeleton_share: f32,
    /// The first this many ranked files are always included (a skeleton cut to fit if need
    /// be); others go in whole or not at all.
    pub cut_skeletons: usize,
    /// Tokens kept free for each of those top files until it is placed.
    pub map_reserve: usize,
    /// How many ranked files are considered at most.
    pub max_candidates: usize,
    /// Share of the budget kept for a listing of the ranked files that got no entry otherwise:
    /// the path and the top-level names, one short skeleton each, so a file ranked lower still
    /// reaches the agent's map.
    pub list_share: f32,
}

impl Default for PackOptions {
    fn default() -> Self {
        Self {
            budget: 8000,
            full_share: 0.9,
            file_share: 0.8,
            skeleton_share: 0.15,
            cut_skeletons: 10,
            map_reserve: 48,
            max_candidates: 200,
            list_share: 0.15,
        }
    }
}

fn render_full(f: &IndexedFile, content: &str) -> String {
    let mut s = format!("----- {} (full) -----\n{content}", f.path);
    if !s.ends_with('\n') {
        s.push('\n');
    }
    s
}

/// Skeleton lines of a file: each definition's signature, indented by nesting, with its lines.
pub fn skeleton_lines(f: &IndexedFile) -> Vec<String> {
    let defs = &f.facts.defs;
    let mut depth = vec![0usize; defs.len()];
    let mut lines = Vec::with_capacity(defs.len());
    for (i, d) in defs.iter().enumerate() {
        if let Some(p) = d.parent {
            depth[i] = depth.get(p as usize).map(|x| x + 1).unwrap_or(0);
        }
        lines.push(format!(
            "{}{}  # L{}-{}",
            "  ".repeat(depth[i]),
            d.signature,
            d.line,
            d.end_line
        ));
    }
    lines
}

fn render_skeleton(f: &IndexedFile, lines: &[String], omitted: usize) -> String {
    let mut s = format!("----- {} (skeleton) -----\n", f.path);
    for l in lines {
        s.push_str(l);
        s.push('\n');
    }
    if omitted > 0 {
        s.push_str(&format!("… {omitted} more definitions\n"));
    }
    s
}

/// The listing skeleton: the header and the top-level names (at most `LISTED_NAMES`).
fn render_listing(f: &IndexedFile) -> String {
    let top: Vec<&str> = f
        .facts
        .defs
        .iter()
        .filter(|d| d.parent.is_none())
        .map(|d| d.name.as_str())
        .collect();
    let mut s = format!("----- {} (skeleton) -----\n", f.path);
    if !top.is_empty() {
        s.push_str(&top[..top.len().min(LISTED_NAMES)].join(", "));
        if top.len() > LISTED_NAMES {
            s.push_str(&format!(" … {} more", top.len() - LISTED_NAMES));
        }
        s.push('\n');
    }
    s
}

/// Top-level names a listing shows.
const LISTED_NAMES: usize = 4;

/// `fit`'s first pass stops once fewer tokens than this are left: no full file or skeleton is
/// that small.
pub(crate) const USED_UP_BELOW: usize = 24;

/// The listing stops once fewer tokens than this are left: no listed file is that small.
pub(crate) const LISTED_BELOW: usize = 6;

fn entry(r: &Ranked, f: &IndexedFile, mode: Mode, text: String, tokens: usize) -> Entry {
    Entry {
        path: f.path.clone(),
        tokens,
        mode,
        score: r.score,
        reasons: r.reasons.clone(),
        text,
    }
}

/// Fits `ranked` into `opts.budget` tokens, in rank order: a file goes in full if it fits the
/// room left for full files (and its own cap), else as a skeleton (cut to its cap). The first
/// `opts.cut_skeletons` files always keep a little room (`opts.map_reserve` tokens each), so the
/// top of the ranking is at least on the map, never crowded out by full files above it. Reads
/// full files from the working tree; a file that can no longer be read goes in as a skeleton.
pub fn fit(index: &Index, ranked: &[Ranked], opts: &PackOptions, tok: &Tokenizer) -> Selection {
    fit_placing(index, ranked, opts, tok).0
}

/// [`fit`], and whether its first pass (full files and skeletons) used up the budget less the
/// listing's share: then candidates ranked lower could only be listed.
pub(crate) fn fit_placing(
    index: &Index,
    ranked: &[Ranked],
    opts: &PackOptions,
    tok: &Tokenizer,
) -> (Selection, bool) {
    let budget = opts.budget;
    let share = |x: f32| ((budget as f32) * x.clamp(0.0, 1.0)) as usize;
    let full_cap = share(opts.full_share);
    let file_cap = share(opts.file_share);
    let skeleton_cap = share(opts.skeleton_share).max(400);
    let top = opts.cut_skeletons.min(ranked.len());
    let list_reserve = share(opts.list_share);
    let mut used = 0usize;
    let mut files: Vec<(usize, Entry)> = Vec::new();
    let mut unplaced = Vec::new();
    for (k, r) in ranked.iter().take(opts.max_candidates).enumerate() {
        let remaining = budget.saturating_sub(used);
        if remaining < USED_UP_BELOW {
            break;
        }
        // Room kept for the top files ranked below this one, and for the listing.
        let reserve = top.saturating_sub(k + 1) * opts.map_reserve + list_reserve;
        let free = remaining.saturating_sub(reserve);
        if free < USED_UP_BELOW && k >= top {
            unplaced.push(k);
            continue;
        }
        let f = &index.files[r.file];
        let room = full_cap.saturating_sub(used).min(file_cap).min(free);
        let mut chosen: Option<(Mode, String, usize)> = None;
        // Code averages 3–4 bytes a token; a file estimated at twice the room left is not counted.
        if room >= 20 && (f.size as usize) / 4 <= room * 2 {
            if let Ok(bytes) = std::fs::read(index.root.join(&f.path)) {
                let text = render_full(f, &String::from_utf8_lossy(&bytes));
                let t = tok.count(&text);
                if t <= room {
                    chosen = Some((Mode::Full, text, t));
                }
            }
        }
        if chosen.is_none() {
            let lines = skeleton_lines(f);
            let text = render_skeleton(f, &lines, 0);
            let t = tok.count(&text);
            let room = free.min(skeleton_cap);
            if t <= room {
                chosen = Some((Mode::Skeleton, text, t));
            } else if k < top {
                // Too big, but among the top: keep as many leading definitions as fit (binary
                // search on the count), at least the header. Lower down a cut skeleton is not
                // worth its room.
                let room = room.max(opts.map_reserve.min(remaining));
                let (mut lo, mut hi) = (0usize, lines.len());
                let mut best = None;
                let header = render_skeleton(f, &[], lines.len());
                let ht = tok.count(&header);
                if ht <= room {
                    best = Some((Mode::Skeleton, header, ht));
                }
                while lo < hi {
                    let mid = (lo + hi).div_ceil(2);
                    let text = render_skeleton(f, &lines[..mid], lines.len() - mid);
                    let t = tok.count(&text);
                    if t <= room {
                        best = Some((Mode::Skeleton, text, t));
                        lo = mid;
                    } else {
                        hi = mid - 1;
                    }
                }
                chosen = best;
            }
        }
        match chosen {
            Some((mode, text, tokens)) => {
                used += tokens;
                files.push((k, entry(r, f, mode, text, tokens)));
            }
            None => unplaced.push(k),
        }
    }
    let placed_all = budget.saturating_sub(used + list_reserve) < USED_UP_BELOW;
    // The listing: files that got nothing above, in rank order, while they fit.
    for k in unplaced {
        let remaining = budget.saturating_sub(used);
        if remaining < LISTED_BELOW {
            break;
        }
        let r = &ranked[k];
        let f = &index.files[r.file];
        let text = render_listing(f);
        let tokens = tok.count(&text);
        if tokens <= remaining {
            used += tokens;
            files.push((k, entry(r, f, Mode::Skeleton, text, tokens)));
        }
    }
    files.sort_by_key(|(k, _)| *k);
    let files = files.into_iter().map(|(_, e)| e).collect();
    let sel = Selection {
        budget,
        used,
        files,
    };
    (sel, placed_all)
}
