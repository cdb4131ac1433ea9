//! No secret leaves through the work itself: before gaffer commits a task's change
//! and before it pushes the task branch, what would be committed or pushed (file
//! names, added lines, and for a push every commit's message) is scanned for the
//! configured secrets, the values of secret variables and credential shapes (the
//! engine's redactor). A hit stops the step with a `manual` approval — never
//! auto-approved — naming each file and line and what kind of secret it holds,
//! never the secret; nothing is committed or pushed until a person decides.
//!
//! - Approve: the person says these are not secrets; the step goes on. A push does
//!   not ask again about what a person already let through at a commit.
//! - Deny: the step fails, nothing is committed or pushed; the worktree keeps the
//!   change, so the secret can be removed before the task is retried.
//! - The question is asked once per step (`attempt` 1, 2, … for new findings): a
//!   step run again after a crash gets its recorded answer back and goes on only
//!   if what it finds now is what was answered.

use crate::failure::{fail, Failure};
use crate::Engine;
use gaffer_app::Subject;
use gaffer_core::{ApprovalKind, ApprovalState, Step, TaskState};
use gaffer_forge::{Addition, Source};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// One place a secret was found: never the secret itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Finding {
    /// The file (its name redacted), or `commit message`.
    pub(crate) file: String,
    /// The line (1-based); 0 when the file's name is what holds the secret.
    pub(crate) line: u32,
    /// What was found, in words.
    pub(crate) what: String,
    /// The commit that adds it, for a push.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) commit: Option<String>,
}

impl Finding {
    /// Where, for a person: `` `src/a.rs` line 3 (a configured secret value) ``.
    fn place(&self) -> String {
        let at = match (self.line, &self.commit) {
            (0, _) => " (its name)".to_owned(),
            (n, Some(c)) => format!(" line {n} in commit {}", &c[..c.len().min(10)]),
            (n, None) => format!(" line {n}"),
        };
        format!("`{}`{at}: {}", self.file, self.what)
    }

    /// Whether it is the same place as `other` (for a push, in whichever commit).
    fn same_place(&self, other: &Finding) -> bool {
        (&self.file, self.line, &self.what) == (&other.file, other.line, &other.what)
    }
}

/// The most findings one approval lists.
const LISTED: usize = 50;

/// Every place in `additions` that holds a secret `redactor` knows.
pub(crate) fn scan(redactor: &gaffer_agents::Redactor, additions: &[Addition]) -> Vec<Finding> {
    let mut out = Vec::new();
    for a in additions {
        let file = match &a.source {
            Source::File(path) => {
                if let Some(what) = redactor.detect(path) {
                    out.push(Finding {
                        file: redactor.redact(path),
                        line: 0,
                        what: what.into(),
                        commit: a.commit.clone(),
                    });
                }
                redactor.redact(path)
            }
            Source::Message => "commit message".to_owned(),
        };
        for (line, text) in &a.lines {
            if let Some(what) = redactor.detect(text) {
                out.push(Finding {
                    file: file.clone(),
                    line: *line,
                    what: what.into(),
                    commit: a.commit.clone(),
                });
            }
        }
    }
    out
}

/// The findings an approval of this scan lists (from its details).
fn findings_of(details: &Value) -> Option<Vec<Finding>> {
    serde_json::from_value(details.get("secret_findings")?.clone()).ok()
}

impl Engine {
    /// Scan what `additions` reads (again after each answer) and ask a person about
    /// anything found that no approved scan of this task let through already.
    /// `action` is what is about to happen (`commit`, `push`) and `done` its
    /// participle. `Ok`: go on; a denial fails the step saying what was found and
    /// that nothing left.
    pub(crate) async fn clear_secrets(
        &self,
        task: &TaskState,
        step: &Step,
        (action, done): (&str, &str),
        additions: impl Fn() -> gaffer_forge::Result<Vec<Addition>>,
    ) -> Result<(), Failure> {
        let mut let_through: Vec<Finding> = task
            .approvals
            .values()
            .filter(|a| a.kind == ApprovalKind::Manual && a.state == ApprovalState::Approved)
            .filter_map(|a| findings_of(&a.details))
            .flatten()
            .collect();
        let mut attempt = 0;
        loop {
            let found: Vec<Finding> = scan(&self.settings.redactor, &additions()?)
                .into_iter()
                .filter(|f| !let_through.iter().any(|l| l.same_place(f)))
                .collect();
            if found.is_empty() {
                return Ok(());
            }
            let listed: Vec<String> = found.iter().take(LISTED).map(Finding::place).collect();
            let more = found.len().saturating_sub(LISTED);
            let places = if more > 0 {
                format!("{}; and {more} more", listed.join("; "))
            } else {
                listed.join("; ")
            };
            let summary = format!(
                "Not {done}: the change holds what looks like a secret — {places}. Approve only if none of these is a secret (then it is {done}); deny to stop: nothing is {done}, and the worktree keeps the change so you can remove them and retry."
            );
            let details = json!({
                "step": step.id,
                "action": action,
                "secret_findings": found.iter().take(LISTED).collect::<Vec<_>>(),
                "more": more,
            });
            attempt += 1;
            let resolution = self
                .ask(
                    task,
                    step,
                    attempt,
                    ApprovalKind::Manual,
                    summary,
                    details,
                    Subject::default(),
                )
                .await?;
            if !resolution.approved() {
                return Err(fail(format!(
                    "the change holds what looks like a secret ({places}); nothing was {done} ({}). Remove it from the worktree, then retry the task",
                    resolution.reason()
                )));
            }
            // What the answer listed is let through (an answer recorded before a
            // crash may list other findings: what it does not list is asked again).
            let_through.extend(findings_of(&resolution.approval.details).unwrap_or_default());
        }
    }
}
