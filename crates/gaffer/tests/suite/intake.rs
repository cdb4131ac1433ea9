//! Issue intake through the real processes: webhook deliveries signed as Gitea and
//! GitHub sign them, sent over HTTP to `gaffer serve`; the same issue delivered
//! twice and then seen by a `gaffer worker`'s poller is one task, which ships with
//! its pull request linked back to the issue; a bad signature is 401 and stores
//! nothing; with no webhook secret, `gaffer worker` polls the forge instead.

use super::run::{json_of, success_json, Bench};
use super::serve::{finished_task, serve, serve_with_fake_agents, until};
use gaffer_testkit::forge::{BareRemote, FakeForge, Flavor, HookDelivery};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};

const TOKEN: &str = "forge-token-procs-7e21";
const SECRET: &str = "hook-secret-procs-4b9d0a";
const TITLE: &str = "Add an installation section to README";
const BODY: &str = "The README does not say how to install.";

fn route(flavor: Flavor) -> &'static str {
    match flavor {
        Flavor::Gitea => "gitea",
        Flavor::GitHub => "github",
    }
}

/// A bench whose project `demo` has a forge (`flavor`, the fake, a bare remote, CI
/// green) and issue intake with `intake` (TOML lines), registered with
/// auto-approval on.
async fn intake_bench(flavor: Flavor, intake: &str) -> (FakeForge, BareRemote, Bench) {
    let remote = BareRemote::new().unwrap();
    let fake = FakeForge::start(flavor, "acme", "demo", TOKEN)
        .await
        .unwrap();
    fake.attach_remote(&remote);
    fake.report_ci_for_every_commit("success");
    let b = Bench::new();
    b.home.write_config(&format!(
        "[worktrees]\nretention_days = 0\n\n[projects.demo.forge]\nkind = \"{}\"\nbase_url = \"{}\"\nowner = \"acme\"\nrepo = \"demo\"\nremote = \"{}\"\ntoken_env = \"DEMO_FORGE_TOKEN\"\n\n[projects.demo.intake]\n{intake}",
        route(flavor),
        fake.base_url(),
        remote.url()
    ));
    b.script_all();
    let add = b
        .gaffer_std()
        .args(["project", "add"])
        .arg(&b.repo)
        .args(["--name", "demo"])
        .output()
        .unwrap();
    assert!(
        add.status.success(),
        "{}",
        String::from_utf8_lossy(&add.stderr)
    );
    let auto = b
        .gaffer_std()
        .args(["auto", "on", "--project", "demo"])
        .output()
        .unwrap();
    assert!(
        auto.status.success(),
        "{}",
        String::from_utf8_lossy(&auto.stderr)
    );
    (fake, remote, b)
}

fn task_list(b: &Bench) -> Vec<Value> {
    let out = b
        .gaffer_std()
        .args(["task", "list", "--json"])
        .output()
        .unwrap();
    success_json(&out).as_array().cloned().unwrap_or_default()
}

/// A `gaffer worker` on the bench's data dir, killed when dropped; `env` added.
struct Worker(Child);

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn worker(b: &Bench, env: &[(&str, &str)]) -> Worker {
    let log = b.home.dir.path().join("worker.log");
    let mut child = b
        .gaffer_std()
        .args(["worker", "--count", "1"])
        .env("DEMO_FORGE_TOKEN", TOKEN)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    if !first.contains("is running") {
        let _ = child.wait();
        panic!(
            "the worker did not start: {first:?} {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }
    Worker(child)
}

/// How many times the forge was asked for the repository's open issues.
fn issue_listings(fake: &FakeForge) -> usize {
    fake.requests()
        .iter()
        .filter(|r| r.starts_with("GET ") && r.contains("/repos/acme/demo/issues?"))
        .count()
}

async fn post(
    http: &reqwest::Client,
    url: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> (u16, Value) {
    let mut req = http.post(url).body(body.to_vec());
    for (k, v) in headers {
        req = req.header(k, v);
    }
    let r = req.send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// The pull request closes the issue, and the issue got one comment linking it.
fn assert_linked_back(fake: &FakeForge, flavor: Flavor, issue: u64) {
    let prs = fake.prs();
    assert_eq!(prs.len(), 1, "{prs:#?}");
    assert!(
        prs[0].body.contains(&format!("Closes #{issue}")),
        "{}",
        prs[0].body
    );
    let links: Vec<_> = fake
        .comments()
        .into_iter()
        .filter(|c| c.issue == issue)
        .collect();
    assert_eq!(links.len(), 1, "{links:#?}");
    let path = match flavor {
        Flavor::Gitea => "pulls",
        Flavor::GitHub => "pull",
    };
    assert!(
        links[0]
            .body
            .contains(&format!("/{path}/{}", prs[0].number)),
        "{links:#?}"
    );
}

fn signed_delivery(fake: &FakeForge, flavor: Flavor, issue: u64) -> HookDelivery {
    let action = match flavor {
        Flavor::Gitea => "label_updated",
        Flavor::GitHub => "labeled",
    };
    fake.issue_hook(issue, action).unwrap()
}

async fn webhook_then_poll_is_one_task_and_its_pr_closes_the_issue(flavor: Flavor) {
    // Webhooks only while `serve` runs; the worker started later polls (env override).
    let (fake, _remote, b) = intake_bench(
        flavor,
        "label = \"gaffer\"\nsecret_env = \"DEMO_HOOK_SECRET\"\n",
    )
    .await;
    let issue = fake.add_issue(TITLE, BODY);
    fake.label_issue(issue, "gaffer");
    let d = b.home.dir.path();
    let mut cmd = serve_with_fake_agents(&b.home, d, &d.join("scenarios"));
    cmd.env("DEMO_FORGE_TOKEN", TOKEN)
        .env("DEMO_HOOK_SECRET", SECRET)
        .env("TMPDIR", d.join("tmp"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let (served, base) = serve(&mut cmd);
    // No credential: the forge's signature is the delivery's.
    let http = reqwest::Client::new();
    let url = format!("{base}/api/hooks/{}", route(flavor));
    let delivery = signed_delivery(&fake, flavor, issue);

    // Refused, and nothing stored: no signature, another secret, the right signature
    // over another body, the right signature on the other forge's route.
    let mut longer = delivery.body.clone();
    longer.extend_from_slice(b" ");
    let other_route = format!(
        "{base}/api/hooks/{}",
        route(if flavor == Flavor::Gitea {
            Flavor::GitHub
        } else {
            Flavor::Gitea
        })
    );
    for (url, headers, body) in [
        (&url, delivery.headers.clone(), &delivery.body),
        (
            &url,
            delivery.signed("another-secret-entirely"),
            &delivery.body,
        ),
        (&url, delivery.signed(SECRET), &longer),
        (&other_route, delivery.signed(SECRET), &delivery.body),
    ] {
        let (status, answer) = post(&http, url, &headers, body).await;
        assert_eq!(status, 401, "{url} {headers:?}: {answer}");
        assert!(answer.to_string().contains("signature"), "{answer}");
    }
    assert_eq!(
        task_list(&b),
        Vec::<Value>::new(),
        "a refused delivery stored a task"
    );

    // Signed: one task, whose request is the issue; delivered again: the same one.
    let (status, first) = post(&http, &url, &delivery.signed(SECRET), &delivery.body).await;
    assert_eq!(
        (status, first["outcome"].as_str()),
        (200, Some("taken")),
        "{first}"
    );
    assert_eq!(first["tasks"][0]["created"], true, "{first}");
    let id = first["tasks"][0]["task_id"].as_str().unwrap().to_owned();
    let (status, again) = post(&http, &url, &delivery.signed(SECRET), &delivery.body).await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(
        (
            again["tasks"][0]["task_id"].as_str(),
            &again["tasks"][0]["created"]
        ),
        (Some(id.as_str()), &Value::Bool(false)),
        "{again}"
    );

    // `serve`'s workers run it; it ships, its pull request linked back to the issue.
    let task = finished_task(&b.home.http(), &base, &id).await;
    assert_eq!(task["stage"], "done", "{task}");
    assert_eq!(task["request"], format!("{TITLE}\n\n{BODY}"), "{task}");
    assert_linked_back(&fake, flavor, issue);
    drop(served);

    // A worker polling the forge sees the same issue (still open, still labelled):
    // still one task, and no second comment. Two listings: the first poll finished.
    let listed = issue_listings(&fake);
    let _worker = worker(
        &b,
        &[
            ("DEMO_HOOK_SECRET", SECRET),
            ("GAFFER_PROJECT_DEMO_INTAKE_POLL_INTERVAL", "10s"),
        ],
    );
    until("the worker's poller to list the issues twice", async || {
        (issue_listings(&fake) >= listed + 2).then_some(())
    })
    .await;
    let tasks = task_list(&b);
    assert_eq!(tasks.len(), 1, "{tasks:#?}");
    assert_eq!(tasks[0]["id"], id.as_str());
    assert_linked_back(&fake, flavor, issue);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gitea_webhook_through_serve_then_poll_is_one_task_and_its_pr_closes_the_issue() {
    webhook_then_poll_is_one_task_and_its_pr_closes_the_issue(Flavor::Gitea).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn github_webhook_through_serve_then_poll_is_one_task_and_its_pr_closes_the_issue() {
    webhook_then_poll_is_one_task_and_its_pr_closes_the_issue(Flavor::GitHub).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_webhook_secret_a_worker_polls_and_an_issue_becomes_one_task() {
    // No secret: polling is on by default (every minute, the first look at start).
    let (fake, _remote, b) = intake_bench(Flavor::Gitea, "label = \"gaffer\"\n").await;
    let unlabelled = fake.add_issue("Fix the typo in the intro", "teh");
    let issue = fake.add_issue(TITLE, BODY);
    fake.label_issue(issue, "gaffer");
    let w = worker(&b, &[]);
    let id = until("the poller to make the issue a task", async || {
        task_list(&b)
            .first()
            .map(|t| t["id"].as_str().unwrap().to_owned())
    })
    .await;
    let task = until("the task to end", async || {
        let out = b
            .gaffer_std()
            .args(["task", "show", &id, "--json"])
            .output()
            .unwrap();
        let view = json_of(&out);
        ["done", "failed", "blocked", "cancelled"]
            .contains(&view["task"]["stage"].as_str()?)
            .then_some(view)
    })
    .await;
    assert_eq!(task["task"]["stage"], "done", "{task}");
    assert!(
        task["task"]["created_by"]
            .to_string()
            .contains("intake:poll"),
        "{task}"
    );
    assert_linked_back(&fake, Flavor::Gitea, issue);
    // A second worker (a restart) polls again: still the one task; the issue
    // without the label never became one.
    drop(w);
    let listed = issue_listings(&fake);
    let _again = worker(&b, &[("GAFFER_PROJECT_DEMO_INTAKE_POLL_INTERVAL", "10s")]);
    until("the second worker to poll twice", async || {
        (issue_listings(&fake) >= listed + 2).then_some(())
    })
    .await;
    let tasks = task_list(&b);
    assert_eq!(tasks.len(), 1, "{tasks:#?}");
    assert!(fake.comments().iter().all(|c| c.issue != unlabelled));
}
