//! Private agent state: each task's sessions of an agent CLI keep their state (sessions,
//! settings, caches) in a directory of their own under gaffer's data dir, seeded with
//! only what the CLI needs to log in. An agent that rewrites its settings or hooks there
//! changes nothing the user's own sessions load, and resume finds the same directory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::error::{AgentError, Result};
use crate::process::home_dir;
use crate::types::StartOptions;

/// What to take from the user's own state dir of a CLI.
pub(crate) struct Seed<'a> {
    /// Files copied as they are, again whenever the user's copy is newer (credentials
    /// refreshed by a login).
    pub(crate) copy: &'a [&'a str],
    /// JSON files of which only these top-level keys are copied, once.
    pub(crate) json_keys: &'a [(&'a str, &'a [&'a str])],
    /// Files copied once, when the private dir is made.
    pub(crate) once: &'a [&'a str],
}

/// The private state dir of `agent` for this session, made and seeded from `user_dir`
/// (the user's own state dir of that CLI), or `None` when the session has no state dir
/// of its own ([`StartOptions::state_dir`]).
pub(crate) fn private_dir(
    opts: &StartOptions,
    agent: &str,
    user_dir: &Path,
    inner: &str,
    seed: &Seed<'_>,
) -> Result<Option<PathBuf>> {
    let Some(root) = &opts.state_dir else {
        return Ok(None);
    };
    let dir = root.join(agent);
    let io = |source: std::io::Error| AgentError::Spawn {
        agent: agent.into(),
        source: std::io::Error::new(
            source.kind(),
            format!("private state dir {}: {source}", dir.display()),
        ),
    };
    let fresh = !dir.exists();
    let target = dir.join(inner);
    make_private_dir(&target).map_err(io)?;
    for name in seed.copy {
        copy_if_newer(&user_dir.join(name), &target.join(name)).map_err(io)?;
    }
    if fresh {
        for name in seed.once {
            copy_if_newer(&user_dir.join(name), &target.join(name)).map_err(io)?;
        }
        for (name, keys) in seed.json_keys {
            copy_json_keys(&user_dir.join(name), &target.join(name), keys).map_err(io)?;
        }
    }
    Ok(Some(dir))
}

/// The user's own state dir of a CLI: the variable `var` of the session's environment,
/// else of gaffer's, else `<home>/<default>` where home is the session's `HOME`, else
/// gaffer's.
pub(crate) fn user_dir(env: &BTreeMap<String, String>, var: &str, default: &str) -> PathBuf {
    env.get(var)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os(var)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        })
        .unwrap_or_else(|| user_home(env).join(default))
}

/// The session's `HOME`, else gaffer's.
pub(crate) fn user_home(env: &BTreeMap<String, String>) -> PathBuf {
    env.get("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(home_dir)
}

fn make_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

fn write_private(to: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(to)?;
    f.write_all(bytes)
}

fn copy_if_newer(from: &Path, to: &Path) -> std::io::Result<()> {
    let Ok(src) = std::fs::metadata(from) else {
        return Ok(());
    };
    if !src.is_file() {
        return Ok(());
    }
    let newer = match std::fs::metadata(to).and_then(|m| m.modified()) {
        Ok(dst) => src.modified().map(|s| s > dst).unwrap_or(true),
        Err(_) => true,
    };
    if newer {
        write_private(to, &std::fs::read(from)?)?;
    }
    Ok(())
}

/// Copy only `keys` of the JSON object in `from` to `to`, unless `to` exists (best
/// effort: a file that is missing or not JSON is skipped).
pub(crate) fn seed_json_keys(from: &Path, to: &Path, keys: &[&str]) {
    if !to.exists() {
        let _ = copy_json_keys(from, to, keys);
    }
}

fn copy_json_keys(from: &Path, to: &Path, keys: &[&str]) -> std::io::Result<()> {
    let Ok(text) = std::fs::read_to_string(from) else {
        return Ok(());
    };
    let Ok(Value::Object(all)) = serde_json::from_str::<Value>(&text) else {
        return Ok(());
    };
    let kept: serde_json::Map<String, Value> = all
        .into_iter()
        .filter(|(k, _)| keys.contains(&k.as_str()))
        .collect();
    if kept.is_empty() {
        return Ok(());
    }
    write_private(to, Value::Object(kept).to_string().as_bytes())
}
