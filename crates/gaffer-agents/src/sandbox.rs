//! The kernel sandbox (Linux Landlock) around every agent process, every command the
//! built-in agent's `run` tool starts and every command gaffer runs in a worktree (the
//! project's check).
//!
//! Prompts and tool flags ask an agent to behave; the sandbox makes the kernel refuse
//! when it does not. The rules are built in the parent (opening the path fds, creating
//! the rulesets) and only *applied* between fork and exec ([`confine`]), where a
//! multi-threaded parent must not allocate: the child and everything it starts keep
//! them. What a confined process may do:
//!
//! * read and execute only an allowlist ([`base_readable`]): system directories,
//!   toolchains (the directories on `PATH`, `~/.cargo`, `~/.rustup`, `~/.nvm`, ...), the
//!   agent's own installation, the repository and the worktree, its own state and temp
//!   dirs, and `[sandbox] readable`. `~/.ssh`, other dotfiles and gaffer's data dir,
//!   config and policy ([`Sandbox::protected`]) are not on it;
//! * write only under its [`Confinement::writable`] directories: the task worktree for
//!   an owner (never for a reviewer or arbiter), a private temp dir (`TMPDIR`), the
//!   agent CLI's own state dir, and `[sandbox] writable` from the config — plus the
//!   usual character devices (`/dev/null`, `/dev/tty`, ...);
//! * never connect to gaffer's own API port ([`Sandbox::private_ports`]), whatever the
//!   network setting; with `network = "off"`, no TCP `bind` and no TCP `connect` except
//!   to the ports in [`Confinement::connect_ports`] (an agent CLI's HTTPS to its own
//!   provider) — where the kernel's Landlock ABI has network rules (ABI 4, Linux 6.7);
//! * not signal, nor connect to the abstract unix sockets of, any process outside its
//!   sandbox (gaffer, its supervisor, the user's other programs) — where the kernel has
//!   Landlock scoping (ABI 6, Linux 6.12).
//!
//! Symlinks do not help an agent escape: Landlock checks the file a path resolves to.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use landlock::{
    Access, AccessFs, AccessNet, CompatLevel, Compatible, NetPort, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreated, RulesetCreatedAttr, Scope, ABI,
};

use crate::error::{AgentError, Result};

/// Whether agents run confined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxMode {
    /// Confine when the kernel can; otherwise warn once and run unconfined.
    Auto,
    /// Confine, or refuse to start the agent (the task is told why).
    Required,
    /// Never confine.
    #[default]
    Off,
}

impl SandboxMode {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Required => "required",
            Self::Off => "off",
        }
    }
}

/// The sandbox settings (from `[sandbox]` in the config), the same for every agent.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Sandbox {
    /// Whether to confine.
    pub mode: SandboxMode,
    /// `false` (`network = "off"`): no TCP bind/connect (see the module docs).
    pub network: bool,
    /// Extra directories every agent may write (build caches such as `~/.cargo`).
    pub writable: Vec<PathBuf>,
    /// Extra directories (or files) every agent may read, beyond [`base_readable`].
    pub readable: Vec<PathBuf>,
    /// TCP ports no confined process may connect to, whatever `network` says: gaffer's
    /// own API, so an agent cannot call it.
    pub private_ports: Vec<u16>,
    /// Paths no rule may make readable: gaffer's data dir, config and policy. A
    /// directory on the allowlist that contains one is left out (see [`preflight`]).
    pub protected: Vec<PathBuf>,
}

impl Sandbox {
    /// Confine as well as the kernel allows, network on.
    pub fn auto() -> Self {
        Self {
            mode: SandboxMode::Auto,
            network: true,
            ..Self::default()
        }
    }
}

/// What the running kernel offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Support {
    /// The Landlock ABI version, `None` when the kernel has no Landlock (or it is disabled).
    pub abi: Option<i32>,
}

impl Support {
    /// Filesystem rules work (ABI 1+; ABI 3 also covers truncation).
    pub fn filesystem(self) -> bool {
        self.abi.is_some_and(|v| v >= 1)
    }

    /// TCP bind/connect rules work (ABI 4+).
    pub fn network(self) -> bool {
        self.abi.is_some_and(|v| v >= 4)
    }

    /// Signals and abstract unix sockets can be scoped to the sandbox (ABI 6+).
    pub fn scoping(self) -> bool {
        self.abi.is_some_and(|v| v >= 6)
    }

    /// One line for `gaffer doctor` and the start-up warning.
    pub fn describe(self) -> String {
        match self.abi {
            None => "Landlock is not available in this kernel (not built in, or not enabled with lsm=landlock); agents cannot be confined".into(),
            Some(v) if v < 4 => format!("Landlock ABI {v}: files are confined; network rules need ABI 4 (Linux 6.7), signal scoping ABI 6 (Linux 6.12)"),
            Some(v) if v < 6 => format!("Landlock ABI {v}: files and TCP are confined; signal and abstract-socket scoping need ABI 6 (Linux 6.12)"),
            Some(v) => format!("Landlock ABI {v}: files, TCP, signals and abstract unix sockets are confined"),
        }
    }
}

/// Ask the kernel which Landlock ABI it has (cached: it cannot change while running).
pub fn support() -> Support {
    static SUPPORT: OnceLock<Support> = OnceLock::new();
    *SUPPORT.get_or_init(|| Support {
        abi: kernel_abi().filter(|v| *v >= 1),
    })
}

#[allow(unsafe_code)]
fn kernel_abi() -> Option<i32> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: landlock_create_ruleset with a null attribute, size 0 and the VERSION flag
    // only returns the ABI version (or an error); it touches no memory of ours.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    i32::try_from(v).ok().filter(|v| *v > 0)
}

/// Devices every process expects to write (discarding output, its terminal).
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
    "/dev/shm",
];

/// System directories every confined process may read and execute (when they exist).
const SYSTEM_READABLE: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/nix", "/gnu",
    "/snap", "/proc", "/sys", "/dev",
];

/// Toolchains and package caches under `$HOME` every confined process may read.
const HOME_TOOLCHAINS: &[&str] = &[
    ".cargo",
    ".rustup",
    ".nvm",
    ".npm",
    ".npm-global",
    ".local/bin",
    ".local/lib",
    ".pyenv",
    ".rbenv",
    ".volta",
    ".bun",
    ".deno",
    "go",
    ".sdkman",
    ".gradle",
    ".m2",
];

/// Ports a confined agent CLI may still connect to with `network = "off"`: HTTPS, so it
/// can reach its own model provider. The built-in agent's commands get none.
pub const AGENT_CLI_PORTS: &[u16] = &[443];

/// What every confined process may read: [`SYSTEM_READABLE`], the directory holding
/// `/etc/resolv.conf`'s target (name resolution), the toolchains under `$HOME`, the
/// directories on `PATH` and `[sandbox] readable` — minus any directory that is `/`,
/// contains `$HOME` or a [`Sandbox::protected`] path (it would expose them).
pub fn base_readable(s: &Sandbox) -> Vec<PathBuf> {
    let home = crate::process::home_dir();
    let mut out: Vec<PathBuf> = SYSTEM_READABLE.iter().map(PathBuf::from).collect();
    if let Some(dir) = std::fs::canonicalize("/etc/resolv.conf")
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
    {
        out.push(dir);
    }
    if !home.as_os_str().is_empty() {
        out.extend(HOME_TOOLCHAINS.iter().map(|d| home.join(d)));
    }
    if let Some(path) = std::env::var_os("PATH") {
        out.extend(std::env::split_paths(&path).filter(|p| p.is_absolute()));
    }
    out.retain(|p| p.exists() && !exposes_protected(p, s, &home));
    out.extend(s.readable.iter().cloned());
    out.sort();
    out.dedup();
    out
}

/// The physical path, or the path as given when it cannot be resolved.
fn physical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// The protected path (or `$HOME`) that allowing `dir` would expose, if any.
fn exposed_by(dir: &Path, s: &Sandbox, home: &Path) -> Option<PathBuf> {
    let dir = physical(dir);
    if dir == Path::new("/") {
        return Some(PathBuf::from("/"));
    }
    if !home.as_os_str().is_empty() && physical(home).starts_with(&dir) {
        return Some(home.to_path_buf());
    }
    s.protected
        .iter()
        .find(|p| physical(p).starts_with(&dir))
        .cloned()
}

fn exposes_protected(dir: &Path, s: &Sandbox, home: &Path) -> bool {
    exposed_by(dir, s, home).is_some()
}

/// Where an executable is installed, to be readable by the process it becomes: the
/// `node_modules` holding the npm package it belongs to (Claude Code, Codex, Gemini CLI:
/// an entry script beside vendored binaries and dependencies), else the nearest
/// directory above it holding a `package.json`, else its
/// own directory — or only the file when that directory would expose `$HOME` or a
/// protected path.
pub fn install_root(program: &Path, s: &Sandbox) -> Option<PathBuf> {
    let real = std::fs::canonicalize(program).ok()?;
    let home = crate::process::home_dir();
    let package = real
        .ancestors()
        .skip(1)
        .take(4)
        .find(|d| d.join("package.json").is_file());
    // An npm package's vendored binaries may live in sibling packages (Codex's
    // `@openai/codex-linux-x64` beside `@openai/codex`): the `node_modules` holding it.
    let modules = package.and_then(|p| {
        p.ancestors()
            .skip(1)
            .take(2)
            .find(|d| d.file_name().is_some_and(|n| n == "node_modules"))
    });
    let dir = modules.or(package).or_else(|| real.parent())?;
    if exposes_protected(dir, s, &home) {
        Some(real)
    } else {
        Some(dir.to_path_buf())
    }
}

/// A sandbox rule this kernel or this machine cannot apply, and what to change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleProblem {
    /// The rule, as the config names it (`sandbox.writable`, `sandbox.network`, ...).
    pub rule: String,
    /// What is wrong and what to do.
    pub problem: String,
}

impl std::fmt::Display for RuleProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.rule, self.problem)
    }
}

/// Every rule of `s` that cannot be applied here: under `mode = "required"` gaffer
/// refuses to start (exit 78), under `auto` it warns and confines as well as it can.
pub fn preflight(s: &Sandbox, support: Support) -> Vec<RuleProblem> {
    let mut out = Vec::new();
    let mut problem = |rule: &str, problem: String| {
        out.push(RuleProblem {
            rule: rule.into(),
            problem,
        })
    };
    if s.mode == SandboxMode::Off {
        return out;
    }
    if !support.filesystem() {
        problem(
            "sandbox.mode",
            format!(
                "{}; boot a kernel with Landlock (lsm=landlock), or set [sandbox] mode = \"auto\" to run agents unconfined",
                support.describe()
            ),
        );
        return out;
    }
    if !s.network && !support.network() {
        problem(
            "sandbox.network",
            format!(
                "\"off\" needs Landlock network rules; {}; set network = \"on\"",
                support.describe()
            ),
        );
    }
    if s.network && !s.private_ports.is_empty() && !support.network() {
        let ports: Vec<String> = s.private_ports.iter().map(u16::to_string).collect();
        problem(
            "server.listen",
            format!(
                "agents cannot be kept away from gaffer's own port {} without Landlock network rules; {}",
                ports.join(", "),
                support.describe()
            ),
        );
    }
    let home = crate::process::home_dir();
    for (rule, paths) in [
        ("sandbox.writable", &s.writable),
        ("sandbox.readable", &s.readable),
    ] {
        for p in paths {
            if PathFd::new(p).is_err() {
                problem(
                    rule,
                    format!(
                        "{} does not exist or cannot be opened; create it or remove it from the list",
                        p.display()
                    ),
                );
            } else if let Some(exposed) = exposed_by(p, s, &home) {
                problem(
                    rule,
                    format!(
                        "{} contains {}, which agents must not read; name a directory inside it instead",
                        p.display(),
                        exposed.display()
                    ),
                );
            }
        }
    }
    out
}

/// The confinement of one process: the sandbox settings plus where it may write.
#[derive(Debug, Clone)]
pub struct Confinement {
    /// The settings.
    pub sandbox: Sandbox,
    /// Directories (and files) the process may write below.
    pub writable: Vec<PathBuf>,
    /// Directories (and files) the process may read below, beyond [`base_readable`].
    pub readable: Vec<PathBuf>,
    /// With the network off: TCP ports it may still connect to.
    pub connect_ports: Vec<u16>,
}

impl Confinement {
    /// A command's confinement: `[sandbox] writable` and nothing else to write, the
    /// allowlist to read; no TCP with the network off.
    pub fn new(sandbox: &Sandbox) -> Self {
        Self {
            sandbox: sandbox.clone(),
            writable: sandbox.writable.clone(),
            readable: Vec::new(),
            connect_ports: Vec::new(),
        }
    }

    /// An agent session's confinement: the worktree when `may_write_worktree` (read
    /// otherwise), the agent's own state dirs and the configured extra dirs; HTTPS with
    /// the network off.
    pub fn for_agent(
        sandbox: &Sandbox,
        worktree: &Path,
        may_write_worktree: bool,
        state_dirs: &[PathBuf],
    ) -> Self {
        let mut c = Self::new(sandbox);
        if may_write_worktree {
            c.writable.push(worktree.to_path_buf());
        } else {
            c.readable.push(worktree.to_path_buf());
        }
        c.writable.extend(state_dirs.iter().cloned());
        c.connect_ports = AGENT_CLI_PORTS.to_vec();
        c
    }

    /// Who may write where, for messages: `worktree, /tmp/x; network off`.
    pub fn describe(&self) -> String {
        let dirs: Vec<String> = self
            .writable
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        let ports = |ports: &[u16]| {
            ports
                .iter()
                .map(u16::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        };
        let allowed = self.allowed_connect_ports();
        let net = if self.sandbox.network {
            if self.sandbox.private_ports.is_empty() {
                "network on".to_string()
            } else {
                format!(
                    "network on except gaffer's own port {}",
                    ports(&self.sandbox.private_ports)
                )
            }
        } else if allowed.is_empty() {
            "network off".to_string()
        } else {
            format!("network off except TCP connect to port {}", ports(&allowed))
        };
        format!(
            "gaffer's sandbox (Landlock) lets this process write only in {}; {net}",
            dirs.join(", ")
        )
    }

    fn allowed_connect_ports(&self) -> Vec<u16> {
        self.connect_ports
            .iter()
            .copied()
            .filter(|p| !self.sandbox.private_ports.contains(p))
            .collect()
    }
}

/// The rulesets of one process, applied in a child between fork and exec.
pub(crate) struct Prepared {
    // Taken (once) in the child; the parent's copies are closed when the Command drops.
    layers: Mutex<Option<Vec<RulesetCreated>>>,
}

/// What [`prepare`] decided.
pub(crate) enum Decision {
    /// Run unconfined (sandbox off, or `auto` on a kernel without Landlock).
    Unconfined,
    /// Apply these rules in the child.
    Confined(Arc<Prepared>),
}

/// Whether to confine, from the mode, the network setting and what the kernel offers:
/// `Ok(true)` confine, `Ok(false)` run unconfined, `Err` refuse (with what to change).
pub fn decide(
    mode: SandboxMode,
    network: bool,
    support: Support,
) -> std::result::Result<bool, String> {
    match mode {
        SandboxMode::Off => Ok(false),
        SandboxMode::Auto => Ok(support.filesystem()),
        SandboxMode::Required if !support.filesystem() => Err(format!(
            "sandbox mode is \"required\" but {}; run on a kernel with Landlock or set [sandbox] mode = \"auto\"",
            support.describe()
        )),
        SandboxMode::Required if !network && !support.network() => Err(format!(
            "sandbox mode is \"required\" with network = \"off\" but {}; set network = \"on\" or mode = \"auto\"",
            support.describe()
        )),
        SandboxMode::Required => Ok(true),
    }
}

/// Build the rules for `c` in the parent, or say why the process must not run.
pub(crate) fn prepare(c: &Confinement, agent: &str) -> Result<Decision> {
    let support = support();
    let refuse = |reason: String| AgentError::Sandbox {
        agent: agent.into(),
        reason,
    };
    if !decide(c.sandbox.mode, c.sandbox.network, support).map_err(refuse)? {
        if c.sandbox.mode == SandboxMode::Auto {
            warn_unconfined_once(support);
        }
        return Ok(Decision::Unconfined);
    }
    let ports_rule = c.sandbox.network && !c.sandbox.private_ports.is_empty();
    if ports_rule && c.sandbox.mode == SandboxMode::Required && !support.network() {
        return Err(refuse(format!(
            "sandbox mode is \"required\" but gaffer's own port cannot be closed to agents: {}",
            support.describe()
        )));
    }
    let mut layers =
        vec![build(c).map_err(|e| refuse(format!("cannot build the Landlock rules: {e}")))?];
    if ports_rule && support.network() {
        layers.push(
            private_port_layer(&c.sandbox.private_ports)
                .map_err(|e| refuse(format!("cannot build the Landlock network rules: {e}")))?,
        );
    }
    Ok(Decision::Confined(Arc::new(Prepared {
        layers: Mutex::new(Some(layers)),
    })))
}

fn warn_unconfined_once(support: Support) {
    static WARNED: OnceLock<()> = OnceLock::new();
    WARNED.get_or_init(|| {
        tracing::warn!(
            "{}; agents run UNCONFINED (set [sandbox] mode = \"required\" to refuse instead)",
            support.describe()
        );
    });
}

// ABI 3 covers every filesystem write right we rely on (including truncate); ABI 4 adds
// TCP, ABI 6 scoping (both asked for at their own ABI, best effort).
const FS_ABI: ABI = ABI::V3;
const NET_ABI: ABI = ABI::V4;

fn build(c: &Confinement) -> std::result::Result<RulesetCreated, landlock::RulesetError> {
    let all = AccessFs::from_all(FS_ABI);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)?
        .scope(Scope::Signal | Scope::AbstractUnixSocket)?;
    if !c.sandbox.network {
        ruleset = ruleset.handle_access(AccessNet::from_all(NET_ABI))?;
    }
    let mut created = ruleset.create()?;
    let read = AccessFs::from_read(FS_ABI);
    let readable = base_readable(&c.sandbox);
    let rules = readable
        .iter()
        .chain(&c.readable)
        .map(|p| (p.as_path(), read))
        .chain(
            c.writable
                .iter()
                .map(PathBuf::as_path)
                .chain(DEVICES.iter().map(Path::new))
                .map(|p| (p, all)),
        );
    for (path, access) in rules {
        // A path that does not exist cannot be opened, and needs no rule.
        if let Ok(fd) = PathFd::new(path) {
            let access = if path.is_dir() {
                access
            } else {
                access & AccessFs::from_file(FS_ABI)
            };
            created = created.add_rule(PathBeneath::new(fd, access))?;
        }
    }
    if !c.sandbox.network {
        for port in c.allowed_connect_ports() {
            created = created.add_rule(NetPort::new(port, AccessNet::ConnectTcp))?;
        }
    }
    Ok(created)
}

/// With the network on, a layer that allows TCP connect to every port but `private`.
/// Landlock only knows allow rules, so this is 65,534 of them: built once per process
/// (about 0.1 s) and shared by every confined process, each of which pays about as much
/// again, and some 4 MiB of kernel memory while it lives, to apply it.
fn private_port_layer(private: &[u16]) -> std::result::Result<RulesetCreated, String> {
    static CACHE: Mutex<Option<(Vec<u16>, RulesetCreated)>> = Mutex::new(None);
    let mut cache = CACHE.lock().map_err(|_| "poisoned cache".to_string())?;
    if let Some((ports, layer)) = cache.as_ref() {
        if ports == private {
            return layer.try_clone().map_err(|e| e.to_string());
        }
    }
    let mut layer = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessNet::ConnectTcp)
        .and_then(Ruleset::create)
        .map_err(|e| e.to_string())?;
    for port in 0..=u16::MAX {
        if !private.contains(&port) {
            layer = layer
                .add_rule(NetPort::new(port, AccessNet::ConnectTcp))
                .map_err(|e| e.to_string())?;
        }
    }
    let copy = layer.try_clone().map_err(|e| e.to_string())?;
    *cache = Some((private.to_vec(), layer));
    Ok(copy)
}

/// Apply `decision` to `cmd`: the rules take effect in the child between fork and exec.
#[allow(unsafe_code)]
pub(crate) fn confine(cmd: &mut tokio::process::Command, decision: &Decision) {
    let Decision::Confined(prepared) = decision else {
        return;
    };
    let prepared = prepared.clone();
    // SAFETY: the closure runs in the forked child before exec. It allocates nothing on
    // the success path: it takes the rulesets prepared in the parent out of a mutex only
    // this closure locks (never held across fork by another thread), then makes system
    // calls (prctl NO_NEW_PRIVS, landlock_restrict_self per layer) and closes the fds.
    unsafe {
        cmd.pre_exec(move || {
            let layers = match prepared.layers.lock() {
                Ok(mut slot) => slot.take(),
                Err(_) => None,
            };
            // Never run unconfined by accident: no rules, no exec.
            let layers = layers.ok_or_else(|| std::io::Error::from_raw_os_error(libc::EPERM))?;
            for layer in layers {
                layer
                    .restrict_self()
                    .map_err(|_| std::io::Error::last_os_error())?;
            }
            Ok(())
        });
    }
}

/// What the name of every private temp dir starts with: `gaffer-<agent>-<32 hex digits>`.
const TEMP_PREFIX: &str = "gaffer-";

/// Whether `name` is one [`PrivateTemp::new`] gives (`gaffer-claude-<uuid>`), and
/// not another `gaffer-…` entry of the temp dir (a test's PostgreSQL, say).
fn is_private_temp_name(name: &str) -> bool {
    name.strip_prefix(TEMP_PREFIX)
        .and_then(|rest| rest.rsplit_once('-'))
        .is_some_and(|(agent, id)| {
            !agent.is_empty()
                && id.len() == 32
                && id
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        })
}

/// A private temp dir for one agent process or command, removed when dropped.
///
/// The process that made it holds a lock on the directory while it lives (the
/// directory itself, which the confined process cannot replace): a process killed
/// with `kill -9` drops nothing, but the kernel releases its lock, and the next
/// gaffer to start removes the directory ([`remove_dead_temp_dirs`]).
#[derive(Debug)]
pub(crate) struct PrivateTemp {
    path: PathBuf,
    _alive: std::fs::File,
}

impl PrivateTemp {
    pub(crate) fn new(agent: &str) -> Result<Self> {
        let path = std::env::temp_dir().join(format!(
            "{TEMP_PREFIX}{agent}-{}",
            uuid::Uuid::new_v4().simple()
        ));
        let mut builder = std::fs::DirBuilder::new();
        {
            use std::os::unix::fs::DirBuilderExt;
            builder.mode(0o700);
        }
        let spawn_error = |source| AgentError::Spawn {
            agent: agent.into(),
            source,
        };
        builder.create(&path).map_err(spawn_error)?;
        let alive = std::fs::File::open(&path)
            .and_then(|dir| dir.try_lock().map(|()| dir).map_err(std::io::Error::from))
            .map_err(|e| {
                let _ = std::fs::remove_dir_all(&path);
                spawn_error(e)
            })?;
        Ok(Self {
            path,
            _alive: alive,
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for PrivateTemp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Private temp dirs younger than this are left alone: the process that made one
/// takes its lock right after creating it.
const TEMP_GRACE: std::time::Duration = std::time::Duration::from_secs(60);

/// Remove the private temp dirs (`gaffer-<agent>-<uuid>` in the temp dir) whose process
/// is gone: no process holds their lock, and they are older than a minute. A
/// process killed with `kill -9` leaves its agents' dirs behind; the next gaffer
/// to start calls this. Returns how many were removed; what cannot be read or
/// removed (another user's, say) is skipped.
pub fn remove_dead_temp_dirs() -> usize {
    remove_dead_temp_dirs_in(&std::env::temp_dir(), TEMP_GRACE)
}

/// [`remove_dead_temp_dirs`] in `dir`, for dirs older than `grace`.
pub fn remove_dead_temp_dirs_in(dir: &Path, grace: std::time::Duration) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let now = std::time::SystemTime::now();
    let mut removed = 0;
    for entry in entries.flatten() {
        let is_ours = entry.file_name().to_str().is_some_and(is_private_temp_name);
        // Never through a symlink: only directories this name itself is.
        let Ok(meta) = std::fs::symlink_metadata(entry.path()) else {
            continue;
        };
        let old_enough = meta
            .modified()
            .ok()
            .and_then(|m| now.duration_since(m).ok())
            .is_some_and(|age| age >= grace);
        if !is_ours || !meta.is_dir() || !old_enough {
            continue;
        }
        let Ok(handle) = std::fs::File::open(entry.path()) else {
            continue;
        };
        // Held: its process lives. Taken: nobody holds it any more.
        if handle.try_lock().is_ok() && std::fs::remove_dir_all(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// What the agent, the step and the task page are told when a confined command was
/// refused: that it was gaffer's sandbox, and where writing is allowed.
pub fn refusal_message(note: &str) -> String {
    format!("[{REFUSED_BY_SANDBOX}, not by the file's permissions: {note}]")
}

/// The words [`refusal_message`] starts with, to find it again in a tool result.
pub const REFUSED_BY_SANDBOX: &str = "refused by gaffer's sandbox";

/// `output` of a confined command, with [`refusal_message`] added when it shows the
/// kernel refused an access.
pub fn explain_refusal(output: &str, note: &str) -> String {
    if looks_refused(output) {
        format!("{output}\n{}", refusal_message(note))
    } else {
        output.to_string()
    }
}

/// Whether output shows an access refused by the kernel (`Permission denied`, `EPERM`):
/// from a confined process, most likely gaffer's sandbox.
pub fn looks_refused(text: &str) -> bool {
    [
        "Permission denied",
        "os error 13",
        "Operation not permitted",
        "EACCES",
        "EPERM",
    ]
    .iter()
    .any(|w| text.contains(w))
}
