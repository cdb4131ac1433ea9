//! Issue intake: forge issues with the project's label, or assigned to its bot user,
//! become tasks by themselves — once each.
//!
//! Issues arrive two ways: webhook deliveries ([`hook`], `POST /api/hooks/{forge}`)
//! and, where no hook is configured or as a safety net, polling the forge's open
//! issues ([`poll`], in every process that runs workers). Both end in
//! [`Engine::take_issue`], which creates the task with the origin key
//! `intake:<forge host>/<owner>/<repo>#<n>` ([`origin_key`]): the store keeps keys
//! unique, so the same issue seen twice by a hook, by a poll, by two workers or after
//! a restart (labelled, unlabelled and labelled again) is one task. The task's
//! request is the issue's title and body; its `issue` is the issue's URL, so shipping
//! puts `Closes #n` in the pull request and comments the link on the issue.
//!
//! An issue's text is anyone's: the task is not auto-approved by intake (the
//! project's policy decides its plan and its pushes as for any request).

use crate::steps::ship::{forge_repo, issue_request, Shipping};
use crate::Engine;
use gaffer_app::{AppError, NewTask};
use gaffer_core::Actor;
use gaffer_forge::{Issue, Secret};
use gaffer_protocol::api::HookTask;
use gaffer_store::ProjectRow;
use std::path::Path;
use std::time::Duration;

pub(crate) mod hook;
pub(crate) mod poll;

/// One project's intake (its `[projects.<name>.intake]`).
#[derive(Clone, Debug)]
pub struct Intake {
    /// Issues carrying this label become tasks.
    pub label: String,
    /// Issues assigned to this user (the bot's login) become tasks too.
    pub assignee: Option<String>,
    /// The webhook secret (read from the environment at start); `None`: this
    /// project takes no webhooks.
    pub secret: Option<Secret>,
    /// How often the forge's open issues are listed; `None`: never.
    pub poll_interval: Option<Duration>,
}

impl Intake {
    /// Whether `issue` is one this intake takes: open, with the label or assigned
    /// to the bot (names compared as the forges do, without regard to case).
    pub fn wants(&self, issue: &Issue) -> bool {
        let open = matches!(issue.state.as_str(), "open" | "opened");
        let labelled = issue
            .labels
            .iter()
            .any(|l| l.eq_ignore_ascii_case(&self.label));
        let assigned = self
            .assignee
            .as_ref()
            .is_some_and(|a| issue.assignees.iter().any(|u| u.eq_ignore_ascii_case(a)));
        open && (labelled || assigned)
    }
}

/// The key that makes issue `number` of `owner/repo` on the forge at `base_url` one
/// task: `intake:<host>/<owner>/<repo>#<number>`, lower-cased (forges ignore case in
/// these names).
pub fn origin_key(base_url: &str, owner: &str, repo: &str, number: u64) -> String {
    let host = base_url
        .split_once("://")
        .map_or(base_url, |(_, rest)| rest)
        .split(['/', '?', '#'])
        .next()
        .unwrap_or_default()
        .rsplit('@')
        .next()
        .unwrap_or_default();
    format!("intake:{host}/{owner}/{repo}#{number}").to_ascii_lowercase()
}

/// A project with intake, as the engine sees it.
pub(crate) struct Watched<'a> {
    pub(crate) project: ProjectRow,
    pub(crate) intake: &'a Intake,
    pub(crate) ship: &'a Shipping,
}

impl Watched<'_> {
    /// The owner and repository its forge serves.
    pub(crate) fn repo(&self) -> Result<(String, String), String> {
        forge_repo(self.ship, &self.project.name, Path::new(&self.project.path))
    }
}

impl Engine {
    /// The registered projects with intake configured (and a forge to read it from).
    pub(crate) async fn watched(&self) -> Result<Vec<Watched<'_>>, AppError> {
        let projects = self.app().journal().projects().await?;
        Ok(projects
            .into_iter()
            .filter_map(|project| {
                let intake = self.settings.intake.get(&project.name)?;
                let ship = self.settings.shipping.get(&project.name)?;
                Some(Watched {
                    project,
                    intake,
                    ship,
                })
            })
            .collect())
    }

    /// Make `issue` of project `w` a task, once: `None` when the intake does not
    /// want it (closed, no label, not assigned). `via` says who saw it (`webhook`,
    /// `poll`), for the task's creator.
    pub(crate) async fn take_issue(
        &self,
        w: &Watched<'_>,
        issue: &Issue,
        via: &str,
    ) -> Result<Option<HookTask>, AppError> {
        if !w.intake.wants(issue) {
            return Ok(None);
        }
        let (owner, repo) = w.repo().map_err(|message| AppError::Conflict {
            code: "forge_config",
            message,
        })?;
        let key = origin_key(&w.ship.base_url, &owner, &repo, issue.number);
        let url = if issue.url.is_empty() {
            format!("{owner}/{repo}#{}", issue.number)
        } else {
            issue.url.clone()
        };
        let created = self
            .app()
            .create_task_once(
                NewTask {
                    project: w.project.id.clone(),
                    request: issue_request(issue),
                    issue: Some(url),
                    key: Some(key.clone()),
                    ..NewTask::default()
                },
                Actor::system(&format!("intake:{via}")),
            )
            .await?;
        if !created.existing {
            tracing::info!(project = %w.project.name, task = %created.task.id, %key, via, "an issue became a task");
        }
        Ok(Some(HookTask {
            task_id: created.task.id,
            project: w.project.name.clone(),
            created: !created.existing,
        }))
    }
}
