//! Ranking files for a task text.
//!
//! Signals, each normalised to [0, 1] over the repository before weighting (weights: [`Weights`]):
//! * **lexical**: BM25 of the text's terms (identifiers split on case and `_`) over file content;
//! * **path**: the text's terms found in the file's path (file stem counts double);
//! * **symbols**: names the text mentions that the file defines (IDF-weighted, more when written
//!   as code: in backticks, a code block, `dotted.names`, `calls(`), plus `Class.method` pairs;
//! * **named**: a path, file name, dotted module or stack-trace frame in the text resolves to the file;
//! * **graph**: personalised PageRank over the import + reference graph, restarting at the files
//!   the signals above chose;
//! * **neighbours**: files linked to the strongest files (imports, importers, their tests).
//!
//! Priors multiply the sum: tests and non-code files are less likely to be what a task needs
//! first, unless the text names them.

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

use rayon::prelude::*;
use regex::Regex;

use crate::facts::{identifiers, split_identifier};
use crate::graph::{is_test_path, EdgeKind, FileGraph};
use crate::index::Index;

/// All ranking weights, in one place. `Default` holds the tuned values.
#[derive(Clone, Debug)]
pub struct Weights {
    /// BM25 `k1` (term-frequency saturation).
    pub bm25_k1: f32,
    /// BM25 `b` (length normalisation).
    pub bm25_b: f32,
    /// Weight of content BM25.
    pub lexical: f32,
    /// Weight of terms found in the path.
    pub path: f32,
    /// Weight of mentioned symbols defined in the file.
    pub symbol: f32,
    /// Weight of message fragments (string literals of the file) quoted in the text.
    pub literal: f32,
    /// Weight of terms inside `<details>` blocks (environment dumps, logs) relative to others.
    pub details_terms: f32,
    /// Weight of a file named outright (path, file name, module, stack frame).
    pub named: f32,
    /// Weight of personalised PageRank.
    pub pagerank: f32,
    /// Weight given to neighbours of the strongest files.
    pub neighbour: f32,
    /// How many of the strongest files lend weight to their neighbours.
    pub neighbour_sources: usize,
    /// Multiplier for test files not named in the text.
    pub test_prior: f32,
    /// Multiplier for non-code files not named in the text.
    pub text_prior: f32,
    /// Weight of a mention outside code (plain prose) relative to one in code.
    pub prose_mention: f32,
}

impl Default for Weights {
    fn default() -> Self {
        Self {
            bm25_k1: 1.2,
            bm25_b: 0.75,
            lexical: 1.0,
            path: 0.6,
            symbol: 1.0,
            named: 1.0,
            literal: 0.8,
            details_terms: 0.2,
            pagerank: 0.4,
            neighbour: 0.2,
            neighbour_sources: 3,
            test_prior: 0.4,
            text_prior: 0.25,
            prose_mention: 0.0,
        }
    }
}

impl Weights {
    /// Sets one weight by its field name (`--weight pagerank=0.5`); `None` if there is no such name.
    pub fn set(&mut self, name: &str, value: f32) -> Option<()> {
        let slot = match name {
            "bm25_k1" => &mut self.bm25_k1,
            "bm25_b" => &mut self.bm25_b,
            "lexical" => &mut self.lexical,
            "path" => &mut self.path,
            "symbol" => &mut self.symbol,
            "named" => &mut self.named,
            "literal" => &mut self.literal,
            "details_terms" => &mut self.details_terms,
            "pagerank" => &mut self.pagerank,
            "neighbour" => &mut self.neighbour,
            "test_prior" => &mut self.test_prior,
            "text_prior" => &mut self.text_prior,
            "prose_mention" => &mut self.prose_mention,
            "neighbour_sources" => {
                self.neighbour_sources = value.max(0.0) as usize;
                return Some(());
            }
            _ => return None,
        };
        *slot = value;
        Some(())
    }
}

/// One ranked file.
#[derive(Clone, Debug)]
pub struct Ranked {
    /// Index into `Index::files`.
    pub file: usize,
    /// Final score.
    pub score: f32,
    /// Why, in words.
    pub reasons: Vec<String>,
}

const STOPWORDS: &[&str] = &[
    "the",
    "and",
    "for",
    "that",
    "this",
    "with",
    "from",
    "are",
    "was",
    "were",
    "but",
    "not",
    "you",
    "your",
    "have",
    "has",
    "had",
    "can",
    "will",
    "would",
    "should",
    "could",
    "when",
    "what",
    "which",
    "there",
    "their",
    "then",
    "than",
    "them",
    "they",
    "been",
    "being",
    "into",
    "also",
    "some",
    "any",
    "all",
    "only",
    "just",
    "like",
    "about",
    "use",
    "using",
    "used",
    "does",
    "did",
    "doing",
    "how",
    "why",
    "where",
    "who",
    "its",
    "our",
    "out",
    "get",
    "got",
    "one",
    "two",
    "more",
    "most",
    "other",
    "such",
    "very",
    "same",
    "see",
    "seems",
    "seem",
    "way",
    "want",
    "need",
    "here",
    "these",
    "those",
    "because",
    "while",
    "after",
    "before",
    "over",
    "under",
    "between",
    "both",
    "each",
    "few",
    "many",
    "much",
    "own",
    "so",
    "if",
    "is",
    "it",
    "in",
    "on",
    "of",
    "to",
    "as",
    "at",
    "be",
    "by",
    "or",
    "an",
    "we",
    "my",
    "me",
    "do",
    "no",
    "up",
    "self",
    "none",
    "true",
    "false",
    "def",
    "return",
    "import",
    "class",
    "print",
    "py",
    "line",
    "file",
    "lib",
    "site",
    "packages",
    "python",
    "version",
    "expected",
    "error",
    "issue",
    "example",
    "following",
    "output",
    "code",
    "problem",
    "bug",
    "work",
    "works",
    "working",
    "instead",
    "still",
    "now",
    "new",
    "make",
    "think",
    "thanks",
    "please",
    "would",
    "happen",
    "happened",
    "what",
    "actual",
    "behavior",
    "behaviour",
    "traceback",
    "recent",
    "call",
    "last",
    "most",
    "http",
    "https",
    "www",
    "com",
    "github",
];

fn stopword(t: &str) -> bool {
    static SET: OnceLock<HashSet<&'static str>> = OnceLock::new();
    SET.get_or_init(|| STOPWORDS.iter().copied().collect())
        .contains(t)
}

/// A path the text mentions: `File "x.py", line 3, in f`, `x.py:3`, `x.py in f(…)`, `x.py`.
struct PathMention {
    path: String,
    line: Option<u32>,
    /// The function a traceback line names after the path (`in f`).
    func: Option<String>,
    at: usize,
}

impl PathMention {
    fn is_frame(&self) -> bool {
        self.line.is_some() || self.func.is_some()
    }
}

/// The function a traceback line names right after a path (`, in f`, ` in Class.f(`).
fn frame_function(after: &str) -> Option<String> {
    let rest = after.trim_start_matches([',', ' ']);
    let rest = rest.strip_prefix("in ")?;
    let name: String = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '.')
        .collect();
    let name = name.rsplit('.').next().unwrap_or("").to_string();
    (name.len() >= 3 && name != "module").then_some(name)
}

/// What the text names or mentions.
struct Query {
    /// Lower-cased terms with weights.
    terms: HashMap<String, f32>,
    /// Path-like mentions in text order. One with a line or a function is a stack frame.
    paths: Vec<PathMention>,
    /// Identifier mentions: name → best context weight (1 in code, `prose_mention` in prose).
    idents: HashMap<String, f32>,
    /// `Outer.inner` pairs.
    pairs: HashSet<(String, String)>,
    /// Dotted chains (for module mentions).
    dotted: HashSet<String>,
}

fn res() -> Option<&'static (Regex, Regex, Regex)> {
    static R: OnceLock<Option<(Regex, Regex, Regex)>> = OnceLock::new();
    R.get_or_init(|| {
        Some((
            Regex::new(r#"File "([^"]+)", line (\d+)"#).ok()?,
            Regex::new(r"(?:[A-Za-z0-9_.\-]*/)*[A-Za-z0-9_\-]+(?:\.[A-Za-z0-9_\-]+)*\.(?:py|pyi|rs|js|jsx|mjs|ts|tsx|go|java|c|h|cc|cpp|hpp|cxx|rb|toml|cfg|ini|yaml|yml|json|md|rst|txt)(?::(\d+))?\b").ok()?,
            Regex::new(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*(\s*\()?").ok()?,
        ))
    })
    .as_ref()
}

/// Byte mask of `text` that lies in code: backtick spans, fenced blocks, `>>>` and indented lines.
fn code_mask(text: &str) -> Vec<bool> {
    let mut mask = vec![false; text.len()];
    let mut pos = 0;
    let mut in_fence = false;
    for line in text.split_inclusive('\n') {
        let t = line.trim_start();
        let fence = t.starts_with("```") || t.starts_with("~~~");
        let code_line = in_fence
            || fence
            || t.starts_with(">>>")
            || line.starts_with("    ")
            || line.starts_with('\t');
        if code_line {
            mask[pos..pos + line.len()]
                .iter_mut()
                .for_each(|m| *m = true);
        } else {
            let mut inside = false;
            for (i, b) in line.bytes().enumerate() {
                if b == b'`' {
                    inside = !inside;
                }
                if inside {
                    mask[pos + i] = true;
                }
            }
        }
        if fence {
            in_fence = !in_fence;
        }
        pos += line.len();
    }
    mask
}

/// Byte mask of `text` inside `<details>` … `</details>` (GitHub's fold for environment dumps).
fn details_mask(text: &str) -> Vec<bool> {
    let mut mask = vec![false; text.len()];
    let mut from = 0;
    while let Some(start) = text[from..].find("<details").map(|i| i + from) {
        let end = text[start..]
            .find("</details>")
            .map(|i| start + i + 10)
            .unwrap_or(text.len());
        mask[start..end].iter_mut().for_each(|m| *m = true);
        from = end;
    }
    mask
}

fn looks_like_code(ident: &str) -> bool {
    let b = ident.as_bytes();
    ident.contains('_')
        || b.windows(2)
            .any(|w| w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase())
}

fn parse_query(text: &str, w: &Weights) -> Query {
    let mut q = Query {
        terms: HashMap::new(),
        paths: Vec::new(),
        idents: HashMap::new(),
        pairs: HashSet::new(),
        dotted: HashSet::new(),
    };
    let details = details_mask(text);
    let mut counts: HashMap<String, f32> = HashMap::new();
    for ident in identifiers(text) {
        if ident.len() > 60 {
            continue;
        }
        let at = ident.as_ptr() as usize - text.as_ptr() as usize;
        let wt = if details.get(at).copied().unwrap_or(false) {
            w.details_terms
        } else {
            1.0
        };
        let parts = split_identifier(ident);
        if parts.len() > 1 {
            *counts.entry(ident.to_lowercase()).or_insert(0.0) += wt;
        }
        for p in parts {
            *counts.entry(p).or_insert(0.0) += wt;
        }
    }
    for (t, c) in counts {
        if t.len() >= 2 && !stopword(&t) {
            q.terms.insert(t, if c >= 1.0 { 1.0 + c.ln() } else { c });
        }
    }
    let Some((frame_re, path_re, ident_re)) = res() else {
        return q;
    };
    let mut covered: Vec<(usize, usize)> = Vec::new();
    for c in frame_re.captures_iter(text) {
        let Some(m) = c.get(0) else { continue };
        covered.push((m.start(), m.end()));
        q.paths.push(PathMention {
            path: c[1].replace('\\', "/"),
            line: c[2].parse().ok(),
            func: frame_function(&text[m.end()..]),
            at: m.start(),
        });
    }
    for c in path_re.captures_iter(text) {
        let Some(m) = c.get(0) else { continue };
        if covered
            .iter()
            .any(|&(a, b)| m.start() >= a && m.start() < b)
        {
            continue;
        }
        let path = m
            .as_str()
            .split(':')
            .next()
            .unwrap_or(m.as_str())
            .to_string();
        let line = c.get(1).and_then(|l| l.as_str().parse().ok());
        q.paths.push(PathMention {
            path,
            line,
            func: frame_function(&text[m.end()..]),
            at: m.start(),
        });
    }
    q.paths.sort_by_key(|p| p.at);
    let mask = code_mask(text);
    for c in ident_re.captures_iter(text) {
        let Some(m) = c.get(0) else { continue };
        let called = c.get(1).is_some();
        let chain = m.as_str().trim_end_matches('(').trim_end();
        let in_code = mask.get(m.start()).copied().unwrap_or(false);
        let comps: Vec<&str> = chain.split('.').collect();
        if comps.len() > 1 {
            q.dotted.insert(chain.to_string());
            for pair in comps.windows(2) {
                q.pairs.insert((pair[0].to_string(), pair[1].to_string()));
            }
        }
        for (k, comp) in comps.iter().enumerate() {
            if comp.len() < 3 {
                continue;
            }
            let codey = in_code
                || comps.len() > 1
                || looks_like_code(comp)
                || (called && k + 1 == comps.len());
            let weight = if codey { 1.0 } else { w.prose_mention };
            let e = q.idents.entry(comp.to_string()).or_insert(0.0);
            *e = e.max(weight);
        }
    }
    q
}

/// Share of a frame resolved through its function's definers rather than its path.
const FRAME_FUNCTION_SHARE: f32 = 0.7;

fn normalise(v: &mut [f32]) {
    let max = v.iter().copied().fold(0.0f32, f32::max);
    if max > 0.0 {
        v.iter_mut().for_each(|x| *x /= max);
    }
}

/// Files whose path ends with `mention` (component-wise), trying shorter suffixes of absolute
/// or foreign paths (`/usr/lib/python3/site-packages/pkg/mod.py` → `pkg/mod.py`).
fn match_path(index: &Index, by_name: &HashMap<&str, Vec<usize>>, mention: &str) -> Vec<usize> {
    let mention = mention.trim_start_matches("./");
    let foreign = mention.starts_with('/')
        || mention.starts_with('~')
        || mention.get(1..3) == Some(":/")
        || mention.contains("site-packages/")
        || mention.contains("dist-packages/");
    let comps: Vec<&str> = mention.split('/').filter(|c| !c.is_empty()).collect();
    let Some(name) = comps.last() else {
        return Vec::new();
    };
    let Some(cands) = by_name.get(name) else {
        return Vec::new();
    };
    // A relative mention must match whole; a foreign (absolute, installed) path may lose its
    // leading directories, down to `dir/file`, or the file alone if its name is distinctive.
    let shortest = if !foreign {
        0
    } else if name.len() >= 8 {
        comps.len() - 1
    } else {
        comps.len().saturating_sub(2)
    };
    let last_try = if foreign { shortest } else { 0 };
    for k in 0..=last_try {
        if k >= comps.len() {
            break;
        }
        let suffix = comps[k..].join("/");
        let hits: Vec<usize> = cands
            .iter()
            .copied()
            .filter(|&i| {
                let p = &index.files[i].path;
                *p == suffix || p.ends_with(&format!("/{suffix}"))
            })
            .collect();
        if !hits.is_empty() {
            return hits;
        }
    }
    Vec::new()
}

/// Message fragments of each file quoted in `text`: score per file, and what matched.
fn literal_hits(index: &Index, text: &str) -> (Vec<f32>, Vec<Vec<String>>) {
    let n = index.files.len();
    // Only fragments whose every word occurs in the text can be quoted in it: a cheap filter
    // that keeps the automaton small on repositories with many strings.
    let words: HashSet<&str> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let mut owners: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, f) in index.files.iter().enumerate() {
        for l in &f.facts.literals {
            let quotable = l
                .split(|c: char| !c.is_alphanumeric())
                .filter(|w| !w.is_empty())
                .all(|w| words.contains(w));
            if quotable {
                owners.entry(l.as_str()).or_default().push(i);
            }
        }
    }
    let patterns: Vec<&str> = owners.keys().copied().collect();
    let mut score = vec![0f32; n];
    let mut hits: Vec<Vec<String>> = vec![Vec::new(); n];
    let Ok(ac) = aho_corasick::AhoCorasick::new(&patterns) else {
        return (score, hits);
    };
    let mut seen = HashSet::new();
    for m in ac.find_overlapping_iter(text) {
        let p = patterns[m.pattern().as_usize()];
        if !seen.insert(p) {
            continue;
        }
        let files = &owners[p];
        if files.len() > 10 {
            continue;
        }
        for &f in files {
            score[f] += (p.len() as f32).sqrt() / files.len() as f32;
            if hits[f].len() < 3 {
                hits[f].push(format!("\"{p}\""));
            }
        }
    }
    (score, hits)
}

/// Ranks the files of `index` for `text`; highest first, ties by path. Files with no signal at
/// all are left out.
pub fn rank(index: &Index, graph: &FileGraph, text: &str, w: &Weights) -> Vec<Ranked> {
    let n = index.files.len();
    if n == 0 {
        return Vec::new();
    }
    let q = parse_query(text, w);
    let mut reasons: Vec<Vec<String>> = vec![Vec::new(); n];

    // (a) lexical: BM25 over content, and path terms.
    let qterms: Vec<(&String, &f32)> = q.terms.iter().collect();
    let qidx: rustc_hash::FxHashMap<&str, usize> = qterms
        .iter()
        .enumerate()
        .map(|(i, (t, _))| (t.as_str(), i))
        .collect();
    // Per file, the query terms it holds and their counts (the one pass over every term).
    let tf: Vec<Vec<(usize, u32)>> = index
        .files
        .par_iter()
        .map(|f| {
            f.facts
                .terms
                .iter()
                .filter_map(|(t, c)| qidx.get(t).map(|&k| (k, c)))
                .collect()
        })
        .collect();
    let mut df = vec![0u32; qterms.len()];
    for row in &tf {
        for &(k, _) in row {
            df[k] += 1;
        }
    }
    let total_len: f64 = index.files.iter().map(|f| f.facts.term_total as f64).sum();
    let avgdl = (total_len / n as f64).max(1.0) as f32;
    let idf: Vec<f32> = df
        .iter()
        .map(|&d| ((n as f32 - d as f32 + 0.5) / (d as f32 + 0.5) + 1.0).ln())
        .collect();
    let mut lex = vec![0f32; n];
    for i in 0..n {
        let dl = index.files[i].facts.term_total as f32;
        let norm = w.bm25_k1 * (1.0 - w.bm25_b + w.bm25_b * dl / avgdl);
        let mut contrib: Vec<(f32, usize)> = tf[i]
            .iter()
            .map(|&(k, c)| {
                let c = c as f32;
                (idf[k] * qterms[k].1 * c * (w.bm25_k1 + 1.0) / (c + norm), k)
            })
            .collect();
        lex[i] = contrib.iter().map(|c| c.0).sum();
        contrib.sort_by(|a, b| b.0.total_cmp(&a.0));
        if !contrib.is_empty() {
            let top: Vec<&str> = contrib
                .iter()
                .take(6)
                .map(|c| qterms[c.1].0.as_str())
                .collect();
            reasons[i].push(format!("matched terms: {}", top.join(", ")));
        }
    }
    normalise(&mut lex);

    let mut path_df: HashMap<String, u32> = HashMap::new();
    let path_terms: Vec<Vec<(String, bool)>> = index
        .files
        .iter()
        .map(|f| {
            let comps: Vec<&str> = f.path.split('/').collect();
            let mut ts = Vec::new();
            for (k, c) in comps.iter().enumerate() {
                let is_stem = k + 1 == comps.len();
                let c = if is_stem {
                    c.split('.').next().unwrap_or(c)
                } else {
                    c
                };
                let mut parts = split_identifier(c);
                if parts.len() > 1 {
                    parts.push(c.to_lowercase());
                }
                for p in parts {
                    if !ts.iter().any(|(t, _)| *t == p) {
                        ts.push((p, is_stem));
                    }
                }
            }
            for (t, _) in &ts {
                *path_df.entry(t.clone()).or_insert(0) += 1;
            }
            ts
        })
        .collect();
    let mut path = vec![0f32; n];
    for i in 0..n {
        let mut hit = Vec::new();
        for (t, is_stem) in &path_terms[i] {
            let singular = t
                .strip_suffix('s')
                .filter(|s| s.len() >= 4 && !s.ends_with('s'));
            if let Some(qw) = q
                .terms
                .get(t)
                .or_else(|| singular.and_then(|s| q.terms.get(s)))
            {
                let d = path_df.get(t).copied().unwrap_or(1) as f32;
                path[i] +=
                    (1.0 + n as f32 / d).ln() * qw.min(2.0) * if *is_stem { 1.0 } else { 0.4 };
                hit.push(t.as_str());
            }
        }
        if !hit.is_empty() {
            reasons[i].push(format!("path matches: {}", hit.join(", ")));
        }
    }
    normalise(&mut path);

    // (b) symbols the text mentions that a file defines.
    let mut sym = vec![0f32; n];
    let mut sym_hits: Vec<Vec<String>> = vec![Vec::new(); n];
    for (name, ctx) in &q.idents {
        if *ctx <= 0.0 {
            continue;
        }
        // A versioned name (`PersonName3`, `urllib2`) the repository no longer defines may
        // mean the unversioned one it does.
        let unversioned = name.trim_end_matches(|c: char| c.is_ascii_digit());
        let renamed = (unversioned.len() < name.len() && unversioned.len() >= 4)
            .then(|| graph.definers.get(unversioned))
            .flatten();
        let found = graph
            .definers
            .get(name)
            .map(|f| (f, 1.0, name.as_str()))
            .or_else(|| renamed.map(|f| (f, 0.6, unversioned)));
        let (files, exact, shown) = match found {
            Some((f, exact, shown)) => (f.clone(), exact, shown),
            None if looks_like_code(name)
                || name.chars().next().is_some_and(char::is_uppercase) =>
            {
                // Case-insensitive fallback: a scan of the defined names (cheaper than a
                // lower-cased copy of them all for every query).
                let f: Vec<usize> = graph
                    .definers
                    .iter()
                    .filter(|(d, _)| d.len() == name.len() && d.eq_ignore_ascii_case(name))
                    .flat_map(|(_, f)| f.iter().copied())
                    .collect();
                if f.is_empty() {
                    continue;
                }
                (f, 0.6, name.as_str())
            }
            None => continue,
        };
        if files.len() > 40 {
            continue;
        }
        let idf = (1.0 + n as f32 / files.len() as f32).ln();
        for f in files {
            sym[f] += idf * ctx * exact;
            sym_hits[f].push(format!("`{shown}`"));
        }
    }
    for (outer, inner) in &q.pairs {
        let Some(files) = graph.definers.get(inner) else {
            continue;
        };
        if files.len() > 40 {
            continue;
        }
        let idf = (1.0 + n as f32 / files.len() as f32).ln();
        for &f in files {
            let defs = &index.files[f].facts.defs;
            let nested = defs.iter().any(|d| {
                d.name == *inner
                    && d.parent
                        .and_then(|p| defs.get(p as usize))
                        .is_some_and(|p| p.name.eq_ignore_ascii_case(outer))
            });
            if nested {
                sym[f] += 2.0 * idf;
                sym_hits[f].push(format!("`{outer}.{inner}`"));
            }
        }
    }
    for i in 0..n {
        if !sym_hits[i].is_empty() {
            sym_hits[i].sort();
            sym_hits[i].dedup();
            let shown: Vec<&str> = sym_hits[i].iter().take(6).map(String::as_str).collect();
            reasons[i].push(format!("defines {}", shown.join(", ")));
        }
    }
    normalise(&mut sym);

    // (b) paths, modules and frames named outright.
    let mut by_name: HashMap<&str, Vec<usize>> = HashMap::new();
    let mut modules: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, f) in index.files.iter().enumerate() {
        by_name
            .entry(f.path.rsplit('/').next().unwrap_or(&f.path))
            .or_default()
            .push(i);
        if let Some(stem) = f.path.strip_suffix(".py") {
            let stem = stem.strip_suffix("/__init__").unwrap_or(stem);
            let comps: Vec<&str> = stem.split('/').collect();
            for k in 0..comps.len().saturating_sub(1) {
                modules.entry(comps[k..].join(".")).or_default().push(i);
            }
        }
    }
    let mut named = vec![0f32; n];
    let mut is_named = vec![false; n];
    // Stack frames: the most recent frame in the repository (the last one printed) is where
    // the error surfaced; earlier frames are its callers. Per file the best frame counts.
    // A frame whose path is not in the repository (a renamed or installed copy) still names
    // its function: its definers stand in for the path, at a lower share.
    let resolved: Vec<(&PathMention, Vec<usize>, f32)> = q
        .paths
        .iter()
        .filter_map(|m| {
            let hits = match_path(index, &by_name, &m.path);
            if !hits.is_empty() {
                return Some((m, hits, 1.0));
            }
            let definers = graph.definers.get(m.func.as_deref()?)?;
            Some((m, definers.clone(), FRAME_FUNCTION_SHARE))
        })
        .filter(|(_, hits, _)| !hits.is_empty() && hits.len() <= 5)
        .collect();
    let frames = resolved.iter().filter(|r| r.0.is_frame()).count();
    let mut frame_no = 0usize;
    let mut frame_best = vec![0f32; n];
    let mut mentions: HashSet<(usize, String)> = HashSet::new();
    for (mention, hits, base) in &resolved {
        let share = base / hits.len() as f32;
        for &h in hits {
            is_named[h] = true;
            let path = &mention.path;
            let reason = match (mention.line, &mention.func) {
                (_, Some(func)) if *base < 1.0 => {
                    format!("defines `{func}`, a frame of {path} in the text")
                }
                (Some(l), _) => format!("named in text: {path}:{l}"),
                (None, _) => format!("named in text: {path}"),
            };
            if mentions.insert((h, reason.clone())) && reasons[h].len() < 8 {
                reasons[h].push(reason);
            }
        }
        if mention.is_frame() {
            let recency = if frames > 1 {
                frame_no as f32 / (frames - 1) as f32
            } else {
                1.0
            };
            frame_no += 1;
            for &h in hits {
                frame_best[h] = frame_best[h].max(share * (0.5 + 0.5 * recency));
            }
        } else {
            for &h in hits {
                named[h] += share;
            }
        }
    }
    for i in 0..n {
        named[i] += frame_best[i];
    }
    for chain in &q.dotted {
        let comps: Vec<&str> = chain.split('.').collect();
        for end in (2..=comps.len()).rev() {
            let key = comps[..end].join(".");
            if let Some(hits) = modules.get(&key) {
                if hits.len() <= 3 {
                    for &h in hits {
                        named[h] += 0.7 / hits.len() as f32;
                        is_named[h] = true;
                        reasons[h].push(format!("module named in text: {key}"));
                    }
                }
                break;
            }
        }
    }
    let (mut lit, lit_hits) = literal_hits(index, text);
    for (i, h) in lit_hits.into_iter().enumerate() {
        if !h.is_empty() {
            reasons[i].push(format!(
                "contains text quoted in the task: {}",
                h.join(", ")
            ));
        }
    }
    normalise(&mut lit);
    for x in named.iter_mut() {
        *x = if *x > 1.0 { 1.0 + x.ln() * 0.3 } else { *x };
    }

    // Combine, apply priors.
    let mut s0 = vec![0f32; n];
    for i in 0..n {
        let f = &index.files[i];
        let mut s = w.lexical * lex[i]
            + w.path * path[i]
            + w.symbol * sym[i]
            + w.literal * lit[i]
            + w.named * named[i];
        if !is_named[i] && is_test_path(&f.path) {
            s *= w.test_prior;
        }
        if !f.lang.is_code() {
            // Config and docs a text names are usually the user's own copies.
            s *= if is_named[i] {
                w.text_prior.sqrt()
            } else {
                w.text_prior
            };
        }
        s0[i] = s;
    }

    // (c) personalised PageRank.
    let teleport: Vec<f32> = s0.iter().map(|s| s * s).collect();
    let mut pr = graph.pagerank(&teleport, 0.85, 25);
    normalise(&mut pr);
    let mut s1: Vec<f32> = (0..n)
        .map(|i| {
            let prior = if is_test_path(&index.files[i].path) && !is_named[i] {
                w.test_prior
            } else {
                1.0
            };
            s0[i] + w.pagerank * pr[i] * prior
        })
        .collect();
    for i in 0..n {
        if pr[i] > 0.3 {
            reasons[i].push(format!("graph centrality {:.2}", pr[i]));
        }
    }

    // (d) neighbours of the strongest files.
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| s1[b].total_cmp(&s1[a]));
    let top = s1[order[0]].max(1e-6);
    let mut bonus = vec![0f32; n];
    let mut bonus_reason: Vec<Option<String>> = vec![None; n];
    for &src in order.iter().take(w.neighbour_sources) {
        if s1[src] <= 0.0 {
            break;
        }
        let strength = s1[src] / top;
        let src_path = &index.files[src].path;
        let mut give = |to: usize, how: &str, scale: f32| {
            let b = w.neighbour * strength * scale;
            if b > bonus[to] {
                bonus[to] = b;
                bonus_reason[to] = Some(format!("{how} {src_path}"));
            }
        };
        for e in &graph.out[src] {
            match e.kind {
                EdgeKind::Import => give(e.to, "imported by", 1.0),
                EdgeKind::Reference => give(e.to, "defines names used by", 0.5),
            }
        }
        for e in &graph.inc[src] {
            let test = is_test_path(&index.files[e.to].path);
            match (e.kind, test) {
                (_, true) => give(e.to, "test of", 0.6),
                (EdgeKind::Import, false) => give(e.to, "imports", 0.7),
                (EdgeKind::Reference, false) => give(e.to, "uses names from", 0.4),
            }
        }
    }
    for i in 0..n {
        if bonus[i] > 0.0 {
            s1[i] += bonus[i];
            if let Some(r) = bonus_reason[i].take() {
                reasons[i].push(format!("graph neighbour: {r}"));
            }
        }
    }

    let mut out: Vec<Ranked> = (0..n)
        .filter(|&i| s1[i] > 0.0)
        .map(|i| Ranked {
            file: i,
            score: s1[i],
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
