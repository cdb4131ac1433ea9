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

/// The `Key=value` lines of a unit file's `[section]`.
fn unit_section<'a>(unit: &'a str, section: &str) -> Vec<(&'a str, &'a str)> {
    let header = format!("[{section}]");
    unit.lines()
        .skip_while(|l| *l != header)
        .skip(1)
        .take_while(|l| !l.starts_with('['))
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            l.split_once('=')
                .unwrap_or_else(|| panic!("not Key=value: {l}"))
        })
        .collect()
}

fn value<'a>(lines: &[(&'a str, &'a str)], key: &str) -> Vec<&'a str> {
    lines
        .iter()
        .filter(|(k, _)| *k == key)
        .map(|(_, v)| *v)
        .collect()
}

#[test]
fn service_install_without_systemd_prints_the_unit_and_installs_nothing() {
    if std::path::Path::new("/run/systemd/system").exists() {
        eprintln!("systemd runs here: this test is for machines without it");
        return;
    }
    let home = Home::new();
    home.write_config("");
    for (worker, name, command) in [
        (false, "gaffer-serve", "serve"),
        (true, "gaffer-worker", "worker"),
    ] {
        let mut cmd = home.gaffer();
        cmd.args(["--db", "postgres://gaffer:s3cret-pw@db:5432/gaffer"])
            .args(["service", "install", "--user"]);
        if worker {
            cmd.arg("--worker");
        }
        let out = cmd.output().unwrap();
        assert_eq!(out.status.code(), Some(78));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("systemd is not running") && err.contains("nothing was installed"),
            "{err}"
        );
        assert!(
            err.contains(&format!(".config/systemd/user/{name}.service")),
            "{err}"
        );
        let unit = String::from_utf8(out.stdout).unwrap();
        assert!(
            !unit.contains("s3cret-pw"),
            "a database password in the unit:\n{unit}"
        );
        let service = unit_section(&unit, "Service");
        let exec = value(&service, "ExecStart");
        let bin = assert_cmd::cargo::cargo_bin("gaffer")
            .canonicalize()
            .unwrap();
        assert_eq!(
            exec,
            [format!(
                "\"{}\" \"--config\" \"{}\" \"--data-dir\" \"{}\" \"{command}\"",
                bin.display(),
                home.config().display(),
                home.data().display()
            )
            .as_str()],
            "{unit}"
        );
        assert_eq!(
            value(&service, "RestartPreventExitStatus"),
            ["78"],
            "{unit}"
        );
        assert_eq!(value(&service, "Restart"), ["on-failure"]);
        assert_eq!(value(&service, "RestartSec"), ["5s"]);
        assert_eq!(value(&service, "RestartSteps"), ["8"]);
        assert_eq!(value(&service, "RestartMaxDelaySec"), ["5min"]);
        assert_eq!(value(&service, "StandardOutput"), ["journal"]);
        assert_eq!(value(&service, "StandardError"), ["journal"]);
        assert_eq!(value(&service, "SyslogIdentifier"), [name]);
        assert_eq!(
            value(&service, "EnvironmentFile"),
            [format!("-{}", home.dir.path().join("env").display()).as_str()]
        );
        assert!(
            value(&service, "User").is_empty(),
            "a user unit names no User="
        );
        assert_eq!(
            value(&unit_section(&unit, "Install"), "WantedBy"),
            ["default.target"]
        );
        assert!(!value(&unit_section(&unit, "Unit"), "StartLimitBurst").is_empty());
        assert!(
            !home.dir.path().join(".config/systemd").exists(),
            "something was installed"
        );
        assert!(!home.dir.path().join("env").exists());
    }

    // A system unit runs as the installing user, and goes to /etc/systemd/system.
    let out = home
        .gaffer()
        .env("USER", "gafferd")
        .args(["service", "install", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(78));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["systemd"], false);
    assert_eq!(report["done"], false);
    assert_eq!(
        report["unit_path"],
        "/etc/systemd/system/gaffer-serve.service"
    );
    let unit = report["text"].as_str().unwrap();
    let service = unit_section(unit, "Service");
    assert_eq!(value(&service, "User"), ["gafferd"]);
    assert_eq!(
        value(&unit_section(unit, "Install"), "WantedBy"),
        ["multi-user.target"]
    );

    // Status and uninstall say what there is, and exit 78.
    for action in ["status", "uninstall"] {
        let out = home
            .gaffer()
            .args(["service", action, "--user"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(78), "{action}");
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(said.contains("gaffer-serve.service"), "{action}: {said}");
    }
}

/// The instructions of a Dockerfile (continuation lines joined, comments dropped)
/// as (INSTRUCTION, arguments).
fn dockerfile_instructions(text: &str) -> Vec<(String, String)> {
    let mut joined = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('#') || (t.is_empty() && current.is_empty()) {
            continue;
        }
        match t.strip_suffix('\\') {
            Some(part) => current.push_str(part),
            None => {
                current.push_str(t);
                joined.push(std::mem::take(&mut current));
            }
        }
    }
    joined
        .into_iter()
        .map(|l| {
            let (i, rest) = l.split_once(' ').unwrap_or((&l, ""));
            (i.to_ascii_uppercase(), rest.trim().to_owned())
        })
        .collect()
}

#[test]
fn the_dockerfile_builds_a_non_root_image_with_a_volume_and_a_health_check() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let all = dockerfile_instructions(&std::fs::read_to_string(root.join("Dockerfile")).unwrap());
    let froms: Vec<usize> = (0..all.len()).filter(|&i| all[i].0 == "FROM").collect();
    assert!(
        froms.len() >= 2,
        "multi-stage: a build stage and a runtime stage"
    );
    for &i in &froms {
        let image = all[i].1.split_whitespace().next().unwrap();
        assert!(
            image.contains(':') && !image.ends_with(":latest"),
            "base images are pinned to a tag: {image}"
        );
    }
    let build_stage = all[froms[0]]
        .1
        .split_whitespace()
        .last()
        .unwrap()
        .to_owned();
    let last = &all[*froms.last().unwrap()..];
    let get = |name: &str| -> Vec<&str> {
        last.iter()
            .filter(|(i, _)| i == name)
            .map(|(_, a)| a.as_str())
            .collect()
    };
    assert!(
        get("COPY")
            .iter()
            .any(|a| a.starts_with(&format!("--from={build_stage} "))),
        "the runtime stage copies the binary from the build stage"
    );
    assert!(!all[..*froms.last().unwrap()]
        .iter()
        .any(|(i, _)| i == "USER"));
    let users = get("USER");
    let user = users.last().expect("the runtime stage sets USER");
    let uid = user.split(':').next().unwrap();
    assert!(uid != "root" && uid != "0", "USER {user} is root");
    assert!(uid.parse::<u32>().is_ok(), "a numeric uid: USER {user}");
    let user_at = last.iter().rposition(|(i, _)| i == "USER").unwrap();
    assert!(
        last[user_at..].iter().all(|(i, _)| i != "RUN"),
        "nothing runs as root after USER"
    );
    assert!(
        get("VOLUME").iter().any(|v| v.contains("\"/data\"")),
        "{:?}",
        get("VOLUME")
    );
    let env = get("ENV").join(" ");
    assert!(env.contains("GAFFER_DATA_DIR=/data"), "{env}");
    assert!(env.contains("GAFFER_SERVER_LISTEN=0.0.0.0:7777"), "{env}");
    assert_eq!(get("EXPOSE"), ["7777"]);
    let health = get("HEALTHCHECK");
    assert_eq!(health.len(), 1);
    assert!(
        health[0].contains("http://127.0.0.1:7777/healthz"),
        "{}",
        health[0]
    );
    assert!(
        health[0].contains("--fail"),
        "a failing /healthz fails the check"
    );
    for run in get("RUN").iter().filter(|r| r.contains("apt-get install")) {
        assert!(
            run.contains("--no-install-recommends") && run.contains("rm -rf /var/lib/apt/lists"),
            "{run}"
        );
        for needed in ["git", "ca-certificates", "curl", "tini"] {
            assert!(
                run.split_whitespace().any(|w| w == needed),
                "{needed} is installed: {run}"
            );
        }
    }
    let entry = get("ENTRYPOINT");
    assert!(
        entry[0].contains("tini") && entry[0].contains("gaffer"),
        "{entry:?}"
    );

    let compose = std::fs::read_to_string(root.join("deploy/compose.yaml")).unwrap();
    for needed in [
        "image: postgres:",
        "GAFFER_DATABASE_URL: postgres://gaffer:${POSTGRES_PASSWORD",
        "condition: service_healthy",
        "command: [\"serve\", \"--workers\", \"0\"]",
        "command: [\"worker\"]",
        "- data:/data",
    ] {
        assert!(compose.contains(needed), "compose.yaml lacks {needed}");
    }
    assert!(
        !compose.contains("restart: on-failure\n"),
        "unbounded restarts on exit 78"
    );
}
