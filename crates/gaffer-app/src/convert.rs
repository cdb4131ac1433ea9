//! Projection rows → wire types.

use gaffer_core::Spend;
use gaffer_protocol::api;
use gaffer_store::{ApprovalRow, ProjectRow, SessionRow, StepRow, TaskLease, TaskRow};

fn parse(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or(serde_json::Value::String(text.to_owned()))
}

pub(crate) fn project(r: &ProjectRow) -> api::Project {
    api::Project {
        id: r.id.clone(),
        name: r.name.clone(),
        path: r.path.clone(),
        check_command: r.check_command.clone(),
        auto_approve: r.auto_approve,
        created_at: r.created_at,
        updated_at: r.updated_at,
    }
}

pub(crate) fn approval(r: &ApprovalRow) -> api::Approval {
    let details = parse(&r.details);
    let expires_at = details
        .pointer("/policy/expires_at")
        .and_then(serde_json::Value::as_i64);
    api::Approval {
        id: r.id.clone(),
        task_id: r.task_id.clone(),
        project_id: r.project_id.clone(),
        project: String::new(),
        step_id: r.step_id.clone(),
        attempt: r.attempt,
        kind: r.kind.clone(),
        state: r.state.clone(),
        summary: r.summary.clone(),
        details,
        decided_by: r
            .decided_by
            .as_deref()
            .and_then(|a| serde_json::from_str::<gaffer_core::Actor>(a).ok())
            .map(|a| actor(&a)),
        note: r.note.clone(),
        requested_at: r.requested_at,
        decided_at: r.decided_at,
        expires_at,
        for_task: r.for_task,
    }
}

/// What a step's agent turns spent (the one definition: [`Spend`]).
pub(crate) fn step_spend(r: &StepRow) -> Spend {
    r.receipt
        .as_deref()
        .map(|text| Spend::of_receipt(&parse(text)))
        .unwrap_or_default()
}

pub(crate) fn step(r: &StepRow) -> api::Step {
    let spend = step_spend(r);
    api::Step {
        id: r.step_id.clone(),
        name: r.name.clone(),
        intent: r.intent.clone(),
        state: r.state.clone(),
        attempt: r.attempt,
        receipt: r.receipt.as_deref().map(parse),
        error: r.error.clone(),
        tokens: spend.tokens(),
        cost_usd: spend.cost_usd(),
        context: r
            .context
            .as_deref()
            .and_then(|c| serde_json::from_str(c).ok()),
        updated_at: r.updated_at,
    }
}

pub(crate) fn session(r: &SessionRow) -> api::Session {
    api::Session {
        id: r.id.clone(),
        task_id: r.task_id.clone(),
        agent: r.agent.clone(),
        role: r.role.clone(),
        verified: r.verified,
        ended: r.ended.clone(),
        started_at: r.started_at,
    }
}

pub(crate) fn worker(l: &TaskLease) -> api::TaskWorker {
    api::TaskWorker {
        id: l.lease.worker_id.clone(),
        host: l.host.clone(),
        pid: l.pid,
        generation: l.lease.generation,
        state: l.state.as_str().to_owned(),
        acquired_at: l.lease.acquired_at,
        expires_at: l.lease.expires_at,
    }
}

/// The task's options (defaults if the column does not parse).
pub(crate) fn options(r: &TaskRow) -> gaffer_core::TaskOptions {
    serde_json::from_str(&r.options).unwrap_or_default()
}

/// The task's wire form; `after`: the tasks it runs after, with their stages now.
pub(crate) fn task(
    r: &TaskRow,
    project_name: &str,
    steps: &[StepRow],
    after: Vec<api::TaskDependency>,
) -> api::Task {
    let spend: Spend = steps.iter().map(step_spend).sum();
    let created_by = serde_json::from_str::<gaffer_core::Actor>(&r.created_by)
        .map(|a| format!("{} via {}", a.name, a.via))
        .unwrap_or_else(|_| r.created_by.clone());
    let options = options(r);
    api::Task {
        id: r.id.clone(),
        after,
        agent: options.agent,
        key: r.origin_key.clone(),
        project_id: r.project_id.clone(),
        project: project_name.to_owned(),
        request: r.request.clone(),
        stage: r.stage.clone(),
        created_by,
        outcome: r.outcome.as_deref().map(parse),
        tokens: spend.tokens(),
        cost_usd: spend.cost_usd(),
        created_at: r.created_at,
        updated_at: r.updated_at,
    }
}

/// What each role spent: every step's spend goes to the role of the session that
/// ran it (the arbiter's, not its panel members'), roles in the order they first ran.
pub(crate) fn role_spend(steps: &[StepRow], sessions: &[SessionRow]) -> Vec<api::RoleSpend> {
    let mut roles: Vec<(String, Spend)> = Vec::new();
    for s in steps {
        let spend = step_spend(s);
        if spend == Spend::default() {
            continue;
        }
        // The arbiter's panel members run in its step: what they spent is the arbiter's.
        let role = sessions
            .iter()
            .filter(|x| x.step_id.as_deref() == Some(s.step_id.as_str()))
            .find(|x| x.role != gaffer_core::Role::Panelist.as_str())
            .map_or("other", |x| x.role.as_str());
        match roles.iter_mut().find(|(r, _)| r == role) {
            Some((_, sum)) => *sum += spend,
            None => roles.push((role.to_owned(), spend)),
        }
    }
    roles
        .into_iter()
        .map(|(role, s)| api::RoleSpend {
            role,
            input_tokens: s.input_tokens,
            output_tokens: s.output_tokens,
            cached_input_tokens: s.cached_input_tokens,
            cost_usd: s.cost_usd(),
        })
        .collect()
}

/// Who did something, as the API shows it.
pub(crate) fn actor(a: &gaffer_core::Actor) -> api::DecidedBy {
    api::DecidedBy {
        kind: match a.kind {
            gaffer_core::ActorKind::User => "user",
            gaffer_core::ActorKind::Policy => "policy",
            gaffer_core::ActorKind::System => "system",
        }
        .into(),
        name: a.name.clone(),
        via: a.via.clone(),
    }
}

/// A person's message to a task's agent, as the API shows it.
pub(crate) fn message(task_id: &str, m: &gaffer_core::Message) -> api::Message {
    api::Message {
        id: m.id.clone(),
        task_id: task_id.to_owned(),
        text: m.text.clone(),
        by: actor(&m.by),
        sent_at: m.sent_at,
        delivery: m
            .delivered
            .as_ref()
            .map_or("pending", |d| d.delivery.as_str())
            .into(),
        delivered_at: m.delivered.as_ref().map(|d| d.at),
        masked: m.delivered.as_ref().map(|d| d.masked),
    }
}
