//! Schedules added and removed at run time (`POST /api/schedules`, `DELETE
//! /api/schedules/{name}`, `gaffer schedules add|remove`), beside the config's
//! `[[schedules]]`, which only the config file changes.
//!
//! They live in the store's `api_schedules` table (not journal events: no task
//! depends on them), each row with who added it and when, and once removed who
//! removed it and when. A name is unique among the config's schedules and the
//! added ones still running. Each slot of a schedule becomes a task with the origin
//! key `schedule:<name>:<slot>` whichever way it was defined, so a name removed and
//! added again never runs a slot twice. Schedulers in this process are woken by
//! [`App::schedules_changed`]; other processes read the table again every few
//! seconds (gaffer-engine's `Scheduler`).

use crate::error::{AppError, Result};
use crate::App;
use gaffer_config::{Schedule, ScheduleSpec};
use gaffer_core::Actor;
use gaffer_store::{StoreError, StoredSchedule};
use tokio::sync::watch;

/// A schedule added at run time: what it runs by, and its stored record.
#[derive(Debug, Clone)]
pub struct AddedSchedule {
    /// Parsed, as the scheduler runs it.
    pub schedule: Schedule,
    /// As stored: who added it, and when.
    pub record: StoredSchedule,
}

impl App {
    /// Add a schedule (its request redacted, its project stored by name). Refused
    /// with nothing stored: a bad field (400 naming it: `name`, `cron`, `tz`,
    /// `project`, `request`, `agent`, `missed`), an agent the project's privacy
    /// forbids (409 `privacy_refused`), a name that `configured` (the config's
    /// schedules) or a running added schedule has (409 `name_taken`).
    pub async fn add_schedule(
        &self,
        spec: ScheduleSpec,
        configured: &[Schedule],
        by: Actor,
    ) -> Result<AddedSchedule> {
        let parsed = Schedule::parse(spec)
            .map_err(|b| AppError::invalid(b.field, format!("`{}` {}", b.field, b.message)))?;
        if parsed.request.len() > crate::tasks::MAX_REQUEST_BYTES {
            return Err(AppError::invalid(
                "request",
                format!(
                    "`request` is longer than {} bytes",
                    crate::tasks::MAX_REQUEST_BYTES
                ),
            ));
        }
        if let Some(agent) = &parsed.agent {
            self.check_agent(agent)?;
        }
        let project = self.requested_project(&parsed.project).await?;
        if let Some(admission) = self.inner.admission.get() {
            admission
                .admit(&project.name, parsed.agent.as_deref())
                .map_err(|why| AppError::conflict("privacy_refused", why))?;
        }
        if configured.iter().any(|c| c.name == parsed.name) {
            return Err(AppError::conflict(
                "name_taken",
                format!(
                    "a schedule named `{}` is defined in the config file; pick another `name`",
                    parsed.name
                ),
            ));
        }
        let record = StoredSchedule {
            id: 0,
            name: parsed.name.clone(),
            cron: parsed.cron.clone(),
            tz: parsed.tz.clone(),
            project: project.name,
            request: self.redacted(&parsed.request),
            agent: parsed.agent.clone(),
            missed: parsed.missed.as_str().to_owned(),
            created_at: gaffer_store::now_ms(),
            created_by: by,
            removed_at: None,
            removed_by: None,
        };
        let record = match self.journal().schedule_add(&record).await {
            Ok(r) => r,
            Err(StoreError::Constraint(_)) => {
                return Err(AppError::conflict(
                    "name_taken",
                    format!(
                        "a schedule named `{}` already runs (added through the API); pick another `name`, or remove it first (`gaffer schedules remove {}`)",
                        parsed.name, parsed.name
                    ),
                ))
            }
            Err(e) => return Err(e.into()),
        };
        self.inner.schedules_changed.send_modify(|n| *n += 1);
        let schedule = parse_stored(&record).map_err(|m| AppError::invalid("request", m))?;
        Ok(AddedSchedule { schedule, record })
    }

    /// Remove the added schedule `name`: it stops, in every scheduler, and its
    /// record stays with who removed it. One of `configured` is refused (409
    /// `defined_in_config`); a name no running added schedule has is 404.
    pub async fn remove_schedule(
        &self,
        name: &str,
        configured: &[Schedule],
        by: Actor,
    ) -> Result<StoredSchedule> {
        if configured.iter().any(|c| c.name == name) {
            return Err(AppError::conflict(
                "defined_in_config",
                format!("schedule `{name}` is defined in the config file; remove it there"),
            ));
        }
        let removed = self
            .journal()
            .schedule_remove(name, &by, gaffer_store::now_ms())
            .await?
            .ok_or_else(|| AppError::NotFound {
                what: "schedule",
                id: name.to_owned(),
            })?;
        self.inner.schedules_changed.send_modify(|n| *n += 1);
        Ok(removed)
    }

    /// The added schedules still running, oldest first. One whose stored fields no
    /// longer parse (this machine lost a time zone) is left out, with a warning.
    pub async fn added_schedules(&self) -> Result<Vec<AddedSchedule>> {
        let mut out = Vec::new();
        for record in self.journal().schedules(false).await? {
            match parse_stored(&record) {
                Ok(schedule) => out.push(AddedSchedule { schedule, record }),
                Err(e) => {
                    tracing::warn!(schedule = %record.name, error = %e, "an added schedule cannot run")
                }
            }
        }
        Ok(out)
    }

    /// Changes whenever this process adds or removes a schedule (any copy of this
    /// service): schedulers look again at once.
    pub fn schedules_changed(&self) -> watch::Receiver<u64> {
        self.inner.schedules_changed.subscribe()
    }
}

fn parse_stored(r: &StoredSchedule) -> std::result::Result<Schedule, String> {
    Schedule::parse(ScheduleSpec {
        name: r.name.clone(),
        cron: r.cron.clone(),
        tz: Some(r.tz.clone()),
        project: r.project.clone(),
        request: r.request.clone(),
        agent: r.agent.clone(),
        missed: Some(r.missed.clone()),
    })
    .map_err(|b| format!("`{}` {}", b.field, b.message))
}
