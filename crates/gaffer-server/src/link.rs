//! One-tap links from notifications (`gaffer-notify`): `GET /link/{token}` shows
//! what would be decided and a button; only `POST /link/{token}` decides. A link
//! preview, a prefetcher or a mail scanner that follows the link therefore decides
//! nothing.
//!
//! - **The link is the credential**, for this one approval and this one decision
//!   only: the auth middleware lets `/link/…` through without a session or token
//!   (the loopback-or-token rule still applies first), and this module opens the
//!   token ([`gaffer_notify::Links::open`]: signed with a key derived from the
//!   local secret, unexpired, issued to a target and person still configured).
//! - **CSRF**: the POST needs the unguessable token in its path, and the Host and
//!   Origin checks (`guard`) refuse a POST from another site before this runs.
//!   No cookie is read or set.
//! - **Once**: the decision is an ordinary [`gaffer_app::App::decide`] by the
//!   link's person `via` its channel (`ntfy` / `webhook`), scoped to the link's
//!   task. An approval is decided once, so a second use — of this link or of its
//!   approve/deny twin — finds it decided and gets a page saying by whom.
//! - Every answer is a plain HTML page (`no-store`), never JSON.

use crate::ServerState;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use gaffer_app::{AppError, Scope};
use gaffer_core::{Actor, Decision};
use gaffer_notify::{Link, LinkError};
use gaffer_protocol::api;
use gaffer_protocol::words::ApprovalWords;

const PAGE: &str = include_str!("../assets/link.html");

/// The confirm form's fields.
#[derive(Debug, Default, serde::Deserialize, utoipa::ToSchema)]
pub struct LinkDecisionForm {
    /// A note for the record and the agent.
    #[serde(default)]
    pub note: Option<String>,
}

/// HTML-escape text.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn page(status: StatusCode, title: &str, body: &str) -> Response {
    let html = PAGE
        .replace("{{title}}", &esc(title))
        .replace("{{body}}", body);
    let mut r = (status, Html(html)).into_response();
    let h = r.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    // Its form must post with the page's real Origin (`no-referrer` makes it `null`);
    // the token still never leaves for another site.
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    r
}

fn refusal(status: StatusCode, title: &str, why: &str) -> Response {
    page(
        status,
        title,
        &format!(
            "<div class=\"card\"><p class=\"outcome bad\">{}</p><p class=\"muted\">This visit decided nothing. Decide on gaffer's page, with <code>gaffer approvals</code>, or in Discord.</p></div>",
            esc(why)
        ),
    )
}

/// "in 2 h 5 min" / "5 min ago" from `now` to `at` (ms).
fn relative(at: i64, now: i64) -> String {
    let mins = (at - now).abs() / 60_000;
    let span = match mins {
        0 => "less than a minute".to_owned(),
        m if m < 60 => format!("{m} min"),
        m => format!("{} h {} min", m / 60, m % 60),
    };
    if at >= now {
        format!("in {span}")
    } else {
        format!("{span} ago")
    }
}

/// The link, and its approval while it can still be decided; else the page saying why not.
async fn open(s: &ServerState, token: &str) -> Result<(Link, api::Approval), Response> {
    let now = gaffer_store::now_ms();
    let Some(links) = &s.links else {
        return Err(refusal(
            StatusCode::FORBIDDEN,
            "Link not valid",
            "This server does not accept one-tap links (no [[notify]] target names a person).",
        ));
    };
    let link = links.open(token, now).map_err(|e| match e {
        LinkError::Expired { at } => refusal(
            StatusCode::GONE,
            "Link expired",
            &format!("This link expired {}.", relative(at, now)),
        ),
        other => refusal(StatusCode::FORBIDDEN, "Link not valid", &other.to_string()),
    })?;
    let approval = match s.app.approval(&link.approval_id).await {
        Ok(a) if a.task_id == link.task_id => a,
        Ok(_) | Err(AppError::NotFound { .. }) => {
            return Err(refusal(
                StatusCode::NOT_FOUND,
                "Approval not found",
                "The approval this link is for does not exist here.",
            ))
        }
        Err(e) => {
            tracing::error!(error = %e, "one-tap link: cannot read the approval");
            return Err(refusal(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Something went wrong",
                "gaffer could not read its journal; the server log has the details.",
            ));
        }
    };
    if approval.state != "pending" {
        return Err(already(&approval, now));
    }
    Ok((link, approval))
}

/// The page for an approval that is no longer pending.
fn already(a: &api::Approval, now: i64) -> Response {
    let who = a
        .decided_by
        .as_ref()
        .map(|d| format!(" by {} via {}", d.name, d.via))
        .unwrap_or_default();
    let when = a
        .decided_at
        .map(|t| format!(", {}", relative(t, now)))
        .unwrap_or_default();
    refusal(
        StatusCode::CONFLICT,
        "Already decided",
        &format!(
            "This approval was already {}{who}{when}. A link decides once; this one cannot be used again.",
            a.state
        ),
    )
}

fn facts(link: &Link, a: &api::Approval, request: &str, now: i64) -> String {
    let command = a.details["command"]
        .as_str()
        .map(|c| format!("<dt>Command</dt><dd><code>{}</code></dd>", esc(c)))
        .unwrap_or_default();
    let expires = a
        .expires_at
        .map_or(link.expires_at, |e| e.min(link.expires_at));
    format!(
        "<p class=\"question\">{summary}</p>\
         <dl class=\"data\">\
         <dt>Project</dt><dd>{project}</dd>\
         <dt>Task</dt><dd>{request}</dd>\
         <dt>Kind</dt><dd>{kind}</dd>{command}\
         <dt>Asked</dt><dd>{asked}</dd>\
         <dt>Link</dt><dd>for {person} via {channel}, works once, expires {expires}</dd>\
         </dl>",
        summary = esc(&a.summary),
        project = esc(&a.project),
        request = esc(request),
        kind = esc(ApprovalWords::of(&a.kind).name),
        asked = relative(a.requested_at, now),
        person = esc(&link.person),
        channel = esc(&link.channel),
        expires = relative(expires, now),
    )
}

async fn request_of(s: &ServerState, task_id: &str) -> String {
    s.app
        .task(task_id)
        .await
        .map(|t| t.task.request)
        .unwrap_or_default()
}

/// The confirm page's title and body: what this link would decide, in the words
/// of the approval's kind (Continue / Interrupt for a stall, Raise cap / Stop task
/// for a budget, as on every surface), and the one button that does.
fn confirm(link: &Link, a: &api::Approval, request: &str, now: i64) -> (String, String) {
    let words = ApprovalWords::of(&a.kind);
    let verb = words.verb(link.approve);
    let title = format!("{verb}? ({})", words.name);
    let button = format!(
        "<button type=\"submit\" class=\"{}\">{}</button>",
        if link.approve { "primary" } else { "deny" },
        esc(verb)
    );
    let body = format!(
        "<div class=\"card\">{facts}\
         <form method=\"post\" class=\"form\">\
         <label for=\"note\">{note}</label>\
         <textarea id=\"note\" name=\"note\" maxlength=\"4000\"></textarea>\
         <div class=\"actions\">{button}</div>\
         </form>\
         <p class=\"muted\">Nothing is decided until you press {verb}. Opening this page decides nothing.</p>\
         </div>",
        facts = facts(link, a, request, now),
        note = esc(words.note.unwrap_or("Note for the agent (optional)")),
        verb = esc(verb),
    );
    (title, body)
}

/// The confirm page: what this link would decide, and the one button that does.
#[utoipa::path(get, path = "/link/{token}", params(("token" = String, Path, description = "the signed token of a one-tap link")),
    security(()),
    responses(
        (status = 200, content_type = "text/html", body = String, description = "the confirm page; nothing is decided"),
        (status = 403, content_type = "text/html", body = String, description = "not a valid link (changed, another gaffer's, or its target or person no longer configured)"),
        (status = 404, content_type = "text/html", body = String, description = "the link's approval does not exist"),
        (status = 409, content_type = "text/html", body = String, description = "the approval is already decided (this link or its twin was used, or someone decided elsewhere)"),
        (status = 410, content_type = "text/html", body = String, description = "the link expired"),
    ))]
pub async fn confirm_page(State(s): State<ServerState>, Path(token): Path<String>) -> Response {
    let (link, a) = match open(&s, &token).await {
        Ok(found) => found,
        Err(page) => return page,
    };
    let now = gaffer_store::now_ms();
    let request = request_of(&s, &a.task_id).await;
    let (title, body) = confirm(&link, &a, &request, now);
    page(StatusCode::OK, &title, &body)
}

/// Decide the link's approval as the link's person, via its channel, once.
#[utoipa::path(post, path = "/link/{token}", params(("token" = String, Path, description = "the signed token of a one-tap link")),
    security(()),
    request_body(content = LinkDecisionForm, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 200, content_type = "text/html", body = String, description = "decided: the page says what was recorded"),
        (status = 403, content_type = "text/html", body = String, description = "not a valid link, or its person may not decide this approval"),
        (status = 404, content_type = "text/html", body = String, description = "the link's approval does not exist"),
        (status = 409, content_type = "text/html", body = String, description = "already decided: a link decides once"),
        (status = 410, content_type = "text/html", body = String, description = "the link expired"),
    ))]
pub async fn decide(
    State(s): State<ServerState>,
    Path(token): Path<String>,
    body: Bytes,
) -> Response {
    let (link, asked) = match open(&s, &token).await {
        Ok(found) => found,
        Err(page) => return page,
    };
    let words = ApprovalWords::of(&asked.kind);
    let done = if link.approve {
        words.approved
    } else {
        words.denied
    };
    let form: LinkDecisionForm = serde_urlencoded::from_bytes(&body).unwrap_or_default();
    let note = form
        .note
        .map(|n| n.trim().to_owned())
        .filter(|n| !n.is_empty());
    let decision = if link.approve {
        Decision::Approve
    } else {
        Decision::Deny
    };
    let by = Actor::user(&link.person, &link.channel);
    let scope = Scope {
        task_id: Some(link.task_id.clone()),
        project_id: None,
    };
    let now = gaffer_store::now_ms();
    match s.app.decide(&link.approval_id, decision, by, note, scope).await {
        Ok(d) if d.applied => page(
            StatusCode::OK,
            done,
            &format!(
                "<div class=\"card\"><p class=\"outcome ok\">{}: {} as {} via {}. The agent has been told.</p><p class=\"muted\">Project {}.</p></div>",
                done,
                esc(&d.approval.summary),
                esc(&link.person),
                esc(&link.channel),
                esc(&d.approval.project),
            ),
        ),
        Ok(d) => already(&d.approval, now),
        Err(AppError::Forbidden(why)) => refusal(StatusCode::FORBIDDEN, "Not allowed", &why),
        Err(AppError::NotFound { .. }) => refusal(
            StatusCode::NOT_FOUND,
            "Approval not found",
            "The approval this link is for does not exist here.",
        ),
        Err(AppError::Invalid { message, .. }) => {
            refusal(StatusCode::BAD_REQUEST, "Not decided", &message)
        }
        Err(e) => {
            tracing::error!(error = %e, "one-tap link: cannot record the decision");
            refusal(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Something went wrong",
                "gaffer could not record the decision; the server log has the details.",
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The confirm page said "Approve this?" / "Deny this?" and "Kind: stall" where
    /// the page, Discord and ntfy say Continue / Interrupt and Looks stuck.
    #[test]
    fn the_confirm_page_says_what_each_kinds_answer_does() {
        let link = |approve: bool| Link {
            approval_id: "ap-1".into(),
            task_id: "t-1".into(),
            approve,
            target: "phone".into(),
            channel: "ntfy".into(),
            person: "ana".into(),
            issued_at: 0,
            expires_at: 60_000,
        };
        let asked = |kind: &str| -> api::Approval {
            serde_json::from_value(json!({
                "id": "ap-1", "task_id": "t-1", "project_id": "p-1", "project": "app",
                "step_id": "code/1", "attempt": 1, "kind": kind, "state": "pending",
                "summary": "`owner turn` looks stuck", "details": {}, "decided_by": null,
                "note": null, "requested_at": 0, "decided_at": null, "expires_at": null,
            }))
            .unwrap()
        };
        let (title, body) = confirm(&link(false), &asked("stall"), "make it faster", 0);
        assert_eq!(title, "Interrupt? (Looks stuck)");
        assert!(body.contains("<dt>Kind</dt><dd>Looks stuck</dd>"), "{body}");
        assert!(
            body.contains("<button type=\"submit\" class=\"deny\">Interrupt</button>"),
            "{body}"
        );
        assert!(body.contains("Message to the agent (optional)"), "{body}");
        assert!(body.contains("until you press Interrupt"), "{body}");
        assert!(!body.contains("stall") && !body.contains("Deny"), "{body}");
        let (title, body) = confirm(&link(true), &asked("budget"), "r", 0);
        assert_eq!(title, "Raise cap? (Spending cap)");
        assert!(body.contains(">Raise cap</button>"), "{body}");
        let (title, _) = confirm(&link(true), &asked("tool"), "r", 0);
        assert_eq!(title, "Approve? (Tool call)");
    }
}
