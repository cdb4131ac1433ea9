//! Shared test helpers: a temp workspace, the fake's env, a recording gate.
#![allow(dead_code)]

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use gaffer_agents::{
    AgentError, AgentEvent, AgentSession, ApprovalGate, Mode, PermissionDecision,
    PermissionRequest, StartOptions, TurnResult,
};
use gaffer_testkit::scenario::Scenario;

pub struct Env {
    pub dir: tempfile::TempDir,
    pub ws: PathBuf,
    pub log: PathBuf,
    pub scenario: PathBuf,
    pub claude_home: PathBuf,
    pub codex_home: PathBuf,
    pub state: PathBuf,
}

impl Env {
    pub fn new(scenario: &Scenario) -> Env {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let ws = std::fs::canonicalize(ws).unwrap();
        let claude_home = dir.path().join("claude-home");
        let codex_home = dir.path().join("codex-home");
        let state = dir.path().join("state");
        for d in [&claude_home, &codex_home, &state] {
            std::fs::create_dir_all(d).unwrap();
        }
        let env = Env {
            log: dir.path().join("effects.log"),
            scenario: dir.path().join("scenario.json"),
            dir,
            ws,
            claude_home,
            codex_home,
            state,
        };
        env.set_scenario(scenario);
        env
    }

    pub fn set_scenario(&self, s: &Scenario) {
        s.write_to(&self.scenario).unwrap();
    }

    pub fn opts(&self, mode: Mode) -> StartOptions {
        let mut env = BTreeMap::new();
        env.insert(
            "GAFFER_FAKE_SCENARIO".into(),
            self.scenario.display().to_string(),
        );
        env.insert("GAFFER_FAKE_LOG".into(), self.log.display().to_string());
        env.insert(
            "GAFFER_FAKE_STATE_DIR".into(),
            self.state.display().to_string(),
        );
        env.insert(
            "CLAUDE_CONFIG_DIR".into(),
            self.claude_home.display().to_string(),
        );
        env.insert("CODEX_HOME".into(), self.codex_home.display().to_string());
        StartOptions {
            workspace: self.ws.clone(),
            role: "owner".into(),
            role_prompt: "You are the owner.".into(),
            mode,
            env,
            task_id: "task-42".into(),
            project: "demo".into(),
            model: None,
            ..Default::default()
        }
    }

    /// `mode = "required"`, with the fake's own files allowed: it reads its scenario and
    /// appends to the effect log and its state dir (the test's, not the agent's).
    pub fn required_sandbox(&self) -> gaffer_agents::sandbox::Sandbox {
        if !self.log.exists() {
            std::fs::write(&self.log, "").unwrap();
        }
        gaffer_agents::sandbox::Sandbox {
            mode: gaffer_agents::sandbox::SandboxMode::Required,
            network: true,
            readable: vec![self.scenario.clone()],
            writable: vec![self.log.clone(), self.state.clone()],
            ..Default::default()
        }
    }

    pub fn log(&self) -> Vec<String> {
        gaffer_testkit::scenario::read_log(&self.log)
    }

    pub fn log_count(&self, needle: &str) -> usize {
        self.log().iter().filter(|l| l.contains(needle)).count()
    }
}

pub fn scenario(v: serde_json::Value) -> Scenario {
    serde_json::from_value(v).unwrap()
}

/// A gate that answers from a script and records every request it was asked.
#[derive(Default)]
pub struct RecordingGate {
    script: Mutex<VecDeque<PermissionDecision>>,
    pub seen: Mutex<Vec<PermissionRequest>>,
}

impl RecordingGate {
    pub fn new(script: Vec<PermissionDecision>) -> Arc<Self> {
        Arc::new(RecordingGate {
            script: Mutex::new(script.into()),
            seen: Mutex::new(Vec::new()),
        })
    }
    pub fn seen(&self) -> Vec<PermissionRequest> {
        self.seen.lock().unwrap().clone()
    }
}

#[async_trait]
impl ApprovalGate for RecordingGate {
    async fn decide(&self, request: PermissionRequest) -> PermissionDecision {
        self.seen.lock().unwrap().push(request);
        self.script
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or_else(|| PermissionDecision::deny("script exhausted"))
    }
}

/// Run one turn with a timeout; returns events and the result or the terminal error.
pub async fn turn(
    s: &mut dyn AgentSession,
    prompt: &str,
) -> (Vec<AgentEvent>, Result<TurnResult, AgentError>) {
    s.send_turn(prompt).await.unwrap();
    let mut events = Vec::new();
    let fut = async {
        while let Some(ev) = s.next_event().await {
            match ev {
                Ok(AgentEvent::TurnCompleted { result }) => {
                    events.push(AgentEvent::TurnCompleted {
                        result: result.clone(),
                    });
                    return Ok(result);
                }
                Ok(ev) => events.push(ev),
                Err(e) => return Err(e),
            }
        }
        Err(AgentError::Closed)
    };
    let r = tokio::time::timeout(Duration::from_secs(30), fut)
        .await
        .expect("turn timed out");
    (events, r)
}

pub fn texts(events: &[AgentEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::AssistantText { text } => Some(text.clone()),
            _ => None,
        })
        .collect()
}
