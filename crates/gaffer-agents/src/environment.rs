//! The environment of every process gaffer starts for an agent or in a worktree, built
//! from an allowlist: nothing of gaffer's own environment passes unless named here (or
//! by the config), so gaffer's API tokens, forge tokens and unrelated secrets never
//! reach an agent or a check.

use std::collections::BTreeMap;

/// What any process needs to run: where programs are, who and where the user is, the
/// locale and terminal, proxies and CA bundles to reach the network, and where the
/// toolchains keep their homes. Plus every `LC_*`.
pub const BASE: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TERM",
    "COLORTERM",
    "NO_COLOR",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "all_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
    "GOPATH",
    "GOROOT",
    "GOMODCACHE",
    "NVM_DIR",
    "NVM_BIN",
    "PYENV_ROOT",
    "VOLTA_HOME",
    "JAVA_HOME",
];

/// The environment for one process: [`BASE`] and every `LC_*` taken from gaffer's own
/// environment, then `pass` (the credentials and settings a backend needs; a name ending
/// in `*` passes every variable it starts) when gaffer has them, then `extra` (set by
/// gaffer or named by the config), which wins.
pub fn build(pass: &[&str], extra: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    build_from(std::env::vars(), pass, extra)
}

/// [`build`] over a given environment (tests never change their own).
pub fn build_from(
    vars: impl IntoIterator<Item = (String, String)>,
    pass: &[&str],
    extra: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = vars
        .into_iter()
        .filter(|(k, _)| BASE.contains(&k.as_str()) || k.starts_with("LC_") || passes(pass, k))
        .collect();
    env.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
    env
}

/// Remove from `env` every variable `names` lists (exactly, or under a `PREFIX*`
/// entry): what a session must not get even when gaffer has it (a role that must stay
/// local gets no switch to a cloud provider, [`crate::local_only::CLAUDE_WITHHELD`]).
pub fn withhold(env: &mut BTreeMap<String, String>, names: &[&str]) {
    env.retain(|k, _| !passes(names, k));
}

/// Whether `name` is in `pass`, exactly or under a `PREFIX*` entry.
fn passes(pass: &[&str], name: &str) -> bool {
    pass.iter().any(|p| match p.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => *p == name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_allowlisted_names_pass_and_extras_win() {
        let vars = [
            ("PATH", "/usr/bin"),
            ("LC_ALL", "C.UTF-8"),
            ("GAFFER_TOKEN", "t0ken"),
            ("AWS_SECRET_ACCESS_KEY", "s3cret"),
            ("ANTHROPIC_API_KEY", "sk-ant"),
            ("HOME", "/home/me"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()));
        let extra = BTreeMap::from([("HOME".to_string(), "/private".to_string())]);
        let env = build_from(vars, &["ANTHROPIC_API_KEY"], &extra);
        let names: Vec<&str> = env.keys().map(String::as_str).collect();
        assert_eq!(names, ["ANTHROPIC_API_KEY", "HOME", "LC_ALL", "PATH"]);
        assert_eq!(env["HOME"], "/private");
    }

    #[test]
    fn a_prefix_entry_passes_the_variables_it_starts_and_no_other() {
        let vars = [
            ("ANTHROPIC_BASE_URL", "http://127.0.0.1:9"),
            ("ANTHROPIC_DEFAULT_HAIKU_MODEL", "small"),
            ("ANTHROPICX", "no"),
            ("OPENAI_API_KEY", "sk-openai"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()));
        let env = build_from(vars, &["ANTHROPIC_*"], &BTreeMap::new());
        let names: Vec<&str> = env.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            ["ANTHROPIC_BASE_URL", "ANTHROPIC_DEFAULT_HAIKU_MODEL"]
        );
    }

    #[test]
    fn withheld_names_and_prefixes_are_removed_whatever_passed_them() {
        let mut env: BTreeMap<String, String> = [
            ("AWS_PROFILE", "p"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
            ("CLAUDE_CODE_USE_BEDROCK", "1"),
            ("CLAUDE_CODE_USE_BEDROCKX", "kept: not the name"),
            ("PATH", "/usr/bin"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .into();
        withhold(&mut env, &["AWS_*", "CLAUDE_CODE_USE_BEDROCK"]);
        let names: Vec<&str> = env.keys().map(String::as_str).collect();
        assert_eq!(names, ["CLAUDE_CODE_USE_BEDROCKX", "PATH"]);
    }
}
