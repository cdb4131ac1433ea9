//! Projects: registered git work trees, keyed by their physical path.

use crate::error::{AppError, Result};
use crate::{convert, new_id, App};
use gaffer_core::{Actor, Event, ProjectId, StreamId};
use gaffer_protocol::api;
use gaffer_store::{NewEvent, ProjectRow, StoreError};
use std::path::Path;

/// What [`App::add_project`] needs.
#[derive(Debug, Clone, Default)]
pub struct AddProject {
    /// A git work tree; `.`, `./`, trailing `/`, `..` and symlinks all map to one physical path.
    pub path: String,
    /// Unique short name; the directory's name when absent.
    pub name: Option<String>,
    /// The check command; detected when absent ([`detect_check_command`]).
    pub check: Option<String>,
}

/// The check command a project's files suggest: `Cargo.toml` → `cargo test`,
/// `package.json` → `npm test`, `pyproject.toml`/`setup.py`/`pytest.ini` → `pytest`,
/// `go.mod` → `go test ./...`, a `Makefile` with a `check:` target → `make check`.
pub fn detect_check_command(dir: &Path) -> Option<String> {
    let has = |f: &str| dir.join(f).is_file();
    if has("Cargo.toml") {
        return Some("cargo test".into());
    }
    if has("package.json") {
        return Some("npm test".into());
    }
    if has("pyproject.toml") || has("setup.py") || has("pytest.ini") {
        return Some("pytest".into());
    }
    if has("go.mod") {
        return Some("go test ./...".into());
    }
    if let Ok(text) = std::fs::read_to_string(dir.join("Makefile")) {
        if text.lines().any(|l| l.starts_with("check:")) {
            return Some("make check".into());
        }
    }
    None
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !name.starts_with('.')
}

fn is_git_work_tree(path: &Path) -> bool {
    std::process::Command::new("git")
        .arg("-C")
        .arg(path)
        .args(["rev-parse", "--is-inside-work-tree"])
        .stderr(std::process::Stdio::null())
        .output()
        .map(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).trim() == "true")
        .unwrap_or(false)
}

impl App {
    /// Register a git work tree as a project. Refuses (nothing stored) a path that
    /// does not exist or is not a git work tree, a bad or taken name, a path
    /// already registered, or an empty check command.
    pub async fn add_project(&self, req: AddProject, by: Actor) -> Result<api::Project> {
        if req.path.trim().is_empty() {
            return Err(AppError::invalid("path", "`path` must not be empty"));
        }
        let canonical = std::fs::canonicalize(&req.path)
            .map_err(|e| AppError::invalid("path", format!("`path` {}: {e}", req.path)))?;
        if !canonical.is_dir() {
            return Err(AppError::invalid(
                "path",
                format!("`path` {} is not a directory", canonical.display()),
            ));
        }
        if !is_git_work_tree(&canonical) {
            return Err(AppError::invalid(
                "path",
                format!(
                    "`path` {} is not a git work tree; run `git init` there first",
                    canonical.display()
                ),
            ));
        }
        let path = canonical.to_string_lossy().into_owned();
        let name = match req.name {
            Some(n) => n.trim().to_owned(),
            None => canonical
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        };
        if !valid_name(&name) {
            return Err(AppError::invalid(
                "name",
                format!("`name` `{name}` must be 1–64 letters, digits, `-`, `_` or `.`"),
            ));
        }
        let check_command = match req.check {
            Some(c) if c.trim().is_empty() => {
                return Err(AppError::invalid(
                    "check",
                    "`check` must not be empty when given",
                ))
            }
            Some(c) => Some(c.trim().to_owned()),
            None => detect_check_command(&canonical),
        };
        let existing = self.journal().projects().await?;
        if let Some(p) = existing.iter().find(|p| p.name == name) {
            return Err(AppError::conflict(
                "name_taken",
                format!(
                    "a project named `{name}` already exists ({}); pick another `name`",
                    p.id
                ),
            ));
        }
        if let Some(p) = existing.iter().find(|p| p.path == path) {
            return Err(AppError::conflict(
                "path_taken",
                format!("{path} is already registered as project `{}`", p.name),
            ));
        }
        let id = ProjectId(new_id("p"));
        let event = Event::ProjectRegistered {
            project_id: id.clone(),
            name,
            path,
            check_command,
        };
        let _ = by;
        match self
            .journal()
            .append(&StreamId::from(&id), 0, vec![NewEvent::now(event)])
            .await
        {
            Ok(_) => {}
            Err(StoreError::Constraint(m)) => return Err(AppError::conflict("conflict", m)),
            Err(e) => return Err(e.into()),
        }
        self.project(id.as_str()).await
    }

    /// Every project, by name.
    pub async fn projects(&self) -> Result<Vec<api::Project>> {
        Ok(self
            .journal()
            .projects()
            .await?
            .iter()
            .map(convert::project)
            .collect())
    }

    pub(crate) async fn project_row(&self, name_or_id: &str) -> Result<ProjectRow> {
        self.journal()
            .projects()
            .await?
            .into_iter()
            .find(|p| p.id == name_or_id || p.name == name_or_id)
            .ok_or_else(|| AppError::NotFound {
                what: "project",
                id: name_or_id.to_owned(),
            })
    }

    /// One project by name or id.
    pub async fn project(&self, name_or_id: &str) -> Result<api::Project> {
        Ok(convert::project(&self.project_row(name_or_id).await?))
    }

    /// Flip the project-wide auto-approve toggle (a `project_auto_approve_set` event).
    /// It applies to approvals created from now on; recorded ones are never re-judged.
    pub async fn set_auto_approve(
        &self,
        name_or_id: &str,
        enabled: bool,
        by: Actor,
    ) -> Result<api::Project> {
        let row = self.project_row(name_or_id).await?;
        let stream = StreamId(row.id.clone());
        for _ in 0..32 {
            let head = self.journal().head(&stream).await?;
            let event = Event::ProjectAutoApproveSet {
                enabled,
                by: by.clone(),
            };
            match self
                .journal()
                .append(&stream, head, vec![NewEvent::now(event)])
                .await
            {
                Ok(_) => return self.project(&row.id).await,
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(AppError::conflict(
            "conflict",
            "the project is changing too fast; try again",
        ))
    }
}
