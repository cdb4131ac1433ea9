//! `/metrics` after real work: tasks by stage, the time approvals waited for a
//! decision, the build, in the Prometheus text format (checked by the format's
//! rules below, as `promtool check metrics` would: names, HELP and TYPE before
//! samples, counters named `_total`, cumulative histogram buckets ending in `+Inf`
//! equal to `_count`, no series twice).
use super::support::*;
use gaffer_core::ApprovalKind;
use pretty_assertions::assert_eq;
use serde_json::json;
use std::collections::{BTreeMap, HashMap, HashSet};

fn metric_name(s: &str) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_' || f == ':')
        && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == ':')
}

/// Checks `text` against the exposition format; every sample as
/// (name, labels, value).
fn parse_exposition(text: &str) -> Vec<(String, BTreeMap<String, String>, f64)> {
    let mut types: HashMap<String, String> = HashMap::new();
    let mut helped: HashSet<String> = HashSet::new();
    let mut seen_families: Vec<String> = Vec::new();
    let mut series = HashSet::new();
    let mut samples = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# ") {
            let mut parts = rest.splitn(3, ' ');
            let (kind, name, arg) = (parts.next().unwrap(), parts.next().unwrap(), parts.next());
            assert!(metric_name(name), "bad name in `{line}`");
            match kind {
                "HELP" => assert!(helped.insert(name.into()), "HELP twice: {name}"),
                "TYPE" => {
                    let t = arg.unwrap();
                    assert!(
                        ["counter", "gauge", "histogram", "summary", "untyped"].contains(&t),
                        "{line}"
                    );
                    assert!(
                        types.insert(name.into(), t.into()).is_none(),
                        "TYPE twice: {name}"
                    );
                    if t == "counter" {
                        assert!(
                            name.ends_with("_total"),
                            "counter {name} is not named _total"
                        );
                    }
                    assert!(
                        !seen_families.contains(&name.to_owned()),
                        "{name} is not contiguous"
                    );
                    seen_families.push(name.into());
                }
                _ => panic!("unknown comment `{line}`"),
            }
            continue;
        }
        assert!(!line.trim().is_empty(), "an empty line");
        let (series_text, value) = line.rsplit_once(' ').unwrap();
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            v => v
                .parse()
                .unwrap_or_else(|_| panic!("bad value in `{line}`")),
        };
        let (name, labels) = match series_text.split_once('{') {
            Some((n, l)) => (n, l.strip_suffix('}').unwrap_or_else(|| panic!("`{line}`"))),
            None => (series_text, ""),
        };
        assert!(metric_name(name), "bad name in `{line}`");
        let mut parsed = BTreeMap::new();
        let mut rest = labels;
        while !rest.is_empty() {
            let (k, after) = rest.split_once("=\"").unwrap_or_else(|| panic!("`{line}`"));
            assert!(
                metric_name(k) && !k.contains(':'),
                "bad label name in `{line}`"
            );
            let mut v = String::new();
            let mut chars = after.char_indices();
            let end = loop {
                let (i, ch) = chars
                    .next()
                    .unwrap_or_else(|| panic!("unterminated `{line}`"));
                match ch {
                    '\\' => v.push(chars.next().unwrap().1),
                    '"' => break i,
                    c => v.push(c),
                }
            };
            assert!(
                parsed.insert(k.to_owned(), v).is_none(),
                "label twice in `{line}`"
            );
            rest = after[end + 1..].trim_start_matches(',');
        }
        let family = types
            .keys()
            .filter(|f| {
                name == f.as_str()
                    || (types[*f] == "histogram"
                        && ["_bucket", "_sum", "_count"]
                            .iter()
                            .any(|s| name == format!("{f}{s}")))
            })
            .max_by_key(|f| f.len())
            .unwrap_or_else(|| panic!("no TYPE before `{line}`"));
        assert_eq!(
            seen_families.last(),
            Some(family),
            "`{line}` outside its family"
        );
        assert!(helped.contains(family), "no HELP for {family}");
        assert!(
            series.insert(series_text.to_owned()),
            "series twice: {series_text}"
        );
        samples.push((name.to_owned(), parsed, value));
    }
    // Histograms, per label set: cumulative buckets, +Inf last and equal to _count.
    for (family, t) in &types {
        if t != "histogram" {
            continue;
        }
        let mut series: BTreeMap<BTreeMap<String, String>, Vec<(f64, f64)>> = BTreeMap::new();
        for (_, l, v) in samples
            .iter()
            .filter(|(n, _, _)| *n == format!("{family}_bucket"))
        {
            let mut labels = l.clone();
            let le = labels
                .remove("le")
                .unwrap_or_else(|| panic!("{family}: a bucket without le"));
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().unwrap()
            };
            series.entry(labels).or_default().push((le, *v));
        }
        for (labels, buckets) in series {
            assert!(
                buckets
                    .windows(2)
                    .all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1),
                "{family} {labels:?}: {buckets:?}"
            );
            let count = samples
                .iter()
                .find(|(n, l, _)| *n == format!("{family}_count") && *l == labels)
                .unwrap_or_else(|| panic!("{family} {labels:?}: no _count"))
                .2;
            assert_eq!(
                buckets.last().map(|b| (b.0, b.1)),
                Some((f64::INFINITY, count)),
                "{family} {labels:?}"
            );
        }
    }
    samples
}

fn value(
    samples: &[(String, BTreeMap<String, String>, f64)],
    name: &str,
    label: Option<(&str, &str)>,
) -> f64 {
    samples
        .iter()
        .find(|(n, l, _)| {
            n == name && label.is_none_or(|(k, v)| l.get(k).map(String::as_str) == Some(v))
        })
        .unwrap_or_else(|| panic!("no {name} {label:?}"))
        .2
}

#[tokio::test]
async fn metrics_after_a_task_count_its_stage_and_the_time_its_approval_waited() {
    let h = start(false).await;
    h.project("demo").await;
    let task = h.task("demo").await;
    let asked = h
        .ask(&task, "s1", ApprovalKind::Tool, "cargo publish")
        .await;
    h.ask(&task, "s2", ApprovalKind::Tool, "rm -rf target")
        .await;
    let r = h
        .http
        .post(h.url(&format!("/api/approvals/{}/decision", asked.id)))
        .json(&json!({"decision": "approve"}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    let text = h
        .http
        .get(h.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let samples = parse_exposition(&text);
    assert_eq!(
        value(
            &samples,
            "gaffer_build_info",
            Some(("version", env!("CARGO_PKG_VERSION")))
        ),
        1.0
    );
    // Not built by the gaffer binary here: the commit is not known.
    assert_eq!(
        value(&samples, "gaffer_build_info", Some(("commit", "unknown"))),
        1.0
    );
    let stage = h.app.task(&task).await.unwrap().task.stage;
    assert_eq!(
        value(&samples, "gaffer_tasks", Some(("stage", &stage))),
        1.0,
        "{text}"
    );
    let tasks: f64 = samples
        .iter()
        .filter(|(n, _, _)| n == "gaffer_tasks")
        .map(|s| s.2)
        .sum();
    assert_eq!(tasks, 1.0);
    assert_eq!(value(&samples, "gaffer_approvals_pending", None), 1.0);
    assert_eq!(
        value(&samples, "gaffer_approval_decision_seconds_count", None),
        1.0
    );
    // Decided within seconds: in the first bucket.
    assert_eq!(
        value(
            &samples,
            "gaffer_approval_decision_seconds_bucket",
            Some(("le", "10"))
        ),
        1.0
    );
}

#[test]
fn the_format_checker_refuses_what_prometheus_refuses() {
    let good = "# HELP a_total A.\n# TYPE a_total counter\na_total{x=\"1\"} 2\n";
    assert_eq!(parse_exposition(good).len(), 1);
    for bad in [
        "a_total 1\n",                                                    // no TYPE
        "# HELP a A.\n# TYPE a counter\na 1\n",                           // counter not _total
        "# HELP a A.\n# TYPE a gauge\na 1\na 2\n",                        // series twice
        "# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n",
        "# HELP a A.\n# TYPE a gauge\na{x=1} 1\n",                         // unquoted label
    ] {
        assert!(std::panic::catch_unwind(|| parse_exposition(bad)).is_err(), "accepted:\n{bad}");
    }
}
