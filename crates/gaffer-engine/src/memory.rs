//! The project's memory in the engine: every role's prompt starts with it, and an
//! owner's or reviewer's proposed addition (a fenced `memory` block) is written
//! only once a person approves it (see `gaffer_app::memory`).

use crate::failure::Failure;
use crate::{prompts, Engine};
use gaffer_app::memory;
use gaffer_app::Subject;
use gaffer_core::{ApprovalKind, Step, TaskState};
use serde_json::json;

/// The approval key of a step attempt's memory proposal: the last of the
/// attempt's thousand keys (the gate's tool approvals count up from × 1000 + 1).
const PROPOSAL_KEY: u32 = 999;

/// `prompt` after the project's memory, when it has one.
pub(crate) fn with_memory(memory: Option<String>, prompt: String) -> String {
    match memory {
        Some(notes) => format!(
            "# Project memory\n\nNotes the people of this project keep for every task (conventions, lessons learned):\n\n{notes}\n\n---\n\n{prompt}"
        ),
        None => prompt,
    }
}

impl Engine {
    /// The memory of the task's project, as a prompt gives it.
    pub(crate) fn project_memory(&self, project: &str) -> Option<String> {
        memory::for_prompt(&self.settings.data_dir, project)
    }

    /// Asks a person about the addition `answer` proposes, if any, and writes it
    /// when they approve. A proposal that cannot fit is not asked about (the log
    /// says why); the step goes on either way.
    pub(crate) async fn propose_memory(
        &self,
        task: &TaskState,
        step: &Step,
        answer: &str,
    ) -> Result<(), Failure> {
        let Some(text) = memory::proposal(answer) else {
            return Ok(());
        };
        let project = self.project(task).await?;
        let dir = &self.settings.data_dir;
        let current = memory::read(dir, &project.name).unwrap_or_default();
        if memory::holds(&current, &text) {
            return Ok(());
        }
        if current.len() + text.len() + 3 > memory::MEMORY_MAX_BYTES {
            tracing::warn!(task = %task.id, step = %step.id, "a memory proposal was not asked about: project `{}`'s memory is full ({} bytes); trim it with `gaffer memory edit`", project.name, current.len());
            return Ok(());
        }
        let summary = format!(
            "{} proposes to remember for every task of {}: {}",
            step.name,
            project.name,
            prompts::head(&text, 300)
        );
        let details = json!({
            "memory": text,
            "project": project.name,
            "file": memory::path(dir, &project.name),
        });
        let resolution = self
            .ask(
                task,
                step,
                step.attempt * 1000 + PROPOSAL_KEY,
                ApprovalKind::Memory,
                summary,
                details,
                Subject::default(),
            )
            .await?;
        if resolution.approved() {
            if let Err(e) = memory::add(dir, &project.name, &text) {
                tracing::warn!(task = %task.id, step = %step.id, "an approved memory addition was not written: {e}");
            }
        }
        Ok(())
    }
}
