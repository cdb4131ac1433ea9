//! `[[schedules]]`: requests queued on a cron schedule.
//!
//! Each schedule names a cron expression (5 fields, minute precision, or 6 with
//! seconds first; `@daily` and the other aliases too), the time zone its fields are
//! read in (`tz`, default UTC), the project, the request and optionally the agent,
//! and what happens to slots that passed while no scheduler ran (`missed`). The
//! scheduler (gaffer-engine) turns each slot into one task, once across every
//! worker, through the slot's origin key ([`Schedule::slot_key`]).

use crate::{check_agent, invalid, AcpAgentConfig, ConfigError};
use std::collections::BTreeMap;

/// What happens to slots that passed while no scheduler ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missed {
    /// Nothing: the next slot runs as usual.
    Skip,
    /// One task, for the newest missed slot.
    RunOnce,
}

impl Missed {
    /// Its name in the config and the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Skip => "skip",
            Self::RunOnce => "run_once",
        }
    }
}

/// Longest schedule name, so that every slot key fits the 200 bytes a key may have.
pub const MAX_SCHEDULE_NAME: usize = 64;

/// One `[[schedules]]` entry, its cron expression parsed and its time zone found.
#[derive(Debug, Clone)]
pub struct Schedule {
    /// Unique among schedules: letters, digits, `-` and `_`.
    pub name: String,
    /// The cron expression as written.
    pub cron: String,
    /// The time zone its fields are read in, as written (`UTC` when absent).
    pub tz: String,
    /// The project (name or id) its tasks run in; checked against the journal when
    /// a scheduler starts.
    pub project: String,
    /// What each task is asked to do.
    pub request: String,
    /// The agent for every role, if not the configured ones.
    pub agent: Option<String>,
    /// What happens to slots that passed while no scheduler ran.
    pub missed: Missed,
    spec: croner::Cron,
    zone: jiff::tz::TimeZone,
}

impl PartialEq for Schedule {
    fn eq(&self, other: &Self) -> bool {
        (
            &self.name,
            &self.cron,
            &self.tz,
            &self.project,
            &self.request,
            &self.agent,
            self.missed,
        ) == (
            &other.name,
            &other.cron,
            &other.tz,
            &other.project,
            &other.request,
            &other.agent,
            other.missed,
        )
    }
}

impl Schedule {
    /// The first slot strictly after `after_ms` (ms since the epoch), if the
    /// expression has one.
    pub fn next_after(&self, after_ms: i64) -> Option<i64> {
        let at = self.zoned(after_ms)?;
        let next = self.spec.find_next_occurrence(&at, false).ok()?;
        Some(next.timestamp().as_millisecond())
    }

    /// The newest slot at or before `at_ms`, if any.
    pub fn latest_until(&self, at_ms: i64) -> Option<i64> {
        let at = self.zoned(at_ms)?;
        let prev = self.spec.find_previous_occurrence(&at, true).ok()?;
        Some(prev.timestamp().as_millisecond())
    }

    /// What every slot key of this schedule starts with.
    pub fn key_prefix(&self) -> String {
        format!("schedule:{}:", self.name)
    }

    /// The origin key of the slot at `slot_ms`: `schedule:<name>:<RFC 3339, UTC>`.
    pub fn slot_key(&self, slot_ms: i64) -> String {
        format!("{}{}", self.key_prefix(), slot_text(slot_ms))
    }

    /// The slot time (ms) a key of this schedule names, if it is one.
    pub fn slot_of_key(&self, key: &str) -> Option<i64> {
        let ts: jiff::Timestamp = key.strip_prefix(&self.key_prefix())?.parse().ok()?;
        Some(ts.as_millisecond())
    }

    fn zoned(&self, ms: i64) -> Option<jiff::Zoned> {
        let ts = jiff::Timestamp::from_millisecond(ms).ok()?;
        Some(ts.to_zoned(self.zone.clone()))
    }
}

/// A slot time as RFC 3339 in UTC (`2026-01-01T03:00:00Z`).
pub fn slot_text(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| ms.to_string())
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSchedule {
    name: Option<String>,
    cron: Option<String>,
    tz: Option<String>,
    project: Option<String>,
    request: Option<String>,
    agent: Option<String>,
    missed: Option<String>,
}

/// A cron expression as schedules take it: 5 fields, or 6 with seconds first.
pub fn parse_cron(expr: &str) -> Result<croner::Cron, String> {
    let fields = expr.split_whitespace().count();
    if !expr.trim_start().starts_with('@') && !(5..=6).contains(&fields) {
        return Err(format!(
            "has {fields} fields; write 5 (minute hour day-of-month month day-of-week, like \"0 3 * * *\") or 6 with seconds first"
        ));
    }
    croner::parser::CronParser::builder()
        .seconds(croner::parser::Seconds::Optional)
        .year(croner::parser::Year::Disallowed)
        .build()
        .parse(expr)
        .map_err(|e| format!("is not a cron expression ({e}); write 5 fields like \"0 3 * * *\" (03:00 every day) or 6 with seconds first"))
}

/// A schedule as written, in the config or an API body: nothing checked yet.
#[derive(Debug, Clone, Default)]
pub struct ScheduleSpec {
    /// See [`Schedule::name`].
    pub name: String,
    /// See [`Schedule::cron`].
    pub cron: String,
    /// See [`Schedule::tz`]; `None` is UTC.
    pub tz: Option<String>,
    /// See [`Schedule::project`].
    pub project: String,
    /// See [`Schedule::request`].
    pub request: String,
    /// See [`Schedule::agent`] (not checked here: who calls knows the agents).
    pub agent: Option<String>,
    /// `skip` or `run_once`; `None` is `skip`.
    pub missed: Option<String>,
}

/// A field of a [`ScheduleSpec`] that is wrong, and what to write instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadScheduleField {
    /// `name`, `cron`, `tz`, `project`, `request` or `missed`.
    pub field: &'static str,
    /// What is wrong and what to do.
    pub message: String,
}

fn bad(field: &'static str, message: impl Into<String>) -> BadScheduleField {
    BadScheduleField {
        field,
        message: message.into(),
    }
}

impl Schedule {
    /// Check `spec` and parse its cron expression and time zone. The agent is
    /// taken as written; the first wrong field is named.
    pub fn parse(spec: ScheduleSpec) -> Result<Self, BadScheduleField> {
        let name = spec.name;
        let fine = !name.is_empty()
            && name.len() <= MAX_SCHEDULE_NAME
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !fine {
            return Err(bad(
                "name",
                format!("is `{name}`; give each schedule a name of letters, digits, - and _ (at most {MAX_SCHEDULE_NAME}, like \"nightly-deps\"), unique among schedules"),
            ));
        }
        let cron = spec.cron;
        let parsed = parse_cron(&cron).map_err(|m| bad("cron", format!("`{cron}` {m}")))?;
        let tz = spec.tz.unwrap_or_else(|| "UTC".to_owned());
        let zone = if tz == "UTC" {
            jiff::tz::TimeZone::UTC
        } else {
            jiff::tz::TimeZone::get(&tz).map_err(|_| {
                bad(
                    "tz",
                    format!("is `{tz}`, which is not a time zone this machine knows; write an IANA name like \"Europe/Berlin\" or leave it out for UTC"),
                )
            })?
        };
        let project = spec.project.trim().to_owned();
        if project.is_empty() {
            return Err(bad(
                "project",
                "is missing; name the registered project its tasks run in (see `gaffer project list`)",
            ));
        }
        let request = spec.request.trim().to_owned();
        if request.is_empty() {
            return Err(bad(
                "request",
                "is missing; write what each run asks for, like \"update the dependencies and fix what breaks\"",
            ));
        }
        let missed = match spec.missed.as_deref() {
            None | Some("skip") => Missed::Skip,
            Some("run_once") => Missed::RunOnce,
            Some(other) => {
                return Err(bad(
                    "missed",
                    format!("is `{other}`; write \"skip\" (slots missed while no scheduler ran are dropped) or \"run_once\" (one task for the newest missed slot)"),
                ))
            }
        };
        Ok(Schedule {
            name,
            cron,
            tz,
            project,
            request,
            agent: spec.agent,
            missed,
            spec: parsed,
            zone,
        })
    }
}

/// Resolve every `[[schedules]]` entry.
pub(crate) fn resolve(
    origin: &str,
    raw: Vec<RawSchedule>,
    acp_agents: &BTreeMap<String, AcpAgentConfig>,
) -> Result<Vec<Schedule>, ConfigError> {
    let mut out: Vec<Schedule> = Vec::new();
    for (i, s) in raw.into_iter().enumerate() {
        let name = s.name.unwrap_or_default();
        let schedule = Schedule::parse(ScheduleSpec {
            name: name.clone(),
            cron: s.cron.unwrap_or_default(),
            tz: s.tz,
            project: s.project.unwrap_or_default(),
            request: s.request.unwrap_or_default(),
            agent: s.agent,
            missed: s.missed,
        })
        .map_err(|b| {
            let field = match b.field {
                "name" => format!("schedules[{i}].name"),
                other => format!("schedules.{name}.{other}"),
            };
            invalid(origin, &field, b.message)
        })?;
        if out.iter().any(|o| o.name == name) {
            return Err(invalid(
                origin,
                &format!("schedules[{i}].name"),
                format!("`{name}` names two schedules; names must be unique (each slot's task is keyed by it)"),
            ));
        }
        if let Some(agent) = &schedule.agent {
            check_agent(
                origin,
                &format!("schedules.{name}.agent"),
                agent,
                acp_agents,
            )?;
        }
        out.push(schedule);
    }
    Ok(out)
}
