//! Puts the commit gaffer is built from into `gaffer --version`
//! (`GAFFER_COMMIT` when set, e.g. by a packager building from a tarball).

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
}
