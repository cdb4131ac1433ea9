use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub String);

        impl $name {
            /// The id as a string slice.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                Self(s.to_owned())
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                Self(s)
            }
        }
    };
}

string_id!(
    /// A task, and the journal stream of its events (`t-…`).
    TaskId
);
string_id!(
    /// A registered project, and the journal stream of its events (`p-…`).
    ProjectId
);
string_id!(
    /// A step inside one task, chosen by the engine (`plan`, `code/2`, …).
    StepId
);
string_id!(
    /// An approval, unique across the journal.
    ApprovalId
);
string_id!(
    /// gaffer's own id of an agent session.
    SessionId
);
string_id!(
    /// One journal stream: a task id or a project id.
    StreamId
);

impl From<&TaskId> for StreamId {
    fn from(id: &TaskId) -> Self {
        Self(id.0.clone())
    }
}

impl From<&ProjectId> for StreamId {
    fn from(id: &ProjectId) -> Self {
        Self(id.0.clone())
    }
}
