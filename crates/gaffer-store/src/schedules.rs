//! Schedules created at run time (`migrations/*/0010_api_schedules.sql`): a row per
//! schedule added, kept after it is removed as the record of who removed it. The
//! SQL is the same for both backends ([`schedule_sql!`], invoked by
//! [`journal_backend!`](crate::shared)).

use gaffer_core::Actor;
use serde::Serialize;

/// A schedule added through the API, as stored. The fields a schedule runs by are
/// as the API took them (checked there); this crate does not parse cron.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StoredSchedule {
    /// Its row (assigned when stored; ignored by [`crate::Journal::schedule_add`]).
    pub id: i64,
    /// Unique among the schedules not removed.
    pub name: String,
    /// The cron expression.
    pub cron: String,
    /// The time zone its fields are read in.
    pub tz: String,
    /// The project (name or id) its tasks run in.
    pub project: String,
    /// What each task is asked to do.
    pub request: String,
    /// The agent for every role, if not the configured ones.
    pub agent: Option<String>,
    /// `skip` or `run_once`.
    pub missed: String,
    /// Added at (ms).
    pub created_at: i64,
    /// Who added it.
    pub created_by: Actor,
    /// Removed at (ms); `None` while it runs.
    pub removed_at: Option<i64>,
    /// Who removed it.
    pub removed_by: Option<Actor>,
}

pub(crate) fn actor_json(a: &Actor) -> String {
    serde_json::to_string(a).unwrap_or_default()
}

pub(crate) fn actor_of(json: &str) -> crate::Result<Actor> {
    serde_json::from_str(json)
        .map_err(|e| crate::shared::corrupt("api_schedules", 0, format!("actor `{json}`: {e}")))
}

/// The schedule methods of a journal type `$J` with a `pool` (see
/// [`crate::Journal::schedule_add`] and the others for what each does).
macro_rules! schedule_sql {
    ($J:ty, $Row:ty) => {
        const SCHEDULE_COLUMNS: &str = "id, name, cron, tz, project, request, agent, missed, \
             created_at, created_by, removed_at, removed_by";

        fn stored_schedule(r: &$Row) -> Result<$crate::StoredSchedule> {
            use $crate::schedules::actor_of;
            Ok($crate::StoredSchedule {
                id: r.try_get("id")?,
                name: r.try_get("name")?,
                cron: r.try_get("cron")?,
                tz: r.try_get("tz")?,
                project: r.try_get("project")?,
                request: r.try_get("request")?,
                agent: r.try_get("agent")?,
                missed: r.try_get("missed")?,
                created_at: r.try_get("created_at")?,
                created_by: actor_of(&r.try_get::<String, _>("created_by")?)?,
                removed_at: r.try_get("removed_at")?,
                removed_by: match r.try_get::<Option<String>, _>("removed_by")? {
                    Some(j) => Some(actor_of(&j)?),
                    None => None,
                },
            })
        }

        impl $J {
            /// See [`Journal::schedule_add`].
            pub async fn schedule_add(&self, s: &$crate::StoredSchedule) -> Result<$crate::StoredSchedule> {
                use $crate::schedules::actor_json;
                let mut tx = $crate::shared::WriteTx::begin("schedule_add", std::time::Instant::now(), begin_write(&self.pool)).await?;
                let row = sqlx::query(&format!(
                    "INSERT INTO api_schedules
                       (name, cron, tz, project, request, agent, missed, created_at, created_by, removed_at, removed_by)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
                     RETURNING {SCHEDULE_COLUMNS}"
                ))
                .bind(&s.name)
                .bind(&s.cron)
                .bind(&s.tz)
                .bind(&s.project)
                .bind(&s.request)
                .bind(&s.agent)
                .bind(&s.missed)
                .bind(s.created_at)
                .bind(actor_json(&s.created_by))
                .bind(s.removed_at)
                .bind(s.removed_by.as_ref().map(actor_json))
                .fetch_one(&mut *tx)
                .await
                .map_err(|e| constraint(e, &format!("a schedule named `{}`", s.name)))?;
                let stored = stored_schedule(&row)?;
                tx.commit().await?;
                Ok(stored)
            }

            /// See [`Journal::schedule_remove`].
            pub async fn schedule_remove(
                &self,
                name: &str,
                by: &gaffer_core::Actor,
                at: i64,
            ) -> Result<Option<$crate::StoredSchedule>> {
                use $crate::schedules::actor_json;
                let mut tx = $crate::shared::WriteTx::begin("schedule_remove", std::time::Instant::now(), begin_write(&self.pool)).await?;
                let row = sqlx::query(&format!(
                    "UPDATE api_schedules SET removed_at = $2, removed_by = $3
                     WHERE name = $1 AND removed_at IS NULL
                     RETURNING {SCHEDULE_COLUMNS}"
                ))
                .bind(name)
                .bind(at)
                .bind(actor_json(by))
                .fetch_optional(&mut *tx)
                .await?;
                let removed = row.as_ref().map(stored_schedule).transpose()?;
                tx.commit().await?;
                Ok(removed)
            }

            /// See [`Journal::schedules`].
            pub async fn schedules(&self, with_removed: bool) -> Result<Vec<$crate::StoredSchedule>> {
                let filter = if with_removed { "" } else { "WHERE removed_at IS NULL" };
                let rows = sqlx::query(&format!(
                    "SELECT {SCHEDULE_COLUMNS} FROM api_schedules {filter} ORDER BY id"
                ))
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(stored_schedule).collect()
            }
        }
    };
}

pub(crate) use schedule_sql;
