//! A bare git remote, and git's smart HTTP served by the fake forge.

use std::path::{Path, PathBuf};
use std::process::Command;

use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};

use super::{rev_parse, ForgeState};

/// A bare git repository to push to, in a temporary directory.
pub struct BareRemote {
    dir: tempfile::TempDir,
    path: PathBuf,
}

impl BareRemote {
    /// `git init --bare` with `main` as its default branch.
    pub fn new() -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("remote.git");
        let ok = Command::new("git")
            .args(["init", "-q", "--bare", "-b", "main"])
            .arg(&path)
            .status()?
            .success();
        anyhow::ensure!(ok, "git init --bare failed");
        Ok(Self { dir, path })
    }

    /// The repository's path (usable as a git remote URL).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The path as a string, to pass as a remote.
    pub fn url(&self) -> String {
        self.path.to_string_lossy().into_owned()
    }

    /// Refuse pushes to these branches with a `pre-receive` hook, the way a forge's
    /// branch protection does. A name may be a shell pattern (`gaffer/*`); an empty
    /// list lifts the protection.
    pub fn protect(&self, branches: &[&str]) -> anyhow::Result<()> {
        let hook = self.path.join("hooks/pre-receive");
        let list = branches.join(" ");
        let script = format!(
            "#!/bin/sh\nset -f\nwhile read old new ref; do\n  for b in {list}; do\n    case \"$ref\" in\n      refs/heads/$b)\n        echo \"Gitea: branch ${{ref#refs/heads/}} is protected from force push and direct pushes\" >&2\n        exit 1;;\n    esac\n  done\ndone\nexit 0\n"
        );
        std::fs::write(&hook, script)?;
        let ok = Command::new("chmod")
            .arg("+x")
            .arg(&hook)
            .status()?
            .success();
        anyhow::ensure!(ok, "chmod failed");
        Ok(())
    }

    /// The commit `branch` points at, if it exists.
    pub fn branch_sha(&self, branch: &str) -> Option<String> {
        rev_parse(&self.path, &format!("refs/heads/{branch}"))
    }

    /// The temporary directory holding the repository.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

fn basic_password(headers: &HeaderMap) -> Option<String> {
    let v = headers.get("authorization")?.to_str().ok()?;
    let b64 = v
        .strip_prefix("Basic ")
        .or_else(|| v.strip_prefix("basic "))?;
    let decoded = base64_decode(b64.trim())?;
    let text = String::from_utf8(decoded).ok()?;
    text.split_once(':').map(|(_, p)| p.to_owned())
}

fn base64_decode(s: &str) -> Option<Vec<u8>> {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::new();
    let mut acc: u32 = 0;
    let mut bits = 0;
    for c in s.bytes().filter(|c| *c != b'=') {
        let v = ALPHABET.iter().position(|a| *a == c)? as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// git's smart HTTP through `git http-backend` (CGI).
pub(super) async fn git_http(
    st: &ForgeState,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &Bytes,
    rest: &str,
) -> Response {
    if basic_password(headers).as_deref() != Some(st.token.as_str()) {
        let mut resp = (StatusCode::UNAUTHORIZED, "Unauthorized\n").into_response();
        resp.headers_mut().insert(
            "www-authenticate",
            HeaderValue::from_static("Basic realm=\"Gitea\""),
        );
        return resp;
    }
    let Some(repo) = st.remote.lock().unwrap().clone() else {
        return (StatusCode::NOT_FOUND, "no repository").into_response();
    };
    let (Some(root), Some(name)) = (repo.parent(), repo.file_name()) else {
        return (StatusCode::NOT_FOUND, "no repository").into_response();
    };
    let header = |n: &str| {
        headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let mut cmd = tokio::process::Command::new("git");
    cmd.arg("http-backend")
        .env("GIT_PROJECT_ROOT", root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("PATH_INFO", format!("/{}/{rest}", name.to_string_lossy()))
        .env("REQUEST_METHOD", method.as_str())
        .env("QUERY_STRING", uri.query().unwrap_or_default())
        .env("CONTENT_TYPE", header("content-type"))
        .env("CONTENT_LENGTH", body.len().to_string())
        .env("HTTP_CONTENT_ENCODING", header("content-encoding"))
        .env("GIT_PROTOCOL", header("git-protocol"))
        .env("REMOTE_USER", "gaffer")
        .env("REMOTE_ADDR", "127.0.0.1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let Ok(mut child) = cmd.spawn() else {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            "cannot run git http-backend",
        )
            .into_response();
    };
    if let Some(mut stdin) = child.stdin.take() {
        use tokio::io::AsyncWriteExt;
        let _ = stdin.write_all(body).await;
    }
    let Ok(out) = child.wait_with_output().await else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "git http-backend failed").into_response();
    };
    let raw = out.stdout;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, 4))
        .or_else(|| raw.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2)));
    let Some((end, skip)) = split else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "bad CGI output").into_response();
    };
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let mut resp = Bytes::copy_from_slice(&raw[end + skip..]).into_response();
    for line in head.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let v = v.trim();
        if k.eq_ignore_ascii_case("status") {
            let code = v
                .split(' ')
                .next()
                .and_then(|c| c.parse().ok())
                .unwrap_or(200);
            *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
        } else if let (Ok(name), Ok(value)) = (
            axum::http::HeaderName::from_bytes(k.trim().as_bytes()),
            HeaderValue::from_str(v),
        ) {
            resp.headers_mut().insert(name, value);
        }
    }
    resp
}
