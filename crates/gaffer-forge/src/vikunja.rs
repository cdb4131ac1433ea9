//! Vikunja, the task tracker: one task per plan subtask, marked done when shipped.

use std::time::Duration;

use reqwest::Method;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::api::ApiError;
use crate::http::{enc, Auth, Http};
use crate::secret::Secret;

/// A Vikunja task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrackerTask {
    /// Its id.
    pub id: u64,
    /// Title.
    pub title: String,
    /// Description.
    pub description: String,
    /// Done?
    pub done: bool,
    /// Its project.
    pub project_id: u64,
}

/// A Vikunja project, through its API (`/api/v1`, `Authorization: Bearer …`).
#[derive(Debug, Clone)]
pub struct Vikunja {
    http: Http,
    project_id: u64,
}

impl Vikunja {
    /// A client for project `project_id` at `base_url` (the instance URL; `/api/v1` is
    /// added). `token_source` names where the token came from, for error hints.
    pub fn new(
        base_url: &str,
        token: Secret,
        token_source: &str,
        project_id: u64,
    ) -> Result<Self, ApiError> {
        let base = base_url.trim_end_matches('/');
        let http = Http::new(
            format!("{base}/api/v1"),
            token,
            Auth::Scheme("Bearer"),
            format!("vikunja at {base}"),
            token_source.into(),
            Duration::from_secs(30),
            Duration::from_secs(60),
        )?;
        Ok(Self { http, project_id })
    }

    fn task_from(&self, v: &Value) -> Result<TrackerTask, ApiError> {
        let s = |k: &str| {
            v.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        Ok(TrackerTask {
            id: v
                .get("id")
                .and_then(Value::as_u64)
                .ok_or_else(|| self.http.decode("a task without an id"))?,
            title: s("title"),
            description: s("description"),
            done: v.get("done").and_then(Value::as_bool).unwrap_or(false),
            project_id: v
                .get("project_id")
                .and_then(Value::as_u64)
                .unwrap_or(self.project_id),
        })
    }

    /// Create a task in the project (`PUT /projects/{id}/tasks`). Non-idempotent:
    /// record the returned id; after a crash mid-create, reconcile with
    /// [`Vikunja::find_task`] on a marker the caller put in the title.
    pub async fn create_task(
        &self,
        title: &str,
        description: &str,
    ) -> Result<TrackerTask, ApiError> {
        let path = format!("/projects/{}/tasks", self.project_id);
        let reply = self
            .http
            .send(
                Method::PUT,
                &path,
                Some(&json!({"title": title, "description": description})),
                &format!("the project {}", self.project_id),
            )
            .await?;
        self.task_from(&reply.body)
    }

    /// The task of this project whose title (or description) contains `marker`, if
    /// any. Read-only: the probe that reconciles a `create_task` interrupted by a crash,
    /// when the caller puts a unique marker in the title (e.g. `[gaffer t-1/2]`).
    /// Uses the task search (`GET /tasks?s=…`; `/tasks/all` on Vikunja before 0.24).
    pub async fn find_task(&self, marker: &str) -> Result<Option<TrackerTask>, ApiError> {
        let query = format!("?s={}&per_page=50", enc(marker));
        let what = "the task search";
        let reply = match self
            .http
            .send(Method::GET, &format!("/tasks{query}"), None, what)
            .await
        {
            Err(ApiError::NotFound { .. }) => {
                self.http
                    .send(Method::GET, &format!("/tasks/all{query}"), None, what)
                    .await?
            }
            other => other?,
        };
        let items = reply.body.as_array().cloned().unwrap_or_default();
        for v in &items {
            let task = self.task_from(v)?;
            if task.project_id == self.project_id
                && (task.title.contains(marker) || task.description.contains(marker))
            {
                return Ok(Some(task));
            }
        }
        Ok(None)
    }

    /// Read a task (`GET /tasks/{id}`). Read-only.
    pub async fn task(&self, id: u64) -> Result<TrackerTask, ApiError> {
        let reply = self
            .http
            .send(
                Method::GET,
                &format!("/tasks/{id}"),
                None,
                &format!("the task {id}"),
            )
            .await?;
        self.task_from(&reply.body)
    }

    /// Mark a task done. Idempotent: Vikunja's update (`POST /tasks/{id}`) replaces the
    /// whole task, so the task is read first and sent back with `done: true`.
    pub async fn mark_done(&self, id: u64) -> Result<TrackerTask, ApiError> {
        let what = format!("the task {id}");
        let current = self
            .http
            .send(Method::GET, &format!("/tasks/{id}"), None, &what)
            .await?;
        let mut body = current.body;
        if body.get("done").and_then(Value::as_bool) == Some(true) {
            return self.task_from(&body);
        }
        if let Some(obj) = body.as_object_mut() {
            obj.insert("done".into(), Value::Bool(true));
        } else {
            return Err(self.http.decode("a task that is not an object"));
        }
        let reply = self
            .http
            .send(Method::POST, &format!("/tasks/{id}"), Some(&body), &what)
            .await?;
        self.task_from(&reply.body)
    }
}
