//! Push to a real bare remote and probe it.
use gaffer_forge::*;
use gaffer_testkit::forge::BareRemote;
use pretty_assertions::assert_eq;
use std::path::Path;
use std::process::Command;

pub(crate) fn sh(dir: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .status()
        .unwrap()
        .success();
    assert!(ok, "git {args:?}");
}

/// A repository with `main` and a task branch `gaffer/t-1` one commit ahead.
pub(crate) fn repo_with_task_branch() -> (tempfile::TempDir, Repo, String) {
    let dir = tempfile::tempdir().unwrap();
    sh(dir.path(), &["init", "-q", "-b", "main"]);
    std::fs::write(dir.path().join("README.md"), "# demo\n").unwrap();
    sh(dir.path(), &["add", "."]);
    sh(dir.path(), &["commit", "-q", "-m", "init"]);
    sh(dir.path(), &["checkout", "-q", "-b", "gaffer/t-1"]);
    std::fs::write(dir.path().join("INSTALL.md"), "cargo install gaffer\n").unwrap();
    sh(dir.path(), &["add", "."]);
    sh(dir.path(), &["commit", "-q", "-m", "docs"]);
    sh(dir.path(), &["checkout", "-q", "main"]);
    let repo = Repo::open(dir.path()).unwrap();
    let sha = repo.resolve("gaffer/t-1").unwrap();
    (dir, repo, sha)
}

#[test]
fn push_then_probe_and_a_second_push_sends_nothing() {
    let (_dir, repo, sha) = repo_with_task_branch();
    let remote = BareRemote::new().unwrap();
    let auth = GitAuth::default();
    assert_eq!(
        repo.remote_branch_sha(&remote.url(), "gaffer/t-1", &auth)
            .unwrap(),
        None
    );
    let out = repo.push(&remote.url(), "gaffer/t-1", &auth).unwrap();
    assert_eq!(
        out,
        PushOutcome {
            sha: sha.clone(),
            pushed: true
        }
    );
    assert_eq!(remote.branch_sha("gaffer/t-1"), Some(sha.clone()));
    // After a crash: the probe says the push happened; pushing again sends nothing.
    assert_eq!(
        repo.remote_branch_sha(&remote.url(), "gaffer/t-1", &auth)
            .unwrap(),
        Some(sha.clone())
    );
    let again = repo.push(&remote.url(), "gaffer/t-1", &auth).unwrap();
    assert_eq!(again, PushOutcome { sha, pushed: false });
}

#[test]
fn a_named_remote_and_a_token_work_and_the_token_never_shows() {
    let (dir, repo, sha) = repo_with_task_branch();
    let remote = BareRemote::new().unwrap();
    sh(dir.path(), &["remote", "add", "origin", &remote.url()]);
    let auth = GitAuth::token(Secret::new("tok-very-secret-123"));
    assert!(!format!("{auth:?}").contains("tok-very-secret-123"));
    let out = repo.push("origin", "gaffer/t-1", &auth).unwrap();
    assert!(out.pushed);
    assert_eq!(remote.branch_sha("gaffer/t-1"), Some(sha));
}

#[test]
fn a_protected_branch_is_a_clear_refusal_without_the_token() {
    let (_dir, repo, _sha) = repo_with_task_branch();
    let remote = BareRemote::new().unwrap();
    remote.protect(&["gaffer/t-1"]).unwrap();
    let auth = GitAuth::token(Secret::new("tok-very-secret-123"));
    let err = repo.push(&remote.url(), "gaffer/t-1", &auth).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, ForgeError::PushRejected { .. }), "{text}");
    assert!(text.contains("protected"), "{text}");
    assert!(!text.contains("tok-very-secret-123"), "{text}");
    assert!(!format!("{err:?}").contains("tok-very-secret-123"));
    assert_eq!(remote.branch_sha("gaffer/t-1"), None);
    // Nothing is lost locally.
    assert!(repo.rev_exists("gaffer/t-1"));
}

#[test]
fn an_unreachable_remote_names_it_without_credentials() {
    let (_dir, repo, _sha) = repo_with_task_branch();
    let auth = GitAuth::token(Secret::new("tok-very-secret-123"));
    let url = "http://someone:tok-very-secret-123@127.0.0.1:9/x.git";
    let err = repo.push(url, "gaffer/t-1", &auth).unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(err, ForgeError::RemoteUnreachable { .. }),
        "{text}"
    );
    assert!(text.contains("127.0.0.1:9"), "{text}");
    assert!(!text.contains("tok-very-secret-123"), "{text}");
    let missing = repo
        .push("/definitely/not/a/remote.git", "gaffer/t-1", &auth)
        .unwrap_err();
    assert!(
        matches!(missing, ForgeError::RemoteUnreachable { .. }),
        "{missing}"
    );
}

#[test]
fn redaction_strips_secrets_and_url_credentials() {
    let s = Secret::new("abcd1234");
    assert_eq!(format!("{s:?}"), "Secret(***)");
    assert_eq!(
        redact("fatal: https://u:p@host/x token abcd1234", &[&s]),
        "fatal: https://***@host/x token ***"
    );
}

mod over_http {
    use super::{repo_with_task_branch, BareRemote, ForgeError, GitAuth, Secret};
    use gaffer_testkit::forge::{FakeForge, Flavor};
    use pretty_assertions::assert_eq;

    const TOKEN: &str = "tok-http-push-4567";

    async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        tokio::task::spawn_blocking(f).await.unwrap()
    }

    #[tokio::test]
    async fn a_token_pushes_over_https_style_auth_and_the_probe_sees_it() {
        let fake = FakeForge::start(Flavor::Gitea, "acme", "app", TOKEN)
            .await
            .unwrap();
        let remote = BareRemote::new().unwrap();
        fake.serve_git(&remote);
        let url = fake.git_url();
        let (_dir, repo, sha) = repo_with_task_branch();
        let auth = GitAuth::token(Secret::new(TOKEN));
        let (r, a, u) = (repo.clone(), auth.clone(), url.clone());
        let out = blocking(move || r.push(&u, "gaffer/t-1", &a))
            .await
            .unwrap();
        assert!(out.pushed);
        assert_eq!(remote.branch_sha("gaffer/t-1"), Some(sha.clone()));
        let (r, a, u) = (repo.clone(), auth.clone(), url.clone());
        let probed = blocking(move || r.remote_branch_sha(&u, "gaffer/t-1", &a))
            .await
            .unwrap();
        assert_eq!(probed, Some(sha));
        // git asked, got a 401, and came back with the token from the helper.
        let reqs = fake.requests();
        assert!(reqs.iter().any(|r| r.ends_with("-> 401")), "{reqs:?}");
        assert!(
            reqs.iter()
                .any(|r| r.contains("git-receive-pack") && r.ends_with("-> 200")),
            "{reqs:?}"
        );
    }

    #[tokio::test]
    async fn a_wrong_or_missing_token_is_an_auth_error_without_the_token() {
        let fake = FakeForge::start(Flavor::GitHub, "acme", "app", TOKEN)
            .await
            .unwrap();
        let remote = BareRemote::new().unwrap();
        fake.serve_git(&remote);
        let url = fake.git_url();
        let (_dir, repo, _sha) = repo_with_task_branch();
        let wrong = GitAuth::token(Secret::new("tok-wrong-999999"));
        let (r, u) = (repo.clone(), url.clone());
        let err = blocking(move || r.push(&u, "gaffer/t-1", &wrong))
            .await
            .unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, ForgeError::PushAuth { .. }), "{text}");
        assert!(!text.contains("tok-wrong-999999"), "{text}");
        assert!(!format!("{err:?}").contains("tok-wrong-999999"));
        // No token and no credential helper: refused, never a prompt.
        let (r, u) = (repo.clone(), url.clone());
        let err = blocking(move || r.push(&u, "gaffer/t-1", &GitAuth::default()))
            .await
            .unwrap_err();
        assert!(matches!(err, ForgeError::PushAuth { .. }), "{err}");
        assert_eq!(remote.branch_sha("gaffer/t-1"), None);
    }

    #[tokio::test]
    async fn branch_protection_over_http_is_a_refusal() {
        let fake = FakeForge::start(Flavor::Gitea, "acme", "app", TOKEN)
            .await
            .unwrap();
        let remote = BareRemote::new().unwrap();
        remote.protect(&["gaffer/t-1"]).unwrap();
        fake.serve_git(&remote);
        let url = fake.git_url();
        let (_dir, repo, _sha) = repo_with_task_branch();
        let auth = GitAuth::token(Secret::new(TOKEN));
        let err = blocking(move || repo.push(&url, "gaffer/t-1", &auth))
            .await
            .unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, ForgeError::PushRejected { .. }), "{text}");
        assert!(text.contains("protected"), "{text}");
        assert!(!text.contains(TOKEN), "{text}");
    }
}
