//! Merge request discussions on the fake GitLab: `GET
//! /projects/:id/merge_requests/:iid/discussions` (each with its notes; a diff note
//! has a `position` with `old_path`/`new_path` and `old_line`/`new_line`, the one
//! a line is not in `null`: `new_line: null` for a removed line; system notes such
//! as "added 1 commit" are `system: true`) and `POST
//! …/discussions/:discussion_id/notes` (a reply in the thread). Authors are
//! `UserBasic` objects, which do not say whether the user is a bot: a project
//! access token's user is only told by its username (`project_42_bot_…`).

use std::collections::HashMap;

use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::super::DiffLine;
use super::routes::{err, missing, paged, user, web, CREATED_AT};
use super::{next, FakeGitLab, LabState};

/// A note in a discussion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FakeNote {
    /// Its id.
    pub id: u64,
    /// Who wrote it: a person, or `gaffer-bot` for a note posted through the API.
    pub author: String,
    /// Text.
    pub body: String,
    /// The file and line of a diff note.
    pub position: Option<(String, DiffLine)>,
    /// A note GitLab writes itself ("added 1 commit", "approved this merge request").
    #[serde(default)]
    pub system: bool,
}

/// A thread on a merge request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FakeDiscussion {
    /// Its id (40 hex characters, as GitLab's).
    pub id: String,
    /// The merge request.
    pub mr: u64,
    /// Its notes, the first one opening it.
    pub notes: Vec<FakeNote>,
}

impl FakeGitLab {
    /// `author` opens a discussion on merge request `mr`: on `path` line `line` of
    /// the new file when given, else in the overview. Returns the note's id.
    pub fn add_mr_comment(
        &self,
        mr: u64,
        author: &str,
        at: Option<(&str, u64)>,
        body: &str,
    ) -> u64 {
        let at = at.map(|(p, l)| (p.to_owned(), DiffLine::New(l)));
        self.open_discussion(mr, author, at, body, false)
    }

    /// `author` opens a discussion on `line` of `path` in merge request `mr`'s diff
    /// (a removed line: `DiffLine::Old`). Returns the note's id.
    pub fn add_mr_comment_on(
        &self,
        mr: u64,
        author: &str,
        path: &str,
        line: DiffLine,
        body: &str,
    ) -> u64 {
        self.open_discussion(mr, author, Some((path.to_owned(), line)), body, false)
    }

    /// A system note on merge request `mr` (`body`: "added 1 commit", …), credited
    /// to `author` as GitLab does. Returns the note's id.
    pub fn add_system_note(&self, mr: u64, author: &str, body: &str) -> u64 {
        self.open_discussion(mr, author, None, body, true)
    }

    fn open_discussion(
        &self,
        mr: u64,
        author: &str,
        position: Option<(String, DiffLine)>,
        body: &str,
        system: bool,
    ) -> u64 {
        let id = next(&self.state.next_id);
        self.state.discussions.lock().unwrap().push(FakeDiscussion {
            id: format!("{id:040x}"),
            mr,
            notes: vec![FakeNote {
                id,
                author: author.into(),
                body: body.into(),
                position,
                system,
            }],
        });
        id
    }

    /// Every discussion on merge requests, with its notes (replies included).
    pub fn discussions(&self) -> Vec<FakeDiscussion> {
        self.state.discussions.lock().unwrap().clone()
    }
}

fn note_json(st: &LabState, mr: u64, n: &FakeNote) -> Value {
    let position = match &n.position {
        Some((path, line)) => {
            // GitLab keeps a note's line when the branch changes.
            let (old_line, new_line) = match *line {
                DiffLine::New(l) | DiffLine::Outdated(l) => (Value::Null, json!(l)),
                DiffLine::Old(l) => (json!(l), Value::Null),
            };
            json!({
                "base_sha": "0".repeat(40), "start_sha": "0".repeat(40), "head_sha": "0".repeat(40),
                "position_type": "text", "old_path": path, "new_path": path,
                "old_line": old_line, "new_line": new_line,
            })
        }
        None => Value::Null,
    };
    json!({
        "id": n.id,
        "type": match (&n.position, n.system) {
            (Some(_), _) => json!("DiffNote"),
            (None, true) => Value::Null,
            (None, false) => json!("DiscussionNote"),
        },
        "body": n.body,
        "author": user(&n.author),
        "created_at": CREATED_AT, "updated_at": CREATED_AT, "system": n.system,
        "noteable_type": "MergeRequest", "noteable_iid": mr,
        "resolvable": n.position.is_some(), "resolved": false,
        "position": position,
        "web_url": format!("{}/-/merge_requests/{mr}#note_{}", web(st), n.id),
    })
}

/// `…/merge_requests/:iid/discussions/{rest…}`.
pub(super) fn route(
    st: &LabState,
    method: &Method,
    mr: u64,
    rest: &[&str],
    q: &HashMap<String, String>,
    body: &Value,
) -> Response {
    if !st.mrs.lock().unwrap().iter().any(|m| m.iid == mr) {
        return err(404, json!("404 Not found"));
    }
    match (method.clone(), rest) {
        (Method::GET, []) => {
            let list: Vec<Value> = st
                .discussions
                .lock()
                .unwrap()
                .iter()
                .filter(|d| d.mr == mr)
                .map(|d| {
                    json!({
                        "id": d.id,
                        "individual_note": d.notes.len() == 1 && d.notes[0].position.is_none(),
                        "notes": d.notes.iter().map(|n| note_json(st, mr, n)).collect::<Vec<_>>(),
                    })
                })
                .collect();
            paged(list, q)
        }
        (Method::POST, [id, "notes"]) => {
            let Some(text) = body.get("body").and_then(Value::as_str) else {
                return missing("body");
            };
            let mut all = st.discussions.lock().unwrap();
            let Some(d) = all.iter_mut().find(|d| d.mr == mr && d.id == *id) else {
                return err(404, json!("404 Discussion Not Found"));
            };
            let note = FakeNote {
                id: next(&st.next_id),
                author: "gaffer-bot".into(),
                body: text.into(),
                position: d.notes[0].position.clone(),
                system: false,
            };
            d.notes.push(note.clone());
            (StatusCode::CREATED, Json(note_json(st, mr, &note))).into_response()
        }
        _ => err(404, json!("404 Not Found")),
    }
}
