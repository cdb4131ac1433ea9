//! Issue intake on the fake forge: the open-issue list, labels and assignees set by
//! tests, and the webhook deliveries the real forge sends when they change.

use std::collections::HashMap;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;

use super::reviews::user_json;
use super::routes::{html_base, issue_json};
use super::{FakeForge, FakeIssue, Flavor, ForgeState};

/// `GET /repos/{o}/{r}/issues`: open (or `state=closed|all`) issues, newest first,
/// filtered by `labels` (comma-separated, all of them), Gitea's `assigned_by` or
/// GitHub's `assignee`. Pull requests are listed too (with a `pull_request` key),
/// except on Gitea with `type=issues`, as the real forges do.
pub(super) fn list(st: &ForgeState, q: &HashMap<String, String>) -> Response {
    let state = q.get("state").map(String::as_str).unwrap_or("open");
    if !matches!(state, "open" | "closed" | "all") {
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(json!({"message": format!("invalid state `{state}`")})),
        )
            .into_response();
    }
    let labels: Vec<&str> = q
        .get("labels")
        .map(|l| l.split(',').filter(|s| !s.is_empty()).collect())
        .unwrap_or_default();
    let assignee = match st.flavor {
        Flavor::Gitea => q.get("assigned_by"),
        Flavor::GitHub => q.get("assignee"),
    };
    let (size_key, default_size) = match st.flavor {
        Flavor::Gitea => ("limit", 30usize),
        Flavor::GitHub => ("per_page", 30usize),
    };
    let page = q
        .get("page")
        .and_then(|p| p.parse().ok())
        .unwrap_or(1usize)
        .max(1);
    let size = q
        .get(size_key)
        .and_then(|p| p.parse().ok())
        .unwrap_or(default_size)
        .clamp(1, 100);
    let with_pulls =
        !(st.flavor == Flavor::Gitea && q.get("type").map(String::as_str) == Some("issues"));
    let wanted = |s: &str, l: &[String], a: &[String]| {
        (state == "all" || s == state)
            && labels.iter().all(|want| l.iter().any(|have| have == want))
            && assignee.is_none_or(|u| a.iter().any(|have| have == u))
    };
    let mut items: Vec<(u64, Value)> = st
        .issues
        .lock()
        .unwrap()
        .iter()
        .filter(|i| wanted(&i.state, &i.labels, &i.assignees))
        .map(|i| (i.number, issue_json(st, i)))
        .collect();
    if with_pulls {
        for pr in st.prs.lock().unwrap().iter() {
            if wanted(&pr.state, &pr.labels, &[]) {
                let mut v = json!({
                    "id": pr.number + 9000, "number": pr.number, "title": pr.title,
                    "body": pr.body, "state": pr.state,
                    "html_url": format!("{}/pulls/{}", html_base(st), pr.number),
                    "labels": pr.labels.iter().map(|l| json!({"name": l})).collect::<Vec<_>>(),
                    "assignees": [],
                });
                v["pull_request"] =
                    json!({"url": format!("{}/pulls/{}", html_base(st), pr.number)});
                items.push((pr.number, v));
            }
        }
    }
    items.sort_by_key(|(n, _)| std::cmp::Reverse(*n));
    let list: Vec<Value> = items
        .into_iter()
        .skip((page - 1) * size)
        .take(size)
        .map(|(_, v)| v)
        .collect();
    Json(Value::Array(list)).into_response()
}

/// A webhook delivery as the forge would send it: its headers (without the
/// signature) and its raw body.
#[derive(Debug, Clone)]
pub struct HookDelivery {
    signer: Signer,
    /// Header names and values (the event, the delivery id).
    pub headers: Vec<(String, String)>,
    /// The JSON body, byte for byte.
    pub body: Vec<u8>,
}

/// How a delivery is signed.
#[derive(Debug, Clone, Copy)]
enum Signer {
    /// Gitea's or GitHub's HMAC of the body.
    Hmac(Flavor),
    /// GitLab's `X-Gitlab-Token`: the shared secret itself.
    GitLabToken,
}

impl HookDelivery {
    /// A GitLab delivery (signed with `X-Gitlab-Token`).
    pub(super) fn gitlab(headers: Vec<(String, String)>, body: Vec<u8>) -> Self {
        Self {
            signer: Signer::GitLabToken,
            headers,
            body,
        }
    }

    /// The headers with the signature the forge computes with `secret` over the body:
    /// Gitea's `X-Gitea-Signature` (hex HMAC-SHA256), GitHub's
    /// `X-Hub-Signature-256: sha256=…`; GitLab sends the secret as `X-Gitlab-Token`.
    pub fn signed(&self, secret: &str) -> Vec<(String, String)> {
        let mut headers = self.headers.clone();
        let flavor = match self.signer {
            Signer::Hmac(flavor) => flavor,
            Signer::GitLabToken => {
                headers.push(("X-Gitlab-Token".into(), secret.into()));
                return headers;
            }
        };
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else {
            return headers;
        };
        mac.update(&self.body);
        let sig = hex::encode(mac.finalize().into_bytes());
        headers.push(match flavor {
            Flavor::Gitea => ("X-Gitea-Signature".into(), sig),
            Flavor::GitHub => ("X-Hub-Signature-256".into(), format!("sha256={sig}")),
        });
        headers
    }
}

impl FakeForge {
    fn change_issue(&self, number: u64, change: impl FnOnce(&mut FakeIssue)) {
        if let Some(i) = self
            .state
            .issues
            .lock()
            .unwrap()
            .iter_mut()
            .find(|i| i.number == number)
        {
            change(i);
        }
    }

    /// Put `label` on issue `number` (as a person would in the web UI).
    pub fn label_issue(&self, number: u64, label: &str) {
        self.change_issue(number, |i| {
            if !i.labels.iter().any(|l| l == label) {
                i.labels.push(label.into());
            }
        });
    }

    /// Take `label` off issue `number`.
    pub fn unlabel_issue(&self, number: u64, label: &str) {
        self.change_issue(number, |i| i.labels.retain(|l| l != label));
    }

    /// Assign issue `number` to the user `login`.
    pub fn assign_issue(&self, number: u64, login: &str) {
        self.change_issue(number, |i| {
            if !i.assignees.iter().any(|a| a == login) {
                i.assignees.push(login.into());
            }
        });
    }

    /// Close issue `number`.
    pub fn close_issue(&self, number: u64) {
        self.change_issue(number, |i| i.state = "closed".into());
    }

    pub(super) fn repository_json(&self) -> Value {
        let st = &self.state;
        json!({
            "id": 42, "name": st.repo, "full_name": format!("{}/{}", st.owner, st.repo),
            "owner": {"login": st.owner}, "html_url": html_base(st), "private": false,
        })
    }

    pub(super) fn delivery(&self, event: &str, gitea_type: &str, payload: &Value) -> HookDelivery {
        let id = uuid::Uuid::new_v4().to_string();
        let headers = match self.state.flavor {
            Flavor::Gitea => vec![
                ("X-Gitea-Event".into(), event.into()),
                ("X-Gitea-Event-Type".into(), gitea_type.into()),
                ("X-Gitea-Delivery".into(), id),
            ],
            Flavor::GitHub => vec![
                ("X-GitHub-Event".into(), event.into()),
                ("X-GitHub-Delivery".into(), id),
                ("X-GitHub-Hook-ID".into(), "4242".into()),
            ],
        };
        HookDelivery {
            signer: Signer::Hmac(self.state.flavor),
            headers,
            body: payload.to_string().into_bytes(),
        }
    }

    /// The `issues` delivery for issue `number` as it is now, with `action` as this
    /// forge names it (GitHub: `opened`, `labeled`, `assigned`, `reopened`,
    /// `closed`, …; Gitea: `opened`, `label_updated`, `assigned`, `reopened`, …).
    /// `None` for an unknown issue.
    pub fn issue_hook(&self, number: u64, action: &str) -> Option<HookDelivery> {
        let st = &self.state;
        let issue = st
            .issues
            .lock()
            .unwrap()
            .iter()
            .find(|i| i.number == number)
            .cloned()?;
        let mut payload = json!({
            "action": action,
            "issue": issue_json(st, &issue),
            "repository": self.repository_json(),
            "sender": {"login": "someone"},
        });
        let gitea_type = match action {
            "label_updated" | "label_cleared" => "issue_label",
            "assigned" | "unassigned" => "issue_assign",
            _ => "issues",
        };
        match st.flavor {
            Flavor::Gitea => payload["number"] = json!(number),
            Flavor::GitHub if action == "labeled" || action == "unlabeled" => {
                payload["label"] = json!({"name": issue.labels.last().cloned().unwrap_or_default()})
            }
            Flavor::GitHub => {}
        }
        Some(self.delivery("issues", gitea_type, &payload))
    }

    /// The `issue_comment` delivery for a new comment `text` on pull request `number`.
    pub fn pr_comment_hook(&self, number: u64, text: &str) -> HookDelivery {
        let st = &self.state;
        let mut issue = json!({
            "id": number + 9000, "number": number, "state": "open",
            "html_url": format!("{}/pulls/{number}", html_base(st)),
            "pull_request": {"html_url": format!("{}/pulls/{number}", html_base(st))},
        });
        if st.flavor == Flavor::Gitea {
            issue["pull_request"] = json!({"merged": false});
        }
        let mut payload = json!({
            "action": "created",
            "issue": issue,
            "comment": {"id": 7001, "body": text, "user": user_json(st.flavor, "reviewer")},
            "repository": self.repository_json(),
            "sender": user_json(st.flavor, "reviewer"),
        });
        if st.flavor == Flavor::Gitea {
            payload["is_pull"] = json!(true);
        }
        self.delivery("issue_comment", "pull_request_comment", &payload)
    }
}
