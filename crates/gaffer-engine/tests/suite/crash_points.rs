//! The crash-point harness (issue #16): a task that ships to a forge is killed right
//! after each write the engine makes for it — stage changes, step intents and
//! receipts, agent activity, approvals, reconcile, leases, ship — and resumed by
//! another worker; then killed again after each write of that recovery. Every
//! trial must end as the uncrashed run does: done, one commit for the subtask, one
//! pull request, and no effect run again unless a person approved the re-run the
//! recovery rules asked for. On SQLite and on PostgreSQL.
//!
//! The kills are fault points in the journal ([`Faulty`]): in this process the
//! run is frozen after the write and dropped (its agent processes killed), and in
//! a child test process a real `kill -9` right after the write (its agents live on
//! as orphans, as they would).
//!
//! Every trial reaches each of its points by construction, whatever the timing:
//! points are named by what is written, not by their place in the run; each lane's
//! workers are on a host of their own, so a run releases only its own lane's dead
//! workers (how many lease writes a run makes does not depend on the other lanes);
//! and the person decides only for a run that has not begun the write it dies
//! after, so what a recovery finds (an approval pending or decided) is the same in
//! every trial that crashes at the same point.
use super::faulty::{is_lease_write, Death, Faulty, Point};
use super::support::*;
use gaffer_app::{App, Scope};
use gaffer_core::{Actor, ApprovalKind, Decision, TaskId};
use gaffer_engine::Settings;
use gaffer_forge::ForgeKind;
use gaffer_store::{Journal, WorkerInfo};
use gaffer_testkit::forge::{BareRemote, FakeForge, Flavor};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

const TOKEN: &str = "forge-token-crash-points";
const REQUEST: &str = "Add an installation section to README";
/// Trials run this many at a time, each lane in its own repository and forge.
const LANES: usize = 3;

/// One project with its own repository, bare remote and fake forge, on the
/// journal every lane shares.
struct Lane {
    world: World,
    forge: FakeForge,
    remote: BareRemote,
    project: String,
    /// The host its workers are on.
    host: String,
}

impl Lane {
    async fn new(journal: Arc<dyn Journal>, n: usize) -> Self {
        let remote = BareRemote::new().unwrap();
        let forge = FakeForge::start(Flavor::Gitea, "acme", "demo", TOKEN)
            .await
            .unwrap();
        forge.attach_remote(&remote);
        forge.report_ci_for_every_commit("success");
        let ship = shipping(ForgeKind::Gitea, &forge.base_url(), &remote.url(), TOKEN);
        let project = format!("demo{n}");
        let tune = |s: &mut Settings| {
            s.shipping.insert(project.clone(), ship.clone());
        };
        let dir = tempfile::tempdir().unwrap();
        let world = World::build_on(
            dir,
            journal,
            &project,
            "grep -q '^## Installation' README.md",
            tune,
        )
        .await;
        let plan = plan_answer(&["Add an installation section"]);
        world.script("planner", vec![plan]);
        // The owner writes through a tool call a person approves: the effect that
        // must not happen twice without a person's say.
        world.script(
            "owner",
            vec![json!({ "steps": [
                { "tool": { "name": "Write", "input": { "file_path": "README.md", "content": README_DONE },
                            "write": { "path": "README.md", "content": README_DONE } } },
                { "say": "added the section" },
            ] })],
        );
        world.script("reviewer", vec![verdict(json!({ "verdict": "done" }))]);
        for role in ["planner", "owner", "reviewer"] {
            let path = world.scenarios.join(format!("{role}.json"));
            let mut script: Value =
                serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            script["cycle"] = json!(true);
            std::fs::write(&path, script.to_string()).unwrap();
        }
        let host = format!(
            "{}-lane{n}",
            gaffer_engine::this_process(Duration::ZERO).host
        );
        Self {
            world,
            forge,
            remote,
            project,
            host,
        }
    }

    async fn task(&self) -> TaskId {
        let t = self
            .world
            .app
            .create_task(
                gaffer_app::NewTask {
                    project: self.project.clone(),
                    request: REQUEST.into(),
                    agent: Some("claude".into()),
                    auto_approve: false,
                    ..Default::default()
                },
                Actor::user("test", "test"),
            )
            .await
            .unwrap();
        TaskId(t.id)
    }
}

/// A worker on `host`, as another process: its pid is that of a stand-in process
/// (of this machine), killed when the worker "dies", so that the next start on
/// `host` sees it gone and releases its lease at once (as it does for a killed
/// gaffer).
struct Stand {
    me: WorkerInfo,
    process: std::process::Child,
}

impl Stand {
    fn new(host: &str) -> Self {
        let process = std::process::Command::new("sleep")
            .arg("3600")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut me = gaffer_engine::this_process(Duration::from_secs(30));
        // Unique as a real worker's id is: a long run reuses pids.
        let nonce = me.id.rsplit('/').next().unwrap_or_default().to_owned();
        me.host = host.to_owned();
        me.pid = i64::from(process.id());
        me.id = format!("{}/{}/stand-in-{nonce}", me.host, me.pid);
        Self { me, process }
    }
}

/// The worker "dies": its stand-in process is killed.
impl Drop for Stand {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

/// The run each task has now (the newest, dead or alive), by task id.
type Runs = Arc<Mutex<HashMap<String, Arc<Faulty>>>>;

/// A person who approves every question as soon as it is asked, recording nothing
/// but the decision (as `gaffer approve` would). With `runs`, only questions of a
/// task whose run has taken it over (written `task_leased`) and has not begun the
/// write it dies after: a question a crash left is still pending when the next
/// run's recovery looks at it, and answered only if that run waits for it.
fn approve_everything(
    app: App,
    runs: Option<Runs>,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut events = app.journal().subscribe();
        loop {
            for a in app.approvals(Some("pending")).await.unwrap_or_default() {
                let decide = app.decide(
                    &a.id,
                    Decision::Approve,
                    Actor::user("ana", "test"),
                    None,
                    Scope::default(),
                );
                match &runs {
                    None => drop(decide.await),
                    Some(runs) => {
                        let run = runs.lock().unwrap().get(&a.task_id).cloned();
                        let took_over = |run: &Faulty| {
                            run.written().iter().any(|w| w.starts_with("task_leased"))
                        };
                        if let Some(run) = run.filter(|r| took_over(r)) {
                            drop(run.unless_dying(decide).await);
                        }
                    }
                }
            }
            tokio::select! {
                () = stop.cancelled() => return,
                got = events.recv() => if let Err(tokio::sync::broadcast::error::RecvError::Closed) = got { return },
                () = tokio::time::sleep(Duration::from_millis(500)) => {}
            }
        }
    })
}

/// What happened in one trial: the writes of each run, in order.
struct Trial {
    task: TaskId,
    runs: Vec<Vec<String>>,
}

/// Run a new task, crashing the n-th run at `crashes[n]`, then once more to its
/// end. Every run must reach its point.
async fn run_trial(lane: &Lane, runs: &Runs, crashes: &[Point]) -> Result<Trial, String> {
    let task = lane.task().await;
    let mut written = Vec::new();
    for point in crashes.iter().map(Some).chain([None]) {
        let journal = Faulty::new(lane.world.journal.clone(), point.cloned(), Death::Freeze);
        runs.lock()
            .unwrap()
            .insert(task.as_str().to_owned(), journal.clone());
        let engine = lane.world.engine_on(journal.clone());
        let stand = Stand::new(&lane.host);
        let me = stand.me.clone();
        let mut run = tokio::spawn({
            let task = task.clone();
            async move { engine.run_one(&task, &me, CancellationToken::new()).await }
        });
        let ended = tokio::select! {
            r = &mut run => Some(r),
            () = journal.died() => None,
            () = tokio::time::sleep(Duration::from_secs(240)) => {
                run.abort();
                return Err(format!("{task}: a run after {crashes:?} neither ended nor crashed: {:?}", journal.written()));
            }
        };
        written.push(journal.written());
        match (ended, point) {
            // Died at the point: drop the run (its agent processes go with it).
            (None, _) => {
                run.abort();
                let _ = run.await;
                drop(stand);
            }
            (Some(r), None) => {
                drop(stand);
                let stage = r
                    .map_err(|e| e.to_string())?
                    .map_err(|e| format!("{task}: {e}"))?;
                if stage != Some(gaffer_core::Stage::Done) {
                    return Err(format!(
                        "{task} ended {stage:?} after crashes at {crashes:?}: {:?}",
                        journal.written()
                    ));
                }
            }
            (Some(r), Some(p)) => {
                return Err(format!(
                    "{task}: the run ended ({:?}) before reaching {p}: {:?}",
                    r.map(|r| r.map_err(|e| e.to_string())),
                    journal.written()
                ));
            }
        }
    }
    runs.lock().unwrap().remove(task.as_str());
    Ok(Trial {
        task,
        runs: written,
    })
}

/// The trial's task ended as an uncrashed one does, and nothing ran again unless a
/// person approved the re-run.
async fn check_trial(lane: &Lane, trial: &Trial) -> Result<(), String> {
    let id = trial.task.as_str();
    let view = lane.world.journal.task(id).await.unwrap().unwrap();
    let fail = |what: String| {
        Err(format!(
            "{id} after crashes at {:?}: {what}",
            trial.runs.iter().map(|r| r.last()).collect::<Vec<_>>()
        ))
    };
    if view.task.stage != "done" {
        return fail(format!("stage {}", view.task.stage));
    }
    if let Some(a) = view.approvals.iter().find(|a| a.state == "pending") {
        return fail(format!("approval {} is still pending", a.id));
    }
    // Re-running the owner's turn needs a person's approval of the manual question.
    let reruns = view
        .approvals
        .iter()
        .filter(|a| {
            a.kind == ApprovalKind::Manual.as_str()
                && a.step_id.starts_with("code/")
                && a.state == "approved"
        })
        .filter(|a| {
            a.decided_by
                .as_deref()
                .is_some_and(|d| d.contains("\"user\""))
        })
        .count();
    let writes = read_log(&lane.world.log)
        .iter()
        .filter(|l| *l == &format!("fake-claude write README.md task={id}"))
        .count();
    if writes == 0 || writes > 1 + reruns {
        return fail(format!(
            "{writes} owner writes with {reruns} re-runs a person approved"
        ));
    }
    let receipt = |step: &str| -> Value {
        view.steps
            .iter()
            .find(|s| s.step_id == step)
            .and_then(|s| s.receipt.as_deref())
            .map(|r| serde_json::from_str(r).unwrap())
            .unwrap_or(Value::Null)
    };
    let branch = receipt("worktree")["branch"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let prs = lane
        .forge
        .prs()
        .into_iter()
        .filter(|p| p.head == branch)
        .count();
    if prs != 1 {
        return fail(format!("{prs} pull requests for {branch}"));
    }
    let trailers = git(
        &lane.world.repo,
        &[
            "log",
            "--format=%(trailers:key=Gaffer-Step,valueonly)",
            &format!("main..{branch}"),
        ],
    );
    let commits: Vec<&str> = trailers.lines().filter(|l| !l.trim().is_empty()).collect();
    if commits != [format!("{id}/commit/1")] {
        return fail(format!("commits on {branch}: {commits:?}"));
    }
    let readme = git(&lane.world.repo, &["show", &format!("{branch}:README.md")]);
    if readme.trim_end() != README_DONE.trim_end() {
        return fail(format!("README on {branch}: {readme}"));
    }
    if receipt("ci/1")["state"] != "success" {
        return fail(format!("CI: {}", receipt("ci/1")));
    }
    Ok(())
}

fn read_log(path: &std::path::Path) -> Vec<String> {
    gaffer_testkit::scenario::read_log(path)
}

/// The crash points of one run: each write, where a write repeats the one before
/// it (agent activity of one turn, CI states of one wait) only the first.
fn points(written: &[String]) -> Vec<Point> {
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    let mut out = Vec::new();
    for (i, s) in written.iter().enumerate() {
        let occurrence = {
            let n = seen.entry(s).or_default();
            *n += 1;
            *n
        };
        if i == 0 || written[i - 1] != *s {
            out.push(Point::After {
                signature: s.clone(),
                occurrence,
            });
        }
    }
    out
}

/// What recovery wrote in a resumed run, up to its first ordinary step. The lease
/// writes of starting (register, release the dead worker's leases, claim) are
/// left out: a crash after them is one at level 1.
fn recovery(written: &[String]) -> Vec<&str> {
    written
        .iter()
        .take_while(|s| !(s.starts_with("step_started(") || s.contains("task_done")))
        .filter(|s| !is_lease_write(s))
        .map(String::as_str)
        .collect()
}

/// Run `trials` on the lanes, a lane's trials one after another.
async fn run_all(
    lanes: &Arc<Vec<Lane>>,
    runs: &Runs,
    trials: Vec<Vec<Point>>,
) -> Vec<(Vec<Point>, Trial)> {
    let queue = Arc::new(Mutex::new(trials.into_iter().collect::<VecDeque<_>>()));
    let mut set = tokio::task::JoinSet::new();
    for n in 0..lanes.len() {
        let (lanes, queue, runs) = (lanes.clone(), queue.clone(), runs.clone());
        set.spawn(async move {
            let mut done = Vec::new();
            loop {
                let Some(crashes) = queue.lock().unwrap().pop_front() else {
                    return done;
                };
                let lane = &lanes[n];
                let started = std::time::Instant::now();
                let trial = run_trial(lane, &runs, &crashes)
                    .await
                    .unwrap_or_else(|e| panic!("{e}"));
                check_trial(lane, &trial)
                    .await
                    .unwrap_or_else(|e| panic!("{e}"));
                let at: Vec<String> = trial.runs[..crashes.len()]
                    .iter()
                    .map(|run| run.last().cloned().unwrap_or_default())
                    .collect();
                eprintln!(
                    "lane {n}: crashed at {at:?}: done in {:.1} s",
                    started.elapsed().as_secs_f64()
                );
                done.push((crashes, trial));
            }
        });
    }
    let mut all = Vec::new();
    while let Some(done) = set.join_next().await {
        all.extend(done.unwrap());
    }
    all
}

async fn every_crash_point(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let (journal, _) = backend.journal(dir.path()).await;
    let mut lanes = Vec::new();
    for n in 0..LANES {
        lanes.push(Lane::new(journal.clone(), n).await);
    }
    let lanes = Arc::new(lanes);
    let stop = CancellationToken::new();
    let runs = Runs::default();
    let person = approve_everything(lanes[0].world.app.clone(), Some(runs.clone()), stop.clone());

    let baseline = run_all(&lanes, &runs, vec![vec![]]).await;
    let uncrashed = &baseline[0].1.runs[0];
    let first: Vec<Vec<Point>> = points(uncrashed).into_iter().map(|p| vec![p]).collect();
    let level1 = run_all(&lanes, &runs, first.clone()).await;

    // Crash again after each write of each distinct recovery those crashes led to,
    // named by its place in the recovery: which pending question the takeover
    // withdraws in the same append can differ (an agent's activity and its
    // permission request are written by two tasks, in either order), what the
    // recovery does after it cannot.
    let mut recoveries: BTreeSet<Vec<&str>> = BTreeSet::new();
    let mut second = Vec::new();
    for (crashes, trial) in &level1 {
        let written = recovery(&trial.runs[1]);
        let n = written.len();
        if !recoveries.insert(written) {
            continue;
        }
        for k in 1..=n {
            second.push(vec![crashes[0].clone(), Point::Recovery(k)]);
        }
    }
    let level2 = run_all(&lanes, &runs, second.clone()).await;
    stop.cancel();
    person.await.unwrap();

    let report = journal.verify().await.unwrap();
    assert_eq!(report.broken, None);
    println!(
        "crash points ({backend:?}): an uncrashed run makes {} writes at {} distinct points; \
         {} trials crashed once, at each point; {} trials crashed again during the {} distinct \
         recoveries those crashes led to, after each of their writes; all {} trials reached \
         every point they were to crash at and ended done, as the uncrashed run, with no \
         effect repeated without a person's approval",
        uncrashed.len(),
        first.len(),
        level1.len(),
        level2.len(),
        recoveries.len(),
        1 + level1.len() + level2.len(),
    );
    assert_eq!(level1.len(), first.len());
    assert!(first.len() >= 30, "too few crash points: {uncrashed:?}");
    assert_eq!(level2.len(), second.len());
    // Crashes during recovery include the one of issue #16: after `step_reconcile_started`.
    assert!(
        level2.iter().any(|(_, t)| t.runs[1]
            .last()
            .is_some_and(|s| s == "step_reconcile_started(code/1)")),
        "no trial crashed right after step_reconcile_started(code/1): {recoveries:?}"
    );
}

/// The real `kill -9` sample: the task runs in child processes (this test binary,
/// running [`crash_point_child`]), each killed with SIGKILL by the fault point right
/// after the chosen write — first during the owner's turn or the pull request, then
/// right after the probe of that crash began (issue #16) — and this process resumes
/// it to the end. The killed children's agents live on as orphans, as they would.
async fn real_kill_9(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let (journal, location) = backend.journal(dir.path()).await;
    journal.follow_other_processes().await.unwrap();
    let lane = Lane::new(journal.clone(), 0).await;
    let stop = CancellationToken::new();
    let person = approve_everything(lane.world.app.clone(), None, stop.clone());
    let samples = [
        [
            "approval_requested(code/1)",
            "step_reconcile_started(code/1)",
        ],
        [
            "agent_activity(code/1)",
            "task_leased+step_interrupted(code/1)",
        ],
        ["step_started(pr)", "step_reconcile_started(pr)"],
    ];
    for crashes in samples {
        let task = lane.task().await;
        for at in crashes {
            let spec = json!({
                "journal": location,
                "dir": lane.world.dir.path(),
                "project": lane.project,
                "forge": lane.forge.base_url(),
                "remote": lane.remote.url(),
                "task": task.as_str(),
                "at": at,
            });
            let out = tokio::process::Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "suite::crash_points::crash_point_child",
                    "--ignored",
                    "--nocapture",
                ])
                .env("GAFFER_CRASH_CHILD", spec.to_string())
                .output()
                .await
                .unwrap();
            use std::os::unix::process::ExitStatusExt;
            assert_eq!(
                out.status.signal(),
                Some(9),
                "the child was to be killed after {at}: {}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let stand = Stand::new(&gaffer_engine::this_process(Duration::ZERO).host);
        let engine = lane.world.engine_on(journal.clone());
        let stage = engine
            .run_one(&task, &stand.me, CancellationToken::new())
            .await
            .unwrap();
        drop(stand);
        assert_eq!(
            stage,
            Some(gaffer_core::Stage::Done),
            "after kills at {crashes:?}"
        );
        let trial = Trial {
            task,
            runs: crashes.iter().map(|c| vec![(*c).to_owned()]).collect(),
        };
        check_trial(&lane, &trial)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        println!("kill -9 ({backend:?}) after {crashes:?}, then resumed: done, no effect repeated without a person's approval");
    }
    stop.cancel();
    person.await.unwrap();
    assert_eq!(journal.verify().await.unwrap().broken, None);
}

/// A child process of [`real_kill_9`]: runs the task it is given on the shared
/// journal until the fault point kills it (`kill -9` of this very process).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a child process of the real kill -9 tests, started by them"]
async fn crash_point_child() {
    let spec: Value = serde_json::from_str(&std::env::var("GAFFER_CRASH_CHILD").unwrap()).unwrap();
    let text = |k: &str| spec[k].as_str().unwrap().to_owned();
    let journal = gaffer_store::open(&text("journal"), gaffer_store::Durability::Normal)
        .await
        .unwrap();
    // The person's decisions come from the parent process.
    journal.follow_other_processes().await.unwrap();
    let ship = shipping(ForgeKind::Gitea, &text("forge"), &text("remote"), TOKEN);
    let settings = World::settings(std::path::Path::new(&text("dir")), |s| {
        s.shipping.insert(text("project"), ship);
    });
    let point = Point::After {
        signature: text("at"),
        occurrence: 1,
    };
    let faulty = Faulty::new(journal, Some(point), Death::Kill9);
    let app = App::new(faulty, gaffer_app::Policy::default());
    let engine = gaffer_engine::Engine::new(app, World::agents(&settings), settings);
    let me = gaffer_engine::this_process(Duration::from_secs(30));
    let ended = engine
        .run_one(&TaskId(text("task")), &me, CancellationToken::new())
        .await;
    panic!("the run ended ({ended:?}) before writing {}", text("at"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_real_kill_9_after_a_write_and_during_its_recovery_ends_done_sqlite() {
    real_kill_9(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_real_kill_9_after_a_write_and_during_its_recovery_ends_done_postgres() {
    if Backend::Postgres.available() {
        real_kill_9(Backend::Postgres).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_crash_point_ends_as_without_the_crash_sqlite() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(
            "gaffer_store::lock=debug,warn",
        ))
        .with_writer(std::io::stderr)
        .try_init();
    every_crash_point(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_crash_point_ends_as_without_the_crash_postgres() {
    if Backend::Postgres.available() {
        every_crash_point(Backend::Postgres).await;
    }
}
