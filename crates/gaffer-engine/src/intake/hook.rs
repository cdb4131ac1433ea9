//! `POST /api/hooks/{forge}`: a delivery is verified against the secret of every
//! project whose forge speaks that protocol, before its body is read; it may then
//! act only on the projects whose secret verified it and whose repository it names.
//! A delivery signed with project A's secret cannot make a task in project B.

use super::Watched;
use crate::Engine;
use gaffer_app::{HookError, HookReceiver};
use gaffer_forge::hooks::{self, HookEvent, HookSender};
use gaffer_protocol::api::HookAnswer;

fn ignored(reason: impl Into<String>) -> HookAnswer {
    HookAnswer {
        outcome: "ignored".into(),
        tasks: Vec::new(),
        reason: Some(reason.into()),
    }
}

fn same_repo(w: &Watched<'_>, owner: &str, repo: &str) -> bool {
    w.repo()
        .is_ok_and(|(o, r)| o.eq_ignore_ascii_case(owner) && r.eq_ignore_ascii_case(repo))
}

#[async_trait::async_trait]
impl HookReceiver for Engine {
    async fn receive_hook(
        &self,
        forge: &str,
        headers: &[(String, String)],
        body: &[u8],
    ) -> Result<HookAnswer, HookError> {
        let sender: HookSender = forge
            .parse()
            .map_err(|e: gaffer_forge::ApiError| HookError::UnknownForge(e.to_string()))?;
        let header = |name: &str| {
            headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        };
        let watched: Vec<Watched<'_>> = self
            .watched()
            .await?
            .into_iter()
            .filter(|w| {
                sender.serves(w.ship.kind)
                    && w.intake.secret.as_ref().is_some_and(|secret| {
                        hooks::verify(sender, &header, body, secret.expose().as_bytes())
                    })
            })
            .collect();
        if watched.is_empty() {
            return Err(HookError::BadSignature);
        }
        let event =
            hooks::parse(sender, &header, body).map_err(|e| HookError::BadBody(e.to_string()))?;
        match event {
            HookEvent::Issue { action, issue } => {
                let mut tasks = Vec::new();
                let mut watching = false;
                for w in watched
                    .iter()
                    .filter(|w| same_repo(w, &issue.owner, &issue.repo))
                {
                    watching = true;
                    if let Some(t) = self.take_issue(w, &issue, "webhook").await? {
                        tasks.push(t);
                    }
                }
                Ok(match (watching, tasks.is_empty()) {
                    (false, _) => ignored(format!(
                        "no project whose secret signed this delivery watches {}/{}",
                        issue.owner, issue.repo
                    )),
                    (true, true) => ignored(format!(
                        "issue #{} ({action}) is closed, or has neither the intake label nor the bot as assignee",
                        issue.number
                    )),
                    (true, false) => HookAnswer {
                        outcome: "taken".into(),
                        tasks,
                        reason: None,
                    },
                })
            }
            HookEvent::PullRequestComment {
                owner,
                repo,
                number,
            } => {
                if !watched
                    .iter()
                    .any(|w| same_repo(w, &owner, &repo) && w.ship.follow.is_some())
                {
                    return Ok(ignored(format!(
                        "a comment on pull request {owner}/{repo}#{number}: no project whose secret signed this delivery follows {owner}/{repo}'s pull requests"
                    )));
                }
                // Only when to look: the follower reads the comments from the forge
                // itself, never from the delivery.
                self.wake_follower();
                Ok(HookAnswer {
                    outcome: "woken".into(),
                    tasks: Vec::new(),
                    reason: None,
                })
            }
            HookEvent::Other(what) => {
                Ok(ignored(format!("`{what}` is not an event gaffer acts on")))
            }
        }
    }
}
