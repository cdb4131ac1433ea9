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

/// Text a field of an agent's answer may hold (no backticks: they would close the
/// fence; JSON escaping of the rest is serde's job).
fn field_text() -> impl Strategy<Value = String> {
    "[A-Za-z0-9][A-Za-z0-9 ,.:\"'{}\\\\é\n]{0,30}[A-Za-z0-9]"
}

fn subtask() -> impl Strategy<Value = Subtask> {
    (
        field_text(),
        field_text(),
        proptest::collection::vec("[a-z]{1,8}(/[a-z]{1,8}){0,2}\\.rs", 0..3),
        field_text(),
    )
        .prop_map(|(title, description, files, acceptance)| Subtask {
            title,
            description,
            files,
            acceptance,
        })
}

fn fenced(prose: &str, v: &serde_json::Value) -> String {
    format!("{prose}\n```json\n{v}\n```\n")
}

proptest! {
    /// An answer ending in a plan block gives exactly that plan, whatever prose and
    /// earlier drafts come before it.
    #[test]
    fn the_last_plan_block_is_the_plan(
        subtasks in proptest::collection::vec(subtask(), 1..5),
        draft in proptest::collection::vec(subtask(), 1..3),
        prose in "[^`]{0,80}",
    ) {
        let text = format!(
            "{}{}",
            fenced(&prose, &serde_json::json!({ "subtasks": draft })),
            fenced("On second thought:", &serde_json::json!({ "subtasks": subtasks })),
        );
        prop_assert_eq!(Plan::parse(&text), Ok(Plan { subtasks }));
    }

    /// Every verdict and ruling written as the contract says reads back as itself.
    #[test]
    fn verdicts_and_rulings_read_back(kind in 0usize..3, text in field_text(), prose in "[^`]{0,60}") {
        let (verdict, expected) = match kind {
            0 => (serde_json::json!({"verdict": "done"}), Verdict::Done),
            1 => (serde_json::json!({"verdict": "changes_requested", "feedback": text}), Verdict::ChangesRequested { feedback: text.clone() }),
            _ => (serde_json::json!({"verdict": "blocked", "reason": text}), Verdict::Blocked { reason: text.clone() }),
        };
        prop_assert_eq!(Verdict::parse(&fenced(&prose, &verdict)), Ok(expected));
        let (ruling, expected) = match kind {
            0 => (serde_json::json!({"ruling": "proceed", "reason": text}), Ruling::Proceed { reason: text.clone() }),
            1 => (serde_json::json!({"ruling": "revise", "instructions": text}), Ruling::Revise { instructions: text.clone() }),
            _ => (serde_json::json!({"ruling": "escalate", "reason": text}), Ruling::Escalate { reason: text.clone() }),
        };
        prop_assert_eq!(Ruling::parse(&fenced(&prose, &ruling)), Ok(expected));
    }

    /// A refusal always tells the agent what to send: it names the block or the field.
    #[test]
    fn refusals_name_the_block_or_the_field(text in ".{0,300}") {
        for e in [Plan::parse(&text).err(), Verdict::parse(&text).err(), Ruling::parse(&text).err()]
            .into_iter()
            .flatten()
        {
            let shown = e.to_string();
            prop_assert!(shown.contains("```json") || shown.contains('`'), "{}", shown);
        }
    }
}

fn block(v: serde_json::Value) -> String {
    format!("My answer.\n```json\n{v}\n```\n")
}

#[test]
fn challenges_are_read_with_ids_severity_and_agreement() {
    let text = block(serde_json::json!({
        "challenges": [
            { "id": "C1", "claim": "the plan edits a generated file", "severity": "high", "evidence": "src/gen.rs says DO NOT EDIT" },
            { "id": "C2", "claim": "no test", "severity": "low", "evidence": "tests/ untouched" },
        ],
        "agreement": false,
    }));
    let c = Challenges::parse(&text).unwrap();
    assert!(!c.agreement);
    assert_eq!(c.challenges.len(), 2);
    assert_eq!(
        (c.challenges[0].id.as_str(), c.challenges[0].severity),
        ("C1", Severity::High)
    );
    let agreed = Challenges::parse(&block(
        serde_json::json!({ "challenges": [], "agreement": true }),
    ))
    .unwrap();
    assert!(agreed.agreement && agreed.challenges.is_empty());
}

#[test]
fn challenge_errors_name_the_field_and_what_to_do() {
    let c = |id: &str, sev: &str| serde_json::json!({ "id": id, "claim": "x", "severity": sev, "evidence": "y" });
    let cases = [
        (
            serde_json::json!({ "challenges": [c("C1", "high")] }),
            "`agreement` is missing",
        ),
        (
            serde_json::json!({ "challenges": [c("C1", "high")], "agreement": true }),
            "`agreement` is true but challenges are listed",
        ),
        (
            serde_json::json!({ "challenges": [], "agreement": false }),
            "`challenges` is empty but agreement is false",
        ),
        (
            serde_json::json!({ "challenges": [c("C1", "fatal")], "agreement": false }),
            "`challenges[0].severity` is `fatal`",
        ),
        (
            serde_json::json!({ "challenges": [c("C1", "low"), c("C1", "high")], "agreement": false }),
            "`challenges[1].id` repeats `C1`",
        ),
        (
            serde_json::json!({ "challenges": [{ "id": "C1", "claim": "x", "severity": "low" }], "agreement": false }),
            "`challenges[0].evidence` is missing",
        ),
    ];
    for (v, expected) in cases {
        let err = Challenges::parse(&block(v.clone()))
            .unwrap_err()
            .to_string();
        assert!(err.contains(expected), "{v} → {err}");
    }
    let err = Challenges::parse("I agree.").unwrap_err().to_string();
    assert!(err.contains("\"agreement\""), "the shape is shown: {err}");
}

fn two_challenges() -> Vec<Challenge> {
    Challenges::parse(&block(serde_json::json!({
        "challenges": [
            { "id": "C1", "claim": "a", "severity": "high", "evidence": "e" },
            { "id": "C2", "claim": "b", "severity": "medium", "evidence": "e" },
        ],
        "agreement": false,
    })))
    .unwrap()
    .challenges
}

fn revised_subtask(title: &str, acceptance: &str) -> serde_json::Value {
    serde_json::json!({ "title": title, "description": "d", "files": ["README.md"], "acceptance": acceptance })
}

#[test]
fn a_revision_answers_every_challenge_once_in_their_order() {
    let text = block(serde_json::json!({
        "subtasks": [revised_subtask("one", "ok"), revised_subtask("two", "ok")],
        "answers": [
            { "id": "C2", "decision": "rejected", "reason": "the file is not generated: see build.rs" },
            { "id": "C1", "decision": "adopted", "reason": "added a test" },
        ],
    }));
    let r = Revision::parse(&text, &two_challenges()).unwrap();
    assert_eq!(r.plan.subtasks.len(), 2);
    assert_eq!(
        r.answers
            .iter()
            .map(|a| (a.id.as_str(), a.decision))
            .collect::<Vec<_>>(),
        [("C1", Decision::Adopted), ("C2", Decision::Rejected)]
    );
    let bad = |answers: serde_json::Value| {
        Revision::parse(&block(serde_json::json!({ "subtasks": [revised_subtask("one", "ok")], "answers": answers })), &two_challenges())
            .unwrap_err()
            .to_string()
    };
    let a = |id: &str, d: &str| serde_json::json!({ "id": id, "decision": d, "reason": "r" });
    assert!(bad(serde_json::json!([a("C1", "adopted")])).contains("leaves C2 unanswered"));
    assert!(
        bad(serde_json::json!([a("C1", "adopted"), a("C9", "adopted")]))
            .contains("`answers[1].id` is `C9`, which no challenge has; answer C1, C2")
    );
    assert!(
        bad(serde_json::json!([a("C1", "adopted"), a("C1", "rejected")])).contains("a second time")
    );
    assert!(
        bad(serde_json::json!([a("C1", "maybe"), a("C2", "adopted")]))
            .contains("`answers[0].decision` is `maybe`")
    );
    let no_answers = Revision::parse(
        &block(serde_json::json!({ "subtasks": [revised_subtask("one", "ok")] })),
        &two_challenges(),
    )
    .unwrap_err()
    .to_string();
    assert!(no_answers.contains("`answers` is missing"), "{no_answers}");
    let no_json = Revision::parse("done", &two_challenges())
        .unwrap_err()
        .to_string();
    assert!(
        no_json.contains("\"answers\""),
        "the revision's shape is shown: {no_json}"
    );
}

#[test]
fn a_plans_changes_name_each_subtask_added_removed_or_changed() {
    let plan = |subtasks: Vec<serde_json::Value>| {
        Plan::parse(&block(serde_json::json!({ "subtasks": subtasks }))).unwrap()
    };
    let v1 = plan(vec![
        revised_subtask("one", "ok"),
        revised_subtask("two", "ok"),
    ]);
    let v2 = plan(vec![
        revised_subtask("one", "tests pass"),
        revised_subtask("two", "ok"),
        revised_subtask("three", "ok"),
    ]);
    assert_eq!(
        v2.changes_from(&v1),
        [
            "changed subtask 1 (acceptance): one",
            "added subtask 3: three"
        ]
    );
    assert_eq!(v1.changes_from(&v2)[1], "removed subtask 3: three");
    assert!(v1.changes_from(&v1).is_empty());
}

#[test]
fn a_panel_opinion_names_its_recommendation_and_a_reason() {
    use gaffer_protocol::contracts::{Opinion, Recommendation};
    assert_eq!(
        Opinion::parse("I read it.\n```json\n{\"opinion\":\"revise\",\"reason\":\"the parser drops the last line\"}\n```"),
        Ok(Opinion {
            opinion: Recommendation::Revise,
            reason: "the parser drops the last line".into()
        })
    );
    for (text, says) in [
        ("no block at all", "no ```json block"),
        (
            "```json\n{\"opinion\":\"approve\",\"reason\":\"x\"}\n```",
            "`opinion` is `approve`; use \"proceed\", \"revise\" or \"escalate\"",
        ),
        ("```json\n{\"reason\":\"x\"}\n```", "`opinion` is missing"),
        (
            "```json\n{\"opinion\":\"proceed\",\"reason\":\"  \"}\n```",
            "`reason` must not be empty",
        ),
    ] {
        let err = Opinion::parse(text).unwrap_err().to_string();
        assert!(err.contains(says), "{text}: {err}");
    }
}
