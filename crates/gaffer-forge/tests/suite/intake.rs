//! Issue intake through the forge clients and the fakes: the open-issue list and the
//! webhook deliveries (signatures and events).
use gaffer_forge::hooks::{self, HookEvent, HookSender};
use gaffer_forge::*;
use gaffer_testkit::forge::{FakeForge, Flavor, HookDelivery, Verdict};
use pretty_assertions::assert_eq;

const TOKEN: &str = "tok-intake-5e7a1c";
const SECRET: &str = "hook-secret-0b9d77e2";

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
        "GAFFER_TEST_TOKEN",
    ))
    .unwrap()
}

fn sender(flavor: Flavor) -> HookSender {
    match flavor {
        Flavor::Gitea => HookSender::Gitea,
        Flavor::GitHub => HookSender::GitHub,
    }
}

/// A header reader over `headers`, by lower-case name, as the server reads them.
fn reader(headers: &[(String, String)]) -> impl Fn(&str) -> Option<String> + '_ {
    move |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    }
}

fn numbers(issues: &[Issue]) -> Vec<u64> {
    issues.iter().map(|i| i.number).collect()
}

#[tokio::test]
async fn open_issues_lists_the_labelled_and_the_assigned_once_and_never_a_pull_request() {
    for flavor in [Flavor::Gitea, Flavor::GitHub] {
        let fake = FakeForge::start(flavor, "acme", "app", TOKEN)
            .await
            .unwrap();
        let forge = client(&fake, flavor);
        let labelled = fake.add_issue("Labelled", "body 1");
        let assigned = fake.add_issue("Assigned", "body 2");
        let both = fake.add_issue("Both", "body 3");
        let neither = fake.add_issue("Neither", "body 4");
        let closed = fake.add_issue("Closed", "body 5");
        fake.label_issue(labelled, "gaffer");
        fake.label_issue(labelled, "bug");
        fake.assign_issue(assigned, "gaffer-bot");
        fake.label_issue(both, "gaffer");
        fake.assign_issue(both, "gaffer-bot");
        fake.label_issue(neither, "bug");
        fake.label_issue(closed, "gaffer");
        fake.close_issue(closed);
        // A pull request with the label: GitHub lists it among issues, gaffer must not.
        let pr = forge
            .create_pr(&NewPullRequest {
                title: "A PR".into(),
                body: String::new(),
                head: "feature".into(),
                base: "main".into(),
                labels: vec!["gaffer".into()],
            })
            .await
            .unwrap();

        let filter = IssueFilter {
            label: Some("gaffer".into()),
            assignee: Some("gaffer-bot".into()),
        };
        let found = forge.open_issues(&filter).await.unwrap();
        assert_eq!(
            numbers(&found),
            vec![labelled, assigned, both],
            "{flavor:?}"
        );
        assert!(!numbers(&found).contains(&pr.number));
        let first = &found[0];
        assert_eq!(first.title, "Labelled");
        assert_eq!(first.body, "body 1");
        assert_eq!(first.labels, vec!["gaffer".to_owned(), "bug".to_owned()]);
        assert_eq!(first.state, "open");
        assert!(
            first.url.ends_with(&format!("/acme/app/issues/{labelled}")),
            "{}",
            first.url
        );
        assert_eq!(found[1].assignees, vec!["gaffer-bot".to_owned()]);

        let by_label = IssueFilter {
            label: Some("gaffer".into()),
            assignee: None,
        };
        assert_eq!(
            numbers(&forge.open_issues(&by_label).await.unwrap()),
            vec![labelled, both]
        );
        assert!(forge
            .open_issues(&IssueFilter::default())
            .await
            .unwrap()
            .is_empty());
        // The forge was asked with its own filter parameters.
        let asked = fake.requests().join("\n");
        match flavor {
            Flavor::Gitea => assert!(
                asked.contains("type=issues&labels=gaffer")
                    && asked.contains("assigned_by=gaffer-bot"),
                "{asked}"
            ),
            Flavor::GitHub => assert!(
                asked.contains("labels=gaffer") && asked.contains("assignee=gaffer-bot"),
                "{asked}"
            ),
        }
    }
}

#[tokio::test]
async fn open_issues_pages_through_long_lists() {
    let fake = FakeForge::start(Flavor::GitHub, "acme", "app", TOKEN)
        .await
        .unwrap();
    let forge = client(&fake, Flavor::GitHub);
    let mut want = Vec::new();
    for i in 0..73 {
        let n = fake.add_issue(&format!("Issue {i}"), "");
        fake.label_issue(n, "gaffer");
        want.push(n);
    }
    let filter = IssueFilter {
        label: Some("gaffer".into()),
        assignee: None,
    };
    assert_eq!(numbers(&forge.open_issues(&filter).await.unwrap()), want);
}

async fn delivery(flavor: Flavor, action: &str) -> (FakeForge, u64, HookDelivery) {
    let fake = FakeForge::start(flavor, "acme", "app", TOKEN)
        .await
        .unwrap();
    let n = fake.add_issue("Add a changelog", "Keep one per release.");
    fake.label_issue(n, "gaffer");
    let d = fake.issue_hook(n, action).unwrap();
    (fake, n, d)
}

#[tokio::test]
async fn a_delivery_verifies_only_with_its_own_signature_over_its_own_body() {
    for (flavor, action) in [
        (Flavor::Gitea, "label_updated"),
        (Flavor::GitHub, "labeled"),
    ] {
        let (fake, _, d) = delivery(flavor, action).await;
        let s = sender(flavor);
        let signed = d.signed(SECRET);
        assert!(hooks::verify(
            s,
            &reader(&signed),
            &d.body,
            SECRET.as_bytes()
        ));
        // No signature, another secret, or the right signature over another body.
        assert!(!hooks::verify(
            s,
            &reader(&d.headers),
            &d.body,
            SECRET.as_bytes()
        ));
        assert!(!hooks::verify(
            s,
            &reader(&d.signed("another-secret")),
            &d.body,
            SECRET.as_bytes()
        ));
        let other = fake.issue_hook(1, "opened").unwrap();
        assert!(!hooks::verify(
            s,
            &reader(&signed),
            &other.body,
            SECRET.as_bytes()
        ));
        let mut tampered = d.body.clone();
        tampered.push(b' ');
        assert!(!hooks::verify(
            s,
            &reader(&signed),
            &tampered,
            SECRET.as_bytes()
        ));
        // Garbage in the header, and an empty configured secret.
        let garbage = vec![
            ("X-Gitea-Signature".to_owned(), "zz".to_owned()),
            ("X-Hub-Signature-256".to_owned(), "sha256=".to_owned()),
        ];
        assert!(!hooks::verify(
            s,
            &reader(&garbage),
            &d.body,
            SECRET.as_bytes()
        ));
        assert!(!hooks::verify(s, &reader(&signed), &d.body, b""));
        // Another forge's signature header does not count.
        let other_sender = match flavor {
            Flavor::Gitea => HookSender::GitHub,
            Flavor::GitHub => HookSender::Gitea,
        };
        assert!(!hooks::verify(
            other_sender,
            &reader(&signed),
            &d.body,
            SECRET.as_bytes()
        ));
    }
}

#[test]
fn a_gitlab_delivery_verifies_by_its_token() {
    let with = |t: &str| vec![("X-Gitlab-Token".to_owned(), t.to_owned())];
    assert!(hooks::verify(
        HookSender::GitLab,
        &reader(&with(SECRET)),
        b"{}",
        SECRET.as_bytes()
    ));
    assert!(!hooks::verify(
        HookSender::GitLab,
        &reader(&with("hook-secret")),
        b"{}",
        SECRET.as_bytes()
    ));
    assert!(!hooks::verify(
        HookSender::GitLab,
        &reader(&[]),
        b"{}",
        SECRET.as_bytes()
    ));
}

#[tokio::test]
async fn an_issue_delivery_reads_as_the_issue_after_the_change() {
    for (flavor, action) in [
        (Flavor::Gitea, "label_updated"),
        (Flavor::Gitea, "opened"),
        (Flavor::GitHub, "labeled"),
        (Flavor::GitHub, "reopened"),
    ] {
        let (fake, n, d) = delivery(flavor, action).await;
        let event = hooks::parse(sender(flavor), &reader(&d.headers), &d.body).unwrap();
        let HookEvent::Issue { action: got, issue } = event else {
            panic!("{flavor:?} {action}: {event:?}");
        };
        assert_eq!(got, action);
        assert_eq!(
            (issue.owner.as_str(), issue.repo.as_str(), issue.number),
            ("acme", "app", n)
        );
        assert_eq!(issue.title, "Add a changelog");
        assert_eq!(issue.body, "Keep one per release.");
        assert_eq!(issue.labels, vec!["gaffer".to_owned()]);
        assert_eq!(
            issue.url,
            format!("{}/acme/app/issues/{n}", fake.base_url())
        );
    }
}

#[tokio::test]
async fn other_deliveries_are_named_not_acted_on() {
    for (flavor, action, named) in [
        (Flavor::Gitea, "closed", "issues/closed"),
        (Flavor::GitHub, "unlabeled", "issues/unlabeled"),
        (Flavor::GitHub, "edited", "issues/edited"),
    ] {
        let (_fake, _, d) = delivery(flavor, action).await;
        let event = hooks::parse(sender(flavor), &reader(&d.headers), &d.body).unwrap();
        assert_eq!(event, HookEvent::Other(named.into()));
    }
    let ping = vec![("X-GitHub-Event".to_owned(), "ping".to_owned())];
    assert_eq!(
        hooks::parse(
            HookSender::GitHub,
            &reader(&ping),
            br#"{"zen":"Keep it simple.","hook_id":1}"#
        )
        .unwrap(),
        HookEvent::Other("ping".into())
    );
    assert!(matches!(
        hooks::parse(HookSender::GitHub, &reader(&ping), b"not json"),
        Err(ApiError::BadInput(_))
    ));
}

#[tokio::test]
async fn a_pull_request_comment_delivery_names_the_pull_request() {
    for flavor in [Flavor::Gitea, Flavor::GitHub] {
        let fake = FakeForge::start(flavor, "acme", "app", TOKEN)
            .await
            .unwrap();
        let d = fake.pr_comment_hook(3, "Please rename this.");
        assert_eq!(
            hooks::parse(sender(flavor), &reader(&d.headers), &d.body).unwrap(),
            HookEvent::PullRequestComment {
                owner: "acme".into(),
                repo: "app".into(),
                number: 3
            }
        );
    }
}

#[tokio::test]
async fn a_submitted_review_delivery_names_the_pull_request_on_each_forge() {
    for flavor in [Flavor::Gitea, Flavor::GitHub] {
        let (fake, _remote, _dir, _sha) = super::forge_api::shipped(flavor).await;
        let forge = super::forge_api::client(&fake, flavor);
        let (pr, _) = forge
            .ensure_pr(&super::forge_api::new_pr("gaffer/t-1"))
            .await
            .unwrap();
        for (verdict, gitea_event) in [
            (Verdict::RequestChanges, "pull_request_rejected"),
            (Verdict::Approve, "pull_request_approved"),
            (Verdict::Comment, "pull_request_comment"),
        ] {
            let review = fake.add_review(pr.number, "ana", verdict, "Please split this");
            let d = fake.review_hook(review).unwrap();
            let event =
                reader(&d.headers)("x-gitea-event").or(reader(&d.headers)("x-github-event"));
            let want = match flavor {
                Flavor::Gitea => gitea_event,
                Flavor::GitHub => "pull_request_review",
            };
            assert_eq!(event.as_deref(), Some(want), "{flavor:?} {verdict:?}");
            let signed = d.signed(SECRET);
            assert!(hooks::verify(
                sender(flavor),
                &reader(&signed),
                &d.body,
                SECRET.as_bytes()
            ));
            assert_eq!(
                hooks::parse(sender(flavor), &reader(&signed), &d.body).unwrap(),
                HookEvent::PullRequestComment {
                    owner: "acme".into(),
                    repo: "app".into(),
                    number: pr.number
                },
                "{flavor:?} {verdict:?}"
            );
        }
    }
}

#[test]
fn gitlab_issue_and_note_deliveries_read_like_the_others() {
    let issue = br#"{"object_kind":"issue","event_type":"issue",
        "project":{"id":1,"path_with_namespace":"group/sub/app"},
        "object_attributes":{"iid":12,"title":"Add a changelog","description":"Keep one.","url":"https://gitlab.example.com/group/sub/app/-/issues/12","state":"opened","action":"update"},
        "labels":[{"id":3,"title":"gaffer"}],"assignees":[{"username":"gaffer-bot"}]}"#;
    let HookEvent::Issue { issue, .. } =
        hooks::parse(HookSender::GitLab, &reader(&[]), issue).unwrap()
    else {
        panic!("not an issue");
    };
    assert_eq!(
        (issue.owner.as_str(), issue.repo.as_str(), issue.number),
        ("group/sub", "app", 12)
    );
    assert_eq!(issue.state, "open");
    assert_eq!(issue.labels, vec!["gaffer".to_owned()]);
    assert_eq!(issue.assignees, vec!["gaffer-bot".to_owned()]);
    let note = br#"{"object_kind":"note","project":{"path_with_namespace":"group/app"},
        "object_attributes":{"noteable_type":"MergeRequest","note":"Rename this"},"merge_request":{"iid":4}}"#;
    assert_eq!(
        hooks::parse(HookSender::GitLab, &reader(&[]), note).unwrap(),
        HookEvent::PullRequestComment {
            owner: "group".into(),
            repo: "app".into(),
            number: 4
        }
    );
}

/// A hook set to the form content type (GitHub's default for a hook made through
/// its API; Gitea offers it too) sends the same JSON as the `payload` field of an
/// `application/x-www-form-urlencoded` body: it reads as the JSON one does.
#[tokio::test]
async fn a_form_encoded_delivery_reads_as_its_json_payload() {
    for (flavor, action) in [
        (Flavor::GitHub, "labeled"),
        (Flavor::Gitea, "label_updated"),
    ] {
        let (_fake, n, d) = delivery(flavor, action).await;
        let json = String::from_utf8(d.body.clone()).unwrap();
        let form: String = url_form(&[("payload", &json)]);
        let mut headers: Vec<(String, String)> = d
            .headers
            .iter()
            .filter(|(k, _)| !k.eq_ignore_ascii_case("content-type"))
            .cloned()
            .collect();
        headers.push((
            "Content-Type".into(),
            "application/x-www-form-urlencoded".into(),
        ));
        let event = hooks::parse(sender(flavor), &reader(&headers), form.as_bytes()).unwrap();
        let HookEvent::Issue { issue, .. } = event else {
            panic!("{flavor:?}: {event:?}");
        };
        assert_eq!((issue.number, issue.title.as_str()), (n, "Add a changelog"));
        // A form without the field says what to set.
        let err = hooks::parse(sender(flavor), &reader(&headers), b"x=1").unwrap_err();
        assert!(
            err.to_string().contains("no `payload` field")
                && err.to_string().contains("application/json"),
            "{err}"
        );
    }
}

/// `application/x-www-form-urlencoded` of `pairs`, as a forge encodes its form body.
fn url_form(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| {
            let enc = |s: &str| -> String {
                s.bytes()
                    .map(|b| match b {
                        b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'*' => {
                            (b as char).to_string()
                        }
                        b' ' => "+".to_owned(),
                        _ => format!("%{b:02X}"),
                    })
                    .collect()
            };
            format!("{}={}", enc(k), enc(v))
        })
        .collect::<Vec<_>>()
        .join("&")
}
