//! Hostile agent output: the patch parser and applier get arbitrary text and answer
//! with a typed error or a result, never a panic (bounded case counts; the `fuzz/`
//! targets run the same functions without a bound).

use gaffer_agents::patch::{apply_unified_diff, parse_patch};
use proptest::prelude::*;

fn line() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("--- a/src/lib.rs".to_string()),
        Just("+++ b/src/lib.rs".to_string()),
        Just("--- /dev/null".to_string()),
        Just("\\ No newline at end of file".to_string()),
        "@@ -[0-9]{1,3}(,[0-9]{1,3})? \\+[0-9]{1,3}(,[0-9]{1,3})? @@",
        "[ +-][a-z {}();]{0,12}",
        ".{0,20}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn patch_parser_survives_any_text(text in ".{0,600}") {
        let _ = parse_patch(&text);
        let _ = apply_unified_diff("a\nb\nc\n", &text);
    }

    #[test]
    fn patch_parser_survives_patch_shaped_noise(lines in proptest::collection::vec(line(), 0..24), original in "[a-z\n]{0,60}") {
        let text = lines.join("\n");
        if let Ok(files) = parse_patch(&text) {
            for f in &files {
                // Every hunk line it accepted is one of the three kinds.
                for h in &f.hunks {
                    prop_assert!(h.lines.iter().all(|(k, _)| matches!(k, ' ' | '+' | '-')));
                }
            }
        }
        let _ = apply_unified_diff(&original, &text);
    }
}
