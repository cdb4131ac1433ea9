use crate::{Event, ProjectId, Rejected, Timestamp};
use serde::{Deserialize, Serialize};

/// A registered repository, as its events describe it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProjectState {
    /// Its id and stream id.
    pub id: ProjectId,
    /// Short unique name.
    pub name: String,
    /// Canonical (physical) path of the repository.
    pub path: String,
    /// The command that checks the project, if known.
    pub check_command: Option<String>,
    /// The project-wide auto-approve toggle.
    pub auto_approve: bool,
    /// When it was registered.
    pub created_at: crate::Timestamp,
    /// When it last changed.
    pub updated_at: crate::Timestamp,
}

impl ProjectState {
    /// Start a project stream from its first event.
    pub fn create(at: Timestamp, event: &Event) -> Result<Self, Rejected> {
        match event {
            Event::ProjectRegistered {
                project_id,
                name,
                path,
                check_command,
            } => {
                if project_id.as_str().is_empty() {
                    return Err(Rejected::Empty("project_id"));
                }
                if name.trim().is_empty() {
                    return Err(Rejected::Empty("name"));
                }
                if path.is_empty() {
                    return Err(Rejected::Empty("path"));
                }
                Ok(Self {
                    id: project_id.clone(),
                    name: name.clone(),
                    path: path.clone(),
                    check_command: check_command.clone(),
                    auto_approve: false,
                    created_at: at,
                    updated_at: at,
                })
            }
            other => Err(Rejected::NotACreation {
                stream: "project",
                expected: "project_registered",
                got: other.kind(),
            }),
        }
    }

    /// Apply one later event; on rejection nothing changes.
    pub fn apply(&mut self, at: Timestamp, event: &Event) -> Result<(), Rejected> {
        match event {
            Event::ProjectRegistered { .. } => {
                return Err(Rejected::AlreadyCreated { got: event.kind() })
            }
            Event::ProjectCheckCommandSet { check_command } => {
                self.check_command = check_command.clone();
            }
            Event::ProjectAutoApproveSet { enabled, .. } => self.auto_approve = *enabled,
            other => {
                return Err(Rejected::WrongStream {
                    stream: "project",
                    got: other.kind(),
                })
            }
        }
        self.updated_at = at;
        Ok(())
    }
}
