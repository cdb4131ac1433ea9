//! A fake Vikunja task tracker.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::{query, serve};

/// A task the fake Vikunja holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FakeTask {
    /// Id.
    pub id: u64,
    /// Project.
    pub project_id: u64,
    /// Title.
    pub title: String,
    /// Description.
    pub description: String,
    /// Done?
    pub done: bool,
}

struct VikunjaState {
    token: String,
    projects: Vec<u64>,
    tasks: Mutex<Vec<FakeTask>>,
    requests: Mutex<Vec<String>>,
}

/// A fake Vikunja (`/api/v1`, `Authorization: Bearer …`). Dropping it stops it.
pub struct FakeVikunja {
    addr: SocketAddr,
    state: Arc<VikunjaState>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeVikunja {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeVikunja {
    /// Start with these project ids, accepting only `token`.
    pub async fn start(token: &str, projects: &[u64]) -> anyhow::Result<Self> {
        let state = Arc::new(VikunjaState {
            token: token.into(),
            projects: projects.to_vec(),
            tasks: Mutex::default(),
            requests: Mutex::default(),
        });
        let router = Router::new().fallback(vikunja).with_state(state.clone());
        let (addr, task) = serve(router).await?;
        Ok(Self { addr, state, task })
    }

    /// The instance URL (the client adds `/api/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every task, in creation order.
    pub fn tasks(&self) -> Vec<FakeTask> {
        self.state.tasks.lock().unwrap().clone()
    }

    /// `METHOD /path -> status` of every request.
    pub fn requests(&self) -> Vec<String> {
        self.state.requests.lock().unwrap().clone()
    }
}

fn vikunja_task_json(t: &FakeTask) -> Value {
    json!({
        "id": t.id, "title": t.title, "description": t.description, "done": t.done,
        "done_at": if t.done { "2026-11-30T00:00:00Z" } else { "0001-01-01T00:00:00Z" },
        "project_id": t.project_id, "identifier": format!("#{}", t.id), "index": t.id,
        "priority": 0, "labels": null, "assignees": null,
        "created": "2026-11-30T00:00:00Z", "updated": "2026-11-30T00:00:00Z",
    })
}

fn verr(status: StatusCode, code: u32, message: &str) -> Response {
    (status, Json(json!({"code": code, "message": message}))).into_response()
}

async fn vikunja(
    State(st): State<Arc<VikunjaState>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let resp = vikunja_route(&st, &method, &uri, &headers, &body);
    st.requests.lock().unwrap().push(format!(
        "{method} {} -> {}",
        uri.path(),
        resp.status().as_u16()
    ));
    resp
}

fn vikunja_route(
    st: &VikunjaState,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &Bytes,
) -> Response {
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if auth.strip_prefix("Bearer ") != Some(st.token.as_str()) {
        return verr(
            StatusCode::UNAUTHORIZED,
            11,
            "missing, malformed, expired or otherwise invalid token provided",
        );
    }
    let Some(rel) = uri.path().strip_prefix("/api/v1") else {
        return verr(StatusCode::NOT_FOUND, 0, "Not Found");
    };
    let segs: Vec<&str> = rel.split('/').filter(|s| !s.is_empty()).collect();
    let b: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let s = |k: &str| {
        b.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    match (method.clone(), segs.as_slice()) {
        (Method::PUT, ["projects", pid, "tasks"]) => {
            let pid: u64 = pid.parse().unwrap_or_default();
            if !st.projects.contains(&pid) {
                return verr(StatusCode::NOT_FOUND, 3001, "The project does not exist.");
            }
            if s("title").trim().is_empty() {
                return verr(
                    StatusCode::BAD_REQUEST,
                    4001,
                    "You must provide at least a title for the task.",
                );
            }
            let mut tasks = st.tasks.lock().unwrap();
            let t = FakeTask {
                id: tasks.len() as u64 + 1,
                project_id: pid,
                title: s("title"),
                description: s("description"),
                done: b.get("done").and_then(Value::as_bool).unwrap_or(false),
            };
            tasks.push(t.clone());
            (StatusCode::CREATED, Json(vikunja_task_json(&t))).into_response()
        }
        (Method::GET, ["tasks"]) | (Method::GET, ["tasks", "all"]) => {
            let q = query(uri);
            let needle = q.get("s").cloned().unwrap_or_default().to_lowercase();
            let tasks = st.tasks.lock().unwrap();
            let found: Vec<Value> = tasks
                .iter()
                .filter(|t| {
                    t.title.to_lowercase().contains(&needle)
                        || t.description.to_lowercase().contains(&needle)
                })
                .map(vikunja_task_json)
                .collect();
            Json(Value::Array(found)).into_response()
        }
        (Method::GET, ["tasks", id]) => {
            let id: u64 = id.parse().unwrap_or_default();
            match st.tasks.lock().unwrap().iter().find(|t| t.id == id) {
                Some(t) => Json(vikunja_task_json(t)).into_response(),
                None => verr(StatusCode::NOT_FOUND, 4002, "The task does not exist."),
            }
        }
        (Method::POST, ["tasks", id]) => {
            let id: u64 = id.parse().unwrap_or_default();
            let mut tasks = st.tasks.lock().unwrap();
            let Some(t) = tasks.iter_mut().find(|t| t.id == id) else {
                return verr(StatusCode::NOT_FOUND, 4002, "The task does not exist.");
            };
            if s("title").trim().is_empty() {
                return verr(
                    StatusCode::BAD_REQUEST,
                    4001,
                    "You must provide at least a title for the task.",
                );
            }
            // Vikunja replaces the whole task with what is sent.
            t.title = s("title");
            t.description = s("description");
            t.done = b.get("done").and_then(Value::as_bool).unwrap_or(false);
            Json(vikunja_task_json(t)).into_response()
        }
        _ => verr(StatusCode::NOT_FOUND, 0, "Not Found"),
    }
}
