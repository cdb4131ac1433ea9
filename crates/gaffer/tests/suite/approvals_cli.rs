//! `gaffer approvals`, `approve`, `deny`, `auto`, `serve` preconditions.

use super::support::Home;
use gaffer_app::{App, ApprovalRequest, Policy, Subject};
use gaffer_core::ApprovalKind;
use gaffer_store::{Durability, SqliteJournal};
use std::sync::Arc;

fn ask(home: &Home) -> String {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let j = SqliteJournal::open(&home.db(), Durability::Normal)
            .await
            .unwrap();
        let app = App::new(Arc::new(j), Policy::default());
        app.request_approval(ApprovalRequest {
            task_id: "t-one".into(),
            step_id: "plan".into(),
            attempt: 1,
            kind: ApprovalKind::Plan,
            summary: "approve the plan: 3 subtasks".into(),
            details: serde_json::json!({"plan": "1. a\n2. b\n3. c"}),
            subject: Subject::default(),
        })
        .await
        .unwrap()
        .id
    })
}

#[test]
fn approve_then_deny_first_decision_stands() {
    let home = Home::new();
    home.seed();
    let id = ask(&home);
    let out = home.gaffer().arg("approvals").assert().success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        text.contains(&id) && text.contains("approve the plan"),
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
