//! The kernel sandbox (Linux Landlock) around every agent process and every command
//! the built-in agent's `run` tool starts.
//!
//! Prompts and tool flags ask an agent to behave; the sandbox makes the kernel refuse
//! when it does not. The rules are built in the parent (opening the path fds, creating
//! the ruleset) and only *applied* between fork and exec ([`confine`]), where a
//! multi-threaded parent must not allocate: the child and everything it starts keep
//! them. What a confined process may do:
//!
//! * read and execute anything it could before (toolchains live all over the disk);
//! * write only under its [`Confinement::writable`] directories: the task worktree for
//!   an owner (never for a reviewer or arbiter), a private temp dir (`TMPDIR`), the
//!   agent CLI's own state dir, and `[sandbox] writable` from the config — plus the
//!   usual character devices (`/dev/null`, `/dev/tty`, ...);
//! * with `network = "off"`, no TCP `bind` and no TCP `connect` except to the ports in
//!   [`Confinement::connect_ports`] (an agent CLI's HTTPS to its own provider) — where
//!   the kernel's Landlock ABI has network rules (ABI 4, Linux 6.7).
//!
//! Symlinks do not help an agent escape: Landlock checks the file a path resolves to.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use landlock::{
    Access, AccessFs, AccessNet, CompatLevel, Compatible, NetPort, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreated, RulesetCreatedAttr, ABI,
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
}

impl Sandbox {
    /// Confine as well as the kernel allows, network on.
    pub fn auto() -> Self {
        Self {
            mode: SandboxMode::Auto,
            network: true,
            writable: Vec::new(),
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

    /// One line for `gaffer doctor` and the start-up warning.
    pub fn describe(self) -> String {
        match self.abi {
            None => "Landlock is not available in this kernel (not built in, or not enabled with lsm=landlock); agents cannot be confined".into(),
            Some(v) if v < 4 => format!("Landlock ABI {v}: files are confined; network rules need ABI 4 (Linux 6.7)"),
            Some(v) => format!("Landlock ABI {v}: files and TCP are confined"),
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

/// Ports a confined agent CLI may still connect to with `network = "off"`: HTTPS, so it
/// can reach its own model provider. The built-in agent's commands get none.
pub const AGENT_CLI_PORTS: &[u16] = &[443];

/// The confinement of one process: the sandbox settings plus where it may write.
#[derive(Debug, Clone)]
pub struct Confinement {
    /// The settings.
    pub sandbox: Sandbox,
    /// Directories (and files) the process may write below.
    pub writable: Vec<PathBuf>,
    /// With the network off: TCP ports it may still connect to.
    pub connect_ports: Vec<u16>,
}

impl Confinement {
    /// An agent session's confinement: the worktree when `may_write_worktree`, its private
    /// temp dir, the agent's own state dirs and the configured extra dirs.
    pub fn for_agent(
        sandbox: &Sandbox,
        worktree: &Path,
        may_write_worktree: bool,
        temp: &Path,
        state_dirs: &[PathBuf],
    ) -> Self {
        let mut writable = vec![temp.to_path_buf()];
        if may_write_worktree {
            writable.push(worktree.to_path_buf());
        }
        writable.extend(state_dirs.iter().cloned());
        writable.extend(sandbox.writable.iter().cloned());
        Self {
            sandbox: sandbox.clone(),
            writable,
            connect_ports: AGENT_CLI_PORTS.to_vec(),
        }
    }

    /// Who may write where, for messages: `worktree, /tmp/x; network off`.
    pub fn describe(&self) -> String {
        let dirs: Vec<String> = self
            .writable
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        let net = if self.sandbox.network {
            "network on".to_string()
        } else if self.connect_ports.is_empty() {
            "network off".to_string()
        } else {
            let ports: Vec<String> = self.connect_ports.iter().map(u16::to_string).collect();
            format!(
                "network off except TCP connect to port {}",
                ports.join(", ")
            )
        };
        format!(
            "gaffer's sandbox (Landlock) lets this process write only in {}; {net}",
            dirs.join(", ")
        )
    }
}

/// A ruleset ready to be applied in a child between fork and exec.
pub(crate) struct Prepared {
    // Taken (once) in the child; the parent's copy is closed when the Command drops.
    ruleset: Mutex<Option<RulesetCreated>>,
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
    let ruleset = build(c).map_err(|e| refuse(format!("cannot build the Landlock rules: {e}")))?;
    Ok(Decision::Confined(Arc::new(Prepared {
        ruleset: Mutex::new(Some(ruleset)),
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

// ABI 3 covers every filesystem write right we rely on (including truncate); ABI 4 adds TCP.
const FS_ABI: ABI = ABI::V3;
const NET_ABI: ABI = ABI::V4;

fn build(c: &Confinement) -> std::result::Result<RulesetCreated, landlock::RulesetError> {
    let all = AccessFs::from_all(FS_ABI);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)?;
    if !c.sandbox.network {
        ruleset = ruleset.handle_access(AccessNet::from_all(NET_ABI))?;
    }
    let mut created = ruleset.create()?;
    if let Ok(root) = PathFd::new("/") {
        created = created.add_rule(PathBeneath::new(root, AccessFs::from_read(FS_ABI)))?;
    }
    let writable = c
        .writable
        .iter()
        .map(PathBuf::as_path)
        .chain(DEVICES.iter().map(Path::new));
    for path in writable {
        // A path that does not exist cannot be opened, and needs no rule.
        if let Ok(fd) = PathFd::new(path) {
            let access = if path.is_dir() {
                all
            } else {
                AccessFs::from_file(FS_ABI)
            };
            created = created.add_rule(PathBeneath::new(fd, access))?;
        }
    }
    if !c.sandbox.network {
        for port in &c.connect_ports {
            created = created.add_rule(NetPort::new(*port, AccessNet::ConnectTcp))?;
        }
    }
    Ok(created)
}

/// Apply `decision` to `cmd`: the rules take effect in the child between fork and exec.
#[allow(unsafe_code)]
pub(crate) fn confine(cmd: &mut tokio::process::Command, decision: &Decision) {
    let Decision::Confined(prepared) = decision else {
        return;
    };
    let prepared = prepared.clone();
    // SAFETY: the closure runs in the forked child before exec. It allocates nothing on
    // the success path: it takes the ruleset prepared in the parent out of a mutex only
    // this closure locks (never held across fork by another thread), then makes two
    // system calls (prctl NO_NEW_PRIVS, landlock_restrict_self) and closes the fd.
    unsafe {
        cmd.pre_exec(move || {
            let ruleset = match prepared.ruleset.lock() {
                Ok(mut slot) => slot.take(),
                Err(_) => None,
            };
            match ruleset {
                Some(r) => r
                    .restrict_self()
                    .map(|_| ())
                    .map_err(|_| std::io::Error::last_os_error()),
                // Never run unconfined by accident: no rules, no exec.
                None => Err(std::io::Error::from_raw_os_error(libc::EPERM)),
            }
        });
    }
}

/// A private temp dir for one agent process or command, removed when dropped.
#[derive(Debug)]
pub(crate) struct PrivateTemp {
    path: PathBuf,
}

impl PrivateTemp {
    pub(crate) fn new(agent: &str) -> Result<Self> {
        let path =
            std::env::temp_dir().join(format!("gaffer-{agent}-{}", uuid::Uuid::new_v4().simple()));
        let mut builder = std::fs::DirBuilder::new();
        {
            use std::os::unix::fs::DirBuilderExt;
            builder.mode(0o700);
        }
        builder.create(&path).map_err(|source| AgentError::Spawn {
            agent: agent.into(),
            source,
        })?;
        Ok(Self { path })
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

/// Words of an error message that mean the kernel refused an access.
pub(crate) fn looks_refused(text: &str) -> bool {
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
