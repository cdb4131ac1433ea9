//! `gaffer approvals`, `approve`, `deny`, `auto`, `serve` preconditions.

use super::support::Home;
use gaffer_app::{App, ApprovalRequest, Policy, Subject};
use gaffer_core::ApprovalKind;
use gaffer_store::{Durability, SqliteJournal};
use std::sync::Arc;

fn ask(home: &Home) -> String {
    ask_for(
        home,
        1,
        ApprovalKind::Plan,
        "approve the plan: 3 subtasks",
        Subject::default(),
    )
    .id
}

/// Ask approval `attempt` of task `t-one`'s step `plan`, as the engine does.
fn ask_for(
    home: &Home,
    attempt: u32,
    kind: ApprovalKind,
    summary: &str,
    subject: Subject,
) -> gaffer_protocol::api::Approval {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let j = SqliteJournal::open(&home.db(), Durability::Normal)
            .await
            .unwrap();
        let app = App::new(Arc::new(j), Policy::default());
        app.request_approval(ApprovalRequest {
            task_id: "t-one".into(),
            step_id: "plan".into(),
            attempt,
            kind,
            summary: summary.into(),
            details: serde_json::json!({"plan": "1. a\n2. b\n3. c"}),
            subject,
        })
        .await
        .unwrap()
    })
}

fn run(command: &str) -> Subject {
    Subject {
        tool: Some("run".into()),
        command: Some(command.into()),
        ..Subject::default()
    }
}

#[test]
fn approve_for_task_approves_the_same_command_again_and_is_audited() {
    let home = Home::new();
    home.seed();
    let plan = ask(&home);
    let out = home
        .gaffer()
        .args(["approve", &plan, "--for-task"])
        .assert()
        .code(1);
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        err.contains("for_task") && err.contains("plan approval"),
        "{err}"
    );
    // `deny` has no such flag: a usage error.
    home.gaffer()
        .args(["deny", &plan, "--for-task"])
        .assert()
        .code(2);

    let deploy = ask_for(
        &home,
        2,
        ApprovalKind::Tool,
        "run make deploy",
        run("make deploy"),
    );
    let out = home
        .gaffer()
        .args(["approve", &deploy.id, "--for-task", "--json"])
        .env("USER", "ana")
        .assert()
        .success();
    let a: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(
        (a["state"].as_str(), a["for_task"].as_bool()),
        (Some("approved"), Some(true))
    );

    let again = ask_for(
        &home,
        3,
        ApprovalKind::Tool,
        "run make deploy",
        run("make deploy"),
    );
    assert_eq!(again.state, "approved");
    assert_eq!(
        again.decided_by.unwrap().name,
        "allowed for this task by ana via cli"
    );
    let other = ask_for(
        &home,
        4,
        ApprovalKind::Tool,
        "run make clean",
        run("make clean"),
    );
    assert_eq!(other.state, "pending");

    let out = home
        .gaffer()
        .args(["audit", "--task", "t-one", "--json"])
        .assert()
        .success();
    let trail: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let actions: Vec<(String, String)> = trail
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"].as_str().unwrap().starts_with("approval_"))
        .map(|e| {
            (
                e["action"].as_str().unwrap().to_owned(),
                e["by"]["name"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        actions,
        [
            ("approval_allowed_for_task".to_owned(), "ana".to_owned()),
            (
                "approval_approved".to_owned(),
                "allowed for this task by ana via cli".to_owned()
            ),
        ]
    );
}

#[test]
fn approve_then_deny_first_decision_stands() {
    let home = Home::new();
    home.seed();
    let id = ask(&home);
    let out = home.gaffer().arg("approvals").assert().success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    // The list shows the short id; any unique start of the id names it.
    assert!(
        text.contains(&id[..11]) && text.contains("approve the plan"),
        "{text}"
    );
    let out = home
        .gaffer()
        .args(["approvals", "--json"])
        .assert()
        .success();
    let list: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(list[0]["id"], id.as_str());
    assert_eq!(list[0]["state"], "pending");
    home.gaffer()
        .args(["approve", &id, "--note", "looks right"])
        .env("USER", "ana")
        .assert()
        .success();
    let out = home
        .gaffer()
        .args(["deny", &id])
        .env("USER", "bob")
        .assert()
        .code(1);
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(err.contains("already approved by ana (cli)"), "{err}");
    let out = home
        .gaffer()
        .args(["approvals", "--all", "--json"])
        .assert()
        .success();
    let list: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(list[0]["state"], "approved");
    assert_eq!(list[0]["note"], "looks right");
    home.gaffer().args(["approve", "ap-nope"]).assert().code(1);
}

#[test]
fn auto_toggle_and_usage_errors() {
    let home = Home::new();
    home.seed();
    let out = home
        .gaffer()
        .args(["auto", "on", "--json"])
        .assert()
        .success();
    let p: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(p["auto_approve"], true);
    home.gaffer().args(["auto", "maybe"]).assert().code(2);
    home.gaffer()
        .args(["auto", "off", "--project", "nope"])
        .assert()
        .code(1);
}

#[test]
fn serve_refuses_a_public_address_without_a_token() {
    let home = Home::new();
    home.seed();
    let out = home
        .gaffer()
        .args(["serve", "--listen", "0.0.0.0:0"])
        .assert()
        .code(78);
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(err.contains("token"), "{err}");
    home.gaffer()
        .args(["serve", "--listen", "nonsense"])
        .assert()
        .code(78);
    std::fs::write(
        home.dir.path().join("policy.toml"),
        "[[projects.x.auto_approve]]\nname = \"everything\"\n",
    )
    .unwrap();
    let out = home.gaffer().args(["approvals"]).assert().code(78);
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        err.contains("policy.toml") && err.contains("no condition"),
        "{err}"
    );
}
