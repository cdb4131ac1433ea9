//! `[[schedules]]`: parsing, slot times, and what a bad entry is told.
use super::load::load_text;
use gaffer_config::*;
use pretty_assertions::assert_eq;

fn ms(rfc3339: &str) -> i64 {
    rfc3339.parse::<jiff::Timestamp>().unwrap().as_millisecond()
}

fn one(entry: &str) -> Schedule {
    let c = load_text(&format!("[[schedules]]\n{entry}"), &[]).unwrap();
    assert_eq!(c.schedules.len(), 1);
    c.schedules.into_iter().next().unwrap()
}

fn error_of(entry: &str) -> (String, String) {
    match load_text(&format!("[[schedules]]\n{entry}"), &[]) {
        Err(ConfigError::Invalid { field, message, .. }) => (field, message),
        other => panic!("expected an invalid field, got {other:?}"),
    }
}

const BASE: &str = "name = \"nightly\"\nproject = \"demo\"\nrequest = \"update the deps\"\n";

#[test]
fn a_schedule_resolves_with_utc_and_skip_by_default() {
    let s = one(&format!("{BASE}cron = \"0 3 * * *\"\nagent = \"codex\"\n"));
    assert_eq!(
        (
            s.name.as_str(),
            s.cron.as_str(),
            s.tz.as_str(),
            s.project.as_str(),
            s.request.as_str()
        ),
        ("nightly", "0 3 * * *", "UTC", "demo", "update the deps")
    );
    assert_eq!(
        (s.agent.as_deref(), s.missed),
        (Some("codex"), Missed::Skip)
    );
    let t = one(&format!(
        "{BASE}cron = \"0 3 * * *\"\nmissed = \"run_once\"\n"
    ));
    assert_eq!(t.missed, Missed::RunOnce);
}

#[test]
fn slots_follow_the_cron_expression_in_its_time_zone() {
    let s = one(&format!("{BASE}cron = \"0 3 * * *\"\n"));
    let at = ms("2026-03-10T12:00:00Z");
    assert_eq!(s.next_after(at), Some(ms("2026-03-11T03:00:00Z")));
    assert_eq!(s.latest_until(at), Some(ms("2026-03-10T03:00:00Z")));
    // A slot is its own latest, and the next one is strictly after it.
    let slot = ms("2026-03-10T03:00:00Z");
    assert_eq!(s.latest_until(slot), Some(slot));
    assert_eq!(s.next_after(slot), Some(ms("2026-03-11T03:00:00Z")));
    assert_eq!(s.slot_key(slot), "schedule:nightly:2026-03-10T03:00:00Z");
    assert_eq!(
        s.slot_of_key("schedule:nightly:2026-03-10T03:00:00Z"),
        Some(slot)
    );
    assert_eq!(s.slot_of_key("schedule:other:2026-03-10T03:00:00Z"), None);

    // 03:00 in Berlin is 02:00 UTC in winter and 01:00 UTC in summer.
    let b = one(&format!(
        "{BASE}cron = \"0 3 * * *\"\ntz = \"Europe/Berlin\"\n"
    ));
    assert_eq!(
        b.next_after(ms("2026-01-10T12:00:00Z")),
        Some(ms("2026-01-11T02:00:00Z"))
    );
    assert_eq!(
        b.next_after(ms("2026-07-10T12:00:00Z")),
        Some(ms("2026-07-11T01:00:00Z"))
    );

    // Six fields: seconds first.
    let e = one(&format!("{BASE}cron = \"*/5 * * * * *\"\n"));
    assert_eq!(
        e.next_after(ms("2026-03-10T12:00:01.500Z")),
        Some(ms("2026-03-10T12:00:05Z"))
    );
    assert_eq!(
        e.latest_until(ms("2026-03-10T12:00:09.900Z")),
        Some(ms("2026-03-10T12:00:05Z"))
    );
}

#[test]
fn a_bad_entry_names_its_field_and_value() {
    let cases: &[(&str, &str, &str)] = &[
        ("name = \"nightly\"\nproject = \"demo\"\nrequest = \"r\"\ncron = \"61 * * * *\"\n", "schedules.nightly.cron", "`61 * * * *`"),
        ("name = \"nightly\"\nproject = \"demo\"\nrequest = \"r\"\ncron = \"* * *\"\n", "schedules.nightly.cron", "3 fields"),
        ("name = \"nightly\"\nproject = \"demo\"\nrequest = \"r\"\ncron = \"0 0 1 1 * 2030\"\n", "schedules.nightly.cron", "`0 0 1 1 * 2030`"),
        ("name = \"nightly\"\nproject = \"demo\"\nrequest = \"r\"\n", "schedules.nightly.cron", "``"),
        ("name = \"nightly\"\nproject = \"demo\"\nrequest = \"r\"\ncron = \"0 3 * * *\"\ntz = \"Mars/Olympus\"\n", "schedules.nightly.tz", "`Mars/Olympus`"),
        ("name = \"nightly\"\nproject = \"demo\"\nrequest = \"r\"\ncron = \"0 3 * * *\"\nmissed = \"all\"\n", "schedules.nightly.missed", "`all`"),
        ("name = \"nightly\"\nrequest = \"r\"\ncron = \"0 3 * * *\"\n", "schedules.nightly.project", "missing"),
        ("name = \"nightly\"\nproject = \"demo\"\nrequest = \" \"\ncron = \"0 3 * * *\"\n", "schedules.nightly.request", "missing"),
        ("name = \"nightly\"\nproject = \"demo\"\nrequest = \"r\"\ncron = \"0 3 * * *\"\nagent = \"acp:nope\"\n", "schedules.nightly.agent", "nope"),
        ("name = \"two words\"\nproject = \"demo\"\nrequest = \"r\"\ncron = \"0 3 * * *\"\n", "schedules[0].name", "`two words`"),
    ];
    for (entry, field, shown) in cases {
        let (f, message) = error_of(entry);
        assert_eq!(&f, field, "{entry}");
        assert!(message.contains(shown), "{entry}: {message}");
    }
    let twice = format!(
        "[[schedules]]\n{BASE}cron = \"0 3 * * *\"\n[[schedules]]\n{BASE}cron = \"0 4 * * *\"\n"
    );
    match load_text(&twice, &[]) {
        Err(ConfigError::Invalid { field, message, .. }) => {
            assert_eq!(field, "schedules[1].name");
            assert!(message.contains("two schedules"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}
