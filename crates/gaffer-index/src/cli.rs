//! The `gaffer index` and `gaffer context` commands as library pieces: clap `Args` and run
//! functions writing to any `Write`. The `gaffer` binary wires them in; `examples/gaffer_dev.rs`
//! is a stand-alone main over the same pieces.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::time::Instant;

use serde::Serialize;

use crate::cache::IndexCache;
use crate::error::{Error, Result};
use crate::graph::FileGraph;
use crate::index::{build_index, update_index, IndexOptions};
use crate::pack::{Mode, PackOptions, Tokenizer, TokenizerKind};
use crate::rank::{rank, Weights};
use crate::select::parse_and_fit;

/// `gaffer index [PATH] [--stats] [--json]`: index a repository (incrementally).
#[derive(Clone, Debug, clap::Args)]
pub struct IndexArgs {
    /// Repository root.
    #[arg(default_value = ".")]
    pub path: PathBuf,
    /// Print per-language counts and every skipped file with its reason.
    #[arg(long)]
    pub stats: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Skip files larger than this many bytes.
    #[arg(long, default_value_t = 1024 * 1024)]
    pub max_file_bytes: u64,
}

/// `gaffer context TEXT [--repo PATH] [--budget N] [--json] [--pack]`: choose the files a task
/// needs within a token budget.
#[derive(Clone, Debug, clap::Args)]
pub struct ContextArgs {
    /// The task text (an issue, a request, a review finding); `-` reads it from stdin.
    pub text: String,
    /// Repository root.
    #[arg(long, default_value = ".")]
    pub repo: PathBuf,
    /// Token budget of the selection (never exceeded).
    #[arg(long, default_value_t = 8000)]
    pub budget: usize,
    /// Print `{"budget","used","files":[{"path","tokens","mode","score","reasons"}]}`.
    #[arg(long)]
    pub json: bool,
    /// Print the pack an agent would get (full files and skeletons) instead of the table.
    #[arg(long, conflicts_with = "json")]
    pub pack: bool,
    /// Tokenizer used to count tokens.
    #[arg(long, value_enum, default_value_t = TokenizerKind::Cl100k)]
    pub tokenizer: TokenizerKind,
    /// Share of the budget full files may take (the rest goes to skeletons).
    #[arg(long, default_value_t = 0.9)]
    pub full_share: f32,
    /// Share of the budget one full file may take (a larger one goes in as a skeleton).
    #[arg(long, default_value_t = 0.8)]
    pub file_share: f32,
    /// Share of the budget one skeleton may take (the top files' skeletons are cut to it).
    #[arg(long, default_value_t = 0.15)]
    pub skeleton_share: f32,
    /// Share of the budget kept for listing lower-ranked files (path and top-level names).
    #[arg(long, default_value_t = 0.15)]
    pub list_share: f32,
    /// Consider at most this many ranked files.
    #[arg(long, default_value_t = 200)]
    pub max_files: usize,
    /// Skip files larger than this many bytes when indexing.
    #[arg(long, default_value_t = 1024 * 1024)]
    pub max_file_bytes: u64,
    /// Override a ranking weight (see `gaffer_index::Weights`), e.g. `--weight pagerank=0.5`.
    #[arg(long = "weight", value_name = "NAME=VALUE")]
    pub weights: Vec<String>,
}

impl ContextArgs {
    /// Arguments with every option at its default (what the CLI parses from `TEXT --repo REPO`).
    pub fn new(text: impl Into<String>, repo: impl Into<PathBuf>) -> Self {
        let p = PackOptions::default();
        Self {
            text: text.into(),
            repo: repo.into(),
            budget: p.budget,
            json: false,
            pack: false,
            tokenizer: TokenizerKind::Cl100k,
            full_share: p.full_share,
            file_share: p.file_share,
            skeleton_share: p.skeleton_share,
            list_share: p.list_share,
            max_files: p.max_candidates,
            max_file_bytes: IndexOptions::default().max_file_bytes,
            weights: Vec::new(),
        }
    }
}

#[derive(Serialize)]
struct JsonFile<'a> {
    path: &'a str,
    tokens: usize,
    mode: Mode,
    score: f32,
    reasons: &'a [String],
}

#[derive(Serialize)]
struct JsonSelection<'a> {
    budget: usize,
    used: usize,
    files: Vec<JsonFile<'a>>,
}

#[derive(Serialize)]
struct JsonIndex<'a> {
    root: String,
    files: usize,
    symbols: usize,
    languages: BTreeMap<&'static str, usize>,
    parsed: usize,
    reused: usize,
    elapsed_ms: u128,
    skipped: &'a [crate::index::Skipped],
}

/// Runs `gaffer index`.
pub fn run_index(args: &IndexArgs, cache: &dyn IndexCache, out: &mut dyn Write) -> Result<()> {
    let opts = IndexOptions {
        max_file_bytes: args.max_file_bytes,
        ..IndexOptions::default()
    };
    let summary = update_index(&args.path, cache, &opts)?;
    let languages: BTreeMap<&'static str, usize> = summary
        .languages
        .iter()
        .map(|(l, c)| (l.tag(), *c))
        .collect();
    let r = &summary.report;
    if args.json {
        let j = JsonIndex {
            root: summary.root.display().to_string(),
            files: summary.files,
            symbols: summary.symbols,
            languages,
            parsed: r.parsed,
            reused: r.reused,
            elapsed_ms: r.elapsed.as_millis(),
            skipped: &summary.skipped,
        };
        serde_json::to_writer_pretty(&mut *out, &j)?;
        writeln!(out)?;
        return Ok(());
    }
    writeln!(
        out,
        "indexed {} files ({} parsed, {} unchanged), {} symbols, {} skipped, in {} ms",
        summary.files,
        r.parsed,
        summary.files - r.parsed,
        summary.symbols,
        summary.skipped.len(),
        r.elapsed.as_millis()
    )?;
    if args.stats {
        writeln!(out, "languages:")?;
        for (l, c) in &languages {
            writeln!(out, "  {l:<12} {c}")?;
        }
        if !summary.notes.is_empty() {
            writeln!(out, "indexed with notes:")?;
            for (path, notes) in &summary.notes {
                writeln!(out, "  {path}: {}", notes.join("; "))?;
            }
        }
        if !summary.skipped.is_empty() {
            writeln!(out, "skipped:")?;
            for s in &summary.skipped {
                writeln!(out, "  {}: {}", s.path, s.reason)?;
            }
        }
    }
    Ok(())
}

/// Runs `gaffer context`.
pub fn run_context(args: &ContextArgs, cache: &dyn IndexCache, out: &mut dyn Write) -> Result<()> {
    let started = Instant::now();
    let text = if args.text == "-" {
        let mut s = String::new();
        std::io::stdin().read_to_string(&mut s)?;
        s
    } else {
        args.text.clone()
    };
    if text.trim().is_empty() {
        return Err(Error::EmptyText);
    }
    let mut weights = Weights::default();
    for w in &args.weights {
        let parsed = w
            .split_once('=')
            .and_then(|(n, v)| Some((n.trim(), v.trim().parse::<f32>().ok()?)));
        match parsed {
            Some((name, value)) if weights.set(name, value).is_some() => {}
            _ => return Err(Error::BadWeight(w.clone())),
        }
    }
    if args.budget == 0 {
        return Err(Error::BudgetTooSmall {
            got: args.budget,
            min: 1,
        });
    }
    // Load the tokenizer while the index is built.
    let (tok, index) = rayon::join(
        || Tokenizer::load(args.tokenizer),
        || {
            build_index(
                &args.repo,
                cache,
                &IndexOptions {
                    max_file_bytes: args.max_file_bytes,
                    ..IndexOptions::default()
                },
            )
        },
    );
    let (tok, mut index) = (tok?, index?);
    let graph = FileGraph::build(&index);
    let ranked = rank(&index, &graph, &text, &weights);
    let opts = PackOptions {
        budget: args.budget,
        full_share: args.full_share,
        file_share: args.file_share,
        skeleton_share: args.skeleton_share,
        list_share: args.list_share,
        max_candidates: args.max_files,
        ..PackOptions::default()
    };
    let mut sel = parse_and_fit(&mut index, &ranked, &opts, &tok, cache)?;
    if args.pack {
        // Entries are counted one by one; make sure their concatenation fits as well.
        let mut pack = sel.pack();
        while tok.count(&pack) > sel.budget && !sel.files.is_empty() {
            if let Some(e) = sel.files.pop() {
                sel.used -= e.tokens;
            }
            pack = sel.pack();
        }
        out.write_all(pack.as_bytes())?;
        return Ok(());
    }
    if args.json {
        let j = JsonSelection {
            budget: sel.budget,
            used: sel.used,
            files: sel
                .files
                .iter()
                .map(|e| JsonFile {
                    path: &e.path,
                    tokens: e.tokens,
                    mode: e.mode,
                    score: e.score,
                    reasons: &e.reasons,
                })
                .collect(),
        };
        serde_json::to_writer(&mut *out, &j)?;
        writeln!(out)?;
        return Ok(());
    }
    writeln!(
        out,
        "{} files, {} of {} tokens, from {} indexed files in {} ms",
        sel.files.len(),
        sel.used,
        sel.budget,
        index.files.len(),
        started.elapsed().as_millis()
    )?;
    for (k, e) in sel.files.iter().enumerate() {
        let mode = match e.mode {
            Mode::Full => "full",
            Mode::Skeleton => "skeleton",
        };
        writeln!(
            out,
            "{:>3}. {:<60} {:>7} tok  {:<8} {:.3}",
            k + 1,
            e.path,
            e.tokens,
            mode,
            e.score
        )?;
        for r in &e.reasons {
            writeln!(out, "       - {r}")?;
        }
    }
    Ok(())
}
