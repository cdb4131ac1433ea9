//! Puts the commit gaffer is built from into `gaffer --version` and
//! `gaffer_build_info{commit}` (`GAFFER_COMMIT` when set, e.g. by a packager
//! building from a tarball; `unknown` outside a git checkout of gaffer, as in a
//! `cargo install` from crates.io).

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .filter(|s| !s.is_empty())
}

fn main() {
    println!("cargo:rerun-if-env-changed=GAFFER_COMMIT");
    let commit = std::env::var("GAFFER_COMMIT").ok().or_else(|| {
        // Only gaffer's own checkout: a source tarball unpacked inside some other
        // repository (a home directory kept in git) must not take its commit.
        let top = git(&["rev-parse", "--show-toplevel"])?;
        if !Path::new(&top).join("crates/gaffer/build.rs").is_file() {
            return None;
        }
        // A new commit moves HEAD's reflog: build again to show it.
        if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
            println!("cargo:rerun-if-changed={dir}/HEAD");
            println!("cargo:rerun-if-changed={dir}/logs/HEAD");
        }
        git(&["log", "-1", "--format=%h %cs", "--abbrev=10"])
    });
    println!(
        "cargo:rustc-env=GAFFER_COMMIT={}",
        commit.as_deref().unwrap_or("commit unknown")
    );
    // The commit alone, a label value for metrics.
    let id = commit
        .as_deref()
        .and_then(|c| c.split_whitespace().next())
        .unwrap_or("unknown");
    println!("cargo:rustc-env=GAFFER_COMMIT_ID={id}");
}
