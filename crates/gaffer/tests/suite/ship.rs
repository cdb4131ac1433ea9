//! `gaffer run --issue` and `gaffer gc` with a forge: the real binary, real git, a
//! bare repository as the remote, the fake Gitea on loopback.
use super::run::{json_of, success_json, Bench};
use gaffer_testkit::forge::{BareRemote, FakeForge, Flavor};
use gaffer_testkit::git::git;
use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::Stdio;

pub const TOKEN: &str = "gitea-token-9c2b41";
const ISSUE_TITLE: &str = "Add an installation section to README";
const ISSUE_BODY: &str = "Users keep asking how to install it.";

fn forge_config(fake: &FakeForge, remote: &BareRemote) -> String {
    format!(
        "[worktrees]\nretention_days = 0\n\n[projects.demo.forge]\nkind = \"gitea\"\nbase_url = \"{}\"\nowner = \"acme\"\nrepo = \"demo\"\nremote = \"{}\"\ntoken_env = \"DEMO_FORGE_TOKEN\"\nlabels = [\"gaffer\"]\n",
        fake.base_url(),
        remote.url()
    )
}

fn task_show(b: &Bench, id: &str) -> Value {
    json_of(
        &b.gaffer_std()
            .args(["task", "show", id, "--json"])
            .output()
            .unwrap(),
    )
}

fn step_receipt(task: &Value, step: &str) -> Value {
    let s = task["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step_id"] == step || s["id"] == step)
        .unwrap_or_else(|| panic!("no step {step}: {task}"));
    match &s["receipt"] {
        Value::String(text) => serde_json::from_str(text).unwrap(),
        other => other.clone(),
    }
}

/// A bench whose project ships to a fake Gitea, through a bare repository as the
/// remote, with CI green for every commit.
pub fn forge_bench(rt: &tokio::runtime::Runtime) -> (FakeForge, BareRemote, Bench) {
    let remote = BareRemote::new().unwrap();
    let fake = rt
        .block_on(FakeForge::start(Flavor::Gitea, "acme", "demo", TOKEN))
        .unwrap();
    fake.attach_remote(&remote);
    fake.report_ci_for_every_commit("success");
    let b = Bench::new();
    b.home.write_config(&forge_config(&fake, &remote));
    b.script_all();
    (fake, remote, b)
}

/// `gaffer run` of the issue's title, in the background, with `token` as the
/// forge's token.
fn spawn_run(b: &Bench, token: &str) -> std::process::Child {
    b.gaffer_std()
        .args(["run", ISSUE_TITLE, "--repo"])
        .arg(&b.repo)
        .args(["--yes", "--json", "--agent", "claude"])
        .env("DEMO_FORGE_TOKEN", token)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// `gaffer task resume ID` with the right token; it must end done.
fn resume_to_done(b: &Bench, id: &str) {
    let out = b
        .gaffer_std()
        .args(["task", "resume", id, "--json"])
        .env("DEMO_FORGE_TOKEN", TOKEN)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let s = success_json(&out);
    assert_eq!(s["state"], "done", "{s}");
}

#[test]
fn run_from_an_issue_ships_one_pr_comments_and_gc_cleans_up_only_after_the_merge() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (fake, remote, b) = forge_bench(&rt);
    let issue = fake.add_issue(ISSUE_TITLE, ISSUE_BODY);
    let issue_url = format!("{}/acme/demo/issues/{issue}", fake.base_url());
    let out = b
        .gaffer_std()
        .args(["run", "--issue", &issue_url, "--repo"])
        .arg(&b.repo)
        .args(["--yes", "--json", "--agent", "claude"])
        .env("DEMO_FORGE_TOKEN", TOKEN)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains(TOKEN) && !String::from_utf8_lossy(&out.stdout).contains(TOKEN));
    let s = json_of(&out);
    assert_eq!(s["state"], "done", "{s}");
    let branch = s["branch"].as_str().unwrap().to_owned();
    let id = s["task_id"].as_str().unwrap().to_owned();

    // The request is the issue's text; one PR for the branch; the issue has its link.
    let task = task_show(&b, &id);
    assert_eq!(
        task["task"]["request"],
        format!("{ISSUE_TITLE}\n\n{ISSUE_BODY}"),
        "{task}"
    );
    let prs = fake.prs();
    assert_eq!(prs.len(), 1, "{prs:#?}");
    assert_eq!(prs[0].head, branch);
    assert_eq!(prs[0].title, ISSUE_TITLE);
    assert_eq!(s["pull_request"], json!(step_receipt(&task, "pr")["url"]));
    let comments = fake.comments();
    assert_eq!(comments.len(), 1, "{comments:#?}");
    assert_eq!(comments[0].issue, issue);
    assert!(
        comments[0]
            .body
            .contains(s["pull_request"].as_str().unwrap()),
        "{}",
        comments[0].body
    );
    let worktree = PathBuf::from(step_receipt(&task, "worktree")["path"].as_str().unwrap());
    assert!(worktree.exists());
    assert!(remote.branch_sha(&branch).is_some());

    // A second task fails at planning: nothing of it ships; past the retention gc
    // collects its worktree and its local branch.
    let other = b.home.dir.path().join("scenarios-failing");
    std::fs::create_dir_all(&other).unwrap();
    let nonsense = json!({ "turns": [{ "steps": [{ "say": "no plan" }] }, { "steps": [{ "say": "still none" }] }] });
    std::fs::write(other.join("planner.json"), nonsense.to_string()).unwrap();
    let out = b
        .gaffer_std()
        .args(["run", "Something impossible", "--repo"])
        .arg(&b.repo)
        .args(["--yes", "--json", "--agent", "claude"])
        .env("DEMO_FORGE_TOKEN", TOKEN)
        .env("GAFFER_FAKE_SCENARIO", &other)
        .env(
            "GAFFER_FAKE_STATE_DIR",
            b.home.dir.path().join("fake-state-2"),
        )
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let failed_id = json_of(&out)["task_id"].as_str().unwrap().to_owned();
    let failed_worktree = PathBuf::from(
        step_receipt(&task_show(&b, &failed_id), "worktree")["path"]
            .as_str()
            .unwrap(),
    );
    assert!(failed_worktree.exists());

    // While the PR is open: the shipped worktree goes (retention 0), the branch stays.
    let gc = |dry: bool| {
        let mut cmd = b.gaffer_std();
        cmd.args(["gc", "--json"]).env("DEMO_FORGE_TOKEN", TOKEN);
        if dry {
            cmd.arg("--dry-run");
        }
        let out = cmd.output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        json_of(&out)
    };
    let failed_branch = step_receipt(&task_show(&b, &failed_id), "worktree")["branch"]
        .as_str()
        .unwrap()
        .to_owned();
    let failed_pruned = json!({ "task": failed_id, "branch": failed_branch, "pull_request": null, "pr_state": "failed", "remote": false, "local": true });
    let worktree_of = |report: &Value, task: &str| {
        report["worktrees"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["task"] == task)
            .cloned()
    };
    let dry = gc(true);
    assert_eq!(dry["dry_run"], true);
    assert_eq!(dry["worktrees"].as_array().unwrap().len(), 2, "{dry}");
    assert!(worktree_of(&dry, &id).unwrap()["bytes"].as_u64().unwrap() > 0);
    assert!(worktree_of(&dry, &failed_id).is_some(), "{dry}");
    assert_eq!(
        dry["branches"],
        json!([failed_pruned]),
        "the PR is open, only the failed task's branch goes: {dry}"
    );
    assert!(worktree.exists(), "--dry-run removed the worktree");
    assert!(failed_worktree.exists(), "--dry-run removed the worktree");

    // The PR is merged: gc removes the worktree, then the branch on both sides.
    fake.merge_pr(prs[0].number);
    let dry = gc(true);
    assert_eq!(
        dry["branches"],
        json!([failed_pruned, { "task": id, "branch": branch, "pull_request": prs[0].number, "pr_state": "merged", "remote": true, "local": true }])
    );
    assert!(worktree.exists() && remote.branch_sha(&branch).is_some());
    let done = gc(false);
    assert_eq!(done["worktrees"], dry["worktrees"]);
    assert_eq!(done["branches"], dry["branches"]);
    let bytes: u64 = dry["worktrees"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["bytes"].as_u64().unwrap())
        .sum();
    assert_eq!(done["bytes_reclaimed"], bytes, "{done}");
    assert!(!worktree.exists() && !failed_worktree.exists());
    assert_eq!(remote.branch_sha(&branch), None);
    assert_eq!(git(&b.repo, &["branch", "--list", "gaffer/*"]), "");
    assert!(remote.branch_sha("main").is_none(), "gc never pushes");
    // Nothing left to do.
    let again = gc(false);
    assert_eq!(
        (again["worktrees"].clone(), again["branches"].clone()),
        (json!([]), json!([]))
    );
}

#[test]
fn run_issue_without_a_forge_is_a_precondition_error_and_stores_nothing() {
    let b = Bench::new();
    let out = b
        .gaffer_std()
        .args([
            "run",
            "--issue",
            "https://git.example.com/acme/demo/issues/3",
            "--repo",
        ])
        .arg(&b.repo)
        .args(["--yes"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{stderr}");
    assert!(stderr.contains("[projects.demo.forge]"), "{stderr}");
    let list = json_of(
        &b.gaffer_std()
            .args(["task", "list", "--json"])
            .output()
            .unwrap(),
    );
    assert_eq!(list, json!([]));
    // A request and --issue together are a usage error.
    let out = b
        .gaffer_std()
        .args(["run", "do it", "--issue", "3", "--repo"])
        .arg(&b.repo)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn sigkill_after_the_pr_create_was_sent_then_resume_leaves_exactly_one_pr() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (fake, _remote, b) = forge_bench(&rt);
    // The forge records the create; its answer never comes.
    fake.hang_next_pr_create();
    let mut child = spawn_run(&b, TOKEN);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(180);
    while fake.prs().is_empty() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "gaffer run exited before creating the PR"
        );
        assert!(
            std::time::Instant::now() < deadline,
            "the PR create never reached the forge"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL between "create sent" and "response recorded"
    child.wait().unwrap();

    let list = json_of(
        &b.gaffer_std()
            .args(["task", "list", "--json"])
            .output()
            .unwrap(),
    );
    let id = list[0]["id"].as_str().unwrap().to_owned();
    resume_to_done(&b, &id);
    let prs = fake.prs();
    assert_eq!(prs.len(), 1, "exactly one PR after the crash: {prs:#?}");
    let task = task_show(&b, &id);
    let pr = step_receipt(&task, "pr");
    assert_eq!(pr["number"], prs[0].number);
    assert_eq!(pr["reconciled"], true, "{pr}");
    // No approval was needed: the probe found the PR.
    assert!(
        task["approvals"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["kind"] != "manual"),
        "{task}"
    );
}

#[test]
fn sigkill_while_a_refused_token_waits_for_a_person_then_resume_with_the_right_token_is_done() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (fake, _remote, b) = forge_bench(&rt);
    // A wrong token: the push (plain git) works, the pull request is refused (401)
    // and a person is asked whether to try again.
    let mut child = spawn_run(&b, "an-expired-token");
    let pending = || {
        json_of(
            &b.gaffer_std()
                .args(["approvals", "--json"])
                .output()
                .unwrap(),
        )
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(180);
    let asked = loop {
        let list = pending();
        if let Some(a) = list
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["kind"] == "manual")
        {
            break a.clone();
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "gaffer run exited before asking"
        );
        assert!(std::time::Instant::now() < deadline, "nobody was asked");
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert!(
        asked["summary"].as_str().unwrap().contains("(401)"),
        "{asked}"
    );
    child.kill().unwrap(); // SIGKILL while the question is open
    child.wait().unwrap();

    // The token is fixed; the task resumes and ends done, the old question withdrawn.
    let id = asked["task_id"].as_str().unwrap().to_owned();
    resume_to_done(&b, &id);
    assert_eq!(fake.prs().len(), 1);
    let task = task_show(&b, &id);
    let old = task["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == asked["id"])
        .unwrap_or_else(|| panic!("{task}"));
    assert_eq!(old["state"], "withdrawn", "{old}");
    assert_eq!(pending(), json!([]));
}

#[test]
fn serve_cleans_up_at_start_the_worktrees_of_done_tasks_past_the_retention() {
    let b = Bench::new();
    b.home.write_config("[worktrees]\nretention_days = 0\n");
    b.script_all();
    let out = b
        .gaffer_std()
        .args(["run", ISSUE_TITLE, "--repo"])
        .arg(&b.repo)
        .args(["--yes", "--json", "--agent", "claude"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let s = success_json(&out);
    let id = s["task_id"].as_str().unwrap().to_owned();
    let branch = s["branch"].as_str().unwrap().to_owned();
    let worktree = PathBuf::from(
        step_receipt(&task_show(&b, &id), "worktree")["path"]
            .as_str()
            .unwrap(),
    );
    assert!(worktree.exists());
    let mut serve = b
        .gaffer_std()
        .args(["serve", "--listen", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while worktree.exists() {
        if std::time::Instant::now() > deadline {
            let _ = serve.kill();
            panic!("gaffer serve never removed {}", worktree.display());
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    serve.kill().unwrap();
    serve.wait().unwrap();
    // A branch without a pull request is the user's: never pruned.
    assert!(git(&b.repo, &["branch", "--list", &branch]).contains(&branch));
}

#[test]
fn doctor_shows_each_forge_and_tracker_and_whether_its_token_is_there() {
    let b = Bench::new();
    b.home.write_config(
        "[projects.demo.forge]\nkind = \"github\"\ntoken_env = \"DEMO_GH_TOKEN\"\n\n[projects.web.forge]\nkind = \"gitea\"\nbase_url = \"https://git.example.com\"\n\n[projects.lab.forge]\nkind = \"gitlab\"\nowner = \"acme/tools\"\ntoken_env = \"LAB_TOKEN\"\n\n[projects.demo.tracker]\nkind = \"vikunja\"\nbase_url = \"https://tasks.example.com\"\nproject_id = 7\ntoken_env = \"DEMO_VIKUNJA_TOKEN\"\n",
    );
    let out = b
        .gaffer_std()
        .args(["doctor", "--json"])
        .env("DEMO_VIKUNJA_TOKEN", "vikunja-secret-123")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        !text.contains("vikunja-secret-123"),
        "doctor printed a token"
    );
    let report: Value = serde_json::from_str(&text).unwrap();
    let by_name = |n: &str| super::cli::doctor_check(&report, n);
    let demo = by_name("forge demo");
    assert_eq!(demo["status"], "warn");
    assert!(demo["detail"]
        .as_str()
        .unwrap()
        .contains("github at https://api.github.com"));
    assert!(demo["hint"].as_str().unwrap().contains("DEMO_GH_TOKEN"));
    let web = by_name("forge web");
    assert_eq!(web["status"], "ok");
    assert!(web["detail"]
        .as_str()
        .unwrap()
        .contains("git credential helper"));
    let lab = by_name("forge lab");
    assert_eq!(lab["status"], "warn");
    assert!(lab["detail"]
        .as_str()
        .unwrap()
        .contains("gitlab at https://gitlab.com, pushing to `origin`; LAB_TOKEN is not set"));
    let hint = lab["hint"].as_str().unwrap();
    assert!(
        hint.contains("LAB_TOKEN") && hint.contains("api scope"),
        "{hint}"
    );
    let tracker = by_name("tracker demo");
    assert_eq!(tracker["status"], "ok");
    assert!(tracker["detail"].as_str().unwrap().contains("project 7"));
}

/// `POST /api/tasks {"issue"}` on `gaffer serve`: the issue is read through the
/// project's forge before anything is stored, becomes the request, and is
/// commented with the pull request once shipped. Bad references and projects
/// without a forge are refused naming what to fix, storing nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_queues_a_forge_issue_over_the_api_and_ships_it() {
    use std::io::BufRead;
    let remote = BareRemote::new().unwrap();
    let fake = FakeForge::start(Flavor::Gitea, "acme", "demo", TOKEN)
        .await
        .unwrap();
    fake.attach_remote(&remote);
    fake.report_ci_for_every_commit("success");
    let issue = fake.add_issue(ISSUE_TITLE, ISSUE_BODY);
    let b = Bench::new();
    b.home.write_config(&forge_config(&fake, &remote));
    b.script_all();
    let add = |path: &std::path::Path, name: &str| {
        success_json(
            &b.gaffer_std()
                .args(["project", "add"])
                .arg(path)
                .args(["--name", name, "--json"])
                .output()
                .unwrap(),
        )
    };
    add(&b.repo, "demo");
    let other = b.home.dir.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    git(&other, &["init", "-q", "-b", "main"]);
    add(&other, "other");
    assert!(b
        .gaffer_std()
        .args(["auto", "on", "--project", "demo"])
        .status()
        .unwrap()
        .success());

    let mut serve = b
        .gaffer_std()
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("DEMO_FORGE_TOKEN", TOKEN)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(serve.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let addr = first
        .split("http://")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .unwrap();
    let base = format!("http://{addr}");
    let http = b.home.http();
    let post = |body: Value| {
        let (http, base) = (http.clone(), base.clone());
        async move {
            let r = http
                .post(format!("{base}/api/tasks"))
                .json(&body)
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            (status, r.json::<Value>().await.unwrap())
        }
    };
    let count = || async {
        http.get(format!("{base}/api/tasks"))
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap()
            .as_array()
            .unwrap()
            .len()
    };

    for (body, status, field_or_code) in [
        (
            json!({"project": "demo", "issue": "acme/demo#999"}),
            404,
            "not_found",
        ),
        (json!({"project": "other", "issue": "1"}), 409, "no_forge"),
        (
            json!({"project": "demo", "issue": "1", "request": "and this"}),
            400,
            "issue",
        ),
        (
            json!({"project": "demo", "issue": "not an issue"}),
            400,
            "issue",
        ),
        (json!({"project": "demo"}), 400, "request"),
    ] {
        let (got, answer) = post(body.clone()).await;
        assert_eq!(got, status, "{body} → {answer}");
        let error = &answer["error"];
        assert!(
            error["field"] == field_or_code || error["code"] == field_or_code,
            "{body} → {answer}"
        );
        assert!(!error["message"].as_str().unwrap().is_empty());
    }
    assert_eq!(count().await, 0, "a refused request stores nothing");

    let (status, task) =
        post(json!({"project": "demo", "issue": format!("acme/demo#{issue}")})).await;
    assert_eq!(status, 201, "{task}");
    assert_eq!(task["request"], format!("{ISSUE_TITLE}\n\n{ISSUE_BODY}"));
    let id = task["id"].as_str().unwrap();
    let done = super::serve::finished_task(&http, &base, id).await;
    assert_eq!(done["stage"], "done", "{done}");
    let prs = fake.prs();
    assert_eq!(prs.len(), 1, "{prs:#?}");
    let comments = fake.comments();
    assert_eq!(comments.len(), 1, "{comments:#?}");
    assert_eq!(comments[0].issue, issue);
    let pr_path = format!("/pulls/{}", prs[0].number);
    assert!(comments[0].body.contains(&pr_path), "{comments:#?}");
    serve.kill().unwrap();
    serve.wait().unwrap();
}
