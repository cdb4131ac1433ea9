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

/// The plan a task runs, as every front end shows it: after a challenge, the
/// planner's last revision (the last completed `revise/N` step's), else its first
/// plan (the `plan` step's) — the same choice the engine makes when it runs one.
#[derive(Debug, Clone, PartialEq)]
pub struct RunningPlan {
    /// The plan (`{"subtasks": [...]}`).
    pub plan: Value,
    /// Which version it is: 1 for the planner's first, `n + 1` after `revise/n`
    /// (the plan approval's numbering).
    pub revision: u64,
    /// The challenge rounds completed.
    pub challenge_rounds: usize,
    /// The challenges the plan approval showed as left open (`id`, `claim`,
    /// `severity`, `evidence`); empty until it is asked, or when none was.
    pub open_challenges: Vec<Value>,
}

impl RunningPlan {
    /// The id of the planner's first plan step.
    pub const PLAN_STEP: &'static str = "plan";
    /// The prefix of the challenger's rounds (`challenge/1`, …).
    pub const CHALLENGE_PREFIX: &'static str = "challenge/";
    /// The prefix of the planner's revisions (`revise/1`, …).
    pub const REVISE_PREFIX: &'static str = "revise/";
    /// The id of the step that asks for the plan's approval, after the loop.
    pub const APPROVAL_STEP: &'static str = "plan-approval";

    /// The plan that runs, from a task's steps and its plan approval's payload;
    /// `None` before the planner answered.
    pub fn of(steps: &[crate::api::Step], approvals: &[crate::api::Approval]) -> Option<Self> {
        let completed = |s: &&crate::api::Step| s.state == "completed";
        let round = |s: &crate::api::Step, prefix: &str| -> Option<u64> {
            s.id.strip_prefix(prefix)?.parse().ok()
        };
        let revised = steps
            .iter()
            .filter(completed)
            .filter_map(|s| {
                let n = round(s, Self::REVISE_PREFIX)?;
                let plan = s.receipt.as_ref()?.pointer("/revision/plan")?;
                Some((n, plan))
            })
            .max_by_key(|(n, _)| *n);
        let (revision, plan) = match revised {
            Some((n, plan)) => (n + 1, plan.clone()),
            None => {
                let first = steps
                    .iter()
                    .filter(completed)
                    .find(|s| s.id == Self::PLAN_STEP)?;
                (1, first.receipt.as_ref()?.get("plan")?.clone())
            }
        };
        if !plan.is_object() {
            return None;
        }
        let challenge_rounds = steps
            .iter()
            .filter(completed)
            .filter(|s| round(s, Self::CHALLENGE_PREFIX).is_some())
            .count();
        let open_challenges = approvals
            .iter()
            .rev()
            .find(|a| a.kind == "plan")
            .and_then(|a| a.details["open_challenges"].as_array().cloned())
            .unwrap_or_default();
        Some(Self {
            plan,
            revision,
            challenge_rounds,
            open_challenges,
        })
    }

    /// Its subtasks.
    pub fn subtasks(&self) -> &[Value] {
        self.plan["subtasks"]
            .as_array()
            .map_or(&[][..], Vec::as_slice)
    }

    /// "3 subtasks, revision 2 after 2 challenge rounds, 1 challenge left open":
    /// its size and, when a challenger ran, which version it is and what is open.
    pub fn headline(&self) -> String {
        let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
        let mut out = plural(self.subtasks().len(), "subtask");
        if self.challenge_rounds > 0 || self.revision > 1 {
            out.push_str(&format!(
                ", revision {} after {}",
                self.revision,
                plural(self.challenge_rounds, "challenge round")
            ));
        }
        if !self.open_challenges.is_empty() {
            out.push_str(&format!(
                ", {} left open",
                plural(self.open_challenges.len(), "challenge")
            ));
        }
        out
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

    fn step(id: &str, state: &str, receipt: Value) -> crate::api::Step {
        serde_json::from_value(json!({
            "id": id, "name": id, "intent": "idempotent", "state": state, "attempt": 1,
            "receipt": receipt, "error": null, "updated_at": 0,
        }))
        .unwrap()
    }

    fn plan_of(title: &str) -> Value {
        json!({ "subtasks": [{ "title": title, "description": "d", "files": [], "acceptance": "a" }] })
    }

    #[test]
    fn the_running_plan_is_the_last_revision_after_a_challenge() {
        let open = json!([{ "id": "C2", "claim": "MSRV missing", "severity": "medium", "evidence": "Cargo.toml" }]);
        let approval: crate::api::Approval = serde_json::from_value(json!({
            "id": "ap-1", "task_id": "t-1", "project_id": "p-1", "project": "demo",
            "step_id": "plan-approval", "attempt": 1, "kind": "plan", "state": "pending",
            "summary": "Approve the plan", "details": { "plan": plan_of("third"), "open_challenges": open },
            "decided_by": null, "note": null, "requested_at": 0, "decided_at": null, "expires_at": null,
        }))
        .unwrap();
        let steps = vec![
            step("plan", "completed", json!({ "plan": plan_of("first") })),
            step(
                "challenge/1",
                "completed",
                json!({ "challenges": { "agreement": false, "challenges": [] } }),
            ),
            step(
                "revise/1",
                "completed",
                json!({ "revision": { "plan": plan_of("second"), "answers": [] } }),
            ),
            step(
                "challenge/2",
                "completed",
                json!({ "challenges": { "agreement": false, "challenges": [] } }),
            ),
            step(
                "revise/2",
                "completed",
                json!({ "revision": { "plan": plan_of("third"), "answers": [] } }),
            ),
            step(
                "challenge/3",
                "completed",
                json!({ "challenges": { "agreement": false, "challenges": [] } }),
            ),
            step("revise/3", "started", Value::Null),
        ];
        let running = RunningPlan::of(&steps, std::slice::from_ref(&approval)).unwrap();
        assert_eq!(running.plan, plan_of("third"));
        assert_eq!(running.revision, 3);
        assert_eq!(running.challenge_rounds, 3);
        assert_eq!(running.open_challenges, open.as_array().unwrap().clone());
        assert_eq!(
            running.headline(),
            "1 subtask, revision 3 after 3 challenge rounds, 1 challenge left open"
        );

        // Without a challenger: the planner's plan, said plainly.
        let plain = RunningPlan::of(&steps[..1], &[]).unwrap();
        assert_eq!(plain.plan, plan_of("first"));
        assert_eq!(plain.headline(), "1 subtask");
        // The challenger agreed at once: the first plan, after one round.
        let agreed = RunningPlan::of(&steps[..2], &[]).unwrap();
        assert_eq!(
            agreed.headline(),
            "1 subtask, revision 1 after 1 challenge round"
        );
        assert_eq!(RunningPlan::of(&steps[6..], &[]), None, "no plan yet");
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
