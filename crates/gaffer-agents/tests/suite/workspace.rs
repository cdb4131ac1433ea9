use gaffer_agents::{canonical_workspace_from, claude_project_key, workspace_key};
use std::path::Path;

/// All six spellings of one workspace give one key (`cd -P && pwd -P` semantics).
#[test]
fn six_forms_one_key() {
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let real = root.join("wsprobe").join("real");
    std::fs::create_dir_all(&real).unwrap();
    let link = root.join("wsprobe").join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let expected = workspace_key(&real);

    let forms: Vec<(&str, std::path::PathBuf, std::path::PathBuf)> = vec![
        (".", real.clone(), ".".into()),
        ("./", real.clone(), "./".into()),
        ("absolute", root.clone(), real.clone()),
        (
            "trailing slash",
            root.clone(),
            format!("{}/", real.display()).into(),
        ),
        ("dotdot", root.clone(), root.join("wsprobe/../wsprobe/real")),
        ("symlink", root.clone(), link.clone()),
    ];
    for (name, base, input) in forms {
        let got = canonical_workspace_from(&base, &input).unwrap();
        assert_eq!(workspace_key(&got), expected, "form {name}");
    }
    // The symlink's own name must not leak into the key (logical-path bug of `pwd`).
    assert!(!expected.contains("link"));
}

#[test]
fn claude_key_replaces_every_non_alphanumeric() {
    assert_eq!(
        claude_project_key(Path::new("/home/u/my_proj.v2/a-b")),
        "-home-u-my-proj-v2-a-b"
    );
}

#[test]
fn missing_workspace_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let err = canonical_workspace_from(tmp.path(), Path::new("nope")).unwrap_err();
    assert!(err.to_string().contains("nope"), "{err}");
}

#[test]
fn executables_come_from_the_env_var_then_path() {
    use gaffer_agents::{find_executable_in, AgentError};
    let tmp = tempfile::tempdir().unwrap();
    let bin = tmp.path().join("claude");
    std::fs::write(&bin, "#!/bin/sh\n").unwrap();
    let path = std::env::join_paths([Path::new("/nonexistent"), tmp.path()]).unwrap();
    assert_eq!(
        find_executable_in("GAFFER_CLAUDE_BIN", None, Some(path.clone()), "claude").unwrap(),
        bin
    );
    assert_eq!(
        find_executable_in(
            "GAFFER_CLAUDE_BIN",
            Some("/opt/c".into()),
            Some(path.clone()),
            "claude"
        )
        .unwrap(),
        Path::new("/opt/c")
    );
    // An empty override falls back to PATH.
    assert_eq!(
        find_executable_in(
            "GAFFER_CLAUDE_BIN",
            Some(String::new()),
            Some(path),
            "claude"
        )
        .unwrap(),
        bin
    );
    // Agents start in their worktree: a relative path is made absolute from here
    // (else the agent is looked for inside the worktree); a bare name stays a name.
    let here = std::env::current_dir().unwrap();
    assert_eq!(
        find_executable_in(
            "GAFFER_CLAUDE_BIN",
            Some("target/debug/fake-claude".into()),
            None,
            "claude"
        )
        .unwrap(),
        here.join("target/debug/fake-claude")
    );
    assert_eq!(
        find_executable_in(
            "GAFFER_CLAUDE_BIN",
            Some("claude-beta".into()),
            None,
            "claude"
        )
        .unwrap(),
        Path::new("claude-beta")
    );
    let relative_dir = pathdiff(tmp.path(), &here);
    let found = find_executable_in(
        "GAFFER_CLAUDE_BIN",
        None,
        Some(relative_dir.into_os_string()),
        "claude",
    )
    .unwrap();
    assert!(found.is_absolute(), "{}", found.display());
    assert_eq!(
        std::fs::canonicalize(found).unwrap(),
        std::fs::canonicalize(&bin).unwrap()
    );
    let err = find_executable_in("GAFFER_GEMINI_BIN", None, None, "gemini").unwrap_err();
    assert!(matches!(err, AgentError::ExecutableNotFound { .. }));
    assert!(err.to_string().contains("GAFFER_GEMINI_BIN"), "{err}");
}

/// `to` as a path relative to `from` (both absolute).
fn pathdiff(to: &Path, from: &Path) -> std::path::PathBuf {
    let (to, from) = (
        std::fs::canonicalize(to).unwrap(),
        std::fs::canonicalize(from).unwrap(),
    );
    let common = to
        .components()
        .zip(from.components())
        .take_while(|(a, b)| a == b)
        .count();
    let mut out = std::path::PathBuf::new();
    for _ in from.components().skip(common) {
        out.push("..");
    }
    for c in to.components().skip(common) {
        out.push(c);
    }
    out
}
