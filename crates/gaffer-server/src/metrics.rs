//! Prometheus metrics, rendered by hand in the text exposition format.

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use gaffer_store::WorkerRow;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use crate::tally::{Histogram, Tally};

const BUCKETS: [f64; 10] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0];

/// Seconds from an approval's request to its decision: a minute to a day.
const DECISION_BUCKETS: [f64; 8] = [
    10.0, 60.0, 300.0, 900.0, 3600.0, 14_400.0, 43_200.0, 86_400.0,
];

/// What the journal says about the work, read at each scrape (so every process
/// serving the same journal shows the same numbers).
#[derive(Debug, Default)]
pub struct Work {
    /// Approvals waiting for a decision.
    pub pending_approvals: usize,
    /// Tasks by stage name.
    pub tasks_by_stage: BTreeMap<String, u64>,
    /// Seconds from request to decision of every decided approval.
    pub decision_secs: Vec<f64>,
}

/// How long a worker that stopped or was lost stays in the per-worker series: long
/// enough for an alert on `gaffer_worker_up == 0` to fire, short enough that every
/// restart (a new worker id) does not add series forever.
const GONE_WORKERS_SHOWN_MS: i64 = 3_600_000;

/// Counters and gauges of one server.
#[derive(Default)]
pub struct Metrics {
    /// The commit of the build, for `gaffer_build_info`.
    commit: String,
    requests: Mutex<BTreeMap<(String, String, u16), u64>>,
    latency: Mutex<Histogram>,
    /// The work folded from the journal, caught up at each scrape.
    pub(crate) tally: tokio::sync::Mutex<Tally>,
    sse_clients: AtomicI64,
    decisions: AtomicU64,
}

impl Metrics {
    /// Metrics of a server built from `commit`.
    pub fn new(commit: &str) -> Self {
        Self {
            commit: commit.to_owned(),
            ..Self::default()
        }
    }

    pub(crate) fn sse_open(&self) {
        self.sse_clients.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn sse_close(&self) {
        self.sse_clients.fetch_sub(1, Ordering::Relaxed);
    }

    pub(crate) fn decided(&self) {
        self.decisions.fetch_add(1, Ordering::Relaxed);
    }

    fn observe(&self, method: &str, route: &str, status: u16, secs: f64) {
        if let Ok(mut r) = self.requests.lock() {
            *r.entry((method.to_owned(), route.to_owned(), status))
                .or_default() += 1;
        }
        if let Ok(mut l) = self.latency.lock() {
            l.observe(&BUCKETS, secs);
        }
    }

    /// The exposition text. `workers` are every registered worker (`now_ms` on the
    /// database's clock): every worker process sharing the journal, on any machine.
    pub fn render(&self, work: &Work, tally: &Tally, workers: &[WorkerRow], now_ms: i64) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        let _ = writeln!(out, "# HELP gaffer_build_info The gaffer version and commit serving these metrics (always 1).\n# TYPE gaffer_build_info gauge\ngaffer_build_info{{version=\"{}\",commit=\"{}\"}} 1", env!("CARGO_PKG_VERSION"), label(&self.commit));
        out.push_str(
            "# HELP gaffer_tasks Tasks in the journal by stage.\n# TYPE gaffer_tasks gauge\n",
        );
        for stage in gaffer_core::Stage::ALL {
            let n = work
                .tasks_by_stage
                .get(stage.as_str())
                .copied()
                .unwrap_or(0);
            let _ = writeln!(out, "gaffer_tasks{{stage=\"{stage}\"}} {n}");
        }
        let mut decided = Histogram::default();
        for secs in &work.decision_secs {
            decided.observe(&DECISION_BUCKETS, *secs);
        }
        let _ = writeln!(out, "# HELP gaffer_approval_decision_seconds Time from an approval's request to its decision, over every decided approval in the journal.\n# TYPE gaffer_approval_decision_seconds histogram");
        decided.render(
            &mut out,
            "gaffer_approval_decision_seconds",
            "",
            &DECISION_BUCKETS,
        );
        tally.render(&mut out);
        let pending_approvals = work.pending_approvals;
        out.push_str("# HELP gaffer_http_requests_total HTTP requests by method, route and status.\n# TYPE gaffer_http_requests_total counter\n");
        if let Ok(r) = self.requests.lock() {
            for ((m, route, status), n) in r.iter() {
                let _ = writeln!(out, "gaffer_http_requests_total{{method=\"{m}\",route=\"{route}\",status=\"{status}\"}} {n}");
            }
        }
        if let Ok(l) = self.latency.lock() {
            let _ = writeln!(out, "# HELP gaffer_http_request_duration_seconds Time to the response head (SSE: to the stream's start).\n# TYPE gaffer_http_request_duration_seconds histogram");
            l.render(
                &mut out,
                "gaffer_http_request_duration_seconds",
                "",
                &BUCKETS,
            );
        }
        let _ = writeln!(out, "# HELP gaffer_sse_clients Open SSE streams.\n# TYPE gaffer_sse_clients gauge\ngaffer_sse_clients {}", self.sse_clients.load(Ordering::Relaxed));
        let _ = writeln!(out, "# HELP gaffer_approvals_pending Approvals waiting for a decision.\n# TYPE gaffer_approvals_pending gauge\ngaffer_approvals_pending {pending_approvals}");
        let _ = writeln!(out, "# HELP gaffer_approval_decisions_total Decisions recorded through the API.\n# TYPE gaffer_approval_decisions_total counter\ngaffer_approval_decisions_total {}", self.decisions.load(Ordering::Relaxed));
        render_workers(&mut out, workers, now_ms);
        out
    }
}

/// Per-worker series, labelled by worker id and host: live workers, and those that
/// stopped or were lost within [`GONE_WORKERS_SHOWN_MS`].
fn render_workers(out: &mut String, workers: &[WorkerRow], now_ms: i64) {
    use std::fmt::Write;
    let shown: Vec<&WorkerRow> = workers
        .iter()
        .filter(|w| {
            w.alive || now_ms - w.stopped_at.unwrap_or(w.heartbeat_at) <= GONE_WORKERS_SHOWN_MS
        })
        .collect();
    let alive = workers.iter().filter(|w| w.alive).count();
    let _ = writeln!(out, "# HELP gaffer_workers_alive Worker processes heartbeating on this journal, on every machine.\n# TYPE gaffer_workers_alive gauge\ngaffer_workers_alive {alive}");
    type Series = (
        &'static str,
        &'static str,
        &'static str,
        fn(&WorkerRow) -> String,
    );
    let series: [Series; 5] = [
        (
            "gaffer_worker_up",
            "gauge",
            "1 while the worker heartbeats, 0 once it stopped or was lost.",
            |w| u8::from(w.alive).to_string(),
        ),
        (
            "gaffer_worker_leases",
            "gauge",
            "Tasks the worker holds a lease on now.",
            |w| w.leases.len().to_string(),
        ),
        (
            "gaffer_worker_tasks_run_total",
            "counter",
            "Tasks the worker ran to an end (or lost).",
            |w| w.tasks_run.to_string(),
        ),
        (
            "gaffer_worker_failures_total",
            "counter",
            "Of those, tasks that ended failed or blocked, or stopped on an error.",
            |w| w.failures.to_string(),
        ),
        (
            "gaffer_worker_last_heartbeat_seconds",
            "gauge",
            "Unix time of the worker's last heartbeat.",
            |w| format!("{:.3}", w.heartbeat_at as f64 / 1e3),
        ),
    ];
    for (name, kind, help, value) in series {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for w in &shown {
            let _ = writeln!(
                out,
                "{name}{{worker=\"{}\",host=\"{}\"}} {}",
                label(&w.id),
                label(&w.host),
                value(w)
            );
        }
    }
}

/// A label value escaped as the exposition format requires.
pub(crate) fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Count and time every request by its route pattern.
pub async fn middleware(State(s): State<crate::ServerState>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| "unmatched".into());
    let method = req.method().to_string();
    let started = Instant::now();
    let res = next.run(req).await;
    s.metrics.observe(
        &method,
        &route,
        res.status().as_u16(),
        started.elapsed().as_secs_f64(),
    );
    res
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn worker(id: &str, alive: bool, heartbeat_at: i64, stopped_at: Option<i64>) -> WorkerRow {
        WorkerRow {
            id: id.into(),
            host: "h".into(),
            pid: 1,
            lease_ms: 30_000,
            started_at: 0,
            heartbeat_at,
            stopped_at,
            tasks_run: 0,
            failures: 0,
            alive,
            leases: Vec::new(),
        }
    }

    /// A worker process that is gone keeps its series (at `up 0`) for an hour, then
    /// they are removed: restarts do not pile up series forever.
    #[test]
    fn a_gone_workers_series_are_removed_after_an_hour() {
        let now = 10 * GONE_WORKERS_SHOWN_MS;
        let workers = [
            worker("live", true, now, None),
            worker("stopped-recently", false, now - 60_000, Some(now - 60_000)),
            worker(
                "stopped-long-ago",
                false,
                0,
                Some(now - GONE_WORKERS_SHOWN_MS - 1),
            ),
            worker(
                "lost-long-ago",
                false,
                now - GONE_WORKERS_SHOWN_MS - 1,
                None,
            ),
        ];
        let mut out = String::new();
        render_workers(&mut out, &workers, now);
        let leases: Vec<&str> = out
            .lines()
            .filter(|l| l.starts_with("gaffer_worker_leases{"))
            .collect();
        assert_eq!(
            leases,
            [
                "gaffer_worker_leases{worker=\"live\",host=\"h\"} 0",
                "gaffer_worker_leases{worker=\"stopped-recently\",host=\"h\"} 0"
            ]
        );
        assert!(out.contains("gaffer_worker_up{worker=\"stopped-recently\",host=\"h\"} 0"));
        assert!(!out.contains("long-ago"), "{out}");
        assert!(out.contains("\ngaffer_workers_alive 1\n"), "{out}");
    }
}
