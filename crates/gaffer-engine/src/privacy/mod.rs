//! Secure mode: where each role's model runs, and what a project's `privacy` lets it see.
//!
//! `local-only` projects start only agents whose model endpoint is on loopback or a
//! configured private network; `masked` projects let the planner run on a cloud model
//! that sees a masked pack and request (see `gaffer_index::mask`), every role that
//! reads or writes source on a local one. Decided here, purely, from the roles, the
//! config and gaffer's environment (where the agents' base URLs come from); checked
//! for every agent a task may start (each role's fallbacks and the arbiter's panel
//! too) before a task is stored — by `gaffer run` and, through
//! `gaffer_app::TaskAdmission`, by every other way a task is created — again before
//! each turn, and recorded with each step.

use gaffer_config::{Network, Privacy, Roles};
use gaffer_core::Role;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

mod endpoint;
pub use endpoint::{endpoint, url_is_local, url_locality, Endpoint, Process, Surroundings};

/// The masked planner's instructions: what the placeholders are.
pub const MASKED_NOTE: &str = include_str!("../../prompts/masked.md");

/// What the engine needs to know about privacy: each project's mode, the networks that
/// count as local, the ACP agents declared local.
#[derive(Debug, Clone, Default)]
pub struct PrivacySettings {
    /// `privacy` by project name (absent: standard).
    pub modes: BTreeMap<String, Privacy>,
    /// `[privacy] private_networks`.
    pub private_networks: Vec<Network>,
    /// Names of `[agents.acp.<name>]` declared `local = true`.
    pub local_acp: BTreeSet<String>,
}

impl PrivacySettings {
    /// From the loaded config.
    pub fn from_config(c: &gaffer_config::Config) -> Self {
        Self {
            modes: c.privacy.clone(),
            private_networks: c.private_networks.clone(),
            local_acp: c
                .acp_agents
                .iter()
                .filter(|(_, a)| a.local)
                .map(|(n, _)| n.clone())
                .collect(),
        }
    }

    /// The mode of `project`.
    pub fn mode(&self, project: &str) -> Privacy {
        self.modes.get(project).copied().unwrap_or_default()
    }
}

/// Agents gaffer runs in-process with only the tools it gives them: the ones that can
/// play a cloud role in a masked project (with no tool on any file).
const BUILT_IN: [&str; 2] = ["openai", "anthropic"];

/// What applies to one role of a project.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RolePrivacy {
    /// The project's mode.
    pub mode: Privacy,
    /// The role's name.
    pub role: String,
    /// Its agent.
    pub agent: String,
    /// Where the agent's model runs.
    pub endpoint: Endpoint,
    /// The role sees a masked pack and request, and no file (a cloud planner of a
    /// masked project).
    pub masked: bool,
    /// Why the role may not run as configured, and what to change; `None`: it complies.
    pub refusal: Option<String>,
}

impl RolePrivacy {
    /// As recorded with a step and shown by `doctor --json`.
    pub fn to_json(&self) -> Value {
        json!({
            "mode": self.mode.as_str(),
            "role": self.role,
            "agent": self.agent,
            "endpoint": self.endpoint.url,
            "endpoint_source": self.endpoint.source,
            "endpoint_not_local": self.endpoint.not_local,
            "local": self.endpoint.local,
            "masked": self.masked,
            "complies": self.refusal.is_none(),
        })
    }
}

/// What `mode` makes of `role` played by `agent` in `project` (whose roles are `roles`).
pub fn role_privacy(
    project: &str,
    mode: Privacy,
    role: &str,
    agent: &str,
    roles: &Roles,
    settings: &PrivacySettings,
    env: &dyn Surroundings,
) -> RolePrivacy {
    // Outside `standard`, every CLI role must stay local (a masked cloud planner is a
    // built-in agent, which reads no switch): gaffer withholds the provider switches.
    let endpoint = endpoint(agent, settings, env, mode != Privacy::Standard);
    let mut masked = false;
    let where_ = format!(
        "role {role} of project {project} runs agent {agent}, whose model is at {}",
        endpoint.describe()
    );
    let to_local = "point the agent at a model server on loopback or a network in [privacy] private_networks (OPENAI_BASE_URL / ANTHROPIC_BASE_URL / GOOGLE_GEMINI_BASE_URL, or an ACP agent declared local = true), pick such an agent for the role";
    let refusal = match mode {
        _ if endpoint.local => None,
        Privacy::Standard => None,
        Privacy::LocalOnly => Some(format!(
            "{where_}; project {project} is privacy = \"local-only\", so no cloud model may see its source: {to_local}, or set [projects.{project}] privacy = \"standard\""
        )),
        Privacy::Masked if role != "planner" => Some(format!(
            "{where_}; project {project} is privacy = \"masked\" and the {role} reads or writes source, so it must run on a local model: {to_local}, or set [projects.{project}] privacy = \"standard\""
        )),
        Privacy::Masked if !BUILT_IN.contains(&agent) => Some(format!(
            "{where_}; project {project} is privacy = \"masked\": a cloud planner must be the built-in agent (openai or anthropic), which gaffer runs with no file tools, because {agent} reads files itself; set [projects.{project}.roles.planner] agent = \"openai\" or \"anthropic\", or run it on a local model"
        )),
        Privacy::Masked if roles.challenger.is_some() => Some(format!(
            "{where_}; project {project} is privacy = \"masked\" and has a challenger, whose challenges a cloud planner would have to revise unmasked; remove [roles.challenger] for this project or run the planner on a local model"
        )),
        Privacy::Masked => {
            masked = true;
            None
        }
    };
    RolePrivacy {
        mode,
        role: role.to_owned(),
        agent: agent.to_owned(),
        endpoint,
        masked,
        refusal,
    }
}

/// What `mode` makes of a turn of `role` whose prompt is built once for the whole
/// `chain` (the first agent plays it, the next ones take it over when it is out, with
/// the same prompt): the first agent's privacy, masked when any agent of the chain is a
/// masked cloud role — else a cloud fallback of a local planner would be handed the
/// prompt built unmasked for the local one.
pub fn turn_privacy(
    project: &str,
    mode: Privacy,
    role: &str,
    chain: &[&str],
    roles: &Roles,
    settings: &PrivacySettings,
    env: &dyn Surroundings,
) -> RolePrivacy {
    let mut each = chain
        .iter()
        .map(|a| role_privacy(project, mode, role, a, roles, settings, env));
    let Some(mut first) = each.next() else {
        return role_privacy(project, mode, role, "", roles, settings, env);
    };
    first.masked |= each.any(|r| r.masked);
    first
}

/// Every agent that may play a role of `project`: each role's whole chain (its agent
/// and the fallbacks that take over when it is out) and each member of the arbiter's
/// panel. `agent` (as `--agent`) plays every role alone; panel members keep their own.
pub fn project_privacy(
    project: &str,
    roles: &Roles,
    agent: Option<&str>,
    settings: &PrivacySettings,
    env: &dyn Surroundings,
) -> Vec<RolePrivacy> {
    let mode = settings.mode(project);
    let mut all: Vec<RolePrivacy> = roles
        .each()
        .into_iter()
        .flat_map(|(role, cfg)| {
            let chain = agent.map_or_else(|| cfg.chain(), |a| vec![a]);
            chain
                .into_iter()
                .map(move |a| role_privacy(project, mode, role, a, roles, settings, env))
        })
        .collect();
    if let Some(panel) = &roles.panel {
        let panelist = Role::Panelist.as_str();
        all.extend(
            panel
                .members
                .iter()
                .map(|m| role_privacy(project, mode, panelist, &m.agent, roles, settings, env)),
        );
    }
    all
}

/// The privacy check of a new task, before anything is stored
/// ([`gaffer_app::TaskAdmission`]): refused when any agent it may start (see
/// [`project_privacy`]) breaks the project's privacy; the reason names the role, the
/// agent, its endpoint and what to change.
#[derive(Debug, Clone)]
pub struct Admission {
    /// The configured roles.
    pub roles: Roles,
    /// Projects' own roles, by project name.
    pub project_roles: BTreeMap<String, Roles>,
    /// Each project's mode and what counts as local.
    pub settings: PrivacySettings,
}

impl gaffer_app::TaskAdmission for Admission {
    fn admit(&self, project: &str, agent: Option<&str>) -> Result<(), String> {
        let roles = self.project_roles.get(project).unwrap_or(&self.roles);
        match project_privacy(project, roles, agent, &self.settings, &Process)
            .into_iter()
            .find_map(|r| r.refusal)
        {
            Some(refusal) => Err(refusal),
            None => Ok(()),
        }
    }
}

/// The role an agent step plays, for recording what privacy applied to it.
pub fn step_role(kind: crate::StepKind) -> Option<Role> {
    use crate::StepKind as K;
    Some(match kind {
        K::Plan | K::Revise(_) => Role::Planner,
        K::Challenge(_) => Role::Challenger,
        K::Code(_) | K::Fix(_) | K::Resolve(_) => Role::Owner,
        K::Test(_) => Role::Tester,
        K::Review(_) => Role::Reviewer,
        K::Arbiter(_) => Role::Arbiter,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use gaffer_config::RoleConfig;

    fn env(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    fn roles(planner: &str, rest: &str) -> Roles {
        let r = |a: &str| RoleConfig {
            agent: a.into(),
            ..RoleConfig::default()
        };
        Roles {
            planner: r(planner),
            owner: r(rest),
            reviewer: r(rest),
            arbiter: r(rest),
            challenger: None,
            tester: None,
            panel: None,
        }
    }

    #[test]
    fn endpoints_come_from_each_agents_variable_and_unknown_ones_are_cloud() {
        let s = PrivacySettings {
            local_acp: ["llama".to_string()].into(),
            ..Default::default()
        };
        let e = env(&[("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")]);
        assert!(endpoint("openai", &s, &e, true).local);
        assert!(endpoint("codex", &s, &e, true).local);
        assert!(!endpoint("claude", &s, &e, true).local);
        assert!(!endpoint("anthropic", &s, &e, true).local);
        assert_eq!(
            endpoint("anthropic", &s, &e, true).url.as_deref(),
            Some("https://api.anthropic.com")
        );
        assert!(endpoint("acp:llama", &s, &e, true).local);
        assert!(!endpoint("acp:other", &s, &e, true).local);
        assert!(!endpoint("gemini", &s, &env(&[]), true).local);
    }

    #[test]
    fn local_only_refuses_every_cloud_role_naming_role_agent_and_endpoint() {
        let s = PrivacySettings {
            modes: [("vault".to_string(), Privacy::LocalOnly)].into(),
            ..Default::default()
        };
        let e = env(&[("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")]);
        let all = project_privacy("vault", &roles("claude", "openai"), None, &s, &e);
        let refused: Vec<&str> = all
            .iter()
            .filter(|r| r.refusal.is_some())
            .map(|r| r.role.as_str())
            .collect();
        assert_eq!(refused, ["planner"]);
        let why = all[0].refusal.as_deref().unwrap();
        for part in [
            "role planner",
            "agent claude",
            "ANTHROPIC_BASE_URL is not set",
            "local-only",
            "privacy = \"standard\"",
        ] {
            assert!(why.contains(part), "{part}: {why}");
        }
        // --agent for every role: all local.
        assert!(
            project_privacy("vault", &roles("claude", "claude"), Some("openai"), &s, &e)
                .iter()
                .all(|r| r.refusal.is_none())
        );
        // Standard lets anything run.
        assert!(
            project_privacy("web", &roles("claude", "claude"), None, &s, &e)
                .iter()
                .all(|r| r.refusal.is_none() && !r.masked)
        );
    }

    #[test]
    fn local_only_refuses_a_cloud_fallback_or_panel_member_of_a_local_role() {
        let s = PrivacySettings {
            modes: [("vault".to_string(), Privacy::LocalOnly)].into(),
            ..Default::default()
        };
        let e = env(&[("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")]);
        let mut chained = roles("openai", "openai");
        chained.owner.fallback = vec!["claude".into()];
        let refused: Vec<(String, String)> = project_privacy("vault", &chained, None, &s, &e)
            .into_iter()
            .filter(|r| r.refusal.is_some())
            .map(|r| (r.role, r.agent))
            .collect();
        assert_eq!(refused, [("owner".to_string(), "claude".to_string())]);
        // --agent plays every role alone: its fallbacks do not run.
        assert!(project_privacy("vault", &chained, Some("openai"), &s, &e)
            .iter()
            .all(|r| r.refusal.is_none()));
        let mut paneled = roles("openai", "openai");
        paneled.panel = Some(gaffer_config::Panel {
            members: vec![
                gaffer_config::PanelMember::parse("openai").unwrap(),
                gaffer_config::PanelMember::parse("codex:gpt-5-codex").unwrap(),
                gaffer_config::PanelMember::parse("gemini").unwrap(),
            ],
            timeout_secs: 60,
        });
        let refused: Vec<(String, String)> =
            project_privacy("vault", &paneled, Some("openai"), &s, &e)
                .into_iter()
                .filter(|r| r.refusal.is_some())
                .map(|r| (r.role, r.agent))
                .collect();
        // Codex reads OPENAI_BASE_URL (loopback here); Gemini CLI's endpoint is a cloud.
        assert_eq!(refused, [("panelist".to_string(), "gemini".to_string())]);
    }

    #[test]
    fn a_local_planner_with_a_cloud_fallback_gets_the_masked_prompt_the_fallback_would_see() {
        let s = PrivacySettings {
            modes: [("vault".to_string(), Privacy::Masked)].into(),
            ..Default::default()
        };
        // openai is on loopback (local), anthropic a cloud.
        let e = env(&[("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")]);
        let r = roles("openai", "openai");
        let turn =
            |chain: &[&str]| turn_privacy("vault", Privacy::Masked, "planner", chain, &r, &s, &e);
        let local_then_cloud = turn(&["openai", "anthropic"]);
        assert_eq!(local_then_cloud.agent, "openai");
        assert!(local_then_cloud.endpoint.local);
        assert!(
            local_then_cloud.masked,
            "the cloud fallback would read this prompt"
        );
        assert!(local_then_cloud.refusal.is_none());
        assert!(
            !turn(&["openai"]).masked,
            "a local planner alone sees the source"
        );
        assert!(turn(&["anthropic", "openai"]).masked);
        let standard = turn_privacy(
            "other",
            Privacy::Standard,
            "planner",
            &["openai", "anthropic"],
            &r,
            &s,
            &e,
        );
        assert!(!standard.masked);
    }

    #[test]
    fn masked_allows_only_a_built_in_cloud_planner_and_masks_it() {
        let s = PrivacySettings {
            modes: [("vault".to_string(), Privacy::Masked)].into(),
            ..Default::default()
        };
        let e = env(&[("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")]);
        let all = project_privacy("vault", &roles("anthropic", "openai"), None, &s, &e);
        assert!(all.iter().all(|r| r.refusal.is_none()));
        assert_eq!(
            all.iter()
                .filter(|r| r.masked)
                .map(|r| r.role.as_str())
                .collect::<Vec<_>>(),
            ["planner"]
        );
        // A cloud owner, a cloud CLI planner, a cloud planner with a challenger: refused.
        let owner = project_privacy("vault", &roles("openai", "anthropic"), None, &s, &e);
        assert!(owner[1]
            .refusal
            .as_deref()
            .unwrap()
            .contains("reads or writes source"));
        let cli = project_privacy("vault", &roles("claude", "openai"), None, &s, &e);
        assert!(cli[0]
            .refusal
            .as_deref()
            .unwrap()
            .contains("built-in agent"));
        let mut challenged = roles("anthropic", "openai");
        challenged.challenger = Some(gaffer_config::Challenger {
            role: RoleConfig {
                agent: "openai".into(),
                ..RoleConfig::default()
            },
            max_challenge_rounds: 1,
        });
        let c = project_privacy("vault", &challenged, None, &s, &e);
        assert!(c[0].refusal.as_deref().unwrap().contains("challenger"));
    }
}
