//! What the shipping steps record, as the engine writes it and every front end (the
//! CLI, Discord, the web page) reads it. One definition, so the writer and its
//! readers cannot disagree on where a field is (the Discord thread once looked for
//! `pr_url` while the engine wrote `pull_request.url`).
//!
//! Receipts are stored as JSON in the journal; read them with the `from_*`
//! functions, which answer `None` for anything that is not one.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The `pr` step's receipt, and the `pull_request` of a finished task's summary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PullRequestReceipt {
    /// Its number in the repository.
    pub number: u64,
    /// Its web page.
    pub url: String,
    /// The task branch.
    pub head: String,
    /// The branch it merges into.
    pub base: String,
    /// Opened by this task; `false`: an open one for the branch was found.
    pub created: bool,
    /// Found by the probe after a crash interrupted the step.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reconciled: bool,
    /// Problems after it was opened (labels that could not be set): it exists.
    #[serde(default)]
    pub warnings: Vec<String>,
}

impl PullRequestReceipt {
    /// The id of the step that opens (or finds) the pull request.
    pub const STEP: &'static str = "pr";
    /// Its key in a finished task's summary.
    pub const SUMMARY_KEY: &'static str = "pull_request";

    /// Read the `pr` step's receipt.
    pub fn from_receipt(receipt: &Value) -> Option<Self> {
        Self::deserialize(receipt).ok()
    }

    /// The pull request a finished task's summary names, if it shipped one.
    pub fn from_summary(summary: &Value) -> Option<Self> {
        summary.get(Self::SUMMARY_KEY).and_then(Self::from_receipt)
    }
}

/// A `ci/N` step's receipt: what CI said about one pushed commit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CiReceipt {
    /// The commit.
    pub sha: String,
    /// `success`, `failure` or `error` (the wait ends on nothing else).
    pub state: String,
    /// Every check as the forge reported it (name, state, raw state, link).
    #[serde(default)]
    pub checks: Vec<Value>,
    /// The checks that failed, with the end of their logs (redacted).
    #[serde(default)]
    pub failing: Vec<FailingCheck>,
}

/// A failing CI check and what it printed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailingCheck {
    /// The check's name.
    pub check: String,
    /// Whether `text` is the end of its log (else its description and link only).
    pub is_log: bool,
    /// Where to see it.
    pub url: Option<String>,
    /// The end of its log, or what the forge says about it.
    pub text: String,
}

impl CiReceipt {
    /// The prefix of CI steps' ids (`ci/1`, `ci/2`, one per push).
    pub const STEP_PREFIX: &'static str = "ci/";

    /// Read a `ci/N` step's receipt.
    pub fn from_receipt(receipt: &Value) -> Option<Self> {
        Self::deserialize(receipt).ok()
    }

    /// Whether CI passed.
    pub fn passed(&self) -> bool {
        self.state == "success"
    }
}

/// How a commit is named to people: its first 10 hex digits (as
/// `git log --abbrev=10` shows it).
pub fn short_sha(sha: &str) -> &str {
    sha.get(..10).unwrap_or(sha)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn a_pull_request_reads_back_from_a_receipt_and_from_a_summary() {
        let pr = PullRequestReceipt {
            number: 7,
            url: "https://git.example/acme/demo/pulls/7".into(),
            head: "gaffer/t-1".into(),
            base: "main".into(),
            created: true,
            reconciled: false,
            warnings: vec![],
        };
        let receipt = serde_json::to_value(&pr).unwrap();
        assert_eq!(receipt.get("reconciled"), None);
        assert_eq!(PullRequestReceipt::from_receipt(&receipt), Some(pr.clone()));
        let summary = json!({ "branch": "gaffer/t-1", "pull_request": receipt });
        assert_eq!(PullRequestReceipt::from_summary(&summary), Some(pr));
        assert_eq!(
            PullRequestReceipt::from_summary(&json!({ "reason": "no" })),
            None
        );
        assert_eq!(PullRequestReceipt::from_receipt(&json!({ "url": 3 })), None);
    }

    #[test]
    fn a_sha_is_named_by_ten_digits_and_a_short_one_kept() {
        assert_eq!(
            short_sha("0123456789abcdef0123456789abcdef01234567"),
            "0123456789"
        );
        assert_eq!(short_sha("abc"), "abc");
    }

    #[test]
    fn a_ci_receipt_says_whether_it_passed() {
        let ci = CiReceipt::from_receipt(&json!({ "sha": "abc", "state": "failure",
            "failing": [{ "check": "build", "is_log": true, "url": null, "text": "boom" }] }))
        .unwrap();
        assert!(!ci.passed());
        assert_eq!(ci.failing[0].text, "boom");
        assert!(
            CiReceipt::from_receipt(&json!({ "sha": "abc", "state": "success" }))
                .unwrap()
                .passed()
        );
    }
}
