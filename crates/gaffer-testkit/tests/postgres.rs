//! The throwaway PostgreSQL stops, and its directory goes, when the test process
//! that started it is killed with its whole process group (a runner's timeout or
//! Ctrl-C sends SIGTERM to the group), even while some client still holds a
//! connection: servers left behind fill the disk.

use sqlx::Connection;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[tokio::test]
async fn the_server_stops_when_its_test_process_group_is_terminated() {
    if !gaffer_testkit::postgres::available() {
        return;
    }
    let mut holder = Command::new(env!("CARGO_BIN_EXE_throwaway-postgres"))
        .process_group(0)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut url = String::new();
    BufReader::new(holder.stdout.take().unwrap())
        .read_line(&mut url)
        .unwrap();
    let url = url.trim().to_owned();
    let port: u16 = url
        .rsplit_once(':')
        .and_then(|(_, rest)| rest.split('/').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {url:?}"));
    // A client that outlives the test process (a worker it spawned, say).
    let mut client = sqlx::PgConnection::connect(&url).await.unwrap();
    let data: String = sqlx::query_scalar("SHOW data_directory")
        .fetch_one(&mut client)
        .await
        .unwrap();
    let dir = PathBuf::from(data).parent().unwrap().to_owned();
    assert!(dir.exists());

    let group = format!("-{}", holder.id());
    let killed = Command::new("kill")
        .args(["-TERM", "--", &group])
        .status()
        .unwrap();
    assert!(killed.success());
    holder.wait().unwrap();

    let deadline = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() || dir.exists() {
        assert!(
            Instant::now() < deadline,
            "the PostgreSQL on port {port} (in {}) outlived its terminated test process",
            dir.display()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(client);
}
