//! Approval policy: per-project auto-approve rules, who may decide, and expiry.
//!
//! The policy is evaluated **once**, when an approval is created
//! ([`crate::App::request_approval`]), and what it decided is recorded in the
//! approval's `details.policy` (`expires_at`, `deciders`, and the auto rule if
//! one fired). Later changes to the file never re-judge a recorded approval.
//!
//! The rules live in `policy.toml` next to the config file (see the crate
//! README): `[approvals] expiry_secs`, `[projects.<name>]` with `expiry_secs`,
//! `deciders` and `[[projects.<name>.auto_approve]]` rules, and `[[tokens]]` for
//! the HTTP API.

use crate::error::{AppError, Result};
use gaffer_core::{ApprovalKind, Intent};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The commented policy file `gaffer init` writes: every key with its default and
/// an example of each rule.
pub const TEMPLATE: &str = include_str!("policy.toml");

/// Default time an approval waits before it expires (and counts as denied).
pub const DEFAULT_EXPIRY_SECS: u64 = 30 * 60;

/// The whole policy file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// Defaults for every project.
    #[serde(default)]
    pub approvals: ApprovalDefaults,
    /// Per project, by project name.
    #[serde(default)]
    pub projects: BTreeMap<String, ProjectPolicy>,
    /// API tokens (see `gaffer-server`). Empty: the server only accepts loopback clients.
    #[serde(default)]
    pub tokens: Vec<TokenConfig>,
}

/// Defaults for every project.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalDefaults {
    /// Seconds an approval waits before it expires and counts as denied.
    #[serde(default = "default_expiry")]
    pub expiry_secs: u64,
}

impl Default for ApprovalDefaults {
    fn default() -> Self {
        Self {
            expiry_secs: DEFAULT_EXPIRY_SECS,
        }
    }
}

fn default_expiry() -> u64 {
    DEFAULT_EXPIRY_SECS
}

/// One project's policy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProjectPolicy {
    /// Rules that approve without asking; the first that matches fires.
    #[serde(default)]
    pub auto_approve: Vec<AutoRule>,
    /// Overrides `[approvals] expiry_secs`.
    #[serde(default)]
    pub expiry_secs: Option<u64>,
    /// People (token or user names) who may decide; empty means anyone with the approver role.
    #[serde(default)]
    pub deciders: Vec<String>,
}

/// An auto-approve rule. Every condition given must hold; a rule with none is refused
/// when the policy is loaded (the project-wide toggle is the way to approve everything).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AutoRule {
    /// Shown as the deciding actor; defaults to a description of the rule.
    #[serde(default)]
    pub name: Option<String>,
    /// Which kinds it applies to; default `["tool"]`. `manual`, `escalation`, `stall` and `budget`
    /// are never auto-approved.
    #[serde(default)]
    pub kinds: Vec<ApprovalKind>,
    /// The tool name must equal this (`read_file`, `Bash`, …).
    #[serde(default)]
    pub tool: Option<String>,
    /// The command's leading words must equal these words. A command with shell
    /// control characters (`;`, `&`, `|`, `$`, backquote, redirections, newline) never matches.
    #[serde(default)]
    pub command_prefix: Option<String>,
    /// Every path the call touches must match this glob (`src/**`), relative to the
    /// task's worktree (absolute paths physically inside it are made relative first);
    /// a path with `..` or outside never matches, nor does a call with no paths.
    #[serde(default)]
    pub path_glob: Option<String>,
    /// The step's intent must equal this.
    #[serde(default)]
    pub intent: Option<Intent>,
}

/// An API token.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenConfig {
    /// Who holds it; recorded as the deciding person (`via = api:<name>`).
    pub name: String,
    /// `viewer`, `approver` or `admin`.
    pub role: String,
    /// The hex SHA-256 of the secret (`gaffer token new` prints it): the file never
    /// holds the secret itself. Or…
    #[serde(default)]
    pub secret_sha256: Option<String>,
    /// …the environment variable that holds the secret.
    #[serde(default)]
    pub secret_env: Option<String>,
    /// A plaintext secret: refused when the server starts, with the `secret_sha256`
    /// line to write instead (kept in the format so the refusal can say that).
    #[serde(default)]
    pub secret: Option<String>,
}

/// What a call asks to do, for the auto-approve rules.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Subject {
    /// The tool name, for tool calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The command line, for command tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Paths the call touches, relative to the worktree.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    /// The step's intent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intent: Option<Intent>,
}

/// What the policy decided for one new approval.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    /// The rule (or toggle) that approves it now, if any.
    pub auto: Option<String>,
    /// When it expires.
    pub expires_at: i64,
    /// Who may decide (empty: anyone with the approver role).
    pub deciders: Vec<String>,
}

impl Policy {
    /// Read `path`; a missing file is the default policy. Errors name the file and what is wrong.
    pub fn load(path: &Path) -> Result<Self> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => {
                return Err(AppError::invalid(
                    "policy",
                    format!("cannot read {}: {e}", path.display()),
                ))
            }
        };
        Self::parse(&text).map_err(|e| match e {
            AppError::Invalid { field, message } => AppError::Invalid {
                field,
                message: format!("{}: {message}", path.display()),
            },
            other => other,
        })
    }

    /// Parse and validate policy TOML.
    pub fn parse(text: &str) -> Result<Self> {
        let policy: Policy =
            toml::from_str(text).map_err(|e| AppError::invalid("policy", e.to_string()))?;
        policy.validate()?;
        Ok(policy)
    }

    /// Refuse rules that would approve more than their author meant.
    pub fn validate(&self) -> Result<()> {
        for (project, p) in &self.projects {
            for (i, rule) in p.auto_approve.iter().enumerate() {
                let field = format!("projects.{project}.auto_approve[{i}]");
                if rule.tool.is_none()
                    && rule.command_prefix.is_none()
                    && rule.path_glob.is_none()
                    && rule.intent.is_none()
                {
                    return Err(AppError::invalid(
                        &field,
                        format!("{field} has no condition; give tool, command_prefix, path_glob or intent (use `gaffer auto on` to approve everything)"),
                    ));
                }
                if let Some(g) = &rule.path_glob {
                    build_glob(g).map_err(|e| AppError::invalid(&field, e))?;
                }
                if let Some(k) = rule.kinds.iter().find(|k| never_auto(**k)) {
                    return Err(AppError::invalid(
                        &field,
                        format!(
                            "{field}: `{}` approvals are never auto-approved",
                            k.as_str()
                        ),
                    ));
                }
            }
        }
        for t in &self.tokens {
            if !matches!(t.role.as_str(), "viewer" | "approver" | "admin") {
                return Err(AppError::invalid(
                    "tokens.role",
                    format!(
                        "token `{}` has role `{}`; use viewer, approver or admin",
                        t.name, t.role
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Judge a new approval, once: the project toggle, the task's own
    /// `auto_approve` option, then the project's rules.
    pub fn judge(
        &self,
        project_name: &str,
        project_auto: bool,
        task_auto: bool,
        kind: ApprovalKind,
        subject: &Subject,
        now: i64,
    ) -> Judgement {
        let p = self.projects.get(project_name);
        let expiry = p
            .and_then(|p| p.expiry_secs)
            .unwrap_or(self.approvals.expiry_secs);
        let expires_at =
            now.saturating_add(i64::try_from(expiry.saturating_mul(1000)).unwrap_or(i64::MAX));
        let deciders = p.map(|p| p.deciders.clone()).unwrap_or_default();
        let auto = if never_auto(kind) {
            None
        } else if project_auto {
            Some(format!("auto toggle of project {project_name}"))
        } else if task_auto {
            Some("the task's auto_approve option (--yes)".to_owned())
        } else {
            p.and_then(|p| {
                p.auto_approve
                    .iter()
                    .enumerate()
                    .find(|(_, r)| r.matches(kind, subject))
                    .map(|(i, r)| {
                        r.name
                            .clone()
                            .unwrap_or_else(|| format!("{project_name} auto_approve[{i}]"))
                    })
            })
        };
        Judgement {
            auto,
            expires_at,
            deciders,
        }
    }
}

/// Kinds a rule or toggle never approves: they exist because a person must look
/// (what every later task's agents will be told is a person's call too).
fn never_auto(kind: ApprovalKind) -> bool {
    matches!(
        kind,
        ApprovalKind::Manual
            | ApprovalKind::Escalation
            | ApprovalKind::Memory
            | ApprovalKind::Stall
            | ApprovalKind::Budget
    )
}

fn build_glob(pattern: &str) -> std::result::Result<globset::GlobMatcher, String> {
    globset::GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| format!("bad path_glob `{pattern}`: {e}"))
}

const SHELL_CONTROL: &[char] = &[
    ';', '&', '|', '$', '`', '<', '>', '(', ')', '{', '}', '\n', '\r', '\\', '*', '?', '!',
];

impl AutoRule {
    /// Whether this rule approves `subject` of `kind`.
    pub fn matches(&self, kind: ApprovalKind, subject: &Subject) -> bool {
        let kinds: &[ApprovalKind] = if self.kinds.is_empty() {
            &[ApprovalKind::Tool]
        } else {
            &self.kinds
        };
        if never_auto(kind) || !kinds.contains(&kind) {
            return false;
        }
        let mut any = false;
        if let Some(tool) = &self.tool {
            any = true;
            if subject.tool.as_deref() != Some(tool.as_str()) {
                return false;
            }
        }
        if let Some(prefix) = &self.command_prefix {
            any = true;
            let Some(command) = &subject.command else {
                return false;
            };
            if command.contains(SHELL_CONTROL) {
                return false;
            }
            let want: Vec<&str> = prefix.split_whitespace().collect();
            let got: Vec<&str> = command.split_whitespace().collect();
            if want.is_empty() || got.len() < want.len() || got[..want.len()] != want[..] {
                return false;
            }
        }
        if let Some(glob) = &self.path_glob {
            any = true;
            let Ok(matcher) = build_glob(glob) else {
                return false;
            };
            if subject.paths.is_empty() || !subject.paths.iter().all(|p| path_ok(p, &matcher)) {
                return false;
            }
        }
        if let Some(intent) = self.intent {
            any = true;
            if subject.intent != Some(intent) {
                return false;
            }
        }
        any
    }
}

fn path_ok(path: &str, matcher: &globset::GlobMatcher) -> bool {
    let p = Path::new(path);
    if p.is_absolute()
        || p.components().any(|c| {
            !matches!(
                c,
                std::path::Component::Normal(_) | std::path::Component::CurDir
            )
        })
    {
        return false;
    }
    let normal: std::path::PathBuf = p
        .components()
        .filter(|c| matches!(c, std::path::Component::Normal(_)))
        .collect();
    matcher.is_match(normal)
}

/// `path` relative to the first of `roots` that physically contains it (symlinks
/// resolved, so a link out of the worktree stays outside); otherwise `path` as given.
/// Relative paths are returned unchanged.
pub fn relative_to(path: &str, roots: &[std::path::PathBuf]) -> String {
    let p = Path::new(path);
    if !p.is_absolute() {
        return path.to_owned();
    }
    // The file may not exist yet (a write): resolve its parent instead.
    let physical = std::fs::canonicalize(p).ok().or_else(|| {
        let parent = std::fs::canonicalize(p.parent()?).ok()?;
        Some(parent.join(p.file_name()?))
    });
    let Some(physical) = physical else {
        return path.to_owned();
    };
    for root in roots {
        let Ok(root) = std::fs::canonicalize(root) else {
            continue;
        };
        if let Ok(rel) = physical.strip_prefix(&root) {
            if !rel.as_os_str().is_empty() {
                return rel.to_string_lossy().into_owned();
            }
        }
    }
    path.to_owned()
}
