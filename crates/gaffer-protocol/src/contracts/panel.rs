//! A panel member's opinion for the arbiter: what it would rule, and why.

use super::{field, parse_object, required, ContractError};
use serde::{Deserialize, Serialize};

const OPINION_EXAMPLE: &str = r#"{"opinion":"proceed"|"revise"|"escalate","reason":"…"}"#;

/// What a member recommends: the arbiter's three rulings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Recommendation {
    /// Go on to the checks.
    Proceed,
    /// The owner must change something.
    Revise,
    /// A person must decide.
    Escalate,
}

impl Recommendation {
    /// The word in the contract.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Proceed => "proceed",
            Self::Revise => "revise",
            Self::Escalate => "escalate",
        }
    }
}

/// A panel member's final answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Opinion {
    /// What it would rule.
    pub opinion: Recommendation,
    /// Why, with the evidence (for `revise`, what to change).
    pub reason: String,
}

#[derive(Deserialize)]
struct RawOpinion {
    opinion: Option<String>,
    reason: Option<String>,
}

impl Opinion {
    /// Parse and validate a member's final message.
    pub fn parse(text: &str) -> Result<Self, ContractError> {
        let raw: RawOpinion = parse_object(text, OPINION_EXAMPLE)?;
        let opinion = match raw.opinion.as_deref() {
            Some("proceed") => Recommendation::Proceed,
            Some("revise") => Recommendation::Revise,
            Some("escalate") => Recommendation::Escalate,
            Some(other) => {
                return Err(field(
                    "opinion",
                    format!("is `{other}`; use \"proceed\", \"revise\" or \"escalate\""),
                ))
            }
            None => return Err(field("opinion", "is missing")),
        };
        Ok(Self {
            opinion,
            reason: required(raw.reason, "reason".into())?,
        })
    }
}
