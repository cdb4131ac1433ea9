//! Pushing a task branch, and the read-only probe that reconciles an interrupted push.

use crate::git::{git, ForgeError, Repo, Result};
use crate::secret::{redact, strip_userinfo, Secret};

/// Credentials for a push or probe. With `token: None`, git uses the user's own setup
/// (credential helpers, SSH keys). With a token, gaffer passes it to git through an
/// environment-based credential helper: never on the command line, never in a URL.
#[derive(Debug, Clone, Default)]
pub struct GitAuth {
    /// The username sent with the token (`x-access-token` when empty; Gitea and GitHub
    /// accept any name with a token as the password).
    pub username: Option<String>,
    /// The token.
    pub token: Option<Secret>,
}

impl GitAuth {
    /// Use the token.
    pub fn token(token: Secret) -> Self {
        Self {
            username: None,
            token: Some(token),
        }
    }
}

/// What [`Repo::push`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushOutcome {
    /// The commit the remote branch now points at.
    pub sha: String,
    /// False when the remote already had this commit on the branch (nothing was sent).
    pub pushed: bool,
}

const HELPER: &str = "!f() { test \"$1\" = get || exit 0; echo \"username=${GAFFER_GIT_USERNAME:-x-access-token}\"; echo \"password=${GAFFER_GIT_TOKEN}\"; }; f";

impl Repo {
    pub(crate) fn git_remote(&self, auth: &GitAuth, args: &[&str]) -> Result<std::process::Output> {
        let mut cmd = crate::git::command();
        cmd.arg("-C").arg(self.root());
        if let Some(token) = &auth.token {
            // Reset the user's helpers and use ours, which reads the environment.
            cmd.args(["-c", "credential.helper=", "-c"])
                .arg(format!("credential.helper={HELPER}"))
                .env("GAFFER_GIT_TOKEN", token.expose());
            if let Some(u) = &auth.username {
                cmd.env("GAFFER_GIT_USERNAME", u);
            }
        }
        // Never wait for a prompt: no terminal prompts, an askpass that answers nothing,
        // and ssh in batch mode unless the user chose an ssh command themselves.
        cmd.env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_ASKPASS", "true")
            .env("SSH_ASKPASS", "true");
        let user_ssh = std::env::var_os("GIT_SSH_COMMAND").is_some()
            || std::env::var_os("GIT_SSH").is_some()
            || git(self.root(), &["config", "--get", "core.sshCommand"])
                .is_ok_and(|c| !c.is_empty());
        if !user_ssh {
            cmd.env("GIT_SSH_COMMAND", "ssh -o BatchMode=yes");
        }
        cmd.args(args).output().map_err(ForgeError::Spawn)
    }

    /// The commit `branch` points at on `remote` (a remote name or URL), or `None` when
    /// the remote has no such branch. Read-only: the probe that reconciles a push
    /// interrupted by a crash (pushed if it equals the local branch's commit).
    pub fn remote_branch_sha(
        &self,
        remote: &str,
        branch: &str,
        auth: &GitAuth,
    ) -> Result<Option<String>> {
        let refname = format!("refs/heads/{branch}");
        let out = self.git_remote(auth, &["ls-remote", "--heads", remote, &refname])?;
        if !out.status.success() {
            return Err(classify(self, remote, branch, auth, &out));
        }
        let text = String::from_utf8_lossy(&out.stdout);
        Ok(text.lines().find_map(|l| {
            let (sha, name) = l.split_once('\t')?;
            (name.trim() == refname).then(|| sha.trim().to_owned())
        }))
    }

    /// Push the local `branch` to the same name on `remote` (no force). If the remote
    /// branch already points at the local commit, nothing is sent (`pushed: false`), so
    /// running it again after a crash is harmless; the engine still treats a push as
    /// non-idempotent and reconciles with [`Repo::remote_branch_sha`].
    pub fn push(&self, remote: &str, branch: &str, auth: &GitAuth) -> Result<PushOutcome> {
        let local = self.resolve(&format!("refs/heads/{branch}"))?;
        if self.remote_branch_sha(remote, branch, auth)?.as_deref() == Some(local.as_str()) {
            return Ok(PushOutcome {
                sha: local,
                pushed: false,
            });
        }
        let spec = format!("refs/heads/{branch}:refs/heads/{branch}");
        let out = self.git_remote(auth, &["push", "--porcelain", remote, &spec])?;
        if !out.status.success() {
            return Err(classify(self, remote, branch, auth, &out));
        }
        Ok(PushOutcome {
            sha: local,
            pushed: true,
        })
    }
}

impl Repo {
    /// The URL of `remote` (a remote name, or already a URL or path), credentials
    /// stripped: to read the forge's owner and repository from it.
    pub fn remote_url(&self, remote: &str) -> Result<String> {
        let url = match git(self.root(), &["remote", "get-url", remote]) {
            Ok(url) => url,
            Err(_) if remote.contains('/') || remote.contains(':') => remote.to_owned(),
            Err(e) => return Err(e),
        };
        Ok(strip_userinfo(url.trim()))
    }
}

/// The password the user's git credential helpers hold for the host of `url`
/// (`git credential fill`, never prompting): a forge token stored for HTTPS pushes.
/// `None` when no helper knows the host.
pub fn token_from_git_credentials(url: &str) -> Option<Secret> {
    use std::io::Write;
    let (protocol, rest) = url.split_once("://")?;
    let host = rest.split('/').next()?.rsplit('@').next()?;
    let mut child = crate::git::command()
        .args(["credential", "fill"])
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_ASKPASS", "true")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let mut stdin = child.stdin.take()?;
    let _ = write!(stdin, "protocol={protocol}\nhost={host}\n\n");
    drop(stdin);
    let out = child.wait_with_output().ok()?;
    if !out.status.success() {
        return None;
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("password="))
        .filter(|p| !p.trim().is_empty())
        .map(|p| Secret::new(p.trim()))
}

impl Repo {
    /// Delete `branch` on `remote` (after its PR was merged or closed). Idempotent: a
    /// branch already gone is fine. Returns whether something was deleted.
    pub fn delete_remote_branch(&self, remote: &str, branch: &str, auth: &GitAuth) -> Result<bool> {
        if self.remote_branch_sha(remote, branch, auth)?.is_none() {
            return Ok(false);
        }
        let refname = format!("refs/heads/{branch}");
        let out = self.git_remote(auth, &["push", "--porcelain", remote, "--delete", &refname])?;
        if !out.status.success() {
            return Err(classify(self, remote, branch, auth, &out));
        }
        Ok(true)
    }

    /// Delete the local `branch` (its worktree must be removed first). Idempotent: a
    /// branch already gone is fine. Returns whether something was deleted.
    pub fn delete_branch(&self, branch: &str) -> Result<bool> {
        if !self.rev_exists(&format!("refs/heads/{branch}")) {
            return Ok(false);
        }
        git(self.root(), &["branch", "-D", branch])?;
        Ok(true)
    }
}

pub(crate) fn classify(
    repo: &Repo,
    remote: &str,
    branch: &str,
    auth: &GitAuth,
    out: &std::process::Output,
) -> ForgeError {
    let secrets: Vec<&Secret> = auth.token.iter().collect();
    // `--porcelain` puts the per-ref verdict (`[remote rejected]`) on stdout.
    let both = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stderr).trim(),
        String::from_utf8_lossy(&out.stdout).trim()
    );
    let text = redact(both.trim(), &secrets);
    let remote = redact(remote, &secrets);
    let lower = text.to_lowercase();
    let remote_lines: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("remote:"))
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if lower.contains("[remote rejected]")
        || lower.contains("pre-receive hook declined")
        || lower.contains("protected branch")
        || lower.contains("[rejected]")
    {
        let reason = if !remote_lines.is_empty() {
            remote_lines.join("; ")
        } else if lower.contains("non-fast-forward") || lower.contains("fetch first") {
            "the remote branch has commits the local one does not (non-fast-forward)".into()
        } else {
            last_line(&text)
        };
        return ForgeError::PushRejected {
            remote,
            branch: branch.into(),
            reason,
        };
    }
    if lower.contains("authentication failed")
        || lower.contains("could not read username")
        || lower.contains("could not read password")
        || lower.contains("permission denied")
        || lower.contains("terminal prompts disabled")
        || lower.contains("403")
        || lower.contains("401")
    {
        return ForgeError::PushAuth {
            remote,
            detail: last_line(&text),
        };
    }
    if lower.contains("could not resolve host")
        || lower.contains("connection refused")
        || lower.contains("unable to access")
        || lower.contains("does not appear to be a git repository")
        || lower.contains("could not read from remote")
        || lower.contains("timed out")
        || lower.contains("no such file")
        || lower.contains("not found")
    {
        return ForgeError::RemoteUnreachable {
            remote,
            detail: last_line(&text),
        };
    }
    ForgeError::Git {
        args: format!("push {}", strip_userinfo(&remote)),
        dir: repo.root().to_owned(),
        stderr: text,
    }
}

fn last_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or("git gave no reason")
        .to_owned()
}
