//! What an operator of many workers (on many machines, one journal) sees: the task
//! names the worker that runs it, and `/metrics` has series per worker.

use super::support::*;
use gaffer_store::{LeaseEnd, WorkerInfo};
use pretty_assertions::assert_eq;
use serde_json::Value;

fn worker(id: &str, host: &str, pid: i64) -> WorkerInfo {
    WorkerInfo {
        id: id.into(),
        host: host.into(),
        pid,
        lease_ms: 600_000,
    }
}

impl Harness {
    async fn get_json(&self, path: &str) -> Value {
        let r = self.http.get(self.url(path)).send().await.unwrap();
        assert_eq!(r.status(), 200, "GET {path}");
        r.json().await.unwrap()
    }

    async fn metrics_text(&self) -> String {
        self.http
            .get(self.url("/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }
}

#[tokio::test]
async fn a_task_names_the_worker_that_runs_it_and_metrics_count_per_worker() {
    let h = start(false).await;
    h.project("alpha").await;
    let first = h.task("alpha").await;
    let second = h.task("alpha").await;
    let third = h.task("alpha").await;
    let j = h.app.journal();
    assert_eq!(
        h.get_json(&format!("/api/tasks/{first}")).await["worker"],
        Value::Null,
        "no worker has claimed it yet"
    );

    let a = worker("node-a/11/x", "node-a", 11);
    // A quote in a label value must be escaped, or the whole scrape is unreadable.
    let b = worker("node-b/22/\"y\"", "node-b", 22);
    j.register_worker(&a).await.unwrap();
    j.register_worker(&b).await.unwrap();
    let claim = |w: &WorkerInfo, task: &str| {
        let (w, task) = (w.clone(), task.to_owned());
        async move { j.claim_task(&w, &[], Some(&task)).await.unwrap().unwrap() }
    };

    let a_first = claim(&a, &first).await;
    let running = h.get_json(&format!("/api/tasks/{first}")).await["worker"].clone();
    assert_eq!(
        (
            &running["id"],
            &running["host"],
            &running["pid"],
            &running["generation"],
            &running["state"]
        ),
        (
            &Value::from("node-a/11/x"),
            &Value::from("node-a"),
            &Value::from(11),
            &Value::from(1),
            &Value::from("held")
        )
    );
    assert!(running["expires_at"].as_i64().unwrap() > running["acquired_at"].as_i64().unwrap());

    j.release_lease(&a_first, LeaseEnd::Finished).await.unwrap();
    let released = h.get_json(&format!("/api/tasks/{first}")).await["worker"].clone();
    assert_eq!(
        (&released["id"], &released["state"]),
        (&Value::from("node-a/11/x"), &Value::from("released"))
    );
    claim(&a, &third).await;
    let b_second = claim(&b, &second).await;
    assert_eq!(
        h.get_json(&format!("/api/tasks/{second}")).await["worker"]["id"],
        "node-b/22/\"y\""
    );
    j.release_lease(&b_second, LeaseEnd::Failed).await.unwrap();
    j.stop_worker(&b.id).await.unwrap();

    let metrics = h.metrics_text().await;
    let line = |name: &str, w: &WorkerInfo| {
        let id = w.id.replace('"', "\\\"");
        let prefix = format!("{name}{{worker=\"{id}\",host=\"{}\"}} ", w.host);
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .unwrap_or_else(|| panic!("no `{prefix}` in\n{metrics}"))
            .to_owned()
    };
    assert!(metrics.contains("\ngaffer_workers_alive 1\n"), "{metrics}");
    assert_eq!(
        [
            "gaffer_worker_up",
            "gaffer_worker_leases",
            "gaffer_worker_tasks_run_total",
            "gaffer_worker_failures_total"
        ]
        .map(|n| (line(n, &a), line(n, &b))),
        [
            ("1".into(), "0".into()),
            ("1".into(), "0".into()),
            ("1".into(), "1".into()),
            ("0".into(), "1".into())
        ]
    );
    let heartbeat: f64 = line("gaffer_worker_last_heartbeat_seconds", &a)
        .parse()
        .unwrap();
    assert!(
        (heartbeat - gaffer_store::now_ms() as f64 / 1e3).abs() < 600.0,
        "{heartbeat}"
    );
    assert!(
        metrics.contains("# TYPE gaffer_worker_tasks_run_total counter"),
        "{metrics}"
    );
}
