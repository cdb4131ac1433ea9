//! Polling: each watched project's open issues with the label or the assignee,
//! listed every `poll_interval`, in every process that runs workers. Two pollers (or
//! a poller and a webhook) seeing one issue make one task: the origin key.

use super::Watched;
use crate::Engine;
use gaffer_forge::IssueFilter;
use gaffer_protocol::api::HookTask;
use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How long the poller sleeps at most between looks (a project is polled when its
/// own interval has passed).
const TICK: Duration = Duration::from_secs(1);

impl Engine {
    /// Poll project `w` once: every open issue it wants becomes its task (once).
    async fn poll_project(&self, w: &Watched<'_>) -> Result<Vec<HookTask>, String> {
        let forge = self
            .forge_for(&w.project.name, Path::new(&w.project.path))
            .ok_or("no forge configured")??;
        let filter = IssueFilter {
            label: Some(w.intake.label.clone()),
            assignee: w.intake.assignee.clone(),
        };
        let issues = forge
            .open_issues(&filter)
            .await
            .map_err(|e| e.to_string())?;
        let mut taken = Vec::new();
        for issue in &issues {
            match self.take_issue(w, issue, "poll").await {
                Ok(Some(t)) => taken.push(t),
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(project = %w.project.name, issue = issue.number, "intake: {e}")
                }
            }
        }
        Ok(taken)
    }

    /// [`Engine::poll_project`], a failing forge logged (it is tried again at the
    /// project's next interval).
    async fn poll_logged(&self, w: &Watched<'_>) -> Vec<HookTask> {
        self.poll_project(w).await.unwrap_or_else(|e| {
            let e = self.settings.redactor.redact(&e);
            tracing::warn!(project = %w.project.name, "intake: listing the forge's issues: {e}");
            Vec::new()
        })
    }

    /// Poll every watched project with polling on, once; the tasks made or found.
    pub async fn poll_intake_once(&self) -> Vec<HookTask> {
        let mut all = Vec::new();
        let watched = match self.watched().await {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!("intake: reading the projects: {e}");
                return all;
            }
        };
        for w in watched.iter().filter(|w| w.intake.poll_interval.is_some()) {
            all.extend(self.poll_logged(w).await);
        }
        all
    }

    /// Poll the watched projects, each at its own interval, until `shutdown`.
    pub async fn poll_intake(&self, shutdown: CancellationToken) {
        let mut next: HashMap<String, Instant> = HashMap::new();
        loop {
            let now = Instant::now();
            if let Ok(watched) = self.watched().await {
                for w in &watched {
                    let Some(every) = w.intake.poll_interval else {
                        continue;
                    };
                    let due = next.entry(w.project.name.clone()).or_insert(now);
                    if *due > now {
                        continue;
                    }
                    *due = now + every;
                    self.poll_logged(w).await;
                }
            }
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(TICK) => {}
            }
        }
    }
}
