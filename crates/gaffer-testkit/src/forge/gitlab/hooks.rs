//! The webhook deliveries the fake GitLab sends: `Issue Hook` and `Note Hook`, as
//! GitLab posts them (headers `X-Gitlab-Event`, `X-Gitlab-Event-UUID`,
//! `X-Gitlab-Instance`; the body's `object_kind`).

use serde_json::{json, Value};

use super::super::HookDelivery;
use super::{FakeGitLab, PROJECT_ID};

impl FakeGitLab {
    fn project_json(&self) -> Value {
        json!({
            "id": PROJECT_ID, "name": self.state.path.rsplit('/').next(),
            "path_with_namespace": self.state.path, "web_url": self.web_url(),
            "default_branch": "main",
        })
    }

    fn delivery(&self, event: &str, payload: &Value) -> HookDelivery {
        HookDelivery::gitlab(
            vec![
                ("X-Gitlab-Event".into(), event.into()),
                (
                    "X-Gitlab-Event-UUID".into(),
                    uuid::Uuid::new_v4().to_string(),
                ),
                ("X-Gitlab-Instance".into(), self.base_url()),
                (
                    "X-Gitlab-Webhook-UUID".into(),
                    "5c1d3a8e-0000-4000-8000-000000000042".into(),
                ),
            ],
            payload.to_string().into_bytes(),
        )
    }

    /// The `Issue Hook` delivery for issue `iid` as it is now, with `action` as GitLab
    /// names it (`open`, `reopen`, `update` for a label or assignee change, `close`).
    /// `None` for an unknown issue.
    pub fn issue_hook(&self, iid: u64, action: &str) -> Option<HookDelivery> {
        let issue = self
            .state
            .issues
            .lock()
            .unwrap()
            .iter()
            .find(|i| i.iid == iid)
            .cloned()?;
        let labels: Vec<Value> = issue
            .labels
            .iter()
            .enumerate()
            .map(|(n, l)| json!({"id": n + 1, "title": l, "type": "ProjectLabel"}))
            .collect();
        let assignees: Vec<Value> = issue
            .assignees
            .iter()
            .map(|u| json!({"id": 100, "username": u, "name": u}))
            .collect();
        let payload = json!({
            "object_kind": "issue",
            "event_type": "issue",
            "user": {"id": 9, "username": "someone", "name": "Someone"},
            "project": self.project_json(),
            "object_attributes": {
                "id": iid + 9000, "iid": iid, "title": issue.title,
                "description": issue.description, "state": issue.state,
                "action": action, "project_id": PROJECT_ID,
                "url": format!("{}/-/issues/{iid}", self.web_url()),
                "labels": labels.clone(),
            },
            "labels": labels,
            "assignees": assignees,
            "changes": {},
        });
        Some(self.delivery("Issue Hook", &payload))
    }

    /// The `Note Hook` delivery for a new note `text` on merge request `iid`.
    pub fn mr_note_hook(&self, iid: u64, text: &str) -> HookDelivery {
        let mr = self
            .state
            .mrs
            .lock()
            .unwrap()
            .iter()
            .find(|m| m.iid == iid)
            .cloned();
        let (source, target, state) = mr
            .map(|m| (m.source_branch, m.target_branch, m.state))
            .unwrap_or_default();
        let payload = json!({
            "object_kind": "note",
            "event_type": "note",
            "user": {"id": 11, "username": "reviewer", "name": "Reviewer"},
            "project_id": PROJECT_ID,
            "project": self.project_json(),
            "object_attributes": {
                "id": 7001, "note": text, "noteable_type": "MergeRequest",
                "author_id": 11, "project_id": PROJECT_ID, "system": false,
                "url": format!("{}/-/merge_requests/{iid}#note_7001", self.web_url()),
            },
            "merge_request": {
                "id": iid + 7000, "iid": iid, "source_branch": source,
                "target_branch": target, "state": state, "target_project_id": PROJECT_ID,
                "url": format!("{}/-/merge_requests/{iid}", self.web_url()),
            },
        });
        self.delivery("Note Hook", &payload)
    }
}
