//! Mergeability of a pull request as the fake forges compute it from the bare remote.
use gaffer_forge::*;
use gaffer_testkit::forge::{BareRemote, FakeForge, Flavor};
use pretty_assertions::assert_eq;
use std::path::Path;

use super::push::{repo_with_task_branch, sh};

const TOKEN: &str = "tok-mergeable-secret";

fn client(fake: &FakeForge, flavor: Flavor) -> Box<dyn Forge> {
    let kind = match flavor {
        Flavor::Gitea => ForgeKind::Gitea,
        Flavor::GitHub => ForgeKind::GitHub,
    };
    connect(ForgeConfig::new(
        kind,
        fake.base_url(),
        "acme",
        "app",
        Secret::new(TOKEN),
        "T",
    ))
    .unwrap()
}

/// Commit `file` = `text` on `main` in `dir` and push `main`.
fn move_base(dir: &Path, remote: &BareRemote, file: &str, text: &str) {
    sh(dir, &["checkout", "-q", "main"]);
    std::fs::write(dir.join(file), text).unwrap();
    sh(dir, &["add", "."]);
    sh(dir, &["commit", "-q", "-m", "the base moves"]);
    sh(dir, &["push", "-q", &remote.url(), "main"]);
}

async fn opened(
    flavor: Flavor,
) -> (
    FakeForge,
    BareRemote,
    tempfile::TempDir,
    Box<dyn Forge>,
    u64,
) {
    let fake = FakeForge::start(flavor, "acme", "app", TOKEN)
        .await
        .unwrap();
    let remote = BareRemote::new().unwrap();
    let (dir, repo, _) = repo_with_task_branch();
    for b in ["main", "gaffer/t-1"] {
        repo.push(&remote.url(), b, &GitAuth::default()).unwrap();
    }
    fake.attach_remote(&remote);
    let forge = client(&fake, flavor);
    let (pr, _) = forge
        .ensure_pr(&NewPullRequest {
            title: "t".into(),
            body: "b".into(),
            head: "gaffer/t-1".into(),
            base: "main".into(),
            labels: vec![],
        })
        .await
        .unwrap();
    (fake, remote, dir, forge, pr.number)
}

#[tokio::test]
async fn a_base_moved_onto_the_same_lines_makes_the_pr_conflict_on_both_forges() {
    for flavor in [Flavor::Gitea, Flavor::GitHub] {
        let (_fake, remote, dir, forge, n) = opened(flavor).await;
        assert_eq!(
            forge.pull_request(n).await.unwrap().mergeable,
            Mergeability::Clean,
            "{flavor:?}"
        );
        // The base adds the file the task adds, with other lines: a real conflict.
        move_base(dir.path(), &remote, "INSTALL.md", "brew install gaffer\n");
        let pr = forge.pull_request(n).await.unwrap();
        assert_eq!(pr.mergeable, Mergeability::Conflicted, "{flavor:?}");
        assert!(pr.mergeable.needs_update());
        // Lists do not carry it: unknown there, never a false "clean".
        let listed = forge.find_open_pr("gaffer/t-1").await.unwrap().unwrap();
        assert_eq!(listed.mergeable, Mergeability::Unknown);
    }
}

#[tokio::test]
async fn github_computing_is_unknown_and_behind_only_when_protection_requires_it() {
    let (fake, remote, dir, forge, n) = opened(Flavor::GitHub).await;
    move_base(dir.path(), &remote, "README.md", "# demo, moved\n");
    // Moved without a conflict: still mergeable as far as GitHub is concerned …
    assert_eq!(
        forge.pull_request(n).await.unwrap().mergeable,
        Mergeability::Clean
    );
    // … unless branch protection wants branches up to date.
    fake.require_up_to_date(true);
    assert_eq!(
        forge.pull_request(n).await.unwrap().mergeable,
        Mergeability::Behind
    );
    fake.compute_mergeability_later(1);
    assert_eq!(
        forge.pull_request(n).await.unwrap().mergeable,
        Mergeability::Unknown
    );
    assert!(!Mergeability::Unknown.needs_update());
    assert_eq!(
        forge.pull_request(n).await.unwrap().mergeable,
        Mergeability::Behind
    );
}
