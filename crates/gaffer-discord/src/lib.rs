//! gaffer's Discord adapter: requests, task threads and approval buttons.
//!
//! It is one more front end over the app service (the same calls the HTTP API
//! makes) and one more renderer of the journal's event stream:
//!
//! ```text
//! gateway (websocket) ─► MESSAGE_CREATE in a room      ─► App::create_task
//!                      ─► MESSAGE_CREATE in a task thread ─► App::send_message (approvers only)
//!                      ─► INTERACTION_CREATE /task …   ─► App::create_task / tasks / cancel_task /
//!                                                         decide / set_auto_approve  ─► callback
//!                      ─► INTERACTION_CREATE (button)  ─► App::decide ─► callback (7 or ephemeral 4)
//! journal events ─► dirty task ids ─► one renderer: read the task from the app, compute
//!                   every message (header, status, notes, approvals), post what is
//!                   missing, edit what differs from what was last sent
//! ```
//!
//! - **No state of its own** but Discord ids: for each task the room message its
//!   thread hangs from, the thread, the status message and each note; for each
//!   approval its message — all in the journal database
//!   ([`gaffer_store::Journal::discord_message`]) with a digest of what the
//!   message shows. A restart re-attaches to them: nothing is posted twice, an
//!   approval decided while the adapter was down is edited on start.
//! - **Posts survive a crash.** The intent to post is recorded before the post,
//!   each post carries a nonce derived from what it is (Discord's
//!   `enforce_nonce` returns the message already made instead of a second one),
//!   and an approval's message — whose repost may come after Discord forgot the
//!   nonce — is first looked for among the thread's recent messages by its
//!   buttons. So a crash between Discord making a message and gaffer recording its
//!   id leaves one message, brought up to date on restart.
//! - **One renderer.** Only the renderer posts or edits gaffer's messages, one
//!   task at a time, so two events cannot post the same message twice.
//! - **Approvals.** One message per approval, with Allow / Deny while pending
//!   (and "Allow for this task" on a tool approval that names a command: it
//!   approves it and, in this task only, every later request for exactly that
//!   command — [`gaffer_app::App::allow_for_task`]).
//!   Only configured approver users or roles may press them; others get an
//!   ephemeral refusal and nothing is decided. The first decision wins (the app
//!   service's rule): a later press is told the recorded decision. However it
//!   was decided (web, CLI, another Discord user, expiry), the renderer edits the
//!   message to say who decided and removes the buttons.
//! - The bot token is only ever in the `Authorization` header and the gateway's
//!   Identify/Resume; [`Settings`]' `Debug` hides it.

#![deny(missing_docs)]

mod error;
pub mod gateway;
pub mod model;
pub mod render;
pub mod rest;

pub use error::{DiscordError, Result};

use gaffer_app::{App, AppError, NewTask, Scope, TaskQuery};
use gaffer_core::{Actor, Decision, Event};
use gaffer_protocol::api;
use gaffer_store::DiscordMessage;
use model::{callback_type, interaction_type, Interaction, Message, EPHEMERAL};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use tokio::sync::{broadcast::error::RecvError, mpsc, Notify};
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

/// What the adapter needs; built by `gaffer serve` from the `[discord]` config and
/// the token's environment variable.
#[derive(Clone)]
pub struct Settings {
    /// The bot token.
    pub token: String,
    /// The application id, to register the slash commands (none: not registered).
    pub application_id: Option<String>,
    /// REST base URL.
    pub api_url: String,
    /// Gateway URL; `None` asks `GET /gateway/bot`.
    pub gateway_url: Option<String>,
    /// User ids that may decide.
    pub approver_users: Vec<String>,
    /// Role ids whose members may decide.
    pub approver_roles: Vec<String>,
    /// Channel id → project name or id.
    pub rooms: BTreeMap<String, String>,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("token", &"<redacted>")
            .field("application_id", &self.application_id)
            .field("api_url", &self.api_url)
            .field("gateway_url", &self.gateway_url)
            .field("approver_users", &self.approver_users)
            .field("approver_roles", &self.approver_roles)
            .field("rooms", &self.rooms)
            .finish()
    }
}

/// Kinds of recorded Discord messages.
mod kind {
    pub const HEADER: &str = "header";
    pub const THREAD: &str = "thread";
    pub const STATUS: &str = "status";
    pub const NOTE: &str = "note";
    pub const APPROVAL: &str = "approval";
    /// A batch of the agent's transcript, by `<task>/<first seq>`.
    pub const TRANSCRIPT: &str = "transcript";
    /// How far a task's transcript is relayed: `rendered` holds the last seq.
    pub const TRANSCRIPT_AT: &str = "transcript-at";
}

/// How long an agent's activity is gathered before it is posted to its thread.
const TRANSCRIPT_BATCH: std::time::Duration = std::time::Duration::from_secs(3);
/// Transcript messages posted per task in one pass; the rest follow in the next.
const TRANSCRIPT_POSTS_PER_PASS: usize = 5;

/// The slash commands gaffer registers.
pub fn command_definitions() -> Value {
    let opt = |name: &str, description: &str, required: bool| json!({ "type": 3, "name": name, "description": description, "required": required });
    let cmd = |name: &str, description: &str, options: Vec<Value>| json!({ "name": name, "type": 1, "description": description, "options": options });
    json!([
        cmd(
            "task",
            "Ask for a task in this channel's project",
            vec![opt("request", "What to do", true)]
        ),
        cmd(
            "status",
            "A task's status, or this project's running tasks",
            vec![opt("id", "Task id", false)]
        ),
        cmd("tasks", "Recent tasks of this channel's project", vec![]),
        cmd(
            "cancel",
            "Cancel a task",
            vec![
                opt("id", "Task id", true),
                opt("reason", "Why, for the record", false)
            ]
        ),
        cmd(
            "approve",
            "Approve a pending approval",
            vec![
                opt("id", "Approval id", true),
                opt("note", "A note for the agent and the record", false),
                json!({ "type": 5, "name": "for_task", "required": false,
                    "description": "Also approve exactly this command again for the rest of this task (tool approvals only)" })
            ]
        ),
        cmd(
            "deny",
            "Deny a pending approval",
            vec![
                opt("id", "Approval id", true),
                opt("note", "Why, told to the agent", false)
            ]
        ),
        json!({ "name": "auto", "type": 1, "description": "Turn this project's auto-approve on or off",
            "options": [{ "type": 3, "name": "state", "description": "on or off", "required": true,
                "choices": [{ "name": "on", "value": "on" }, { "name": "off", "value": "off" }] }] }),
        cmd("projects", "Projects and their channels", vec![]),
    ])
}

struct Inner {
    app: App,
    rest: rest::Rest,
    settings: Settings,
    /// Task ids whose messages may be out of date.
    dirty: Mutex<BTreeSet<String>>,
    /// Task ids whose transcript is being gathered for the next batch.
    gathering: Mutex<BTreeSet<String>>,
    wake: Notify,
}

/// The running adapter. Cheap to clone.
#[derive(Clone)]
pub struct Adapter {
    inner: Arc<Inner>,
}

/// Start the adapter and run it until `stop`. Errors only for what retrying
/// cannot fix: a refused token, a gateway closed for good.
pub async fn run(app: App, settings: Settings, stop: CancellationToken) -> Result<()> {
    Adapter::new(app, settings)?.run(stop).await
}

/// What a command answers: text, and whether only the caller sees it.
struct Reply {
    text: String,
    ephemeral: bool,
}

impl Reply {
    fn public(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            ephemeral: false,
        }
    }
    fn private(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            ephemeral: true,
        }
    }
}

/// An app error in words for a chat user; journal failures are logged, not shown.
fn explain(e: &AppError) -> String {
    match e {
        AppError::Store(_) => {
            tracing::error!(error = %e, "Discord adapter: journal error");
            "gaffer could not read or write its journal; the server log has the details".into()
        }
        other => other.to_string(),
    }
}

/// The nonce of the message `(k, id)`: the same for every try of one logical
/// message, and within Discord's 25 characters.
fn nonce(k: &str, id: &str) -> String {
    render::digest(&Value::from(format!("{k}:{id}")))
}

fn is_final(stage: &str) -> bool {
    matches!(stage, "done" | "failed" | "cancelled" | "blocked")
}

impl Adapter {
    /// An adapter over `app`; nothing is contacted until [`Adapter::run`].
    pub fn new(app: App, settings: Settings) -> Result<Self> {
        let rest = rest::Rest::new(&settings.api_url, &settings.token)?;
        Ok(Self {
            inner: Arc::new(Inner {
                app,
                rest,
                settings,
                dirty: Mutex::new(BTreeSet::new()),
                gathering: Mutex::new(BTreeSet::new()),
                wake: Notify::new(),
            }),
        })
    }

    fn app(&self) -> &App {
        &self.inner.app
    }

    fn rest(&self) -> &rest::Rest {
        &self.inner.rest
    }

    /// Connect, re-attach to what is recorded, and serve until `stop`.
    pub async fn run(self, stop: CancellationToken) -> Result<()> {
        // Subscribe before re-attaching, so nothing appended meanwhile is missed.
        let mut events = self.app().journal().subscribe();
        if let Some(app_id) = &self.inner.settings.application_id {
            match self
                .rest()
                .put_commands(app_id, &command_definitions())
                .await
            {
                Ok(()) => {}
                Err(e @ DiscordError::Unauthorized(_)) => return Err(e),
                Err(e) => tracing::warn!(error = %e, "could not register Discord slash commands"),
            }
        }
        let url = match &self.inner.settings.gateway_url {
            Some(u) => u.clone(),
            None => self.rest().gateway_url().await?,
        };
        let (tx, mut dispatches) = mpsc::channel(256);
        let gateway_stop = stop.child_token();
        // Owned by this future: if it is dropped (aborted), they stop with it.
        let mut gateway = AbortOnDropHandle::new(tokio::spawn(
            gateway::Gateway::new(&url, &self.inner.settings.token, tx).run(gateway_stop.clone()),
        ));
        let renderer = AbortOnDropHandle::new(tokio::spawn(self.clone().render_loop(stop.clone())));
        self.reattach().await;
        let result = loop {
            tokio::select! {
                _ = stop.cancelled() => break Ok(()),
                ended = &mut gateway => break match ended {
                    Ok(r) => r,
                    Err(e) => Err(DiscordError::Transport(format!("gateway task: {e}"))),
                },
                d = dispatches.recv() => {
                    let Some(d) = d else { continue };
                    let me = self.clone();
                    // Each dispatch on its own: a slow decision does not hold the others.
                    tokio::spawn(async move { me.on_dispatch(d).await });
                }
                e = events.recv() => match e {
                    Ok(e) => {
                        if e.event.is_project_event() {
                        } else if renders(&e.event) {
                            self.mark(&e.stream_id);
                        } else if relays(&e.event) {
                            self.mark_soon(&e.stream_id);
                        }
                    }
                    Err(RecvError::Lagged(_)) => self.reattach().await,
                    Err(RecvError::Closed) => break Ok(()),
                },
            }
        };
        gateway_stop.cancel();
        stop.cancel();
        let _ = renderer.await;
        result
    }

    /// Mark every task worth re-rendering: unfinished ones in a room, and any
    /// that already has a thread (its last messages may not have been sent).
    async fn reattach(&self) {
        let tasks = match self
            .app()
            .tasks(&TaskQuery {
                limit: Some(500),
                ..TaskQuery::default()
            })
            .await
        {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!(error = %e, "Discord adapter: cannot list tasks to re-attach");
                return;
            }
        };
        for t in tasks {
            if self.room_of(&t.project, &t.project_id).is_none() {
                continue;
            }
            let threaded = matches!(self.recorded(kind::HEADER, &t.id).await, Ok(Some(_)));
            if threaded || !is_final(&t.stage) {
                self.mark(&t.id);
            }
        }
    }

    fn mark(&self, task_id: &str) {
        self.inner
            .dirty
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(task_id.to_owned());
        self.inner.wake.notify_one();
    }

    /// Mark a task after [`TRANSCRIPT_BATCH`], once however many activities come
    /// meanwhile: its transcript goes to the thread in batches, not line by line.
    fn mark_soon(&self, task_id: &str) {
        let fresh = self
            .inner
            .gathering
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(task_id.to_owned());
        if fresh {
            let (me, id) = (self.clone(), task_id.to_owned());
            tokio::spawn(async move {
                tokio::time::sleep(TRANSCRIPT_BATCH).await;
                me.inner
                    .gathering
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .remove(&id);
                me.mark(&id);
            });
        }
    }

    /// Post the task's transcript since the last relayed event to its thread, in
    /// messages within Discord's 2000 characters. Each batch is a message keyed by
    /// its first event (posted once, like a note; a batch re-made after a crash is
    /// edited to what it holds now), then the relayed position is recorded. A task
    /// that had ended before the adapter first saw it is not replayed.
    async fn relay_transcript(&self, task: &api::Task, thread: &str) -> Result<()> {
        let after = match self.recorded(kind::TRANSCRIPT_AT, &task.id).await? {
            Some(m) => m.rendered.parse::<i64>().unwrap_or(0),
            None if is_final(&task.stage) => {
                let head = self
                    .app()
                    .journal()
                    .head(&gaffer_core::StreamId(task.id.clone()))
                    .await
                    .map_err(|e| DiscordError::App(AppError::Store(e)))?;
                return self
                    .record(kind::TRANSCRIPT_AT, &task.id, thread, "", head.to_string())
                    .await;
            }
            None => 0,
        };
        let events = self
            .app()
            .journal()
            .stream_events(&gaffer_core::StreamId(task.id.clone()), after)
            .await
            .map_err(|e| DiscordError::App(AppError::Store(e)))?;
        let Some(end) = events.last().map(|e| e.seq) else {
            return Ok(());
        };
        let lines: Vec<(i64, String)> = events
            .iter()
            .filter_map(|e| match &e.event {
                Event::AgentActivity { activity, .. } => {
                    render::transcript_line(activity).map(|l| (e.seq, l))
                }
                other => render::steer_line(other).map(|l| (e.seq, l)),
            })
            .collect();
        let batches = render::transcript_batches(&lines);
        let more = batches.len() > TRANSCRIPT_POSTS_PER_PASS;
        for (i, (first, last, body)) in batches.iter().enumerate() {
            if i == TRANSCRIPT_POSTS_PER_PASS {
                break;
            }
            let key = format!("{}/{first}", task.id);
            self.put_message(kind::TRANSCRIPT, &key, thread, body, &[], true)
                .await?;
            let upto = if more || i + 1 < batches.len() {
                *last
            } else {
                end
            };
            self.record(kind::TRANSCRIPT_AT, &task.id, thread, "", upto.to_string())
                .await?;
        }
        if batches.is_empty() {
            self.record(kind::TRANSCRIPT_AT, &task.id, thread, "", end.to_string())
                .await?;
        }
        if more {
            self.mark_soon(&task.id);
        }
        Ok(())
    }

    async fn render_loop(self, stop: CancellationToken) {
        loop {
            let next = {
                let mut d = self
                    .inner
                    .dirty
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                d.pop_first()
            };
            let Some(task_id) = next else {
                tokio::select! {
                    _ = self.inner.wake.notified() => continue,
                    _ = stop.cancelled() => return,
                }
            };
            if let Err(e) = self.sync_task(&task_id).await {
                tracing::warn!(task = %task_id, error = %e, "Discord adapter: could not update the task's messages");
            }
        }
    }

    /// The room (channel id) of a project, by name or id.
    fn room_of(&self, project_name: &str, project_id: &str) -> Option<String> {
        self.inner
            .settings
            .rooms
            .iter()
            .find(|(_, p)| *p == project_name || *p == project_id)
            .map(|(c, _)| c.clone())
    }

    async fn recorded(&self, k: &str, id: &str) -> Result<Option<DiscordMessage>> {
        self.app()
            .journal()
            .discord_message(k, id)
            .await
            .map_err(|e| DiscordError::App(AppError::Store(e)))
    }

    async fn record(
        &self,
        k: &str,
        id: &str,
        channel: &str,
        message: &str,
        rendered: String,
    ) -> Result<()> {
        self.app()
            .journal()
            .discord_message_put(&DiscordMessage {
                kind: k.into(),
                gaffer_id: id.into(),
                channel_id: channel.into(),
                message_id: message.into(),
                rendered,
            })
            .await
            .map_err(|e| DiscordError::App(AppError::Store(e)))
    }

    /// Post `body` as the message `(k, id)` in `channel` if none is recorded; edit
    /// the recorded one if it shows something else (unless `edit` is false: a note
    /// is posted once and never changed). Returns the message id.
    async fn put_message(
        &self,
        k: &str,
        id: &str,
        channel: &str,
        body: &Value,
        files: &[rest::Attachment],
        edit: bool,
    ) -> Result<String> {
        let digest = render::digest(body);
        match self.recorded(k, id).await? {
            Some(m) if !m.message_id.is_empty() => {
                if m.rendered != digest && edit {
                    self.rest()
                        .edit_message(&m.channel_id, &m.message_id, body)
                        .await?;
                    self.record(k, id, &m.channel_id, &m.message_id, digest)
                        .await?;
                }
                Ok(m.message_id)
            }
            // Never posted, or posted by a run that crashed before it could record the id.
            intent => {
                let tried = intent.is_some();
                let channel = intent.map_or_else(|| channel.to_owned(), |m| m.channel_id);
                self.post(k, id, &channel, body, files, digest, tried).await
            }
        }
    }

    /// Post the message `(k, id)` once, whatever crashed before: the intent to post
    /// is recorded first; the post carries a nonce derived from `(k, id)`, so
    /// Discord returns the message already made instead of a second one; and an
    /// approval's message, whose duplicate would be a second set of live buttons
    /// (and whose repost may come after the nonce window), is first looked for
    /// among the channel's recent messages by its buttons. A message found or
    /// returned by its nonce shows what was current when it was first posted: it
    /// is edited if that differs from `body`. `tried`: the intent is recorded
    /// already (an earlier run got as far as posting).
    #[allow(clippy::too_many_arguments)]
    async fn post(
        &self,
        k: &str,
        id: &str,
        channel: &str,
        body: &Value,
        files: &[rest::Attachment],
        digest: String,
        tried: bool,
    ) -> Result<String> {
        let found = if !tried {
            self.record(k, id, channel, "", String::new()).await?;
            None
        } else if k == kind::APPROVAL {
            self.find_approval_message(channel, id).await?
        } else {
            None
        };
        let shown = match found {
            Some(m) => m,
            None => {
                self.rest()
                    .create_message(channel, body, files, Some(&nonce(k, id)))
                    .await?
            }
        };
        let mid = rest::id_of(&shown)?;
        if shown["content"] != body["content"] {
            self.rest().edit_message(channel, &mid, body).await?;
        }
        self.record(k, id, channel, &mid, digest).await?;
        Ok(mid)
    }

    /// A message in `channel`'s recent history whose buttons name approval `id`.
    async fn find_approval_message(&self, channel: &str, id: &str) -> Result<Option<Value>> {
        let ours = render::button_ids(id);
        let recent = self.rest().recent_messages(channel, 100).await?;
        Ok(recent.into_iter().find(|m| {
            m["author"]["bot"].as_bool() == Some(true)
                && m["components"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .flat_map(|row| row["components"].as_array().into_iter().flatten())
                    .any(|c| {
                        c["custom_id"]
                            .as_str()
                            .is_some_and(|cid| ours.iter().any(|o| o == cid))
                    })
        }))
    }

    /// The task's thread, made on first need from a header message in the room.
    async fn thread(&self, task: &api::Task, room: &str) -> Result<String> {
        if let Some(t) = self.recorded(kind::THREAD, &task.id).await? {
            return Ok(t.channel_id);
        }
        let header = self
            .put_message(
                kind::HEADER,
                &task.id,
                room,
                &render::header(task),
                &[],
                true,
            )
            .await?;
        let thread = match self
            .rest()
            .start_thread(room, &header, &render::thread_name(task))
            .await
        {
            Ok(t) => t,
            // Made before a crash kept us from recording it: a message's thread has its id.
            Err(e) if e.code() == Some(160004) => header.clone(),
            Err(e) => return Err(e),
        };
        self.record(kind::THREAD, &task.id, &thread, &thread, String::new())
            .await?;
        Ok(thread)
    }

    /// Bring every message of one task up to date with the journal.
    async fn sync_task(&self, task_id: &str) -> Result<()> {
        let detail = match self.app().task(task_id).await {
            Ok(d) => d,
            Err(AppError::NotFound { .. }) => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        let task = &detail.task;
        let Some(room) = self.room_of(&task.project, &task.project_id) else {
            return Ok(());
        };
        let thread = self.thread(task, &room).await?;
        self.put_message(
            kind::HEADER,
            &task.id,
            &room,
            &render::header(task),
            &[],
            true,
        )
        .await?;
        self.put_message(
            kind::STATUS,
            &task.id,
            &thread,
            &render::status(&detail),
            &[],
            true,
        )
        .await?;
        // Notes and approvals in the order they happened.
        enum Item<'a> {
            Note(render::Note),
            Approval(&'a api::Approval),
        }
        let mut items: Vec<(i64, Item<'_>)> = render::notes(&detail)
            .into_iter()
            .map(|n| (n.at, Item::Note(n)))
            .chain(
                detail
                    .approvals
                    .iter()
                    .map(|a| (a.requested_at, Item::Approval(a))),
            )
            .collect();
        items.sort_by_key(|(at, _)| *at);
        for (_, item) in items {
            match item {
                Item::Note(n) => {
                    let key = format!("{}/{}", task.id, n.key);
                    self.put_message(kind::NOTE, &key, &thread, &n.body, &n.files(), false)
                        .await?;
                }
                Item::Approval(a) => {
                    // An approval settled before it was ever shown (an auto-approval)
                    // needs no message; one shown is kept in step with the journal.
                    if a.state == "pending" || self.recorded(kind::APPROVAL, &a.id).await?.is_some()
                    {
                        self.put_message(
                            kind::APPROVAL,
                            &a.id,
                            &thread,
                            &render::approval(a),
                            &[],
                            true,
                        )
                        .await?;
                    }
                }
            }
        }
        self.relay_transcript(task, &thread).await
    }

    async fn on_dispatch(&self, d: gateway::Dispatch) {
        match d.kind.as_str() {
            "MESSAGE_CREATE" => match serde_json::from_value::<Message>(d.data) {
                Ok(m) => self.on_message(m).await,
                Err(e) => tracing::warn!(error = %e, "Discord adapter: unreadable MESSAGE_CREATE"),
            },
            "INTERACTION_CREATE" => match serde_json::from_value::<Interaction>(d.data) {
                Ok(i) => self.on_interaction(i).await,
                Err(e) => {
                    tracing::warn!(error = %e, "Discord adapter: unreadable INTERACTION_CREATE")
                }
            },
            _ => {}
        }
    }

    /// A plain message in a room is a request; one in a task's thread, by an
    /// approver, is a message to the task's agent.
    async fn on_message(&self, m: Message) {
        if m.author.bot {
            return;
        }
        let Some(project) = self.inner.settings.rooms.get(&m.channel_id).cloned() else {
            if let Some(task) = self.task_of_thread(&m.channel_id).await {
                self.steer(&task, &m).await;
            }
            return;
        };
        let request = m.content.trim();
        if request.is_empty() {
            return;
        }
        let actor = Actor::user(&m.author.username, "discord");
        if let Err(e) = self.create_task(&project, request, actor).await {
            self.answer_message(
                &m,
                &format!("Could not queue that request: {}", explain(&e)),
            )
            .await;
        }
    }

    /// Answer a person's message with a reply to it (mentioning nobody).
    async fn answer_message(&self, m: &Message, text: &str) {
        let body = json!({
            "content": render::clip(text, render::MAX_CONTENT),
            "message_reference": { "message_id": m.id },
            "allowed_mentions": { "parse": [] },
        });
        if let Err(e) = self
            .rest()
            .create_message(&m.channel_id, &body, &[], None)
            .await
        {
            tracing::warn!(error = %e, "Discord adapter: could not answer a message");
        }
    }

    /// The task whose thread `channel` is, if it is one of gaffer's threads.
    async fn task_of_thread(&self, channel: &str) -> Option<String> {
        match self
            .app()
            .journal()
            .discord_message_in(kind::THREAD, channel)
            .await
        {
            Ok(thread) => thread.map(|t| t.gaffer_id),
            Err(e) => {
                tracing::warn!(error = %e, "Discord adapter: cannot read the recorded threads");
                None
            }
        }
    }

    /// A reply in task `task`'s thread: an approver's is sent to the task's agent
    /// (journaled as theirs, via discord, delivered once like any message);
    /// anyone else is told it was not, and nothing is recorded.
    async fn steer(&self, task: &str, m: &Message) {
        let text = m.content.trim();
        if text.is_empty() {
            return;
        }
        let roles = m
            .member
            .as_ref()
            .map(|mb| mb.roles.clone())
            .unwrap_or_default();
        let answer = if !self.may_decide(&m.author.id, &roles) {
            "Only configured approvers may talk to the agent; your message was not sent to it."
                .to_owned()
        } else {
            let by = Actor::user(&m.author.username, "discord");
            match self.app().send_message(task, text, by).await {
                Ok(sent) => format!("Sent to the agent ({}).", sent.id),
                Err(e) => format!("Not sent to the agent: {}", explain(&e)),
            }
        };
        self.answer_message(m, &answer).await;
    }

    async fn create_task(
        &self,
        project: &str,
        request: &str,
        by: Actor,
    ) -> Result<api::Task, AppError> {
        let task = self
            .app()
            .create_task(
                NewTask {
                    project: project.to_owned(),
                    request: request.to_owned(),
                    ..NewTask::default()
                },
                by,
            )
            .await?;
        self.mark(&task.id);
        Ok(task)
    }

    fn may_decide(&self, user_id: &str, roles: &[String]) -> bool {
        let s = &self.inner.settings;
        s.approver_users.iter().any(|u| u == user_id)
            || roles.iter().any(|r| s.approver_roles.contains(r))
    }

    fn refusal(&self) -> Reply {
        let s = &self.inner.settings;
        if s.approver_users.is_empty() && s.approver_roles.is_empty() {
            Reply::private("Nobody may decide from Discord yet: no approvers are configured (discord.approver_users / discord.approver_roles). Nothing was decided.")
        } else {
            Reply::private("Only configured approvers may do this. Nothing was decided.")
        }
    }

    /// Answer an interaction; false if Discord did not take the answer.
    async fn answer(&self, i: &Interaction, kind: u8, data: Value) -> bool {
        let body = json!({ "type": kind, "data": data });
        match self.rest().callback(&i.id, &i.token, &body).await {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(error = %e, "Discord adapter: could not answer an interaction");
                false
            }
        }
    }

    async fn reply(&self, i: &Interaction, r: Reply) {
        let mut data = json!({ "content": render::clip(&r.text, render::MAX_CONTENT), "allowed_mentions": { "parse": [] } });
        if r.ephemeral {
            data["flags"] = json!(EPHEMERAL);
        }
        self.answer(i, callback_type::CHANNEL_MESSAGE, data).await;
    }

    async fn on_interaction(&self, i: Interaction) {
        let Some((user, roles)) = i.who() else { return };
        let actor = Actor::user(&user.username, "discord");
        match i.kind {
            interaction_type::APPLICATION_COMMAND => {
                let r = self.command(&i, &user.id, &roles, actor).await;
                self.reply(&i, r).await
            }
            interaction_type::MESSAGE_COMPONENT => self.press(&i, &user.id, &roles, actor).await,
            _ => {}
        }
    }

    /// A button press on an approval message.
    async fn press(&self, i: &Interaction, user_id: &str, roles: &[String], actor: Actor) {
        let cid = &i.data.custom_id;
        let (decision, for_task, id) = if let Some(id) = cid.strip_prefix(render::ALLOW) {
            (Decision::Approve, false, id)
        } else if let Some(id) = cid.strip_prefix(render::ALLOW_TASK) {
            (Decision::Approve, true, id)
        } else if let Some(id) = cid.strip_prefix(render::DENY) {
            (Decision::Deny, false, id)
        } else {
            return;
        };
        if !self.may_decide(user_id, roles) {
            return self.reply(i, self.refusal()).await;
        }
        let decided = if for_task {
            self.app()
                .allow_for_task(id, actor, None, Scope::default())
                .await
        } else {
            self.app()
                .decide(id, decision, actor, None, Scope::default())
                .await
        };
        match decided {
            Ok(d) if d.applied => {
                let body = render::approval(&d.approval);
                let data = json!({ "content": body["content"], "components": body["components"] });
                // The press's answer edits the message; recorded so the renderer does not edit it again.
                if self.answer(i, callback_type::UPDATE_MESSAGE, data).await {
                    // A post whose id is not recorded yet is left to the renderer.
                    if let Ok(Some(m)) = self
                        .recorded(kind::APPROVAL, id)
                        .await
                        .map(|m| m.filter(|m| !m.message_id.is_empty()))
                    {
                        let _ = self
                            .record(
                                kind::APPROVAL,
                                id,
                                &m.channel_id,
                                &m.message_id,
                                render::digest(&body),
                            )
                            .await;
                    }
                }
                self.mark(&d.approval.task_id);
            }
            Ok(d) => {
                self.reply(
                    i,
                    Reply::private(format!(
                        "Already {}; the first decision stands.",
                        render::decided_by(&d.approval)
                    )),
                )
                .await;
                self.mark(&d.approval.task_id);
            }
            Err(e) => {
                self.reply(
                    i,
                    Reply::private(format!("Nothing was decided: {}", explain(&e))),
                )
                .await
            }
        }
    }

    /// The room's project, or a refusal naming the rooms.
    fn room_project(&self, channel: &str) -> Result<String, Reply> {
        self.inner.settings.rooms.get(channel).cloned().ok_or_else(|| {
            Reply::private("This channel is not a project room; use a channel listed in discord.rooms (`/projects` shows them).")
        })
    }

    async fn command(
        &self,
        i: &Interaction,
        user_id: &str,
        roles: &[String],
        actor: Actor,
    ) -> Reply {
        let id_opt = |name: &str| {
            i.option(name)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        match i.data.name.as_str() {
            "task" => {
                let project = match self.room_project(&i.channel_id) {
                    Ok(p) => p,
                    Err(r) => return r,
                };
                let Some(request) = id_opt("request") else {
                    return Reply::private("Say what to do: `/task request: add an installation section to README`.");
                };
                match self.create_task(&project, &request, actor).await {
                    Ok(t) => Reply::public(format!("Queued `{}` in **{}**; its thread follows it.", t.id, t.project)),
                    Err(e) => Reply::private(format!("Could not queue that request: {}", explain(&e))),
                }
            }
            "status" => match id_opt("id") {
                Some(id) => match self.app().task(&id).await {
                    Ok(d) => Reply::private(render::status(&d)["content"].as_str().unwrap_or("").to_owned()),
                    Err(e) => Reply::private(explain(&e)),
                },
                None => self.list(i, true).await,
            },
            "tasks" => self.list(i, false).await,
            "projects" => match self.app().projects().await {
                Ok(ps) if ps.is_empty() => Reply::private("No projects yet: `gaffer project add PATH` registers one."),
                Ok(ps) => Reply::private(ps.iter().map(|p| {
                    let room = self.room_of(&p.name, &p.id).map(|c| format!("<#{c}>")).unwrap_or_else(|| "no room".into());
                    format!("**{}** · {room} · auto-approve {}", p.name, if p.auto_approve { "on" } else { "off" })
                }).collect::<Vec<_>>().join("\n")),
                Err(e) => Reply::private(explain(&e)),
            },
            "cancel" | "approve" | "deny" | "auto" if !self.may_decide(user_id, roles) => self.refusal(),
            "cancel" => {
                let Some(id) = id_opt("id") else { return Reply::private("Name the task: `/cancel id: t-…`.") };
                match self.app().cancel_task(&id, actor, id_opt("reason")).await {
                    Ok(d) => Reply::public(format!("Cancelled `{}`.", d.task.id)),
                    Err(e) => Reply::private(format!("Could not cancel: {}", explain(&e))),
                }
            }
            "approve" | "deny" => {
                let Some(id) = id_opt("id") else { return Reply::private("Name the approval: `/approve id: ap-…`.") };
                let decision = if i.data.name == "approve" { Decision::Approve } else { Decision::Deny };
                // In a room, a decision may only land on that room's project.
                let project_id = match self.room_project(&i.channel_id) {
                    Ok(p) => self.app().project(&p).await.ok().map(|p| p.id),
                    Err(_) => None,
                };
                let scope = Scope { task_id: None, project_id };
                let note = id_opt("note");
                let decided = if i.flag("for_task") && decision == Decision::Approve {
                    self.app().allow_for_task(&id, actor, note, scope).await
                } else {
                    self.app().decide(&id, decision, actor, note, scope).await
                };
                match decided {
                    Ok(d) => {
                        self.mark(&d.approval.task_id);
                        if d.applied {
                            Reply::public(format!("`{}` {}.", d.approval.id, render::decided_by(&d.approval)))
                        } else {
                            Reply::private(format!("Already {}; the first decision stands.", render::decided_by(&d.approval)))
                        }
                    }
                    Err(e) => Reply::private(format!("Nothing was decided: {}", explain(&e))),
                }
            }
            "auto" => {
                let project = match self.room_project(&i.channel_id) {
                    Ok(p) => p,
                    Err(r) => return r,
                };
                let enabled = match id_opt("state").as_deref() {
                    Some("on") => true,
                    Some("off") => false,
                    _ => return Reply::private("Say `/auto state: on` or `/auto state: off`."),
                };
                match self.app().set_auto_approve(&project, enabled, actor).await {
                    Ok(p) => Reply::public(format!("Auto-approve is {} for **{}**.", if p.auto_approve { "on" } else { "off" }, p.name)),
                    Err(e) => Reply::private(explain(&e)),
                }
            }
            other => Reply::private(format!("Unknown command `/{other}`; gaffer knows /task, /status, /tasks, /cancel, /approve, /deny, /auto, /projects.")),
        }
    }

    /// Recent tasks of the room's project (every project outside a room);
    /// `active` keeps only unfinished ones and adds the pending approvals.
    async fn list(&self, i: &Interaction, active: bool) -> Reply {
        let project = self.inner.settings.rooms.get(&i.channel_id).cloned();
        let tasks = match self
            .app()
            .tasks(&TaskQuery {
                project,
                limit: Some(50),
                ..TaskQuery::default()
            })
            .await
        {
            Ok(t) => t,
            Err(e) => return Reply::private(explain(&e)),
        };
        let mut lines: Vec<String> = tasks
            .iter()
            .filter(|t| !active || !is_final(&t.stage))
            .take(15)
            .map(|t| {
                format!(
                    "`{}` **{}** {}",
                    t.id,
                    t.stage,
                    render::clip(&t.request.replace('\n', " "), 80)
                )
            })
            .collect();
        if lines.is_empty() {
            lines.push(if active {
                "Nothing is running.".into()
            } else {
                "No tasks yet.".into()
            });
        }
        if active {
            if let Ok(pending) = self.app().approvals(Some("pending")).await {
                let ids: BTreeSet<&str> = tasks.iter().map(|t| t.id.as_str()).collect();
                let n = pending
                    .iter()
                    .filter(|a| ids.contains(a.task_id.as_str()))
                    .count();
                lines.push(format!(
                    "{n} approval{} pending.",
                    if n == 1 { "" } else { "s" }
                ));
            }
        }
        Reply::private(lines.join("\n"))
    }
}

/// Whether an event is a line of the agent's transcript (relayed in batches).
fn relays(e: &Event) -> bool {
    matches!(e, Event::AgentActivity { activity, .. } if activity["type"] != "usage")
}

/// Whether an event can change what the adapter shows (agent chatter and
/// session bookkeeping cannot).
fn renders(e: &Event) -> bool {
    !matches!(
        e,
        Event::AgentActivity { .. }
            | Event::StepContextPacked { .. }
            | Event::SessionStarted { .. }
            | Event::SessionVerified { .. }
            | Event::SessionEnded { .. }
    )
}
