//! The plan's challenge loop: the challenger's challenges and the planner's revision
//! that answers each of them.

use super::{field, parse_object, required, ContractError, Plan, Subtask};
use serde::{Deserialize, Serialize};

const CHALLENGES_EXAMPLE: &str = r#"{"challenges":[{"id":"C1","claim":"…","severity":"high"|"medium"|"low","evidence":"…"}],"agreement":false}"#;
const REVISION_EXAMPLE: &str = r#"{"subtasks":[{"title":"…","description":"…","files":["path"],"acceptance":"…"}],"answers":[{"id":"C1","decision":"adopted"|"rejected","reason":"…"}]}"#;

/// Most challenges one answer may raise.
pub const MAX_CHALLENGES: usize = 20;

/// How much a challenge matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// The plan would fail or do harm as it is.
    High,
    /// The plan would work badly or leave something out.
    Medium,
    /// A detail.
    Low,
}

impl Severity {
    /// The snake_case name used in the contract.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::High => "high",
            Severity::Medium => "medium",
            Severity::Low => "low",
        }
    }
}

/// One numbered objection to the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Challenge {
    /// The challenger's id for it (`C1`), answered by that id.
    pub id: String,
    /// What is wrong with the plan.
    pub claim: String,
    /// How much it matters.
    pub severity: Severity,
    /// What shows it (a file, a line, a behaviour).
    pub evidence: String,
}

/// The challenger's answer: its challenges, or its agreement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Challenges {
    /// Open objections; empty when it agrees.
    pub challenges: Vec<Challenge>,
    /// Whether it accepts the plan as it is.
    pub agreement: bool,
}

#[derive(Deserialize)]
struct RawChallenges {
    challenges: Option<Vec<RawChallenge>>,
    agreement: Option<bool>,
}

#[derive(Deserialize)]
struct RawChallenge {
    id: Option<String>,
    claim: Option<String>,
    severity: Option<String>,
    evidence: Option<String>,
}

impl Challenges {
    /// Parse and validate a challenger's final message: unique ids, every field
    /// given, and agreement exactly when nothing is left to challenge.
    pub fn parse(text: &str) -> Result<Self, ContractError> {
        let raw: RawChallenges = parse_object(text, CHALLENGES_EXAMPLE)?;
        let agreement = raw.agreement.ok_or_else(|| {
            field(
                "agreement",
                "is missing; true when you accept the plan as it is, else false",
            )
        })?;
        let raw_challenges = raw.challenges.unwrap_or_default();
        if raw_challenges.len() > MAX_CHALLENGES {
            return Err(field(
                "challenges",
                format!(
                    "has {}; raise the {MAX_CHALLENGES} that matter most",
                    raw_challenges.len()
                ),
            ));
        }
        let mut challenges: Vec<Challenge> = Vec::with_capacity(raw_challenges.len());
        for (i, c) in raw_challenges.into_iter().enumerate() {
            let id = required(c.id, format!("challenges[{i}].id"))?
                .trim()
                .to_owned();
            if challenges.iter().any(|earlier| earlier.id == id) {
                return Err(field(
                    format!("challenges[{i}].id"),
                    format!("repeats `{id}`; give each challenge its own id"),
                ));
            }
            let severity = match c.severity.as_deref() {
                Some("high") => Severity::High,
                Some("medium") => Severity::Medium,
                Some("low") => Severity::Low,
                Some(other) => {
                    return Err(field(
                        format!("challenges[{i}].severity"),
                        format!("is `{other}`; use \"high\", \"medium\" or \"low\""),
                    ))
                }
                None => return Err(field(format!("challenges[{i}].severity"), "is missing")),
            };
            challenges.push(Challenge {
                claim: required(c.claim, format!("challenges[{i}].claim"))?,
                evidence: required(c.evidence, format!("challenges[{i}].evidence"))?,
                id,
                severity,
            });
        }
        match (agreement, challenges.is_empty()) {
            (true, false) => Err(field(
                "agreement",
                "is true but challenges are listed; agree with none left open, or set agreement to false",
            )),
            (false, true) => Err(field(
                "challenges",
                "is empty but agreement is false; raise what is wrong, or set agreement to true",
            )),
            _ => Ok(Challenges {
                challenges,
                agreement,
            }),
        }
    }
}

/// What the planner did about a challenge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// The revision changes the plan for it.
    Adopted,
    /// The plan stays as it was, for the reason given.
    Rejected,
}

impl Decision {
    /// The snake_case name used in the contract.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Adopted => "adopted",
            Decision::Rejected => "rejected",
        }
    }
}

/// The planner's answer to one challenge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answer {
    /// The challenge's id.
    pub id: String,
    /// Adopted or rejected.
    pub decision: Decision,
    /// Why (for a rejection, the evidence against the challenge).
    pub reason: String,
}

/// The planner's revised plan and its answer to every challenge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Revision {
    /// The plan as revised.
    pub plan: Plan,
    /// One answer per challenge, in the challenges' order.
    pub answers: Vec<Answer>,
}

#[derive(Deserialize)]
struct RawRevision {
    answers: Option<Vec<RawAnswer>>,
}

#[derive(Deserialize)]
struct RawAnswer {
    id: Option<String>,
    decision: Option<String>,
    reason: Option<String>,
}

impl Revision {
    /// Parse and validate a planner's revision of its plan, which must answer each
    /// of `challenges` once and nothing else.
    pub fn parse(text: &str, challenges: &[Challenge]) -> Result<Self, ContractError> {
        let plan = Plan::parse(text).map_err(|e| match e {
            ContractError::NoJson { .. } => ContractError::NoJson {
                example: REVISION_EXAMPLE,
            },
            other => other,
        })?;
        let raw: RawRevision = parse_object(text, REVISION_EXAMPLE)?;
        let raw_answers = raw
            .answers
            .ok_or_else(|| field("answers", "is missing; answer every challenge by its id"))?;
        let mut answers: Vec<Answer> = Vec::with_capacity(raw_answers.len());
        for (i, a) in raw_answers.into_iter().enumerate() {
            let id = required(a.id, format!("answers[{i}].id"))?
                .trim()
                .to_owned();
            if !challenges.iter().any(|c| c.id == id) {
                return Err(field(
                    format!("answers[{i}].id"),
                    format!(
                        "is `{id}`, which no challenge has; answer {}",
                        ids(challenges)
                    ),
                ));
            }
            if answers.iter().any(|earlier| earlier.id == id) {
                return Err(field(
                    format!("answers[{i}].id"),
                    format!("answers `{id}` a second time; answer each challenge once"),
                ));
            }
            let decision = match a.decision.as_deref() {
                Some("adopted") => Decision::Adopted,
                Some("rejected") => Decision::Rejected,
                Some(other) => {
                    return Err(field(
                        format!("answers[{i}].decision"),
                        format!("is `{other}`; use \"adopted\" or \"rejected\""),
                    ))
                }
                None => return Err(field(format!("answers[{i}].decision"), "is missing")),
            };
            let reason = required(a.reason, format!("answers[{i}].reason"))?;
            answers.push(Answer {
                id,
                decision,
                reason,
            });
        }
        let missing: Vec<&str> = challenges
            .iter()
            .filter(|c| !answers.iter().any(|a| a.id == c.id))
            .map(|c| c.id.as_str())
            .collect();
        if !missing.is_empty() {
            return Err(field(
                "answers",
                format!(
                    "leaves {} unanswered; answer every challenge",
                    missing.join(", ")
                ),
            ));
        }
        answers.sort_by_key(|a| challenges.iter().position(|c| c.id == a.id));
        Ok(Revision { plan, answers })
    }
}

fn ids(challenges: &[Challenge]) -> String {
    challenges
        .iter()
        .map(|c| c.id.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

impl Plan {
    /// What changed from `earlier` to this plan, one line per subtask added, removed
    /// or changed (by position), naming the fields that changed.
    pub fn changes_from(&self, earlier: &Plan) -> Vec<String> {
        let n = self.subtasks.len().max(earlier.subtasks.len());
        (0..n)
            .filter_map(|i| match (earlier.subtasks.get(i), self.subtasks.get(i)) {
                (None, Some(new)) => Some(format!("added subtask {}: {}", i + 1, new.title)),
                (Some(old), None) => Some(format!("removed subtask {}: {}", i + 1, old.title)),
                (Some(old), Some(new)) => {
                    let fields = changed_fields(old, new);
                    (!fields.is_empty()).then(|| {
                        format!(
                            "changed subtask {} ({}): {}",
                            i + 1,
                            fields.join(", "),
                            new.title
                        )
                    })
                }
                (None, None) => None,
            })
            .collect()
    }
}

fn changed_fields(old: &Subtask, new: &Subtask) -> Vec<&'static str> {
    [
        ("title", old.title != new.title),
        ("description", old.description != new.description),
        ("files", old.files != new.files),
        ("acceptance", old.acceptance != new.acceptance),
    ]
    .into_iter()
    .filter_map(|(name, changed)| changed.then_some(name))
    .collect()
}
