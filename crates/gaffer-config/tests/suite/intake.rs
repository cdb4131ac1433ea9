//! `[projects.<name>.intake]`.
use gaffer_config::*;
use pretty_assertions::assert_eq;
use std::time::Duration;

use super::load::load_text;

const FORGE: &str =
    "[projects.web.forge]\nkind = \"gitea\"\nbase_url = \"https://git.example.com\"\n";

#[test]
fn intake_defaults_to_the_gaffer_label_and_polling_unless_a_webhook_is_set() {
    let c = load_text(&format!("{FORGE}[projects.web.intake]\n"), &[]).unwrap();
    assert_eq!(
        c.intake["web"],
        IntakeSettings {
            label: "gaffer".into(),
            assignee: None,
            secret_env: None,
            poll_interval: Some(Duration::from_secs(60)),
        }
    );
    let c = load_text(
        &format!("{FORGE}[projects.web.intake]\nlabel = \"ai\"\nassignee = \"gaffer-bot\"\nsecret_env = \"WEB_HOOK_SECRET\"\n"),
        &[],
    )
    .unwrap();
    assert_eq!(
        c.intake["web"],
        IntakeSettings {
            label: "ai".into(),
            assignee: Some("gaffer-bot".into()),
            secret_env: Some("WEB_HOOK_SECRET".into()),
            poll_interval: None,
        }
    );
    // Both: the poll catches what a lost delivery missed; the environment overrides.
    let c = load_text(
        &format!("{FORGE}[projects.web.intake]\nsecret_env = \"S\"\npoll_interval = \"5m\"\n"),
        &[("GAFFER_PROJECT_WEB_INTAKE_LABEL", "robot")],
    )
    .unwrap();
    assert_eq!(
        c.intake["web"].poll_interval,
        Some(Duration::from_secs(300))
    );
    assert_eq!(c.intake["web"].label, "robot");
    assert!(load_text(FORGE, &[]).unwrap().intake.is_empty());
}

#[test]
fn a_bad_intake_setting_names_the_field_and_what_to_write() {
    let cases = [
        (
            "[projects.web.intake]\n".to_owned(),
            "projects.web.intake",
            "[projects.web.forge]",
        ),
        (
            format!("{FORGE}[projects.web.intake]\nlabel = \"\"\n"),
            "projects.web.intake.label",
            "one label",
        ),
        (
            format!("{FORGE}[projects.web.intake]\nlabel = \"a,b\"\n"),
            "projects.web.intake.label",
            "no commas",
        ),
        (
            format!("{FORGE}[projects.web.intake]\nassignee = \"gaffer bot\"\n"),
            "projects.web.intake.assignee",
            "login",
        ),
        (
            format!("{FORGE}[projects.web.intake]\nsecret_env = \"s3cr3t-value!\"\n"),
            "projects.web.intake.secret_env",
            "not the secret itself",
        ),
        (
            format!("{FORGE}[projects.web.intake]\npoll_interval = \"2s\"\n"),
            "projects.web.intake.poll_interval",
            "at least 10s",
        ),
        (
            format!("{FORGE}[projects.web.intake]\npoll_interval = \"often\"\n"),
            "projects.web.intake.poll_interval",
            "\"off\"",
        ),
        (
            format!("{FORGE}[projects.web.intake]\npoll_interval = \"off\"\n"),
            "projects.web.intake.poll_interval",
            "secret_env",
        ),
        (
            format!("{FORGE}[projects.web.intake]\nlabels = [\"x\"]\n"),
            "labels",
            "unknown",
        ),
    ];
    for (text, field, hint) in cases {
        let err = load_text(&text, &[]).unwrap_err().to_string();
        assert!(err.contains(field), "{text}: {err}");
        assert!(err.contains(hint), "{text}: {err}");
        assert!(!err.contains("s3cr3t"), "a secret was echoed: {err}");
    }
    let err = load_text(
        &format!("{FORGE}[projects.web.intake]\n"),
        &[("GAFFER_PROJECT_WEB_INTAKE_POLL_INTERVAL", "1s")],
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("GAFFER_PROJECT_WEB_INTAKE_POLL_INTERVAL"),
        "{err}"
    );
}
