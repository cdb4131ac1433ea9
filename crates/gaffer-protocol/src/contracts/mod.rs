//! The contracts agents answer in. Each role's final message contains a fenced
//! `json` block (the last one counts):
//!
//! - planner: `{"subtasks":[{"title":…,"description":…,"files":[…],"acceptance":…}]}`
//! - reviewer: `{"verdict":"done"|"changes_requested"|"blocked","feedback":…,"reason":…}`
//! - arbiter: `{"ruling":"proceed"|"revise"|"escalate","instructions":…,"reason":…}`
//! - challenger: `{"challenges":[{"id":…,"claim":…,"severity":"high"|"medium"|"low","evidence":…}],"agreement":bool}`
//! - tester: `{"tests":[{"path":…,"covers":…}],"summary":…}`
//! - planner revising its plan: `{"subtasks":[…],"answers":[{"id":…,"decision":"adopted"|"rejected","reason":…}]}`
//! - arbiter's panel member: `{"opinion":"proceed"|"revise"|"escalate","reason":…}`
//!
//! Parsing never panics; an error says what is wrong in words the agent can act on
//! (it is sent back to the agent on the retry).

use serde::{Deserialize, Serialize};

mod challenge;
mod panel;
mod tests;
pub use challenge::{Answer, Challenge, Challenges, Decision, Revision, Severity};
pub use panel::{Opinion, Recommendation};
pub use tests::{TestFile, TestReport};

/// Why an agent's answer does not meet its contract.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContractError {
    /// No JSON object could be found in the message.
    #[error("no ```json block found; end your message with a fenced json block: {example}")]
    NoJson {
        /// The shape expected.
        example: &'static str,
    },
    /// The block is not valid JSON.
    #[error("the ```json block is not valid JSON ({0}); send one well-formed JSON object")]
    BadJson(String),
    /// A field is missing or wrong.
    #[error("`{field}` {problem}")]
    Field {
        /// Dotted path of the field (`subtasks[1].title`).
        field: String,
        /// What is wrong.
        problem: String,
    },
}

impl ContractError {
    /// What was wrong, for the task's reader: the [`Display`](std::fmt::Display)
    /// text without the shape the agent is told to send (a JSON example that a
    /// person reading a failure needs no more than a raw dump).
    pub fn brief(&self) -> String {
        match self {
            ContractError::NoJson { .. } => "its answer has no ```json block".to_owned(),
            ContractError::BadJson(e) => format!("its ```json block is not valid JSON ({e})"),
            ContractError::Field { .. } => self.to_string(),
        }
    }
}

fn field(field: impl Into<String>, problem: impl Into<String>) -> ContractError {
    ContractError::Field {
        field: field.into(),
        problem: problem.into(),
    }
}

/// The last fenced ```json block of `text` (or the last fenced block, or the
/// whole text when it is a bare JSON object).
pub fn last_json_block(text: &str) -> Option<&str> {
    let mut found: Option<&str> = None;
    let mut any_fence: Option<&str> = None;
    let mut rest = text;
    while let Some(start) = rest.find("```") {
        let after = &rest[start + 3..];
        let (lang, body_start) = match after.find('\n') {
            Some(nl) => (after[..nl].trim(), nl + 1),
            None => break,
        };
        let body = &after[body_start..];
        let Some(end) = body.find("```") else { break };
        let block = body[..end].trim();
        if lang.eq_ignore_ascii_case("json") {
            found = Some(block);
        } else if block.starts_with('{') {
            any_fence = Some(block);
        }
        rest = &body[end + 3..];
    }
    found.or(any_fence).or_else(|| {
        let t = text.trim();
        (t.starts_with('{') && t.ends_with('}')).then_some(t)
    })
}

fn parse_object<T: serde::de::DeserializeOwned>(
    text: &str,
    example: &'static str,
) -> Result<T, ContractError> {
    let block = last_json_block(text).ok_or(ContractError::NoJson { example })?;
    serde_json::from_str(block).map_err(|e| ContractError::BadJson(e.to_string()))
}

const PLAN_EXAMPLE: &str =
    r#"{"subtasks":[{"title":"…","description":"…","files":["path"],"acceptance":"…"}]}"#;
const VERDICT_EXAMPLE: &str =
    r#"{"verdict":"done"|"changes_requested"|"blocked","feedback":"…","reason":"…"}"#;
const RULING_EXAMPLE: &str =
    r#"{"ruling":"proceed"|"revise"|"escalate","instructions":"…","reason":"…"}"#;

/// Most subtasks a plan may have.
pub const MAX_SUBTASKS: usize = 20;

/// One unit of work in a plan; each ends in a commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subtask {
    /// Short title (becomes the commit subject).
    pub title: String,
    /// What to do.
    pub description: String,
    /// Files the planner expects to touch (relative paths).
    #[serde(default)]
    pub files: Vec<String>,
    /// How to tell it is done.
    pub acceptance: String,
}

/// The planner's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// The subtasks, in order.
    pub subtasks: Vec<Subtask>,
}

#[derive(Deserialize)]
struct RawPlan {
    subtasks: Option<Vec<RawSubtask>>,
}

#[derive(Deserialize)]
struct RawSubtask {
    title: Option<String>,
    description: Option<String>,
    files: Option<Vec<String>>,
    acceptance: Option<String>,
}

fn required(value: Option<String>, name: String) -> Result<String, ContractError> {
    match value {
        Some(v) if !v.trim().is_empty() => Ok(v),
        Some(_) => Err(field(name, "must not be empty")),
        None => Err(field(name, "is missing")),
    }
}

impl Plan {
    /// Parse and validate a planner's final message.
    pub fn parse(text: &str) -> Result<Self, ContractError> {
        let raw: RawPlan = parse_object(text, PLAN_EXAMPLE)?;
        let subtasks = raw
            .subtasks
            .ok_or_else(|| field("subtasks", "is missing"))?;
        if subtasks.is_empty() {
            return Err(field("subtasks", "must list at least one subtask"));
        }
        if subtasks.len() > MAX_SUBTASKS {
            return Err(field(
                "subtasks",
                format!(
                    "has {}; split the request, at most {MAX_SUBTASKS}",
                    subtasks.len()
                ),
            ));
        }
        let subtasks = subtasks
            .into_iter()
            .enumerate()
            .map(|(i, s)| {
                let files = s.files.unwrap_or_default();
                if let Some(bad) = files
                    .iter()
                    .find(|f| f.starts_with('/') || f.split(['/', '\\']).any(|part| part == ".."))
                {
                    return Err(field(
                        format!("subtasks[{i}].files"),
                        format!("contains `{bad}`; use paths relative to the repository root, without `..`"),
                    ));
                }
                Ok(Subtask {
                    title: required(s.title, format!("subtasks[{i}].title"))?,
                    description: required(s.description, format!("subtasks[{i}].description"))?,
                    acceptance: required(s.acceptance, format!("subtasks[{i}].acceptance"))?,
                    files,
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Plan { subtasks })
    }
}

/// The reviewer's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    /// The work is done.
    Done,
    /// The owner must change something.
    ChangesRequested {
        /// What to change.
        feedback: String,
    },
    /// The reviewer cannot accept it and the owner cannot fix it alone.
    Blocked {
        /// Why.
        reason: String,
    },
}

#[derive(Deserialize)]
struct RawVerdict {
    verdict: Option<String>,
    feedback: Option<String>,
    reason: Option<String>,
}

impl Verdict {
    /// Parse and validate a reviewer's final message.
    pub fn parse(text: &str) -> Result<Self, ContractError> {
        let raw: RawVerdict = parse_object(text, VERDICT_EXAMPLE)?;
        match raw.verdict.as_deref() {
            Some("done") => Ok(Verdict::Done),
            Some("changes_requested") => Ok(Verdict::ChangesRequested {
                feedback: required(raw.feedback, "feedback".into())?,
            }),
            Some("blocked") => Ok(Verdict::Blocked {
                reason: required(raw.reason, "reason".into())?,
            }),
            Some(other) => Err(field(
                "verdict",
                format!("is `{other}`; use \"done\", \"changes_requested\" or \"blocked\""),
            )),
            None => Err(field("verdict", "is missing")),
        }
    }
}

/// The arbiter's ruling.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "ruling", rename_all = "snake_case")]
pub enum Ruling {
    /// The work is good enough: go on to the checks.
    Proceed {
        /// Why.
        reason: String,
    },
    /// The owner must change something.
    Revise {
        /// What to change.
        instructions: String,
    },
    /// A human must decide.
    Escalate {
        /// What the human should decide.
        reason: String,
    },
}

#[derive(Deserialize)]
struct RawRuling {
    ruling: Option<String>,
    instructions: Option<String>,
    reason: Option<String>,
}

impl Ruling {
    /// Parse and validate an arbiter's final message.
    pub fn parse(text: &str) -> Result<Self, ContractError> {
        let raw: RawRuling = parse_object(text, RULING_EXAMPLE)?;
        match raw.ruling.as_deref() {
            Some("proceed") => Ok(Ruling::Proceed {
                reason: raw.reason.unwrap_or_default(),
            }),
            Some("revise") => Ok(Ruling::Revise {
                instructions: required(raw.instructions, "instructions".into())?,
            }),
            Some("escalate") => Ok(Ruling::Escalate {
                reason: required(raw.reason, "reason".into())?,
            }),
            Some(other) => Err(field(
                "ruling",
                format!("is `{other}`; use \"proceed\", \"revise\" or \"escalate\""),
            )),
            None => Err(field("ruling", "is missing")),
        }
    }
}
