//! The journal on another database: `--db`, PostgreSQL URLs, `gaffer db copy`.

use super::run::success_json;
use super::support::Home;
use gaffer_testkit::postgres;
use serde_json::Value;

fn task_ids(home: &Home, db: &str) -> Vec<String> {
    let out = home
        .gaffer()
        .args(["--db", db, "task", "list", "--json"])
        .output()
        .unwrap();
    let mut ids: Vec<String> = success_json(&out)
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    ids
}

#[test]
fn db_copy_moves_a_journal_and_refuses_a_non_empty_target() {
    let home = Home::new();
    home.seed();
    let target = home.dir.path().join("copy.db").display().to_string();
    let out = home
        .gaffer()
        .args(["db", "copy", "--from"])
        .arg(home.db())
        .args(["--to", &target, "--json"])
        .output()
        .unwrap();
    let copied = success_json(&out);
    assert_eq!(copied["streams"], 3, "{copied}");
    let events = copied["events"].as_u64().unwrap();
    assert!(events >= 3, "{copied}");
    assert_eq!(task_ids(&home, &target), ["t-one", "t-two"]);

    // A second copy into the now non-empty target is refused, and changes nothing.
    let again = home
        .gaffer()
        .args(["db", "copy", "--from"])
        .arg(home.db())
        .args(["--to", &target])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(78));
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(err.contains("already holds events"), "{err}");
    let verify = home
        .gaffer()
        .args(["--db", &target, "journal", "verify", "--json"])
        .output()
        .unwrap();
    assert_eq!(success_json(&verify)["events"].as_u64(), Some(events));
}

#[test]
fn db_copy_from_a_missing_file_exits_78_and_creates_nothing() {
    let home = Home::new();
    home.write_config("");
    let missing = home.dir.path().join("nope.db");
    let target = home.dir.path().join("copy.db");
    let out = home
        .gaffer()
        .args(["db", "copy", "--from"])
        .arg(&missing)
        .arg("--to")
        .arg(&target)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(78));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no such file"));
    assert!(!missing.exists() && !target.exists());
}

#[test]
fn an_unreachable_database_exits_78_with_the_password_masked() {
    let home = Home::new();
    home.write_config("");
    // Port 1 on loopback: nothing listens there.
    let out = home
        .gaffer()
        .env(
            "GAFFER_DATABASE_URL",
            "postgres://gaffer:s3cret-pw@127.0.0.1:1/gaffer",
        )
        .args(["task", "list"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(78));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("postgres://gaffer:***@127.0.0.1:1/gaffer"),
        "{err}"
    );
    assert!(err.contains("reachable"), "{err}");
    assert!(!err.contains("s3cret-pw"), "the password leaked: {err}");
}

#[test]
fn a_database_url_of_an_unknown_kind_exits_78_naming_the_flag() {
    let home = Home::new();
    home.write_config("");
    let out = home
        .gaffer()
        .args(["--db", "mysql://root@localhost/gaffer", "task", "list"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(78));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--db") && err.contains("mysql"), "{err}");
    assert!(err.contains("postgres://"), "{err}");
}

#[test]
fn the_cli_runs_on_postgresql_after_a_copy() {
    if !postgres::available() {
        return;
    }
    let url = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(postgres::fresh_database());
    let home = Home::new();
    home.seed();
    let out = home
        .gaffer()
        .args(["db", "copy", "--from"])
        .arg(home.db())
        .args(["--to", &url, "--json"])
        .output()
        .unwrap();
    success_json(&out);
    assert_eq!(task_ids(&home, &url), ["t-one", "t-two"]);
    // The environment variable names it just as well, and every command works on it.
    let show = home
        .gaffer()
        .env("GAFFER_DATABASE_URL", &url)
        .args(["task", "show", "t-one", "--json"])
        .output()
        .unwrap();
    assert_eq!(
        success_json(&show)["task"]["request"],
        "add an installation section to README"
    );
    let verify = home
        .gaffer()
        .env("GAFFER_DATABASE_URL", &url)
        .args(["journal", "verify"])
        .output()
        .unwrap();
    assert!(
        verify.status.success(),
        "{}",
        String::from_utf8_lossy(&verify.stderr)
    );
    let doctor = home
        .gaffer()
        .args(["--db", &url, "doctor", "--json"])
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&doctor.stdout).unwrap();
    let database = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "database")
        .unwrap_or_else(|| panic!("{report}"))
        .clone();
    assert_eq!(database["status"], "ok", "{database}");
    assert!(
        database["detail"].as_str().unwrap().contains("2 tasks"),
        "{database}"
    );
    assert!(
        database["detail"]
            .as_str()
            .unwrap()
            .starts_with("postgres://"),
        "{database}"
    );
}
