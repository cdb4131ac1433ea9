use assert_cmd::Command;
use gaffer_core::{Actor, Event, Intent, StreamId};
use gaffer_store::{Durability, Journal, NewEvent, SqliteJournal};
use std::path::PathBuf;

/// A throwaway home for one test: its own config file and data dir.
pub struct Home {
    pub dir: tempfile::TempDir,
}

impl Home {
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn config(&self) -> PathBuf {
        self.dir.path().join("config.toml")
    }

    pub fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    pub fn db(&self) -> PathBuf {
        self.data().join("gaffer.db")
    }

    /// `gaffer` with this home, and nothing from the caller's environment that could leak in.
    pub fn gaffer(&self) -> Command {
        let mut cmd = Command::cargo_bin("gaffer").unwrap();
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.dir.path())
            .env("GAFFER_CONFIG", self.config())
            .env("GAFFER_DATA_DIR", self.data());
        cmd
    }

    /// A client sending this home's local secret (what a person's scripts use against
    /// `gaffer serve`); the server makes the secret before it announces itself.
    pub fn http(&self) -> reqwest::Client {
        local_client(&self.data())
    }

    /// A config file with `text`.
    pub fn write_config(&self, text: &str) {
        std::fs::write(self.config(), text).unwrap();
    }

    /// A journal with one project and two tasks, written through the store.
    pub fn seed(&self) {
        self.write_config("");
        std::fs::create_dir_all(self.data()).unwrap();
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let j = SqliteJournal::open(&self.db(), Durability::Normal)
                .await
                .unwrap();
            let ev = |e| NewEvent {
                at: 1_700_000_000_000,
                event: e,
            };
            j.append(
                &StreamId::from("p-demo"),
                0,
                vec![ev(Event::ProjectRegistered {
                    project_id: "p-demo".into(),
                    name: "demo".into(),
                    path: "/repos/demo".into(),
                    check_command: Some("cargo test".into()),
                })],
            )
            .await
            .unwrap();
            for (id, request) in [
                ("t-one", "add an installation section to README"),
                ("t-two", "fix the flaky retry test"),
            ] {
                j.append(
                    &StreamId::from(id),
                    0,
                    vec![
                        ev(Event::TaskCreated {
                            task_id: id.into(),
                            project_id: "p-demo".into(),
                            request: request.into(),
                            by: Actor::user("ana", "cli"),
                            options: Default::default(),
                        }),
                        ev(Event::StepIntentRecorded {
                            step_id: "plan".into(),
                            name: "plan".into(),
                            intent: Intent::ReadOnly,
                            depends_on: vec![],
                            input: serde_json::json!({"request": request}),
                        }),
                    ],
                )
                .await
                .unwrap();
            }
            j.close().await;
        });
    }
}

/// A client sending the local secret of the data dir `data` as its bearer credential.
pub fn local_client(data: &std::path::Path) -> reqwest::Client {
    let secret = std::fs::read_to_string(data.join("local-secret")).unwrap();
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        reqwest::header::AUTHORIZATION,
        format!("Bearer {}", secret.trim()).parse().unwrap(),
    );
    reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .unwrap()
}
