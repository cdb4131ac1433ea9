//! A throwaway PostgreSQL for the tests.
//!
//! `GAFFER_TEST_POSTGRES_URL` (a URL of a role that may `CREATE DATABASE`) names a
//! server to use. Without it, the first test that needs one runs `initdb` into a
//! fresh temp dir and starts `postgres` on a free loopback port, as the `postgres`
//! user when run as root (root cannot run it). A watchdog shell holds the server:
//! when this test process exits (however it dies), its stdin closes and the shell
//! stops the server and removes the directory. Every test gets its own database, so tests run in
//! parallel. Without binaries the tests skip (saying why) unless `CI` is set.
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub const URL_ENV: &str = "GAFFER_TEST_POSTGRES_URL";

struct Server {
    /// `postgres://user[:password]@host:port` without a database.
    base: String,
    /// Held so the watchdog's stdin stays open for the life of this process.
    _watchdog: Option<Child>,
}

static SERVER: OnceLock<Result<Server, String>> = OnceLock::new();

/// `postgres://…` up to (not including) the database path.
fn strip_database(url: &str) -> String {
    let rest = url.find("://").map_or(0, |i| i + 3);
    match url[rest..].find(['/', '?']) {
        Some(i) => url[..rest + i].to_owned(),
        None => url.to_owned(),
    }
}

fn find_bin_dir() -> Option<PathBuf> {
    if let Ok(dir) = std::env::var("GAFFER_TEST_POSTGRES_BIN") {
        return Some(PathBuf::from(dir));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut candidates: Vec<PathBuf> = std::env::split_paths(&path).collect();
    if let Ok(entries) = std::fs::read_dir("/usr/lib/postgresql") {
        let mut versions: Vec<PathBuf> = entries.flatten().map(|e| e.path().join("bin")).collect();
        versions.sort();
        candidates.extend(versions.into_iter().rev());
    }
    candidates
        .into_iter()
        .find(|d| d.join("initdb").is_file() && d.join("postgres").is_file())
}

const WATCHDOG: &str = r#"
set -e
bin=$1; port=$2
dir=$(mktemp -d "${TMPDIR:-/tmp}/gaffer-pg-XXXXXX")
if ! "$bin/initdb" -D "$dir/data" -U postgres -A trust --no-sync >"$dir/initdb.log" 2>&1; then
  cat "$dir/initdb.log" >&2; rm -rf "$dir"; exit 1
fi
"$bin/postgres" -D "$dir/data" -k "$dir" -p "$port" -h 127.0.0.1 -c fsync=off \
  -c synchronous_commit=off -c full_page_writes=off -c max_connections=500 >"$dir/server.log" 2>&1 &
pid=$!
echo "started $dir"
read -r _ || true
kill -INT "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
rm -rf "$dir"
"#;

fn start() -> Result<Server, String> {
    if let Ok(url) = std::env::var(URL_ENV) {
        return Ok(Server {
            base: strip_database(&url),
            _watchdog: None,
        });
    }
    let Some(bin) = find_bin_dir() else {
        return Err(format!(
            "no PostgreSQL binaries (initdb, postgres) on PATH or in /usr/lib/postgresql/*/bin, and {URL_ENV} is not set"
        ));
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| format!("no free port: {e}"))?
        .port();
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0\n"));
    let mut cmd = if root {
        // Root cannot run postgres: run it as the `postgres` system user.
        let exists = Command::new("id")
            .arg("postgres")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !exists {
            Command::new("useradd")
                .args([
                    "--system",
                    "--no-create-home",
                    "--shell",
                    "/bin/sh",
                    "postgres",
                ])
                .status()
                .map_err(|e| format!("useradd postgres: {e}"))?;
        }
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--", "sh", "-c", WATCHDOG, "sh"]);
        c
    } else {
        let mut c = Command::new("sh");
        c.args(["-c", WATCHDOG, "sh"]);
        c
    };
    // A process group of its own: a runner that kills the test's group (a timeout,
    // Ctrl-C) must not kill the watchdog before it stops the server and removes
    // its directory; it still sees this process end as the end of its stdin.
    use std::os::unix::process::CommandExt;
    let mut child = cmd
        .arg(path_arg(&bin))
        .arg(port.to_string())
        .process_group(0)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("cannot start the PostgreSQL watchdog: {e}"))?;
    let mut line = String::new();
    if let Some(out) = child.stdout.take() {
        BufReader::new(out).read_line(&mut line).ok();
    }
    if !line.starts_with("started") {
        return Err("initdb failed (its log is above)".into());
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            return Err(format!(
                "postgres did not listen on port {port} within 30 s"
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(Server {
        base: format!("postgres://postgres@127.0.0.1:{port}"),
        _watchdog: Some(child),
    })
}

fn path_arg(p: &Path) -> String {
    p.display().to_string()
}

/// Whether PostgreSQL tests can run here. Skips (printing why) only outside CI.
pub fn available() -> bool {
    match SERVER.get_or_init(start) {
        Ok(_) => true,
        Err(why) if std::env::var_os("CI").is_some() => {
            panic!("CI must run the PostgreSQL tests, but: {why}")
        }
        Err(why) => {
            eprintln!("skipping a PostgreSQL test: {why}");
            false
        }
    }
}

/// A new, empty database on the test server; its URL.
pub async fn fresh_database() -> String {
    use sqlx::{Connection, PgConnection};
    let server = match SERVER.get_or_init(start) {
        Ok(s) => s,
        Err(why) => panic!("no PostgreSQL for this test: {why}"),
    };
    let name = format!(
        "gaffer_test_{}_{:08x}",
        std::process::id(),
        rand::random::<u32>()
    );
    let admin = format!("{}/postgres", server.base);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        // The server may still be starting up: retry for a while.
        let made = async {
            let mut conn = PgConnection::connect(&admin).await?;
            sqlx::query(&format!("CREATE DATABASE {name}"))
                .execute(&mut conn)
                .await?;
            conn.close().await
        }
        .await;
        match made {
            Ok(()) => return format!("{}/{name}", server.base),
            Err(e) if Instant::now() > deadline => panic!("cannot create a test database: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}
