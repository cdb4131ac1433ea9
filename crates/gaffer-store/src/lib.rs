//! gaffer's journal: the truth of every task and project.
//!
//! Events are appended to per-stream, hash-chained logs with optimistic
//! concurrency (the caller names the head it expects). The reducer from
//! `gaffer-core` checks each event; projections (projects, tasks, steps,
//! approvals, sessions) are updated in the same transaction and can be
//! rebuilt from events alone. [`Journal`] is the backend-neutral interface;
//! [`SqliteJournal`] is the embedded default.

mod error;
mod hash;
mod journal;
mod projection;
mod shared;
mod sqlite;

pub use error::{Result, StoreError};
pub use hash::{event_hash, GENESIS_HASH};
pub use journal::{
    now_ms, Appended, Broken, Journal, NewEvent, RecordedEvent, TaskFilter, TaskView, VerifyReport,
};
pub use projection::{ApprovalRow, ProjectRow, Projections, SessionRow, StepRow, TaskRow};
pub use sqlite::{Durability, SqliteJournal};
