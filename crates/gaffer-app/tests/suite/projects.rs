use super::support::*;
use super::support::{command, tool_request};
use gaffer_app::{AddProject, AppError, NewTask};

fn add(path: &std::path::Path, name: Option<&str>) -> AddProject {
    AddProject {
        path: path.to_string_lossy().into_owned(),
        name: name.map(str::to_owned),
        check: None,
    }
}

#[tokio::test]
async fn one_project_per_physical_path() {
    let env = env("").await;
    let repo = env.dir.path().join("repo");
    git_repo(&repo);
    std::fs::write(repo.join("Cargo.toml"), "[package]\n").unwrap();
    let p = env
        .app
        .add_project(add(&repo, None), user("a"))
        .await
        .unwrap();
    assert_eq!(p.name, "repo");
    assert_eq!(p.check_command.as_deref(), Some("cargo test"));
    assert_eq!(
        p.path,
        std::fs::canonicalize(&repo).unwrap().to_string_lossy()
    );
    assert!(p.id.starts_with("p-"));
    let link = env.dir.path().join("link");
    std::os::unix::fs::symlink(&repo, &link).unwrap();
    for other in [
        format!("{}/", repo.display()),
        format!("{}/../repo/.", repo.display()),
        link.display().to_string(),
    ] {
        let err = env
            .app
            .add_project(
                AddProject {
                    path: other.clone(),
                    name: Some("other".into()),
                    check: None,
                },
                user("a"),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                AppError::Conflict {
                    code: "path_taken",
                    ..
                }
            ),
            "{other}: {err}"
        );
    }
    // Name taken.
    let repo2 = env.dir.path().join("repo2");
    git_repo(&repo2);
    let err = env
        .app
        .add_project(add(&repo2, Some("repo")), user("a"))
        .await
        .unwrap_err();
    assert!(matches!(
        err,
        AppError::Conflict {
            code: "name_taken",
            ..
        }
    ));
    assert_eq!(env.app.projects().await.unwrap().len(), 1);
}

#[tokio::test]
async fn not_a_git_work_tree_or_bad_name_is_refused() {
    let env = env("").await;
    let plain = env.dir.path().join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    let err = env
        .app
        .add_project(add(&plain, None), user("a"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, AppError::Invalid { field, .. } if field == "path"),
        "{err}"
    );
    let err = env
        .app
        .add_project(add(&env.dir.path().join("missing"), None), user("a"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, AppError::Invalid { field, .. } if field == "path"),
        "{err}"
    );
    let repo = env.dir.path().join("r");
    git_repo(&repo);
    let err = env
        .app
        .add_project(add(&repo, Some("bad name!")), user("a"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, AppError::Invalid { field, .. } if field == "name"),
        "{err}"
    );
    assert!(env.app.projects().await.unwrap().is_empty());
}

#[test]
fn check_commands_are_detected_from_files() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let detect = || gaffer_app::detect_check_command(d);
    assert_eq!(detect(), None);
    std::fs::write(d.join("Makefile"), "build:\n\tcc x.c\n").unwrap();
    assert_eq!(detect(), None);
    std::fs::write(d.join("Makefile"), "build:\n\tcc\ncheck: build\n\t./t\n").unwrap();
    assert_eq!(detect().as_deref(), Some("make check"));
    std::fs::write(d.join("go.mod"), "module x\n").unwrap();
    assert_eq!(detect().as_deref(), Some("go test ./..."));
    std::fs::write(d.join("pytest.ini"), "").unwrap();
    assert_eq!(detect().as_deref(), Some("pytest"));
    std::fs::write(d.join("package.json"), "{}").unwrap();
    assert_eq!(detect().as_deref(), Some("npm test"));
    std::fs::write(d.join("Cargo.toml"), "").unwrap();
    assert_eq!(detect().as_deref(), Some("cargo test"));
}

#[tokio::test]
async fn tasks_are_created_listed_and_bad_ones_store_nothing() {
    let env = env("").await;
    env.project("alpha").await;
    let before = env.app.journal().events_after(0, 1000).await.unwrap().len();
    for (project, request, agent, field) in [
        ("alpha", "   ", None, "request"),
        ("nope", "do it", None, "project"),
        ("alpha", "do it", Some("gpt-42"), "agent"),
    ] {
        let err = env
            .app
            .create_task(
                NewTask {
                    project: project.into(),
                    request: request.into(),
                    agent: agent.map(str::to_owned),
                    ..Default::default()
                },
                user("a"),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(&err, AppError::Invalid { field: f, .. } if f == field),
            "{err}"
        );
    }
    assert_eq!(
        env.app.journal().events_after(0, 1000).await.unwrap().len(),
        before
    );
    let t = env
        .app
        .create_task(
            NewTask {
                project: "alpha".into(),
                request: "add a flag".into(),
                agent: Some("codex".into()),
                ..Default::default()
            },
            user("a"),
        )
        .await
        .unwrap();
    assert!(t.id.starts_with("t-"));
    assert_eq!(t.stage, "queued");
    assert_eq!(t.project, "alpha");
    assert_eq!(t.agent.as_deref(), Some("codex"));
    let list = env.app.tasks(&Default::default()).await.unwrap();
    assert_eq!(list.len(), 1);
    let detail = env.app.task(&t.id).await.unwrap();
    assert_eq!(detail.task, t);
    env.app.cancel_task(&t.id, user("a"), None).await.unwrap();
    let retry = env.app.retry_task(&t.id, user("a")).await.unwrap();
    assert_ne!(retry.id, t.id);
    assert_eq!(retry.request, t.request);
    assert_eq!(retry.agent.as_deref(), Some("codex"));
}

/// Regression: the `ship` receipt repeats the task's total (`tokens`, `cost_usd`), and
/// the API added it to the per-step sums, so every shipped task showed twice its cost.
#[tokio::test]
async fn a_shipped_task_costs_what_its_turns_cost_once_without_float_noise() {
    use gaffer_core::{Event, StepId, StreamId};
    use gaffer_store::NewEvent;
    let env = env("").await;
    env.project("alpha").await;
    let task = env.task_with_step("alpha", "plan").await;
    env.record_step(&task, "code/1").await;
    env.record_step(&task, "ship").await;
    let stream = StreamId(task.clone());
    let done = |step: &str, receipt: serde_json::Value| {
        vec![
            NewEvent::now(Event::StepStarted {
                step_id: StepId(step.into()),
            }),
            NewEvent::now(Event::StepCompleted {
                step_id: StepId(step.into()),
                receipt,
            }),
        ]
    };
    for (step, receipt) in [
        (
            "plan",
            serde_json::json!({"usage": {"input_tokens": 100, "output_tokens": 20, "cached_input_tokens": 5, "cost_usd": 0.1}}),
        ),
        (
            "code/1",
            serde_json::json!({"usage": {"input_tokens": 200, "output_tokens": 40, "cost_usd": 0.2}}),
        ),
        (
            "ship",
            serde_json::json!({"tokens": {"input": 300, "output": 60, "cached_input": 5}, "cost_usd": 0.30000000000000004}),
        ),
    ] {
        let head = env.app.journal().head(&stream).await.unwrap();
        env.app
            .journal()
            .append(&stream, head, done(step, receipt))
            .await
            .unwrap();
    }
    let detail = env.app.task(&task).await.unwrap();
    assert_eq!((detail.task.tokens, detail.task.cost_usd), (365, Some(0.3)));
    let listed = env.app.tasks(&Default::default()).await.unwrap();
    assert_eq!((listed[0].tokens, listed[0].cost_usd), (365, Some(0.3)));
    let u = env.app.usage().await.unwrap();
    assert_eq!((u.tokens, u.cost_usd), (365, Some(0.3)));
    assert_eq!(serde_json::to_string(&u.cost_usd).unwrap(), "0.3");
}

#[tokio::test]
async fn tokens_and_cost_come_from_step_receipts_and_approvals_name_their_project() {
    use gaffer_core::{Event, StepId, StreamId};
    use gaffer_store::NewEvent;
    let env = env("").await;
    env.project("alpha").await;
    let task = env.task_with_step("alpha", "plan").await;
    let stream = StreamId(task.clone());
    let head = env.app.journal().head(&stream).await.unwrap();
    env.app
        .journal()
        .append(
            &stream,
            head,
            vec![
                NewEvent::now(Event::StepStarted {
                    step_id: StepId("plan".into()),
                }),
                NewEvent::now(Event::StepCompleted {
                    step_id: StepId("plan".into()),
                    receipt: serde_json::json!({"usage": {"input_tokens": 100, "output_tokens": 20, "cached_input_tokens": 5, "cost_usd": 0.25}}),
                }),
            ],
        )
        .await
        .unwrap();
    let t = env.app.task(&task).await.unwrap().task;
    assert_eq!((t.tokens, t.cost_usd), (125, Some(0.25)));
    let u = env.app.usage().await.unwrap();
    assert_eq!((u.tasks, u.tokens), (1, 125));
    env.record_step(&task, "tool").await;
    let a = env
        .app
        .request_approval(tool_request(&task, "tool", 1, command("ls")))
        .await
        .unwrap();
    assert_eq!(a.project, "alpha");
    assert_eq!(env.app.approvals(None).await.unwrap()[0].project, "alpha");
    assert_eq!(
        env.app.task(&task).await.unwrap().approvals[0].project,
        "alpha"
    );
}

#[tokio::test]
async fn the_worktree_diff_is_read_from_the_worktree_step_receipt() {
    use gaffer_core::{Event, StepId, StreamId};
    use gaffer_store::NewEvent;
    let env = env("").await;
    env.project("alpha").await;
    let task = env.task_with_step("alpha", "worktree").await;
    assert!(matches!(
        env.app.task_diff(&task).await.unwrap_err(),
        AppError::NotFound { .. }
    ));
    let repo = env.dir.path().join("alpha");
    let wt = env.dir.path().join("wt");
    let git = |dir: &std::path::Path, args: &[&str]| {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    std::fs::write(repo.join("a.rs"), "fn a() {}\n").unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "base"]);
    let base = git(&repo, &["rev-parse", "HEAD"]);
    git(
        &repo,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "gaffer/x",
            &wt.display().to_string(),
        ],
    );
    std::fs::write(wt.join("a.rs"), "fn a() {}\nfn b() {}\n").unwrap();
    // What the worktree's own `.git` says is never followed: the diff is read through
    // the git dir the repository keeps for it (this receipt predates gaffer recording it).
    std::fs::write(wt.join(".git"), "gitdir: /nowhere\n").unwrap();
    let stream = StreamId(task.clone());
    let head = env.app.journal().head(&stream).await.unwrap();
    env.app
        .journal()
        .append(
            &stream,
            head,
            vec![
                NewEvent::now(Event::StepStarted {
                    step_id: StepId("worktree".into()),
                }),
                NewEvent::now(Event::StepCompleted {
                    step_id: StepId("worktree".into()),
                    receipt: serde_json::json!({"path": wt, "branch": "gaffer/x", "base": base}),
                }),
            ],
        )
        .await
        .unwrap();
    let d = env.app.task_diff(&task).await.unwrap();
    assert_eq!(d.branch, "gaffer/x");
    assert!(d.diff.contains("+fn b() {}"), "{}", d.diff);
    assert!(!d.truncated);
}

/// A request quoting a secret is stored, and so shown and handed to agents, with the
/// secret replaced; a retry copies the stored text. Without a redaction nothing changes.
#[tokio::test]
async fn a_request_is_stored_redacted_when_a_redaction_is_set() {
    let e = env("").await;
    e.project("demo").await;
    let app = e.app.with_redaction(std::sync::Arc::new(|t: &str| {
        t.replace("hunter2-secret", "[REDACTED]")
    }));
    let new = |request: &str| NewTask {
        project: "demo".into(),
        request: request.into(),
        ..Default::default()
    };
    let t = app
        .create_task(new("  deploy with hunter2-secret please "), user("alice"))
        .await
        .unwrap();
    assert_eq!(t.request, "deploy with [REDACTED] please");
    let stored = app.task(&t.id).await.unwrap().task.request;
    assert_eq!(stored, "deploy with [REDACTED] please");
    let journal = format!("{:?}", app.journal().events_after(0, 1000).await.unwrap());
    assert!(!journal.contains("hunter2-secret"), "{journal}");
    // The redaction guards the journal's door: an app without one of its own, on
    // the same journal, stores nothing raw either.
    let plain = e
        .app
        .create_task(new("hunter2-secret as is"), user("alice"))
        .await
        .unwrap();
    assert_eq!(plain.request, "[REDACTED] as is");
}

#[tokio::test]
async fn a_task_may_name_only_an_acp_agent_the_config_declares() {
    let env = env("").await;
    env.project("alpha").await;
    let new = |agent: &str| NewTask {
        project: "alpha".into(),
        request: "do it".into(),
        agent: Some(agent.into()),
        ..Default::default()
    };
    let before = env.app.journal().events_after(0, 1000).await.unwrap().len();
    // Without declarations no ACP agent is accepted: `acp:sh` would start `sh`.
    let err = env
        .app
        .create_task(new("acp:sh"), user("a"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, AppError::Invalid { field, .. } if field == "agent"),
        "{err}"
    );
    assert!(err.to_string().contains("[agents.acp.sh]"), "{err}");
    let app = env.app.with_acp_agents(["goose".to_string()]);
    let err = app.create_task(new("acp:sh"), user("a")).await.unwrap_err();
    assert!(err.to_string().contains("declared: acp:goose"), "{err}");
    assert_eq!(
        env.app.journal().events_after(0, 1000).await.unwrap().len(),
        before,
        "a refused task stores nothing"
    );
    let t = app.create_task(new("acp:goose"), user("a")).await.unwrap();
    assert_eq!(t.agent.as_deref(), Some("acp:goose"));
}
