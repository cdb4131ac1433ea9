//! Building the index: an ignore-aware walk, a manifest of (size, mtime, hash) per path so that
//! unchanged files are not even read, and facts from the cache or from parsing changed files.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::cache::{ContentKey, IndexCache};
use crate::error::{Error, Result};
use crate::facts::{extract, parse_symbols, FileFacts, ParsedSymbols};
use crate::lang::Lang;

/// How to build an index.
#[derive(Clone, Debug)]
pub struct IndexOptions {
    /// Files larger than this are skipped ("too large").
    pub max_file_bytes: u64,
    /// Include hidden files and directories.
    pub hidden: bool,
}

impl Default for IndexOptions {
    fn default() -> Self {
        Self {
            max_file_bytes: 1024 * 1024,
            hidden: false,
        }
    }
}

/// One indexed file. Its facts are shared: cloning an index (a worktree's seeded from its
/// base's, a snapshot a query parses into) copies pointers, not facts.
#[derive(Clone, Debug, PartialEq)]
pub struct IndexedFile {
    /// Path relative to the root, `/`-separated.
    pub path: String,
    /// Language.
    pub lang: Lang,
    /// Size in bytes.
    pub size: u64,
    /// blake3 of the content.
    pub hash: [u8; 32],
    /// Extracted facts.
    pub facts: Arc<FileFacts>,
}

/// A file left out of the index, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    /// Path relative to the root.
    pub path: String,
    /// Why (binary, too large, broken symlink, unreadable…).
    pub reason: String,
}

/// What building the index did.
#[derive(Clone, Debug, Default)]
pub struct IndexReport {
    /// Files read and hashed (their size or mtime changed, or they are new).
    pub hashed: usize,
    /// Files whose facts were extracted (content not in the cache).
    pub parsed: usize,
    /// Files whose facts came from the cache (or, for [`Index::refresh`], from memory).
    pub reused: usize,
    /// Paths whose content is new or changed since the last index (the cached manifest, or
    /// for [`Index::refresh`] the index in memory); [`crate::FileGraph::update`] takes them.
    pub changed: Vec<String>,
    /// Wall time.
    pub elapsed: Duration,
}

/// The index of one repository.
#[derive(Clone, Debug)]
pub struct Index {
    /// Canonical root.
    pub root: PathBuf,
    /// Indexed files, sorted by path.
    pub files: Vec<IndexedFile>,
    /// Files skipped with a reason.
    pub skipped: Vec<Skipped>,
    /// What this build did.
    pub report: IndexReport,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct ManifestEntry {
    path: String,
    size: u64,
    mtime_ns: u128,
    hash: [u8; 32],
    lang: Lang,
    symbols: u32,
    notes: Vec<String>,
}

struct Walked {
    rel: String,
    abs: PathBuf,
    size: u64,
    mtime_ns: u128,
    lang: Lang,
}

fn rel_path(root: &Path, p: &Path) -> String {
    let rel = p.strip_prefix(root).unwrap_or(p);
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

fn mtime_ns(meta: &std::fs::Metadata) -> u128 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

fn walk(root: &Path, opts: &IndexOptions, skipped: &mut Vec<Skipped>) -> Vec<Walked> {
    let mut out = Vec::new();
    let walker = ignore::WalkBuilder::new(root)
        .hidden(!opts.hidden)
        .git_ignore(true)
        .git_exclude(true)
        .git_global(false)
        .ignore(true)
        .parents(false)
        .require_git(false)
        .follow_links(false)
        .filter_entry(|e| e.file_name() != ".git")
        .build();
    for entry in walker {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                skipped.push(Skipped {
                    path: String::new(),
                    reason: format!("walk error: {e}"),
                });
                continue;
            }
        };
        let Some(ft) = entry.file_type() else {
            continue;
        };
        let abs = entry.path().to_path_buf();
        let rel = rel_path(root, &abs);
        if ft.is_dir() {
            continue;
        }
        let meta = if ft.is_symlink() {
            match std::fs::metadata(&abs) {
                Err(_) => {
                    skipped.push(Skipped {
                        path: rel,
                        reason: "broken symlink".into(),
                    });
                    continue;
                }
                Ok(m) => {
                    let inside = std::fs::canonicalize(&abs)
                        .map(|t| t.starts_with(root))
                        .unwrap_or(false);
                    if !inside {
                        skipped.push(Skipped {
                            path: rel,
                            reason: "symlink points outside the repository".into(),
                        });
                        continue;
                    }
                    if !m.is_file() {
                        continue;
                    }
                    m
                }
            }
        } else if ft.is_file() {
            match entry.metadata() {
                Ok(m) => m,
                Err(e) => {
                    skipped.push(Skipped {
                        path: rel,
                        reason: format!("unreadable: {e}"),
                    });
                    continue;
                }
            }
        } else {
            continue;
        };
        let Some(lang) = Lang::detect(&abs) else {
            skipped.push(Skipped {
                path: rel,
                reason: "binary file type".into(),
            });
            continue;
        };
        if meta.len() > opts.max_file_bytes {
            skipped.push(Skipped {
                path: rel,
                reason: format!(
                    "too large ({} bytes > {} max)",
                    meta.len(),
                    opts.max_file_bytes
                ),
            });
            continue;
        }
        out.push(Walked {
            rel,
            abs,
            size: meta.len(),
            mtime_ns: mtime_ns(&meta),
            lang,
        });
    }
    out.sort_by(|a, b| a.rel.cmp(&b.rel));
    out
}

fn looks_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(8000)].contains(&0)
}

enum Hashed {
    Ok([u8; 32]),
    Skip(String),
}

fn hash_file(w: &Walked) -> Hashed {
    match std::fs::read(&w.abs) {
        Ok(bytes) => {
            if looks_binary(&bytes) {
                Hashed::Skip("binary content (NUL bytes)".into())
            } else {
                Hashed::Ok(*blake3::hash(&bytes).as_bytes())
            }
        }
        Err(e) => Hashed::Skip(format!("unreadable: {e}")),
    }
}

impl Index {
    /// The tree-sitter tier for the files at `which` (indices into `files`): exact definitions
    /// with signatures and doc comments, and references, replace the scanner's. Symbols are
    /// cached by content hash, so a file is parsed once per content; files already parsed,
    /// files without a grammar, and files changed on disk since they were indexed (their
    /// scanned facts stay) are left alone. Returns how many files were parsed now (not found
    /// in the cache).
    pub fn parse_symbols(&mut self, which: &[usize], cache: &dyn IndexCache) -> Result<usize> {
        let mut todo: Vec<usize> = which
            .iter()
            .copied()
            .filter(|&i| {
                self.files
                    .get(i)
                    .is_some_and(|f| !f.facts.parsed && f.lang.is_code())
            })
            .collect();
        todo.sort_unstable();
        todo.dedup();
        if todo.is_empty() {
            return Ok(0);
        }
        let keys: Vec<ContentKey> = todo
            .iter()
            .map(|&i| ContentKey::for_symbols(&self.files[i].hash, self.files[i].lang.tag()))
            .collect();
        let cached = cache.get_many(&keys)?;
        let mut missing = Vec::new();
        for ((&i, key), value) in todo.iter().zip(&keys).zip(cached) {
            match value.and_then(|b| postcard::from_bytes::<ParsedSymbols>(&b).ok()) {
                Some(symbols) => Arc::make_mut(&mut self.files[i].facts).apply(symbols),
                None => missing.push((i, *key)),
            }
        }
        let root = &self.root;
        let files = &self.files;
        let parsed: Vec<(usize, ContentKey, ParsedSymbols)> = missing
            .par_iter()
            .filter_map(|&(i, key)| {
                let f = &files[i];
                let bytes = std::fs::read(root.join(&f.path)).ok()?;
                // The symbols must describe the content the rest of the facts came from.
                (blake3::hash(&bytes).as_bytes() == &f.hash)
                    .then(|| (i, key, parse_symbols(f.lang, &bytes)))
            })
            .collect();
        let puts: Vec<(ContentKey, Vec<u8>)> = parsed
            .iter()
            .filter_map(|(_, key, symbols)| Some((*key, postcard::to_allocvec(symbols).ok()?)))
            .collect();
        if !puts.is_empty() {
            cache.put_many(&puts)?;
        }
        let count = parsed.len();
        for (i, _, symbols) in parsed {
            Arc::make_mut(&mut self.files[i].facts).apply(symbols);
        }
        Ok(count)
    }
}

/// What [`update_index`] reports: the index is up to date in the cache, facts not loaded.
#[derive(Clone, Debug, Default)]
pub struct IndexSummary {
    /// Canonical root.
    pub root: PathBuf,
    /// Number of indexed files.
    pub files: usize,
    /// Number of definitions over all files.
    pub symbols: usize,
    /// Indexed files per language.
    pub languages: std::collections::BTreeMap<Lang, usize>,
    /// Indexed files with notes (invalid UTF-8, syntax errors): path and notes.
    pub notes: Vec<(String, Vec<String>)>,
    /// Files skipped with a reason.
    pub skipped: Vec<Skipped>,
    /// What this update did.
    pub report: IndexReport,
}

struct Scan {
    root: PathBuf,
    entries: Vec<ManifestEntry>,
    /// `None` where the file was unchanged and facts were not asked for.
    facts: Vec<Option<Arc<FileFacts>>>,
    skipped: Vec<Skipped>,
    report: IndexReport,
}

/// Indexes the repository at `root`, reusing facts from `cache` for unchanged content and
/// parsing only files whose content is new. Unreadable, binary, huge files and broken symlinks
/// are skipped with a reason; a file tree-sitter cannot fully parse keeps what could be read.
pub fn build_index(root: &Path, cache: &dyn IndexCache, opts: &IndexOptions) -> Result<Index> {
    let scan = scan(root, cache, opts, true, &Prior::new())?;
    Ok(Index::from_scan(scan))
}

impl Index {
    fn from_scan(scan: Scan) -> Index {
        let files = scan
            .entries
            .into_iter()
            .zip(scan.facts)
            .map(|(e, f)| IndexedFile {
                path: e.path,
                lang: e.lang,
                size: e.size,
                hash: e.hash,
                facts: f.unwrap_or_default(),
            })
            .collect();
        Index {
            root: scan.root,
            files,
            skipped: scan.skipped,
            report: scan.report,
        }
    }

    /// Brings this index up to date with the files on disk, for a process that keeps it in
    /// memory (a server, a long task): a walk and a stat per file; only files whose size or
    /// mtime changed are read, only those whose content changed get their facts from the cache
    /// or extracted, and every other file keeps the facts it has (tree-sitter symbols included).
    /// The manifest in `cache` is updated as by [`update_index`]. Returns what was done; on an
    /// error the index is left empty (build it again).
    pub fn refresh(&mut self, cache: &dyn IndexCache, opts: &IndexOptions) -> Result<IndexReport> {
        let before: HashMap<String, [u8; 32]> = self
            .files
            .iter()
            .map(|f| (f.path.clone(), f.hash))
            .collect();
        let prior: Prior = std::mem::take(&mut self.files)
            .into_iter()
            .map(|f| ((f.hash, f.lang), f.facts))
            .collect();
        let root = self.root.clone();
        let scan = scan(&root, cache, opts, true, &prior)?;
        *self = Index::from_scan(scan);
        self.report.changed = self
            .files
            .iter()
            .filter(|f| before.get(&f.path) != Some(&f.hash))
            .map(|f| f.path.clone())
            .collect();
        Ok(self.report.clone())
    }
}

/// Brings the cached index of `root` up to date without loading the facts of unchanged files
/// (what `gaffer index` does): a walk, a stat per file, and a parse per changed file.
pub fn update_index(
    root: &Path,
    cache: &dyn IndexCache,
    opts: &IndexOptions,
) -> Result<IndexSummary> {
    let scan = scan(root, cache, opts, false, &Prior::new())?;
    let mut summary = IndexSummary {
        root: scan.root,
        files: scan.entries.len(),
        skipped: scan.skipped,
        report: scan.report,
        ..IndexSummary::default()
    };
    for (e, f) in scan.entries.iter().zip(&scan.facts) {
        summary.symbols += e.symbols as usize;
        *summary.languages.entry(e.lang).or_insert(0) += 1;
        if !e.notes.is_empty() {
            summary.notes.push((e.path.clone(), e.notes.clone()));
        } else if let Some(f) = f.as_ref().filter(|f| !f.notes.is_empty()) {
            summary.notes.push((e.path.clone(), f.notes.clone()));
        }
    }
    Ok(summary)
}

/// Facts already in memory, by content hash and language (what [`Index::refresh`] reuses).
type Prior = HashMap<([u8; 32], Lang), Arc<FileFacts>>;

fn scan(
    root: &Path,
    cache: &dyn IndexCache,
    opts: &IndexOptions,
    load_unchanged: bool,
    prior: &Prior,
) -> Result<Scan> {
    let started = Instant::now();
    let meta = std::fs::metadata(root).map_err(|source| Error::Repo {
        path: root.to_path_buf(),
        source,
    })?;
    if !meta.is_dir() {
        return Err(Error::NotADirectory {
            path: root.to_path_buf(),
        });
    }
    let root = std::fs::canonicalize(root).map_err(|source| Error::Repo {
        path: root.to_path_buf(),
        source,
    })?;
    let mut skipped = Vec::new();
    let walked = walk(&root, opts, &mut skipped);

    let manifest_key = ContentKey::for_manifest(&root);
    let old: HashMap<String, ManifestEntry> = cache
        .get_many(&[manifest_key])?
        .into_iter()
        .next()
        .flatten()
        .and_then(|bytes| postcard::from_bytes::<Vec<ManifestEntry>>(&bytes).ok())
        .unwrap_or_default()
        .into_iter()
        .map(|e| (e.path.clone(), e))
        .collect();

    // A file modified in the last two seconds may change again within the same mtime tick:
    // such entries are stored with mtime 0 so that they are hashed again next time.
    let now_ns = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let racy = |m: u128| now_ns.saturating_sub(m) < 2_000_000_000;

    let settled = |w: &Walked| -> Option<&ManifestEntry> {
        old.get(&w.rel).filter(|e| {
            e.size == w.size && e.mtime_ns == w.mtime_ns && e.mtime_ns != 0 && e.lang == w.lang
        })
    };
    let hashes: Vec<(usize, Hashed, bool)> = walked
        .par_iter()
        .enumerate()
        .map(|(i, w)| match settled(w) {
            Some(e) => (i, Hashed::Ok(e.hash), false),
            None => (i, hash_file(w), true),
        })
        .collect();
    let mut report = IndexReport::default();
    // (walked index, content hash, unchanged since the manifest)
    let mut kept: Vec<(usize, [u8; 32], bool)> = Vec::with_capacity(hashes.len());
    for (i, h, fresh) in hashes {
        report.hashed += fresh as usize;
        match h {
            Hashed::Ok(hash) => {
                let same = old
                    .get(&walked[i].rel)
                    .is_some_and(|e| e.hash == hash && e.lang == walked[i].lang);
                if !same {
                    report.changed.push(walked[i].rel.clone());
                }
                kept.push((i, hash, same));
            }
            Hashed::Skip(reason) => skipped.push(Skipped {
                path: walked[i].rel.clone(),
                reason,
            }),
        }
    }

    let keys: Vec<ContentKey> = kept
        .iter()
        .map(|(i, h, _)| ContentKey::for_file(h, walked[*i].lang.tag()))
        .collect();
    let wanted: Vec<usize> = (0..kept.len())
        .filter(|&k| load_unchanged || !kept[k].2)
        .collect();
    let mut facts: Vec<Option<Arc<FileFacts>>> = vec![None; kept.len()];
    for &k in &wanted {
        // Shared, not taken: every path with this content (empty `__init__.py`s, copies)
        // gets these facts, none goes to the cache for them.
        facts[k] = prior.get(&(kept[k].1, walked[kept[k].0].lang)).cloned();
    }
    let wanted: Vec<usize> = wanted.into_iter().filter(|&k| facts[k].is_none()).collect();
    let wanted_keys: Vec<ContentKey> = wanted.iter().map(|&k| keys[k]).collect();
    let decoded: Vec<Option<Arc<FileFacts>>> = cache
        .get_many(&wanted_keys)?
        .into_par_iter()
        .map(|v| v.and_then(|b| postcard::from_bytes::<FileFacts>(&b).ok().map(Arc::new)))
        .collect();
    for (&k, f) in wanted.iter().zip(decoded) {
        facts[k] = f;
    }
    let missing: Vec<usize> = wanted
        .iter()
        .copied()
        .filter(|&k| facts[k].is_none())
        .collect();
    report.reused = kept.len() - missing.len();
    let parsed: Vec<(usize, std::result::Result<FileFacts, String>)> = missing
        .par_iter()
        .map(|&k| {
            let w = &walked[kept[k].0];
            let r = std::fs::read(&w.abs)
                .map(|bytes| extract(w.lang, &bytes))
                .map_err(|e| format!("unreadable: {e}"));
            (k, r)
        })
        .collect();
    let mut puts = Vec::with_capacity(parsed.len());
    let mut unreadable = std::collections::HashSet::new();
    for (k, r) in parsed {
        match r {
            Ok(f) => {
                report.parsed += 1;
                if let Ok(bytes) = postcard::to_allocvec(&f) {
                    puts.push((keys[k], bytes));
                }
                facts[k] = Some(Arc::new(f));
            }
            Err(reason) => {
                unreadable.insert(k);
                skipped.push(Skipped {
                    path: walked[kept[k].0].rel.clone(),
                    reason,
                });
            }
        }
    }
    if !puts.is_empty() {
        cache.put_many(&puts)?;
    }

    let mut entries = Vec::with_capacity(kept.len());
    let mut kept_facts = Vec::with_capacity(kept.len());
    let mut changed = kept.len() != old.len();
    for (k, ((i, hash, _), f)) in kept.into_iter().zip(facts).enumerate() {
        if unreadable.contains(&k) {
            continue;
        }
        let w = &walked[i];
        let prev = old.get(&w.rel);
        let (symbols, notes) = match (&f, prev) {
            (Some(f), _) => (f.defs.len() as u32, f.notes.clone()),
            (None, Some(e)) => (e.symbols, e.notes.clone()),
            (None, None) => (0, Vec::new()),
        };
        let mtime = if racy(w.mtime_ns) { 0 } else { w.mtime_ns };
        match prev {
            Some(e)
                if e.hash == hash
                    && e.mtime_ns == mtime
                    && e.size == w.size
                    && e.lang == w.lang => {}
            _ => changed = true,
        }
        entries.push(ManifestEntry {
            path: w.rel.clone(),
            size: w.size,
            mtime_ns: mtime,
            hash,
            lang: w.lang,
            symbols,
            notes,
        });
        kept_facts.push(f);
    }
    if changed {
        if let Ok(bytes) = postcard::to_allocvec(&entries) {
            cache.put_many(&[(manifest_key, bytes)])?;
        }
    }
    skipped.sort_by(|a, b| a.path.cmp(&b.path));
    report.elapsed = started.elapsed();
    Ok(Scan {
        root,
        entries,
        facts: kept_facts,
        skipped,
        report,
    })
}
