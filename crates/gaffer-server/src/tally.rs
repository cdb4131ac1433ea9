//! The work's metrics folded from the journal: step and turn durations, tokens and
//! cost by role, agent and model.
//!
//! Every scrape first folds the events appended since the last one (by global
//! position, from every process sharing the journal), so the numbers are the
//! journal's own: the same on every `serve` of one journal, and right after a
//! restart, when the first scrape folds the journal from its start. Labels come
//! from bounded sets only (step kinds the engine names, roles, configured agents
//! and models), never task or step ids.

use gaffer_core::{Event, Spend};
use gaffer_store::RecordedEvent;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;

/// Seconds a step ran, from its start to its end: a second to two hours (a step
/// waiting for a person's approval counts its wait).
const STEP_BUCKETS: [f64; 11] = [
    1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0,
];

/// Seconds one agent turn took: a second to an hour.
const TURN_BUCKETS: [f64; 10] = [
    1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 3600.0,
];

/// What the journal says about an agent turn's who: role, agent and model
/// (`default` when none was configured, `unknown` in journals older than the
/// `turn_ended` record).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Who {
    role: String,
    agent: String,
    model: String,
}

/// Observations in fixed buckets.
#[derive(Debug, Clone, Default)]
pub(crate) struct Histogram {
    /// Per bucket, not cumulative.
    counts: Vec<u64>,
    count: u64,
    sum: f64,
}

impl Histogram {
    pub(crate) fn observe(&mut self, bounds: &[f64], value: f64) {
        if self.counts.len() != bounds.len() {
            self.counts = vec![0; bounds.len()];
        }
        if let Some(i) = bounds.iter().position(|b| value <= *b) {
            self.counts[i] += 1;
        }
        self.count += 1;
        self.sum += value;
    }

    /// The series of one labelled histogram (`labels` as `k="v",…` or empty):
    /// cumulative buckets, `+Inf`, sum and count.
    pub(crate) fn render(&self, out: &mut String, name: &str, labels: &str, bounds: &[f64]) {
        let sep = if labels.is_empty() { "" } else { "," };
        let mut cumulative = 0;
        for (i, b) in bounds.iter().enumerate() {
            cumulative += self.counts.get(i).copied().unwrap_or(0);
            let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"{b}\"}} {cumulative}");
        }
        let _ = writeln!(
            out,
            "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {}",
            self.count
        );
        let braces = |l: &str| {
            if l.is_empty() {
                String::new()
            } else {
                format!("{{{l}}}")
            }
        };
        let _ = writeln!(out, "{name}_sum{} {}", braces(labels), self.sum);
        let _ = writeln!(out, "{name}_count{} {}", braces(labels), self.count);
    }
}

/// Tokens and money by who spent them.
#[derive(Debug, Clone, Default)]
struct Spent {
    /// The steps whose cost is known.
    priced: Spend,
    /// Every token, of priced steps and unpriced ones.
    tokens: Spend,
    /// Steps that spent tokens on a model with no known price.
    unpriced_steps: u64,
}

/// The fold. `after` is the last position folded.
#[derive(Debug, Default)]
pub struct Tally {
    pub(crate) after: i64,
    /// Running steps: (task, step) → when it started.
    started: HashMap<(String, String), i64>,
    /// Open sessions: id → (task, role, agent).
    sessions: HashMap<String, (String, String, String)>,
    /// Who ran a step's last turn, until the step ends.
    step_who: HashMap<(String, String), Who>,
    steps: BTreeMap<(String, &'static str), Histogram>,
    turns: BTreeMap<(String, String), Histogram>,
    spent: BTreeMap<Who, Spent>,
}

/// A step's kind: its id up to the `/` (`code/2` → `code`). Step ids are the
/// engine's, from a fixed set of kinds; anything else is `other`, so a label's
/// values stay few.
fn step_kind(step_id: &str) -> String {
    let kind = step_id.split('/').next().unwrap_or_default();
    if !kind.is_empty()
        && kind.len() <= 24
        && kind.bytes().all(|b| b.is_ascii_lowercase() || b == b'-')
    {
        kind.to_owned()
    } else {
        "other".to_owned()
    }
}

impl Tally {
    /// Folds one event (events arrive in position order).
    pub fn apply(&mut self, e: &RecordedEvent) {
        self.after = self.after.max(e.pos);
        let task = &e.stream_id;
        let key = |step: &str| (task.clone(), step.to_owned());
        match &e.event {
            Event::StepStarted { step_id } => {
                self.started.insert(key(step_id.as_str()), e.at);
            }
            Event::StepCompleted { step_id, receipt } => {
                self.ended(
                    key(step_id.as_str()),
                    e.at,
                    "completed",
                    Spend::of_receipt(receipt),
                );
            }
            Event::StepFailed { step_id, usage, .. } => {
                let spend = usage.as_ref().map(Spend::of_usage).unwrap_or_default();
                self.ended(key(step_id.as_str()), e.at, "failed", spend);
            }
            Event::StepInterrupted { step_id } => {
                // The process died: no duration to tell, and the step starts again.
                self.started.remove(&key(step_id.as_str()));
            }
            Event::SessionStarted {
                session_id,
                agent,
                role,
                step_id,
                ..
            } => {
                let who = (role.as_str().to_owned(), agent.clone());
                if let Some(step) = step_id {
                    self.step_who.entry(key(step.as_str())).or_insert(Who {
                        role: who.0.clone(),
                        agent: who.1.clone(),
                        model: "unknown".into(),
                    });
                }
                self.sessions
                    .insert(session_id.0.clone(), (task.clone(), who.0, who.1));
            }
            Event::SessionEnded { session_id, .. } => {
                self.sessions.remove(&session_id.0);
            }
            Event::AgentActivity { step_id, activity } if activity["type"] == "turn_ended" => {
                self.turn_ended(key(step_id.as_str()), activity);
            }
            // A task that ends with work still open (cancelled mid-step, a session
            // never ended) ends it all: nothing of it is kept.
            Event::TaskDone { .. } | Event::TaskFailed { .. } | Event::TaskCancelled { .. } => {
                self.started.retain(|(t, _), _| t != task);
                self.step_who.retain(|(t, _), _| t != task);
                self.sessions.retain(|_, (t, _, _)| t != task);
            }
            _ => {}
        }
    }

    fn turn_ended(&mut self, step: (String, String), activity: &Value) {
        let Some((_, role, agent)) = activity["session_id"]
            .as_str()
            .and_then(|s| self.sessions.get(s))
            .cloned()
        else {
            return;
        };
        let secs = activity["duration_ms"].as_u64().unwrap_or(0) as f64 / 1e3;
        self.turns
            .entry((role.clone(), agent.clone()))
            .or_default()
            .observe(&TURN_BUCKETS, secs);
        let model = activity["model"].as_str().unwrap_or("default").to_owned();
        self.step_who.insert(step, Who { role, agent, model });
    }

    fn ended(&mut self, step: (String, String), at: i64, outcome: &'static str, spend: Spend) {
        if let Some(started) = self.started.remove(&step) {
            self.steps
                .entry((step_kind(&step.1), outcome))
                .or_default()
                .observe(&STEP_BUCKETS, (at - started).max(0) as f64 / 1e3);
        }
        let who = self.step_who.remove(&step);
        if spend == Spend::default() {
            return;
        }
        let who = who.unwrap_or(Who {
            role: "unknown".into(),
            agent: "unknown".into(),
            model: "unknown".into(),
        });
        let spent = self.spent.entry(who).or_default();
        spent.tokens += spend;
        if spend.cost_usd().is_some() {
            spent.priced += spend;
        } else {
            spent.unpriced_steps += 1;
        }
    }

    /// The work's series in the exposition format.
    pub fn render(&self, out: &mut String) {
        let _ = writeln!(out, "# HELP gaffer_step_duration_seconds Time from a step's start to its end, by step kind and outcome (completed or failed), over the whole journal.\n# TYPE gaffer_step_duration_seconds histogram");
        for ((kind, outcome), h) in &self.steps {
            let labels = format!(
                "kind=\"{}\",outcome=\"{outcome}\"",
                crate::metrics::label(kind)
            );
            h.render(out, "gaffer_step_duration_seconds", &labels, &STEP_BUCKETS);
        }
        let _ = writeln!(out, "# HELP gaffer_turn_duration_seconds Time of one agent turn (prompt to answer), by role and agent.\n# TYPE gaffer_turn_duration_seconds histogram");
        for ((role, agent), h) in &self.turns {
            let labels = format!(
                "role=\"{}\",agent=\"{}\"",
                crate::metrics::label(role),
                crate::metrics::label(agent)
            );
            h.render(out, "gaffer_turn_duration_seconds", &labels, &TURN_BUCKETS);
        }
        let who_labels = |w: &Who| {
            format!(
                "role=\"{}\",agent=\"{}\",model=\"{}\"",
                crate::metrics::label(&w.role),
                crate::metrics::label(&w.agent),
                crate::metrics::label(&w.model)
            )
        };
        let _ = writeln!(out, "# HELP gaffer_tokens_total Tokens agents spent (the steps' recorded usage, as a task's cost counts it), by role, agent, model and type (input, output, cached_input).\n# TYPE gaffer_tokens_total counter");
        for (who, s) in &self.spent {
            let l = who_labels(who);
            for (kind, n) in [
                ("input", s.tokens.input_tokens),
                ("output", s.tokens.output_tokens),
                ("cached_input", s.tokens.cached_input_tokens),
            ] {
                let _ = writeln!(out, "gaffer_tokens_total{{{l},type=\"{kind}\"}} {n}");
            }
        }
        let _ = writeln!(out, "# HELP gaffer_cost_usd_total US dollars agents spent, of the steps whose model has a known price, by role, agent and model.\n# TYPE gaffer_cost_usd_total counter");
        for (who, s) in &self.spent {
            let _ = writeln!(
                out,
                "gaffer_cost_usd_total{{{}}} {}",
                who_labels(who),
                s.priced.cost_usd().unwrap_or(0.0)
            );
        }
        let _ = writeln!(out, "# HELP gaffer_unpriced_steps_total Steps that spent tokens on a model with no known price (their cost is not in gaffer_cost_usd_total).\n# TYPE gaffer_unpriced_steps_total counter");
        for (who, s) in &self.spent {
            let _ = writeln!(
                out,
                "gaffer_unpriced_steps_total{{{}}} {}",
                who_labels(who),
                s.unpriced_steps
            );
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use gaffer_core::{Role, SessionId};
    use serde_json::json;

    fn rec(pos: i64, at: i64, stream: &str, event: Event) -> RecordedEvent {
        RecordedEvent {
            pos,
            stream_id: stream.into(),
            seq: pos,
            at,
            event,
            hash: String::new(),
        }
    }

    #[test]
    fn a_steps_spend_goes_to_who_ran_its_last_turn_and_its_time_to_its_kind() {
        let mut t = Tally::default();
        let events = [
            Event::StepStarted {
                step_id: "code/1".into(),
            },
            Event::SessionStarted {
                session_id: SessionId("s-1".into()),
                agent: "claude".into(),
                role: Role::Owner,
                workspace_key: "/w".into(),
                agent_session_id: None,
                step_id: Some("code/1".into()),
            },
            Event::AgentActivity {
                step_id: "code/1".into(),
                activity: json!({"type": "turn_ended", "session_id": "s-1", "model": "opus", "duration_ms": 2500, "status": "completed"}),
            },
            Event::SessionEnded {
                session_id: SessionId("s-1".into()),
                reason: "done".into(),
            },
            Event::StepCompleted {
                step_id: "code/1".into(),
                receipt: json!({"usage": {"input_tokens": 10, "output_tokens": 5, "cost_usd": 0.25}}),
            },
            // Another task's step with the same id, failing with unpriced usage.
            Event::StepStarted {
                step_id: "code/1".into(),
            },
            Event::StepFailed {
                step_id: "code/1".into(),
                error: "no".into(),
                usage: Some(json!({"input_tokens": 7})),
            },
        ];
        for (i, e) in events.into_iter().enumerate() {
            let stream = if i < 5 { "t-1" } else { "t-2" };
            t.apply(&rec(i as i64 + 1, 1_000 * (i as i64 + 1), stream, e));
        }
        assert_eq!(t.after, 7);
        let owner = Who {
            role: "owner".into(),
            agent: "claude".into(),
            model: "opus".into(),
        };
        let s = &t.spent[&owner];
        assert_eq!(
            (s.tokens.tokens(), s.priced.cost_usd(), s.unpriced_steps),
            (15, Some(0.25), 0)
        );
        let unknown = &t.spent[&Who {
            role: "unknown".into(),
            agent: "unknown".into(),
            model: "unknown".into(),
        }];
        assert_eq!((unknown.tokens.tokens(), unknown.unpriced_steps), (7, 1));
        let done = &t.steps[&("code".to_owned(), "completed")];
        assert_eq!((done.count, done.sum), (1, 4.0));
        assert_eq!(t.steps[&("code".to_owned(), "failed")].sum, 1.0);
        assert_eq!(t.turns[&("owner".to_owned(), "claude".to_owned())].sum, 2.5);
        assert!(
            t.started.is_empty() && t.sessions.is_empty() && t.step_who.is_empty(),
            "nothing kept for ended work"
        );
    }

    /// A task that ends while a step runs (cancelled, or its session never ended)
    /// leaves nothing behind: the fold keeps only the work still open.
    #[test]
    fn a_finished_tasks_open_steps_and_sessions_are_dropped() {
        let mut t = Tally::default();
        let events = [
            Event::StepStarted {
                step_id: "code/1".into(),
            },
            Event::SessionStarted {
                session_id: SessionId("s-1".into()),
                agent: "claude".into(),
                role: Role::Owner,
                workspace_key: "/w".into(),
                agent_session_id: None,
                step_id: Some("code/1".into()),
            },
            Event::TaskCancelled {
                by: gaffer_core::Actor::user("ann", "cli"),
                reason: None,
            },
        ];
        for (i, e) in events.into_iter().enumerate() {
            t.apply(&rec(i as i64 + 1, 1_000, "t-1", e));
        }
        assert!(
            t.started.is_empty() && t.sessions.is_empty() && t.step_who.is_empty(),
            "{t:?}"
        );
    }

    #[test]
    fn step_kinds_are_a_bounded_set() {
        assert_eq!(step_kind("review/3"), "review");
        assert_eq!(step_kind("plan-approval"), "plan-approval");
        assert_eq!(step_kind("t-019a2b"), "other");
        assert_eq!(step_kind("Évil\"/1"), "other");
    }
}
