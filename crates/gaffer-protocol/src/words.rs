//! The words people see for an approval, one source for every surface: the page
//! (served to it in a `<meta>` tag, see [`page_json`]), the terminal, Discord, ntfy
//! and the one-tap confirm page. A `stall` approval continues or interrupts, a
//! `budget` one raises the cap or stops; a phone must not say Approve / Deny where
//! the page says Continue / Interrupt.

use serde::Serialize;
use serde_json::Value;

/// What an approval of one kind is called and what its two answers do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ApprovalWords {
    /// The kind in words ("Looks stuck" for `stall`).
    pub name: &'static str,
    /// The button that approves ("Continue").
    pub approve: &'static str,
    /// The button that denies ("Interrupt").
    pub deny: &'static str,
    /// Once approved ("Continued").
    pub approved: &'static str,
    /// Once denied ("Interrupted").
    pub denied: &'static str,
    /// What a note is for, where it is more than a note for the record.
    pub note: Option<&'static str>,
}

const PLAIN: ApprovalWords = ApprovalWords {
    name: "Approval",
    approve: "Approve",
    deny: "Deny",
    approved: "Approved",
    denied: "Denied",
    note: None,
};

/// Every kind with words of its own, in the order the page lists them.
pub const KINDS: [&str; 8] = [
    "plan",
    "tool",
    "ship",
    "manual",
    "escalation",
    "memory",
    "stall",
    "budget",
];

impl ApprovalWords {
    /// The words for approvals of `kind`; an unknown kind gets plain ones.
    pub fn of(kind: &str) -> Self {
        let named = |name| ApprovalWords { name, ..PLAIN };
        match kind {
            "plan" => named("Plan"),
            "tool" => named("Tool call"),
            "ship" => named("Push & pull request"),
            "manual" => named("Needs a person"),
            "escalation" => named("Escalation"),
            "memory" => named("Project memory"),
            "stall" => ApprovalWords {
                name: "Looks stuck",
                approve: "Continue",
                deny: "Interrupt",
                approved: "Continued",
                denied: "Interrupted",
                note: Some("Message to the agent (optional)"),
            },
            "budget" => ApprovalWords {
                name: "Spending cap",
                approve: "Raise cap",
                deny: "Stop task",
                approved: "Cap raised",
                denied: "Stopped",
                note: Some("Raise by, like $5 or 200k (optional)"),
            },
            _ => PLAIN,
        }
    }

    /// Whether its answers have words of their own (not Approve / Deny).
    pub fn names_its_answers(&self) -> bool {
        self.approve != PLAIN.approve
    }

    /// The button for `approve` (else deny).
    pub fn verb(&self, approve: bool) -> &'static str {
        if approve {
            self.approve
        } else {
            self.deny
        }
    }
}

/// What a watchdog `trigger` (a `stall` approval's `details.trigger`) saw, in words.
pub fn stall_trigger(trigger: &str) -> Option<&'static str> {
    Some(match trigger {
        "idle" => "no activity",
        "turn" => "a turn running too long",
        "repeated_call" => "the same call again and again",
        "repeated_failure" => "the same failing read or search again and again",
        "tokens_without_change" => "tokens spent without changing a file",
        _ => return None,
    })
}

/// Why a role moved to its fallback agent (an `agent_switched` trigger), in words.
pub fn switch_trigger(trigger: &str) -> Option<&'static str> {
    Some(match trigger {
        "usage_limit" => "usage limit reached",
        "rate_limited" => "rate-limited",
        "server_error" => "its provider fails",
        "cannot_start" => "it cannot start",
        _ => return None,
    })
}

/// Which spending cap a `budget` approval's `details.cap` names, in words.
pub fn budget_cap(cap: &str) -> Option<&'static str> {
    Some(match cap {
        "task_tokens" => "this task's tokens",
        "task_usd" => "this task's spending",
        "project_day_tokens" => "the project's tokens today",
        "project_day_usd" => "the project's spending today",
        _ => return None,
    })
}

/// All of it for the page: `{"kinds": {kind: words}, "triggers": {…}, "caps": {…}}`.
pub fn page_json() -> Value {
    let kinds: serde_json::Map<String, Value> = KINDS
        .iter()
        .map(|k| {
            (
                (*k).to_owned(),
                serde_json::to_value(ApprovalWords::of(k)).unwrap_or(Value::Null),
            )
        })
        .collect();
    let named = |names: &[&str], f: fn(&str) -> Option<&'static str>| -> Value {
        names
            .iter()
            .filter_map(|n| Some(((*n).to_owned(), Value::from(f(n)?))))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    serde_json::json!({
        "kinds": kinds,
        "triggers": named(&["idle", "turn", "repeated_call", "repeated_failure", "tokens_without_change"], stall_trigger),
        "caps": named(&["task_tokens", "task_usd", "project_day_tokens", "project_day_usd"], budget_cap),
        "switches": named(&["usage_limit", "rate_limited", "server_error", "cannot_start"], switch_trigger),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stall_and_budget_answers_say_what_they_do_and_others_approve_or_deny() {
        let stall = ApprovalWords::of("stall");
        assert_eq!(
            (stall.verb(true), stall.verb(false)),
            ("Continue", "Interrupt")
        );
        assert_eq!(stall.name, "Looks stuck");
        let budget = ApprovalWords::of("budget");
        assert_eq!((budget.approve, budget.deny), ("Raise cap", "Stop task"));
        assert_eq!(ApprovalWords::of("plan").approve, "Approve");
        assert!(stall.names_its_answers() && !ApprovalWords::of("tool").names_its_answers());
        assert_eq!(ApprovalWords::of("something-new").name, "Approval");
        let page = page_json();
        assert_eq!(page["kinds"]["stall"]["approve"], "Continue");
        assert_eq!(
            page["triggers"]["repeated_call"],
            "the same call again and again"
        );
        assert_eq!(
            page["caps"]["project_day_tokens"],
            "the project's tokens today"
        );
        assert_eq!(page["kinds"].as_object().unwrap().len(), KINDS.len());
    }
}
