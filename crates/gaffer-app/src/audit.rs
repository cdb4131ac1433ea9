//! The audit trail: every decision a person (or a policy rule) made, with who made it
//! and from where, read back from the journal. Nothing extra is stored: each of these
//! events already names its [`Actor`] (`api:<token name>`, `web:<token name>`, `cli`,
//! `discord`, `policy`, …), so the trail cannot disagree with what happened.

use crate::error::{AppError, Result};
use crate::App;
use gaffer_core::{Actor, Event, StreamId};
use gaffer_store::RecordedEvent;
use serde::Serialize;
use std::collections::HashMap;

/// One decision in the trail.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditEntry {
    /// Journal position (global order).
    pub pos: i64,
    /// When (ms since the epoch).
    pub at: i64,
    /// The task or project stream it belongs to.
    pub stream_id: String,
    /// What was decided: `task_created`, `task_cancelled`, `approval_approved`,
    /// `approval_allowed_for_task` (approved with a grant for the same call for
    /// the rest of the task; what the grant approves later is `approval_approved`
    /// by a policy actor naming the grantor), `approval_denied`,
    /// `auto_approve_on`, `auto_approve_off`.
    pub action: String,
    /// What it was about (the request, the approval's question, the reason).
    pub subject: String,
    /// Who, and from where.
    pub by: Actor,
    /// Their note, if they wrote one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The entries among `events`, in their order. Approval decisions are described by
/// the question they answered when its request is among `events` (it always is for a
/// whole stream or the whole journal).
pub fn entries(events: &[RecordedEvent]) -> Vec<AuditEntry> {
    let mut questions: HashMap<&str, String> = HashMap::new();
    let mut out = Vec::new();
    for r in events {
        let entry =
            |action: String, subject: String, by: &Actor, note: Option<String>| AuditEntry {
                pos: r.pos,
                at: r.at,
                stream_id: r.stream_id.clone(),
                action,
                subject,
                by: by.clone(),
                note,
            };
        match &r.event {
            Event::ApprovalRequested {
                approval_id,
                kind,
                summary,
                ..
            } => {
                questions.insert(
                    approval_id.0.as_str(),
                    format!("{} approval {}: {summary}", kind_name(kind), approval_id.0),
                );
            }
            Event::ApprovalDecided {
                approval_id,
                decision,
                by,
                note,
                for_task,
                ..
            } => {
                let subject = questions
                    .get(approval_id.0.as_str())
                    .cloned()
                    .unwrap_or_else(|| format!("approval {}", approval_id.0));
                let action = match decision {
                    gaffer_core::Decision::Approve if *for_task => "approval_allowed_for_task",
                    gaffer_core::Decision::Approve => "approval_approved",
                    gaffer_core::Decision::Deny => "approval_denied",
                };
                out.push(entry(action.into(), subject, by, note.clone()));
            }
            Event::TaskCreated { request, by, .. } => {
                out.push(entry("task_created".into(), request.clone(), by, None));
            }
            Event::TaskCancelled { by, reason } => {
                out.push(entry(
                    "task_cancelled".into(),
                    reason.clone().unwrap_or_default(),
                    by,
                    None,
                ));
            }
            Event::ProjectAutoApproveSet { enabled, by } => {
                let action = if *enabled {
                    "auto_approve_on"
                } else {
                    "auto_approve_off"
                };
                out.push(entry(action.into(), r.stream_id.clone(), by, None));
            }
            _ => {}
        }
    }
    out
}

fn kind_name(kind: &gaffer_core::ApprovalKind) -> String {
    serde_json::to_value(kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("{kind:?}"))
}

/// Events read per page when the whole journal is audited.
const PAGE: i64 = 1000;

impl App {
    /// The audit trail of one task (`Some(id)`), or of the whole journal.
    pub async fn audit(&self, task: Option<&str>) -> Result<Vec<AuditEntry>> {
        let journal = self.journal();
        let events = match task {
            Some(id) => {
                let events = journal.stream_events(&StreamId::from(id), 0).await?;
                if events.is_empty() {
                    return Err(AppError::NotFound {
                        what: "task",
                        id: id.to_owned(),
                    });
                }
                events
            }
            None => {
                let mut all = Vec::new();
                let mut after = 0;
                loop {
                    let page = journal.events_after(after, PAGE).await?;
                    let Some(last) = page.last() else { break };
                    after = last.pos;
                    all.extend(page);
                }
                all
            }
        };
        Ok(entries(&events))
    }
}
