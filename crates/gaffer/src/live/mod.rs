//! The live view of a task run in the foreground (`gaffer run`, `gaffer task resume`),
//! or followed from another terminal (`gaffer attach`).
//!
//! It follows the task's events as they are recorded (the journal's broadcast only
//! wakes it; the events are read from the store in order, so none is lost or
//! shown twice) and renders them three ways at once:
//! - on stderr for a person: a line per stage, step and agent action, stamped with
//!   the time the event was recorded, under a spinner line with a running clock,
//!   the stage, the step, tokens, cost and the agent's latest activity (plain
//!   lines when stderr is not a terminal; nothing with `-q`);
//! - on stdout for scripts with `--json`: one JSON object per event (the API's
//!   event-stream shape), the summary added last by the caller;
//! - approvals asked on this terminal when stdin is one ([`prompt`]).

mod prompt;
mod words;

use crate::output::{count, one_line};
use crate::term;
use gaffer_agents::Redactor;
use gaffer_app::App;
use gaffer_core::{Event, Spend, StreamId, TaskId};
use gaffer_protocol::api;
use gaffer_store::{now_ms, RecordedEvent};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use words::{activity_line, receipt_note};

/// How the run is shown.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// JSON Lines on stdout.
    pub json: bool,
    /// No progress on stderr (`-q`).
    pub quiet: bool,
    /// Ask pending approvals on this terminal.
    pub interactive: bool,
}

impl Options {
    /// What the terminals allow: questions when stdin is a terminal.
    pub fn for_terminal(json: bool, quiet: bool) -> Self {
        Self {
            json,
            quiet,
            interactive: term::stdin_is_terminal(),
        }
    }
}

/// A running view; [`Follow::finish`] shows what is left and ends it.
pub struct Follow {
    /// `None` once [`Follow::ended`] saw it end (a finished handle must not be
    /// awaited again).
    handle: Option<JoinHandle<()>>,
    done: CancellationToken,
}

impl Follow {
    /// Follow task `id` from after its event `after_seq`. `cancel` is the run's
    /// Ctrl-C: a question being asked stops, recording nothing. `redactor` removes
    /// what this process knows to be secret (a token read from a credential
    /// helper, say) from all it shows.
    pub fn start(
        app: App,
        id: TaskId,
        after_seq: i64,
        options: Options,
        cancel: CancellationToken,
        redactor: Arc<Redactor>,
    ) -> Self {
        // Subscribe now, before the engine records anything more.
        let wake = app.journal().subscribe();
        let done = CancellationToken::new();
        let view = View::new(options);
        let shown = Shown { app, redactor };
        let handle = tokio::spawn(follow(
            shown,
            id,
            after_seq,
            wake,
            view,
            cancel,
            done.clone(),
        ));
        Self {
            handle: Some(handle),
            done,
        }
    }

    /// Until the view stopped by itself: the task ended.
    pub async fn ended(&mut self) {
        if let Some(handle) = &mut self.handle {
            let _ = handle.await;
            self.handle = None;
        }
    }

    /// The run is over: show the events not shown yet, then stop.
    pub async fn finish(self) {
        self.done.cancel();
        if let Some(handle) = self.handle {
            let _ = tokio::time::timeout(Duration::from_secs(5), handle).await;
        }
    }
}

/// Whether `event` ends the task (for now: a follow-up may open a done task again).
pub(crate) fn ends(event: &Event) -> bool {
    matches!(
        event,
        Event::TaskDone { .. }
            | Event::TaskFailed { .. }
            | Event::TaskCancelled { .. }
            | Event::TaskBlocked { .. }
            | Event::TaskDependencyFailed { .. }
    )
}

/// Where the view reads from, and what it removes before showing.
struct Shown {
    app: App,
    redactor: Arc<Redactor>,
}

async fn follow(
    shown: Shown,
    id: TaskId,
    mut seq: i64,
    mut wake: broadcast::Receiver<RecordedEvent>,
    mut view: View,
    cancel: CancellationToken,
    done: CancellationToken,
) {
    let app = &shown.app;
    let mut input = prompt::Input::default();
    if seq > 0 {
        // Follow-ups are numbered from the task's first: count those before the start.
        if let Ok(before) = app
            .journal()
            .stream_events(&StreamId::from(id.as_str()), 0)
            .await
        {
            view.follow_ups = before
                .iter()
                .take_while(|e| e.seq <= seq)
                .filter(|e| matches!(e.event, Event::FollowUpOpened { .. }))
                .count();
        }
    }
    loop {
        let events = match app
            .journal()
            .stream_events(&StreamId::from(id.as_str()), seq)
            .await
        {
            Ok(events) => events,
            Err(e) => {
                view.say(
                    now_ms(),
                    "!",
                    &format!("cannot read the task's events: {e}"),
                );
                Vec::new()
            }
        };
        let newest = events.last().map(|e| e.seq);
        for e in events {
            seq = e.seq;
            let e = RecordedEvent {
                event: shown.redactor.redact_serde(e.event),
                ..e
            };
            view.json(&e);
            // The end, unless more follows: a done task reopened by a follow-up
            // (shown from its history) goes on.
            let ended = Some(e.seq) == newest && ends(&e.event);
            if let Event::ApprovalRequested {
                approval_id,
                summary,
                ..
            } = &e.event
            {
                if !ask(
                    &shown,
                    &id,
                    approval_id.as_str(),
                    &mut view,
                    &mut input,
                    &cancel,
                )
                .await
                {
                    view.say(e.at, "?", &one_line(summary, 300));
                }
            } else {
                view.show(&e);
            }
            if ended {
                view.close();
                return;
            }
        }
        if done.is_cancelled() {
            view.close();
            return;
        }
        // Sleep until something happens to this task (or to the journal, when
        // events were missed), or the run ends.
        loop {
            tokio::select! {
                r = wake.recv() => match r {
                    Ok(e) if e.stream_id != id.0 => continue,
                    Ok(_) | Err(RecvError::Lagged(_)) => break,
                    Err(RecvError::Closed) => {
                        done.cancelled().await;
                        break;
                    }
                },
                () = done.cancelled() => break,
            }
        }
    }
}

/// A pending approval: asked on this terminal, or announced with how to decide it.
/// False when it is not pending any more (a rule or someone quicker decided it).
async fn ask(
    shown: &Shown,
    task: &TaskId,
    approval_id: &str,
    view: &mut View,
    input: &mut prompt::Input,
    cancel: &CancellationToken,
) -> bool {
    let app = &shown.app;
    let Ok(approval) = app.approval(approval_id).await else {
        return false;
    };
    let approval = shown.redactor.redact_serde(approval);
    if approval.state != "pending" {
        return false;
    }
    let all = crate::ids::all_approvals(app.journal().as_ref())
        .await
        .unwrap_or_default();
    let short = crate::ids::shorten(all.iter().map(String::as_str))
        .remove(&approval.id)
        .unwrap_or_else(|| approval.id.clone());
    let worktree = worktree_of(app, task)
        .await
        .map(|w| shown.redactor.redact(&w));
    view.pause();
    if view.options.interactive && !cancel.is_cancelled() {
        prompt::ask(app, &approval, &short, worktree.as_deref(), input, cancel).await;
        view.answered.insert(approval.id.clone());
    } else {
        prompt::announce(&approval, &short, worktree.as_deref());
        view.waiting = Some((approval.id.clone(), short));
    }
    view.resume();
    true
}

/// The task's worktree, where an agent's command runs unless it names another.
async fn worktree_of(app: &App, task: &TaskId) -> Option<String> {
    let view = app.journal().task(task.as_str()).await.ok()??;
    let step = view.steps.iter().find(|s| s.step_id == "worktree")?;
    let receipt: Value = serde_json::from_str(step.receipt.as_deref()?).ok()?;
    receipt["path"].as_str().map(str::to_owned)
}

/// What is on the terminal, and what the spinner line says.
struct View {
    options: Options,
    bar: Option<ProgressBar>,
    /// Draw a spinner line (stderr is a terminal).
    live: bool,
    started: i64,
    started_at: std::time::Instant,
    stage: String,
    step: String,
    activity: String,
    /// What the finished steps spent, by their receipts: the task's cost as the
    /// summary, `task show` and the page count it.
    settled: Spend,
    /// What the running step's agent reported so far; its receipt replaces it.
    running: Spend,
    /// Approvals decided at this terminal's prompt: their decision is shown there.
    answered: HashSet<String>,
    /// The approval announced (not asked) that the task waits for: id, short id.
    waiting: Option<(String, String)>,
    /// Stdout was closed (`| head -1`): stop writing JSON there, go on.
    stdout_closed: bool,
    /// Follow-ups the task had so far (numbered as the journal numbers them).
    follow_ups: usize,
    /// The steps of follow-ups (their input names the follow-up or the update they
    /// belong to), with the name the engine recorded: said when they start, since
    /// `sync/1` or `push-approval/2` alone tell a person little.
    follow_up_steps: HashMap<String, String>,
}

impl View {
    fn new(options: Options) -> Self {
        let mut view = Self {
            options,
            bar: None,
            live: !options.quiet && term::stderr_is_terminal(),
            started: now_ms(),
            started_at: std::time::Instant::now(),
            stage: String::new(),
            step: String::new(),
            activity: String::new(),
            settled: Spend::default(),
            running: Spend::default(),
            answered: HashSet::new(),
            waiting: None,
            stdout_closed: false,
            follow_ups: 0,
            follow_up_steps: Default::default(),
        };
        view.resume();
        view
    }

    /// Hide the spinner line (a question takes the screen).
    fn pause(&mut self) {
        if let Some(bar) = self.bar.take() {
            term::set_live_line(None);
            bar.finish_and_clear();
        }
    }

    /// Draw the spinner line again, its clock still counting from the start.
    fn resume(&mut self) {
        if !self.live || self.bar.is_some() {
            return;
        }
        let style =
            ProgressStyle::with_template("{spinner:.cyan} {elapsed_precise:.dim} {wide_msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner());
        let bar = ProgressBar::new_spinner()
            .with_style(style)
            .with_elapsed(self.started_at.elapsed());
        bar.enable_steady_tick(Duration::from_millis(120));
        term::set_live_line(Some(bar.clone()));
        self.bar = Some(bar);
        self.refresh();
    }

    fn close(&mut self) {
        self.pause();
        self.live = false;
    }

    fn refresh(&self) {
        let Some(bar) = &self.bar else { return };
        let mut parts: Vec<String> = Vec::new();
        if !self.stage.is_empty() {
            parts.push(term::style().bold().apply_to(&self.stage).to_string());
        }
        if !self.step.is_empty() {
            parts.push(self.step.clone());
        }
        let spent = self.spent();
        if spent != Spend::default() {
            parts.push(format!(
                "{} tok · {}",
                count(spent.tokens()),
                spent.cost_display()
            ));
        }
        if let Some((_, short)) = &self.waiting {
            parts.push(format!("waiting for approval {short}"));
        } else if !self.activity.is_empty() {
            parts.push(self.activity.clone());
        }
        bar.set_message(parts.join(" · "));
    }

    /// What the task spent so far.
    fn spent(&self) -> Spend {
        self.settled + self.running
    }

    /// The approval announced is no longer waited for.
    fn settle(&mut self, approval_id: &str) {
        if self
            .waiting
            .as_ref()
            .is_some_and(|(id, _)| id == approval_id)
        {
            self.waiting = None;
        }
    }

    /// One line about the run, stamped with when it happened.
    fn say(&self, at: i64, mark: &str, text: &str) {
        if self.options.quiet {
            return;
        }
        let secs = (at - self.started).max(0) / 1000;
        let stamp = format!("[{secs:>4}s]");
        match &self.bar {
            Some(bar) => {
                let s = term::style();
                let mark = match mark {
                    "✓" => s.green().apply_to(mark),
                    "✗" => s.red().apply_to(mark),
                    "!" | "?" => s.yellow().apply_to(mark),
                    "▸" => s.bold().apply_to(mark),
                    _ => s.apply_to(mark),
                };
                bar.println(format!(
                    "{} {mark} {text}",
                    term::style().dim().apply_to(stamp)
                ));
            }
            None => term::note(format_args!("{stamp} {mark} {text}")),
        }
    }

    /// The event as one JSON line on stdout (`--json`).
    fn json(&mut self, e: &RecordedEvent) {
        if !self.options.json || self.stdout_closed {
            return;
        }
        let value = serde_json::to_value(&e.event).unwrap_or(Value::Null);
        let line = api::StreamEvent {
            pos: e.pos,
            stream_id: e.stream_id.clone(),
            seq: e.seq,
            at: e.at,
            kind: value["type"].as_str().unwrap_or_default().to_owned(),
            event: value,
            approval: None,
        };
        let Ok(text) = serde_json::to_string(&line) else {
            return;
        };
        let mut out = std::io::stdout().lock();
        if writeln!(out, "{text}").and_then(|()| out.flush()).is_err() {
            self.stdout_closed = true;
        }
    }

    /// The event as a person reads it.
    fn show(&mut self, e: &RecordedEvent) {
        let at = e.at;
        match &e.event {
            Event::TaskStageEntered { stage } => {
                self.stage = stage.as_str().to_owned();
                self.say(at, "▸", &self.stage);
            }
            Event::StepIntentRecorded {
                step_id,
                name,
                input,
                ..
            } if input.get("follow_up").is_some() || input.get("sync").is_some() => {
                self.follow_up_steps
                    .insert(step_id.as_str().to_owned(), one_line(name, 80));
            }
            Event::StepStarted { step_id } => {
                self.running = Spend::default();
                self.step = one_line(step_id.as_str(), 30);
                self.activity.clear();
                match self.follow_up_steps.get(step_id.as_str()) {
                    Some(name) => self.say(at, "•", &format!("{}: {name}", self.step)),
                    None => self.say(at, "•", &self.step),
                }
            }
            Event::StepCompleted { step_id, receipt } => {
                self.settled += Spend::of_receipt(receipt);
                self.running = Spend::default();
                let note = crate::follow_up::step_words(step_id.as_str(), receipt)
                    .map_or_else(|| receipt_note(receipt), |w| format!(": {w}"));
                self.say(
                    at,
                    "✓",
                    &format!("{}{note}", one_line(step_id.as_str(), 30)),
                );
            }
            Event::StepFailed {
                step_id,
                error,
                usage,
            } => {
                // What the failed step's turns spent counts, as the task's cost does.
                if let Some(usage) = usage {
                    self.settled += Spend::of_receipt(&serde_json::json!({ "usage": usage }));
                }
                self.running = Spend::default();
                // Its first line and the end of its output, line by line: a failing
                // setup or check says why last.
                let lines = crate::output::error_lines(error, 12, 300);
                for (i, line) in lines.iter().enumerate() {
                    match i {
                        0 => self.say(
                            at,
                            "✗",
                            &format!("{}: {line}", one_line(step_id.as_str(), 30)),
                        ),
                        _ => self.say(at, " ", &format!("    {line}")),
                    }
                }
            }
            Event::StepManualRequired { step_id, reason } => self.say(
                at,
                "!",
                &format!(
                    "{}: {}",
                    one_line(step_id.as_str(), 30),
                    one_line(reason, 300)
                ),
            ),
            Event::PanelOpinion {
                member,
                opinion,
                error,
                usage,
                ..
            } => {
                let spent = Spend::of_usage(usage);
                let said = match (opinion, error) {
                    (Some(o), _) => format!(
                        "{}: {}",
                        one_line(o["opinion"].as_str().unwrap_or("?"), 20),
                        one_line(o["reason"].as_str().unwrap_or_default(), 240)
                    ),
                    (None, e) => format!(
                        "no opinion: {}",
                        one_line(e.as_deref().unwrap_or("no answer"), 240)
                    ),
                };
                self.say(
                    at,
                    "⚖",
                    &format!(
                        "panel {} {said} ({} tokens, {})",
                        one_line(member, 60),
                        spent.tokens(),
                        spent.cost_display()
                    ),
                );
            }
            Event::AgentSwitched {
                step_id,
                from,
                to,
                trigger,
                detail,
                effects,
                ..
            } => self.say(
                at,
                "⇄",
                &format!(
                    "{}: {} is out ({}: {}); {} takes over{}",
                    one_line(step_id.as_str(), 30),
                    one_line(from, 20),
                    one_line(trigger, 20),
                    one_line(detail, 200),
                    one_line(to, 20),
                    if *effects {
                        " once a person approves"
                    } else {
                        ", running the turn again"
                    }
                ),
            ),
            Event::CiStatusChanged { sha, state, .. } => self.say(
                at,
                " ",
                &format!(
                    "CI {} on {}",
                    one_line(state, 20),
                    one_line(&sha[..sha.len().min(10)], 10)
                ),
            ),
            Event::AgentActivity { activity, .. } if activity["type"] == "usage" => {
                let reported = Spend::of_receipt(activity);
                self.running += reported;
                if self.bar.is_none() && reported != Spend::default() {
                    let spent = self.spent();
                    self.say(
                        at,
                        " ",
                        &format!(
                            "tokens so far: {} · {}",
                            count(spent.tokens()),
                            spent.cost_display()
                        ),
                    );
                }
            }
            Event::AgentActivity { activity, .. } => {
                if let Some(line) = activity_line(activity) {
                    // With a spinner line, what the agent says is shown there only;
                    // what it does (tools, files) is also kept above it.
                    if self.bar.is_none() || activity["type"] != "assistant_text" {
                        self.say(at, " ", &line);
                    }
                    // The spinner keeps naming the call while its result scrolls by.
                    if activity["type"] != "tool_result" {
                        self.activity = line;
                    }
                }
            }
            Event::ApprovalDecided {
                approval_id,
                decision,
                by,
                ..
            } => {
                self.settle(approval_id.as_str());
                if !self.answered.contains(approval_id.as_str()) {
                    let word = match decision {
                        gaffer_core::Decision::Approve => "approved",
                        gaffer_core::Decision::Deny => "denied",
                    };
                    self.say(
                        at,
                        " ",
                        &format!(
                            "approval {}: {word} by {} ({})",
                            approval_id,
                            one_line(&by.name, 60),
                            one_line(&by.via, 40)
                        ),
                    );
                }
            }
            Event::ApprovalExpired {
                approval_id,
                reason,
            }
            | Event::ApprovalWithdrawn {
                approval_id,
                reason,
            } => {
                self.settle(approval_id.as_str());
                if !self.answered.contains(approval_id.as_str()) {
                    let word = if matches!(e.event, Event::ApprovalExpired { .. }) {
                        "expired"
                    } else {
                        "withdrawn"
                    };
                    self.say(
                        at,
                        "!",
                        &format!("approval {approval_id} {word}: {}", one_line(reason, 200)),
                    );
                }
            }
            Event::TaskDone { .. } if self.follow_ups > 0 => {
                self.say(at, "■", &crate::follow_up::done_again(self.follow_ups));
            }
            Event::TaskDone { .. } => self.say(at, "■", "done"),
            Event::FollowUpOpened { kind, keys, detail } => {
                self.follow_ups += 1;
                let lines = crate::follow_up::opened(self.follow_ups, kind, keys, detail);
                for (i, line) in lines.iter().enumerate() {
                    self.say(at, if i == 0 { "↻" } else { " " }, line);
                }
            }
            Event::FollowingEnded { reason } => {
                self.say(at, "■", &crate::follow_up::ended(reason));
            }
            Event::TaskFailed { reason } => {
                // The first line: a failed step's output was shown with the step.
                let head = reason.lines().next().unwrap_or_default();
                self.say(at, "✗", &format!("failed: {}", one_line(head, 300)));
            }
            Event::TaskBlocked { reason } => {
                self.say(at, "✗", &format!("blocked: {}", one_line(reason, 300)));
            }
            Event::TaskDependencyFailed {
                dependency,
                stage,
                reason,
            } => {
                let why =
                    gaffer_core::dependency::blocked_reason(dependency, *stage, reason.as_deref());
                self.say(at, "✗", &format!("blocked: {}", one_line(&why, 300)));
            }
            Event::TaskDependencyDone { dependency } => {
                self.say(
                    at,
                    "✓",
                    &format!("{dependency}, which it runs after, is done"),
                );
            }
            Event::TaskCancelled { by, .. } => self.say(
                at,
                "■",
                &format!(
                    "cancelled by {} ({})",
                    one_line(&by.name, 60),
                    one_line(&by.via, 40)
                ),
            ),
            Event::MessageSent { text, by, .. } => self.say(
                at,
                "✉",
                &format!(
                    "{} ({}): {}",
                    one_line(&by.name, 60),
                    one_line(&by.via, 40),
                    one_line(text, 300)
                ),
            ),
            Event::MessageDelivered {
                delivery, masked, ..
            } => {
                let how = match delivery {
                    gaffer_core::Delivery::Live => "into the running turn",
                    gaffer_core::Delivery::NextTurn => "as the next turn",
                };
                let masked = if *masked { " masked" } else { "" };
                self.say(at, " ", &format!("the agent got the message{masked} {how}"));
            }
            Event::TurnInterrupted { by, .. } => self.say(
                at,
                "‖",
                &format!(
                    "turn stopped by {} ({}); waits for a message",
                    one_line(&by.name, 60),
                    one_line(&by.via, 40)
                ),
            ),
            _ => {}
        }
        self.refresh();
    }
}
