//! The doctor's look at work that arrives by itself: each project's issue intake
//! (`[projects.<name>.intake]`) and each `[[schedules]]` entry's next slot.

use super::{Check, Status};
use crate::commands::intake::MIN_SECRET_LEN;
use crate::output;

/// Each project with a forge: whether its issues become tasks, by which label or
/// assignee, through a webhook (is its secret there?) or polling. The secret's
/// value is never shown, only whether it is set and long enough.
pub(super) fn intake_checks(config: &gaffer_config::Config) -> Vec<Check> {
    let mut checks = Vec::new();
    for (project, forge) in &config.forges {
        let name = format!("intake {project}");
        let Some(i) = config.intake.get(project) else {
            checks.push(Check {
                name,
                status: Status::Ok,
                detail: "not configured: issues become tasks only when asked (`gaffer run --issue`)".into(),
                hint: Some(format!("add [projects.{project}.intake] (see `gaffer init`) to make labelled issues tasks by themselves")),
            });
            continue;
        };
        let mut what = format!("issues labelled \"{}\"", i.label);
        if let Some(a) = &i.assignee {
            what.push_str(&format!(" or assigned to {a}"));
        }
        let polling = match i.poll_interval {
            Some(every) => format!("polled every {}", output::span(every.as_secs() as i64)),
            None => "not polled".into(),
        };
        let hook = format!(
            "POST /api/hooks/{} on `gaffer serve`",
            hook_kind(&forge.kind)
        );
        let field = format!("projects.{project}.intake.secret_env");
        let check = match &i.secret_env {
            None => Check {
                name,
                status: Status::Ok,
                detail: format!("{what}; {polling}; no webhook"),
                hint: Some(format!("for issues as they are filed, set {field} and add a webhook to {hook} with that secret")),
            },
            Some(var) => {
                let secret = std::env::var(var).unwrap_or_default();
                let secret = secret.trim();
                if secret.is_empty() {
                    Check {
                        name,
                        status: Status::Fail,
                        detail: format!("{what}; {polling}; webhook secret: {var} is not set"),
                        hint: Some(format!("`gaffer serve` will not start: put the secret you gave the forge's webhook in {var} (`openssl rand -hex 32`), or remove {field}")),
                    }
                } else if secret.len() < MIN_SECRET_LEN {
                    Check {
                        name,
                        status: Status::Fail,
                        detail: format!("{what}; {polling}; webhook secret in {var} is shorter than {MIN_SECRET_LEN} characters"),
                        hint: Some(format!("`gaffer serve` will not start: use a long random secret (`openssl rand -hex 32`) in {var} and in the forge's webhook")),
                    }
                } else {
                    Check {
                        name,
                        status: Status::Ok,
                        detail: format!("{what}; {polling}; webhook at {hook}, secret in {var}"),
                        hint: None,
                    }
                }
            }
        };
        checks.push(check);
    }
    checks
}

/// The `{forge}` of the webhook route for a forge kind.
fn hook_kind(kind: &str) -> &str {
    match kind {
        "github" | "gitlab" => kind,
        _ => "gitea",
    }
}

/// Each schedule: its cron, project and next slot at `now_ms`. `registered`: the
/// names and ids of the journal's projects, `None` when there is no journal yet.
pub(super) fn schedule_checks(
    config: &gaffer_config::Config,
    registered: Option<&[(String, String)]>,
    now_ms: i64,
) -> Vec<Check> {
    config
        .schedules
        .iter()
        .map(|s| {
            let name = format!("schedule {}", s.name);
            let when = format!("\"{}\" ({}) in project {}", s.cron, s.tz, s.project);
            let known = registered.map(|r| r.iter().any(|(n, id)| *n == s.project || *id == s.project));
            let Some(next) = s.next_after(now_ms) else {
                return Check {
                    name,
                    status: Status::Warn,
                    detail: format!("{when}: the expression has no slot left, it never runs"),
                    hint: Some(format!("fix schedules.{}.cron, or remove the schedule", s.name)),
                };
            };
            let next = format!(
                "next {} (in {})",
                gaffer_config::slot_text(next),
                output::span((next - now_ms).max(0) / 1000)
            );
            match known {
                Some(false) => Check {
                    name,
                    status: Status::Fail,
                    detail: format!("{when}: {} is not a registered project; {next}", s.project),
                    hint: Some(format!("`gaffer serve` and `gaffer worker` will not start: register it (`gaffer project add PATH --name {}`) or fix schedules.{}.project", s.project, s.name)),
                },
                None => Check {
                    name,
                    status: Status::Warn,
                    detail: format!("{when}: no journal yet, so {} is not registered; {next}", s.project),
                    hint: Some(format!("register it with `gaffer project add PATH --name {}` before `gaffer serve`", s.project)),
                },
                Some(true) => Check {
                    name,
                    status: Status::Ok,
                    detail: format!("{when}; {next}"),
                    hint: None,
                },
            }
        })
        .collect()
}
