//! A task that runs after others, as text: what a waiting task still waits for and
//! what starts it, and which task blocked a blocked one and how to get it to run.

use gaffer_core::Stage;
use gaffer_protocol::api;
use std::collections::HashMap;

/// The task that blocked `task` (`outcome.dependency` of a `task_dependency_failed`).
fn blocker(task: &api::Task) -> Option<&str> {
    if task.stage != Stage::Blocked.as_str() {
        return None;
    }
    task.outcome.as_ref()?.get("dependency")?.as_str()
}

/// The STAGE cell of `gaffer task list`: a waiting task names what it still waits
/// for, a blocked one the task that blocked it (`short` ids where known).
pub fn stage_cell(task: &api::Task, short: &HashMap<String, String>) -> String {
    let name = |id: &str| short.get(id).map_or(id, String::as_str).to_owned();
    if task.stage == Stage::Waiting.as_str() {
        let open: Vec<String> = task
            .after
            .iter()
            .filter(|d| d.stage != Stage::Done.as_str())
            .map(|d| name(&d.id))
            .collect();
        return format!("waiting for {}", open.join(", "));
    }
    match blocker(task) {
        Some(dep) => format!("blocked by {}", name(dep)),
        None => task.stage.clone(),
    }
}

/// `gaffer task show`'s lines for the tasks it runs after, with their stages; while
/// it waits, which it still waits for and what starts it; once a dependency blocked
/// it, how to run it anyway.
pub fn lines(task: &api::Task) -> Vec<String> {
    if task.after.is_empty() {
        return Vec::new();
    }
    let listed = |deps: &mut dyn Iterator<Item = &api::TaskDependency>| {
        deps.map(|d| format!("{} ({})", d.id, d.stage))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut out = vec![format!("after    {}", listed(&mut task.after.iter()))];
    let id = &task.id;
    if task.stage == Stage::Waiting.as_str() {
        let mut open = task
            .after
            .iter()
            .filter(|d| d.stage != Stage::Done.as_str());
        out.push(format!(
            "waits    for {}; it starts when they are done,",
            listed(&mut open)
        ));
        out.push("         in a running `gaffer serve` or `gaffer worker`".into());
        out.push(format!("         or here: `gaffer task resume {id}`"));
        out.push(format!("         `gaffer task cancel {id}` stops the wait"));
    }
    if let Some(dep) = blocker(task) {
        let stage = task
            .after
            .iter()
            .find(|d| d.id == dep)
            .map_or("ended", |d| d.stage.as_str());
        out.push(format!("blocked  by {dep} ({stage})"));
        out.push(format!(
            "next     1. `gaffer task retry {dep}` runs that task again"
        ));
        out.push(format!(
            "         2. once it is done, `gaffer task retry {id}` runs this one"
        ));
        out.push("            (a retry does not wait for the task that blocked it)".into());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn task(stage: &str, after: &[(&str, &str)], outcome: Option<serde_json::Value>) -> api::Task {
        let after: Vec<_> = after
            .iter()
            .map(|(id, stage)| json!({ "id": id, "stage": stage }))
            .collect();
        serde_json::from_value(json!({
            "id": "t-b", "project_id": "p", "project": "demo", "request": "r",
            "stage": stage, "after": after, "created_by": "ana via cli", "agent": null,
            "key": null, "outcome": outcome, "tokens": 0, "cost_usd": 0.0,
            "created_at": 0, "updated_at": 0
        }))
        .unwrap()
    }

    #[test]
    fn a_blocked_task_names_its_blocker_and_the_two_retries_that_run_it() {
        let t = task(
            "blocked",
            &[("t-a", "failed"), ("t-c", "done")],
            Some(
                json!({ "reason": "task t-a, which this task runs after, failed: x", "dependency": "t-a", "dependency_stage": "failed" }),
            ),
        );
        let short = HashMap::from([("t-a".to_owned(), "t-a1".to_owned())]);
        assert_eq!(stage_cell(&t, &short), "blocked by t-a1");
        let text = lines(&t).join("\n");
        assert!(text.contains("blocked  by t-a (failed)"), "{text}");
        assert!(text.contains("`gaffer task retry t-a`"), "{text}");
        assert!(
            text.contains("`gaffer task retry t-b` runs this one"),
            "{text}"
        );
        assert!(!text.contains("waits"), "{text}");
    }

    #[test]
    fn a_waiting_task_names_only_what_is_not_done_and_what_starts_it() {
        let t = task("waiting", &[("t-a", "coding"), ("t-c", "done")], None);
        assert_eq!(stage_cell(&t, &HashMap::new()), "waiting for t-a");
        let text = lines(&t).join("\n");
        assert!(
            text.contains("waits    for t-a (coding); it starts"),
            "{text}"
        );
        assert!(text.contains("`gaffer task resume t-b`"), "{text}");
        assert!(!text.contains("retry"), "{text}");
    }

    #[test]
    fn a_task_blocked_otherwise_or_failed_gets_no_dependency_hint() {
        let failed = task(
            "failed",
            &[("t-a", "done")],
            Some(json!({ "reason": "x", "dependency": "t-a" })),
        );
        assert_eq!(stage_cell(&failed, &HashMap::new()), "failed");
        assert_eq!(lines(&failed), vec!["after    t-a (done)".to_owned()]);
        let blocked = task(
            "blocked",
            &[("t-a", "done")],
            Some(json!({ "reason": "a person must look" })),
        );
        assert_eq!(stage_cell(&blocked, &HashMap::new()), "blocked");
    }
}
