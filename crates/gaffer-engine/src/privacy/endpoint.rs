//! Where an agent's model runs: each agent's endpoint, from what it reads (gaffer's
//! environment, Codex's `config.toml`), and whether a base URL is local.
//!
//! A URL is judged the way the agents parse it: with the WHATWG URL Standard (the
//! `url` crate; Node's `URL`, which Claude Code, Codex's and Gemini CLI's clients and
//! reqwest all follow). A hand-made split disagreed with them: for
//! `http://evil.example\@127.0.0.1/` it read the host `127.0.0.1` where every agent
//! connects to `evil.example`.

use gaffer_config::Network;
use std::net::IpAddr;
use std::path::PathBuf;

/// What the check reads of gaffer's surroundings: the variables of its environment
/// (where the agents' base URLs come from) and Codex's `config.toml` (its provider).
pub trait Surroundings {
    /// A variable of gaffer's environment.
    fn var(&self, name: &str) -> Option<String>;
    /// The text of Codex's `config.toml` in the user's `CODEX_HOME` (what a task's
    /// private copy is seeded from), if there is one.
    fn codex_config(&self) -> Option<String>;
}

/// A bare lookup of variables: no Codex config.
impl<F: Fn(&str) -> Option<String>> Surroundings for F {
    fn var(&self, name: &str) -> Option<String> {
        self(name)
    }
    fn codex_config(&self) -> Option<String> {
        None
    }
}

/// gaffer's own process: its environment and the user's Codex config.
#[derive(Debug, Clone, Copy, Default)]
pub struct Process;

impl Surroundings for Process {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }
    fn codex_config(&self) -> Option<String> {
        let home = std::env::var_os("CODEX_HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".codex")))?;
        std::fs::read_to_string(home.join("config.toml")).ok()
    }
}

/// Where an agent's model runs, as far as gaffer can know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The base URL, when gaffer knows it.
    pub url: Option<String>,
    /// On loopback, a private network, or an ACP agent declared local.
    pub local: bool,
    /// Where the answer comes from (`OPENAI_BASE_URL`, "declared local", ...).
    pub source: String,
    /// Why a known URL is not local (its host is a name, it has a user name, ...).
    pub not_local: Option<String>,
}

impl Endpoint {
    fn of_url(url: String, source: String, networks: &[Network]) -> Self {
        let not_local = url_locality(&url, networks).err();
        Endpoint {
            local: not_local.is_none(),
            url: Some(url),
            source,
            not_local,
        }
    }

    fn unknown(source: String) -> Self {
        Endpoint {
            url: None,
            local: false,
            source,
            not_local: None,
        }
    }

    /// How a message names it: the URL, or what gaffer knows instead.
    pub fn describe(&self) -> String {
        match (&self.url, &self.not_local) {
            (Some(u), Some(why)) => format!("{u} (from {}; not local: {why})", self.source),
            (Some(u), None) => format!("{u} (from {})", self.source),
            (None, _) => self.source.clone(),
        }
    }
}

/// The endpoint of `agent`, given what it reads of gaffer's surroundings. `restricted`:
/// the agent runs for a role that must stay local, so gaffer withholds the switches
/// that send Claude Code to another provider
/// ([`gaffer_agents::local_only::CLAUDE_PROVIDER_SWITCHES`]) and they do not count. An agent
/// whose endpoint gaffer cannot know counts as cloud.
pub fn endpoint(
    agent: &str,
    settings: &super::PrivacySettings,
    env: &dyn Surroundings,
    restricted: bool,
) -> Endpoint {
    let nets = &settings.private_networks;
    let var = |name: &str| env.var(name).filter(|v| !v.trim().is_empty());
    let from_var = |name: &str, default: Option<&str>, unknown: &str| match var(name) {
        Some(url) => Endpoint::of_url(url, name.to_owned(), nets),
        None => match default {
            Some(url) => Endpoint::of_url(
                url.to_owned(),
                format!("the default; {name} is not set"),
                nets,
            ),
            None => Endpoint::unknown(unknown.to_owned()),
        },
    };
    match agent {
        "openai" => from_var("OPENAI_BASE_URL", Some("https://api.openai.com/v1"), ""),
        "anthropic" => from_var("ANTHROPIC_BASE_URL", Some("https://api.anthropic.com"), ""),
        "claude" => {
            let switched = gaffer_agents::local_only::CLAUDE_PROVIDER_SWITCHES
                .iter()
                .find(|(switch, _)| !restricted && var(switch).is_some_and(|v| truthy(&v)));
            match switched {
                Some((switch, base)) => match var(base) {
                    Some(url) => Endpoint::of_url(url, format!("{base}, as {switch} is set"), nets),
                    None => Endpoint::unknown(format!(
                        "the provider {switch} selects, counted as cloud"
                    )),
                },
                None => from_var(
                    "ANTHROPIC_BASE_URL",
                    None,
                    "Claude Code's own endpoint (ANTHROPIC_BASE_URL is not set), counted as cloud",
                ),
            }
        }
        "codex" => codex_endpoint(env, nets, &from_var),
        "gemini" => from_var(
            "GOOGLE_GEMINI_BASE_URL",
            None,
            "Gemini CLI's own endpoint (GOOGLE_GEMINI_BASE_URL is not set), counted as cloud",
        ),
        other => match other.strip_prefix("acp:") {
            Some(name) if settings.local_acp.contains(name) => Endpoint {
                url: None,
                local: true,
                source: format!("declared local in [agents.acp.{name}]"),
                not_local: None,
            },
            Some(name) => Endpoint::unknown(format!(
                "the ACP agent's own endpoint ([agents.acp.{name}] is not declared local = true), counted as cloud"
            )),
            None => Endpoint::unknown("an unknown agent, counted as cloud".into()),
        },
    }
}

/// Whether Claude Code reads a switch's value as on (it takes `1`, `true`, `yes`, `on`;
/// anything but an explicit off counts, to err on the side of a cloud).
fn truthy(v: &str) -> bool {
    !matches!(
        v.trim().to_ascii_lowercase().as_str(),
        "" | "0" | "false" | "no" | "off"
    )
}

/// Codex's endpoint: the provider its `config.toml` selects (`model_provider`, or the
/// one of the `profile` it names); the built-in `openai` provider's base URL is
/// `openai_base_url` of the config or `OPENAI_BASE_URL` (both, when both are set, must
/// be local); a provider the config declares has its `base_url`; any other provider
/// (`oss`, `ollama`, ...) is one gaffer does not know, counted as cloud.
fn codex_endpoint(
    env: &dyn Surroundings,
    nets: &[Network],
    from_var: &dyn Fn(&str, Option<&str>, &str) -> Endpoint,
) -> Endpoint {
    const FILE: &str = "Codex's config.toml";
    let openai = || {
        from_var(
            "OPENAI_BASE_URL",
            None,
            "Codex's own provider (OPENAI_BASE_URL is not set), counted as cloud",
        )
    };
    let Some(text) = env.codex_config() else {
        return openai();
    };
    let Ok(doc) = text.parse::<toml::Table>() else {
        return Endpoint::unknown(format!(
            "{FILE}, which does not parse (Codex will refuse it too), counted as cloud"
        ));
    };
    let doc = toml::Value::Table(doc);
    let str_at = |t: Option<&toml::Value>, key: &str| {
        t.and_then(|t| t.get(key))
            .and_then(toml::Value::as_str)
            .map(str::to_owned)
    };
    let top = Some(&doc);
    let in_profile = str_at(top, "profile").and_then(|p| {
        str_at(
            doc.get("profiles").and_then(|ps| ps.get(&p)),
            "model_provider",
        )
    });
    let provider = in_profile.or_else(|| str_at(top, "model_provider"));
    match provider.as_deref() {
        None | Some("openai") => {
            let from_env = openai();
            match str_at(top, "openai_base_url") {
                Some(url) if from_env.local || from_env.url.is_none() => {
                    Endpoint::of_url(url, format!("openai_base_url in {FILE}"), nets)
                }
                _ => from_env,
            }
        }
        Some(id) => {
            let declared = doc.get("model_providers").and_then(|ps| ps.get(id));
            match str_at(declared, "base_url") {
                Some(url) => Endpoint::of_url(
                    url,
                    format!("[model_providers.{id}] base_url in {FILE}"),
                    nets,
                ),
                None => Endpoint::unknown(format!(
                    "model_provider = \"{id}\" in {FILE}, a provider whose endpoint gaffer does not know (declare it in [model_providers.{id}] with a base_url), counted as cloud"
                )),
            }
        }
    }
}

/// Whether a base URL reaches a local model: `Ok` when it parses (WHATWG, as the agents
/// parse it), is `http` or `https`, has no user name or password, and its host is a
/// loopback address (127.0.0.0/8, `::1`, an IPv4-mapped loopback), the name
/// `localhost`, or an address in `networks`. Else why not.
///
/// Host names are not trusted, whatever they resolve to now: an answer can change
/// after the check (DNS rebinding), and a name under `.localhost` is not resolved to
/// loopback by glibc's `/etc/hosts` lookup — it goes to DNS. Exactly `localhost` is the
/// one exception: RFC 6761 reserves it for loopback and the resolvers the agents use
/// answer it from `/etc/hosts`, which only an administrator writes. `localhost.` (with
/// the root dot) is a DNS name like any other and is refused. Numbers the standard
/// reads as IPv4 (`0x7f.1`, `2130706433`, `127.1`) are the address they denote, since
/// the agents connect to that address.
pub fn url_locality(url: &str, networks: &[Network]) -> Result<(), String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("it is not a URL ({e})"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!(
            "its scheme is `{}`, not http or https",
            parsed.scheme()
        ));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(
            "it has a user name or password before the host, which URL parsers disagree on; put credentials in the agent's key variable"
                .into(),
        );
    }
    let ip = match parsed.host() {
        Some(url::Host::Ipv4(v4)) => IpAddr::V4(v4),
        Some(url::Host::Ipv6(v6)) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        Some(url::Host::Domain("localhost")) => return Ok(()),
        Some(url::Host::Domain(name)) => {
            return Err(format!(
                "its host `{name}` is a name, and only `localhost` and IP addresses count as local (a name may resolve elsewhere after the check)"
            ))
        }
        None => return Err("it has no host".into()),
    };
    if ip.is_loopback() || networks.iter().any(|n| n.contains(ip)) {
        Ok(())
    } else {
        Err(format!(
            "{ip} is neither loopback nor in [privacy] private_networks"
        ))
    }
}

/// [`url_locality`] as a yes or no.
pub fn url_is_local(url: &str, networks: &[Network]) -> bool {
    url_locality(url, networks).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::privacy::PrivacySettings;

    /// Fixed surroundings: these variables and this Codex config.
    struct Fixed(
        &'static [(&'static str, &'static str)],
        Option<&'static str>,
    );

    impl Surroundings for Fixed {
        fn var(&self, name: &str) -> Option<String> {
            self.0
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        }
        fn codex_config(&self) -> Option<String> {
            self.1.map(str::to_owned)
        }
    }

    #[test]
    fn a_url_is_local_only_as_the_agents_parse_it() {
        let nets = [Network::parse("10.0.0.0/8").unwrap()];
        for url in [
            "http://127.0.0.1:8080/v1",
            "http://localhost:11434",
            "http://LOCALHOST:11434",
            "http://[::1]:8000/v1",
            "http://[::ffff:127.0.0.1]:8000/v1",
            "http://10.1.2.3:8000/v1",
            // What WHATWG reads as IPv4 is that address, where the agents connect.
            "http://0x7f.1/v1",
            "http://2130706433/v1",
            "http://127.1:9/",
            "http://127.0.0.%31:9/",
            "http://%6c%6fcalhost:9/",
            "https://127.0.0.1/v1?x=@evil.example#@evil.example",
        ] {
            assert_eq!(url_locality(url, &nets), Ok(()), "{url}");
        }
        for (url, why) in [
            // The audit's case: WHATWG reads `\` as `/`, the host is evil.example.
            (
                "http://evil.example\\@127.0.0.1/",
                "`evil.example` is a name",
            ),
            ("http://a@127.0.0.1@evil/", "user name or password"),
            ("https://user:pw@10.0.0.9/v1", "user name or password"),
            ("http://127.0.0.1:pw@evil.example/", "user name or password"),
            ("http://127.0.0.1.evil.com/v1", "is a name"),
            ("http://localhost./v1", "`localhost.` is a name"),
            ("http://llm.localhost:8000", "`llm.localhost` is a name"),
            ("http://localhost.evil.com", "is a name"),
            ("http://llm.internal:8000", "is a name"),
            ("https://api.openai.com/v1", "is a name"),
            ("http://192.168.1.5:8000", "neither loopback nor"),
            ("http://[::ffff:8.8.8.8]/", "neither loopback nor"),
            ("http://0x08080808/", "8.8.8.8 is neither"),
            ("ftp://127.0.0.1/", "scheme is `ftp`"),
            ("file:///tmp/x", "scheme is `file`"),
            ("localhost:8080", "scheme is `localhost`"),
            ("127.0.0.1:8080", "not a URL"),
            ("not a url", "not a URL"),
            ("http://[::1/", "not a URL"),
            ("http://256.0.0.1/", "not a URL"),
        ] {
            let got = url_locality(url, &nets);
            assert!(
                got.as_ref().is_err_and(|e| e.contains(why)),
                "{url}: {got:?}, wanted an error with `{why}`"
            );
        }
    }

    #[test]
    fn the_audits_backslash_url_makes_the_anthropic_agent_cloud_and_says_why() {
        let s = PrivacySettings::default();
        let e = Fixed(
            &[("ANTHROPIC_BASE_URL", "http://evil.example\\@127.0.0.1/")],
            None,
        );
        let got = endpoint("anthropic", &s, &e, true);
        assert!(!got.local);
        assert!(
            got.describe()
                .contains("not local: its host `evil.example` is a name"),
            "{}",
            got.describe()
        );
    }

    #[test]
    fn claude_codes_provider_switches_count_unless_gaffer_withholds_them() {
        let s = PrivacySettings::default();
        let bedrock = Fixed(
            &[
                ("ANTHROPIC_BASE_URL", "http://127.0.0.1:9"),
                ("CLAUDE_CODE_USE_BEDROCK", "1"),
            ],
            None,
        );
        let open = endpoint("claude", &s, &bedrock, false);
        assert!(!open.local);
        assert!(open.source.contains("CLAUDE_CODE_USE_BEDROCK"), "{open:?}");
        // A role that must stay local never gets the switch: its base URL decides.
        assert!(endpoint("claude", &s, &bedrock, true).local);
        let vertex = Fixed(
            &[
                ("CLAUDE_CODE_USE_VERTEX", "true"),
                ("ANTHROPIC_VERTEX_BASE_URL", "https://vertex.example"),
            ],
            None,
        );
        let v = endpoint("claude", &s, &vertex, false);
        assert_eq!(v.url.as_deref(), Some("https://vertex.example"));
        assert!(v.source.contains("ANTHROPIC_VERTEX_BASE_URL"), "{v:?}");
        let off = Fixed(
            &[
                ("CLAUDE_CODE_USE_BEDROCK", "0"),
                ("ANTHROPIC_BASE_URL", "http://[::1]:9"),
            ],
            None,
        );
        assert!(endpoint("claude", &s, &off, false).local);
    }

    #[test]
    fn codex_goes_where_its_config_points_it() {
        let s = PrivacySettings::default();
        let declared = "model_provider = \"llama\"\n[model_providers.llama]\nbase_url = \"http://127.0.0.1:8080/v1\"\n";
        let e = Fixed(&[], Some(declared));
        let got = endpoint("codex", &s, &e, true);
        assert!(got.local, "{got:?}");
        assert!(
            got.source.contains("[model_providers.llama] base_url"),
            "{got:?}"
        );
        // A cloud provider selected by the config, even with OPENAI_BASE_URL on loopback.
        let cloud = "model_provider = \"azure\"\n[model_providers.azure]\nbase_url = \"https://x.openai.azure.com/openai\"\n";
        let e = Fixed(&[("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")], Some(cloud));
        let got = endpoint("codex", &s, &e, true);
        assert!(!got.local);
        assert!(got.describe().contains("model_providers.azure"), "{got:?}");
        // Through a profile.
        let profiled = "profile = \"work\"\nmodel_provider = \"llama\"\n[profiles.work]\nmodel_provider = \"azure\"\n[model_providers.llama]\nbase_url = \"http://127.0.0.1:8080/v1\"\n[model_providers.azure]\nbase_url = \"https://x.openai.azure.com/openai\"\n";
        assert!(!endpoint("codex", &s, &Fixed(&[], Some(profiled)), true).local);
        // A built-in provider gaffer has no URL for.
        let oss = endpoint(
            "codex",
            &s,
            &Fixed(&[], Some("model_provider = \"oss\"\n")),
            true,
        );
        assert!(!oss.local);
        assert!(oss.source.contains("model_provider = \"oss\""), "{oss:?}");
        // openai_base_url of the config counts with OPENAI_BASE_URL.
        let e = Fixed(
            &[("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")],
            Some("openai_base_url = \"https://api.openai.com/v1\"\n"),
        );
        let got = endpoint("codex", &s, &e, true);
        assert!(!got.local);
        assert!(got.source.contains("openai_base_url"), "{got:?}");
        let e = Fixed(
            &[("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")],
            Some("model = \"x\"\n"),
        );
        assert!(endpoint("codex", &s, &e, true).local);
        let broken = endpoint("codex", &s, &Fixed(&[], Some("model_provider = [")), true);
        assert!(!broken.local);
        assert!(broken.source.contains("does not parse"), "{broken:?}");
    }
}
