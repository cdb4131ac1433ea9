//! Locating the fake agent executables from another crate's tests or benches.
//!
//! `cargo` builds a package's binaries only for that package's own integration tests, so
//! [`fake_bin`] runs `cargo build --bins` for this crate once per process (same target
//! directory and profile as the calling test binary) and returns the path. Works under
//! `cargo test` and `cargo nextest`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();

/// The directory holding the calling binary's profile outputs (`target/<profile>`).
fn profile_dir() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut dir = exe.parent().map(Path::to_path_buf).ok_or("no exe dir")?;
    if dir.file_name().is_some_and(|n| n == "deps") {
        dir.pop();
    }
    Ok(dir)
}

/// Names of the executables this crate builds.
pub const FAKE_BINS: &[&str] = &["fake-claude", "fake-codex", "fake-acp", "fake-llm"];

fn newest_source(dir: &Path) -> Option<std::time::SystemTime> {
    let mut newest = std::fs::metadata(dir).ok()?.modified().ok()?;
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        let p = e.path();
        let t = if p.is_dir() {
            newest_source(&p)?
        } else {
            e.metadata().ok()?.modified().ok()?
        };
        newest = newest.max(t);
    }
    Some(newest)
}

/// The bins exist and are newer than every source file of this crate (so a nested
/// `cargo build` can be skipped: under nextest every test is its own process).
fn up_to_date(dir: &Path) -> bool {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let Some(src) = newest_source(&root.join("src")) else {
        return false;
    };
    let Some(manifest) = std::fs::metadata(root.join("Cargo.toml"))
        .ok()
        .and_then(|m| m.modified().ok())
    else {
        return false;
    };
    let newest = src.max(manifest);
    FAKE_BINS.iter().all(|b| {
        std::fs::metadata(dir.join(b))
            .and_then(|m| m.modified())
            .is_ok_and(|t| t >= newest)
    })
}

fn build() -> Result<PathBuf, String> {
    let dir = profile_dir()?;
    if up_to_date(&dir) {
        return Ok(dir);
    }
    let profile = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or("no profile dir")?;
    let target = dir.parent().ok_or("no target dir")?.to_path_buf();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let mut cmd = std::process::Command::new(cargo);
    cmd.arg("build")
        .arg("--manifest-path")
        .arg(&manifest)
        .arg("--bins")
        .arg("--quiet")
        .env("CARGO_TARGET_DIR", &target);
    match profile.as_str() {
        "debug" => {}
        "release" => {
            cmd.arg("--release");
        }
        other => {
            cmd.arg("--profile").arg(other);
        }
    }
    let out = cmd.output().map_err(|e| format!("running cargo: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo build of gaffer-testkit bins failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(dir)
}

/// Path of a fake executable (`fake-claude`, `fake-codex`, `fake-acp`), building them
/// on first use.
pub fn fake_bin(name: &str) -> PathBuf {
    match BUILT.get_or_init(build) {
        Ok(dir) => dir.join(name),
        Err(e) => panic!("{e}"),
    }
}
