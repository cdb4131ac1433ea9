//! What the configured schedules look like to a person: each one's next slot and
//! the task its newest slot made, read from the journal by the slot's origin key
//! (`schedule:<name>:<slot>`, unique per slot). The config's schedules change only in
//! the config file; those added at run time: `added_schedules.rs`.

use crate::{App, Result};
use gaffer_config::Schedule;
use gaffer_protocol::api;
use gaffer_store::StoredSchedule;

impl App {
    /// Each of `schedules` (the config's), in config order, then each schedule added
    /// at run time, oldest first, as it stands at `now_ms`: its next slot after
    /// `now_ms`, and its newest slot that made a task, with the task.
    pub async fn schedules(
        &self,
        schedules: &[Schedule],
        now_ms: i64,
    ) -> Result<Vec<api::Schedule>> {
        let mut out = Vec::with_capacity(schedules.len());
        for s in schedules {
            out.push(self.schedule_view(s, None, now_ms).await?);
        }
        for a in self.added_schedules().await? {
            out.push(
                self.schedule_view(&a.schedule, Some(&a.record), now_ms)
                    .await?,
            );
        }
        Ok(out)
    }

    /// One schedule as the API shows it at `now_ms`: `source` is `config`, or `api`
    /// with `added` its stored record.
    pub async fn schedule_view(
        &self,
        s: &Schedule,
        added: Option<&StoredSchedule>,
        now_ms: i64,
    ) -> Result<api::Schedule> {
        let last = self
            .journal()
            .newest_task_with_key_prefix(&s.key_prefix())
            .await?
            .and_then(|t| {
                // A key under the prefix that names no slot is not a slot's task.
                let slot = s.slot_of_key(t.origin_key.as_deref()?)?;
                Some((slot, t))
            });
        let next = s.next_after(now_ms);
        Ok(api::Schedule {
            name: s.name.clone(),
            source: if added.is_some() { "api" } else { "config" }.to_owned(),
            cron: s.cron.clone(),
            tz: s.tz.clone(),
            project: s.project.clone(),
            request: s.request.clone(),
            agent: s.agent.clone(),
            missed: s.missed.as_str().to_owned(),
            next_slot: next.map(gaffer_config::slot_text),
            next_at: next,
            created_by: added.map(|r| format!("{} via {}", r.created_by.name, r.created_by.via)),
            created_at: added.map(|r| r.created_at),
            last_slot: last
                .as_ref()
                .map(|(slot, _)| gaffer_config::slot_text(*slot)),
            last_task: last.map(|(_, t)| api::ScheduledTask {
                id: t.id,
                stage: t.stage,
                created_at: t.created_at,
            }),
        })
    }
}
