//! The command line, as clap sees it. `--help` on any command teaches its use.

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// gaffer runs a team of AI coding agents on your repositories: a planner breaks a
/// request down, an owner codes in its own git worktree, a read-only reviewer
/// checks the work, an arbiter settles deadlocks, your checks run, and the
/// result ships as a branch. Every step is journaled, so a crash never loses
/// work or repeats an effect.
#[derive(Debug, Parser)]
#[command(name = "gaffer", version = crate::VERSION, about, long_about = None, max_term_width = 100)]
#[command(
    after_help = "Start with `gaffer init`, then `gaffer doctor`.\nExit codes: 0 ok, 1 failed, 2 usage, 78 configuration or precondition, 130 interrupted (Ctrl-C)."
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

/// Options every command honours.
#[derive(Debug, Args)]
pub struct Global {
    /// Config file [default: $XDG_CONFIG_HOME/gaffer/config.toml]
    #[arg(long, global = true, env = "GAFFER_CONFIG", value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Where the journal and worktrees live [default: $XDG_DATA_HOME/gaffer]
    #[arg(long, global = true, env = "GAFFER_DATA_DIR", value_name = "PATH")]
    pub data_dir: Option<PathBuf>,
    /// The journal: a file path, sqlite://PATH, or postgres://USER:PASSWORD@HOST:PORT/DB
    /// to share one PostgreSQL between gaffer processes on many machines
    /// [env: GAFFER_DATABASE_URL; default: <data-dir>/gaffer.db]
    #[arg(long, global = true, value_name = "URL")]
    pub db: Option<String>,
    /// Say more: -v info, -vv debug, -vvv trace (over RUST_LOG, GAFFER_LOG and log.level)
    #[arg(short, long, global = true, action = clap::ArgAction::Count, conflicts_with = "quiet")]
    pub verbose: u8,
    /// Say less: errors only, no live progress (questions are still asked)
    #[arg(short, long, global = true)]
    pub quiet: bool,
    /// Log lines on stderr as text for people, or as JSON objects (one a line, with
    /// the `task_id` and `step_id` of the work they belong to in `spans`) for a log
    /// collector
    #[arg(
        long,
        global = true,
        value_enum,
        env = "GAFFER_LOG_FORMAT",
        default_value = "text"
    )]
    pub log_format: LogFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One line per event, for people.
    Text,
    /// One JSON object per event: timestamp, level, target, fields, spans.
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Write a commented config file with every setting and its default, and the
    /// approval policy (policy.toml: expiry, auto-approve rules, API tokens) next to it.
    Init(InitArgs),
    /// Index a repository: files, languages, definitions, references, imports.
    /// Only changed files are parsed again; the index is cached in the journal's database.
    Index(gaffer_index::cli::IndexArgs),
    /// Choose the files a task needs within a token budget, with the reason for each.
    ///
    /// `--json` prints {"budget","used","files":[{"path","tokens","mode","score","reasons"}]}
    /// in rank order; `--pack` prints what an agent would be given.
    Context(gaffer_index::cli::ContextArgs),
    /// Register repositories (projects) and list them.
    #[command(subcommand)]
    Project(ProjectCommand),
    /// Run one request in the foreground: plan, code, review, check, ship a branch.
    ///
    /// Progress is shown live; approvals are asked on this terminal (or decided with
    /// `gaffer approve` elsewhere). Ctrl-C stops the agents, keeps the worktree and
    /// marks the task cancelled.
    Run(RunArgs),
    /// Check the config, the journal, git, and which agents and API keys are available.
    /// Changes nothing; exits 78 when something must be fixed before a task can run.
    Doctor(JsonFlag),
    /// List and inspect tasks.
    #[command(subcommand)]
    Task(TaskCommand),
    /// A project's memory: notes (conventions, lessons learned) every role of every
    /// task gets at the start of its prompt, at most 8 KiB. Kept in the data dir
    /// (`<data dir>/memory/PROJECT.md`), outside every worktree: agents only
    /// propose additions (a fenced `memory` block), which a person approves.
    #[command(subcommand)]
    Memory(MemoryCommand),
    /// Check or repair the journal.
    #[command(subcommand)]
    Journal(JournalCommand),
    /// Move the journal between databases (SQLite to PostgreSQL when adding machines).
    #[command(subcommand)]
    Db(DbCommand),
    /// Back up a SQLite journal into a new file while gaffer runs: the copy is the
    /// journal as of one commit (every task's chain and state together). For a
    /// PostgreSQL journal this tells you the `pg_dump` command instead.
    ///
    /// `--json` prints {"path","bytes","schema_version","streams","events"}.
    Backup(BackupArgs),
    /// Restore a backup made by `gaffer backup` as the journal (--data-dir or --db).
    /// Refused if that journal holds any event; the restored copy is migrated to
    /// this gaffer's schema and must verify (every hash chain, every projection)
    /// before it takes the journal's place. The backup file itself is not changed.
    ///
    /// `--json` prints {"path","backup_schema_version","schema_version","streams","events"}.
    Restore(BackupArgs),
    /// List approvals waiting for a decision (every approval with --all).
    Approvals(ApprovalsArgs),
    /// Show one approval: what is asked (the plan, the command and why, the diff),
    /// its state, who decided, and when it expires.
    #[command(subcommand)]
    Approval(ApprovalCommand),
    /// Approve a pending approval. Exits 1 if another decision came first.
    Approve(ApproveArgs),
    /// Deny a pending approval. Exits 1 if another decision came first.
    Deny(DecideArgs),
    /// Turn a project's auto-approve toggle on or off.
    Auto(AutoArgs),
    /// Send a message to a task's running agent: it gets it in its current turn
    /// (Claude Code, Codex, ACP agents, the built-in loop each as their protocol
    /// allows) or as its next turn, exactly once, also if gaffer restarts meanwhile.
    /// Recorded with who sent it. Exits 78 when no agent of the task runs now.
    ///
    /// `--json` prints {"id","task_id","text","by":{"kind","name","via"},"sent_at","delivery","delivered_at"}.
    Say(SayArgs),
    /// Stop the running turn of a task's agent without cancelling the task: the
    /// agent keeps its work and conversation and waits; the next `gaffer say` starts
    /// its next turn (`gaffer say TASK continue` to just go on). Exits 78 when no
    /// agent of the task runs now or it is already stopped.
    ///
    /// `--json` prints {"task_id","session_id","by":{"kind","name","via"},"next"}.
    Interrupt(TaskIdArgs),
    /// Watch a task's agent live from any terminal: the current session's transcript
    /// (assistant text, tool calls, approvals, messages) so far, then as it happens,
    /// wherever the task runs. Each line you type is sent to the agent as a message
    /// (as `gaffer say`). Ctrl-C detaches and exits 0; the task goes on. Exits 0 when
    /// the task ends, 78 if it already has.
    ///
    /// `--json` prints the events as JSON Lines (the API's event-stream shape) instead.
    Attach(AttachArgs),
    /// Serve the HTTP API, live event streams and the web page on one port
    /// (with workers, like `gaffer worker`).
    Serve(ServeArgs),
    /// Remove the worktrees of finished tasks (done, cancelled, failed, blocked) older
    /// than the retention (`[worktrees] retention_days`), prune task branches whose
    /// pull request was merged or closed, delete the local branches of tasks that
    /// ended without shipping, and report the disk space reclaimed. A done task's
    /// branch without a pull request is its result: it is kept.
    ///
    /// `--json` prints {"dry_run","retention_days","worktrees":[{"task","path","bytes"}],
    /// "branches":[{"task","branch","pull_request","pr_state","remote","local"}],
    /// "bytes_reclaimed","errors"}. Exits 1 if anything could not be cleaned.
    Gc(GcArgs),
    /// Print who decided what, and from where: task creations and cancellations,
    /// approval decisions, auto-approve toggles (from the journal, oldest first).
    ///
    /// `--json` prints [{"pos","at","stream_id","action","subject","by":{"kind","name","via"},"note"}].
    Audit(AuditArgs),
    /// Make API tokens for `gaffer serve` (only their SHA-256 is stored).
    #[command(subcommand)]
    Token(TokenCommand),
    /// Print a new login link for the web page of `gaffer serve` on this machine.
    ///
    /// The link logs a browser in as you (the page then keeps a signed session for
    /// 30 days, across server restarts); it works once, within 24 hours. Scripts use
    /// the local secret itself: `Authorization: Bearer $(cat <data dir>/local-secret)`.
    /// `--json` prints {"link","expires_at","secret_file"}.
    LoginLink(LoginLinkArgs),
    /// Run `gaffer serve` (or `gaffer worker`) as a systemd service: install writes
    /// the unit (restart on failure with a growing delay, never after exit 78, secrets
    /// from an environment file, logs in journald) and starts it; status shows its
    /// state and last errors. Without systemd the unit is printed (exit 78).
    #[command(subcommand)]
    Service(ServiceCommand),
    /// Run tasks without HTTP. Start as many as you like, on as many machines as
    /// share the database: each leases tasks, and takes over a dead worker's tasks
    /// once their leases expire (workers.lease_secs).
    Worker(WorkerArgs),
    /// List the schedules (`[[schedules]]` in the config file, and those added with
    /// `gaffer schedules add`): each one's cron expression, project, next run (in
    /// this machine's local time and how soon) and the task its last run made, with
    /// that task's stage. `add` and `remove` change the schedules kept in the
    /// journal's database while gaffer runs (like `POST /api/schedules`): every
    /// `gaffer serve` and `gaffer worker` on this journal picks a change up within
    /// seconds.
    ///
    /// Schedules run in `gaffer serve` and `gaffer worker`; each slot makes one task,
    /// however many of them run.
    ///
    /// `--json` prints [{"name","cron","tz","project","request","agent","missed",
    /// "next_slot","next_at","last_slot","last_task":{"id","stage","created_at"}}]
    /// (`GET /api/schedules` answers the same). Exits 78 when the config is invalid.
    #[command(after_long_help = schedules_help(), args_conflicts_with_subcommands = true)]
    Schedules(SchedulesArgs),
    /// List live workers, the tasks they hold and their last heartbeats.
    ///
    /// `--json` prints [{"id","host","pid","lease_ms","started_at","heartbeat_at",
    /// "stopped_at","tasks_run","failures","alive","leases":[{"task_id","worker_id",
    /// "generation","acquired_at","expires_at"}]}].
    Workers(WorkersArgs),
    /// Print a shell completion script: `gaffer completions bash > ~/.local/share/bash-completion/completions/gaffer`,
    /// `gaffer completions zsh > ~/.zfunc/_gaffer`, `gaffer completions fish > ~/.config/fish/completions/gaffer.fish`.
    Completions(CompletionsArgs),
    /// Write the manual pages (gaffer.1 and one per command) into a directory,
    /// e.g. `gaffer man ~/.local/share/man/man1`, or print gaffer.1 with no directory.
    Man(ManArgs),
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Where to write the pages; without it gaffer.1 is printed.
    pub dir: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum ApprovalCommand {
    /// Show one approval (`ap-…` or a unique start of it).
    Show(ApprovalShowArgs),
}

#[derive(Debug, Args)]
pub struct ApprovalShowArgs {
    /// The approval id, or a unique start of it (as `gaffer approvals` prints it).
    pub id: String,
    /// Print JSON for scripts instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct LoginLinkArgs {
    /// The server's address [default: where the `gaffer serve` of this data dir
    /// listens, else server.listen from the config, 127.0.0.1:7777].
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// Print JSON for scripts instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct GcArgs {
    /// Say what would be removed, remove nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print JSON for scripts instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct AuditArgs {
    /// Only this task's trail (`t-…`).
    #[arg(long, value_name = "ID")]
    pub task: Option<String>,
    /// Print JSON for scripts instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// Tasks this process runs at once [default: workers.count].
    #[arg(long, value_name = "N")]
    pub count: Option<usize>,
    /// Tasks of one project this process runs at once [default: workers.per_project].
    #[arg(long, value_name = "N")]
    pub per_project: Option<usize>,
}

#[derive(Debug, Args)]
pub struct WorkersArgs {
    /// Stopped and lost workers too, not only live ones.
    #[arg(long)]
    pub all: bool,
    /// Print JSON for scripts instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Generate a random token: prints the secret once (give it to its holder) and the
    /// `[[tokens]]` entry for policy.toml, which keeps only its SHA-256.
    New(TokenNewArgs),
}

#[derive(Debug, Args)]
pub struct TokenNewArgs {
    /// Who holds it; recorded as the person behind every decision made with it.
    pub name: String,
    /// What it may do.
    #[arg(long, value_enum, default_value = "viewer")]
    pub role: TokenRole,
    /// Print {"name","role","secret","secret_sha256"} as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TokenRole {
    /// Reads everything.
    Viewer,
    /// Also decides approvals and creates, cancels and retries tasks.
    Approver,
    /// Also registers projects and flips auto-approve.
    Admin,
}

#[derive(Debug, Args)]
pub struct ApprovalsArgs {
    /// Every approval, newest first, not only pending ones.
    #[arg(long)]
    pub all: bool,
    /// Print JSON for scripts instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DecideArgs {
    /// The approval id (`ap-…`, or a unique start of it, as `gaffer approvals` prints it).
    pub id: String,
    /// Why; recorded and shown to the agent.
    #[arg(long)]
    pub note: Option<String>,
    /// Print the approval as recorded, as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ApproveArgs {
    #[command(flatten)]
    pub decide: DecideArgs,
    /// Allow for this task: also approve, when they are asked, later requests of
    /// the same task to run exactly this command with the same tool. Only for
    /// tool approvals that name a command; never other tasks.
    #[arg(long)]
    pub for_task: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OnOff {
    /// Approve every plan, tool and ship request of the project by policy.
    On,
    /// Ask a person again.
    Off,
}

#[derive(Debug, Args)]
pub struct AutoArgs {
    /// on or off.
    pub state: OnOff,
    /// The project (name or id); needed when more than one is registered.
    #[arg(long)]
    pub project: Option<String>,
    /// Print the project as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on [default: server.listen from the config, 127.0.0.1:7777].
    /// Anything but loopback needs a token in policy.toml.
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// Tasks this process runs at once, like `gaffer worker --count` [default:
    /// workers.count]. 0 serves the API and the page only (a front node, with
    /// `gaffer worker` processes elsewhere running the tasks).
    #[arg(long, value_name = "N")]
    pub workers: Option<usize>,
}

#[derive(Debug, Subcommand)]
pub enum ProjectCommand {
    /// Register a git repository by its physical path; the check command is detected
    /// (cargo test, npm test, pytest, go test ./..., make check) unless --check names it.
    Add(ProjectAddArgs),
    /// List registered projects.
    List(JsonFlag),
}

#[derive(Debug, Args)]
pub struct SchedulesArgs {
    /// Add or remove one; without, list them.
    #[command(subcommand)]
    pub command: Option<SchedulesCommand>,
    /// Print JSON for scripts instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum SchedulesCommand {
    /// Add a schedule. Each slot of --cron becomes one task of --project asking
    /// --request. Example: `gaffer schedules add nightly-deps --cron "0 3 * * *"
    /// --tz Europe/Berlin --project api --request "update the dependencies and fix
    /// what breaks"`. A bad value exits 2 naming the option; a name the config or
    /// another added schedule has exits 1.
    Add(ScheduleAddArgs),
    /// Remove a schedule added with `gaffer schedules add` (or the API): it stops
    /// in every scheduler; the tasks it made stay. The config's schedules are
    /// removed in the config file.
    Remove(ScheduleRemoveArgs),
}

#[derive(Debug, Args)]
pub struct ScheduleAddArgs {
    /// Unique among schedules: letters, digits, - and _ (at most 64).
    pub name: String,
    /// 5 fields (minute hour day-of-month month day-of-week: "0 3 * * *" is 03:00
    /// every day), or 6 with seconds first; @daily, @hourly and the like too.
    #[arg(long)]
    pub cron: String,
    /// The IANA time zone the fields are read in, like Europe/Berlin [default: UTC].
    #[arg(long)]
    pub tz: Option<String>,
    /// The project its tasks run in (`gaffer project list`).
    #[arg(long)]
    pub project: String,
    /// What each task asks for, in words.
    #[arg(long)]
    pub request: String,
    /// The agent for every role (claude, codex, gemini, openai, anthropic,
    /// acp:NAME) [default: the configured ones].
    #[arg(long)]
    pub agent: Option<String>,
    /// Slots that passed while no scheduler ran: skip drops them, run_once makes
    /// one task for the newest.
    #[arg(long, default_value = "skip")]
    pub missed: String,
    /// Print JSON (the schedule as `POST /api/schedules` answers it).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ScheduleRemoveArgs {
    /// The schedule's name.
    pub name: String,
    /// Print JSON ({"removed","removed_by","removed_at"}).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum MemoryCommand {
    /// Print the project's memory (`--json`: {"project","path","text","bytes","limit"}).
    Show(MemoryArgs),
    /// Edit the project's memory in $VISUAL or $EDITOR (default `vi`); what you save
    /// is what every later prompt gets. Refused (exit 78) when it is over the limit.
    Edit(MemoryArgs),
    /// Add an entry at the end of the project's memory. Exits 78 when it would go
    /// over the limit.
    Add(MemoryAddArgs),
}

#[derive(Debug, Args)]
pub struct MemoryArgs {
    /// The project's name (`gaffer project list`).
    pub project: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct MemoryAddArgs {
    /// The project's name (`gaffer project list`).
    pub project: String,
    /// The entry, e.g. "Run `make lint` before committing: CI fails on warnings."
    pub text: String,
    /// Print JSON (as `gaffer memory show --json`).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ProjectAddArgs {
    /// The repository (any path inside it).
    pub path: PathBuf,
    /// Short unique name [default: the directory's name].
    #[arg(long)]
    pub name: Option<String>,
    /// The command that checks the project, run in the task's worktree.
    #[arg(long)]
    pub check: Option<String>,
    /// Print JSON for scripts instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// What to do, in words (an issue, a bug report, a feature request).
    #[arg(required_unless_present = "issue", conflicts_with = "issue")]
    pub request: Option<String>,
    /// Start from a forge issue instead (https://HOST/OWNER/REPO/issues/N, OWNER/REPO#N
    /// or N): its title and body are the request, and once shipped the issue gets a
    /// comment with the pull request's link. Needs [projects.<name>.forge] in the config.
    #[arg(long, value_name = "URL")]
    pub issue: Option<String>,
    /// The repository to work on; registered as a project if it is not yet.
    #[arg(long, default_value = ".", conflicts_with = "project")]
    pub repo: PathBuf,
    /// A registered project (name or id) instead of --repo.
    #[arg(long)]
    pub project: Option<String>,
    /// Put every role on this backend: claude, codex, gemini, acp:<name>, openai, anthropic.
    #[arg(long)]
    pub agent: Option<String>,
    /// Branch to start from [default: the project's default branch].
    #[arg(long)]
    pub base: Option<String>,
    /// Approve the plan and every permission request automatically (each recorded
    /// in the journal as approved by policy).
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Start only after this task of the same project is done (its id or a unique
    /// start of it; repeat for several). Until then the task waits, shown as
    /// `waiting`; if one fails, is cancelled or is blocked, this one is blocked.
    #[arg(long, value_name = "ID")]
    pub after: Vec<String>,
    /// Stream JSON Lines on stdout: one object per journal event as it is recorded
    /// ({"pos","stream_id","seq","at","type","event"}, the shape of the API's event
    /// stream), then a last line {"type":"summary","task_id","state","branch",
    /// "commits","tokens","cost_usd","pull_request","note","reason"}.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct TaskIdArgs {
    /// The task id, or a unique start of it (as `gaffer task list` prints it).
    pub id: String,
    /// Print JSON for scripts instead of text (`task resume`: JSON Lines, like `gaffer run --json`).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct AttachArgs {
    /// The task id, or a unique start of it (as `gaffer task list` prints it).
    pub id: String,
    /// JSON Lines on stdout, one object per event, instead of the view on stderr.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct SayArgs {
    /// The task id, or a unique start of it (as `gaffer task list` prints it).
    pub id: String,
    /// What to tell the agent (the words are joined with spaces).
    #[arg(required = true, num_args = 1.., value_name = "TEXT")]
    pub text: Vec<String>,
    /// Print JSON for scripts instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct InitArgs {
    /// Overwrite existing config and policy files.
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct JsonFlag {
    /// Print JSON for scripts instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum TaskCommand {
    /// List tasks, newest first.
    List(TaskListArgs),
    /// Show one task: stage, steps, approvals, sessions.
    Show(TaskShowArgs),
    /// Cancel a task; a running engine stops its agents and keeps the worktree.
    Cancel(TaskIdArgs),
    /// Queue a failed, cancelled or blocked task again, as a new task.
    Retry(TaskIdArgs),
    /// Continue an unfinished task here, in the foreground (after a crash, or to take
    /// it over from a stopped server). Steps that finished are not redone.
    Resume(TaskIdArgs),
}

#[derive(Debug, Args)]
pub struct TaskListArgs {
    /// Only tasks of this project (name or id).
    #[arg(long)]
    pub project: Option<String>,
    /// Only tasks in this stage (queued, coding, done, failed, …).
    #[arg(long)]
    pub stage: Option<String>,
    /// At most this many.
    #[arg(long, default_value_t = 50)]
    pub limit: i64,
    /// Print JSON for scripts instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct TaskShowArgs {
    /// The task id, or a unique start of it (as `gaffer task list` prints it).
    pub id: String,
    /// Print JSON for scripts instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum DbCommand {
    /// Copy every event of one journal into an empty one, checking every hash chain
    /// on the way; the copy then verifies. Example:
    /// `gaffer db copy --from ~/.local/share/gaffer/gaffer.db --to postgres://gaffer:PASSWORD@db:5432/gaffer`
    Copy(DbCopyArgs),
}

#[derive(Debug, Subcommand)]
pub enum ServiceCommand {
    /// Write the unit and the environment file (kept if it exists, mode 600), then
    /// enable and start it. `--json` prints {"action","unit","unit_path","env_file",
    /// "systemd","done","text","note"}.
    Install(ServiceArgs),
    /// Stop, disable and remove the unit (the environment file is kept).
    Uninstall(ServiceArgs),
    /// Whether it runs, its last exit status and restarts, and its last warnings and
    /// errors from journald. Exits 1 when installed but not active, 78 when not installed.
    Status(ServiceArgs),
}

#[derive(Debug, Args)]
pub struct ServiceArgs {
    /// A user unit (`systemctl --user`, in ~/.config/systemd/user) instead of a
    /// system one (/etc/systemd/system, needs root).
    #[arg(long)]
    pub user: bool,
    /// The unit for `gaffer worker` (gaffer-worker.service) instead of `gaffer serve`.
    #[arg(long)]
    pub worker: bool,
    /// Print JSON for scripts instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct BackupArgs {
    /// The backup file (`gaffer backup`: a new file; it is never overwritten).
    pub path: PathBuf,
    /// Print JSON for scripts instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DbCopyArgs {
    /// The journal to copy: a file path, sqlite://PATH or postgres://…
    #[arg(long, value_name = "URL")]
    pub from: String,
    /// Where to copy it: must hold no events yet (a new file or an empty database).
    #[arg(long, value_name = "URL")]
    pub to: String,
    /// Print JSON for scripts instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum JournalCommand {
    /// Check every hash chain, replay every stream, and compare the projections
    /// with a rebuild. Exits 1 naming the first broken task and seq.
    Verify(JsonFlag),
    /// Recompute every projection from the events alone.
    Rebuild(JsonFlag),
}

/// What to write in the config file to add a schedule (`gaffer schedules --help`,
/// and `gaffer schedules` when none is configured).
pub const SCHEDULE_EXAMPLE: &str = r#"[[schedules]]
name = "nightly-deps"             # unique: letters, digits, - and _
cron = "0 3 * * *"                # 03:00 every day (minute hour day-of-month month day-of-week)
tz = "Europe/Berlin"              # the time zone cron is read in; default UTC
project = "myapp"                 # a registered project (`gaffer project list`)
request = "Update the dependencies and fix what breaks""#;

/// The example, indented, after `gaffer schedules --help`.
fn schedules_help() -> String {
    let example: Vec<String> = SCHEDULE_EXAMPLE.lines().map(|l| format!("  {l}")).collect();
    format!(
        "To add a schedule, put in the config file (`gaffer init` writes one with every field explained):\n\n{}",
        example.join("\n")
    )
}
