//! gaffer's pipeline: plan → code → review ⇄ fix → arbiter → test → ship (a local
//! branch, or with a forge: push → pull request → CI ⇄ owner fixes → tracker and issue).
//!
//! [`pipeline::decide`] is the pure part: from a task's state it says what happens
//! next. [`Engine::run_task`] does it: it records each step's intent, runs the
//! effect (an agent turn, a commit, the check), records the receipt, and asks
//! again. [`Engine::recover_task`] marks steps that were running when their worker
//! died, so the reducer can decide which run again and which need a probe or a
//! human. [`Engine::work`] is a worker: it leases tasks from the journal, so many
//! processes on many machines share the work and never run one task twice at once.
//!
//! Where things are: `driver` records, dispatches and recovers; `steps/<kind>`
//! holds each step kind's body (worktree, plan, owner, review, arbiter, check,
//! summary, ship); `turn` runs one agent session for a step; `gate` records the
//! approvals steps and agents ask for, after `read_only` refused what a read-only
//! role may not do; `live` carries people's messages and
//! interrupts into the running turn; `recovery` handles steps a crash
//! interrupted; `context` picks repository files for prompts; `privacy` decides
//! what each role's model may see (secure mode); `workers` leases tasks;
//! `dependencies` queues or blocks the tasks that run after others.

pub mod agents;
mod budget;
mod context;
mod dependencies;
mod driver;
mod error;
mod failure;
mod fallback;
mod follow;
mod gate;
pub mod intake;
mod keys;
mod live;
mod masks;
mod memory;
pub mod pipeline;
pub mod privacy;
pub mod prompts;
mod read_only;
mod recovery;
pub mod schedules;
mod stall;
mod steps;
mod text;
mod turn;
mod watchdog;
mod workers;

pub use agents::{
    prices_from_config, sandbox_from_config, AgentFactory, Backends, JournalCounters,
};
pub use driver::{Engine, Settings};
pub use error::{EngineError, Result, StepFailure};
pub use follow::FollowPass;
pub use intake::{origin_key, Intake};
pub use pipeline::{decide, recover, Limits, Next, StepKind};
pub use schedules::{Clock, ManualClock, Scheduler, SystemClock};
pub use steps::ship::{Credential, Following, Shipping, Tracker};
pub use workers::{this_process, Concurrency};
