//! Process containment: every process an agent, a tool call or a check starts is
//! tracked and killed when its turn or step ends, and when gaffer dies.
//!
//! Each contained command runs under its own **supervisor**, a process forked from gaffer
//! between fork and exec (so it works in any binary, tests included, with no helper
//! executable to find):
//!
//! ```text
//! gaffer ──(control pipe)── supervisor: own session, child subreaper, unconfined
//!                               └── the command (Landlock, PDEATHSIG) ── anything it starts
//! ```
//!
//! * The supervisor is a *child subreaper* (`PR_SET_CHILD_SUBREAPER`): whatever the command
//!   starts and abandons (`nohup sleep 600 &`, a daemon that double-forks, `setsid`) is
//!   re-parented to it, never to PID 1, so the whole tree stays findable without cgroups.
//! * When the command exits, the supervisor kills everything still in its tree, reaps it
//!   and exits with the command's status: background processes end with their command.
//! * gaffer holds the write end of a pipe whose read end only the supervisor holds. Closing
//!   it (the turn or step ended, [`ContainedChild::kill`], or gaffer died, even by
//!   `kill -9`) makes the supervisor kill the tree. `PR_SET_PDEATHSIG` would not do: it
//!   fires when the *thread* that forked exits, and a descendant can escape it by forking.
//! * The command gets `PR_SET_PDEATHSIG(SIGKILL)` towards its supervisor (single-threaded),
//!   and the Landlock layer (see [`crate::sandbox`]) scopes signals where the kernel can
//!   (ABI 6): a confined process cannot signal its supervisor or gaffer.
//! * The supervisor may hold a shared `flock` on a lock file for its whole life, so the
//!   crash recovery of a turn can wait until no process of that turn is alive
//!   ([`wait_until_released`]).
//!
//! Why not cgroups: a cgroup v2 subtree can only be created where it was delegated
//! (`systemd-run --user -p Delegate=yes`), which an ordinary login session does not have;
//! a subreaper needs no privilege and no setup, and is as complete for a process tree.
//! What it does not catch: processes another daemon starts on the agent's behalf
//! (`systemd-run --user`, `docker run`); see `docs/security.md`.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::process::{Child, Command};

use crate::sandbox::{self, Confinement, Decision, PrivateTemp};

/// A command to run contained: its environment starts empty (see
/// [`crate::environment`]), its processes live under a supervisor, and it is confined by
/// the kernel when a [`Confinement`] is given.
pub struct ContainedCommand {
    cmd: Command,
    name: String,
    cwd: PathBuf,
    confinement: Option<Confinement>,
    lock: Option<PathBuf>,
}

impl ContainedCommand {
    /// `program` run in `cwd` with an empty environment; `name` names it in errors
    /// (`claude`, `check`, `run`).
    pub fn new(name: &str, program: impl AsRef<OsStr>, cwd: &Path) -> Self {
        let mut cmd = Command::new(program);
        cmd.current_dir(cwd)
            .env_clear()
            .stdin(Stdio::null())
            .kill_on_drop(false);
        Self {
            cmd,
            name: name.into(),
            cwd: cwd.to_path_buf(),
            confinement: None,
            lock: None,
        }
    }

    /// Arguments.
    pub fn args<I, S>(&mut self, args: I) -> &mut Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.cmd.args(args);
        self
    }

    /// The whole environment (nothing else is inherited).
    pub fn envs(&mut self, env: &BTreeMap<String, String>) -> &mut Self {
        self.cmd.envs(env);
        self
    }

    /// Standard input.
    pub fn stdin(&mut self, s: Stdio) -> &mut Self {
        self.cmd.stdin(s);
        self
    }

    /// Standard output.
    pub fn stdout(&mut self, s: Stdio) -> &mut Self {
        self.cmd.stdout(s);
        self
    }

    /// Standard error.
    pub fn stderr(&mut self, s: Stdio) -> &mut Self {
        self.cmd.stderr(s);
        self
    }

    /// Confine the command (and everything it starts) with these rules; it also gets a
    /// private `TMPDIR`, writable, removed when the command is gone.
    pub fn confine(&mut self, confinement: Confinement) -> &mut Self {
        self.confinement = Some(confinement);
        self
    }

    /// Hold a shared lock on `path` while any process of this command is alive
    /// (see [`wait_until_released`]).
    pub fn hold_lock(&mut self, path: &Path) -> &mut Self {
        self.lock = Some(path.to_path_buf());
        self
    }

    /// Start it. Fails with [`crate::AgentError::Sandbox`] when the sandbox must confine
    /// but cannot, and [`crate::AgentError::Spawn`] when the program cannot start.
    pub fn spawn(mut self) -> crate::Result<ContainedChild> {
        let spawn_err = |source: std::io::Error| crate::AgentError::Spawn {
            agent: self.name.clone(),
            source,
        };
        let lock = match &self.lock {
            Some(path) => Some(shared_lock(path).map_err(spawn_err)?),
            None => None,
        };
        let (read_end, write_end) = control_pipe().map_err(spawn_err)?;
        // The supervisor is forked first (unconfined); the command's own pre_exec steps
        // (the Landlock layers) run after it, in the command.
        supervise(
            &mut self.cmd,
            read_end.as_raw_fd(),
            lock.as_ref().map_or(-1, AsRawFd::as_raw_fd),
        );
        let (temp, note) = match self.confinement.take() {
            None => (None, None),
            Some(mut c) => {
                let temp = PrivateTemp::new(&self.name)?;
                c.writable.push(temp.path().to_path_buf());
                if !c.readable.contains(&self.cwd) {
                    c.readable.push(self.cwd.clone());
                }
                match sandbox::prepare(&c, &self.name)? {
                    Decision::Unconfined => (None, None),
                    decision => {
                        sandbox::confine(&mut self.cmd, &decision);
                        self.cmd.env("TMPDIR", temp.path());
                        (Some(temp), Some(c.describe()))
                    }
                }
            }
        };
        let child = self.cmd.spawn().map_err(spawn_err)?;
        // Only the supervisor keeps the read end and the lock now.
        drop(read_end);
        drop(lock);
        Ok(ContainedChild {
            child,
            stop: Some(write_end),
            sandbox_note: note,
            _temp: temp,
        })
    }
}

/// A running contained command. Dropping it kills every process of the command.
pub struct ContainedChild {
    /// The supervisor process: its stdio pipes are the command's, its exit status the
    /// command's. Never signal it: use [`ContainedChild::kill`].
    pub child: Child,
    stop: Option<OwnedFd>,
    sandbox_note: Option<String>,
    _temp: Option<PrivateTemp>,
}

impl ContainedChild {
    /// When the command is confined: where it may write, for messages about refusals.
    pub fn sandbox_note(&self) -> Option<&str> {
        self.sandbox_note.as_deref()
    }

    /// Wait for the command to end. Anything it left running is killed before this
    /// returns.
    pub async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        self.child.wait().await
    }

    /// Kill the command and everything it started, and wait until they are gone.
    pub async fn kill(&mut self) {
        self.stop.take();
        // The supervisor exits once its whole tree is reaped; a process stuck in the
        // kernel (uninterruptible IO) can delay that, so the wait is bounded.
        let _ = tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await;
    }

    /// Ask for the command and everything it started to be killed, without waiting.
    pub fn start_kill(&mut self) {
        self.stop.take();
    }

    /// The supervisor's pid (the command runs as its only direct child).
    pub fn id(&self) -> Option<u32> {
        self.child.id()
    }
}

fn shared_lock(path: &Path) -> std::io::Result<std::fs::File> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)?;
    flock(&file, libc::LOCK_SH)?;
    Ok(file)
}

#[allow(unsafe_code)]
fn flock(file: &std::fs::File, op: libc::c_int) -> std::io::Result<()> {
    // SAFETY: flock on a file descriptor we own.
    if unsafe { libc::flock(file.as_raw_fd(), op) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Wait (up to `limit`) until no contained process holds `path` (see
/// [`ContainedCommand::hold_lock`]): `Ok(true)` when none does, `Ok(false)` when some
/// still did at the limit.
pub async fn wait_until_released(path: &Path, limit: Duration) -> std::io::Result<bool> {
    let file = match std::fs::OpenOptions::new().write(true).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(true),
        Err(e) => return Err(e),
    };
    let started = std::time::Instant::now();
    loop {
        match flock(&file, libc::LOCK_EX | libc::LOCK_NB) {
            Ok(()) => return Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::EWOULDBLOCK) => {}
            Err(e) => return Err(e),
        }
        if started.elapsed() >= limit {
            return Ok(false);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[allow(unsafe_code)]
fn control_pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: pipe2 fills the two descriptors, which we then own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nothing else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

#[allow(unsafe_code)]
fn supervise(cmd: &mut Command, control: RawFd, lock: RawFd) {
    // SAFETY: the closure runs in the forked child before exec. Everything in
    // `supervisor::fork` is async-signal-safe: raw system calls on stack buffers, no
    // allocation, no locks.
    unsafe {
        cmd.pre_exec(move || supervisor::fork(control, lock));
    }
}

/// The supervisor, in async-signal-safe code: it runs in a fork of a multi-threaded
/// process, where allocating or taking a lock could deadlock.
#[allow(unsafe_code)]
mod supervisor {
    use std::io::Error;
    use std::mem::MaybeUninit;
    use std::os::fd::RawFd;

    /// Called in the forked child: becomes the supervisor (never returns) and forks the
    /// command, which returns `Ok` to go on to exec.
    pub(super) unsafe fn fork(control: RawFd, lock: RawFd) -> std::io::Result<()> {
        // Its own session: a Ctrl-C on gaffer's terminal reaches gaffer, which then
        // stops the turn; the tree is not signalled behind gaffer's back.
        if libc::setsid() == -1 {
            return Err(Error::last_os_error());
        }
        let mut chld = MaybeUninit::<libc::sigset_t>::zeroed().assume_init();
        libc::sigemptyset(&mut chld);
        libc::sigaddset(&mut chld, libc::SIGCHLD);
        let mut old = MaybeUninit::<libc::sigset_t>::zeroed().assume_init();
        if libc::sigprocmask(libc::SIG_BLOCK, &chld, &mut old) == -1 {
            return Err(Error::last_os_error());
        }
        if libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == -1 {
            return Err(Error::last_os_error());
        }
        let supervisor = libc::getpid();
        match libc::fork() {
            -1 => Err(Error::last_os_error()),
            0 => {
                libc::sigprocmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) == -1 {
                    return Err(Error::last_os_error());
                }
                if libc::getppid() != supervisor {
                    libc::_exit(127);
                }
                Ok(())
            }
            main => run(main, control, lock, &chld),
        }
    }

    unsafe fn run(main: libc::pid_t, control: RawFd, lock: RawFd, chld: &libc::sigset_t) -> ! {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            libc::dup2(null, 0);
            libc::dup2(null, 1);
            libc::dup2(null, 2);
        }
        close_all_but(&[control, lock]);
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        let sfd = libc::signalfd(-1, chld, libc::SFD_NONBLOCK | libc::SFD_CLOEXEC);
        let mut status: Option<libc::c_int> = None;
        loop {
            reap(main, &mut status);
            if status.is_some() {
                break;
            }
            let mut fds = [
                libc::pollfd {
                    fd: control,
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: sfd,
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            // Without a signalfd, look for exited children every 50 ms.
            let timeout = if sfd < 0 { 50 } else { -1 };
            let n = libc::poll(fds.as_mut_ptr(), 2, timeout);
            if n < 0 && *libc::__errno_location() != libc::EINTR {
                break;
            }
            // gaffer closed its end: the turn or step is over, or gaffer is gone.
            if fds[0].revents != 0 {
                break;
            }
            if fds[1].revents != 0 {
                let mut info = MaybeUninit::<[u8; 128]>::uninit();
                while libc::read(sfd, info.as_mut_ptr().cast(), 128) > 0 {}
            }
        }
        kill_tree(main, &mut status);
        exit_like(status)
    }

    /// Reap every exited child; remember the command's status.
    unsafe fn reap(main: libc::pid_t, status: &mut Option<libc::c_int>) -> bool {
        loop {
            let mut st: libc::c_int = 0;
            let pid = libc::waitpid(-1, &mut st, libc::WNOHANG);
            if pid > 0 {
                if pid == main {
                    *status = Some(st);
                }
                continue;
            }
            // -1 with ECHILD: no child at all any more.
            return pid == -1 && *libc::__errno_location() == libc::ECHILD;
        }
    }

    /// Kill every process of the tree: as the subreaper, whatever it killed leaves its
    /// own children to it, so killing the direct children until none is left reaches all.
    unsafe fn kill_tree(main: libc::pid_t, status: &mut Option<libc::c_int>) {
        loop {
            let killed = for_each_child(|pid| {
                libc::kill(pid, libc::SIGKILL);
            });
            if reap(main, status) {
                return;
            }
            if killed == 0 {
                // Killed children not yet re-parented or reaped: look again shortly.
                let pause = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 2_000_000,
                };
                libc::nanosleep(&pause, std::ptr::null_mut());
            }
        }
    }

    /// Exit the way the command did, so gaffer reads its status from ours.
    unsafe fn exit_like(status: Option<libc::c_int>) -> ! {
        match status {
            Some(st) if libc::WIFEXITED(st) => libc::_exit(libc::WEXITSTATUS(st)),
            Some(st) if libc::WIFSIGNALED(st) => {
                let sig = libc::WTERMSIG(st);
                libc::signal(sig, libc::SIG_DFL);
                let mut all = MaybeUninit::<libc::sigset_t>::zeroed().assume_init();
                libc::sigfillset(&mut all);
                libc::sigprocmask(libc::SIG_UNBLOCK, &all, std::ptr::null_mut());
                libc::kill(libc::getpid(), sig);
                libc::_exit(128 + sig)
            }
            _ => libc::_exit(1),
        }
    }

    unsafe fn close_all_but(keep: &[RawFd]) {
        let mut next: libc::c_uint = 3;
        let mut kept: Vec3 = Vec3::default();
        for &fd in keep {
            if fd >= 3 {
                kept.push(fd as libc::c_uint);
            }
        }
        kept.sort();
        for &fd in kept.as_slice() {
            if fd > next {
                close_range(next, fd - 1);
            }
            next = fd + 1;
        }
        close_range(next, libc::c_uint::MAX);
    }

    unsafe fn close_range(first: libc::c_uint, last: libc::c_uint) {
        if libc::syscall(libc::SYS_close_range, first, last, 0) == 0 {
            return;
        }
        // Kernels before 5.9: close one by one up to the descriptor limit.
        let mut lim = MaybeUninit::<libc::rlimit>::zeroed().assume_init();
        let max = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
            lim.rlim_cur.min(1 << 20) as libc::c_uint
        } else {
            4096
        };
        let mut fd = first;
        while fd <= last && fd < max {
            libc::close(fd as libc::c_int);
            fd += 1;
        }
    }

    /// At most three descriptors to keep, without allocating.
    #[derive(Default)]
    struct Vec3 {
        items: [libc::c_uint; 3],
        len: usize,
    }

    impl Vec3 {
        fn push(&mut self, v: libc::c_uint) {
            if self.len < 3 {
                self.items[self.len] = v;
                self.len += 1;
            }
        }
        fn sort(&mut self) {
            self.items[..self.len].sort_unstable();
        }
        fn as_slice(&self) -> &[libc::c_uint] {
            &self.items[..self.len]
        }
    }

    /// Call `f` with the pid of each direct child; returns how many.
    pub(super) unsafe fn for_each_child(mut f: impl FnMut(libc::pid_t)) -> usize {
        let fd = libc::open(
            c"/proc/thread-self/children".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            // No CONFIG_PROC_CHILDREN: find them by their parent in /proc/*/stat.
            return scan_proc(f);
        }
        let mut n = 0;
        let mut buf = [0u8; 1024];
        let mut pid: libc::pid_t = 0;
        let mut in_number = false;
        loop {
            let got = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
            if got <= 0 {
                break;
            }
            for &b in &buf[..got as usize] {
                if b.is_ascii_digit() {
                    pid = pid
                        .saturating_mul(10)
                        .saturating_add((b - b'0') as libc::pid_t);
                    in_number = true;
                } else if in_number {
                    f(pid);
                    n += 1;
                    pid = 0;
                    in_number = false;
                }
            }
        }
        if in_number {
            f(pid);
            n += 1;
        }
        libc::close(fd);
        n
    }

    /// The children of this process, from each `/proc/<pid>/stat`'s parent field.
    pub(super) unsafe fn scan_proc(mut f: impl FnMut(libc::pid_t)) -> usize {
        let me = libc::getpid();
        let dir = libc::open(
            c"/proc".as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        );
        if dir < 0 {
            return 0;
        }
        let mut n = 0;
        let mut buf = [0u8; 4096];
        loop {
            let got = libc::syscall(libc::SYS_getdents64, dir, buf.as_mut_ptr(), buf.len());
            if got <= 0 {
                break;
            }
            let mut off = 0usize;
            while off < got as usize {
                // struct linux_dirent64 { u64 ino; i64 off; u16 reclen; u8 type; char name[]; }
                let reclen = u16::from_ne_bytes([buf[off + 16], buf[off + 17]]) as usize;
                let name = &buf[off + 19..off + reclen];
                let len = name.iter().position(|&b| b == 0).unwrap_or(name.len());
                if let Some(pid) = parse_pid(&name[..len]) {
                    if parent_of(pid) == Some(me) {
                        f(pid);
                        n += 1;
                    }
                }
                off += reclen;
            }
        }
        libc::close(dir);
        n
    }

    fn parse_pid(digits: &[u8]) -> Option<libc::pid_t> {
        if digits.is_empty() || digits.len() > 9 || !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        Some(
            digits
                .iter()
                .fold(0, |acc, &d| acc * 10 + (d - b'0') as libc::pid_t),
        )
    }

    unsafe fn parent_of(pid: libc::pid_t) -> Option<libc::pid_t> {
        // "/proc/" + up to 9 digits + "/stat" + NUL
        let mut path = [0u8; 32];
        let mut len = 0;
        for &b in b"/proc/" {
            path[len] = b;
            len += 1;
        }
        let mut digits = [0u8; 10];
        let mut d = 0;
        let mut v = pid;
        loop {
            digits[d] = b'0' + (v % 10) as u8;
            d += 1;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        while d > 0 {
            d -= 1;
            path[len] = digits[d];
            len += 1;
        }
        for &b in b"/stat" {
            path[len] = b;
            len += 1;
        }
        let fd = libc::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return None;
        }
        let mut buf = [0u8; 512];
        let got = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
        libc::close(fd);
        if got <= 0 {
            return None;
        }
        let text = &buf[..got as usize];
        // "pid (comm) S ppid ...": the command name may hold anything, so the last ')'.
        let close = text.iter().rposition(|&b| b == b')')?;
        let rest = text.get(close + 4..)?;
        let end = rest.iter().position(|&b| b == b' ')?;
        parse_pid(&rest[..end])
    }
}

#[cfg(test)]
mod tests {
    #[test]
    #[allow(unsafe_code)]
    fn both_ways_of_listing_children_agree() {
        let mut kids: Vec<std::process::Child> = (0..3)
            .map(|_| {
                std::process::Command::new("sleep")
                    .arg("5")
                    .spawn()
                    .unwrap()
            })
            .collect();
        let mut expected: Vec<i32> = kids.iter().map(|k| k.id() as i32).collect();
        expected.sort_unstable();
        // The test harness runs tests on threads: list from the thread that forked.
        let mut via_children = Vec::new();
        // SAFETY: plain reads of /proc in a normal process.
        unsafe { super::supervisor::for_each_child(|p| via_children.push(p)) };
        let mut via_scan = Vec::new();
        // SAFETY: as above.
        unsafe { super::supervisor::scan_proc(|p| via_scan.push(p)) };
        via_children.sort_unstable();
        via_scan.retain(|p| expected.contains(p));
        via_scan.sort_unstable();
        for k in &mut kids {
            let _ = k.kill();
            let _ = k.wait();
        }
        assert_eq!(via_children, expected);
        assert_eq!(via_scan, expected);
    }
}
