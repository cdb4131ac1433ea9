use gaffer_agents::tools::{Worktree, READ_LIMIT};
use gaffer_agents::Mode;
use serde_json::json;

fn setup() -> (tempfile::TempDir, Worktree, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("wt");
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::create_dir_all(tmp.path().join("outside")).unwrap();
    std::fs::write(tmp.path().join("outside/secret.txt"), "top secret").unwrap();
    let wt = Worktree::new(&root, Mode::ReadWrite).unwrap();
    let root = std::fs::canonicalize(root).unwrap();
    (tmp, wt, root)
}

#[tokio::test]
async fn read_file_over_64k_without_range_says_size_and_how_to_read_a_range() {
    let (_t, wt, root) = setup();
    let big: String = (0..5000)
        .map(|i| format!("line number {i:05} of a big file\n"))
        .collect();
    assert!(big.len() as u64 > READ_LIMIT);
    std::fs::write(root.join("big.txt"), &big).unwrap();
    let o = wt.execute("read_file", &json!({"path": "big.txt"})).await;
    assert!(o.is_error);
    assert!(o.output.contains(&big.len().to_string()), "{}", o.output);
    assert!(o.output.contains("5000 lines"), "{}", o.output);
    assert!(
        o.output.contains("start_line") && o.output.contains("end_line"),
        "{}",
        o.output
    );
    let o = wt
        .execute(
            "read_file",
            &json!({"path": "big.txt", "start_line": 2, "end_line": 3}),
        )
        .await;
    assert!(!o.is_error, "{}", o.output);
    assert_eq!(
        o.output,
        "line number 00001 of a big file\nline number 00002 of a big file\n"
    );
    // A small file reads whole.
    std::fs::write(root.join("small.txt"), "hi\n").unwrap();
    assert_eq!(
        wt.execute("read_file", &json!({"path": "small.txt"}))
            .await
            .output,
        "hi\n"
    );
}

#[tokio::test]
async fn path_escapes_are_refused() {
    let (tmp, wt, root) = setup();
    let outside = std::fs::canonicalize(tmp.path().join("outside")).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("link-dir")).unwrap();
    std::os::unix::fs::symlink(outside.join("secret.txt"), root.join("link-file")).unwrap();
    let abs = outside.join("secret.txt").display().to_string();
    let cases = [
        json!({"path": "../outside/secret.txt"}),
        json!({"path": "src/../../outside/secret.txt"}),
        json!({"path": abs}),
        json!({"path": "link-file"}),
        json!({"path": "link-dir/secret.txt"}),
    ];
    for c in &cases {
        let o = wt.execute("read_file", c).await;
        assert!(o.is_error, "{c} was allowed: {}", o.output);
        assert!(o.output.contains("outside the worktree"), "{}", o.output);
        assert!(!o.output.contains("top secret"));
    }
    // Writes through a symlinked directory or `..` are refused too, and nothing is written.
    for p in [
        "link-dir/new.txt",
        "../outside/new.txt",
        "nested/../../outside/new.txt",
    ] {
        let o = wt
            .execute("write_file", &json!({"path": p, "content": "x"}))
            .await;
        assert!(o.is_error, "{p} was allowed");
    }
    assert!(!outside.join("new.txt").exists());
    // The refusal does not reveal where a symlink points.
    let o = wt.execute("read_file", &json!({"path": "link-file"})).await;
    assert!(
        !o.output.contains(&outside.display().to_string()),
        "{}",
        o.output
    );
    // Inside paths (also absolute, also with a harmless `..`) work.
    std::fs::write(root.join("src/a.txt"), "A").unwrap();
    let inside_abs = root.join("src/a.txt").display().to_string();
    assert_eq!(
        wt.execute("read_file", &json!({"path": inside_abs}))
            .await
            .output,
        "A"
    );
    assert_eq!(
        wt.execute("read_file", &json!({"path": "src/../src/a.txt"}))
            .await
            .output,
        "A"
    );
    assert!(
        !wt.execute(
            "write_file",
            &json!({"path": "src/new/b.txt", "content": "B"})
        )
        .await
        .is_error
    );
    assert_eq!(
        std::fs::read_to_string(root.join("src/new/b.txt")).unwrap(),
        "B"
    );
}

#[tokio::test]
async fn patch_that_does_not_apply_leaves_files_unchanged() {
    let (_t, wt, root) = setup();
    std::fs::write(root.join("a.txt"), "one\ntwo\nthree\n").unwrap();
    std::fs::write(root.join("b.txt"), "alpha\nbeta\n").unwrap();
    // First file's hunk applies, the second's does not: nothing may change.
    let patch = "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n--- a/b.txt\n+++ b/b.txt\n@@ -1,2 +1,2 @@\n alpha\n-gamma\n+delta\n";
    let o = wt.execute("apply_patch", &json!({"patch": patch})).await;
    assert!(o.is_error);
    assert!(o.output.contains("hunk 1 of b.txt"), "{}", o.output);
    assert!(
        o.output.contains("gamma") && o.output.contains("beta"),
        "{}",
        o.output
    );
    assert!(o.output.contains("unchanged"), "{}", o.output);
    assert_eq!(
        std::fs::read_to_string(root.join("a.txt")).unwrap(),
        "one\ntwo\nthree\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("b.txt")).unwrap(),
        "alpha\nbeta\n"
    );
    // The good patch applies, and reports the change.
    let good = "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n";
    let o = wt.execute("apply_patch", &json!({"patch": good})).await;
    assert!(!o.is_error, "{}", o.output);
    assert_eq!(o.changes[0].0, "a.txt");
    assert_eq!(
        std::fs::read_to_string(root.join("a.txt")).unwrap(),
        "one\nTWO\nthree\n"
    );
    // No temp files are left behind.
    let names: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!names.iter().any(|n| n.contains("gaffer-tmp")), "{names:?}");
}

#[tokio::test]
async fn run_uses_argv_without_shell_with_limits() {
    let (_t, wt, _root) = setup();
    let o = wt
        .execute("run", &json!({"argv": ["echo", "a;b $HOME"]}))
        .await;
    assert!(!o.is_error, "{}", o.output);
    assert!(o.output.contains("a;b $HOME"), "{}", o.output);
    let o = wt.execute("run", &json!({"argv": ["false"]})).await;
    assert!(o.is_error);
    assert!(o.output.contains("exit code: 1"));
    let start = std::time::Instant::now();
    let o = wt
        .execute("run", &json!({"argv": ["sleep", "20"], "timeout_s": 1}))
        .await;
    assert!(
        o.is_error && o.output.contains("timed out after 1s"),
        "{}",
        o.output
    );
    assert!(start.elapsed() < std::time::Duration::from_secs(10));
    let o = wt
        .execute(
            "run",
            &json!({"argv": ["head", "-c", "100000", "/dev/zero"]}),
        )
        .await;
    assert!(
        o.output.contains("output truncated: 100000 bytes"),
        "{}",
        &o.output[o.output.len() - 200..]
    );
    assert!(o.output.len() < 40_000);
    let o = wt.execute("run", &json!({"argv": []})).await;
    assert!(o.is_error);
}

#[tokio::test]
async fn read_only_worktree_refuses_writes() {
    let tmp = tempfile::tempdir().unwrap();
    let wt = Worktree::new(tmp.path(), Mode::ReadOnly).unwrap();
    for (t, a) in [
        ("write_file", json!({"path": "x", "content": "y"})),
        (
            "apply_patch",
            json!({"patch": "--- /dev/null\n+++ b/x\n@@ -0,0 +1 @@\n+y\n"}),
        ),
        ("run", json!({"argv": ["touch", "x"]})),
    ] {
        let o = wt.execute(t, &a).await;
        assert!(
            o.is_error && o.output.contains("read-only"),
            "{t}: {}",
            o.output
        );
    }
    assert!(!tmp.path().join("x").exists());
    assert!(gaffer_agents::tools::tool_specs(Mode::ReadOnly)
        .iter()
        .all(|s| !["write_file", "apply_patch", "run"].contains(&s.name)));
}

#[tokio::test]
async fn search_is_regex_and_ignore_aware() {
    let (_t, wt, root) = setup();
    std::fs::write(root.join(".gitignore"), "target/\n").unwrap();
    std::fs::create_dir_all(root.join("target")).unwrap();
    std::fs::write(root.join("target/gen.rs"), "fn needle_generated() {}\n").unwrap();
    std::fs::write(
        root.join("src/lib.rs"),
        "fn needle_one() {}\nfn other() {}\n",
    )
    .unwrap();
    // ignore needs a git repo marker to honour .gitignore
    std::fs::create_dir_all(root.join(".git")).unwrap();
    let o = wt
        .execute("search", &json!({"pattern": "needle_\\w+"}))
        .await;
    assert!(!o.is_error, "{}", o.output);
    assert!(o.output.contains("src/lib.rs:1:"), "{}", o.output);
    assert!(!o.output.contains("generated"), "{}", o.output);
    let o = wt.execute("search", &json!({"pattern": "("})).await;
    assert!(o.is_error && o.output.contains("invalid regex"));
}
