//! Budget fit and the CLI output contract.

use std::collections::BTreeSet;

use gaffer_index::cli::{run_context, ContextArgs};
use gaffer_index::{
    fit, rank, FileGraph, MemoryCache, Mode, PackOptions, Tokenizer, TokenizerKind, Weights,
};
use proptest::prelude::*;

use super::support::*;

fn sample_repo() -> Repo {
    let mut files: Vec<(String, String)> = Vec::new();
    for i in 0..12 {
        let mut body = String::new();
        for j in 0..(5 + i * 7) {
            body.push_str(&format!(
                "def parse_record_{j}(record, options=None):\n    \"\"\"Parse a record of kind {j}.\"\"\"\n    return record.parse(options)\n\n"
            ));
        }
        files.push((format!("pkg/mod_{i}.py"), body));
    }
    files.push(("README.md".into(), "Parse records quickly.\n".into()));
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    Repo::new(&refs)
}

fn args(repo: &Repo, text: &str, budget: usize) -> ContextArgs {
    ContextArgs {
        text: text.into(),
        repo: repo.path().to_path_buf(),
        budget,
        json: true,
        pack: false,
        tokenizer: TokenizerKind::Cl100k,
        full_share: 0.8,
        file_share: 0.5,
        skeleton_share: 0.15,
        list_share: 0.15,
        max_files: 200,
        max_file_bytes: 1 << 20,
        weights: Vec::new(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]
    #[test]
    fn the_budget_is_never_exceeded(budget in 1usize..30_000, share in 0.0f32..1.0) {
        let repo = sample_repo();
        let index = repo.index();
        let graph = FileGraph::build(&index);
        let ranked = rank(&index, &graph, "parse record options", &Weights::default());
        let tok = Tokenizer::load(TokenizerKind::Cl100k).unwrap();
        let opts = PackOptions { budget, full_share: share, ..PackOptions::default() };
        let sel = fit(&index, &ranked, &opts, &tok);
        prop_assert!(sel.used <= budget, "used {} > budget {}", sel.used, budget);
        prop_assert_eq!(sel.used, sel.files.iter().map(|e| e.tokens).sum::<usize>());
        for e in &sel.files {
            prop_assert_eq!(e.tokens, tok.count(&e.text), "{} miscounted", e.path);
        }
    }
}

#[test]
fn top_files_go_in_full_then_skeletons() {
    let repo = sample_repo();
    let index = repo.index();
    let graph = FileGraph::build(&index);
    let ranked = rank(
        &index,
        &graph,
        "parse record options in pkg/mod_11.py",
        &Weights::default(),
    );
    assert_eq!(index.files[ranked[0].file].path, "pkg/mod_11.py");
    let tok = Tokenizer::load(TokenizerKind::Cl100k).unwrap();
    let sel = fit(
        &index,
        &ranked,
        &PackOptions {
            budget: 3000,
            ..PackOptions::default()
        },
        &tok,
    );
    // mod_11 is ~6k tokens: it cannot go in full, its skeleton is cut to fit.
    assert_eq!(sel.files[0].path, "pkg/mod_11.py");
    assert_eq!(sel.files[0].mode, Mode::Skeleton);
    assert!(
        sel.files[0]
            .text
            .contains("def parse_record_0(record, options=None):  # L1-3"),
        "{}",
        sel.files[0].text
    );
    assert!(
        sel.files[0].text.contains("more definitions"),
        "{}",
        sel.files[0].text
    );
    // The top ten ranked files are all on the map, even at this budget.
    let top10: Vec<&str> = ranked
        .iter()
        .take(10)
        .map(|r| index.files[r.file].path.as_str())
        .collect();
    let got: Vec<&str> = sel.files.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(got[..10], top10[..]);
    assert!(
        sel.used <= 3000 && sel.used > 2000,
        "budget used: {}",
        sel.used
    );

    // With room, files go in full in rank order, the top one first.
    let sel = fit(
        &index,
        &ranked,
        &PackOptions {
            budget: 20_000,
            ..PackOptions::default()
        },
        &tok,
    );
    assert_eq!(
        (sel.files[0].path.as_str(), sel.files[0].mode),
        ("pkg/mod_11.py", Mode::Full)
    );
    let full: Vec<&str> = sel
        .files
        .iter()
        .filter(|e| e.mode == Mode::Full)
        .map(|e| e.path.as_str())
        .collect();
    assert!(full.len() >= 3, "{full:?}");
    assert!(sel.files.iter().filter(|e| e.mode == Mode::Full).all(|e| e
        .text
        .starts_with(&format!("----- {} (full) -----\n", e.path))));
}

#[test]
fn json_output_follows_the_contract() {
    let repo = sample_repo();
    let mut out = Vec::new();
    run_context(
        &args(&repo, "parse record options", 5000),
        &MemoryCache::new(),
        &mut out,
    )
    .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let keys: BTreeSet<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, BTreeSet::from(["budget", "used", "files"]));
    assert_eq!(v["budget"], 5000);
    assert!(v["used"].as_u64().unwrap() <= 5000);
    let files = v["files"].as_array().unwrap();
    assert!(!files.is_empty());
    let mut prev = f64::INFINITY;
    for f in files {
        let keys: BTreeSet<&str> = f.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            BTreeSet::from(["path", "tokens", "mode", "score", "reasons"])
        );
        let path = f["path"].as_str().unwrap();
        assert!(
            !path.starts_with('/') && repo.path().join(path).is_file(),
            "{path}"
        );
        assert!(matches!(f["mode"].as_str(), Some("full" | "skeleton")));
        assert!(!f["reasons"].as_array().unwrap().is_empty());
        let score = f["score"].as_f64().unwrap();
        assert!(score <= prev, "rank order");
        prev = score;
    }
}

#[test]
fn the_pack_fits_the_budget_as_one_text() {
    let repo = sample_repo();
    let tok = Tokenizer::load(TokenizerKind::Cl100k).unwrap();
    for budget in [50, 700, 4000, 20_000] {
        let mut a = args(&repo, "parse record options", budget);
        a.json = false;
        a.pack = true;
        let mut out = Vec::new();
        run_context(&a, &MemoryCache::new(), &mut out).unwrap();
        let pack = String::from_utf8(out).unwrap();
        assert!(
            tok.count(&pack) <= budget,
            "pack of {} tokens over {budget}",
            tok.count(&pack)
        );
        if budget >= 700 {
            assert!(pack.contains("----- pkg/"), "{pack}");
        }
    }
}

#[test]
fn empty_text_and_zero_budget_are_refused_with_a_reason() {
    let repo = sample_repo();
    let err = run_context(
        &args(&repo, "  \n", 1000),
        &MemoryCache::new(),
        &mut Vec::new(),
    )
    .unwrap_err();
    assert!(matches!(err, gaffer_index::Error::EmptyText), "{err}");
    let err = run_context(
        &args(&repo, "parse", 0),
        &MemoryCache::new(),
        &mut Vec::new(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("budget 0 is too small"), "{err}");
}

#[test]
fn files_that_find_no_room_are_still_listed_with_their_top_level_names() {
    let mut files: Vec<(String, String)> = Vec::new();
    for i in 0..40 {
        let body: String = (0..30)
            .map(|j| format!("def parse_record_{j}(record, options=None):\n    return record\n\n"))
            .collect();
        files.push((format!("pkg/mod_{i:02}.py"), body));
    }
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let repo = Repo::new(&refs);
    let index = repo.index();
    let graph = FileGraph::build(&index);
    let ranked = rank(&index, &graph, "parse record options", &Weights::default());
    assert_eq!(ranked.len(), 40);
    let tok = Tokenizer::load(TokenizerKind::Cl100k).unwrap();
    let fit_with = |list_share: f32| {
        fit(
            &index,
            &ranked,
            &PackOptions {
                budget: 4000,
                list_share,
                ..PackOptions::default()
            },
            &tok,
        )
    };
    let without = fit_with(0.0);
    let with = fit_with(PackOptions::default().list_share);
    assert!(with.used <= 4000, "used {}", with.used);
    assert_eq!(
        with.used,
        with.files.iter().map(|e| e.tokens).sum::<usize>()
    );
    assert!(
        with.files.len() >= without.files.len() + 10,
        "{} listed vs {} without a listing",
        with.files.len(),
        without.files.len()
    );
    // Entries stay in rank order.
    let order: Vec<&str> = ranked
        .iter()
        .map(|r| index.files[r.file].path.as_str())
        .collect();
    let got: Vec<&str> = with.files.iter().map(|e| e.path.as_str()).collect();
    let mut at = order.iter();
    assert!(got.iter().all(|p| at.any(|o| o == p)), "{got:?}");
    let listed = with.files.last().unwrap();
    assert_eq!(listed.mode, Mode::Skeleton);
    assert_eq!(
        listed.text,
        format!(
            "----- {} (skeleton) -----\nparse_record_0, parse_record_1, parse_record_2, parse_record_3 … 26 more\n",
            listed.path
        )
    );
}
