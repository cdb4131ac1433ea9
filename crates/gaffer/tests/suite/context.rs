//! `gaffer index` and `gaffer context` through the binary, with the cache in the journal.
use super::support::Home;
use serde_json::Value;

fn repo(home: &Home) -> std::path::PathBuf {
    let repo = home.dir.path().join("shop");
    std::fs::create_dir_all(repo.join("shop")).unwrap();
    std::fs::write(repo.join("shop/cart.py"), "from shop.prices import price_of\n\ndef cart_total(items):\n    \"\"\"Sum of the prices of the items in the cart.\"\"\"\n    return sum(price_of(i) for i in items)\n").unwrap();
    std::fs::write(
        repo.join("shop/prices.py"),
        "PRICES = {}\n\ndef price_of(item):\n    return PRICES[item]\n",
    )
    .unwrap();
    std::fs::write(
        repo.join("shop/users.py"),
        "def login(name, password):\n    return name == 'admin'\n",
    )
    .unwrap();
    repo
}

#[test]
fn index_then_context_picks_the_named_file_and_reuses_the_cache() {
    let home = Home::new();
    home.write_config("");
    let repo = repo(&home);
    let out = home
        .gaffer()
        .args(["index", "--json"])
        .arg(&repo)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let first: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(first["files"], 3);
    assert_eq!(first["parsed"], 3);
    let out = home
        .gaffer()
        .args(["index", "--json"])
        .arg(&repo)
        .output()
        .unwrap();
    let second: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        second["parsed"], 0,
        "unchanged files were parsed again: {second}"
    );

    let out = home
        .gaffer()
        .args([
            "context",
            "cart_total returns the wrong sum when the cart is empty",
            "--budget",
            "2000",
            "--json",
            "--repo",
        ])
        .arg(&repo)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sel: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(sel["budget"], 2000);
    assert!(sel["used"].as_u64().unwrap() <= 2000);
    assert_eq!(sel["files"][0]["path"], "shop/cart.py", "{sel}");
    assert!(!sel["files"][0]["reasons"].as_array().unwrap().is_empty());
}

#[test]
fn context_on_a_missing_repo_is_a_precondition_error() {
    let home = Home::new();
    home.write_config("");
    let out = home
        .gaffer()
        .args(["context", "anything", "--repo", "/definitely/not/here"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(78),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// File names come from the repository: a name holding terminal control sequences
/// is shown escaped in what `gaffer context` prints, never raw.
#[test]
fn context_shows_a_file_name_with_control_sequences_escaped() {
    let home = Home::new();
    home.write_config("");
    let repo = repo(&home);
    std::fs::write(
        repo.join("shop/checkout\x1b]0;pwned\x07\x1b[2J.py"),
        "def checkout_total(cart):\n    return cart_total(cart)\n",
    )
    .unwrap();
    let out = home
        .gaffer()
        .args(["context", "checkout_total is wrong", "--repo"])
        .arg(&repo)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("shop/checkout\\x1b]0;pwned\\x07\\x1b[2J.py"),
        "{text}"
    );
    assert!(!out.stdout.contains(&0x1b), "{text}");
}
