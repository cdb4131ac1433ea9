//! The watchdog: when a running agent looks stuck, a person is asked.
//!
//! [`Watchdog`] is pure: it is fed the session's agent events and the time, and
//! says what it saw ([`Stall`]); [`crate::stall`] asks the `stall` approval and
//! acts on the answer, with the timers at that edge. The triggers (`[watchdog]`):
//!
//! | trigger | seen when | once per |
//! |---|---|---|
//! | `idle` | no agent event for `idle` during a turn (time spent waiting for a person's tool approval does not count) | turn, and again `idle` after each "continue" |
//! | `turn` | a turn running longer than `turn` (approval waits not counted) | turn, and again `turn` after each "continue" |
//! | `repeated_call` | the same tool with the same input `repeated_calls` times in the session | distinct call |
//! | `repeated_failure` | the same read or search (same tool, same input) failing `repeated_failures` times | distinct call |
//! | `tokens_without_change` | a writing role's session spent `tokens_without_change` tokens since its last file change (or its start) | file change |
//!
//! A call that was already reported under one trigger is not reported again under
//! the other. A person who answers "continue" to a time trigger
//! ([`Watchdog::continued`]) is asked again if the agent is still idle (or still
//! running) a whole `idle` (or `turn`) after the answer: a long turn can stall more
//! than once. Tokens are counted when the agent reports usage: each model call of
//! the built-in loop and Claude Code (its spend so far, `UsageSoFar`), each prompt
//! of an ACP agent, each turn of Codex.

use gaffer_agents::AgentEvent;
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

/// What the watchdog saw.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Stall {
    /// `idle`, `turn`, `repeated_call`, `repeated_failure`, `tokens_without_change`.
    pub(crate) trigger: &'static str,
    /// What was seen, in words a person judges it by.
    pub(crate) seen: String,
    /// The facts behind it (tool, input, count, tokens, durations), for the approval.
    pub(crate) facts: Value,
}

/// One session's watchdog state.
pub(crate) struct Watchdog {
    cfg: gaffer_config::Watchdog,
    /// The session's role writes files (the tokens trigger only watches those).
    writes: bool,
    /// When the turn started, or when a person last said to continue it after it
    /// ran too long: what the `turn` trigger counts from.
    turn_started: Option<Instant>,
    last_activity: Option<Instant>,
    /// Tool approvals the agent waits on now, and since when the first did.
    waiting: usize,
    waiting_since: Option<Instant>,
    /// Time this turn spent waiting for people's tool approvals.
    waited: Duration,
    calls: HashMap<String, u32>,
    failures: HashMap<String, (u32, String)>,
    /// Call id → (tool, call key), to match results to calls.
    open_calls: HashMap<String, (String, String)>,
    tokens_since_change: u64,
    /// Of them, the running turn's spend so far the agent reported
    /// ([`AgentEvent::UsageSoFar`]), which its next `Usage` replaces.
    provisional: u64,
    changes: u32,
    /// Sightings already reported (their dedup keys).
    reported: HashSet<String>,
    /// The time triggers reported and not answered "continue" since, this turn.
    idle_reported: bool,
    turn_reported: bool,
}

impl Watchdog {
    pub(crate) fn new(cfg: gaffer_config::Watchdog, writes: bool) -> Self {
        Self {
            cfg,
            writes,
            turn_started: None,
            last_activity: None,
            waiting: 0,
            waiting_since: None,
            waited: Duration::ZERO,
            calls: HashMap::new(),
            failures: HashMap::new(),
            open_calls: HashMap::new(),
            tokens_since_change: 0,
            provisional: 0,
            changes: 0,
            reported: HashSet::new(),
            idle_reported: false,
            turn_reported: false,
        }
    }

    /// A turn was sent to the agent.
    pub(crate) fn turn_started(&mut self, now: Instant) {
        self.turn_started = Some(now);
        self.last_activity = Some(now);
        self.waiting = 0;
        self.waiting_since = None;
        self.waited = Duration::ZERO;
        self.provisional = 0;
        self.idle_reported = false;
        self.turn_reported = false;
    }

    /// A person answered "continue" at `now` to what `trigger` saw: a time trigger
    /// may be met again, counted from the answer (the others are once per call or
    /// per file change, whatever the answer).
    pub(crate) fn continued(&mut self, trigger: &str, now: Instant) {
        match trigger {
            "idle" if self.idle_reported && self.turn_started.is_some() => {
                self.idle_reported = false;
                self.last_activity = self.last_activity.max(Some(now));
            }
            "turn" if self.turn_reported && self.turn_started.is_some() => {
                self.turn_reported = false;
                self.turn_started = Some(now);
                self.waited = Duration::ZERO;
                if self.waiting_since.is_some() {
                    self.waiting_since = Some(now);
                }
            }
            _ => {}
        }
    }

    /// The turn ended: the time triggers rest until the next one.
    pub(crate) fn turn_ended(&mut self) {
        self.turn_started = None;
        self.last_activity = None;
    }

    /// The agent did something.
    pub(crate) fn observe(&mut self, event: &AgentEvent, now: Instant) {
        match event {
            AgentEvent::PermissionRequested { .. } => {
                if self.waiting == 0 {
                    self.waiting_since = Some(now);
                }
                self.waiting += 1;
            }
            AgentEvent::PermissionResolved { .. } => {
                self.waiting = self.waiting.saturating_sub(1);
                if self.waiting == 0 {
                    if let Some(since) = self.waiting_since.take() {
                        self.waited += now.saturating_duration_since(since);
                    }
                }
            }
            AgentEvent::ToolCall {
                call_id,
                name,
                input,
            } => {
                let key = call_key(name, input);
                *self.calls.entry(key.clone()).or_default() += 1;
                self.open_calls.insert(call_id.clone(), (name.clone(), key));
            }
            AgentEvent::ToolResult {
                call_id,
                output,
                is_error,
            } => {
                if let Some((tool, key)) = self.open_calls.remove(call_id) {
                    if *is_error && reads_or_searches(&tool, &key) {
                        let entry = self.failures.entry(key).or_default();
                        entry.0 += 1;
                        entry.1 = crate::prompts::head(output.trim(), 200);
                    }
                }
            }
            AgentEvent::FileChange { .. } => {
                self.tokens_since_change = 0;
                self.changes += 1;
            }
            // The spend so far counts as it grows; the turn's `Usage` then adds only
            // what it did not cover.
            AgentEvent::UsageSoFar { usage } => {
                let so_far = tokens(usage);
                self.tokens_since_change += so_far.saturating_sub(self.provisional);
                self.provisional = self.provisional.max(so_far);
            }
            AgentEvent::Usage { usage } => {
                self.tokens_since_change +=
                    tokens(usage).saturating_sub(std::mem::take(&mut self.provisional));
            }
            _ => {}
        }
        if self.turn_started.is_some() {
            self.last_activity = Some(now);
        }
    }

    /// The first sighting at `now` not reported yet, now reported.
    pub(crate) fn check(&mut self, now: Instant) -> Option<Stall> {
        if let (Some(limit), Some(at)) = (self.cfg.idle, self.idle_due()) {
            if now >= at && !std::mem::replace(&mut self.idle_reported, true) {
                return Some(Stall {
                    trigger: "idle",
                    seen: format!(
                        "no activity from the agent for {} during its turn",
                        human(limit)
                    ),
                    facts: json!({ "idle_secs": limit.as_secs_f64() }),
                });
            }
        }
        if let (Some(limit), Some(at)) = (self.cfg.turn, self.turn_due()) {
            if now >= at && !std::mem::replace(&mut self.turn_reported, true) {
                return Some(Stall {
                    trigger: "turn",
                    seen: format!("the agent's turn has run longer than {}", human(limit)),
                    facts: json!({ "turn_secs": limit.as_secs_f64() }),
                });
            }
        }
        if let Some(k) = self.cfg.repeated_failures {
            let mut failing: Vec<_> = self
                .failures
                .iter()
                .filter(|(key, (n, _))| *n >= k && !self.reported.contains(&call(key)))
                .map(|(key, (n, error))| (key.clone(), *n, error.clone()))
                .collect();
            failing.sort();
            if let Some((key, n, error)) = failing.into_iter().next() {
                self.report(call(&key));
                let (tool, input) = split_key(&key);
                return Some(Stall {
                    trigger: "repeated_failure",
                    seen: format!(
                        "the agent's {tool} {} failed the same way {n} times: {error}",
                        input_words(input)
                    ),
                    facts: json!({ "tool": tool, "input": input, "count": n, "error": error }),
                });
            }
        }
        if let Some(k) = self.cfg.repeated_calls {
            let mut repeated: Vec<_> = self
                .calls
                .iter()
                .filter(|(key, n)| **n >= k && !self.reported.contains(&call(key)))
                .map(|(key, n)| (key.clone(), *n))
                .collect();
            repeated.sort();
            if let Some((key, n)) = repeated.into_iter().next() {
                self.report(call(&key));
                let (tool, input) = split_key(&key);
                return Some(Stall {
                    trigger: "repeated_call",
                    seen: format!(
                        "the agent called {tool} with the same input {n} times: {}",
                        input_words(input)
                    ),
                    facts: json!({ "tool": tool, "input": input, "count": n }),
                });
            }
        }
        if let Some(limit) = self.cfg.tokens_without_change.filter(|_| self.writes) {
            if self.tokens_since_change >= limit && self.report(format!("tokens:{}", self.changes))
            {
                let what = if self.changes == 0 {
                    "without changing a file"
                } else {
                    "since its last file change"
                };
                return Some(Stall {
                    trigger: "tokens_without_change",
                    seen: format!(
                        "the agent spent {} tokens {what}",
                        thousands(self.tokens_since_change)
                    ),
                    facts: json!({ "tokens": self.tokens_since_change, "limit": limit }),
                });
            }
        }
        None
    }

    /// Record `key` as reported; false when it already was.
    fn report(&mut self, key: String) -> bool {
        self.reported.insert(key)
    }

    /// When the idle trigger is met, if it can be (a turn runs, no person is asked).
    fn idle_due(&self) -> Option<Instant> {
        if self.waiting > 0 {
            return None;
        }
        Some(self.last_activity? + self.cfg.idle?)
    }

    fn turn_due(&self) -> Option<Instant> {
        if self.waiting > 0 {
            return None;
        }
        Some(self.turn_started? + self.cfg.turn? + self.waited)
    }

    /// The next moment a time trigger not reported yet is met, if any.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        let idle = self.idle_due().filter(|_| !self.idle_reported);
        let turn = self.turn_due().filter(|_| !self.turn_reported);
        match (idle, turn) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

fn tokens(usage: &gaffer_agents::Usage) -> u64 {
    usage.input_tokens + usage.output_tokens + usage.cached_input_tokens
}

/// The dedup key of a call sighting (one report per call, whichever trigger).
fn call(key: &str) -> String {
    format!("call:{key}")
}

/// One tool call, as the watchdog compares them: the tool and its whole input.
fn call_key(tool: &str, input: &Value) -> String {
    format!("{tool}\u{0}{input}")
}

fn split_key(key: &str) -> (&str, &str) {
    key.split_once('\u{0}').unwrap_or((key, ""))
}

/// A call's input as a person reads it in the stall's question (its command or
/// path, else its fields; never JSON braces), at most 200 characters.
fn input_words(input: &str) -> String {
    let words = serde_json::from_str::<Value>(input)
        .map(|v| gaffer_protocol::activity::tool_input(&v))
        .unwrap_or_else(|_| input.to_owned());
    crate::prompts::head(&words, 200)
}

/// Whether a call only reads or searches: by the tool's name (Claude Code's `Read`,
/// `Grep`, `Glob`, `LS`; the built-in loop's `read_file`, `search`, `list_dir`; ACP
/// titles), or for a shell tool by the command's program (`cat`, `rg`, `grep`, …).
fn reads_or_searches(tool: &str, key: &str) -> bool {
    const NAMES: &[&str] = &[
        "read", "view", "grep", "glob", "search", "find", "list", "ls", "cat", "open",
    ];
    const PROGRAMS: &[&str] = &[
        "cat", "head", "tail", "less", "more", "rg", "grep", "ag", "find", "fd", "ls", "tree",
        "wc", "stat", "file",
    ];
    let name = tool.to_ascii_lowercase();
    if NAMES.iter().any(|n| name.contains(n)) {
        return true;
    }
    let input: Value = serde_json::from_str(split_key(key).1).unwrap_or(Value::Null);
    let program = match input.get("command") {
        Some(Value::String(s)) => s.split_whitespace().next().map(str::to_owned),
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .find(|w| !matches!(*w, "bash" | "sh" | "-c" | "-lc"))
            .and_then(|w| w.split_whitespace().next())
            .map(str::to_owned),
        _ => None,
    };
    program.is_some_and(|p| {
        let p = p.rsplit('/').next().unwrap_or(&p).to_owned();
        PROGRAMS.contains(&p.as_str())
    })
}

/// `2s`, `10m`, `1h30m`: a duration as the config writes it.
pub(crate) fn human(d: Duration) -> String {
    let secs = d.as_secs();
    if secs == 0 {
        return format!("{}ms", d.as_millis());
    }
    let (h, m, s) = (secs / 3600, secs % 3600 / 60, secs % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s > 0 || out.is_empty() {
        out.push_str(&format!("{s}s"));
    }
    out
}

/// `1,234,567`.
pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use gaffer_agents::{PermissionDecision, PermissionKind, PermissionRequest, Usage};
    use pretty_assertions::assert_eq;

    fn cfg() -> gaffer_config::Watchdog {
        gaffer_config::Watchdog {
            idle: Some(Duration::from_secs(60)),
            turn: Some(Duration::from_secs(600)),
            repeated_calls: Some(3),
            repeated_failures: Some(2),
            tokens_without_change: Some(1000),
        }
    }

    fn tool(id: &str, name: &str, input: Value) -> AgentEvent {
        AgentEvent::ToolCall {
            call_id: id.into(),
            name: name.into(),
            input,
        }
    }

    fn result(id: &str, error: bool) -> AgentEvent {
        AgentEvent::ToolResult {
            call_id: id.into(),
            output: if error { "No such file" } else { "ok" }.into(),
            is_error: error,
        }
    }

    fn usage(tokens: u64) -> AgentEvent {
        AgentEvent::Usage {
            usage: Usage {
                input_tokens: tokens,
                ..Usage::default()
            },
        }
    }

    /// Feed `events` one second apart from `t0`, then check at each second up to
    /// `until` seconds: every sighting, with the second it was made.
    fn run(w: &mut Watchdog, t0: Instant, events: &[AgentEvent], until: u64) -> Vec<(u64, Stall)> {
        let mut seen = Vec::new();
        for s in 0..=until {
            let now = t0 + Duration::from_secs(s);
            if let Some(e) = events.get(s as usize) {
                w.observe(e, now);
            }
            while let Some(stall) = w.check(now) {
                seen.push((s, stall));
            }
        }
        seen
    }

    fn triggers(seen: &[(u64, Stall)]) -> Vec<(u64, &'static str)> {
        seen.iter().map(|(s, st)| (*s, st.trigger)).collect()
    }

    #[test]
    fn an_idle_agent_is_reported_once_per_turn_after_the_idle_time() {
        let t0 = Instant::now();
        let mut w = Watchdog::new(cfg(), true);
        w.turn_started(t0);
        let talk = AgentEvent::AssistantText { text: "hm".into() };
        // Activity at 0..=4 s, then silence: idle is met at 4 + 60.
        let seen = run(&mut w, t0, &vec![talk.clone(); 5], 200);
        assert_eq!(triggers(&seen), vec![(64, "idle")]);
        assert!(seen[0].1.seen.contains("1m"), "{}", seen[0].1.seen);
        // The next turn may be reported again.
        let t1 = t0 + Duration::from_secs(300);
        w.turn_started(t1);
        assert_eq!(w.deadline(), Some(t1 + Duration::from_secs(60)));
        assert_eq!(
            w.check(t1 + Duration::from_secs(61)).unwrap().trigger,
            "idle"
        );
    }

    #[test]
    fn after_a_continue_the_same_time_trigger_is_met_again_counted_from_the_answer() {
        let t0 = Instant::now();
        let mut cfg = cfg();
        cfg.turn = Some(Duration::from_secs(100));
        let mut w = Watchdog::new(cfg, true);
        w.turn_started(t0);
        let at = |s| t0 + Duration::from_secs(s);
        assert_eq!(w.check(at(60)).unwrap().trigger, "idle");
        // Answered "continue" at 90 s: not again before 90 + 60, then once more.
        w.continued("idle", at(90));
        assert_eq!(w.deadline(), Some(at(100)), "the turn trigger is due first");
        assert_eq!(w.check(at(100)).unwrap().trigger, "turn");
        assert_eq!(w.deadline(), Some(at(150)));
        assert_eq!(w.check(at(149)), None);
        assert_eq!(w.check(at(150)).unwrap().trigger, "idle");
        assert_eq!(w.check(at(1000)), None, "not again before the next answer");
        // The turn trigger continued at 160 s: met again 100 s later.
        w.continued("turn", at(160));
        assert_eq!(w.check(at(259)), None);
        assert_eq!(w.check(at(260)).unwrap().trigger, "turn");
        // A continue of another trigger re-arms neither time trigger.
        w.continued("repeated_call", at(300));
        assert_eq!(w.check(at(2000)), None);
        assert_eq!(w.deadline(), None);
    }

    #[test]
    fn waiting_for_a_persons_tool_approval_is_not_idling_nor_overrunning() {
        let t0 = Instant::now();
        let mut cfg = cfg();
        cfg.turn = Some(Duration::from_secs(100));
        let mut w = Watchdog::new(cfg, true);
        w.turn_started(t0);
        let request = PermissionRequest {
            id: "p1".into(),
            agent: gaffer_agents::AgentKind::ClaudeCode,
            session_id: "s".into(),
            tool_name: "Bash".into(),
            input: json!({}),
            kind: PermissionKind::Command,
            command: None,
            paths: vec![],
            reason: None,
        };
        w.observe(&AgentEvent::PermissionRequested { request }, t0);
        assert_eq!(w.deadline(), None);
        assert_eq!(w.check(t0 + Duration::from_secs(500)), None);
        // Approved after 500 s: the turn's clock skips the wait.
        let at = t0 + Duration::from_secs(500);
        w.observe(
            &AgentEvent::PermissionResolved {
                request_id: "p1".into(),
                decision: PermissionDecision::allow(),
            },
            at,
        );
        assert_eq!(w.deadline(), Some(at + Duration::from_secs(60)));
        assert_eq!(w.check(at + Duration::from_secs(59)), None);
        let stall = w.check(at + Duration::from_secs(60)).unwrap();
        assert_eq!(stall.trigger, "idle");
        assert_eq!(w.check(at + Duration::from_secs(99)), None);
        assert_eq!(
            w.check(at + Duration::from_secs(100)).unwrap().trigger,
            "turn"
        );
    }

    #[test]
    fn a_turn_that_runs_too_long_is_reported_once_even_when_busy() {
        let t0 = Instant::now();
        let mut cfg = cfg();
        cfg.turn = Some(Duration::from_secs(10));
        let mut w = Watchdog::new(cfg, true);
        w.turn_started(t0);
        let talk = AgentEvent::AssistantText {
            text: "busy".into(),
        };
        let seen = run(&mut w, t0, &vec![talk; 30], 30);
        assert_eq!(triggers(&seen), vec![(10, "turn")]);
        w.turn_ended();
        assert_eq!(w.deadline(), None);
        assert_eq!(w.check(t0 + Duration::from_secs(1000)), None);
    }

    #[test]
    fn the_same_call_k_times_is_reported_once_per_distinct_call() {
        let t0 = Instant::now();
        let mut w = Watchdog::new(cfg(), true);
        w.turn_started(t0);
        let ls = json!({"command": "ls -la"});
        let mut events = Vec::new();
        for i in 0..6 {
            events.push(tool(&format!("c{i}"), "Bash", ls.clone()));
            events.push(result(&format!("c{i}"), false));
        }
        // A different input is another call: twice only, never reported.
        events.push(tool("d1", "Bash", json!({"command": "ls"})));
        events.push(tool("d2", "Bash", json!({"command": "ls"})));
        let seen = run(&mut w, t0, &events, 15);
        assert_eq!(triggers(&seen), vec![(4, "repeated_call")]);
        assert_eq!(seen[0].1.facts["count"], 3);
        assert_eq!(seen[0].1.facts["tool"], "Bash");
        assert_eq!(
            seen[0].1.seen,
            "the agent called Bash with the same input 3 times: ls -la"
        );
    }

    #[test]
    fn the_same_failing_read_is_reported_once_and_not_again_as_a_repeat() {
        let t0 = Instant::now();
        let mut w = Watchdog::new(cfg(), true);
        w.turn_started(t0);
        let read = json!({"file_path": "/w/missing.rs"});
        let mut events = Vec::new();
        for i in 0..5 {
            events.push(tool(&format!("r{i}"), "Read", read.clone()));
            events.push(result(&format!("r{i}"), true));
        }
        let seen = run(&mut w, t0, &events, 12);
        assert_eq!(triggers(&seen), vec![(3, "repeated_failure")]);
        assert!(
            seen[0].1.seen.contains("No such file"),
            "{}",
            seen[0].1.seen
        );
    }

    #[test]
    fn failing_writes_and_commands_that_are_not_reads_are_not_failures_to_report() {
        let t0 = Instant::now();
        let mut cfg = cfg();
        cfg.repeated_calls = None;
        let mut w = Watchdog::new(cfg, true);
        w.turn_started(t0);
        let mut events = Vec::new();
        for i in 0..4 {
            events.push(tool(
                &format!("t{i}"),
                "Bash",
                json!({"command": "make test"}),
            ));
            events.push(result(&format!("t{i}"), true));
        }
        for i in 0..2 {
            events.push(tool(
                &format!("g{i}"),
                "shell",
                json!({"command": ["bash", "-lc", "rg needle src"]}),
            ));
            events.push(result(&format!("g{i}"), true));
        }
        let seen = run(&mut w, t0, &events, 13);
        assert_eq!(triggers(&seen), vec![(11, "repeated_failure")]);
    }

    #[test]
    fn tokens_without_a_file_change_are_reported_for_writing_roles_once_per_change() {
        let t0 = Instant::now();
        let mut w = Watchdog::new(cfg(), true);
        w.turn_started(t0);
        let change = AgentEvent::FileChange {
            path: "a".into(),
            kind: "write".into(),
            diff: None,
        };
        let events = [
            usage(600),
            change.clone(),
            usage(600),
            usage(600),
            usage(600),
            change,
            usage(999),
        ];
        let seen = run(&mut w, t0, &events, 7);
        assert_eq!(triggers(&seen), vec![(3, "tokens_without_change")]);
        assert_eq!(seen[0].1.facts["tokens"], 1200);
        assert!(seen[0]
            .1
            .seen
            .contains("1,200 tokens since its last file change"));
        // A read-only role spends tokens without changing files by design.
        let mut reader = Watchdog::new(cfg(), false);
        reader.turn_started(t0);
        assert!(run(&mut reader, t0, &[usage(5000)], 1).is_empty());
    }

    #[test]
    fn every_trigger_off_reports_nothing() {
        let t0 = Instant::now();
        let mut w = Watchdog::new(gaffer_config::Watchdog::OFF, true);
        w.turn_started(t0);
        let events: Vec<_> = (0..10)
            .flat_map(|i| {
                [
                    tool(&format!("r{i}"), "Read", json!({})),
                    result(&format!("r{i}"), true),
                    usage(10_000),
                ]
            })
            .collect();
        assert!(run(&mut w, t0, &events, 5000).is_empty());
        assert_eq!(w.deadline(), None);
    }

    #[test]
    fn numbers_and_durations_read_well() {
        assert_eq!(human(Duration::from_secs(2)), "2s");
        assert_eq!(human(Duration::from_secs(600)), "10m");
        assert_eq!(human(Duration::from_secs(5400)), "1h30m");
        assert_eq!(human(Duration::from_millis(500)), "500ms");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(thousands(999), "999");
    }
}
