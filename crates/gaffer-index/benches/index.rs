//! Index and context benchmarks (harness = false; prints figures).
//!
//! `cargo bench -p gaffer-index` on a generated 5,000-file repository, or on a real tree with
//! `GAFFER_BENCH_TREE=/path/to/repo`. Prints: full index time vs universal-ctags on the same
//! tree in the same run (`ctags -R --fields=+n`, `apt-get install universal-ctags`; `scripts/test`
//! installs it), incremental re-index after one file changes (the cache brought up to date, an
//! in-memory index refreshed, a new process loading all facts), the median `context` time, and
//! peak RSS. `cargo test --benches` runs it once on a 300-file tree.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

mod common;

use common::{cpu_times, generate, load_average, median, ms};
use gaffer_index::cli::{run_context, ContextArgs};
use gaffer_index::{
    build_index, update_index, DirCache, FileGraph, IndexOptions, MemoryCache, TokenizerKind,
};

fn peak_rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .unwrap_or(f64::NAN)
}

fn time_ctags(tree: &Path, out: &Path) -> Option<Duration> {
    let t = Instant::now();
    let status = Command::new("ctags")
        .args(["-R", "--fields=+n", "-f"])
        .arg(out)
        .arg(tree)
        .output()
        .ok()?;
    status.status.success().then(|| t.elapsed())
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` does not: then a quick run on a
    // small tree checks that the bench works.
    let quick = !std::env::args().any(|a| a == "--bench");
    let (files_generated, rounds, edits) = if quick { (300, 1, 4) } else { (5000, 3, 20) };
    let scratch = tempfile::tempdir().unwrap();
    let tree: PathBuf = match std::env::var_os("GAFFER_BENCH_TREE") {
        Some(t) => PathBuf::from(t),
        None => {
            let t = scratch.path().join("repo");
            generate(&t, files_generated);
            t
        }
    };
    let threads = rayon::current_num_threads();
    println!(
        "tree: {} ({threads} threads, load average {})",
        tree.display(),
        load_average()
    );

    // Full index, fresh cache each run, best of `rounds`; ctags on the same tree in the same
    // run, interleaved so both see the same load.
    let (mut ours, mut mem, mut ctags) = (Vec::new(), Vec::new(), Vec::new());
    let (mut ours_cpu, mut ctags_cpu) = (Vec::new(), Vec::new());
    let mut files = 0;
    for k in 0..rounds {
        let cache = DirCache::new(scratch.path().join(format!("cache-full-{k}")));
        let (t, c0) = (Instant::now(), cpu_times());
        let index = build_index(&tree, &cache, &IndexOptions::default()).unwrap();
        ours.push(t.elapsed());
        ours_cpu.push(cpu_times().0 - c0.0);
        files = index.files.len();
        if k == 0 {
            let symbols: usize = index.files.iter().map(|f| f.facts.defs.len()).sum();
            println!(
                "indexed {files} files, {symbols} symbols, {} skipped",
                index.skipped.len()
            );
            println!(
                "peak RSS after indexing {files} files: {:.0} MB",
                peak_rss_mb()
            );
        }
        let c0 = cpu_times();
        if let Some(d) = time_ctags(&tree, &scratch.path().join("tags")) {
            ctags.push(d);
            ctags_cpu.push(cpu_times().1 - c0.1);
        }
        // Without cache writes (the store's SQLite batch is cheaper than a file).
        let t = Instant::now();
        build_index(&tree, &MemoryCache::new(), &IndexOptions::default()).unwrap();
        mem.push(t.elapsed());
    }
    let ours = *ours.iter().min().unwrap();
    let mem = *mem.iter().min().unwrap();
    match ctags.iter().min() {
        Some(c) => {
            println!(
                "full index: gaffer-index {:.0} ms (directory cache), {:.0} ms (in-memory cache); ctags {:.0} ms",
                ms(ours),
                ms(mem),
                ms(*c)
            );
            println!(
                "speed ratio (ctags time / ours): {:.2}x with the directory cache, {:.2}x in memory (target >= 1x)",
                c.as_secs_f64() / ours.as_secs_f64(),
                c.as_secs_f64() / mem.as_secs_f64()
            );
            let (oc, cc) = (
                *ours_cpu.iter().min().unwrap(),
                *ctags_cpu.iter().min().unwrap(),
            );
            println!(
                "CPU time: gaffer-index {:.0} ms over {threads} threads (directory cache), ctags {:.0} ms; ratio {:.2}x",
                ms(oc),
                ms(cc),
                cc.as_secs_f64() / oc.as_secs_f64().max(1e-3)
            );
        }
        None => println!(
            "full index: gaffer-index {:.0} ms; ctags not found (apt-get install universal-ctags)",
            ms(ours)
        ),
    }

    // Incremental: one file changes.
    let cache_dir = scratch.path().join("cache-warm");
    let cache = DirCache::new(&cache_dir);
    let mut live = build_index(&tree, &cache, &IndexOptions::default()).unwrap();
    let victim = tree.join(&live.files.iter().find(|f| f.lang.is_code()).unwrap().path);
    let original = std::fs::read(&victim).unwrap();
    let mut live_graph = FileGraph::build(&live);
    let t = Instant::now();
    FileGraph::build(&live);
    let graph_build = t.elapsed();
    let (mut update, mut refresh, mut graph, mut reload) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut refresh_cpu = Duration::ZERO;
    for k in 0..edits {
        let mut changed = original.clone();
        changed.extend_from_slice(format!("\n# edit {k}\n").as_bytes());
        std::fs::write(&victim, &changed).unwrap();
        let c0 = cpu_times().0;
        let t = Instant::now();
        match k % 3 {
            0 => {
                // `gaffer index`: the cache brought up to date, facts not loaded.
                let r = update_index(&tree, &cache, &IndexOptions::default()).unwrap();
                update.push(t.elapsed());
                assert_eq!(r.report.parsed, 1);
            }
            1 => {
                // A process holding the index: only the changed file is read and extracted.
                let r = live.refresh(&cache, &IndexOptions::default()).unwrap();
                refresh.push(t.elapsed());
                assert_eq!(r.parsed, 1);
                let t = Instant::now();
                live_graph.update(&live, &r.changed);
                graph.push(t.elapsed());
                refresh_cpu += cpu_times().0 - c0;
            }
            _ => {
                // A new process: every file's facts loaded from the cache.
                let r = build_index(&tree, &cache, &IndexOptions::default()).unwrap();
                reload.push(t.elapsed());
                assert_eq!(r.report.parsed, 1);
            }
        }
    }
    std::fs::write(&victim, &original).unwrap();
    let refreshes = refresh.len();
    println!(
        "incremental re-index after one file change (target < 100 ms): `gaffer index` median {:.1} ms; \
         in-memory index with all facts (`Index::refresh`) median {:.1} ms, + graph update {:.1} ms (a full graph build: {:.0} ms); \
         a new process loading all facts from the cache median {:.1} ms",
        ms(median(update)),
        ms(median(refresh)),
        ms(median(graph)),
        ms(graph_build),
        ms(median(reload))
    );
    println!(
        "  CPU time of a refresh + graph update: {:.1} ms on average",
        ms(refresh_cpu) / refreshes.max(1) as f64
    );

    // Context on the indexed repo (the CLI path: load, rank, parse the candidates, fit).
    let texts = [
        "render widget with options fails when context is None",
        "Handle returns an empty string for small n",
        "Store get panics on a missing key",
        "compute maps items with util and adds an offset; wrong offset",
        "Traceback (most recent call last):\n  File \"/site-packages/src/pkg3/mod3.py\", line 9, in render_0\nTypeError",
    ];
    let _ = build_index(&tree, &cache, &IndexOptions::default()).unwrap();
    let (mut ctx, mut ctx_cpu) = (Vec::new(), Duration::ZERO);
    for round in 0..rounds {
        for text in texts {
            let args = ContextArgs {
                text: text.into(),
                repo: tree.clone(),
                budget: [8000, 13000, 50000][round],
                json: true,
                pack: false,
                tokenizer: TokenizerKind::Cl100k,
                full_share: 0.9,
                file_share: 0.8,
                skeleton_share: 0.15,
                list_share: 0.15,
                max_files: 200,
                max_file_bytes: 1 << 20,
                weights: Vec::new(),
            };
            let (t, c0) = (Instant::now(), cpu_times().0);
            run_context(&args, &cache, &mut std::io::sink()).unwrap();
            ctx.push(t.elapsed());
            ctx_cpu += cpu_times().0 - c0;
        }
    }
    let calls = ctx.len();
    println!(
        "context on the indexed repo ({files} files): median {:.0} ms over {calls} calls, {:.0} ms CPU on average",
        ms(median(ctx)),
        ms(ctx_cpu) / calls as f64
    );
    println!("peak RSS of the whole bench: {:.0} MB", peak_rss_mb());
}
