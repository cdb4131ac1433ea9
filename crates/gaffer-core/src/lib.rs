//! gaffer's domain, pure: no IO, no async, no clocks, no randomness.
//!
//! Every change to a task or project is an [`Event`]. The reducer
//! ([`StreamState::start`] and [`StreamState::apply`]) is the only place that
//! decides whether an event is a legal transition; everything else (engine,
//! server, adapters) appends events and reads the state the reducer builds.
//! An impossible event is [`Rejected`] with a reason and leaves the state
//! unchanged. What may run next (the [`Frontier`]) is derived from the state,
//! never stored.

mod approval;
pub mod dependency;
mod event;
mod follow_up;
mod frontier;
mod ids;
mod message;
mod pack;
mod project;
mod rejected;
mod session;
mod spend;
mod stage;
mod step;
mod stream;
mod task;

pub use approval::{
    granted_command, same_tool_call, Approval, ApprovalKind, ApprovalState, Decision,
};
pub use event::{Actor, ActorKind, Event, TaskOptions, Touched};
pub use follow_up::FollowUp;
pub use frontier::Frontier;
pub use ids::{ApprovalId, ProjectId, SessionId, StepId, StreamId, TaskId};
pub use message::{Delivered, Delivery, Interrupt, Message, MAX_MESSAGE_BYTES};
pub use pack::{ContextPack, PackMode, PackedFile};
pub use project::ProjectState;
pub use rejected::Rejected;
pub use session::{AgentSwitch, Role, Session};
pub use spend::{format_cost, format_usd, Spend};
pub use stage::Stage;
pub use step::{Intent, Step, StepState};
pub use stream::{StreamKind, StreamState};
pub use task::TaskState;

/// Milliseconds since the Unix epoch, as recorded by the edge that appended the event.
pub type Timestamp = i64;
