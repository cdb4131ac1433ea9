//! An approval asked on the terminal.
//!
//! The question shows what is decided (the plan, the command with its directory
//! and why, the diff in short), who else can decide it and when it expires. Only
//! a typed `y` or `n` decides; Enter alone or anything else records nothing and
//! asks again. Ctrl-C stops the run without recording a decision. A decision made
//! elsewhere (another terminal, the page, Discord, a rule) replaces the question
//! at once, and what was typed for it is thrown away, so it cannot answer the next.

use crate::output::one_line;
use crate::render;
use crate::setup::cli_actor;
use crate::term;
use gaffer_app::{App, Scope};
use gaffer_core::{Decision, Event};
use gaffer_protocol::api;
use gaffer_protocol::words::ApprovalWords;
use gaffer_store::now_ms;
use std::io::Write;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Lines typed on stdin, read by a thread of their own: a blocked read can then be
/// abandoned (the process exits without waiting for it).
#[derive(Default)]
pub struct Input {
    lines: Option<mpsc::UnboundedReceiver<String>>,
    closed: bool,
}

impl Input {
    fn lines(&mut self) -> &mut mpsc::UnboundedReceiver<String> {
        self.lines.get_or_insert_with(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            std::thread::spawn(move || {
                let stdin = std::io::stdin();
                let mut line = String::new();
                loop {
                    line.clear();
                    match stdin.read_line(&mut line) {
                        // End of input: the channel closes.
                        Ok(0) | Err(_) => return,
                        Ok(_) => {
                            if tx.send(line.clone()).is_err() {
                                return;
                            }
                        }
                    }
                }
            });
            rx
        })
    }

    /// Forget what was typed before the question was shown (or for a question
    /// that is gone): it was not an answer to this one.
    fn discard_typed(&mut self) {
        let _ = rustix::termios::tcflush(std::io::stdin(), rustix::termios::QueueSelector::IFlush);
        let lines = self.lines();
        while lines.try_recv().is_ok() {}
    }

    /// The next line typed, or `None` at the end of input (Ctrl-D).
    async fn next(&mut self) -> Option<String> {
        if self.closed {
            return std::future::pending().await;
        }
        let line = self.lines().recv().await;
        if line.is_none() {
            self.closed = true;
        }
        line
    }
}

/// What a typed line means.
#[derive(Debug, PartialEq)]
enum Answer {
    Approve(Option<String>),
    Deny(Option<String>),
    /// Approve, and the same command for the rest of the task.
    AllowForTask(Option<String>),
    Nothing,
    Unclear(String),
}

fn parse(line: &str, can_allow_for_task: bool) -> Answer {
    let line = line.trim();
    if line.is_empty() {
        return Answer::Nothing;
    }
    let (word, note) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    let note = Some(note.trim().to_owned()).filter(|n| !n.is_empty());
    match word.to_lowercase().as_str() {
        "y" | "yes" => Answer::Approve(note),
        "n" | "no" => Answer::Deny(note),
        "a" | "always" if can_allow_for_task => Answer::AllowForTask(note),
        _ => Answer::Unclear(one_line(word, 20)),
    }
}

/// The question's text: what is asked, what it is about, how else to decide it.
fn question(approval: &api::Approval, short_id: &str, worktree: Option<&str>) -> Vec<String> {
    let s = term::style();
    let mut out = vec![format!(
        "{} {}",
        s.clone().yellow().bold().apply_to("?"),
        s.clone().bold().apply_to(one_line(&approval.summary, 300))
    )];
    out.extend(
        render::approval_body(approval, worktree)
            .into_iter()
            .map(|l| format!("    {l}")),
    );
    let mut about = format!("approval {short_id}");
    if let Some(e) = render::expiry(approval, now_ms()) {
        about.push_str(&format!(" · {e}"));
    }
    out.push(format!("  {}", s.clone().dim().apply_to(about)));
    out
}

/// Can this approval be allowed for the rest of its task (a tool naming a command)?
fn allows_for_task(approval: &api::Approval) -> bool {
    approval.kind == "tool" && approval.details.pointer("/subject/command").is_some()
}

/// Announce a pending approval nobody can answer here (stdin is not a terminal).
pub fn announce(approval: &api::Approval, short_id: &str, worktree: Option<&str>) {
    for line in question(approval, short_id, worktree) {
        term::note(line);
    }
    term::note(format_args!(
        "  decide with `gaffer approve {short_id}` or `gaffer deny {short_id} --note …` (or on the page, or in Discord)"
    ));
}

/// Ask until the approval is decided here or elsewhere, expires, or Ctrl-C.
pub async fn ask(
    app: &App,
    approval: &api::Approval,
    short_id: &str,
    worktree: Option<&str>,
    input: &mut Input,
    cancel: &CancellationToken,
) {
    // Listen before looking, so a decision made in between is not missed.
    let mut events = app.journal().subscribe();
    let allow = allows_for_task(approval);
    let s = term::style();
    for line in question(approval, short_id, worktree) {
        term::note(line);
    }
    let keys = match render::choices(approval) {
        Some((approve, deny, cancel)) => format!(
            "y {approve} · n {deny}{}",
            cancel.map(|c| format!(" · or `{c}`")).unwrap_or_default()
        ),
        None if allow => {
            "y approve · n deny · a approve this command for the rest of the task".to_owned()
        }
        None => "y approve · n deny".to_owned(),
    };
    term::note(format_args!("  {}", s.clone().dim().apply_to(keys)));
    term::note(format_args!(
        "  {}",
        s.clone().dim().apply_to(
            "a note may follow the letter (`n use make check`) · Enter alone decides nothing"
        )
    ));
    input.discard_typed();
    loop {
        // No default: Enter alone decides nothing, so neither letter is capitalised.
        // The kind's own word: "Continue?" for a stall, "Raise cap?" for a budget.
        let ask = format!("{}?", ApprovalWords::of(&approval.kind).approve);
        prompt_line(&format!("{} [y/n] ", s.clone().bold().apply_to(ask)));
        tokio::select! {
            biased;
            () = cancel.cancelled() => {
                // Ctrl-C: the run stops; nothing is decided.
                term::note("");
                return;
            }
            settled = settled(app, &approval.id, &mut events) => {
                // Decided elsewhere (or expired): the question goes, and what was
                // typed for it with it.
                clear_line();
                input.discard_typed();
                let mark = match settled.state.as_str() {
                    "approved" => s.clone().green().apply_to("✓"),
                    _ => s.clone().red().apply_to("✗"),
                };
                term::note(format_args!("{mark} {} — {}", short_id, render::settled(&settled)));
                return;
            }
            line = input.next() => {
                let Some(line) = line else {
                    term::note("");
                    term::note(format_args!(
                        "  no more input here; decide with `gaffer approve {short_id}` or `gaffer deny {short_id}`"
                    ));
                    return;
                };
                let (decision, note, for_task) = match parse(&line, allow) {
                    Answer::Approve(note) => (Decision::Approve, note, false),
                    Answer::Deny(note) => (Decision::Deny, note, false),
                    Answer::AllowForTask(note) => (Decision::Approve, note, true),
                    Answer::Nothing => {
                        term::note(format_args!(
                            "  nothing recorded: type y to approve or n to deny; the task waits"
                        ));
                        continue;
                    }
                    Answer::Unclear(word) => {
                        term::note(format_args!(
                            "  `{word}` is not an answer, nothing recorded: type y to approve or n to deny"
                        ));
                        continue;
                    }
                };
                let decided = if for_task {
                    app.allow_for_task(&approval.id, cli_actor(), note, Scope::default()).await
                } else {
                    app.decide(&approval.id, decision, cli_actor(), note, Scope::default()).await
                };
                match decided {
                    Ok(d) => {
                        let mark = if d.approval.state == "approved" {
                            s.clone().green().apply_to("✓")
                        } else {
                            s.clone().red().apply_to("✗")
                        };
                        let first = if d.applied { "" } else { " (someone else decided first)" };
                        term::note(format_args!(
                            "{mark} {short_id} — {}{first}",
                            render::settled(&d.approval)
                        ));
                    }
                    Err(e) => term::note(format_args!(
                        "  could not record the decision: {}",
                        one_line(&e.to_string(), 300)
                    )),
                }
                return;
            }
        }
    }
}

/// Write the prompt without a line break, so the answer is typed after it.
fn prompt_line(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = write!(err, "{text}");
    let _ = err.flush();
}

/// Wipe the prompt line and what was typed on it.
fn clear_line() {
    let _ = console::Term::stderr().clear_line();
}

/// The approval once it is no longer pending.
async fn settled(
    app: &App,
    id: &str,
    events: &mut tokio::sync::broadcast::Receiver<gaffer_store::RecordedEvent>,
) -> api::Approval {
    loop {
        if let Ok(a) = app.approval(id).await {
            if a.state != "pending" {
                return a;
            }
        }
        // Wait for an event that may settle it (or for missed events).
        loop {
            match events.recv().await {
                Ok(e) => match &e.event {
                    Event::ApprovalDecided { approval_id, .. }
                    | Event::ApprovalExpired { approval_id, .. }
                    | Event::ApprovalWithdrawn { approval_id, .. }
                        if approval_id.as_str() == id =>
                    {
                        break
                    }
                    _ => continue,
                },
                Err(RecvError::Lagged(_)) => break,
                Err(RecvError::Closed) => std::future::pending::<()>().await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn only_a_typed_answer_decides() {
        assert_eq!(parse("", false), Answer::Nothing);
        assert_eq!(parse("  \n", false), Answer::Nothing);
        assert_eq!(parse("y\n", false), Answer::Approve(None));
        assert_eq!(
            parse("Yes  fine by me\n", false),
            Answer::Approve(Some("fine by me".into()))
        );
        assert_eq!(
            parse("n use tabs", false),
            Answer::Deny(Some("use tabs".into()))
        );
        assert_eq!(parse("yep", false), Answer::Unclear("yep".into()));
        assert_eq!(parse("a", false), Answer::Unclear("a".into()));
        assert_eq!(parse("a", true), Answer::AllowForTask(None));
    }
}
