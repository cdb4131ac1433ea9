//! What a notification tells: [`News`], made from journal events, stored in the
//! outbox as JSON, and rendered per channel (a webhook's body, an ntfy publish)
//! at delivery, when the one-tap links are signed.

use gaffer_config::NotifyEvent;
use gaffer_protocol::words::ApprovalWords;
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
            // The kind in the words every surface uses ("Looks stuck", not `stall`).
            (Some(a), _) => format!(
                "{}: {} — approval needed",
                self.project,
                ApprovalWords::of(&a.kind).name
            ),
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

/// The commands that decide an approval in a terminal on this journal: what a
/// person can do when no server is there to open a link.
#[derive(Debug, Clone, PartialEq)]
pub struct Commands {
    /// `gaffer approve ap-…`.
    pub approve: String,
    /// `gaffer deny ap-…`.
    pub deny: String,
}

impl Commands {
    /// The commands for `approval`, run as `gaffer` (the program, with the flags
    /// that reach this journal).
    pub fn new(gaffer: &str, approval: &str) -> Self {
        Self {
            approve: format!("{gaffer} approve {approval}"),
            deny: format!("{gaffer} deny {approval}"),
        }
    }
}

/// Where a person acts on one delivery: each `None` is left out, never a link to
/// a server that is not there.
#[derive(Debug, Clone, Copy, Default)]
pub struct Shown<'a> {
    /// The task's page.
    pub task_url: Option<&'a str>,
    /// The one-tap links.
    pub links: Option<&'a Links>,
    /// The commands that decide the approval.
    pub commands: Option<&'a Commands>,
}

/// The webhook's JSON body.
pub fn webhook_body(id: &str, news: &News, person: Option<&str>, shown: &Shown<'_>) -> Value {
    json!({
        "id": id,
        "event": news.event,
        "at": news.at,
        "project": news.project,
        "task": { "id": news.task_id, "request": news.request, "url": shown.task_url },
        "approval": news.approval.as_ref().map(|a| json!({
            "id": a.id, "kind": a.kind, "summary": a.summary,
        })),
        "reason": news.reason,
        "title": news.title(),
        "person": person,
        "links": shown.links.map(|l| json!({
            "approve": l.approve, "deny": l.deny, "expires_at": l.expires_at,
        })),
        "commands": shown.commands.map(|c| json!({ "approve": c.approve, "deny": c.deny })),
    })
}

/// ntfy's JSON publish: title, message, a click to the task and, for an
/// approval with links, its two answers' buttons in the words every surface uses
/// (Approve / Deny, Continue / Interrupt for a stall, Raise cap / Stop task for a
/// budget: `view` actions that open the confirm page, so a tap never decides on
/// its own) and Open. Without a server to open them there is no button and no
/// click; an approval's message then ends with the commands that decide it.
pub fn ntfy_publish(topic: &str, news: &News, shown: &Shown<'_>) -> Value {
    let words = ApprovalWords::of(news.approval.as_ref().map_or("", |a| a.kind.as_str()));
    let mut actions = Vec::new();
    if let Some(l) = shown.links {
        actions.push(
            json!({ "action": "view", "label": words.approve, "url": l.approve, "clear": true }),
        );
        actions
            .push(json!({ "action": "view", "label": words.deny, "url": l.deny, "clear": true }));
    }
    if let Some(url) = shown.task_url {
        actions.push(json!({ "action": "view", "label": "Open task", "url": url }));
    }
    let mut message = news.text();
    if let (None, Some(c)) = (shown.links, shown.commands) {
        // What each command does, where it is more than approve or deny.
        let does = |w: &str| {
            if words.names_its_answers() {
                format!("  ({w})")
            } else {
                String::new()
            }
        };
        message.push_str(&format!(
            "\n\nTo decide, run:\n{}{}\nor:\n{}{}",
            c.approve,
            does(words.approve),
            c.deny,
            does(words.deny)
        ));
    }
    let (tags, priority) = match news.event.as_str() {
        "approval" => (vec!["raising_hand"], 4),
        "done" => (vec!["white_check_mark"], 3),
        _ => (vec!["warning"], 4),
    };
    let mut publish = json!({
        "topic": topic,
        "title": news.title(),
        "message": message,
        "tags": tags,
        "priority": priority,
        "actions": actions,
    });
    if let Some(url) = shown.task_url {
        publish["click"] = json!(url);
    }
    publish
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asking(kind: &str) -> News {
        News {
            event: "approval".into(),
            at: 1,
            project: "app".into(),
            task_id: "t-1".into(),
            request: "make the build faster".into(),
            approval: Some(ApprovalNews {
                id: "ap-1".into(),
                kind: kind.into(),
                summary: "`owner turn` looks stuck".into(),
            }),
            reason: None,
        }
    }

    /// A phone said Approve / Deny and "approval needed (stall)" where the page and
    /// Discord say Continue / Interrupt and Looks stuck.
    #[test]
    fn ntfy_buttons_and_title_use_each_kinds_words() {
        let links = Links {
            approve: "https://g/link/a".into(),
            deny: "https://g/link/d".into(),
            expires_at: 9,
        };
        let shown = Shown {
            task_url: Some("https://g/tasks/t-1"),
            links: Some(&links),
            commands: None,
        };
        let labels = |kind: &str| {
            let p = ntfy_publish("topic", &asking(kind), &shown);
            let labels: Vec<String> = p["actions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a["label"].as_str().unwrap().to_owned())
                .collect();
            (labels, p["title"].as_str().unwrap().to_owned())
        };
        assert_eq!(
            labels("stall"),
            (
                vec!["Continue".into(), "Interrupt".into(), "Open task".into()],
                "app: Looks stuck — approval needed".into()
            )
        );
        assert_eq!(labels("budget").0[..2], ["Raise cap", "Stop task"]);
        assert_eq!(labels("budget").1, "app: Spending cap — approval needed");
        assert_eq!(labels("tool").0[..2], ["Approve", "Deny"]);
        // Without links: the commands, each with what it does.
        let commands = Commands {
            approve: "gaffer approve ap-1".into(),
            deny: "gaffer deny ap-1".into(),
        };
        let p = ntfy_publish(
            "topic",
            &asking("stall"),
            &Shown {
                commands: Some(&commands),
                ..Shown::default()
            },
        );
        assert!(
            p["message"].as_str().unwrap().ends_with(
                "To decide, run:\ngaffer approve ap-1  (Continue)\nor:\ngaffer deny ap-1  (Interrupt)"
            ),
            "{p}"
        );
    }
}
