//! gaffer's app service: the one API that the CLI, the HTTP server, the Discord
//! adapter and the engine call. It turns requests into journal events (the
//! reducer in `gaffer-core` judges each one) and reads projections back as the
//! wire types of `gaffer_protocol::api`. It holds no state of its own beyond a
//! cache of facts that never change (which task an approval belongs to).
//!
//! # Approvals, for the engine
//!
//! ```text
//! engine                         app                              journal
//! ──────                         ───                              ───────
//! request_approval(key, …) ───►  same key recorded? → return it
//!                                else judge policy ONCE ───────►  approval_requested
//!                                (auto rule / toggle fired?) ──►  + approval_decided(by policy)  [one append]
//! wait_for_decision(id) ──────►  subscribe, read; pending? sleep on the
//!                                committed-event broadcast until a settle event
//!                                of this approval or its task, or expires_at ─► approval_expired
//! ◄── Resolution (approved / denied / expired / withdrawn, with the reason)
//!
//! person ─► decide(id, decision, actor, note, scope) ─► approval_decided (first wins)
//! engine ─► withdraw(id, reason)  (the asker moved on)  ─► approval_withdrawn (once)
//! ```
//!
//! - **One approval per key.** [`App::request_approval`] is keyed by
//!   `(task, step, attempt)`: asking again for the same key returns the
//!   recorded approval — pending or long decided — never a second one (the
//!   reducer and the store's `UNIQUE(task_id, step_id, attempt)` refuse a
//!   duplicate; a lost race re-reads and returns the winner). To ask a new
//!   question about the same step, the engine bumps `attempt`.
//! - **Policy once.** Auto-approve rules (tool name, command prefix, path glob,
//!   intent), the project-wide toggle (`ProjectAutoApproveSet`), the deciders and
//!   the expiry are evaluated when the approval is created and recorded in its
//!   `details.policy`. An auto-approval is the `approval_decided` event (by a
//!   `policy` actor) appended **in the same append** as the request, so it can
//!   neither fire twice nor be lost.
//! - **First decision wins.** [`App::decide`] appends `approval_decided` to the
//!   approval's own task stream at the head it read; a later or concurrent
//!   decision is refused by the reducer and gets the recorded approval back
//!   with [`Decided::applied`] `= false` (the HTTP API answers 409
//!   `already_decided` with it). A decision names its approval id; the optional
//!   `scope` (task id, project id) must match or nothing is recorded.
//! - **Allow for this task.** [`App::allow_for_task`] approves a `tool`
//!   approval that names a command and records a grant (`for_task` on its
//!   `approval_decided`). A later request of the **same task** for the same tool
//!   and exactly the same command line is approved in the same append as its
//!   request, by a `policy` actor naming the grantor, with the grant's id in
//!   `approval_decided.grant` (the reducer checks that the grant covers it).
//!   Other kinds, other commands and other tasks still ask.
//! - **No polling.** [`App::wait_for_decision`] is woken by the journal's
//!   committed-event broadcast; its only timer is the approval's own expiry.
//!   Expiry records `approval_expired` with the reason the agent is shown and
//!   counts as a denial. A final task event withdraws every pending approval.
//! - **Resolves once.** [`App::withdraw`] (the asker moved on) settles a pending
//!   approval once; withdrawing again, or after a decision, changes nothing.
//!   Each approval thus has exactly one settle event: one notification.
//!
//! - **Across processes.** A decision made by another process (`gaffer approve`
//!   in a terminal while `gaffer serve` runs the task) wakes the waiter too when
//!   the journal follows other processes' appends
//!   (`SqliteJournal::follow_other_processes`, which the CLI turns on).
//!
//! The calls, in short:
//!
//! ```text
//! request_approval(ApprovalRequest { task_id, step_id, attempt, kind, summary, details, subject })
//!     -> Result<api::Approval>                       // same key → same approval
//! wait_for_decision(&approval_id) -> Result<Resolution>   // .approved(), .reason()
//! decide(&approval_id, Decision, Actor, note: Option<String>, Scope { task_id, project_id })
//!     -> Result<Decided { approval, applied }>       // applied = false: someone came first
//! allow_for_task(&approval_id, Actor, note, Scope)     // approve + grant the same command in the task
//! withdraw(&approval_id, reason) -> Result<Decided>  // the asker moved on
//! approvals(state: Option<&str>) / approval(&id)     // newest first
//! run_expiry()                                       // the server runs it: expiry with no waiter
//! ```
//!
//! # Projects and tasks
//!
//! [`App::add_project`] registers a git work tree by its physical path;
//! [`App::create_task`] queues a request (the engine picks queued tasks up), or
//! records it `waiting` for the tasks it runs after (`after`; the engine queues it
//! when the last is done, and blocks it when one fails);
//! [`App::cancel_task`], [`App::retry_task`], [`App::tasks`], [`App::task`].
//! [`App::schedules`] shows the configured `[[schedules]]` with each one's next
//! slot and the task its newest slot made.
//! [`App::add_schedule`] and [`App::remove_schedule`] change the schedules kept
//! in the journal's database beside the config's (see `added_schedules.rs`).
//!
//! # Live control
//!
//! [`App::send_message`] records a person's message for the task's running agent
//! (`message_sent`, with who sent it and from where, the text redacted);
//! [`App::interrupt`] records that a person stopped the running turn
//! (`turn_interrupted`). The engine running the task is woken by these events and
//! delivers or interrupts; [`App::messages`] lists what was sent and delivered.

#![deny(missing_docs)]

mod added_schedules;
mod approvals;
pub mod audit;
mod convert;
mod dependencies;
mod error;
mod hooks;
mod live;
pub mod memory;
pub mod policy;
mod projects;
pub mod sanitize;
mod schedules;
mod tasks;

pub use added_schedules::AddedSchedule;
pub use approvals::{ApprovalRequest, Decided, Outcome, Resolution, Scope};
pub use audit::AuditEntry;
pub use error::{AppError, Result};
pub use hooks::{HookError, HookReceiver};
pub use policy::{Policy, Subject, TEMPLATE as POLICY_TEMPLATE};
pub use projects::{detect_check_command, AddProject};
pub use tasks::{
    CreatedTask, IssueReader, IssueRequest, NewTask, TaskAdmission, TaskQuery, MAX_KEY_BYTES,
    SYSTEM_KEY_PREFIXES,
};

use gaffer_store::Journal;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Replaces secret values in text: the front end knows the secrets (configured values,
/// credential shapes), the app service applies them to everything stored.
pub type Redact = Arc<dyn Fn(&str) -> String + Send + Sync>;

/// The app service. Cheap to clone; every clone shares one journal.
#[derive(Clone)]
pub struct App {
    inner: Arc<Inner>,
}

struct Inner {
    journal: Arc<dyn Journal>,
    policy: Policy,
    redact: Option<Redact>,
    /// The ACP agents the config declares: a task may name `acp:<name>` only for these.
    acp_agents: Arc<std::collections::BTreeSet<String>>,
    /// What decides whether a task may be stored at all (the engine: each project's
    /// privacy); set once, shared by every copy of this service.
    admission: Arc<std::sync::OnceLock<Arc<dyn TaskAdmission>>>,
    /// Bumped when this process adds or removes a schedule; shared by every copy.
    schedules_changed: Arc<tokio::sync::watch::Sender<u64>>,
    /// approval id → (task id, project id): facts that never change once recorded.
    homes: Mutex<HashMap<String, (String, String)>>,
    /// project id → name (a project is never renamed).
    names: Mutex<HashMap<String, String>>,
}

impl App {
    /// An app over `journal`, judging new approvals by `policy`.
    pub fn new(journal: Arc<dyn Journal>, policy: Policy) -> Self {
        Self::build(
            journal,
            policy,
            None,
            Arc::default(),
            Arc::default(),
            Arc::new(tokio::sync::watch::Sender::new(0)),
        )
    }

    fn build(
        journal: Arc<dyn Journal>,
        policy: Policy,
        redact: Option<Redact>,
        acp_agents: Arc<std::collections::BTreeSet<String>>,
        admission: Arc<std::sync::OnceLock<Arc<dyn TaskAdmission>>>,
        schedules_changed: Arc<tokio::sync::watch::Sender<u64>>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                journal,
                policy,
                redact,
                acp_agents,
                admission,
                schedules_changed,
                homes: Mutex::new(HashMap::new()),
                names: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The same service, redacting with `redact` before anything is stored: what people
    /// send (requests, notes, reasons) and, from now on, every string of every event
    /// anyone appends to this journal in this process — the engine's included — with
    /// long strings cut ([`sanitize`]).
    pub fn with_redaction(&self, redact: Redact) -> Self {
        self.inner
            .journal
            .sanitize_appends(sanitize::sanitizer(redact.clone()));
        Self::build(
            self.inner.journal.clone(),
            self.inner.policy.clone(),
            Some(redact),
            self.inner.acp_agents.clone(),
            self.inner.admission.clone(),
            self.inner.schedules_changed.clone(),
        )
    }

    /// The same service, letting tasks name `acp:<name>` for these declared ACP agents
    /// (`[agents.acp.<name>]`); without it no `acp:` agent is accepted.
    pub fn with_acp_agents(&self, names: impl IntoIterator<Item = String>) -> Self {
        Self::build(
            self.inner.journal.clone(),
            self.inner.policy.clone(),
            self.inner.redact.clone(),
            Arc::new(names.into_iter().collect()),
            self.inner.admission.clone(),
            self.inner.schedules_changed.clone(),
        )
    }

    /// The same service over another journal: a worker hands it a
    /// `gaffer_store::FencedJournal`, so every append it makes for its leased task
    /// (approval requests included) carries the lease.
    pub fn with_journal(&self, journal: Arc<dyn Journal>) -> Self {
        Self::build(
            journal,
            self.inner.policy.clone(),
            self.inner.redact.clone(),
            self.inner.acp_agents.clone(),
            self.inner.admission.clone(),
            self.inner.schedules_changed.clone(),
        )
    }

    /// From now on every task, from any copy of this service (the API's, Discord's,
    /// the CLI's), is first put to `admission`; a refused one is not stored. Set once:
    /// a second call is ignored.
    pub fn admit_tasks_with(&self, admission: Arc<dyn TaskAdmission>) {
        let _ = self.inner.admission.set(admission);
    }

    /// `text` with the configured secrets replaced (unchanged without a redaction).
    pub(crate) fn redacted(&self, text: &str) -> String {
        match &self.inner.redact {
            Some(r) => r(text),
            None => text.to_owned(),
        }
    }

    /// The journal, for event streams (`subscribe`, `events_after`).
    pub fn journal(&self) -> &Arc<dyn Journal> {
        &self.inner.journal
    }

    /// The policy in effect.
    pub fn policy(&self) -> &Policy {
        &self.inner.policy
    }
}

/// A fresh id with a prefix: `t-`, `p-`, `ap-` followed by a UUID v7 (time-ordered).
pub fn new_id(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::now_v7().simple())
}
