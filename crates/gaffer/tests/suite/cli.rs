use super::support::Home;
use predicates::prelude::*;
use serde_json::Value;

#[test]
fn version_prints_the_crate_version_and_the_commit() {
    let out = Home::new().gaffer().arg("--version").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    let head = std::process::Command::new("git")
        .args(["log", "-1", "--format=%h", "--abbrev=10"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let head = String::from_utf8_lossy(&head.stdout);
    assert!(
        text.starts_with(&format!(
            "gaffer {} ({}",
            env!("CARGO_PKG_VERSION"),
            head.trim()
        )),
        "{text}"
    );
}

#[test]
fn completions_and_the_manual_come_from_the_command_line_itself() {
    let home = Home::new();
    let bash = home
        .gaffer()
        .args(["completions", "bash"])
        .output()
        .unwrap();
    let bash = String::from_utf8_lossy(&bash.stdout);
    assert!(
        bash.contains("complete -F _gaffer") && bash.contains("approval"),
        "{bash}"
    );
    let zsh = home.gaffer().args(["completions", "zsh"]).output().unwrap();
    assert!(String::from_utf8_lossy(&zsh.stdout).starts_with("#compdef gaffer"));
    let man = home.gaffer().arg("man").output().unwrap();
    let man = String::from_utf8_lossy(&man.stdout);
    assert!(
        man.contains(".TH gaffer 1") && man.contains("completions"),
        "{man}"
    );
    let dir = home.dir.path().join("man1");
    home.gaffer().arg("man").arg(&dir).assert().success();
    for page in ["gaffer.1", "gaffer-run.1", "gaffer-task-show.1"] {
        assert!(dir.join(page).exists(), "{page} missing");
    }
}

#[test]
fn verbosity_flags_and_rust_log_choose_what_is_logged_without_colour_in_a_pipe() {
    let home = Home::new();
    home.seed();
    let stderr = |args: &[&str], env: &[(&str, &str)]| {
        let mut cmd = home.gaffer();
        cmd.args(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!out.stderr.contains(&0x1b), "colour in a pipe");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let quiet = stderr(&["task", "list"], &[]);
    assert!(!quiet.contains("DEBUG"), "{quiet}");
    for (args, env) in [
        (vec!["-vv", "task", "list"], vec![]),
        (vec!["task", "list"], vec![("RUST_LOG", "debug")]),
    ] {
        let logs = stderr(&args, &env);
        assert!(logs.contains("DEBUG"), "{args:?} {env:?}: {logs}");
    }
    let logs = stderr(&["-q", "task", "list"], &[("RUST_LOG", "debug")]);
    assert!(!logs.contains("DEBUG"), "-q over RUST_LOG: {logs}");
    // A level that is not one is refused, naming the field.
    home.write_config("[log]\nlevel = \"verbose\"\n");
    home.gaffer()
        .args(["task", "list"])
        .assert()
        .code(78)
        .stderr(predicate::str::contains("log.level").and(predicate::str::contains("verbose")));
}

#[test]
fn an_unknown_log_level_exits_78_naming_the_key_and_the_levels_and_creates_nothing() {
    let home = Home::new();
    home.write_config("[log]\nlevel = \"verbose\"\n");
    let work = home.dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    for args in [
        &["task", "list"][..],
        &["run", "add a README"],
        &["serve", "--listen", "127.0.0.1:0"],
        &["doctor"],
    ] {
        let out = home
            .gaffer()
            .args(args)
            .current_dir(&work)
            .output()
            .unwrap();
        // `doctor` reports it among its checks, on stdout; the others fail with it.
        let err = String::from_utf8_lossy(if args == ["doctor"] {
            &out.stdout
        } else {
            &out.stderr
        });
        assert_eq!(out.status.code(), Some(78), "{args:?}: {err}");
        for part in [
            "log.level",
            "`verbose`",
            "off, error, warn, info, debug, trace",
        ] {
            assert!(err.contains(part), "{args:?}: no {part:?} in {err}");
        }
    }
    // Refused before anything is opened: no data dir, no database, nothing in the
    // directory it ran in.
    assert!(!home.data().exists(), "the data dir was created");
    assert_eq!(std::fs::read_dir(&work).unwrap().count(), 0);
    let mut made: Vec<_> = std::fs::read_dir(home.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    made.sort();
    assert_eq!(made, ["config.toml", "work"]);
}

#[test]
fn a_usage_error_exits_2() {
    Home::new().gaffer().arg("frobnicate").assert().code(2);
    Home::new().gaffer().args(["task", "show"]).assert().code(2);
}

#[test]
fn init_writes_the_commented_template_and_will_not_overwrite() {
    let home = Home::new();
    home.gaffer().arg("init").assert().success();
    assert_eq!(
        std::fs::read_to_string(home.config()).unwrap(),
        gaffer_config::TEMPLATE
    );
    let policy = home.dir.path().join("policy.toml");
    assert_eq!(
        std::fs::read_to_string(&policy).unwrap(),
        gaffer_app::POLICY_TEMPLATE
    );
    home.gaffer()
        .arg("init")
        .assert()
        .code(78)
        .stderr(predicate::str::contains("--force"));
    home.gaffer().args(["init", "--force"]).assert().success();
}

#[test]
fn a_malformed_config_exits_78_naming_the_line() {
    let home = Home::new();
    home.write_config("[server]\nlisten = \"127.0.0.1:7777\"\n\n[workers]\ncount = \"two\n");
    home.gaffer()
        .args(["task", "list"])
        .assert()
        .code(78)
        .stderr(predicate::str::contains("config.toml:5:"));
}

#[test]
fn an_unknown_config_key_exits_78_naming_it() {
    let home = Home::new();
    home.write_config("[database]\nurll = \"x\"\n");
    home.gaffer()
        .args(["journal", "verify"])
        .assert()
        .code(78)
        .stderr(predicate::str::contains("config.toml:2:").and(predicate::str::contains("urll")));
}

#[test]
fn a_bad_notify_target_exits_78_naming_the_field() {
    let home = Home::new();
    for (target, field) in [
        (
            "name = \"ops\"\nkind = \"pager\"\nurl = \"https://h\"",
            "notify.ops.kind",
        ),
        ("name = \"ops\"\nkind = \"webhook\"", "notify.ops.url"),
        (
            "name = \"ops\"\nkind = \"webhook\"\nurl = \"not a url\"",
            "notify.ops.url",
        ),
        (
            "name = \"ops\"\nkind = \"webhook\"\nurl = \"https://h\"",
            "notify.ops.secret_env",
        ),
    ] {
        home.write_config(&format!("[[notify]]\n{target}\n"));
        home.gaffer()
            .args(["serve"])
            .env_remove("GAFFER_NOTIFY_OPS_SECRET")
            .assert()
            .code(78)
            .stderr(predicate::str::contains(format!("`{field}`")));
    }
}

#[test]
fn a_missing_named_config_exits_78_with_what_to_do() {
    let home = Home::new();
    home.gaffer()
        .args(["task", "list"])
        .assert()
        .code(78)
        .stderr(predicate::str::contains("gaffer init"));
}

#[test]
fn config_flag_and_data_dir_flag_win_over_the_environment() {
    let home = Home::new();
    home.seed();
    let other = tempfile::tempdir().unwrap();
    std::fs::write(other.path().join("c.toml"), "").unwrap();
    // The env points at the seeded data; the flag points at an empty dir.
    let out = home
        .gaffer()
        .args(["--config"])
        .arg(other.path().join("c.toml"))
        .arg("--data-dir")
        .arg(other.path().join("d"))
        .args(["task", "list", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let tasks: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(tasks, Value::Array(vec![]));
    assert!(other.path().join("d/gaffer.db").exists());
}

#[test]
fn task_list_and_show_read_the_journal() {
    let home = Home::new();
    home.seed();
    let out = home
        .gaffer()
        .args(["task", "list", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tasks: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let mut ids: Vec<_> = tasks
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    assert_eq!(ids, ["t-one", "t-two"]);
    assert_eq!(tasks[0]["created_by"]["name"], "ana");

    let out = home
        .gaffer()
        .args(["task", "show", "t-two", "--json"])
        .output()
        .unwrap();
    let view: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(view["task"]["request"], "fix the flaky retry test");
    assert_eq!(view["task"]["stage"], "queued");
    assert_eq!(view["head_seq"], 2);
    assert_eq!(view["steps"][0]["step_id"], "plan");
    assert_eq!(view["steps"][0]["intent"], "read_only");
    assert_eq!(
        view["steps"][0]["input"]["request"],
        "fix the flaky retry test"
    );

    home.gaffer()
        .args(["task", "show", "t-one"])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("add an installation section")
                .and(predicate::str::contains("plan")),
        );
    home.gaffer()
        .args(["task", "list", "--stage", "done"])
        .assert()
        .success()
        .stdout(predicate::str::contains("no tasks"));
}

#[test]
fn an_unknown_task_id_exits_1_with_a_clear_message() {
    let home = Home::new();
    home.seed();
    home.gaffer()
        .args(["task", "show", "t-nope"])
        .assert()
        .code(1)
        .stderr(
            predicate::str::contains("no task `t-nope`")
                .and(predicate::str::contains("gaffer task list")),
        );
}

#[test]
fn journal_verify_passes_then_finds_a_tampered_byte() {
    let home = Home::new();
    home.seed();
    home.gaffer()
        .args(["journal", "verify"])
        .assert()
        .success()
        .stdout(predicate::str::contains("5 events in 3 streams"));
    let mut bytes = std::fs::read(home.db()).unwrap();
    // Only task_created (seq 1) carries the task id in its payload.
    let needle = br#""task_id":"t-two""#;
    let at = bytes
        .windows(needle.len())
        .position(|w| w == needle)
        .unwrap();
    bytes[at + needle.len() - 2] = b'p';
    std::fs::write(home.db(), bytes).unwrap();
    home.gaffer()
        .args(["journal", "verify"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("stream t-two seq 1"));
    let out = home
        .gaffer()
        .args(["journal", "verify", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["broken"]["stream"], "t-two");
    assert_eq!(report["broken"]["seq"], 1);
}

/// `journal verify` checks the columns the hash does not cover (`type`) and runs
/// SQLite's own `quick_check`; `--json` says what failed where.
#[test]
fn journal_verify_finds_a_changed_type_column_and_a_flipped_header_byte() {
    let home = Home::new();
    home.seed();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        use sqlx::Connection;
        let url = format!("sqlite://{}", home.db().display());
        let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
        sqlx::raw_sql(
            "DROP TRIGGER events_no_update;
             UPDATE events SET type = 'task_done' WHERE stream_id = 't-two' AND seq = 1;
             CREATE TRIGGER events_no_update BEFORE UPDATE ON events
             BEGIN SELECT RAISE(ABORT, 'journal events are append-only'); END;",
        )
        .execute(&mut conn)
        .await
        .unwrap();
        conn.close().await.unwrap();
    });
    home.gaffer()
        .args(["journal", "verify"])
        .assert()
        .code(1)
        .stderr(
            predicate::str::contains("stream t-two seq 1")
                .and(predicate::str::contains("column type"))
                .and(predicate::str::contains(
                    "type column says `task_done` but the payload is a `task_created` event",
                )),
        );
    let out = home
        .gaffer()
        .args(["journal", "verify", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["broken"]["stream"], "t-two");
    assert_eq!(report["broken"]["column"], "type");
    assert!(report["broken"]["pos"].as_i64().unwrap() > 0, "{report}");

    let home = Home::new();
    home.seed();
    let mut bytes = std::fs::read(home.db()).unwrap();
    bytes[39] ^= 0x40; // the header's count of freelist pages
    std::fs::write(home.db(), bytes).unwrap();
    home.gaffer()
        .args(["journal", "verify"])
        .assert()
        .code(1)
        .stderr(
            predicate::str::contains("the database itself is damaged")
                .and(predicate::str::contains("quick_check: Freelist")),
        );
    let out = home
        .gaffer()
        .args(["journal", "verify", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["broken"]["stream"], "storage");
    assert!(
        report["broken"]["problem"]
            .as_str()
            .unwrap()
            .contains("Freelist"),
        "{report}"
    );
}

#[test]
fn a_database_from_a_newer_schema_is_refused_with_78_and_left_untouched() {
    let home = Home::new();
    home.seed();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        use sqlx::Connection;
        let url = format!("sqlite://{}", home.db().display());
        let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
        sqlx::query("INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) VALUES (424242, 'future', TRUE, X'00', 1)")
            .execute(&mut conn)
            .await
            .unwrap();
        conn.close().await.unwrap();
    });
    let before = std::fs::read(home.db()).unwrap();
    home.gaffer()
        .args(["task", "list"])
        .assert()
        .code(78)
        .stderr(
            predicate::str::contains("schema version 424242")
                .and(predicate::str::contains("upgrade gaffer")),
        );
    assert_eq!(std::fs::read(home.db()).unwrap(), before);
}

/// The check called `name` in a `gaffer doctor --json` report.
pub fn doctor_check(report: &Value, name: &str) -> Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("no check {name}: {report:#}"))
}

#[test]
fn doctor_reports_agents_and_keys_without_showing_key_values() {
    let home = Home::new();
    home.write_config("");
    let fake = home.dir.path().join("claude-bin");
    std::fs::write(&fake, "#!/bin/sh\necho fake\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = home
        .gaffer()
        .env("GAFFER_CLAUDE_BIN", &fake)
        .env("ANTHROPIC_API_KEY", "sk-ant-very-secret-value")
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("very-secret"), "doctor printed a key value");
    let report: Value = serde_json::from_str(&text).unwrap();
    let by_name = |n: &str| doctor_check(&report, n);
    assert_eq!(by_name("claude")["status"], "ok");
    assert_eq!(by_name("ANTHROPIC_API_KEY")["status"], "ok");
    assert_eq!(by_name("OPENAI_API_KEY")["status"], "warn");
    assert!(by_name("OPENAI_API_KEY")["hint"]
        .as_str()
        .unwrap()
        .contains("export OPENAI_API_KEY"));
    assert_eq!(by_name("database")["status"], "ok");
}

/// A role played by a declared ACP agent is checked against its declaration (the
/// command it names), not against an executable called like the agent.
#[test]
fn doctor_checks_a_declared_acp_agent_by_its_command() {
    let home = Home::new();
    let fake = home.dir.path().join("my-acp-agent");
    std::fs::write(&fake, "#!/bin/sh\nexit 0\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let missing = home.dir.path().join("not-installed-agent");
    home.write_config(&format!(
        "[agents.acp.mine]\ncommand = \"{}\"\n[agents.acp.gone]\ncommand = \"{}\"\n\
         [roles.planner]\nagent = \"acp:mine\"\n[roles.reviewer]\nagent = \"acp:gone\"\n",
        fake.display(),
        missing.display()
    ));
    let fake_claude = home.dir.path().join("claude-bin");
    std::fs::copy(&fake, &fake_claude).unwrap();
    let out = home
        .gaffer()
        .env("GAFFER_CLAUDE_BIN", &fake_claude)
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let by_name = |n: &str| doctor_check(&report, n);
    let mine = by_name("roles: acp:mine");
    assert_eq!(mine["status"], "ok", "{mine}");
    let gone = by_name("roles: acp:gone");
    assert_eq!(gone["status"], "warn", "{gone}");
    let detail = gone["detail"].as_str().unwrap();
    assert!(
        detail.contains("roles.reviewer") && detail.contains("not-installed-agent"),
        "{detail}"
    );
}

#[test]
fn doctor_exits_78_when_no_task_can_run_and_creates_nothing() {
    let home = Home::new();
    home.write_config("");
    let out = home.gaffer().args(["doctor", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(78));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let agents = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "agents")
        .cloned()
        .unwrap();
    assert_eq!(agents["status"], "fail", "{agents}");
    assert!(agents["detail"]
        .as_str()
        .unwrap()
        .contains("no task can run"));
    assert!(
        !home.data().exists(),
        "the doctor created {}",
        home.data().display()
    );
}

#[test]
fn doctor_exits_78_when_the_config_is_broken() {
    let home = Home::new();
    home.write_config("[log\n");
    home.gaffer()
        .arg("doctor")
        .assert()
        .code(78)
        .stdout(predicate::str::contains("FAIL").and(predicate::str::contains("config.toml:1:")));
}

#[test]
fn doctor_reports_the_kernels_landlock_against_the_sandbox_mode() {
    let support = gaffer_agents::sandbox::support();
    let home = Home::new();
    let agent = home.dir.path().join("claude-bin");
    std::fs::write(&agent, "#!/bin/sh\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    for (config, expected) in [
        ("[sandbox]\nmode = \"off\"\n", "warn"),
        (
            "[sandbox]\nmode = \"required\"\n",
            if support.filesystem() { "ok" } else { "fail" },
        ),
        (
            "[sandbox]\nmode = \"auto\"\n",
            if support.filesystem() { "ok" } else { "warn" },
        ),
    ] {
        home.write_config(config);
        let out = home
            .gaffer()
            .env("GAFFER_CLAUDE_BIN", &agent)
            .args(["doctor", "--json"])
            .output()
            .unwrap();
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        let sandbox = report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "sandbox")
            .cloned()
            .unwrap();
        assert_eq!(sandbox["status"], expected, "{config}: {sandbox}");
        let detail = sandbox["detail"].as_str().unwrap();
        assert!(detail.contains("Landlock"), "{detail}");
        if let Some(abi) = support.abi {
            if expected != "fail" {
                assert!(detail.contains(&format!("ABI {abi}")), "{detail}");
            }
        }
        assert_eq!(
            out.status.code(),
            Some(if expected == "fail" { 78 } else { 0 }),
            "{config}"
        );
    }
}

#[test]
fn audit_prints_who_decided_what_and_from_where() {
    let home = Home::new();
    home.seed();
    home.gaffer()
        .env("USER", "zoe")
        .args(["task", "cancel", "t-two"])
        .assert()
        .success();
    let out = home
        .gaffer()
        .args(["audit", "--task", "t-two", "--json"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let trail: Value = serde_json::from_slice(&out.stdout).unwrap();
    let seen: Vec<(&str, &str, &str)> = trail
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["action"].as_str().unwrap(),
                e["by"]["name"].as_str().unwrap(),
                e["by"]["via"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            ("task_created", "ana", "cli"),
            ("task_cancelled", "zoe", "cli")
        ]
    );
    // Text: one line per decision; the whole journal also has t-one's creation.
    home.gaffer().arg("audit").assert().success().stdout(
        predicate::str::contains("zoe via cli")
            .and(predicate::str::contains("t-one"))
            .and(predicate::str::contains("task_cancelled")),
    );
    home.gaffer()
        .args(["audit", "--task", "t-nope"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("t-nope"));
}

#[test]
fn token_new_prints_the_secret_once_and_only_its_hash_for_the_policy() {
    let home = Home::new();
    let out = home
        .gaffer()
        .args(["token", "new", "phone", "--role", "approver", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let t: Value = serde_json::from_slice(&out.stdout).unwrap();
    let secret = t["secret"].as_str().unwrap();
    assert!(secret.len() >= 32, "{secret}");
    assert_eq!(
        t["secret_sha256"].as_str().unwrap(),
        gaffer_server::auth::token_sha256(secret)
    );
    // The printed entry is what the server accepts, and the secret logs in with it.
    let text = home.gaffer().args(["token", "new", "ci"]).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    let entry = &text[text.find("[[tokens]]").unwrap()..];
    let policy = gaffer_app::Policy::parse(entry).unwrap();
    assert!(!entry.contains("secret ="), "{entry}");
    let config = gaffer_server::ServerConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        gaffer_server::LocalSecret::generate("ana"),
    )
    .with_policy_tokens(&policy, &|_| None)
    .unwrap();
    let secret = text.lines().nth(1).unwrap().trim();
    let found = gaffer_server::auth::find_token_pub(&config.tokens, secret).unwrap();
    assert_eq!(
        (found.name.as_str(), found.role),
        ("ci", gaffer_server::auth::Role::Viewer)
    );
}

#[test]
fn a_worker_with_no_slots_exits_78_and_workers_lists_none_on_a_fresh_journal() {
    let home = Home::new();
    home.seed();
    home.gaffer()
        .args(["worker", "--count", "0"])
        .assert()
        .code(78)
        .stderr(predicate::str::contains("--count"));
    home.gaffer()
        .args(["workers"])
        .assert()
        .success()
        .stdout(predicate::str::contains("no live workers"));
    home.gaffer()
        .args(["workers", "--json"])
        .assert()
        .success()
        .stdout("[]\n");
}

#[test]
fn login_link_makes_the_private_local_secret_once_and_prints_a_link_to_the_configured_server() {
    let home = Home::new();
    home.write_config("[server]\nlisten = \"127.0.0.1:7788\"\n");
    let out = home
        .gaffer()
        .args(["login-link", "--json"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let link = v["link"].as_str().unwrap();
    assert!(
        link.starts_with("http://127.0.0.1:7788/login?code="),
        "{link}"
    );
    let file = std::path::PathBuf::from(v["secret_file"].as_str().unwrap());
    assert_eq!(file, home.data().join("local-secret"));
    let secret = std::fs::read_to_string(&file).unwrap();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // The link carries no secret, and a second run keeps the same secret.
    assert!(!link.contains(secret.trim()));
    let text = home
        .gaffer()
        .args(["login-link", "--listen", "0.0.0.0:9000"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("http://127.0.0.1:9000/login?code="), "{text}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), secret);
}
