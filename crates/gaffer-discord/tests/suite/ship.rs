//! A task that ships through a forge, seen in its Discord thread: the pull request,
//! CI failing, the owner's fix, CI passing.
use super::support::*;
use gaffer_app::NewTask;
use gaffer_core::{Actor, Event, TaskId};
use gaffer_forge::{CiWait, ForgeKind, Secret};
use gaffer_store::Journal;
use gaffer_testkit::forge::{BareRemote, FakeForge, Flavor};
use serde_json::{json, Value};
use std::time::Duration;

const FORGE_TOKEN: &str = "forge-token-2b7c";
const README_DONE: &str =
    "# demo\n\nA demo project.\n\n## Installation\n\n    cargo install demo\n";
const CI_LOG: &str =
    "test install_section ... FAILED\nerror: README.md: the install command must use --locked\n";

fn write(path: &str, content: &str) -> Value {
    json!({ "steps": [{ "write_file": { "path": path, "content": content } }, { "say": format!("wrote {path}") }] })
}

/// The real engine with the fake Claude Code, shipping to `fake` through `remote`.
fn shipping_engine(w: &World, fake: &FakeForge, remote: &BareRemote) -> gaffer_engine::Engine {
    let (engine, scenarios) = engine(w, |settings| {
        settings.shipping.insert(
            "demo".into(),
            gaffer_engine::Shipping {
                kind: ForgeKind::GitHub,
                base_url: fake.base_url(),
                owner: Some("acme".into()),
                repo: Some("demo".into()),
                remote: remote.url(),
                token: gaffer_engine::Credential::Value(Secret::new(FORGE_TOKEN)),
                push_with_token: false,
                labels: vec![],
                ci: CiWait {
                    first_interval: Duration::from_millis(30),
                    max_interval: Duration::from_millis(150),
                    timeout: Duration::from_secs(120),
                    max_transient_errors: 5,
                    no_checks_after: None,
                },
                ci_fix_attempts: 1,
                conflict_strategy: gaffer_forge::ConflictStrategy::Rebase,
                wait_for_ci: true,
                review_fix_attempts: 3,
                follow: None,
            },
        );
    });
    script_plan(&scenarios);
    let fixed = README_DONE.replace("install demo", "install --locked demo");
    script(
        &scenarios,
        "owner",
        vec![write("README.md", README_DONE), write("README.md", &fixed)],
    );
    script(
        &scenarios,
        "reviewer",
        vec![say("```json\n{\"verdict\": \"done\"}\n```")],
    );
    engine
}

/// The commit CI waits for on step `step`, once it is pending there.
async fn ci_waits(
    events: &mut tokio::sync::broadcast::Receiver<gaffer_store::RecordedEvent>,
    step: &str,
) -> String {
    let wait = async {
        loop {
            if let Event::CiStatusChanged {
                step_id,
                sha,
                state,
                ..
            } = events.recv().await.unwrap().event
            {
                if step_id.as_str() == step && state == "pending" {
                    return sha;
                }
            }
        }
    };
    tokio::time::timeout(WAIT, wait)
        .await
        .expect("CI never waited")
}

#[tokio::test]
async fn the_thread_shows_the_pull_request_and_a_note_for_each_ci_result_and_fix() {
    let w = World::new().await;
    let remote = BareRemote::new().unwrap();
    let fake = FakeForge::start(Flavor::GitHub, "acme", "demo", FORGE_TOKEN)
        .await
        .unwrap();
    fake.attach_remote(&remote);
    let engine = shipping_engine(&w, &fake, &remote);
    let task = w
        .app
        .create_task(
            NewTask {
                project: "demo".into(),
                request: "Add an installation section to README".into(),
                auto_approve: true,
                ..NewTask::default()
            },
            Actor::user("ana", "discord"),
        )
        .await
        .unwrap();
    let mut events = w.journal.subscribe();
    let run = {
        let (engine, id) = (engine.clone(), TaskId(task.id.clone()));
        tokio::spawn(async move { engine.run_task(&id, Default::default()).await })
    };
    let thread = w.thread_of(&task.id).await;
    let first = ci_waits(&mut events, "ci/1").await;
    fake.set_check_run(&first, "build", "completed", Some("failure"), Some(CI_LOG));
    let second = ci_waits(&mut events, "ci/2").await;
    fake.set_check_run(&second, "build", "completed", Some("success"), None);
    assert_eq!(run.await.unwrap().unwrap(), gaffer_core::Stage::Done);
    let done = w.note_starting(&thread, "✅ Done").await;

    let pr = fake.prs().pop().expect("a pull request");
    let url = format!("{}/acme/demo/pull/{}", fake.base_url(), pr.number);
    let messages = w.discord.messages(&thread);
    let texts: Vec<&str> = messages.iter().map(|m| m.content.as_str()).collect();
    // The status message at the top links the pull request.
    assert!(
        texts[0].contains(&format!("🔗 Pull request: {url}")),
        "{}",
        texts[0]
    );
    assert!(done.content.contains(&url), "{}", done.content);
    // One note per event, in the order they happened, each posted once.
    let short = |sha: &str| sha[..10].to_owned();
    let expected = [
        format!("🚀 Pull request #{} opened: {url}", pr.number),
        format!("❌ CI failed on `{}`: **build**", short(&first)),
        "🔧 Fix 1 for the CI failure".to_owned(),
        format!("✅ CI passed on `{}`", short(&second)),
        "✅ Done".to_owned(),
    ];
    let mut at = 0;
    for note in &expected {
        let found = texts
            .iter()
            .position(|t| t.starts_with(note.as_str()))
            .unwrap_or_else(|| panic!("no note {note:?} in {texts:#?}"));
        assert!(found > at, "{note:?} out of order: {texts:#?}");
        assert_eq!(
            texts
                .iter()
                .filter(|t| t.starts_with(note.as_str()))
                .count(),
            1,
            "{note:?} posted twice: {texts:#?}"
        );
        at = found;
    }
    // The failing log is in the thread; nothing claims to have shipped before the push.
    let failure = texts
        .iter()
        .find(|t| t.starts_with("❌ CI failed"))
        .unwrap();
    assert!(failure.contains("must use --locked"), "{failure}");
    assert!(
        !texts.iter().any(|t| t.contains("Shipped on branch")),
        "{texts:#?}"
    );
}
