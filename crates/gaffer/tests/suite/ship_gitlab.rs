//! `gaffer run` shipping to GitLab as users meet it: the real binary, real git, a
//! bare repository as the remote and the testkit's fake GitLab on loopback (the
//! project in a sub-group), configured with `[projects.demo.forge] kind = "gitlab"`.
use super::run::{json_of, Bench};
use gaffer_testkit::forge::{BareRemote, FakeGitLab};
use gaffer_testkit::git::git;
use pretty_assertions::assert_eq;
use serde_json::json;
use std::process::Stdio;
use std::time::{Duration, Instant};

const TOKEN: &str = "glpat-cli-7d1e0c95";
const GROUP: &str = "acme/tools";
const REQUEST: &str = "Add an installation section to README";
const TRACE: &str = "\u{1b}[0KRunning with gitlab-runner 17.5.0\n$ ./ci/check-readme\ncheck install_section ... FAILED\nerror: README.md: the install command must use --locked\n\u{1b}[31;1mERROR: Job failed: exit code 1\u{1b}[0;m\n";
const FIRST: &str = "# demo\n\nA demo project.\n\n## Installation\n\n    cargo install demo\n";
const FIXED: &str =
    "# demo\n\nA demo project.\n\n## Installation\n\n    cargo install --locked demo\n";

fn gitlab_config(fake: &FakeGitLab, remote: &BareRemote) -> String {
    format!(
        "[worktrees]\nretention_days = 0\n\n[projects.demo.forge]\nkind = \"gitlab\"\nbase_url = \"{}\"\nowner = \"{GROUP}\"\nrepo = \"demo\"\nremote = \"{}\"\ntoken_env = \"LAB_TOKEN\"\nlabels = [\"gaffer\"]\n",
        fake.base_url(),
        remote.url()
    )
}

/// Polls `found` every 20 ms until it gives something, while `child` runs.
fn wait_for<T>(child: &mut std::process::Child, what: &str, found: impl Fn() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(240);
    loop {
        if let Some(t) = found() {
            return t;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "gaffer run exited before {what}"
        );
        assert!(Instant::now() < deadline, "no {what} within four minutes");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn run_ships_to_gitlab_one_merge_request_whose_failed_pipeline_the_owner_fixes_and_names_it() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let remote = BareRemote::new().unwrap();
    let fake = rt
        .block_on(FakeGitLab::start(GROUP, "demo", TOKEN))
        .unwrap();
    fake.attach_remote(&remote);
    let b = Bench::new();
    b.home.write_config(&gitlab_config(&fake, &remote));
    b.script_all();
    // The owner's fix is given the failed job's trace.
    let first = json!({ "steps": [{ "write_file": { "path": "README.md", "content": FIRST } }, { "say": "added the section" }] });
    let fix = json!({
        "steps": [{ "write_file": { "path": "README.md", "content": FIXED } }, { "say": "the install uses --locked" }],
        "expect_prompt_contains": "error: README.md: the install command must use --locked",
    });
    b.script("owner", vec![first, fix]);
    let stdout = b.home.dir.path().join("run.out");
    let mut child = b
        .gaffer_std()
        .args(["run", REQUEST, "--repo"])
        .arg(&b.repo)
        .args(["--yes", "--agent", "claude"])
        .env("LAB_TOKEN", TOKEN)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout).unwrap())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

    // The pipeline of the merge request's commit fails; the fix's commit passes.
    let mr = wait_for(&mut child, "a merge request", || {
        fake.mrs().first().cloned()
    });
    fake.set_job(&mr.sha, "check-readme", "failed", Some(TRACE));
    let fixed = wait_for(&mut child, "the fix pushed", || {
        remote
            .branch_sha(&mr.source_branch)
            .filter(|sha| *sha != mr.sha)
    });
    fake.set_job(&fixed, "check-readme", "success", Some("ok\n"));
    let out = child.wait_with_output().unwrap();
    let printed = std::fs::read_to_string(&stdout).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{printed}\n{stderr}");

    // One merge request, created once, from the task branch, now at the fix.
    let mrs = fake.mrs();
    assert_eq!(mrs.len(), 1, "{mrs:#?}");
    let creates = fake
        .requests()
        .iter()
        .filter(|r| r.starts_with("POST /api/v4/projects/acme%2Ftools%2Fdemo/merge_requests "))
        .count();
    assert_eq!(creates, 1, "{:#?}", fake.requests());
    assert_eq!(
        (mrs[0].target_branch.as_str(), mrs[0].labels.clone()),
        ("main", vec!["gaffer".to_owned()])
    );
    assert_eq!(remote.branch_sha(&mr.source_branch), Some(fixed.clone()));
    assert_eq!(
        git(remote.path(), &["show", &format!("{fixed}:README.md")]),
        FIXED.trim_end()
    );
    // What the user reads names the merge request, in GitLab's words.
    let mr_url = format!("{}/-/merge_requests/{}", fake.web_url(), mrs[0].iid);
    assert!(
        printed.contains(&format!("\nmr      {mr_url}\n")),
        "{printed}"
    );
    assert!(
        printed.contains("Shipped: the merge request above waits for a review."),
        "{printed}"
    );
    assert!(
        stderr.contains("and open a merge request into `main` on gitlab"),
        "{stderr}"
    );
    assert!(
        printed.contains(&format!("branch  {}", mr.source_branch)),
        "{printed}"
    );
    assert!(!printed.contains(TOKEN) && !stderr.contains(TOKEN));
    assert_eq!(fake.unauthorized_count(), 0);

    // The task's steps: the pipeline's failure went to the owner, then CI again.
    let list = json_of(
        &b.gaffer_std()
            .args(["task", "list", "--json"])
            .output()
            .unwrap(),
    );
    let id = list[0]["id"].as_str().unwrap();
    let task = json_of(
        &b.gaffer_std()
            .args(["task", "show", id, "--json"])
            .output()
            .unwrap(),
    );
    let steps: Vec<&str> = task["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["step_id"].as_str().unwrap())
        .collect();
    let from = steps.iter().position(|s| *s == "push/1").unwrap();
    assert_eq!(
        steps[from..],
        [
            "push/1",
            "pr",
            "ci/1",
            "fix/1",
            "commit-fix/1",
            "push/2",
            "ci/2",
        ]
    );
}

#[test]
fn a_bad_forge_kind_or_a_missing_token_variable_exits_78_naming_the_field_and_stores_nothing() {
    let b = Bench::new();
    b.script_all();
    let run = |config: &str, token: Option<&str>| {
        b.home.write_config(config);
        let mut cmd = b.gaffer_std();
        cmd.args(["run", REQUEST, "--repo"])
            .arg(&b.repo)
            .args(["--yes", "--agent", "claude"])
            .stdin(Stdio::null());
        if let Some(t) = token {
            cmd.env("LAB_TOKEN", t);
        }
        let out = cmd.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(78), "{config}: {stderr}");
        stderr
    };
    let err = run("[projects.demo.forge]\nkind = \"gitlabb\"\n", Some(TOKEN));
    for part in ["projects.demo.forge.kind", "`gitlabb`", "\"gitlab\""] {
        assert!(err.contains(part), "no {part:?} in {err}");
    }
    let gitlab = format!("[projects.demo.forge]\nkind = \"gitlab\"\nowner = \"{GROUP}\"\nrepo = \"demo\"\ntoken_env = \"LAB_TOKEN\"\n");
    for token in [None, Some(""), Some("  ")] {
        let err = run(&gitlab, token);
        for part in [
            "projects.demo.forge.token_env",
            "LAB_TOKEN is not set or empty",
            "https://gitlab.com",
            "api scope",
        ] {
            assert!(err.contains(part), "{token:?}: no {part:?} in {err}");
        }
    }
    // Nothing was stored and no agent ran.
    let list = json_of(
        &b.gaffer_std()
            .args(["task", "list", "--json"])
            .output()
            .unwrap(),
    );
    assert_eq!(list, json!([]));
    assert!(
        std::fs::read_to_string(b.log())
            .unwrap_or_default()
            .is_empty(),
        "an agent ran"
    );
}

#[test]
fn sigkill_after_the_merge_request_create_was_sent_then_resume_finds_it_instead_of_a_second() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let remote = BareRemote::new().unwrap();
    let fake = rt
        .block_on(FakeGitLab::start(GROUP, "demo", TOKEN))
        .unwrap();
    fake.attach_remote(&remote);
    fake.report_ci_for_every_commit("success", "ok\n");
    let b = Bench::new();
    b.home.write_config(&gitlab_config(&fake, &remote));
    b.script_all();
    // GitLab makes the merge request; its answer never comes.
    fake.hang_next_mr_create();
    let mut child = b
        .gaffer_std()
        .args(["run", REQUEST, "--repo"])
        .arg(&b.repo)
        .args(["--yes", "--json", "--agent", "claude"])
        .env("LAB_TOKEN", TOKEN)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(&mut child, "a merge request", || {
        fake.mrs().first().cloned()
    });
    child.kill().unwrap(); // SIGKILL between "create sent" and "answer recorded"
    child.wait().unwrap();

    let list = json_of(
        &b.gaffer_std()
            .args(["task", "list", "--json"])
            .output()
            .unwrap(),
    );
    let id = list[0]["id"].as_str().unwrap().to_owned();
    let out = b
        .gaffer_std()
        .args(["task", "resume", &id, "--json"])
        .env("LAB_TOKEN", TOKEN)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let summary = super::run::success_json(&out);
    assert_eq!(summary["state"], "done", "{summary}");
    let mrs = fake.mrs();
    assert_eq!(mrs.len(), 1, "one merge request after the crash: {mrs:#?}");
    let mr_url = format!("{}/-/merge_requests/{}", fake.web_url(), mrs[0].iid);
    assert_eq!(summary["pull_request"], mr_url.as_str());
    let creates = fake
        .requests()
        .iter()
        .filter(|r| r.starts_with("POST /api/v4/projects/acme%2Ftools%2Fdemo/merge_requests "))
        .count();
    // The log holds answered requests: the hung create is not there, and the resume
    // looked the merge request up instead of sending another.
    assert_eq!(creates, 0, "{:#?}", fake.requests());
}
