use crate::{Event, ProjectState, Rejected, TaskState, Timestamp};
use serde::{Deserialize, Serialize};

/// What a journal stream is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamKind {
    /// A project stream.
    Project,
    /// A task stream.
    Task,
}

/// The state of one journal stream, built by the reducer from its events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "stream", rename_all = "snake_case")]
pub enum StreamState {
    /// A project.
    Project(ProjectState),
    /// A task.
    Task(Box<TaskState>),
}

impl StreamState {
    /// The reducer for a stream's first event: it must create the stream.
    pub fn start(at: Timestamp, event: &Event) -> Result<Self, Rejected> {
        match event {
            Event::ProjectRegistered { .. } => Ok(Self::Project(ProjectState::create(at, event)?)),
            Event::TaskCreated { .. } => Ok(Self::Task(Box::new(TaskState::create(at, event)?))),
            other => Err(Rejected::NotACreation {
                stream: "new",
                expected: "project_registered or task_created",
                got: other.kind(),
            }),
        }
    }

    /// The reducer for every later event. On `Err` the state is exactly as before.
    pub fn apply(&mut self, at: Timestamp, event: &Event) -> Result<(), Rejected> {
        match self {
            Self::Project(p) => p.apply(at, event),
            Self::Task(t) => t.apply(at, event),
        }
    }

    /// The reducer as a function: `(state, event) -> Result<state, Rejected>`.
    /// `None` is the state of a stream that does not exist yet.
    pub fn reduce(state: Option<&Self>, at: Timestamp, event: &Event) -> Result<Self, Rejected> {
        match state {
            None => Self::start(at, event),
            Some(s) => {
                let mut next = s.clone();
                next.apply(at, event)?;
                Ok(next)
            }
        }
    }

    /// Replay a stream's events from the beginning.
    pub fn replay<'a>(
        events: impl IntoIterator<Item = (Timestamp, &'a Event)>,
    ) -> Result<Option<Self>, (usize, Rejected)> {
        let mut state: Option<Self> = None;
        for (i, (at, event)) in events.into_iter().enumerate() {
            match state.as_mut() {
                None => state = Some(Self::start(at, event).map_err(|r| (i, r))?),
                Some(s) => s.apply(at, event).map_err(|r| (i, r))?,
            }
        }
        Ok(state)
    }

    /// Which kind of stream this is.
    pub fn kind(&self) -> StreamKind {
        match self {
            Self::Project(_) => StreamKind::Project,
            Self::Task(_) => StreamKind::Task,
        }
    }
}
