//! What the configured schedules look like to a person: each one's next slot and
//! the task its newest slot made, read from the journal by the slot's origin key
//! (`schedule:<name>:<slot>`, unique per slot). Schedules come from the config, so
//! there is nothing here to change them.

use crate::{App, Result};
use gaffer_config::Schedule;
use gaffer_protocol::api;

impl App {
    /// Each of `schedules`, in config order, as it stands at `now_ms`: its next
    /// slot after `now_ms`, and its newest slot that made a task, with the task.
    pub async fn schedules(
        &self,
        schedules: &[Schedule],
        now_ms: i64,
    ) -> Result<Vec<api::Schedule>> {
        let mut out = Vec::with_capacity(schedules.len());
        for s in schedules {
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
            out.push(api::Schedule {
                name: s.name.clone(),
                cron: s.cron.clone(),
                tz: s.tz.clone(),
                project: s.project.clone(),
                request: s.request.clone(),
                agent: s.agent.clone(),
                missed: s.missed.as_str().to_owned(),
                next_slot: next.map(gaffer_config::slot_text),
                next_at: next,
                last_slot: last
                    .as_ref()
                    .map(|(slot, _)| gaffer_config::slot_text(*slot)),
                last_task: last.map(|(_, t)| api::ScheduledTask {
                    id: t.id,
                    stage: t.stage,
                    created_at: t.created_at,
                }),
            });
        }
        Ok(out)
    }
}
