//! Fallback agents per role (`agent = ["claude", "codex"]`): when a role's agent is
//! out — its quota used up, rate-limited past the threshold, failing with server
//! errors, or unable to start — the step goes on with the next agent of the chain.
//!
//! [`classify`] reads the agents' own error shapes (pure, unit-tested on what the real
//! CLIs print). [`Engine::agent_turn`] runs the turn and, on an outage, ends the failed
//! session, records `agent_switched` (checked by the reducer: the failed session must
//! be over) and starts the next agent: right away when the failed turn did nothing
//! (no file of the worktree changed, no tool but a read ran), after a person's
//! approval when it did. The agent that was out is not picked again, for any role of
//! the task, until its cool-down ends ([`pick`]): the journal remembers it, so a
//! restart does not go back to it.

use crate::failure::{fail, Failure};
use crate::turn::Turn;
use crate::Engine;
use gaffer_agents::{AgentError, Mode, TurnResult};
use gaffer_app::Subject;
use gaffer_config::FallbackConfig;
use gaffer_core::{AgentSwitch, ApprovalKind, Event, Role, Step, TaskState, Timestamp};
use gaffer_forge::Worktree;
use gaffer_protocol::contracts::ContractError;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use tokio_util::sync::CancellationToken;

/// Why an agent is out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Trigger {
    /// Its plan's usage limit is reached (Claude Code's "You've hit your limit",
    /// Codex's "You've hit your usage limit").
    UsageLimit,
    /// Rate-limited (429) and not worth waiting for.
    RateLimited,
    /// The provider fails (5xx, overloaded).
    ServerError,
    /// The agent's process cannot be started.
    CannotStart,
}

impl Trigger {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Trigger::UsageLimit => "usage_limit",
            Trigger::RateLimited => "rate_limited",
            Trigger::ServerError => "server_error",
            Trigger::CannotStart => "cannot_start",
        }
    }
}

/// An agent found out, and what it said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Outage {
    pub(crate) trigger: Trigger,
    /// The agent's own words (cut short).
    pub(crate) detail: String,
    /// When the agent said its limit resets (ms since the epoch), if it did.
    pub(crate) resets_at: Option<Timestamp>,
}

/// What a failed turn showed.
pub(crate) enum Symptom<'a> {
    /// The agent could not be made or started.
    Start(&'a str, Option<&'a AgentError>),
    /// The agent's stream failed mid-turn.
    Stream(&'a AgentError),
    /// The turn ended failed; `rate_limited_until` is the latest rate-limit the agent
    /// reported during it (ms).
    Turn(&'a TurnResult, Option<Timestamp>),
}

/// Whether `symptom` means the agent is out, and why. `threshold_secs`: a 429 whose
/// `retry-after` the agent gave and is at most this is not an outage (waiting it out
/// is cheaper than a switch). `now` in ms.
pub(crate) fn classify(symptom: &Symptom, threshold_secs: u64, now: Timestamp) -> Option<Outage> {
    let outage = |trigger, detail: &str, resets_at| {
        Some(Outage {
            trigger,
            detail: crate::prompts::head(detail.trim(), 500),
            resets_at,
        })
    };
    match symptom {
        Symptom::Start(detail, error) => match error {
            None | Some(AgentError::ExecutableNotFound { .. }) | Some(AgentError::Spawn { .. }) => {
                outage(Trigger::CannotStart, detail, None)
            }
            Some(_) => None,
        },
        Symptom::Stream(error) => match error {
            AgentError::RateLimited { .. } => {
                outage(Trigger::RateLimited, &error.to_string(), None)
            }
            AgentError::RetryAfterTooLong {
                retry_after_secs, ..
            } => outage(
                Trigger::RateLimited,
                &error.to_string(),
                Some(now + secs_ms(*retry_after_secs)),
            ),
            AgentError::Http { message, .. } => {
                let status = status_in(message)?;
                (status >= 500).then_some(())?;
                outage(Trigger::ServerError, &error.to_string(), None)
            }
            _ => None,
        },
        Symptom::Turn(result, rate_limited_until) => {
            if result.status != gaffer_agents::TurnStatus::Failed {
                return None;
            }
            // Codex puts the error in the reason; Claude Code in the text (its reason
            // is the `result`'s subtype, a code).
            let said = match &result.reason {
                Some(r) if r.contains(' ') && !result.text.contains(r.as_str()) => {
                    format!("{} {r}", result.text)
                }
                _ => result.text.clone(),
            };
            let error = result.provider_error.clone().unwrap_or_default();
            let kind = error.kind.as_deref().unwrap_or("");
            let status = error.status.or_else(|| status_in(&said));
            let resets_at = usage_limit_epoch(&said)
                .or(*rate_limited_until)
                .or(error.retry_after_secs.map(|s| now + secs_ms(s)));
            if is_usage_limit(kind, &said) {
                return outage(Trigger::UsageLimit, &said, resets_at);
            }
            let rate_limited =
                status == Some(429) || matches!(kind, "rate_limit_error" | "rate_limit_exceeded");
            if rate_limited {
                // The agent gave up retrying; it waits less than the threshold only
                // when it said so.
                if error
                    .retry_after_secs
                    .is_some_and(|secs| secs <= threshold_secs)
                {
                    return None;
                }
                return outage(Trigger::RateLimited, &said, resets_at);
            }
            let server = status.is_some_and(|s| s >= 500)
                || matches!(
                    kind,
                    "api_error"
                        | "overloaded_error"
                        | "internalServerError"
                        | "serverOverloaded"
                        | "server_error"
                )
                || said.contains("experiencing high demand");
            server.then(|| outage(Trigger::ServerError, &said, resets_at))?
        }
    }
}

/// A usage limit, by the agent's error kind or its words: Claude Code's
/// `usage_limit_reached`, its "Claude AI usage limit reached|<epoch>", "You've hit your
/// limit · resets 3pm", "5-hour limit reached" and "You've hit your <limit>" (2.1.332
/// names the limit: 5-hour, weekly, Opus, Sonnet, session, usage credit, monthly
/// spend); Codex's `usageLimitExceeded` and "You've hit your usage limit" (with a
/// typographic apostrophe).
fn is_usage_limit(kind: &str, said: &str) -> bool {
    if matches!(kind, "usageLimitExceeded" | "usage_limit_reached") {
        return true;
    }
    let said = said.replace('’', "'").to_lowercase();
    [
        "usage limit reached",
        "you've hit your limit",
        "you've hit your usage limit",
        "you've hit your weekly limit",
        "you've hit your 5-hour limit",
        "you've hit your opus limit",
        "you've hit your sonnet limit",
        "you've hit your session limit",
        "you've hit your usage credit limit",
        "you've hit your monthly spend limit",
        "5-hour limit reached",
        "weekly limit reached",
        "limit reached · resets",
    ]
    .iter()
    .any(|p| said.contains(p))
}

/// The reset time in Claude Code's old `…usage limit reached|<epoch seconds>`.
fn usage_limit_epoch(said: &str) -> Option<Timestamp> {
    let rest = &said[said.find("usage limit reached|")? + "usage limit reached|".len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse::<i64>().ok().map(|s| s.saturating_mul(1000))
}

/// The HTTP status an error text names: Claude Code's "API Error: 500 …" and
/// "Request rejected (429)", Codex's "last status: 429 Too Many Requests", the
/// built-in agent's "status 503".
fn status_in(text: &str) -> Option<u16> {
    for marker in ["API Error: ", "rejected (", "last status: ", "status "] {
        let mut rest = text;
        while let Some(at) = rest.find(marker) {
            rest = &rest[at + marker.len()..];
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            if let Ok(status @ 400..=599) = digits.parse::<u16>() {
                return Some(status);
            }
        }
    }
    None
}

fn secs_ms(secs: u64) -> Timestamp {
    i64::try_from(secs.saturating_mul(1000)).unwrap_or(i64::MAX)
}

/// Milliseconds since the epoch, now.
pub(crate) fn now_ms() -> Timestamp {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Until when `agent` is out for the task (the latest cool-down of a switch away from
/// it, for any role: a quota is the agent's, not the role's), if it still is at `now`.
pub(crate) fn out_until(
    switches: &[AgentSwitch],
    agent: &str,
    now: Timestamp,
) -> Option<Timestamp> {
    switches
        .iter()
        .filter(|s| s.from == agent)
        .map(|s| s.until)
        .max()
        .filter(|until| *until > now)
}

/// The agent of `chain` that plays next: the first one not out at `now`; when all
/// are, the one back soonest.
pub(crate) fn pick<'a>(chain: &[&'a str], switches: &[AgentSwitch], now: Timestamp) -> &'a str {
    chain
        .iter()
        .find(|a| out_until(switches, a, now).is_none())
        .or_else(|| {
            chain
                .iter()
                .min_by_key(|a| out_until(switches, a, now).unwrap_or(0))
        })
        .copied()
        .unwrap_or("claude")
}

/// The agent of `chain` that takes over from `from`: the first other one not out.
pub(crate) fn next<'a>(
    chain: &[&'a str],
    from: &str,
    switches: &[AgentSwitch],
    now: Timestamp,
) -> Option<&'a str> {
    chain
        .iter()
        .find(|a| **a != from && out_until(switches, a, now).is_none())
        .copied()
}

/// When the agent that was out may be tried again: after the cool-down, or when
/// the agent said its limit resets, whichever is later.
pub(crate) fn cool_down_until(outage: &Outage, cfg: &FallbackConfig, now: Timestamp) -> Timestamp {
    let after = now.saturating_add(secs_ms(cfg.cooldown_secs));
    outage.resets_at.map_or(after, |r| r.max(after))
}

/// Tools that only read: a failed turn that called nothing else did nothing.
const READ_TOOLS: &[&str] = &[
    "Read",
    "Glob",
    "Grep",
    "LS",
    "NotebookRead",
    "TodoWrite",
    "WebSearch",
    "read_file",
    "list_files",
    "list_dir",
    "list_directory",
    "grep",
    "glob",
    "search",
    "search_file_content",
];

/// Whether a tool call may have done something (anything but a known read).
pub(crate) fn has_effect(tool: &str) -> bool {
    !READ_TOOLS.contains(&tool)
}

/// The worktree's uncommitted files and a hash of each one's content (`None`: the
/// worktree cannot be read): two snapshots differ when a turn changed a file.
pub(crate) fn snapshot(wt: &Worktree) -> Option<BTreeMap<String, u64>> {
    use std::hash::{Hash, Hasher};
    let files = wt.uncommitted_files().ok()?;
    Some(
        files
            .into_iter()
            .map(|f| {
                let mut h = std::collections::hash_map::DefaultHasher::new();
                std::fs::read(wt.path.join(&f)).ok().hash(&mut h);
                (f, h.finish())
            })
            .collect(),
    )
}

/// Whether a crash cut `step` short right after a switch to the next agent and
/// before that agent started: every switch in the step followed a turn that did
/// nothing, and no session of the step started since the last one. Running the step
/// again then repeats nothing.
pub(crate) fn nothing_since_switch(task: &TaskState, step: &gaffer_core::StepId) -> bool {
    let mut switches = task.switches.iter().filter(|s| s.step_id == *step);
    let Some(last) = switches.clone().next_back() else {
        return false;
    };
    switches.all(|s| !s.effects)
        && !task.sessions.values().any(|s| {
            s.step_id.as_ref() == Some(step)
                && (s.ended.is_none()
                    || s.started_at > last.at
                    || (s.started_at == last.at && s.agent == last.to))
        })
}

/// What one session of a turn saw besides its answer.
#[derive(Default)]
pub(crate) struct Watch {
    /// The agent is out, and why.
    pub(crate) outage: Option<Outage>,
    /// A tool that may have done something was called.
    pub(crate) effects: bool,
    /// The latest rate-limit wait the agent reported (ms).
    pub(crate) rate_limited_until: Option<Timestamp>,
    /// Set when another agent can take over: a longer rate-limit wait ends the turn.
    pub(crate) max_retry_wait: Option<std::time::Duration>,
}

impl Engine {
    /// One agent turn for `step`, played by the role's agent; when that agent is out
    /// (see the module doc), by the next agent of the role's chain.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn agent_turn(
        &self,
        task: &TaskState,
        step: &Step,
        role: Role,
        mode: Mode,
        wt: &Worktree,
        prompt: String,
        cancel: &CancellationToken,
        contract: impl Fn(&str) -> Result<Value, ContractError>,
    ) -> Result<Turn, Failure> {
        let project = self.project(task).await?;
        let mut task = task.clone();
        loop {
            let chain = self.role_chain(&task, &project.name, role);
            let agent = pick(&chain, &task.switches, now_ms()).to_owned();
            let role_agent = self.role_agent(&task, &project.name, role, &agent);
            let fallback = next(&chain, &agent, &task.switches, now_ms());
            // What the worktree held, read only when another agent could take over
            // (a switch asks whether the failed turn changed it): a role without a
            // fallback does not hash the uncommitted files around every turn.
            let before = fallback.map(|_| snapshot(wt));
            let mut watch = Watch {
                max_retry_wait: fallback.map(|_| {
                    std::time::Duration::from_secs(self.settings.fallback.retry_after_secs)
                }),
                ..Watch::default()
            };
            let outcome = self
                .session_turn(
                    &task, step, role, mode, wt, &prompt, cancel, &contract, role_agent, &mut watch,
                )
                .await;
            let Err(failure) = outcome else {
                return outcome;
            };
            let Some(outage) = watch.outage else {
                return Err(failure);
            };
            let now = now_ms();
            let Some(to) = next(&chain, &agent, &task.switches, now).map(str::to_owned) else {
                if chain.len() > 1 {
                    tracing::warn!(task = %task.id, step = %step.id, %agent, trigger = outage.trigger.as_str(), "every agent of the role's chain is out");
                }
                return Err(failure);
            };
            // No snapshot (an agent came back from its cool-down during the turn):
            // counted as changed, so a person decides.
            let effects = watch.effects || before.is_none_or(|b| snapshot(wt) != b);
            let until = cool_down_until(&outage, &self.settings.fallback, now);
            let switched = Event::AgentSwitched {
                step_id: step.id.clone(),
                role,
                from: agent.clone(),
                to: to.clone(),
                trigger: outage.trigger.as_str().to_owned(),
                detail: self.settings.redactor.redact(&outage.detail),
                until,
                effects,
            };
            let nth = task
                .switches
                .iter()
                .filter(|s| s.step_id == step.id)
                .count();
            self.append(&task.id, vec![switched]).await?;
            tracing::warn!(task = %task.id, step = %step.id, from = %agent, %to, trigger = outage.trigger.as_str(), effects, "the role's agent is out; the next one takes over");
            if effects {
                self.approve_switch(&task, step, nth, &agent, &to, &outage)
                    .await?;
            }
            task = match self.load(&task.id).await? {
                Some((t, _)) => t,
                None => return Err(failure),
            };
        }
    }

    /// The role's chain of agents: `--agent` alone, else the role's agent and its
    /// fallbacks.
    pub(crate) fn role_chain<'a>(
        &'a self,
        task: &'a TaskState,
        project: &str,
        role: Role,
    ) -> Vec<&'a str> {
        match &task.options.agent {
            Some(agent) => vec![agent.as_str()],
            None => self.role_config(project, role).chain(),
        }
    }

    /// A person decides whether the next agent goes on after the failed one did
    /// something: approved, it starts on top of what is there; denied, the step fails.
    async fn approve_switch(
        &self,
        task: &TaskState,
        step: &Step,
        nth: usize,
        from: &str,
        to: &str,
        outage: &Outage,
    ) -> Result<(), Failure> {
        let changed = self
            .worktree(task)
            .await
            .ok()
            .and_then(|wt| wt.uncommitted_files().ok())
            .filter(|f| !f.is_empty())
            .map_or_else(String::new, |f| {
                format!(" (uncommitted changes in: {})", f.join(", "))
            });
        let summary = format!(
            "{from} is out ({}: {}) after `{}` already did something{changed}; approve to go on with {to} on top of it (it will not remember what {from} did), deny to fail the step",
            outage.trigger.as_str(),
            crate::prompts::head(&outage.detail, 200),
            step.name
        );
        let details = json!({ "step": step.id, "from": from, "to": to, "trigger": outage.trigger.as_str(), "detail": outage.detail });
        // Its own key: past every key the gate's tool approvals of the attempt use
        // (× 1000 + n) and below the next attempt's; the same switch asked again after a
        // crash finds its answer.
        let key = step.attempt * 1000 + 500 + u32::try_from(nth).unwrap_or(0);
        let resolution = self
            .ask(
                task,
                step,
                key,
                ApprovalKind::Manual,
                summary,
                details,
                Subject::default(),
            )
            .await?;
        if resolution.approved() {
            Ok(())
        } else {
            Err(fail(format!(
                "{from} is out ({}) and {to} was not let go on after it: {}",
                outage.trigger.as_str(),
                resolution.reason()
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gaffer_agents::{ProviderError, TurnStatus, Usage};
    use pretty_assertions::assert_eq;

    const NOW: Timestamp = 1_800_000_000_000;

    fn failed(text: &str, error: Option<ProviderError>) -> TurnResult {
        TurnResult {
            status: TurnStatus::Failed,
            text: text.into(),
            usage: Usage::default(),
            session_id: "s".into(),
            reason: Some("success".into()),
            provider_error: error,
        }
    }

    fn api(status: Option<u16>, kind: &str) -> Option<ProviderError> {
        Some(ProviderError {
            status,
            kind: Some(kind.into()),
            retry_after_secs: None,
        })
    }

    fn trigger(result: &TurnResult) -> Option<Trigger> {
        classify(&Symptom::Turn(result, None), 60, NOW).map(|o| o.trigger)
    }

    /// What Claude Code 2.1 and Codex 0.171 print when their provider refuses: the
    /// texts and error kinds as the real CLIs emitted them against a scripted server
    /// (and, for the subscription limit, as users reported Claude Code's `result`).
    #[test]
    fn the_real_clis_outage_shapes_are_recognised() {
        let cases = [
            // Claude Code: `{"type":"result","subtype":"success","is_error":true,
            // "api_error_status":429,"result":"You've hit your weekly limit · …"}`
            (
                failed("You've hit your weekly limit · resets Jul 18, 12pm (UTC)", api(Some(429), "rate_limit_error")),
                Some(Trigger::UsageLimit),
            ),
            (failed("You've hit your limit · resets 1pm (Europe/Lisbon)", None), Some(Trigger::UsageLimit)),
            (failed("Claude AI usage limit reached|1750708800", None), Some(Trigger::UsageLimit)),
            (failed("5-hour limit reached ∙ resets 3pm", None), Some(Trigger::UsageLimit)),
            // Claude Code 2.1.332 behind a Claude gateway, the API answering 429 with
            // `anthropic-ratelimit-unified-status: rejected` and the claim `five_hour`
            // (its `rate_limit_event` says `rejected`; the `result` carries
            // `api_error: "usage_limit_reached"`). By its words alone too: "You've hit
            // your {5-hour,weekly,Opus,Sonnet,session} limit".
            (
                failed("You've hit your 5-hour limit · resets 2:14pm (UTC)", api(Some(429), "usage_limit_reached")),
                Some(Trigger::UsageLimit),
            ),
            (failed("You've hit your 5-hour limit · resets 2:14pm (UTC)", api(Some(429), "rate_limit_error")), Some(Trigger::UsageLimit)),
            (failed("You've hit your Opus limit · resets Dec 9, 1pm (UTC)", None), Some(Trigger::UsageLimit)),
            (failed("You've hit your session limit · resets 4pm", None), Some(Trigger::UsageLimit)),
            // Claude Code on a 429 with a long retry-after: it gives up at once.
            (
                failed("API Error: Request rejected (429) · scripted error", api(Some(429), "rate_limit_error")),
                Some(Trigger::RateLimited),
            ),
            (
                failed("API Error: 500 scripted error. This is a server-side issue, usually temporary — try again in a moment.", api(Some(500), "api_error")),
                Some(Trigger::ServerError),
            ),
            (failed("API Error: 529 Overloaded", None), Some(Trigger::ServerError)),
            // Codex: `error` notification `{"error":{"message":…,"codexErrorInfo":…}}`.
            (
                failed("You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro) or try again at 9:16 AM.", api(None, "usageLimitExceeded")),
                Some(Trigger::UsageLimit),
            ),
            (
                failed("exceeded retry limit, last status: 429 Too Many Requests", api(Some(429), "responseTooManyFailedAttempts")),
                Some(Trigger::RateLimited),
            ),
            (failed("exceeded retry limit, last status: 429 Too Many Requests", None), Some(Trigger::RateLimited)),
            (
                failed("We’re currently experiencing high demand, which may cause temporary errors.", api(None, "serverOverloaded")),
                Some(Trigger::ServerError),
            ),
            (
                failed("exceeded retry limit, last status: 502 Bad Gateway", api(Some(502), "responseTooManyFailedAttempts")),
                Some(Trigger::ServerError),
            ),
            // Not outages: the next agent would fail the same way.
            (failed("API Error: 400 prompt is too long", api(Some(400), "invalid_request_error")), None),
            (failed("", None), None),
            (failed("Your input exceeds the context window of this model.", api(None, "contextWindowExceeded")), None),
        ];
        for (result, want) in cases {
            assert_eq!(trigger(&result), want, "{}", result.text);
        }
    }

    #[test]
    fn only_a_failed_turn_is_an_outage_whatever_its_text_says() {
        // An agent that writes the usage-limit text in its answer is not out.
        let mut said = failed("Claude AI usage limit reached|1750708800", None);
        said.status = TurnStatus::Completed;
        assert_eq!(trigger(&said), None);
        said.status = TurnStatus::Interrupted;
        assert_eq!(trigger(&said), None);
    }

    #[test]
    fn a_rate_limit_the_agent_waits_out_is_no_outage_a_longer_one_is() {
        let with_wait = |secs| {
            failed(
                "exceeded retry limit, last status: 429 Too Many Requests",
                Some(ProviderError {
                    status: Some(429),
                    kind: None,
                    retry_after_secs: Some(secs),
                }),
            )
        };
        assert_eq!(trigger(&with_wait(60)), None);
        let out = classify(&Symptom::Turn(&with_wait(3600), None), 60, NOW).unwrap();
        assert_eq!(out.trigger, Trigger::RateLimited);
        assert_eq!(out.resets_at, Some(NOW + 3_600_000));
    }

    #[test]
    fn the_reset_time_comes_from_the_agent_when_it_says() {
        let out = classify(
            &Symptom::Turn(
                &failed("Claude AI usage limit reached|1750708800", None),
                None,
            ),
            60,
            NOW,
        )
        .unwrap();
        assert_eq!(out.resets_at, Some(1_750_708_800_000));
        // Claude Code's `rate_limit_event` (status rejected, resets_at) during the turn.
        let out = classify(
            &Symptom::Turn(
                &failed("You've hit your limit · resets 3pm", None),
                Some(NOW + 5),
            ),
            60,
            NOW,
        )
        .unwrap();
        assert_eq!(out.resets_at, Some(NOW + 5));
        let cfg = FallbackConfig {
            cooldown_secs: 900,
            retry_after_secs: 60,
        };
        assert_eq!(cool_down_until(&out, &cfg, NOW), NOW + 900_000);
        let late = Outage {
            resets_at: Some(NOW + 7_200_000),
            ..out
        };
        assert_eq!(cool_down_until(&late, &cfg, NOW), NOW + 7_200_000);
    }

    #[test]
    fn an_agent_that_cannot_start_is_out_one_that_is_refused_by_the_sandbox_is_not() {
        let missing = AgentError::ExecutableNotFound {
            name: "codex".into(),
            env_var: "GAFFER_CODEX_BIN".into(),
        };
        let spawn = AgentError::Spawn {
            agent: "codex".into(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        };
        let sandbox = AgentError::Sandbox {
            agent: "codex".into(),
            reason: "Landlock is unavailable".into(),
        };
        let start =
            |e| classify(&Symptom::Start("cannot start", Some(e)), 60, NOW).map(|o| o.trigger);
        assert_eq!(start(&missing), Some(Trigger::CannotStart));
        assert_eq!(start(&spawn), Some(Trigger::CannotStart));
        assert_eq!(start(&sandbox), None);
        let built_in = AgentError::RateLimited {
            provider: "openai".into(),
            attempts: 3,
        };
        assert_eq!(
            classify(&Symptom::Stream(&built_in), 60, NOW).map(|o| o.trigger),
            Some(Trigger::RateLimited)
        );
        let long = AgentError::RetryAfterTooLong {
            provider: "anthropic".into(),
            retry_after_secs: 3600,
            max_secs: 60,
        };
        let out = classify(&Symptom::Stream(&long), 60, NOW).unwrap();
        assert_eq!(
            (out.trigger, out.resets_at),
            (Trigger::RateLimited, Some(NOW + 3_600_000))
        );
        let closed = AgentError::Closed;
        assert_eq!(classify(&Symptom::Stream(&closed), 60, NOW), None);
    }

    fn switch(from: &str, until: Timestamp) -> AgentSwitch {
        AgentSwitch {
            step_id: "code/1".into(),
            role: Role::Owner,
            from: from.into(),
            to: "x".into(),
            trigger: "usage_limit".into(),
            detail: String::new(),
            until,
            effects: false,
            at: NOW - 10,
        }
    }

    #[test]
    fn the_chain_skips_an_agent_until_its_cool_down_ends() {
        let chain = ["claude", "codex", "gemini"];
        assert_eq!(pick(&chain, &[], NOW), "claude");
        let out = [switch("claude", NOW + 1000)];
        assert_eq!(pick(&chain, &out, NOW), "codex");
        // Back after the cool-down: the primary plays again.
        assert_eq!(pick(&chain, &out, NOW + 1000), "claude");
        assert_eq!(next(&chain, "codex", &out, NOW), Some("gemini"));
        assert_eq!(next(&chain, "claude", &out, NOW), Some("codex"));
        let all = [
            switch("claude", NOW + 3000),
            switch("codex", NOW + 1000),
            switch("gemini", NOW + 2000),
        ];
        assert_eq!(next(&chain, "codex", &all, NOW), None);
        assert_eq!(pick(&chain, &all, NOW), "codex");
        assert_eq!(next(&["claude"], "claude", &[], NOW), None);
    }
}
