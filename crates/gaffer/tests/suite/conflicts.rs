//! Keeping a pull request mergeable: the `conflict_strategy` setting as users meet it.
use super::support::Home;

#[test]
fn a_bad_conflict_strategy_exits_78_naming_the_field_and_the_choices() {
    let home = Home::new();
    home.write_config(
        "[projects.app.forge]\nkind = \"gitea\"\nbase_url = \"https://git.example.com\"\nconflict_strategy = \"force\"\n",
    );
    for args in [&["task", "list"][..], &["run", "add a README"]] {
        let out = home.gaffer().args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(78), "{args:?}: {err}");
        for part in [
            "projects.app.forge.conflict_strategy",
            "`force`",
            "\"rebase\"",
            "\"merge\"",
        ] {
            assert!(err.contains(part), "{args:?}: no {part:?} in {err}");
        }
    }
    assert!(!home.data().exists(), "the data dir was created");
}
