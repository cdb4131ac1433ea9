//! Running gaffer as a service: `gaffer backup` / `gaffer restore`, upgrades of an
//! old journal, `gaffer service`.

use super::run::success_json;
use super::support::Home;
use predicates::prelude::*;
use serde_json::Value;

/// `gaffer journal verify --json` and `task list --json` of the journal at `data`.
fn verified_tasks(home: &Home, data: &std::path::Path) -> (Value, Vec<(String, String)>) {
    let verify = home
        .gaffer()
        .env("GAFFER_DATA_DIR", data)
        .args(["journal", "verify", "--json"])
        .output()
        .unwrap();
    let tasks = home
        .gaffer()
        .env("GAFFER_DATA_DIR", data)
        .args(["task", "list", "--json"])
        .output()
        .unwrap();
    let mut tasks: Vec<(String, String)> = success_json(&tasks)
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["id"].as_str().unwrap().to_owned(),
                t["stage"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    tasks.sort();
    (success_json(&verify), tasks)
}

#[test]
fn backup_then_restore_into_a_new_data_dir_gives_the_same_verified_journal() {
    let home = Home::new();
    home.seed();
    let backup = home.dir.path().join("gaffer-backup.db");
    let out = home
        .gaffer()
        .arg("backup")
        .arg(&backup)
        .arg("--json")
        .output()
        .unwrap();
    let made = success_json(&out);
    assert_eq!(made["streams"], 3, "{made}");
    assert!(made["bytes"].as_u64().unwrap() > 0, "{made}");
    // Never over an existing file.
    home.gaffer()
        .arg("backup")
        .arg(&backup)
        .assert()
        .code(78)
        .stderr(predicate::str::contains("already exists"));

    let restored_dir = home.dir.path().join("restored");
    let out = home
        .gaffer()
        .env("GAFFER_DATA_DIR", &restored_dir)
        .arg("restore")
        .arg(&backup)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("restored into") && said.contains("verified"),
        "{said}"
    );
    let (verify, tasks) = verified_tasks(&home, &restored_dir);
    let (source_verify, source_tasks) = verified_tasks(&home, &home.data());
    assert_eq!(verify, source_verify);
    assert_eq!(verify["broken"], Value::Null);
    assert_eq!(tasks, source_tasks);

    // The restored journal now holds events: a second restore is refused, untouched.
    let before = std::fs::read(restored_dir.join("gaffer.db")).unwrap();
    home.gaffer()
        .env("GAFFER_DATA_DIR", &restored_dir)
        .arg("restore")
        .arg(&backup)
        .assert()
        .code(78)
        .stderr(predicate::str::contains("already holds"));
    assert_eq!(
        std::fs::read(restored_dir.join("gaffer.db")).unwrap(),
        before
    );
}

#[test]
fn backup_of_a_postgres_journal_points_to_pg_dump_without_the_password() {
    let home = Home::new();
    home.write_config("");
    let url = "postgres://gaffer:s3cret-pw@127.0.0.1:1/gaffer";
    for command in ["backup", "restore"] {
        let out = home
            .gaffer()
            .args(["--db", url, command, "/tmp/x.dump"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(78));
        let err = String::from_utf8_lossy(&out.stderr);
        let tool = if command == "backup" {
            "pg_dump"
        } else {
            "pg_restore"
        };
        assert!(
            err.contains(tool) && err.contains("docs/operations.md"),
            "{err}"
        );
        assert!(!err.contains("s3cret-pw"), "{err}");
    }
}

/// The previous schema's fixture (see gaffer-store's `suite::upgrade`).
fn previous_schema_fixture() -> std::path::PathBuf {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../gaffer-store/tests/fixtures");
    let v = gaffer_store::SqliteJournal::supported_schema_version() - 1;
    dir.join(format!("journal-schema-v{v}.db"))
}

#[test]
fn doctor_reports_a_pending_migration_without_migrating_and_the_next_open_migrates() {
    let home = Home::new();
    home.write_config("");
    std::fs::create_dir_all(home.data()).unwrap();
    std::fs::copy(previous_schema_fixture(), home.db()).unwrap();
    let before = std::fs::read(home.db()).unwrap();
    let supported = gaffer_store::SqliteJournal::supported_schema_version();

    let out = home.gaffer().args(["doctor", "--json"]).output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let db = super::cli::doctor_check(&report, "database");
    assert_eq!(db["status"], "warn", "{db}");
    let detail = db["detail"].as_str().unwrap();
    assert!(
        detail.contains(&format!("schema v{}", supported - 1))
            && detail.contains(&format!("to v{supported}"))
            && detail.contains("1 pending migration"),
        "{detail}"
    );
    assert!(
        db["hint"].as_str().unwrap().contains("gaffer backup"),
        "{db}"
    );
    assert_eq!(std::fs::read(home.db()).unwrap(), before, "doctor migrated");

    // The new binary opens, migrates and verifies it.
    let (verify, tasks) = verified_tasks(&home, &home.data());
    assert_eq!(verify["broken"], Value::Null);
    assert_eq!(tasks.len(), 3, "{tasks:?}");
    let out = home.gaffer().args(["doctor", "--json"]).output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let db = super::cli::doctor_check(&report, "database");
    assert_eq!(db["status"], "ok", "{db}");
    assert!(
        db["detail"]
            .as_str()
            .unwrap()
            .contains(&format!("schema v{supported}")),
        "{db}"
    );
}
