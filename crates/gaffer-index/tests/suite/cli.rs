//! `gaffer index` / `gaffer context` as library calls: output shapes and errors.

use gaffer_index::cli::{run_context, run_index, ContextArgs, IndexArgs};
use gaffer_index::MemoryCache;

use super::support::*;

fn index_args(repo: &Repo) -> IndexArgs {
    IndexArgs {
        path: repo.path().to_path_buf(),
        stats: false,
        json: false,
        max_file_bytes: 1 << 20,
    }
}

#[test]
fn index_reports_counts_then_only_changes() {
    let repo = Repo::new(&[
        ("a.py", "def a(): pass\nclass B: pass\n"),
        ("b.go", "package b\nfunc C() {}\n"),
        ("notes.md", "# notes\n"),
    ]);
    repo.write("blob.bin", &[0, 1, 2]);
    let cache = MemoryCache::new();
    let mut out = Vec::new();
    run_index(
        &IndexArgs {
            stats: true,
            ..index_args(&repo)
        },
        &cache,
        &mut out,
    )
    .unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.starts_with("indexed 3 files (3 parsed, 0 unchanged), 3 symbols, 1 skipped"),
        "{text}"
    );
    assert!(
        text.contains("  go           1\n")
            && text.contains("  python       1\n")
            && text.contains("  text         1\n"),
        "{text}"
    );
    assert!(text.contains("  blob.bin: binary file type"), "{text}");

    repo.write("a.py", b"def a(): pass\n");
    let mut out = Vec::new();
    run_index(
        &IndexArgs {
            json: true,
            ..index_args(&repo)
        },
        &cache,
        &mut out,
    )
    .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(
        (
            v["files"].as_u64(),
            v["symbols"].as_u64(),
            v["parsed"].as_u64()
        ),
        (Some(3), Some(2), Some(1))
    );
    assert_eq!(v["skipped"][0]["path"], "blob.bin");
}

#[test]
fn context_prints_a_ranked_table_with_reasons() {
    let repo = Repo::new(&[
        (
            "shop/cart.py",
            "class Cart:\n    def total(self):\n        return sum(self.items)\n",
        ),
        ("shop/user.py", "class User:\n    pass\n"),
    ]);
    let mut out = Vec::new();
    let args = ContextArgs {
        budget: 2000,
        ..ContextArgs::new("Cart.total is wrong for an empty cart", repo.path())
    };
    run_context(&args, &MemoryCache::new(), &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let first = text.lines().nth(1).unwrap();
    assert!(
        first.starts_with("  1. shop/cart.py") && first.contains("full"),
        "{text}"
    );
    assert!(text.contains("- defines `Cart.total`"), "{text}");
}

#[test]
fn a_bad_weight_override_is_refused_with_a_hint() {
    let repo = Repo::new(&[("a.py", "x = 1\n")]);
    let args = ContextArgs {
        weights: vec!["pagerankk=1".into()],
        ..ContextArgs::new("x", repo.path())
    };
    let err = run_context(&args, &MemoryCache::new(), &mut Vec::new()).unwrap_err();
    assert!(
        err.to_string().contains("pagerankk=1") && err.to_string().contains("hint"),
        "{err}"
    );
    let ok = ContextArgs {
        weights: vec!["pagerank=0.5".into()],
        ..ContextArgs::new("x", repo.path())
    };
    run_context(&ok, &MemoryCache::new(), &mut Vec::new()).unwrap();
}
