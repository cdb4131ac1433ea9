//! Spending caps that pause, not kill (`[budget]`).
//!
//! Before every agent turn the engine adds up what the task spent (its step
//! receipts, [`gaffer_core::Spend`], plus the turns of the step running now) and
//! what the project's tasks spent this UTC day (the receipts of steps that ended
//! today), and compares them with the caps. A cap reached asks a person with one
//! `budget` approval and the task waits: approved, this task's cap is raised (by
//! the amount the note names, in the cap's unit — `$5`, `200k`, `1.5m tokens` —
//! else by the cap's own size) and the turn goes ahead; denied (or expired), the
//! step fails with what was spent, so the task stops with its worktree, commits and
//! journal as they are (`gaffer retry` starts over from the same request).
//!
//! During a turn too ([`MidTurn`]): whenever the agent reports what the turn spent
//! (each model call of the built-in loop, Claude Code's assistant messages, ACP
//! prompts), the turn's spend so far counts, so one long turn (a Claude owner's
//! whole subtask) cannot run past a cap. The question is asked while the turn goes
//! on; approved, it goes on raised; denied, the turn is interrupted and the step
//! fails as above, once the agent has reported the turn's final spend.
//!
//! Raises are read back from the journal (approved `budget` approvals of the task),
//! never kept in memory: a crash loses none and counts none twice. A dollar cap
//! needs known prices: while some tokens were spent on a model with no price the
//! task's cost is unknown and only token caps apply.

use crate::failure::{fail_spent, Failure};
use crate::Engine;
use gaffer_app::{ApprovalRequest, Subject};
use gaffer_core::{ApprovalKind, ApprovalState, Spend, Step, TaskState};
use serde_json::{json, Value};

mod mid_turn;
pub(crate) use mid_turn::MidTurn;

/// Approval keys of a step attempt's budget questions: `BUDGET_KEYS + attempt × 1000 + n`,
/// apart from its tool approvals (`attempt × 1000 + n`) and stall questions.
const BUDGET_KEYS: u32 = 2_000_000_000;

/// Which cap, in which unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cap {
    TaskTokens,
    TaskUsd,
    ProjectDayTokens,
    ProjectDayUsd,
}

impl Cap {
    const ALL: [Cap; 4] = [
        Cap::TaskTokens,
        Cap::TaskUsd,
        Cap::ProjectDayTokens,
        Cap::ProjectDayUsd,
    ];

    fn name(self) -> &'static str {
        match self {
            Cap::TaskTokens => "task_tokens",
            Cap::TaskUsd => "task_usd",
            Cap::ProjectDayTokens => "project_day_tokens",
            Cap::ProjectDayUsd => "project_day_usd",
        }
    }

    fn of_name(name: &str) -> Option<Cap> {
        Cap::ALL.into_iter().find(|c| c.name() == name)
    }

    fn usd(self) -> bool {
        matches!(self, Cap::TaskUsd | Cap::ProjectDayUsd)
    }

    fn limit(self, b: &gaffer_config::Budget) -> Option<f64> {
        match self {
            Cap::TaskTokens => b.task_tokens.map(|n| n as f64),
            Cap::TaskUsd => b.task_usd,
            Cap::ProjectDayTokens => b.project_day_tokens.map(|n| n as f64),
            Cap::ProjectDayUsd => b.project_day_usd,
        }
    }

    /// What was spent against this cap; `None` for dollars when the cost is unknown.
    fn spent(self, task: &Spend, day: &Spend) -> Option<f64> {
        let s = if matches!(self, Cap::TaskTokens | Cap::TaskUsd) {
            task
        } else {
            day
        };
        if self.usd() {
            s.cost_usd()
        } else {
            Some(s.tokens() as f64)
        }
    }

    /// An amount of this cap's unit, for people.
    fn amount(self, n: f64) -> String {
        if self.usd() {
            gaffer_core::format_usd(n)
        } else {
            format!("{} tokens", crate::watchdog::thousands(n.round() as u64))
        }
    }

    fn what(self) -> &'static str {
        match self {
            Cap::TaskTokens | Cap::TaskUsd => "this task",
            Cap::ProjectDayTokens | Cap::ProjectDayUsd => "the project's tasks today (UTC)",
        }
    }
}

/// A `budget` approval requested for a cap reached.
pub(crate) struct Asked {
    pub(crate) approval: String,
    pub(crate) hit: Reached,
}

impl Asked {
    /// Why the step stops when the person said stop (or nobody answered).
    pub(crate) fn stopped(&self, resolution: &gaffer_app::Resolution) -> String {
        format!(
            "stopped at the {} cap ({} spent of {}): {}",
            self.hit.cap.name(),
            self.hit.cap.amount(self.hit.spent),
            self.hit.cap.amount(self.hit.limit),
            resolution.reason()
        )
    }
}

/// A cap reached.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Reached {
    pub(crate) cap: Cap,
    /// The cap with this task's raises.
    pub(crate) limit: f64,
    pub(crate) spent: f64,
    /// What an approval without an amount raises it by: the configured cap.
    pub(crate) default_raise: f64,
}

impl Reached {
    /// The approval's question; `during`: the step's turn runs now (it goes on while
    /// asked), else the next one waits.
    pub(crate) fn summary(&self, step: &str, during: bool) -> String {
        let when = if during {
            format!("during `{step}` (its turn goes on until you answer)")
        } else {
            format!("before `{step}`")
        };
        format!(
            "Spending cap reached: {} spent {} of {} {when} (`{}` in [budget]). Raise the cap to go on (by the amount in your note, like {}, else by {}), or stop the task (its work is kept).",
            self.cap.what(),
            self.cap.amount(self.spent),
            self.cap.amount(self.limit),
            self.cap.name(),
            if self.cap.usd() { "\"$5\"" } else { "\"200k\"" },
            self.cap.amount(self.default_raise),
        )
    }
}

/// The first cap reached, given the caps, the task's raises so far, and what the
/// task and the project's tasks today spent. Pure.
pub(crate) fn reached(
    caps: &gaffer_config::Budget,
    raises: &[(Cap, f64)],
    task: &Spend,
    day: &Spend,
) -> Option<Reached> {
    Cap::ALL.into_iter().find_map(|cap| {
        let base = cap.limit(caps)?;
        let raised: f64 = raises
            .iter()
            .filter(|(c, _)| *c == cap)
            .map(|(_, n)| n)
            .sum();
        let limit = base + raised;
        let spent = cap.spent(task, day)?;
        (spent >= limit).then_some(Reached {
            cap,
            limit,
            spent,
            default_raise: base,
        })
    })
}

/// The amount a decider's note names, in the unit of `cap`: `$5`, `5 usd`, `2.5`,
/// `200k`, `1.5m tokens`, `+300000`; the first number in the note. `None` when it
/// names none (or a non-positive one).
pub(crate) fn amount_in_note(note: &str, cap: Cap) -> Option<f64> {
    let bytes = note.as_bytes();
    let start = bytes.iter().position(u8::is_ascii_digit)?;
    let end = bytes[start..]
        .iter()
        .position(|b| !(b.is_ascii_digit() || *b == b'.' || *b == b','))
        .map_or(bytes.len(), |n| start + n);
    let number: f64 = note[start..end]
        .replace(',', "")
        .trim_end_matches('.')
        .parse()
        .ok()?;
    let scale = if cap.usd() {
        1.0
    } else {
        // `k` / `m` as a unit of their own (`200k`, `1.5 M tokens`), not a word's start.
        let mut rest = note[end..].trim_start().chars();
        match (rest.next(), rest.next()) {
            (Some('k' | 'K'), next) if !next.is_some_and(char::is_alphabetic) => 1e3,
            (Some('m' | 'M'), next) if !next.is_some_and(char::is_alphabetic) => 1e6,
            _ => 1.0,
        }
    };
    let n = number * scale;
    (n.is_finite() && n > 0.0).then_some(n)
}

/// The raises granted to `task`: each approved `budget` approval, by the amount its
/// note names or its default.
pub(crate) fn raises(task: &TaskState) -> Vec<(Cap, f64)> {
    task.approvals
        .values()
        .filter(|a| a.kind == ApprovalKind::Budget && a.state == ApprovalState::Approved)
        .filter_map(|a| {
            let cap = Cap::of_name(a.details.get("cap")?.as_str()?)?;
            let default = a.details.get("default_raise")?.as_f64()?;
            let by = a
                .note
                .as_deref()
                .and_then(|n| amount_in_note(n, cap))
                .unwrap_or(default);
            Some((cap, by))
        })
        .collect()
}

/// What `task` spent: its receipts.
fn task_spend(task: &TaskState) -> Spend {
    Spend::of_receipts(task.steps.values().filter_map(|s| s.receipt.as_ref()))
}

/// The start of today (UTC), in ms.
fn day_start(now_ms: i64) -> i64 {
    now_ms - now_ms.rem_euclid(86_400_000)
}

impl Engine {
    /// Before an agent turn of `step`: when a cap is reached, ask a person and wait;
    /// go on once within the caps (raised), or fail the step when they say stop.
    /// `in_flight` is what the step's turns spent so far (not in a receipt yet).
    pub(crate) async fn within_budget(
        &self,
        task: &TaskState,
        step: &Step,
        in_flight: &gaffer_agents::Usage,
    ) -> Result<(), Failure> {
        let caps = self.caps(task).await?;
        if !caps.any() {
            return Ok(());
        }
        while let Some(asked) = self
            .ask_if_over(task, step, &caps, in_flight, false)
            .await?
        {
            let resolution = self
                .app
                .wait_for_decision(&asked.approval)
                .await
                .map_err(crate::error::EngineError::from)?;
            if !resolution.approved() {
                return Err(fail_spent(asked.stopped(&resolution), in_flight));
            }
        }
        Ok(())
    }

    /// The caps of `task`'s project.
    pub(crate) async fn caps(&self, task: &TaskState) -> Result<gaffer_config::Budget, Failure> {
        let project = self.project(task).await?;
        Ok(self.settings.budget_for(&project.name))
    }

    /// When a cap is reached, with `in_flight` spent by the step's turns and not in a
    /// receipt yet: one `budget` approval requested (not waited for). `during`: the
    /// step's turn runs now (else the next is about to start).
    pub(crate) async fn ask_if_over(
        &self,
        task: &TaskState,
        step: &Step,
        caps: &gaffer_config::Budget,
        in_flight: &gaffer_agents::Usage,
        during: bool,
    ) -> Result<Option<Asked>, Failure> {
        let in_flight = serde_json::to_value(in_flight)
            .map(|u| Spend::of_usage(&u))
            .unwrap_or_default();
        let Some((now_task, _)) = self.load(&task.id).await? else {
            return Ok(None);
        };
        let spent = task_spend(&now_task) + in_flight;
        let day = if caps.project_day_tokens.is_some() || caps.project_day_usd.is_some() {
            self.project_day_spend(&now_task).await? + in_flight
        } else {
            Spend::default()
        };
        let Some(hit) = reached(caps, &raises(&now_task), &spent, &day) else {
            return Ok(None);
        };
        tracing::info!(task = %task.id, step = %step.id, cap = hit.cap.name(), during, "spending cap reached; asking a person");
        let asked = now_task
            .approvals
            .values()
            .filter(|a| a.step_id == step.id && a.kind == ApprovalKind::Budget)
            .count() as u32;
        let key = BUDGET_KEYS + step.attempt * 1000 + asked + 1;
        let details = json!({
            "cap": hit.cap.name(),
            "limit": hit.limit,
            "spent": hit.spent,
            "default_raise": hit.default_raise,
            "unit": if hit.cap.usd() { "usd" } else { "tokens" },
            "step": step.id,
            "during_turn": during,
            "task_spend": spend_json(&spent),
            "choices": { "approve": "raise this task's cap", "deny": "stop the task" },
        });
        let approval = self
            .app
            .request_approval(ApprovalRequest {
                task_id: task.id.clone(),
                step_id: step.id.clone(),
                attempt: key,
                kind: ApprovalKind::Budget,
                summary: hit.summary(&step.name, during),
                details,
                subject: Subject::default(),
            })
            .await
            .map_err(crate::error::EngineError::from)?;
        Ok(Some(Asked {
            approval: approval.id,
            hit,
        }))
    }

    /// What the project's tasks spent today (UTC): the receipts of their steps that
    /// ended today, of every task of the project however old.
    async fn project_day_spend(&self, task: &TaskState) -> Result<Spend, Failure> {
        let since = day_start(gaffer_store::now_ms());
        let receipts = self
            .journal()
            .project_receipts_since(task.project_id.as_str(), since)
            .await
            .map_err(crate::error::EngineError::from)?;
        Ok(receipts
            .iter()
            .filter_map(|r| serde_json::from_str::<Value>(r).ok())
            .map(|r| Spend::of_receipt(&r))
            .sum())
    }
}

fn spend_json(s: &Spend) -> Value {
    json!({ "tokens": s.tokens(), "cost_usd": s.cost_usd() })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use pretty_assertions::assert_eq;

    fn spend(tokens: u64, usd: Option<f64>) -> Spend {
        let mut u = json!({ "input_tokens": tokens });
        if let Some(c) = usd {
            u["cost_usd"] = json!(c);
        }
        Spend::of_usage(&u)
    }

    #[test]
    fn a_cap_is_reached_at_its_limit_and_raises_move_it() {
        let caps = gaffer_config::Budget {
            task_tokens: Some(1000),
            task_usd: Some(2.0),
            ..Default::default()
        };
        let none = Spend::default();
        assert_eq!(reached(&caps, &[], &spend(999, Some(1.0)), &none), None);
        let hit = reached(&caps, &[], &spend(1000, Some(1.0)), &none).unwrap();
        assert_eq!(
            (hit.cap, hit.limit, hit.spent, hit.default_raise),
            (Cap::TaskTokens, 1000.0, 1000.0, 1000.0)
        );
        // Raised by 500 tokens: the token cap is 1500; the dollar cap is next.
        let raised = [(Cap::TaskTokens, 500.0)];
        assert_eq!(
            reached(&caps, &raised, &spend(1400, Some(1.99)), &none),
            None
        );
        let usd = reached(&caps, &raised, &spend(1400, Some(2.5)), &none).unwrap();
        assert_eq!((usd.cap, usd.spent), (Cap::TaskUsd, 2.5));
        // Cost unknown: only token caps can be judged.
        assert_eq!(reached(&caps, &raised, &spend(1400, None), &none), None);
    }

    #[test]
    fn the_project_day_caps_count_the_days_spend() {
        let caps = gaffer_config::Budget {
            project_day_usd: Some(10.0),
            ..Default::default()
        };
        let task = spend(10, Some(0.5));
        assert_eq!(reached(&caps, &[], &task, &spend(10, Some(9.99))), None);
        let hit = reached(&caps, &[], &task, &spend(10, Some(10.0))).unwrap();
        assert_eq!(hit.cap, Cap::ProjectDayUsd);
        // In words a person reads on a phone; the config key only to find it.
        assert_eq!(
            hit.summary("owner", false),
            "Spending cap reached: the project's tasks today (UTC) spent $10.00 of $10.00 before `owner` (`project_day_usd` in [budget]). Raise the cap to go on (by the amount in your note, like \"$5\", else by $10.00), or stop the task (its work is kept)."
        );
        assert_eq!(
            reached(
                &caps,
                &[(Cap::ProjectDayUsd, 5.0)],
                &task,
                &spend(10, Some(14.0))
            ),
            None
        );
    }

    #[test]
    fn a_note_names_the_raise_in_the_caps_unit() {
        assert_eq!(amount_in_note("$5", Cap::TaskUsd), Some(5.0));
        assert_eq!(
            amount_in_note("raise by 2.50 usd please", Cap::TaskUsd),
            Some(2.5)
        );
        assert_eq!(amount_in_note("200k", Cap::TaskTokens), Some(200_000.0));
        assert_eq!(
            amount_in_note("+1.5M tokens", Cap::ProjectDayTokens),
            Some(1_500_000.0)
        );
        assert_eq!(
            amount_in_note("300,000 more", Cap::TaskTokens),
            Some(300_000.0)
        );
        assert_eq!(amount_in_note("go on", Cap::TaskTokens), None);
        assert_eq!(amount_in_note("0", Cap::TaskUsd), None);
    }

    #[test]
    fn the_day_starts_at_midnight_utc() {
        // 2026-12-02T07:30:00Z
        let t = 1_796_196_600_000;
        assert_eq!(day_start(t), 1_796_169_600_000);
        assert_eq!(day_start(day_start(t)), day_start(t));
    }
}
