//! `gaffer schedules`: the configured schedules with their next run in local time
//! and the task their last slot made; a teaching line when none is configured; exit
//! 78 naming the field on a bad one.

use super::support::Home;
use gaffer_core::{Actor, Event, StreamId, TaskOptions};
use gaffer_store::{Durability, Journal, NewEvent, SqliteJournal};
use pretty_assertions::assert_eq;
use serde_json::{json, Value};

const NEW_YEAR: &str = r#"
[[schedules]]
name = "new-year"
cron = "0 3 1 1 *"
tz = "Europe/Berlin"
project = "demo"
request = "Bump the copyright year"
missed = "run_once"

[[schedules]]
name = "idle"
cron = "*/5 * * * *"
project = "demo"
request = "Look at the logs"
"#;

/// What the scheduler records for `slot` of `schedule`: a task keyed by the slot.
fn slot_task(home: &Home, id: &str, schedule: &str, slot: &str) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let j = SqliteJournal::open(&home.db(), Durability::Normal)
            .await
            .unwrap();
        j.append(
            &StreamId::from(id),
            0,
            vec![NewEvent::now(Event::TaskCreated {
                task_id: id.into(),
                project_id: "p-demo".into(),
                request: "Bump the copyright year".into(),
                by: Actor::system(&format!("schedule:{schedule}")),
                options: TaskOptions {
                    key: Some(format!("schedule:{schedule}:{slot}")),
                    ..TaskOptions::default()
                },
            })],
        )
        .await
        .unwrap();
        j.close().await;
    });
}

/// The next 1 January, 03:00 in Berlin (02:00 UTC), as `zone` shows it.
fn next_new_year(zone: &str) -> String {
    let now = jiff::Timestamp::now();
    let berlin = jiff::tz::TimeZone::get("Europe/Berlin").unwrap();
    let this_year = now.to_zoned(berlin.clone()).year();
    let slot = (this_year..=this_year + 1)
        .map(|y| {
            jiff::civil::date(y, 1, 1)
                .at(3, 0, 0, 0)
                .to_zoned(berlin.clone())
                .unwrap()
                .timestamp()
        })
        .find(|t| *t > now)
        .unwrap();
    slot.to_zoned(jiff::tz::TimeZone::get(zone).unwrap())
        .strftime("%a %Y-%m-%d %H:%M %Z")
        .to_string()
}

#[test]
fn schedules_show_the_next_run_in_local_time_and_the_last_task_with_its_stage() {
    let home = Home::new();
    home.seed();
    home.write_config(NEW_YEAR);
    slot_task(
        &home,
        "t-0193000a-new-year-1",
        "new-year",
        "2025-01-01T02:00:00Z",
    );
    slot_task(
        &home,
        "t-0193000b-new-year-2",
        "new-year",
        "2026-01-01T02:00:00Z",
    );
    let out = home
        .gaffer()
        .env("TZ", "Asia/Tokyo")
        .arg("schedules")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    let header: Vec<&str> = lines[0]
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(
        header,
        ["NAME", "CRON", "PROJECT", "NEXT RUN", "LAST TASK"],
        "{text}"
    );
    // 03:00 in Berlin is 11:00 in Tokyo; the newest slot's task, by its short id.
    let new_year = lines[1];
    assert!(new_year.starts_with("new-year "), "{text}");
    assert!(new_year.contains("0 3 1 1 * Europe/Berlin"), "{text}");
    assert!(new_year.contains(" demo "), "{text}");
    let next = next_new_year("Asia/Tokyo");
    assert!(next.contains(" 11:00 JST"), "{next}");
    assert!(new_year.contains(&format!("{next} (in ")), "{text}");
    assert!(new_year.ends_with("t-0193000b queued"), "{text}");
    let idle = lines[2];
    assert!(idle.starts_with("idle "), "{text}");
    assert!(idle.contains("*/5 * * * *  "), "{text}");
    assert!(idle.ends_with("none yet"), "{text}");
    // Within five minutes.
    assert!(
        ["(in 0s", "(in 1", "(in 2", "(in 3", "(in 4", "(in 5"]
            .iter()
            .any(|s| idle.contains(s)),
        "{text}"
    );

    let out = home
        .gaffer()
        .args(["schedules", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let mut shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    let next_slot = shown[0]["next_slot"].as_str().unwrap().to_owned();
    assert!(next_slot.ends_with("-01-01T02:00:00Z"), "{next_slot}");
    for s in shown.as_array_mut().unwrap() {
        let s = s.as_object_mut().unwrap();
        assert!(s.remove("next_at").unwrap().as_i64().unwrap() > 0);
        s.remove("next_slot");
        if let Some(Value::Object(t)) = s.get_mut("last_task") {
            assert!(t.remove("created_at").unwrap().is_i64());
        }
    }
    assert_eq!(
        shown,
        json!([
            {
                "name": "new-year", "source": "config", "created_by": null, "created_at": null,
                "cron": "0 3 1 1 *", "tz": "Europe/Berlin", "project": "demo",
                "request": "Bump the copyright year", "agent": null, "missed": "run_once",
                "last_slot": "2026-01-01T02:00:00Z",
                "last_task": { "id": "t-0193000b-new-year-2", "stage": "queued" },
            },
            {
                "name": "idle", "source": "config", "created_by": null, "created_at": null,
                "cron": "*/5 * * * *", "tz": "UTC", "project": "demo",
                "request": "Look at the logs", "agent": null, "missed": "skip",
                "last_slot": null, "last_task": null,
            },
        ])
    );
}

#[test]
fn without_schedules_it_says_how_to_add_one_and_opens_no_journal() {
    let home = Home::new();
    home.write_config("");
    let out = home.gaffer().arg("schedules").output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with(&format!(
            "No schedule is configured in {} or added with `gaffer schedules add`.",
            home.config().display()
        )),
        "{text}"
    );
    for line in [
        "  [[schedules]]",
        "  cron = \"0 3 * * *\"",
        "  project = \"myapp\"",
        "restart `gaffer serve`",
    ] {
        assert!(text.contains(line), "{line} missing from:\n{text}");
    }
    assert!(
        !home.db().exists(),
        "listing no schedule created the journal"
    );
    let out = home
        .gaffer()
        .args(["schedules", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        serde_json::from_slice::<Value>(&out.stdout).unwrap(),
        json!([])
    );
}

/// A schedule added at run time is in the journal, not the config: the listing
/// finds it there even when the config has none.
#[test]
fn a_schedule_added_with_an_empty_config_is_listed() {
    let home = Home::new();
    home.seed();
    let out = home.gaffer().arg("schedules").output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("No schedule is configured in "), "{text}");
    let out = home
        .gaffer()
        .args([
            "schedules",
            "add",
            "nightly",
            "--cron",
            "0 3 * * *",
            "--project",
            "demo",
            "--request",
            "Tidy the logs",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let out = home.gaffer().arg("schedules").output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("NAME"), "{text}");
    assert!(
        text.contains("nightly") && text.contains("0 3 * * *"),
        "{text}"
    );
    let out = home
        .gaffer()
        .args(["schedules", "--json"])
        .output()
        .unwrap();
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (
            &listed[0]["name"],
            &listed[0]["source"],
            listed.as_array().unwrap().len()
        ),
        (&json!("nightly"), &json!("api"), 1)
    );
}

/// A bad option of `schedules add` exits 2 naming the option once, with what to do,
/// and adds nothing.
#[test]
fn a_bad_schedule_option_exits_2_naming_the_option_and_adds_nothing() {
    let home = Home::new();
    home.seed();
    let add = |cron: &str, project: &str| {
        let out = home
            .gaffer()
            .args(["schedules", "add", "nightly", "--cron", cron])
            .args(["--project", project, "--request", "Tidy the logs"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        String::from_utf8(out.stderr).unwrap()
    };
    let err = add("nope", "demo");
    assert!(
        err.starts_with("gaffer: --cron: `nope` has 1 fields; write 5"),
        "{err}"
    );
    let err = add("0 3 * * *", "nosuch");
    assert!(
        err.starts_with("gaffer: --project: `nosuch` is not registered; `gaffer project list`"),
        "{err}"
    );
    let out = home
        .gaffer()
        .args(["schedules", "--json"])
        .output()
        .unwrap();
    assert_eq!(
        serde_json::from_slice::<Value>(&out.stdout).unwrap(),
        json!([])
    );
}

#[test]
fn a_bad_schedule_exits_78_naming_the_field() {
    let home = Home::new();
    home.write_config(&NEW_YEAR.replace("0 3 1 1 *", "0 25 * * *"));
    let out = home.gaffer().arg("schedules").output().unwrap();
    assert_eq!(out.status.code(), Some(78), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("schedules.new-year.cron"), "{err}");
    assert!(out.stdout.is_empty());
}

const INTAKE: &str = r#"
[projects.web.forge]
kind = "gitea"
base_url = "https://git.example.com"

[projects.web.intake]
assignee = "gaffer-bot"
secret_env = "WEB_HOOK_SECRET"
poll_interval = "5m"

[projects.api.forge]
kind = "github"

[projects.api.intake]
label = "ai"
secret_env = "API_HOOK_SECRET"

[projects.docs.forge]
kind = "gitlab"

[[schedules]]
name = "nightly"
cron = "0 3 * * *"
project = "demo"
request = "Update the dependencies"

[[schedules]]
name = "orphan"
cron = "@hourly"
project = "ghost"
request = "Look at the logs"
"#;

const WEB_SECRET: &str = "0123456789abcdef-web-hook-secret";

#[test]
fn doctor_names_each_projects_intake_and_each_schedules_next_slot_and_problem() {
    use super::cli::doctor_check;
    let home = Home::new();
    home.seed();
    home.write_config(INTAKE);
    let out = home
        .gaffer()
        .env("WEB_HOOK_SECRET", WEB_SECRET)
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    // A failing check (api's secret, the ghost project) exits 78.
    assert_eq!(out.status.code(), Some(78), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        !text.contains(WEB_SECRET),
        "the doctor printed a webhook secret"
    );
    let report: Value = serde_json::from_str(&text).unwrap();
    let web = doctor_check(&report, "intake web");
    assert_eq!(web["status"], "ok", "{web}");
    assert_eq!(
        web["detail"],
        "issues labelled \"gaffer\" or assigned to gaffer-bot; polled every 5m; webhook at POST /api/hooks/gitea on `gaffer serve`, secret in WEB_HOOK_SECRET"
    );
    let api = doctor_check(&report, "intake api");
    assert_eq!(api["status"], "fail", "{api}");
    assert_eq!(
        api["detail"],
        "issues labelled \"ai\"; not polled; webhook secret: API_HOOK_SECRET is not set"
    );
    assert!(
        api["hint"]
            .as_str()
            .unwrap()
            .contains("put the secret you gave the forge's webhook in API_HOOK_SECRET"),
        "{api}"
    );
    let docs = doctor_check(&report, "intake docs");
    assert_eq!(docs["status"], "ok", "{docs}");
    assert!(
        docs["detail"]
            .as_str()
            .unwrap()
            .starts_with("not configured"),
        "{docs}"
    );
    assert!(
        docs["hint"]
            .as_str()
            .unwrap()
            .contains("[projects.docs.intake]"),
        "{docs}"
    );

    let nightly = doctor_check(&report, "schedule nightly");
    assert_eq!(nightly["status"], "ok", "{nightly}");
    let detail = nightly["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("\"0 3 * * *\" (UTC) in project demo; next ")
            && detail.contains("T03:00:00Z (in "),
        "{detail}"
    );
    let orphan = doctor_check(&report, "schedule orphan");
    assert_eq!(orphan["status"], "fail", "{orphan}");
    assert!(
        orphan["detail"]
            .as_str()
            .unwrap()
            .contains("ghost is not a registered project"),
        "{orphan}"
    );
    assert!(
        orphan["hint"]
            .as_str()
            .unwrap()
            .contains("fix schedules.orphan.project"),
        "{orphan}"
    );

    // The same as text: each problem with its fix under it.
    let out = home
        .gaffer()
        .env("WEB_HOOK_SECRET", "short")
        .arg("doctor")
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let at = |start: &str| {
        lines
            .iter()
            .position(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("no line {start}:\n{text}"))
    };
    let web = at("FAIL  intake web");
    assert!(
        lines[web].contains("webhook secret in WEB_HOOK_SECRET is shorter than 16 characters"),
        "{text}"
    );
    assert!(
        lines[web + 1]
            .trim_start()
            .starts_with("→ `gaffer serve` will not start"),
        "{text}"
    );
    let orphan = at("FAIL  schedule orphan");
    assert!(
        lines[orphan + 1].contains("gaffer project add PATH --name ghost"),
        "{text}"
    );
    assert!(at("ok    schedule nightly") > 0);
    assert!(
        !text.contains("short\n") && !text.contains(" short "),
        "{text}"
    );
}
