//! What a notification tells: [`News`], made from journal events, stored in the
//! outbox as JSON, and rendered per channel (a webhook's body, an ntfy publish)
//! at delivery, when the one-tap links are signed.

use gaffer_config::NotifyEvent;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// One thing to tell. Holds no secret and no link (links are signed at delivery).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct News {
    /// `approval`, `done`, `failed` or `blocked`.
    pub event: String,
    /// When it happened (ms).
    pub at: i64,
    /// The project's name.
    pub project: String,
    /// The task.
    pub task_id: String,
    /// The task's request, clipped.
    pub request: String,
    /// The approval waiting, for `approval`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalNews>,
    /// Why, for `failed` and `blocked`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The approval a notification asks about.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalNews {
    /// `ap-…`.
    pub id: String,
    /// `plan`, `tool`, `ship`, …
    pub kind: String,
    /// The question.
    pub summary: String,
}

impl News {
    /// What kind of news this is.
    pub fn kind(&self) -> Option<NotifyEvent> {
        NotifyEvent::ALL
            .into_iter()
            .find(|e| e.as_str() == self.event)
    }

    /// The thing it is about: the approval's id, else the task's.
    pub fn subject_id(&self) -> &str {
        self.approval.as_ref().map_or(&self.task_id, |a| &a.id)
    }

    /// The idempotency id of this news for `target`: the same however often it
    /// is enqueued or delivered.
    pub fn delivery_id(&self, target: &str) -> String {
        format!("{target}/{}/{}", self.event, self.subject_id())
    }

    /// A one-line title.
    pub fn title(&self) -> String {
        match (&self.approval, self.event.as_str()) {
            (Some(a), _) => format!("{}: approval needed ({})", self.project, a.kind),
            (None, "done") => format!("{}: task done", self.project),
            (None, "failed") => format!("{}: task failed", self.project),
            (None, _) => format!("{}: task blocked", self.project),
        }
    }

    /// The text under the title.
    pub fn text(&self) -> String {
        let what = match (&self.approval, &self.reason) {
            (Some(a), _) => a.summary.clone(),
            (None, Some(r)) => r.clone(),
            (None, None) => "finished".into(),
        };
        clip(&format!("{what}\n\nTask: {}", self.request), 1500)
    }
}

/// At most `max` bytes of `s`, cut at a character boundary with an ellipsis.
pub fn clip(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max.saturating_sub(3);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// The one-tap links of one delivery.
#[derive(Debug, Clone, PartialEq)]
pub struct Links {
    /// Opens the confirm page for approving.
    pub approve: String,
    /// Opens the confirm page for denying.
    pub deny: String,
    /// When they stop working (ms).
    pub expires_at: i64,
}

/// The webhook's JSON body.
pub fn webhook_body(
    id: &str,
    news: &News,
    task_url: &str,
    person: Option<&str>,
    links: Option<&Links>,
) -> Value {
    json!({
        "id": id,
        "event": news.event,
        "at": news.at,
        "project": news.project,
        "task": { "id": news.task_id, "request": news.request, "url": task_url },
        "approval": news.approval.as_ref().map(|a| json!({
            "id": a.id, "kind": a.kind, "summary": a.summary,
        })),
        "reason": news.reason,
        "title": news.title(),
        "person": person,
        "links": links.map(|l| json!({
            "approve": l.approve, "deny": l.deny, "expires_at": l.expires_at,
        })),
    })
}

/// ntfy's JSON publish: title, message, a click to the task and, for an
/// approval with links, Approve / Deny buttons (`view` actions that open the
/// confirm page: a tap never decides on its own) and Open.
pub fn ntfy_publish(topic: &str, news: &News, task_url: &str, links: Option<&Links>) -> Value {
    let mut actions = Vec::new();
    if let Some(l) = links {
        actions
            .push(json!({ "action": "view", "label": "Approve", "url": l.approve, "clear": true }));
        actions.push(json!({ "action": "view", "label": "Deny", "url": l.deny, "clear": true }));
    }
    actions.push(json!({ "action": "view", "label": "Open task", "url": task_url }));
    let (tags, priority) = match news.event.as_str() {
        "approval" => (vec!["raising_hand"], 4),
        "done" => (vec!["white_check_mark"], 3),
        _ => (vec!["warning"], 4),
    };
    json!({
        "topic": topic,
        "title": news.title(),
        "message": news.text(),
        "tags": tags,
        "priority": priority,
        "click": task_url,
        "actions": actions,
    })
}
