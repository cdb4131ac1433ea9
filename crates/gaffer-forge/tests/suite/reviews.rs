//! Review comments and replies on the fake Gitea and GitHub.
use gaffer_forge::*;
use gaffer_testkit::forge::{DiffLine, Flavor, Verdict};
use pretty_assertions::assert_eq;

use super::forge_api::{client, new_pr, shipped, BOTH};

const HUNK: &str = "@@ -1,3 +1,7 @@\n # app\n+\n+## Installation\n+    cargo install app";

#[tokio::test]
async fn review_comments_come_with_file_line_and_hunk_and_replies_land_once_per_comment() {
    for flavor in BOTH {
        let (fake, _remote, _dir, _sha) = shipped(flavor).await;
        let forge = client(&fake, flavor);
        let (pr, _) = forge.ensure_pr(&new_pr("gaffer/t-1")).await.unwrap();
        let on_line =
            fake.add_review_comment(pr.number, "ana", "README.md", 4, HUNK, "Use --locked here");
        let talk = fake.add_pr_comment(pr.number, "bo", "Also mention the MSRV");

        let comments = forge.pr_comments(pr.number).await.unwrap();
        let line = comments.iter().find(|c| c.id == on_line).unwrap();
        assert_eq!(line.kind, PrCommentKind::ReviewComment, "{flavor:?}");
        assert_eq!(line.key, format!("review-comment:{on_line}"));
        assert_eq!(line.author, "ana");
        assert_eq!(line.path.as_deref(), Some("README.md"));
        assert_eq!(line.line, Some(4), "{flavor:?}: the new-file line");
        assert_eq!(line.diff_hunk.as_deref(), Some(HUNK));
        assert_eq!(line.body, "Use --locked here");
        let conv = comments.iter().find(|c| c.id == talk).unwrap();
        assert_eq!(conv.kind, PrCommentKind::Conversation);
        assert_eq!(
            (conv.author.as_str(), conv.key.clone()),
            ("bo", format!("comment:{talk}"))
        );
        // A review without text asks nothing: it is not listed.
        assert!(
            comments.iter().all(|c| c.kind != PrCommentKind::Review),
            "{comments:#?}"
        );

        let reply = forge
            .reply_to_comment(pr.number, line, "Done in abc123 <!-- m -->")
            .await
            .unwrap();
        forge
            .reply_to_comment(pr.number, conv, "Added <!-- m2 -->")
            .await
            .unwrap();
        let after = forge.pr_comments(pr.number).await.unwrap();
        let mine: Vec<&PrComment> = after.iter().filter(|c| c.author == "gaffer").collect();
        assert_eq!(mine.len(), 2, "{flavor:?}: {after:#?}");
        match flavor {
            // GitHub: in the review thread, on the same line.
            Flavor::GitHub => {
                let threaded = mine.iter().find(|c| c.id == reply.id).unwrap();
                assert_eq!(threaded.kind, PrCommentKind::ReviewComment);
                assert_eq!(threaded.in_reply_to, Some(on_line));
                assert_eq!(threaded.body, "Done in abc123 <!-- m -->");
            }
            // Gitea: a conversation comment quoting the review comment and its place.
            Flavor::Gitea => {
                let quoting = mine.iter().find(|c| c.id == reply.id).unwrap();
                assert_eq!(quoting.kind, PrCommentKind::Conversation);
                assert!(
                    quoting
                        .body
                        .starts_with("@ana on `README.md` line 4:\n> Use --locked here"),
                    "{}",
                    quoting.body
                );
            }
        }
        // A reply to a conversation comment quotes it on both forges.
        assert!(mine
            .iter()
            .any(|c| c.body.contains("> Also mention the MSRV") && c.body.contains("<!-- m2 -->")));
    }
}

#[tokio::test]
async fn github_refuses_a_reply_to_a_reply_so_gaffer_answers_the_thread_root() {
    let (fake, _remote, _dir, _sha) = shipped(Flavor::GitHub).await;
    let forge = client(&fake, Flavor::GitHub);
    let (pr, _) = forge.ensure_pr(&new_pr("gaffer/t-1")).await.unwrap();
    let root = fake.add_review_comment(pr.number, "ana", "README.md", 2, HUNK, "typo");
    let first = forge
        .reply_to_comment(
            pr.number,
            forge
                .pr_comments(pr.number)
                .await
                .unwrap()
                .iter()
                .find(|c| c.id == root)
                .unwrap(),
            "fixed",
        )
        .await
        .unwrap();
    // Answering the reply goes to the thread's root, which GitHub accepts.
    let comments = forge.pr_comments(pr.number).await.unwrap();
    let reply = comments.iter().find(|c| c.id == first.id).unwrap();
    let second = forge
        .reply_to_comment(pr.number, reply, "and again")
        .await
        .unwrap();
    let all = fake.review_comments();
    let posted = all.iter().find(|c| c.id == second.id).unwrap();
    assert_eq!(posted.in_reply_to, Some(root));
}

#[tokio::test]
async fn on_gitlab_diff_notes_come_with_file_and_line_and_a_reply_goes_into_the_discussion() {
    let (fake, _remote, _dir, _sha) = super::gitlab::shipped().await;
    let forge = super::gitlab::client(&fake);
    let (mr, _) = forge
        .ensure_pr(&super::gitlab::new_mr("gaffer/t-1"))
        .await
        .unwrap();
    let on_line = fake.add_mr_comment(
        mr.number,
        "ana",
        Some(("README.md", 4)),
        "Use --locked here",
    );
    let talk = fake.add_mr_comment(mr.number, "bo", None, "Also mention the MSRV");
    let comments = forge.pr_comments(mr.number).await.unwrap();
    let line = comments.iter().find(|c| c.id == on_line).unwrap();
    assert_eq!(line.kind, PrCommentKind::ReviewComment);
    assert_eq!(line.key, format!("review-comment:{on_line}"));
    assert_eq!(
        (line.author.as_str(), line.path.as_deref(), line.line),
        ("ana", Some("README.md"), Some(4))
    );
    assert!(line.thread.is_some());
    let conv = comments.iter().find(|c| c.id == talk).unwrap();
    assert_eq!(conv.kind, PrCommentKind::Conversation);

    let reply = forge
        .reply_to_comment(mr.number, line, "Done <!-- m -->")
        .await
        .unwrap();
    // In the same discussion, after the comment.
    let thread = fake
        .discussions()
        .into_iter()
        .find(|d| d.notes[0].id == on_line)
        .unwrap();
    assert_eq!(thread.notes.len(), 2);
    assert_eq!(thread.notes[1].id, reply.id);
    assert_eq!(thread.notes[1].author, "gaffer-bot");
    let after = forge.pr_comments(mr.number).await.unwrap();
    let mine = after.iter().find(|c| c.id == reply.id).unwrap();
    assert_eq!(mine.in_reply_to, Some(on_line));
    assert_eq!(mine.body, "Done <!-- m -->");
}

#[tokio::test]
async fn comments_on_removed_and_outdated_lines_keep_their_file_and_line() {
    for flavor in BOTH {
        let (fake, _remote, _dir, _sha) = shipped(flavor).await;
        let forge = client(&fake, flavor);
        let (pr, _) = forge.ensure_pr(&new_pr("gaffer/t-1")).await.unwrap();
        let removed = fake.add_review_comment_on(
            pr.number,
            "ana",
            "README.md",
            DiffLine::Old(3),
            HUNK,
            "Keep this line",
        );
        let outdated = fake.add_review_comment_on(
            pr.number,
            "ana",
            "README.md",
            DiffLine::Outdated(5),
            HUNK,
            "Say which version",
        );
        let comments = forge.pr_comments(pr.number).await.unwrap();
        let at = |id: u64| {
            let c = comments.iter().find(|c| c.id == id).unwrap();
            (c.path.clone(), c.line, c.line_of)
        };
        let readme = Some("README.md".to_owned());
        assert_eq!(
            at(removed),
            (readme.clone(), Some(3), LineOf::OldFile),
            "{flavor:?}: Gitea `position: 0` + `original_position`, GitHub `side: LEFT`"
        );
        let outdated_line = match flavor {
            // GitHub: `line: null`, `original_line: 5`, `position: null`.
            Flavor::GitHub => LineOf::EarlierCommit,
            // Gitea keeps the line a comment was made on.
            Flavor::Gitea => LineOf::NewFile,
        };
        assert_eq!(at(outdated), (readme, Some(5), outdated_line), "{flavor:?}");
        let c = comments.iter().find(|c| c.id == removed).unwrap();
        assert!(
            c.quoting_reply("ok")
                .starts_with("@ana on `README.md` line 3 of the old file"),
            "{}",
            c.quoting_reply("ok")
        );
    }
}

#[tokio::test]
async fn bots_are_told_apart_and_only_reviews_that_ask_are_listed() {
    for flavor in BOTH {
        let (fake, _remote, _dir, _sha) = shipped(flavor).await;
        let forge = client(&fake, flavor);
        let (pr, _) = forge.ensure_pr(&new_pr("gaffer/t-1")).await.unwrap();
        let bot_login = match flavor {
            Flavor::GitHub => "codecov[bot]",
            Flavor::Gitea => "gitea-actions",
        };
        let by_bot = fake.add_pr_comment(pr.number, bot_login, "Coverage: 81% (+0.4%)");
        let by_person = fake.add_pr_comment(pr.number, "bo", "Mention the MSRV");
        let lgtm = fake.add_review(pr.number, "ana", Verdict::Approve, "LGTM");
        let nit_review = fake.add_review(pr.number, "ana", Verdict::Approve, "");
        let nit = fake.add_comment_to_review(
            nit_review,
            "README.md",
            DiffLine::New(2),
            HUNK,
            "nit: a full stop",
        );
        let changes = fake.add_review(
            pr.number,
            "cy",
            Verdict::RequestChanges,
            "Please split this",
        );
        let remark = fake.add_review(pr.number, "cy", Verdict::Comment, "Why not clap?");

        let comments = forge.pr_comments(pr.number).await.unwrap();
        let find = |id: u64| comments.iter().find(|c| c.id == id);
        assert!(find(by_bot).unwrap().bot, "{flavor:?}: {bot_login}");
        assert!(!find(by_person).unwrap().bot, "{flavor:?}");
        assert!(
            find(lgtm).is_none(),
            "{flavor:?}: an approval's text asks for nothing"
        );
        assert_eq!(
            find(nit).map(|c| c.kind),
            Some(PrCommentKind::ReviewComment),
            "{flavor:?}: a line comment in an approving review is still read"
        );
        assert_eq!(find(changes).map(|c| c.kind), Some(PrCommentKind::Review));
        assert_eq!(find(remark).map(|c| c.kind), Some(PrCommentKind::Review));
    }
}

#[tokio::test]
async fn a_gitea_review_with_many_comments_is_read_once() {
    let (fake, _remote, _dir, _sha) = shipped(Flavor::Gitea).await;
    let forge = client(&fake, Flavor::Gitea);
    let (pr, _) = forge.ensure_pr(&new_pr("gaffer/t-1")).await.unwrap();
    let review = fake.add_review(pr.number, "ana", Verdict::RequestChanges, "");
    for line in 1..=60 {
        fake.add_comment_to_review(review, "README.md", DiffLine::New(line), HUNK, "nit");
    }
    let comments = forge.pr_comments(pr.number).await.unwrap();
    let mut keys: Vec<&str> = comments
        .iter()
        .filter(|c| c.kind == PrCommentKind::ReviewComment)
        .map(|c| c.key.as_str())
        .collect();
    assert_eq!(keys.len(), 60);
    keys.dedup();
    assert_eq!(keys.len(), 60, "each comment once");
    let asked = fake
        .requests()
        .iter()
        .filter(|r| r.contains(&format!("/reviews/{review}/comments")))
        .count();
    assert_eq!(asked, 1, "Gitea does not page this list: asked once");
}

#[tokio::test]
async fn on_gitlab_removed_lines_bots_and_system_notes_read_as_gitlab_sends_them() {
    let (fake, _remote, _dir, _sha) = super::gitlab::shipped().await;
    let forge = super::gitlab::client(&fake);
    let (mr, _) = forge
        .ensure_pr(&super::gitlab::new_mr("gaffer/t-1"))
        .await
        .unwrap();
    let removed = fake.add_mr_comment_on(
        mr.number,
        "ana",
        "README.md",
        DiffLine::Old(3),
        "Keep this line",
    );
    let bot = fake.add_mr_comment(
        mr.number,
        "project_42_bot_4ffca233d8298ea1",
        None,
        "Pipeline report: 2 warnings",
    );
    let system = fake.add_system_note(mr.number, "ana", "added 1 commit");
    let person = fake.add_mr_comment(mr.number, "bo", None, "Mention the MSRV");
    let comments = forge.pr_comments(mr.number).await.unwrap();
    let find = |id: u64| comments.iter().find(|c| c.id == id);
    let r = find(removed).unwrap();
    assert_eq!(
        (r.path.as_deref(), r.line, r.line_of),
        (Some("README.md"), Some(3), LineOf::OldFile),
        "`new_line: null`: the old file's line"
    );
    assert!(find(bot).unwrap().bot, "a project access token's user");
    assert!(!find(person).unwrap().bot);
    assert!(find(system).is_none(), "a system note is nobody's words");
}
