//! gaffer's journal: the truth of every task and project.
//!
//! Events are appended to per-stream, hash-chained logs with optimistic
//! concurrency (the caller names the head it expects). The reducer from
//! `gaffer-core` checks each event; projections (projects, tasks, steps,
//! approvals, sessions) are updated in the same transaction and can be
//! rebuilt from events alone. [`Journal`] is the backend-neutral interface;
//! [`SqliteJournal`] is the embedded default, [`PgJournal`] the one many
//! machines share; [`open`] picks one from a URL or path.

mod backup;
mod copy;
mod error;
mod hash;
mod journal;
mod lease;
mod open;
mod postgres;
mod projection;
mod schedules;
mod shared;
mod sqlite;

pub use backup::{backup_sqlite, restore_sqlite, Backup, Restored};
pub use copy::{copy_journal, Copied};
pub use error::{Result, StoreError};
pub use hash::{event_hash, GENESIS_HASH};
pub use journal::{
    now_ms, Appended, ApprovalFilter, Broken, DiscordMessage, Journal, NewEvent, NotifyItem,
    RecordedEvent, Sanitizer, TaskFilter, TaskView, VerifyReport, WantedEvents,
};
pub use lease::{
    EventWriter, FencedJournal, Lease, LeaseEnd, LeaseRow, LeaseState, TaskLease, WorkerInfo,
    WorkerRow,
};
pub use open::{open, schema_found, Location, SchemaFound};
pub use postgres::{mask_url, PgJournal, NOTIFY_CHANNEL};
pub use projection::{ApprovalRow, ProjectRow, Projections, SessionRow, StepRow, TaskRow};
pub use schedules::StoredSchedule;
pub use sqlite::{Durability, SqliteJournal};
