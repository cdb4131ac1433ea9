use gaffer_config::*;
use pretty_assertions::assert_eq;
use std::collections::HashMap;
use std::path::PathBuf;

pub(super) fn load_text(text: &str, env: &[(&str, &str)]) -> Result<Config, ConfigError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    std::fs::write(&path, text).unwrap();
    let env: HashMap<String, String> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let lookup = move |k: &str| env.get(k).cloned();
    load(&Sources {
        file: Some((path, true)),
        data_dir_flag: None,
        database_flag: None,
        default_data_dir: PathBuf::from("/data"),
        env: &lookup,
    })
    .map(|mut c| {
        c.source = None;
        c
    })
}

#[test]
fn the_template_parses_to_the_defaults() {
    assert_eq!(
        load_text(TEMPLATE, &[]).unwrap(),
        Config::defaults(PathBuf::from("/data"))
    );
}

#[test]
fn the_templates_commented_values_are_the_defaults() {
    // Uncomment every `# key = value` line: the result must still be the defaults,
    // so the template documents what gaffer really does.
    let uncommented: String = TEMPLATE
        .lines()
        .map(|l| match l.strip_prefix("# ") {
            Some(rest) if rest.contains(" = ") && !rest.starts_with("data_dir") => rest.to_owned(),
            _ => l.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert!(uncommented.contains("\nlisten = \"127.0.0.1:7777\""));
    assert_eq!(
        load_text(&uncommented, &[]).unwrap(),
        Config::defaults(PathBuf::from("/data"))
    );
}

#[test]
fn a_malformed_file_names_the_line() {
    let err = load_text(
        "[server]\nlisten = \"127.0.0.1:7777\"\nworkers = = 3\n",
        &[],
    )
    .unwrap_err();
    match &err {
        ConfigError::Parse { line, .. } => assert_eq!(*line, 3, "{err}"),
        other => panic!("{other}"),
    }
    assert!(err.to_string().contains("config.toml:3:"), "{err}");
}

#[test]
fn an_unknown_key_is_refused_with_its_line() {
    let err = load_text("[server]\n\nlistn = \"0.0.0.0:1\"\n", &[]).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains(":3:") && msg.contains("listn"), "{msg}");
}

#[test]
fn a_bad_value_names_the_field() {
    let err = load_text("[server]\nlisten = \"localhost\"\n", &[]).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("server.listen") && msg.contains("127.0.0.1:7777"),
        "{msg}"
    );
    let err = load_text("[roles.owner]\nagent = \"gpt\"\n", &[]).unwrap_err();
    assert!(err.to_string().contains("roles.owner.agent"), "{err}");
    let err = load_text("[workers]\ncount = 0\n", &[]).unwrap_err();
    assert!(err.to_string().contains("workers.count"), "{err}");
}

#[test]
fn environment_overrides_the_file_and_errors_name_the_variable() {
    let c = load_text(
        "[server]\nlisten = \"127.0.0.1:1\"\n[workers]\ncount = 3\n",
        &[
            ("GAFFER_SERVER_LISTEN", "127.0.0.1:9999"),
            ("GAFFER_DATABASE_URL", "/tmp/x.db"),
        ],
    )
    .unwrap();
    assert_eq!(c.listen.port(), 9999);
    assert_eq!(c.workers, 3);
    assert_eq!(c.database_location(), "/tmp/x.db");
    let err = load_text("", &[("GAFFER_WORKERS", "many")]).unwrap_err();
    assert!(err.to_string().contains("GAFFER_WORKERS"), "{err}");
}

#[test]
fn roles_take_agents_models_and_acp_names() {
    let c = load_text(
        "[roles.reviewer]\nagent = \"codex\"\nmodel = \"gpt-5\"\n[roles.arbiter]\nagent = \"acp:goose\"\n[agents.acp.goose]\ncommand = \"goose\"\nargs = [\"acp\"]\n",
        &[],
    )
    .unwrap();
    assert_eq!(c.roles.reviewer.agent, "codex");
    assert_eq!(c.roles.reviewer.model.as_deref(), Some("gpt-5"));
    assert_eq!(c.roles.arbiter.agent, "acp:goose");
    assert_eq!(c.roles.owner, RoleConfig::default());
}

#[test]
fn a_named_file_must_exist_but_the_default_may_be_absent() {
    let lookup = |_: &str| None;
    let missing = PathBuf::from("/nonexistent/gaffer.toml");
    let err = load(&Sources {
        file: Some((missing.clone(), true)),
        data_dir_flag: None,
        database_flag: None,
        default_data_dir: PathBuf::from("/d"),
        env: &lookup,
    })
    .unwrap_err();
    assert!(err.to_string().contains("gaffer init"), "{err}");
    let c = load(&Sources {
        file: Some((missing, false)),
        data_dir_flag: Some(PathBuf::from("/flag")),
        database_flag: None,
        default_data_dir: PathBuf::from("/d"),
        env: &lookup,
    })
    .unwrap();
    assert_eq!(c.data_dir, PathBuf::from("/flag"));
    assert_eq!(c.database_location(), "/flag/gaffer.db");
}

#[test]
fn the_readme_quotes_the_template_verbatim() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let start = readme
        .find("<!-- config:start -->\n```toml\n")
        .expect("config block in README")
        + "<!-- config:start -->\n```toml\n".len();
    let end = readme
        .find("```\n<!-- config:end -->")
        .expect("end of config block");
    assert_eq!(
        &readme[start..end],
        TEMPLATE,
        "README's configuration section differs from default.toml"
    );
}

#[test]
fn projects_override_roles_over_the_global_ones() {
    let c = load_text(
        "[roles.owner]\nagent = \"codex\"\nmodel = \"gpt-5\"\n[projects.web.roles.reviewer]\nagent = \"gemini\"\n[projects.web.roles.owner]\nmodel = \"o4\"\n",
        &[],
    )
    .unwrap();
    assert_eq!(c.roles.owner.agent, "codex");
    let web = c.roles_for("web");
    assert_eq!(web.reviewer.agent, "gemini");
    assert_eq!(
        web.owner.agent, "codex",
        "a project inherits what it does not override"
    );
    assert_eq!(web.owner.model.as_deref(), Some("o4"));
    assert_eq!(c.roles_for("other").reviewer.agent, "claude");
    let err = load_text("[projects.web.roles.owner]\nagent = \"nope\"\n", &[]).unwrap_err();
    assert!(
        err.to_string().contains("projects.web.roles.owner.agent"),
        "{err}"
    );
}

#[test]
fn a_project_forge_and_tracker_resolve_with_defaults_and_env_overrides() {
    let text = r#"
[worktrees]
retention_days = 3

[projects.my-app.forge]
kind = "Forgejo"
base_url = "https://git.example.com/"
owner = "acme"
token_env = "MY_GITEA_TOKEN"
labels = ["gaffer", "bot"]

[projects.my-app.tracker]
kind = "vikunja"
base_url = "https://tasks.example.com"
project_id = 7
token_env = "VIKUNJA_TOKEN"

[projects.other.forge]
kind = "github"

[projects.on-gitlab.forge]
kind = "GitLab"
owner = "acme/tools"
token_env = "GAFFER_GITLAB_TOKEN"

[projects.self-hosted.forge]
kind = "gitlab"
base_url = "https://git.example.com/gitlab/"
"#;
    let c = load_text(
        text,
        &[(
            "GAFFER_PROJECT_MY_APP_FORGE_BASE_URL",
            "http://127.0.0.1:3000",
        )],
    )
    .unwrap();
    assert_eq!(c.worktree_retention_days, 3);
    assert_eq!(
        c.forges["my-app"],
        ForgeSettings {
            kind: "gitea".into(),
            base_url: "http://127.0.0.1:3000".into(),
            owner: Some("acme".into()),
            repo: None,
            remote: "origin".into(),
            token_env: Some("MY_GITEA_TOKEN".into()),
            push_with_token: false,
            labels: vec!["gaffer".into(), "bot".into()],
            ci_timeout_secs: 3600,
            ci_fix_attempts: 2,
            wait_for_ci: true,
            conflict_strategy: ConflictStrategy::Rebase,
            follow: true,
            follow_interval_secs: 120,
            review_fix_attempts: 3,
            bot_user: None,
        }
    );
    // GitHub's API URL is the default base; no token_env means git credentials.
    assert_eq!(c.forges["other"].base_url, "https://api.github.com");
    assert_eq!(c.forges["other"].token_env, None);
    // GitLab: gitlab.com unless a self-hosted instance is named; a group path owner.
    let lab = &c.forges["on-gitlab"];
    assert_eq!(
        (
            lab.kind.as_str(),
            lab.base_url.as_str(),
            lab.owner.as_deref()
        ),
        ("gitlab", "https://gitlab.com", Some("acme/tools"))
    );
    assert_eq!(lab.token_env.as_deref(), Some("GAFFER_GITLAB_TOKEN"));
    assert_eq!(
        c.forges["self-hosted"].base_url,
        "https://git.example.com/gitlab"
    );
    assert_eq!(
        c.trackers["my-app"],
        TrackerSettings {
            base_url: "https://tasks.example.com".into(),
            project_id: 7,
            token_env: "VIKUNJA_TOKEN".into(),
        }
    );
    assert!(!c.trackers.contains_key("other"));
    let c = load_text("", &[("GAFFER_WORKTREES_RETENTION_DAYS", "0")]).unwrap();
    assert_eq!(c.worktree_retention_days, 0);
}

#[test]
fn a_bad_forge_or_tracker_setting_names_the_key_and_what_to_write() {
    let cases = [
        (
            "[projects.a.forge]\nkind = \"bitbucket\"\nbase_url = \"https://x\"\n",
            "projects.a.forge.kind",
            "\"github\" or \"gitlab\"",
        ),
        (
            "[projects.a.forge]\nkind = \"gitea\"\n",
            "projects.a.forge.base_url",
            "instance's URL",
        ),
        (
            "[projects.a.forge]\nkind = \"gitea\"\nbase_url = \"git.example.com\"\n",
            "projects.a.forge.base_url",
            "https://",
        ),
        (
            "[projects.a.forge]\nkind = \"gitea\"\nbase_url = \"https://x\"\ntoken_env = \"ghp_abc-123\"\n",
            "projects.a.forge.token_env",
            "not the token itself",
        ),
        (
            "[projects.a.forge]\nkind = \"github\"\nci_timeout_secs = 0\n",
            "projects.a.forge.ci_timeout_secs",
            "at least 1",
        ),
        (
            "[projects.a.forge]\nkind = \"github\"\nconflict_strategy = \"squash\"\n",
            "projects.a.forge.conflict_strategy",
            "\"rebase\"",
        ),
        (
            "[projects.a.forge]\nkind = \"github\"\nfollow_interval_secs = 0\n",
            "projects.a.forge.follow_interval_secs",
            "follow = false",
        ),
        (
            "[projects.a.forge]\nkind = \"github\"\nbot_user = \" \"\n",
            "projects.a.forge.bot_user",
            "forge login",
        ),
        (
            "[projects.a.tracker]\nkind = \"vikunja\"\nbase_url = \"https://t\"\ntoken_env = \"T\"\n",
            "projects.a.tracker.project_id",
            "Vikunja project",
        ),
        (
            "[projects.a.tracker]\nkind = \"jira\"\n",
            "projects.a.tracker.kind",
            "vikunja",
        ),
    ];
    for (text, field, hint) in cases {
        let err = load_text(text, &[]).unwrap_err().to_string();
        assert!(err.contains(field), "{text}: {err}");
        assert!(err.contains(hint), "{text}: {err}");
        assert!(!err.contains("ghp_abc"), "a token was echoed: {err}");
    }
    let err = load_text("", &[("GAFFER_WORKTREES_RETENTION_DAYS", "a week")])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("GAFFER_WORKTREES_RETENTION_DAYS") && err.contains("whole number"),
        "{err}"
    );
}

#[test]
fn sandbox_settings_from_the_file_and_the_environment() {
    let c = load_text(
        "[sandbox]\nmode = \"required\"\nnetwork = \"off\"\nwritable = [\"/home/me/.cargo\"]\nreadable = [\"/srv/toolchain\"]\n",
        &[],
    )
    .unwrap();
    assert_eq!(
        c.sandbox,
        SandboxConfig {
            mode: SandboxMode::Required,
            network: false,
            writable: vec![PathBuf::from("/home/me/.cargo")],
            readable: vec![PathBuf::from("/srv/toolchain")],
        }
    );
    let c = load_text(
        "[sandbox]\nmode = \"required\"\n",
        &[
            ("GAFFER_SANDBOX", "off"),
            ("GAFFER_SANDBOX_WRITABLE", "/a:/b"),
        ],
    )
    .unwrap();
    assert_eq!(c.sandbox.mode, SandboxMode::Off);
    assert_eq!(
        c.sandbox.writable,
        vec![PathBuf::from("/a"), PathBuf::from("/b")]
    );
    let c = load_text("", &[("GAFFER_SANDBOX_READABLE", "/opt/sdk")]).unwrap();
    assert_eq!(c.sandbox.readable, vec![PathBuf::from("/opt/sdk")]);
    assert_eq!(
        Config::defaults(PathBuf::from("/d")).sandbox.mode,
        SandboxMode::Auto
    );
}

#[test]
fn bad_sandbox_values_name_the_field_and_the_choices() {
    let err = load_text("[sandbox]\nmode = \"strict\"\n", &[])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("sandbox.mode") && err.contains("\"required\""),
        "{err}"
    );
    let err = load_text("", &[("GAFFER_SANDBOX_NETWORK", "no")])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("GAFFER_SANDBOX_NETWORK") && err.contains("\"off\""),
        "{err}"
    );
    let err = load_text("[sandbox]\nwritable = [\"cache\"]\n", &[])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("sandbox.writable") && err.contains("absolute"),
        "{err}"
    );
}

#[test]
fn variables_for_agents_and_checks_are_listed_by_name() {
    let c = load_text(
        "[agents]\nenv = [\"CARGO_TARGET_DIR\"]\n\n[projects.web]\ncheck_env = [\"DATABASE_URL\"]\n",
        &[],
    )
    .unwrap();
    assert_eq!(c.agent_env, vec!["CARGO_TARGET_DIR".to_string()]);
    assert_eq!(c.check_env["web"], vec!["DATABASE_URL".to_string()]);
    let c = load_text(
        "[agents]\nenv = [\"A\"]\n",
        &[("GAFFER_AGENTS_ENV", "B, C")],
    )
    .unwrap();
    assert_eq!(c.agent_env, vec!["B".to_string(), "C".to_string()]);
    let err = load_text(
        "[projects.web]\ncheck_env = [\"DATABASE_URL=postgres://x\"]\n",
        &[],
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("projects.web.check_env") && err.contains("variable names"),
        "{err}"
    );
    let err = load_text("[agents]\nenv = [\"\"]\n", &[])
        .unwrap_err()
        .to_string();
    assert!(err.contains("agents.env"), "{err}");
}

#[test]
fn secret_variables_are_listed_by_name() {
    let c = load_text("[secrets]\nenv = [\"DB_PASS\", \"SMTP_KEY\"]\n", &[]).unwrap();
    assert_eq!(
        c.secret_env,
        vec!["DB_PASS".to_string(), "SMTP_KEY".to_string()]
    );
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]

    /// Any file is either a configuration or an error that names the file: never a panic.
    #[test]
    fn any_file_loads_or_names_itself_in_the_error(
        text in "(\\[[a-z_.]{0,12}\\]\n|[a-z_]{1,10} = (\"[^\"\n]{0,12}\"|[0-9]{1,6}|\\[\\]|true)\n|.{0,30}\n){0,12}"
    ) {
        match load_text(&text, &[]) {
            Ok(_) => {}
            Err(e) => {
                let msg = e.to_string();
                proptest::prop_assert!(
                    msg.contains("config.toml") || matches!(e, ConfigError::Invalid { .. }),
                    "{msg}"
                );
            }
        }
    }
}

#[test]
fn discord_rooms_approvers_and_urls_are_read_and_checked() {
    let c = load_text(
        "[discord]\napplication_id = \"42\"\napprover_users = [\"7\"]\napprover_roles = [\"8\"]\n[discord.rooms]\n\"100\" = \"demo\"\n",
        &[("GAFFER_DISCORD_API_URL", "http://127.0.0.1:9/api/v10/")],
    )
    .unwrap();
    assert_eq!(c.discord.application_id.as_deref(), Some("42"));
    assert_eq!(c.discord.approver_users, ["7"]);
    assert_eq!(c.discord.approver_roles, ["8"]);
    assert_eq!(c.discord.rooms.get("100").map(String::as_str), Some("demo"));
    assert_eq!(c.discord.api_url, "http://127.0.0.1:9/api/v10");
    assert_eq!(c.discord.token_env, DISCORD_TOKEN_ENV);
    assert_eq!(c.discord.gateway_url, None);

    let err = load_text("[discord.rooms]\n\"#general\" = \"demo\"\n", &[]).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("discord.rooms") && msg.contains("#general") && msg.contains("Copy ID"),
        "{msg}"
    );
    let err = load_text("[discord]\ntoken_env = \"Bot abc\"\n", &[]).unwrap_err();
    assert!(err.to_string().contains("discord.token_env"), "{err}");
    let err = load_text("[discord]\n", &[("GAFFER_DISCORD_GATEWAY_URL", "http://x")]).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("GAFFER_DISCORD_GATEWAY_URL") && msg.contains("discord.gateway_url"),
        "{msg}"
    );
}

#[test]
fn the_lease_length_comes_from_file_or_env_and_is_bounded() {
    assert_eq!(load_text("", &[]).unwrap().lease_secs, 30);
    let c = load_text("[workers]\nlease_secs = 5\n", &[]).unwrap();
    assert_eq!(c.lease_secs, 5);
    let c = load_text(
        "[workers]\nlease_secs = 5\n",
        &[("GAFFER_WORKERS_LEASE_SECS", "3")],
    )
    .unwrap();
    assert_eq!(c.lease_secs, 3);
    let err = load_text("[workers]\nlease_secs = 1\n", &[]).unwrap_err();
    assert!(err.to_string().contains("workers.lease_secs"), "{err}");
    assert!(err.to_string().contains("from 2 to 3600"), "{err}");
    let err = load_text("", &[("GAFFER_WORKERS_LEASE_SECS", "soon")]).unwrap_err();
    assert!(
        err.to_string().contains("GAFFER_WORKERS_LEASE_SECS"),
        "{err}"
    );
}

#[test]
fn public_names_are_host_names_from_the_file_or_the_environment() {
    let c = load_text(
        "[server]\npublic_names = [\"Gaffer.Example.com\", \"box.lan\"]\n",
        &[],
    )
    .unwrap();
    assert_eq!(c.public_names, ["gaffer.example.com", "box.lan"]);
    let c = load_text(
        "[server]\npublic_names = [\"ignored.example\"]\n",
        &[("GAFFER_SERVER_PUBLIC_NAMES", "a.example, b.example")],
    )
    .unwrap();
    assert_eq!(c.public_names, ["a.example", "b.example"]);
    for bad in [
        "https://gaffer.example.com",
        "gaffer.example.com:7777",
        "a/b",
        "",
    ] {
        let err = load_text(&format!("[server]\npublic_names = [{bad:?}]\n"), &[]).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("server.public_names") && msg.contains("host names only"),
            "{msg}"
        );
    }
}

#[test]
fn acp_agents_are_declared_with_command_args_state_dirs_and_env() {
    let c = load_text(
        r#"
[roles.owner]
agent = "acp:claude-acp"
[projects.demo.roles.reviewer]
agent = "acp:claude-acp"
[agents.acp.claude-acp]
command = "claude-code-acp"
args = ["--verbose"]
state_dirs = ["~/.claude", "/var/lib/acp"]
env = { DISABLE_TELEMETRY = "1" }
"#,
        &[("HOME", "/home/me")],
    )
    .unwrap();
    let a = &c.acp_agents["claude-acp"];
    assert_eq!(a.command, "claude-code-acp");
    assert_eq!(a.args, vec!["--verbose".to_string()]);
    assert_eq!(
        a.state_dirs,
        vec![
            PathBuf::from("/home/me/.claude"),
            PathBuf::from("/var/lib/acp")
        ]
    );
    assert_eq!(a.env["DISABLE_TELEMETRY"], "1");
    assert_eq!(c.roles.owner.agent, "acp:claude-acp");
}

#[test]
fn an_undeclared_acp_agent_is_refused_naming_the_table_to_add() {
    for text in [
        "[roles.owner]\nagent = \"acp:goose\"\n",
        "[projects.demo.roles.owner]\nagent = \"acp:goose\"\n[agents.acp.other]\ncommand = \"other\"\n",
    ] {
        let err = load_text(text, &[]).unwrap_err().to_string();
        assert!(err.contains("owner.agent"), "{err}");
        assert!(err.contains("[agents.acp.goose]"), "{err}");
    }
    let err = load_text(
        "[projects.demo.roles.owner]\nagent = \"acp:goose\"\n[agents.acp.other]\ncommand = \"other\"\n",
        &[],
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("declared: acp:other"), "{err}");
}

#[test]
fn a_bad_acp_declaration_names_the_key() {
    for (text, field) in [
        ("[agents.acp.x]\nargs = []\n", "agents.acp.x.command"),
        (
            "[agents.acp.x]\ncommand = \"bin/x\"\n",
            "agents.acp.x.command",
        ),
        (
            "[agents.acp.x]\ncommand = \"x\"\nstate_dirs = [\"state\"]\n",
            "agents.acp.x.state_dirs",
        ),
        ("[agents.acp.\"a b\"]\ncommand = \"x\"\n", "agents.acp.a b"),
        (
            "[agents.acp.claude]\ncommand = \"x\"\n",
            "agents.acp.claude",
        ),
        ("[agents.acp.x]\ncommand = \"x\"\nwhat = 1\n", "what"),
    ] {
        let err = load_text(text, &[("HOME", "/home/me")])
            .unwrap_err()
            .to_string();
        assert!(err.contains(field), "{text}: {err}");
    }
}

#[test]
fn the_log_level_must_be_a_tracing_filter() {
    for good in [
        "warn",
        "DEBUG",
        "info,gaffer_store=debug",
        "off",
        "gaffer_engine::driver=trace",
    ] {
        let c = load_text(&format!("[log]\nlevel = \"{good}\"\n"), &[]).unwrap();
        assert_eq!(c.log_level, good);
    }
    for bad in [
        "verbose",
        "",
        "warn,gaffer_store=loud",
        "=debug",
        "a b=info",
    ] {
        let err = load_text(&format!("[log]\nlevel = \"{bad}\"\n"), &[]).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("log.level") && msg.contains("error, warn, info, debug, trace"),
            "{bad:?}: {msg}"
        );
    }
    let err = load_text("", &[("GAFFER_LOG", "chatty")]).unwrap_err();
    assert!(err.to_string().contains("GAFFER_LOG"), "{err}");
}

#[test]
fn prices_are_read_per_model_and_checked() {
    let c = load_text(
        "[prices.\"gpt-5-codex\"]\ninput = 1.5\noutput = 12\ncached_input = 0.15\n[prices.local-llm]\ninput = 0\noutput = 0.5\n",
        &[],
    )
    .unwrap();
    assert_eq!(
        c.prices["gpt-5-codex"],
        ModelPrice {
            input: 1.5,
            output: 12.0,
            cached_input: 0.15
        }
    );
    // Cached input costs what input costs unless said.
    assert_eq!(
        c.prices["local-llm"],
        ModelPrice {
            input: 0.0,
            output: 0.5,
            cached_input: 0.0
        }
    );
    for (text, field) in [
        ("[prices.m]\noutput = 1\n", "prices.\"m\".input"),
        (
            "[prices.m]\ninput = 1\noutput = -2\n",
            "prices.\"m\".output",
        ),
        (
            "[prices.m]\ninput = nan\noutput = 1\n",
            "prices.\"m\".input",
        ),
        (
            "[prices.m]\ninput = 1\noutput = 1\nper = \"token\"\n",
            "per",
        ),
    ] {
        let err = load_text(text, &[]).unwrap_err().to_string();
        assert!(err.contains(field), "{text}: {err}");
    }
}

#[test]
fn a_projects_worktree_setup_is_read_and_bad_entries_are_named() {
    let c = load_text(
        "[projects.web]\nsetup = [\"npm ci\", \"make gen\"]\ncopy = [\".env\", \"config/local.toml\"]\nport = true\n\n[projects.api]\ncheck_env = [\"X\"]\n",
        &[],
    )
    .unwrap();
    let web = &c.worktree_setup["web"];
    assert_eq!(web.commands, vec!["npm ci".to_string(), "make gen".into()]);
    assert_eq!(
        web.copy,
        vec![".env".to_string(), "config/local.toml".into()]
    );
    assert!(web.port);
    assert!(!c.worktree_setup.contains_key("api"), "no setup: no step");
    for bad in ["\"../secrets\"", "\"/etc/passwd\"", "\"\"", "\"a/../../b\""] {
        let err = load_text(&format!("[projects.web]\ncopy = [{bad}]\n"), &[])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("projects.web.copy") && err.contains("relative to the repository root"),
            "{bad}: {err}"
        );
    }
    let err = load_text("[projects.web]\nsetup = [\"  \"]\n", &[])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("projects.web.setup") && err.contains("empty command"),
        "{err}"
    );
}

#[test]
fn a_challenger_is_optional_per_project_with_its_round_limit() {
    let c = load_text("[roles.planner]\nagent = \"claude\"\n", &[]).unwrap();
    assert_eq!(c.roles.challenger, None);
    assert_eq!(
        c.roles.each().iter().map(|(r, _)| *r).collect::<Vec<_>>(),
        ["planner", "owner", "reviewer", "arbiter"]
    );
    let c = load_text(
        "[roles.challenger]\nagent = \"codex\"\nmax_challenge_rounds = 3\n\n[projects.web.roles.challenger]\nenabled = false\n\n[projects.api.roles.challenger]\nmodel = \"gpt-5\"\n",
        &[],
    )
    .unwrap();
    let ch = c.roles.challenger.as_ref().unwrap();
    assert_eq!(
        (ch.role.agent.as_str(), ch.max_challenge_rounds),
        ("codex", 3)
    );
    assert_eq!(c.roles.each()[1].0, "challenger");
    assert_eq!(c.roles_for("web").challenger, None);
    let api = c.roles_for("api").challenger.as_ref().unwrap();
    assert_eq!(
        (
            api.role.agent.as_str(),
            api.role.model.as_deref(),
            api.max_challenge_rounds
        ),
        ("codex", Some("gpt-5"), 3)
    );
    // A project may have one the rest do not; defaults apply.
    let c = load_text("[projects.web.roles.challenger]\nagent = \"claude\"\n", &[]).unwrap();
    assert_eq!(c.roles.challenger, None);
    assert_eq!(
        c.roles_for("web")
            .challenger
            .as_ref()
            .unwrap()
            .max_challenge_rounds,
        gaffer_config::DEFAULT_CHALLENGE_ROUNDS
    );
    let err = load_text("[roles.challenger]\nmax_challenge_rounds = 0\n", &[])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("roles.challenger.max_challenge_rounds") && err.contains("at least 1"),
        "{err}"
    );
}

#[test]
fn a_tester_is_optional_per_project() {
    let c = load_text(
        "[roles.tester]\nagent = \"codex\"\n\n[projects.web.roles.tester]\nenabled = false\n",
        &[],
    )
    .unwrap();
    assert_eq!(c.roles.tester.as_ref().unwrap().agent, "codex");
    assert_eq!(
        c.roles.each().iter().map(|(r, _)| *r).collect::<Vec<_>>(),
        ["planner", "owner", "tester", "reviewer", "arbiter"]
    );
    assert_eq!(c.roles_for("web").tester, None);
    let err = load_text("[roles.tester]\nmax_challenge_rounds = 2\n", &[])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("roles.tester.max_challenge_rounds")
            && err.contains("only for [roles.challenger]"),
        "{err}"
    );
}

#[test]
fn the_watchdog_and_caps_read_durations_and_projects_override_key_by_key() {
    use std::time::Duration;
    let c = load_text(
        "[watchdog]\nidle = \"2s\"\nturn = 90\nrepeated_calls = 4\n\n[budget]\ntask_usd = 2.5\nproject_day_tokens = 1000000\n\n[projects.web.watchdog]\nidle = \"off\"\ntokens_without_change = 1000\n\n[projects.web.budget]\ntask_tokens = 5000\ntask_usd = \"off\"\n",
        &[],
    )
    .unwrap();
    assert_eq!(
        c.watchdog,
        Watchdog {
            idle: Some(Duration::from_secs(2)),
            turn: Some(Duration::from_secs(90 * 60)),
            repeated_calls: Some(4),
            ..Watchdog::default()
        }
    );
    assert_eq!(
        c.watchdog_for("web"),
        Watchdog {
            idle: None,
            tokens_without_change: Some(1000),
            ..c.watchdog
        }
    );
    assert_eq!(c.watchdog_for("other"), c.watchdog);
    assert_eq!(
        c.budget,
        Budget {
            task_usd: Some(2.5),
            project_day_tokens: Some(1_000_000),
            ..Budget::default()
        }
    );
    assert_eq!(
        c.budget_for("web"),
        Budget {
            task_tokens: Some(5000),
            task_usd: None,
            project_day_tokens: Some(1_000_000),
            project_day_usd: None,
        }
    );
    // No caps unless configured; the watchdog is on by default.
    let d = load_text("", &[]).unwrap();
    assert!(!d.budget.any());
    assert_eq!(d.watchdog.idle, Some(Duration::from_secs(600)));
}

#[test]
fn a_bad_watchdog_or_cap_names_the_field() {
    for (text, field) in [
        ("[watchdog]\nidle = \"0s\"\n", "watchdog.idle"),
        ("[watchdog]\nidle = \"ten minutes\"\n", "watchdog.idle"),
        ("[watchdog]\nturn = -5\n", "watchdog.turn"),
        ("[watchdog]\nturn = true\n", "watchdog.turn"),
        (
            "[watchdog]\nrepeated_calls = 1\n",
            "watchdog.repeated_calls",
        ),
        (
            "[watchdog]\nrepeated_failures = 0\n",
            "watchdog.repeated_failures",
        ),
        (
            "[watchdog]\ntokens_without_change = -1\n",
            "watchdog.tokens_without_change",
        ),
        ("[watchdog]\nidel = \"5m\"\n", "idel"),
        ("[budget]\ntask_usd = 0\n", "budget.task_usd"),
        ("[budget]\ntask_usd = -3.5\n", "budget.task_usd"),
        (
            "[budget]\nproject_day_usd = \"lots\"\n",
            "budget.project_day_usd",
        ),
        ("[budget]\ntask_tokens = 0\n", "budget.task_tokens"),
        ("[budget]\ntask_tokens = 1.5\n", "budget.task_tokens"),
        ("[budget]\nper_day = 1\n", "per_day"),
        (
            "[projects.web.watchdog]\nidle = \"-1m\"\n",
            "projects.web.watchdog.idle",
        ),
        (
            "[projects.web.budget]\nproject_day_tokens = 0\n",
            "projects.web.budget.project_day_tokens",
        ),
    ] {
        let err = load_text(text, &[]).unwrap_err().to_string();
        assert!(err.contains(field), "{text}: {err}");
    }
}

#[test]
fn the_arbiter_panel_reads_agent_and_model_per_member_and_per_project() {
    let c = load_text(
        "[agents.acp.local]\ncommand = \"/bin/true\"\n\n[roles.arbiter]\npanel = [\"claude\", \"codex:gpt-5-codex\", \"openai:llama3:8b\", \"acp:local:small\"]\npanel_timeout_secs = 90\n\n[projects.web.roles.arbiter]\npanel = []\n\n[projects.api.roles.arbiter]\npanel_timeout_secs = 30\n",
        &[],
    )
    .unwrap();
    let panel = c.roles.panel.as_ref().unwrap();
    let members: Vec<(&str, Option<&str>)> = panel
        .members
        .iter()
        .map(|m| (m.agent.as_str(), m.model.as_deref()))
        .collect();
    assert_eq!(
        members,
        [
            ("claude", None),
            ("codex", Some("gpt-5-codex")),
            // A model name may have colons of its own.
            ("openai", Some("llama3:8b")),
            ("acp:local", Some("small")),
        ]
    );
    assert_eq!(panel.members[1].label(), "codex:gpt-5-codex");
    assert_eq!(panel.timeout_secs, 90);
    assert_eq!(c.roles_for("web").panel, None, "panel = [] turns it off");
    let api = c.roles_for("api").panel.as_ref().unwrap();
    assert_eq!((api.members.len(), api.timeout_secs), (4, 30));
    // Without a panel, none; with one, the default timeout.
    assert_eq!(load_text("", &[]).unwrap().roles.panel, None);
    let c = load_text("[roles.arbiter]\npanel = [\"claude\"]\n", &[]).unwrap();
    assert_eq!(
        c.roles.panel.unwrap().timeout_secs,
        DEFAULT_PANEL_TIMEOUT_SECS
    );
}

#[test]
fn a_role_names_a_chain_of_fallback_agents_and_a_single_name_still_works() {
    let c = load_text(
        "[agents]\nfallback_cooldown_secs = 60\nfallback_retry_after_secs = 5\n[roles.owner]\nagent = [\"claude\", \"codex\"]\n[roles.reviewer]\nagent = \"codex\"\n[projects.demo.roles.owner]\nagent = \"gemini\"\n",
        &[],
    )
    .unwrap();
    assert_eq!(c.roles.owner.chain(), ["claude", "codex"]);
    assert_eq!(c.roles.reviewer.chain(), ["codex"]);
    // A project's single agent replaces the inherited chain, fallbacks and all.
    assert_eq!(c.project_roles["demo"].owner.chain(), ["gemini"]);
    assert_eq!(
        c.fallback,
        FallbackConfig {
            cooldown_secs: 60,
            retry_after_secs: 5
        }
    );
    assert_eq!(
        load_text("", &[]).unwrap().fallback,
        FallbackConfig {
            cooldown_secs: 900,
            retry_after_secs: 60
        }
    );
}

#[test]
fn a_bad_panel_names_the_field_and_the_member() {
    for (text, field, says) in [
        (
            "[roles.arbiter]\npanel = [\"claude\", \"gpt4\"]\n",
            "roles.arbiter.panel",
            "is `gpt4`; use one of",
        ),
        (
            "[roles.arbiter]\npanel = [\"codex:\"]\n",
            "roles.arbiter.panel",
            "has `codex:` with an empty model",
        ),
        (
            "[roles.arbiter]\npanel = [\":gpt-4.1\"]\n",
            "roles.arbiter.panel",
            "names no agent",
        ),
        (
            "[roles.arbiter]\npanel = [\"claude\", \"claude\"]\n",
            "roles.arbiter.panel",
            "has `claude` twice",
        ),
        (
            "[roles.arbiter]\npanel = [\"acp:nowhere\"]\n",
            "roles.arbiter.panel",
            "nowhere",
        ),
        (
            "[roles.arbiter]\npanel = [\"claude\"]\npanel_timeout_secs = 0\n",
            "roles.arbiter.panel_timeout_secs",
            "at least 1",
        ),
        (
            "[roles.arbiter]\npanel_timeout_secs = 60\n",
            "roles.arbiter.panel_timeout_secs",
            "has no panel",
        ),
        (
            "[roles.reviewer]\npanel = [\"claude\"]\n",
            "roles.reviewer.panel",
            "only for [roles.arbiter]",
        ),
        (
            "[projects.web.roles.arbiter]\npanel = [\"codex:\"]\n",
            "projects.web.roles.arbiter.panel",
            "empty model",
        ),
    ] {
        let err = load_text(text, &[]).unwrap_err().to_string();
        assert!(err.contains(field) && err.contains(says), "{text}: {err}");
    }
}

#[test]
fn privacy_is_per_project_and_a_bad_mode_or_network_names_the_field_and_the_choices() {
    let c = load_text(
        "[privacy]\nprivate_networks = [\"10.0.0.0/8\", \"fd00::/8\"]\n\
         [projects.vault]\nprivacy = \"masked\"\n[projects.lab]\nprivacy = \"local-only\"\n\
         [projects.web]\ncheck_env = []\n\
         [agents.acp.llama]\ncommand = \"llama-acp\"\nlocal = true\n",
        &[],
    )
    .unwrap();
    assert_eq!(c.privacy_for("vault"), Privacy::Masked);
    assert_eq!(c.privacy_for("lab"), Privacy::LocalOnly);
    assert_eq!(c.privacy_for("web"), Privacy::Standard);
    assert_eq!(c.privacy_for("unknown"), Privacy::Standard);
    assert!(c.acp_agents["llama"].local);
    let nets: Vec<String> = c.private_networks.iter().map(ToString::to_string).collect();
    assert_eq!(nets, ["10.0.0.0/8", "fd00::/8"]);

    let err = load_text("[projects.vault]\nprivacy = \"secret\"\n", &[])
        .unwrap_err()
        .to_string();
    assert!(err.contains("projects.vault.privacy"), "{err}");
    assert!(err.contains("`secret`"), "{err}");
    assert!(
        err.contains("\"standard\", \"local-only\", \"masked\""),
        "{err}"
    );

    let err = load_text(
        "[projects.vault]\nprivacy = \"standard\"\n",
        &[("GAFFER_PROJECT_VAULT_PRIVACY", "cloud")],
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("GAFFER_PROJECT_VAULT_PRIVACY"), "{err}");

    let err = load_text("[privacy]\nprivate_networks = [\"10.0.0/8\"]\n", &[])
        .unwrap_err()
        .to_string();
    assert!(err.contains("privacy.private_networks"), "{err}");
    assert!(err.contains("10.0.0/8"), "{err}");
}

fn notify_error(text: &str, env: &[(&str, &str)]) -> (String, String) {
    match load_text(text, env).unwrap_err() {
        ConfigError::Invalid { field, message, .. } => (field, message),
        other => panic!("not an Invalid: {other}"),
    }
}

#[test]
fn notify_targets_resolve_with_their_secrets_from_the_environment() {
    let c = load_text(
        r#"
[server]
public_url = "https://gaffer.example.com/"

[[notify]]
name = "ops"
kind = "webhook"
url = "https://hooks.example.com/gaffer"
person = "ana"
events = ["failed", "approval"]

[[notify]]
name = "phone"
kind = "ntfy"
url = "https://ntfy.example.com"
topic = "gaffer-ana"
token_env = "PHONE_NTFY"
"#,
        &[
            ("GAFFER_NOTIFY_OPS_SECRET", "0123456789abcdef0123"),
            ("PHONE_NTFY", "tk_abc"),
        ],
    )
    .unwrap();
    assert_eq!(c.public_url.as_deref(), Some("https://gaffer.example.com"));
    assert_eq!(c.notify.len(), 2);
    let ops = &c.notify[0];
    assert_eq!(ops.channel(), "webhook");
    assert_eq!(ops.person.as_deref(), Some("ana"));
    assert_eq!(ops.events, vec![NotifyEvent::Approval, NotifyEvent::Failed]);
    match &ops.kind {
        NotifyKind::Webhook { secret, .. } => assert_eq!(secret.expose(), "0123456789abcdef0123"),
        other => panic!("{other:?}"),
    }
    // Secrets are never shown by Debug, and their variables are redacted everywhere.
    let shown = format!("{c:?}");
    assert!(!shown.contains("0123456789abcdef0123") && !shown.contains("tk_abc"));
    assert!(c
        .secret_env
        .contains(&"GAFFER_NOTIFY_OPS_SECRET".to_owned()));
    assert!(c.secret_env.contains(&"PHONE_NTFY".to_owned()));
    assert_eq!(c.notify[1].events, NotifyEvent::ALL.to_vec());
}

#[test]
fn bad_notify_targets_name_the_field() {
    let secret = [("GAFFER_NOTIFY_OPS_SECRET", "0123456789abcdef0123")];
    type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a str, &'a str);
    let cases: [Case<'_>; 8] = [
        (
            "name = \"ops\"\nkind = \"slack\"\nurl = \"https://h\"",
            &secret,
            "notify.ops.kind",
            "webhook",
        ),
        (
            "name = \"ops\"\nurl = \"https://h\"",
            &secret,
            "notify.ops.kind",
            "missing",
        ),
        (
            "name = \"ops\"\nkind = \"webhook\"",
            &secret,
            "notify.ops.url",
            "missing",
        ),
        (
            "name = \"ops\"\nkind = \"webhook\"\nurl = \"ftp://h/x\"",
            &secret,
            "notify.ops.url",
            "http(s) URL",
        ),
        (
            "name = \"ops\"\nkind = \"webhook\"\nurl = \"https://\"",
            &secret,
            "notify.ops.url",
            "http(s) URL",
        ),
        (
            "name = \"ops\"\nkind = \"webhook\"\nurl = \"https://h\"",
            &[],
            "notify.ops.secret_env",
            "GAFFER_NOTIFY_OPS_SECRET, which is not set",
        ),
        (
            "name = \"ops\"\nkind = \"ntfy\"\nurl = \"https://h\"",
            &[],
            "notify.ops.topic",
            "ntfy topic",
        ),
        (
            "kind = \"webhook\"\nurl = \"https://h\"",
            &secret,
            "notify[0].name",
            "give each target a name",
        ),
    ];
    for (body, env, field, says) in cases {
        let (got, message) = notify_error(&format!("[[notify]]\n{body}\n"), env);
        assert_eq!(got, field, "{body}");
        assert!(message.contains(says), "{body}: {message}");
    }
    let (field, message) = notify_error(
        "[[notify]]\nname = \"ops\"\nkind = \"webhook\"\nurl = \"https://h\"\n",
        &[("GAFFER_NOTIFY_OPS_SECRET", "short")],
    );
    assert_eq!(field, "notify.ops.secret_env");
    assert!(message.contains("16"), "{message}");
}

#[test]
fn a_bad_fallback_chain_names_the_entry() {
    for (text, field, says) in [
        (
            "[roles.owner]\nagent = [\"claude\", \"cursor\"]\n",
            "roles.owner.agent[1]",
            "`cursor`",
        ),
        (
            "[roles.tester]\nagent = [\"codex\", \"codex\"]\n",
            "roles.tester.agent[1]",
            "twice",
        ),
        (
            "[roles.planner]\nagent = []\n",
            "roles.planner.agent",
            "empty",
        ),
        ("[roles.owner]\nagent = 3\n", "agent", "list of agent names"),
    ] {
        let err = load_text(text, &[]).unwrap_err();
        let shown = err.to_string();
        assert!(shown.contains(field), "{shown}");
        assert!(shown.contains(says), "{shown}");
    }
}

#[test]
fn conflict_strategy_defaults_to_rebase_and_the_environment_overrides_it() {
    let text = "[projects.a.forge]\nkind = \"github\"\n\n[projects.b.forge]\nkind = \"github\"\nconflict_strategy = \"Merge\"\n";
    let c = load_text(text, &[]).unwrap();
    assert_eq!(c.forges["a"].conflict_strategy, ConflictStrategy::Rebase);
    assert_eq!(c.forges["b"].conflict_strategy, ConflictStrategy::Merge);
    let c = load_text(
        text,
        &[("GAFFER_PROJECT_A_FORGE_CONFLICT_STRATEGY", "merge")],
    )
    .unwrap();
    assert_eq!(c.forges["a"].conflict_strategy, ConflictStrategy::Merge);
    let err = load_text(
        text,
        &[("GAFFER_PROJECT_B_FORGE_CONFLICT_STRATEGY", "ours")],
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("GAFFER_PROJECT_B_FORGE_CONFLICT_STRATEGY")
            && err.contains("projects.b.forge.conflict_strategy")
            && err.contains("`ours`"),
        "{err}"
    );
}

#[test]
fn the_templates_intake_and_schedule_examples_load_as_written() {
    // Uncomment the forge, intake and schedule examples (`## ` lines) of the template.
    let mut text = String::new();
    let mut on = false;
    for line in TEMPLATE.lines() {
        match line.strip_prefix("## ") {
            Some(rest) => {
                let table = rest.starts_with('[');
                if table {
                    on = [
                        "[projects.myapp.forge]",
                        "[projects.myapp.intake]",
                        "[[schedules]]",
                    ]
                    .contains(&rest);
                }
                if on {
                    text.push_str(rest);
                    text.push('\n');
                }
            }
            None => on = false,
        }
    }
    assert!(text.contains("[projects.myapp.intake]"), "{text}");
    let config = load_text(&text, &[]).unwrap();
    let intake = &config.intake["myapp"];
    assert_eq!(intake.label, "gaffer");
    assert_eq!(intake.assignee.as_deref(), Some("gaffer-bot"));
    assert_eq!(
        intake.secret_env.as_deref(),
        Some("GAFFER_MYAPP_HOOK_SECRET")
    );
    assert_eq!(
        intake.poll_interval,
        Some(std::time::Duration::from_secs(60))
    );
    let s = &config.schedules[0];
    assert_eq!(
        (
            s.name.as_str(),
            s.cron.as_str(),
            s.tz.as_str(),
            s.project.as_str()
        ),
        ("nightly-deps", "0 3 * * 1-5", "Europe/Berlin", "myapp")
    );
    assert_eq!(s.missed, gaffer_config::Missed::RunOnce);
    assert_eq!(s.agent.as_deref(), Some("claude"));
}
