//! The production backends driving the real agent CLIs (installed from npm by
//! `scripts/agent-clis/install`) against the testkit's scripted model server.

use std::path::PathBuf;
use std::sync::Arc;

use gaffer_agents::accounting::PriceTable;
use gaffer_agents::acp::{AcpBackend, AcpConfig};
use gaffer_agents::claude::{ClaudeBackend, ClaudeConfig};
use gaffer_agents::codex::{CodexBackend, CodexConfig};
use gaffer_agents::sandbox::{self, Sandbox, SandboxMode};
use gaffer_agents::{
    AgentBackend, AgentEvent, Mode, PermissionDecision, PermissionKind, StartOptions, TurnStatus,
};
use gaffer_testkit::clis::{Cli, CliHome};
use gaffer_testkit::model::{call, say, ModelScript, ModelServer};
use gaffer_testkit::scenario::{FakeUsage, LlmReply};
use serde_json::json;

use super::support::*;

/// A workspace (a git repository) and a home for `cli` talking to `server`.
pub(super) struct Real {
    _dir: tempfile::TempDir,
    pub(super) ws: PathBuf,
    pub(super) home: CliHome,
}

impl Real {
    pub(super) fn new(cli: Cli, server: &ModelServer) -> Real {
        Self::with_model(cli, server, model(cli))
    }

    /// A home whose CLI runs `model` (one the CLI may not know).
    fn with_model(cli: Cli, server: &ModelServer, model: &str) -> Real {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws").canonicalize_or_create();
        gaffer_testkit::git::git(&ws, &["init", "-q"]);
        std::fs::write(ws.join("README.md"), "# demo\n").unwrap();
        gaffer_testkit::git::git(&ws, &["add", "."]);
        gaffer_testkit::git::git(&ws, &["commit", "-qm", "init"]);
        let home = CliHome::new(cli, server, model).unwrap();
        Real {
            _dir: dir,
            ws,
            home,
        }
    }

    pub(super) fn opts(&self, role: &str, mode: Mode) -> StartOptions {
        StartOptions {
            workspace: self.ws.clone(),
            role: role.into(),
            role_prompt: format!("You are the {role}. Follow the request."),
            mode,
            env: self.home.env.clone(),
            task_id: "task-1".into(),
            project: "demo".into(),
            model: Some(model(self.home.cli).into()),
            ..Default::default()
        }
    }

    pub(super) fn backend(&self) -> Arc<dyn AgentBackend> {
        let bin = Some(self.home.cli.bin());
        match self.home.cli {
            Cli::Claude => Arc::new(ClaudeBackend::new(ClaudeConfig {
                bin,
                ..Default::default()
            })),
            Cli::Codex => Arc::new(CodexBackend::new(CodexConfig {
                bin,
                prices: PriceTable::list_prices(),
                ..Default::default()
            })),
            Cli::Gemini => {
                let mut cfg = AcpConfig::gemini();
                cfg.bin = bin;
                cfg.prices = PriceTable::list_prices();
                cfg.state_dirs = vec![self.home.home.join(".gemini")];
                Arc::new(AcpBackend::new(cfg))
            }
        }
    }
}

/// Models the CLIs know, so each offers the tools it offers its real users.
fn model(cli: Cli) -> &'static str {
    match cli {
        Cli::Claude => "claude-sonnet-4-5",
        Cli::Codex => "gpt-5-codex",
        Cli::Gemini => "gemini-2.5-pro",
    }
}

trait CanonicalizeOrCreate {
    fn canonicalize_or_create(self) -> PathBuf;
}

impl CanonicalizeOrCreate for PathBuf {
    fn canonicalize_or_create(self) -> PathBuf {
        std::fs::create_dir_all(&self).unwrap();
        self.canonicalize().unwrap()
    }
}

/// Start a session of `cli` as `role` and play one turn of `prompt`, the gate answering
/// `decisions` in order.
async fn one_turn(
    cli: Cli,
    script: ModelScript,
    mode: Mode,
    prompt: &str,
    decisions: Vec<PermissionDecision>,
) -> Played {
    let server = ModelServer::start(script).await.unwrap();
    let real = Real::new(cli, &server);
    let gate = RecordingGate::new(decisions);
    let mut s = real
        .backend()
        .start(real.opts("owner", mode), gate.clone())
        .await
        .unwrap();
    let (events, res) = turn(s.as_mut(), prompt).await;
    let result = res.unwrap_or_else(|e| panic!("{e}\nmodel saw:\n{}", server.describe()));
    assert!(
        server.failures().is_empty(),
        "{:?}\n{}",
        server.failures(),
        server.describe()
    );
    assert!(
        server.strays().is_empty(),
        "the CLI reached past the model: {:?}",
        server.strays()
    );
    Played {
        real,
        server,
        gate,
        events,
        result,
    }
}

struct Played {
    real: Real,
    server: ModelServer,
    gate: Arc<RecordingGate>,
    events: Vec<AgentEvent>,
    result: gaffer_agents::TurnResult,
}

#[tokio::test]
async fn real_claude_owner_writes_through_its_write_tool_after_the_gate_allows() {
    let script = ModelScript::new().role(
        "owner",
        vec![
            call(
                "Write",
                json!({"file_path": "hello.txt", "content": "hi\n"}),
            ),
            say("I wrote hello.txt."),
        ],
    );
    let p = one_turn(
        Cli::Claude,
        script,
        Mode::ReadWrite,
        "write hello.txt",
        vec![PermissionDecision::allow()],
    )
    .await;
    assert_eq!(p.result.status, TurnStatus::Completed);
    assert_eq!(p.result.text, "I wrote hello.txt.");
    assert_eq!(
        std::fs::read_to_string(p.real.ws.join("hello.txt")).unwrap(),
        "hi\n"
    );
    let seen = p.gate.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].tool_name, "Write");
    assert_eq!(seen[0].kind, PermissionKind::FileChange);
    assert_eq!(
        seen[0].paths,
        vec![p.real.ws.join("hello.txt").display().to_string()]
    );
    // The model server's usage, as Claude Code summed it over the turn's two requests.
    assert!(p.result.usage.input_tokens > 0 && p.result.usage.output_tokens > 0);
    assert!(p.result.usage.cost_usd.is_some_and(|c| c > 0.0));
    assert_eq!(p.server.requests_of("owner").len(), 2);
    // The tool result the model saw is Claude Code's own.
    let second = &p.server.requests_of("owner")[1];
    assert!(second.body.to_string().contains("tool_result"));
}

#[tokio::test]
async fn real_codex_owner_edits_through_apply_patch_after_the_gate_allows() {
    let patch =
        "apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: hello.txt\n+hi\n*** End Patch\nEOF\n";
    let script = ModelScript::new().role(
        "owner",
        vec![
            call("exec_command", json!({"cmd": patch})),
            say("I added hello.txt."),
        ],
    );
    let p = one_turn(
        Cli::Codex,
        script,
        Mode::ReadWrite,
        "add hello.txt",
        vec![PermissionDecision::allow()],
    )
    .await;
    assert_eq!(p.result.status, TurnStatus::Completed, "{:#?}", p.events);
    assert_eq!(p.result.text, "I added hello.txt.");
    assert_eq!(
        std::fs::read_to_string(p.real.ws.join("hello.txt")).unwrap(),
        "hi\n"
    );
    let seen = p.gate.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].kind, PermissionKind::FileChange);
    assert!(
        seen[0].paths.iter().any(|p| p.ends_with("hello.txt")),
        "{seen:#?}"
    );
    assert!(p.result.usage.input_tokens > 0 && p.result.usage.output_tokens > 0);
}

#[tokio::test]
async fn real_gemini_answers_a_turn_over_acp() {
    let script = ModelScript::new().role("owner", vec![say("hello there")]);
    let p = one_turn(Cli::Gemini, script, Mode::ReadWrite, "say hello", vec![]).await;
    assert_eq!(p.result.status, TurnStatus::Completed);
    assert_eq!(p.result.text, "hello there");
    let req = &p.server.requests_of("owner")[0];
    assert!(
        req.uri.contains(":streamGenerateContent?alt=sse"),
        "{}",
        req.uri
    );
}

#[tokio::test]
async fn real_gemini_usage_reaches_the_turn_result() {
    let script = ModelScript::new().role(
        "owner",
        vec![LlmReply {
            text: Some("counted".into()),
            usage: Some(FakeUsage {
                input_tokens: 1200,
                output_tokens: 34,
                cached_input_tokens: 0,
            }),
            ..LlmReply::default()
        }],
    );
    let p = one_turn(Cli::Gemini, script, Mode::ReadWrite, "count", vec![]).await;
    assert_eq!(p.result.status, TurnStatus::Completed);
    // Gemini CLI reports the turn's tokens in the session/prompt result's `_meta.quota`.
    assert_eq!(p.result.usage.input_tokens, 1200, "{:?}", p.result.usage);
    assert_eq!(p.result.usage.output_tokens, 34);
    assert!(p
        .events
        .iter()
        .any(|e| matches!(e, AgentEvent::Usage { usage } if usage.input_tokens == 1200)));
}

#[tokio::test]
async fn real_gemini_permission_requests_name_the_command_and_the_paths() {
    let script = ModelScript::new().role(
        "owner",
        vec![
            call(
                "run_shell_command",
                json!({"command": "echo checked > check.log", "description": "run the check"}),
            ),
            call(
                "write_file",
                json!({"file_path": "notes/todo.txt", "content": "later\n"}),
            ),
            say("done"),
        ],
    );
    let p = one_turn(
        Cli::Gemini,
        script,
        Mode::ReadWrite,
        "check, then note",
        vec![PermissionDecision::allow(), PermissionDecision::allow()],
    )
    .await;
    assert_eq!(p.result.status, TurnStatus::Completed, "{:#?}", p.events);
    let seen = p.gate.seen();
    assert_eq!(seen.len(), 2, "{seen:#?}");
    let (shell, write) = (&seen[0], &seen[1]);
    assert_eq!(shell.kind, PermissionKind::Command);
    assert_eq!(
        shell.command.as_deref(),
        Some("echo checked > check.log"),
        "{shell:#?}"
    );
    assert_ne!(shell.input, serde_json::Value::Null, "{shell:#?}");
    assert_eq!(write.kind, PermissionKind::FileChange);
    let todo = p.real.ws.join("notes/todo.txt").display().to_string();
    assert_eq!(write.paths, vec![todo.clone()], "{write:#?}");
    assert!(write.input.to_string().contains("later"), "{write:#?}");
    assert_eq!(std::fs::read_to_string(&todo).unwrap(), "later\n");
    assert_eq!(
        std::fs::read_to_string(p.real.ws.join("check.log")).unwrap(),
        "checked\n"
    );
}

/// Real Gemini CLI declared as a generic ACP agent (`[agents.acp.gem]`), confined with
/// `required`: one turn, its state dir `~/.gemini` declared or not.
async fn declared_acp_turn(
    declare_state: bool,
) -> Result<gaffer_agents::TurnResult, gaffer_agents::AgentError> {
    let server = ModelServer::start(ModelScript::new().role("owner", vec![say("confined hello")]))
        .await
        .unwrap();
    let real = Real::new(Cli::Gemini, &server);
    let mut cfg = AcpConfig::command("gem", Cli::Gemini.bin(), vec!["--acp".into()]);
    if declare_state {
        cfg.state_dirs = vec![real.home.home.join(".gemini")];
    }
    let mut opts = real.opts("owner", Mode::ReadWrite);
    opts.sandbox = Sandbox {
        mode: SandboxMode::Required,
        network: true,
        ..Default::default()
    };
    let mut s = AcpBackend::new(cfg)
        .start(opts, Arc::new(gaffer_agents::AllowAll))
        .await?;
    turn(s.as_mut(), "say hello").await.1
}

#[tokio::test]
async fn real_acp_agent_runs_confined_with_the_state_dirs_it_declares() {
    if !sandbox::support().filesystem() {
        eprintln!("no Landlock here: {}", sandbox::support().describe());
        return;
    }
    let declared = declared_acp_turn(true).await.unwrap();
    assert_eq!(declared.text, "confined hello");
    // Undeclared, its own state dir is not writable and the sandbox says so.
    let err = declared_acp_turn(false)
        .await
        .expect_err("an ACP agent without its state dir should fail confined");
    let text = err.to_string();
    assert!(text.contains("sandbox"), "{text}");
}

/// One turn of `cli` running `model`, the model server reporting 1000 tokens in and
/// 100 out: the turn's usage.
async fn priced_turn(cli: Cli, model: &str) -> gaffer_agents::Usage {
    let script = ModelScript::new().role(
        "owner",
        vec![LlmReply {
            text: Some("counted".into()),
            usage: Some(FakeUsage {
                input_tokens: 1000,
                output_tokens: 100,
                cached_input_tokens: 0,
            }),
            ..LlmReply::default()
        }],
    );
    let server = ModelServer::start(script).await.unwrap();
    let real = Real::with_model(cli, &server, model);
    let mut opts = real.opts("owner", Mode::ReadWrite);
    // The model is the CLI's own setting here, not gaffer's: the backend learns it
    // from the CLI (Codex's thread, Gemini CLI's usage per model).
    opts.model = None;
    let mut s = real
        .backend()
        .start(opts, RecordingGate::new(vec![]))
        .await
        .unwrap();
    let (_, res) = turn(s.as_mut(), "count").await;
    let result = res.unwrap_or_else(|e| panic!("{e}\nmodel saw:\n{}", server.describe()));
    assert_eq!(
        result.status,
        TurnStatus::Completed,
        "{}",
        server.describe()
    );
    result.usage
}

/// Codex and Gemini CLI report tokens only: a known model's are priced at its list
/// price, an unknown model's cost is unknown (`None`), never 0.
async fn tokens_are_priced_by_model(cli: Cli) {
    let known = priced_turn(cli, model(cli)).await;
    assert_eq!(
        (
            known.input_tokens + known.cached_input_tokens,
            known.output_tokens
        ),
        (1000, 100),
        "{known:?}"
    );
    let price = PriceTable::list_prices().cost(model(cli), &known).unwrap();
    assert!(price > 0.0);
    assert_eq!(known.cost_usd, Some(price), "{known:?}");
    let unknown = priced_turn(cli, "scripted-model-without-a-price").await;
    assert!(unknown.output_tokens > 0, "{unknown:?}");
    assert_eq!(unknown.cost_usd, None, "{unknown:?}");
}

#[tokio::test]
async fn real_codex_tokens_are_priced_by_model() {
    tokens_are_priced_by_model(Cli::Codex).await;
}

#[tokio::test]
async fn real_gemini_tokens_are_priced_by_model() {
    tokens_are_priced_by_model(Cli::Gemini).await;
}

#[tokio::test]
async fn real_claude_reports_its_spend_while_the_turn_runs() {
    let spent = |input, output| FakeUsage {
        input_tokens: input,
        output_tokens: output,
        cached_input_tokens: 0,
    };
    let script = ModelScript::new().role(
        "owner",
        vec![
            LlmReply {
                usage: Some(spent(1000, 20)),
                ..call(
                    "Write",
                    json!({"file_path": "hello.txt", "content": "hi\n"}),
                )
            },
            LlmReply {
                usage: Some(spent(1500, 10)),
                ..say("I wrote hello.txt.")
            },
        ],
    );
    let p = one_turn(
        Cli::Claude,
        script,
        Mode::ReadWrite,
        "write hello.txt",
        vec![PermissionDecision::allow()],
    )
    .await;
    assert_eq!(p.result.status, TurnStatus::Completed);
    let so_far: Vec<(usize, u64)> = p
        .events
        .iter()
        .enumerate()
        .filter_map(|(i, e)| match e {
            AgentEvent::UsageSoFar { usage } => Some((i, usage.input_tokens)),
            _ => None,
        })
        .collect();
    // The first model call's spend is known before its tool has run.
    let tool_ran = p
        .events
        .iter()
        .position(|e| matches!(e, AgentEvent::ToolResult { .. }))
        .unwrap();
    assert!(
        so_far
            .iter()
            .any(|&(i, input)| i < tool_ran && input == 1000),
        "{so_far:?} before event {tool_ran}: {:#?}",
        p.events
    );
    // Each call counted once; what counts is still the result's, reported once.
    assert_eq!(so_far.last().map(|s| s.1), Some(2500), "{so_far:?}");
    assert_eq!(p.result.usage.input_tokens, 2500, "{:?}", p.result.usage);
    let counted: Vec<_> = p
        .events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Usage { usage } => Some(*usage),
            _ => None,
        })
        .collect();
    assert_eq!(counted, vec![p.result.usage]);
}

/// The repository's `.claude/settings.json` (written by whoever wrote the repository,
/// or by an agent) may name another endpoint: real Claude Code follows it in a free
/// session, and in a session that must stay local keeps the endpoint gaffer checked.
#[tokio::test]
async fn real_claude_local_only_keeps_the_checked_endpoint_against_the_repositorys_settings() {
    for local_only in [false, true] {
        let script = ModelScript::new().role("owner", vec![say("done")]);
        let checked = ModelServer::start(script.clone()).await.unwrap();
        let elsewhere = ModelServer::start(script).await.unwrap();
        let real = Real::new(Cli::Claude, &checked);
        std::fs::create_dir_all(real.ws.join(".claude")).unwrap();
        std::fs::write(
            real.ws.join(".claude/settings.json"),
            json!({"env": {"ANTHROPIC_BASE_URL": elsewhere.base_url()}}).to_string(),
        )
        .unwrap();
        let mut opts = real.opts("owner", Mode::ReadOnly);
        opts.local_only = local_only;
        let mut s = real
            .backend()
            .start(opts, Arc::new(gaffer_agents::AllowAll))
            .await
            .unwrap();
        let (_, res) = turn(s.as_mut(), "go").await;
        let (used, unused) = if local_only {
            (&checked, &elsewhere)
        } else {
            (&elsewhere, &checked)
        };
        res.unwrap_or_else(|e| panic!("local_only={local_only}: {e}\n{}", used.describe()));
        assert!(
            !used.requests_of("owner").is_empty() && unused.requests_of("owner").is_empty(),
            "local_only={local_only}: checked got {}, elsewhere {}",
            checked.requests_of("owner").len(),
            elsewhere.requests_of("owner").len()
        );
        assert!(used.strays().is_empty(), "{:?}", used.strays());
    }
}
