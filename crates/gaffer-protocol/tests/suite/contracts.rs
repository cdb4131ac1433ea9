use gaffer_protocol::contracts::*;
use pretty_assertions::assert_eq;
use proptest::prelude::*;

#[test]
fn a_plan_is_read_from_the_last_json_block() {
    let text = "I looked around.\n```json\n{\"draft\": true}\n```\nFinal plan:\n```json\n{\"subtasks\":[{\"title\":\"Add install section\",\"description\":\"Write it\",\"files\":[\"README.md\"],\"acceptance\":\"README has ## Installation\"}]}\n```\n";
    let plan = Plan::parse(text).unwrap();
    assert_eq!(plan.subtasks.len(), 1);
    assert_eq!(plan.subtasks[0].files, ["README.md"]);
}

#[test]
fn plan_errors_name_the_field() {
    let cases = [
        ("no json here", "no ```json block"),
        ("```json\n{\"subtasks\": [}\n```", "not valid JSON"),
        ("```json\n{\"subtasks\": []}\n```", "`subtasks` must list at least one"),
        ("```json\n{\"subtasks\": [{\"title\": \"\", \"description\": \"d\", \"acceptance\": \"a\"}]}\n```", "`subtasks[0].title` must not be empty"),
        ("```json\n{\"subtasks\": [{\"title\": \"t\", \"description\": \"d\"}]}\n```", "`subtasks[0].acceptance` is missing"),
        ("```json\n{\"subtasks\": [{\"title\": \"t\", \"description\": \"d\", \"acceptance\": \"a\", \"files\": [\"../etc/passwd\"]}]}\n```", "subtasks[0].files"),
    ];
    for (text, expected) in cases {
        let err = Plan::parse(text).unwrap_err().to_string();
        assert!(err.contains(expected), "{text:?} → {err}");
    }
}

#[test]
fn verdicts_and_rulings() {
    assert_eq!(
        Verdict::parse("```json\n{\"verdict\":\"done\"}\n```").unwrap(),
        Verdict::Done
    );
    assert_eq!(
        Verdict::parse("{\"verdict\":\"changes_requested\",\"feedback\":\"add a test\"}").unwrap(),
        Verdict::ChangesRequested {
            feedback: "add a test".into()
        }
    );
    assert!(
        Verdict::parse("```json\n{\"verdict\":\"changes_requested\"}\n```")
            .unwrap_err()
            .to_string()
            .contains("`feedback` is missing")
    );
    assert!(Verdict::parse("```json\n{\"verdict\":\"lgtm\"}\n```")
        .unwrap_err()
        .to_string()
        .contains("`verdict` is `lgtm`"));
    assert_eq!(
        Ruling::parse(
            "```json\n{\"ruling\":\"escalate\",\"reason\":\"needs a product call\"}\n```"
        )
        .unwrap(),
        Ruling::Escalate {
            reason: "needs a product call".into()
        }
    );
    assert!(Ruling::parse("```json\n{\"ruling\":\"revise\"}\n```").is_err());
}

proptest! {
    #[test]
    fn parsers_never_panic(text in ".{0,400}") {
        let _ = Plan::parse(&text);
        let _ = Verdict::parse(&text);
        let _ = Ruling::parse(&text);
    }

    #[test]
    fn parsers_never_panic_on_fenced_noise(body in "[{}\\[\\]\":,a-z0-9 \n`]{0,200}") {
        let text = format!("```json\n{body}\n```");
        let _ = Plan::parse(&text);
        let _ = Verdict::parse(&text);
        let _ = Ruling::parse(&text);
    }
}
