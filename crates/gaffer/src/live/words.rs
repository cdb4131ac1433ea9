//! What the live view says about a finished step and an agent's action, in a few
//! words: never raw JSON.

use crate::output::one_line;
use gaffer_protocol::activity::{tool_input, tool_output_line};
use serde_json::Value;

/// What a finished step produced, in a few words.
pub(super) fn receipt_note(receipt: &Value) -> String {
    let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    let len = |v: &Value| v.as_array().map_or(0, Vec::len);
    // The challenger's round: agreement, or how many challenges it raised.
    if let Some(c) = receipt.get("challenges").filter(|c| c.is_object()) {
        return if c["agreement"] == true {
            " the challenger agrees with the plan".into()
        } else {
            format!(
                " the challenger raised {}",
                plural(len(&c["challenges"]), "challenge")
            )
        };
    }
    // The planner's revision: its size and how it answered.
    if let Some(r) = receipt.get("revision").filter(|r| r.is_object()) {
        let answers = r["answers"].as_array().map_or(&[][..], Vec::as_slice);
        let adopted = answers
            .iter()
            .filter(|a| a["decision"] == "adopted")
            .count();
        return format!(
            " plan revised: {}; {} of {} adopted",
            plural(len(&r["plan"]["subtasks"]), "subtask"),
            adopted,
            plural(answers.len(), "challenge")
        );
    }
    // The worktree's setup: what was copied, run and given.
    if receipt.get("commands").is_some_and(Value::is_array) && receipt.get("copied").is_some() {
        let mut did = vec![plural(len(&receipt["commands"]), "setup command") + " run"];
        let copied: Vec<String> = receipt["copied"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(|f| one_line(f, 60))
            .collect();
        if !copied.is_empty() {
            did.insert(0, format!("copied {}", copied.join(", ")));
        }
        if let Some(port) = receipt["port"].as_u64() {
            did.push(format!("port {port}"));
        }
        return format!(" worktree set up: {}", did.join(", "));
    }
    if let Some(sha) = receipt["sha"].as_str() {
        return format!(" {}", one_line(&sha[..sha.len().min(10)], 10));
    }
    if let Some(v) = receipt.get("verdict") {
        return format!(
            " verdict: {}",
            one_line(v["verdict"].as_str().unwrap_or("?"), 30)
        );
    }
    if let Some(r) = receipt.get("ruling") {
        return format!(
            " ruling: {}",
            one_line(r["ruling"].as_str().unwrap_or("?"), 30)
        );
    }
    if let Some(p) = receipt["passed"].as_bool() {
        return if p {
            " check passed".into()
        } else {
            " check failed".into()
        };
    }
    if let Some(n) = receipt["plan"]["subtasks"].as_array().map(Vec::len) {
        return format!(" {n} subtask{}", if n == 1 { "" } else { "s" });
    }
    String::new()
}

/// An agent's action in one line.
pub(super) fn activity_line(a: &Value) -> Option<String> {
    match a["type"].as_str()? {
        "tool_call" => Some(format!(
            "↳ {} {}",
            one_line(a["name"].as_str().unwrap_or("tool"), 30),
            one_line(&tool_input(&a["input"]), 100)
        )),
        "tool_result" => Some(format!(
            "  ⎿ {}",
            one_line(
                &tool_output_line(
                    a["output"].as_str().unwrap_or_default(),
                    a["is_error"].as_bool() == Some(true)
                ),
                100
            )
        )),
        "file_change" => Some(format!(
            "✎ {} ({})",
            one_line(a["path"].as_str().unwrap_or("?"), 100),
            one_line(a["kind"].as_str().unwrap_or("edit"), 20)
        )),
        "rate_limited" => Some(format!(
            "⏸ rate limited until {}",
            one_line(a["until"].as_str().unwrap_or("?"), 40)
        )),
        "assistant_text" => Some(format!(
            "“{}”",
            one_line(a["text"].as_str().unwrap_or(""), 100)
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The live view printed a bare "✓ challenge/1", "✓ revise/1", "✓ setup".
    #[test]
    fn challenge_revision_and_setup_say_what_they_did() {
        assert_eq!(
            receipt_note(
                &json!({ "challenges": { "agreement": false, "challenges": [{ "id": "C1" }, { "id": "C2" }] } })
            ),
            " the challenger raised 2 challenges"
        );
        assert_eq!(
            receipt_note(&json!({ "challenges": { "agreement": true, "challenges": [] } })),
            " the challenger agrees with the plan"
        );
        assert_eq!(
            receipt_note(&json!({ "revision": { "plan": { "subtasks": [{}, {}, {}] },
                "answers": [{ "id": "C1", "decision": "adopted" }, { "id": "C2", "decision": "rejected" }] },
                "changes": [] })),
            " plan revised: 3 subtasks; 1 of 2 challenges adopted"
        );
        assert_eq!(
            receipt_note(
                &json!({ "copied": [".env"], "commands": [{ "command": "npm ci" }], "port": 41234 })
            ),
            " worktree set up: copied .env, 1 setup command run, port 41234"
        );
        assert_eq!(
            receipt_note(&json!({ "copied": [], "commands": [], "port": null })),
            " worktree set up: 0 setup commands run"
        );
    }

    #[test]
    fn a_tool_result_is_one_line_under_its_call() {
        let line = |output: &str, is_error: bool| {
            activity_line(&json!({"type": "tool_result", "call_id": "c1", "output": output, "is_error": is_error}))
                .unwrap()
        };
        assert_eq!(line("3 passed\n", false), "  ⎿ 3 passed");
        assert_eq!(
            line(
                "error[E0425]: cannot find value `x`\n --> src/a.rs:3:5\n",
                true
            ),
            "  ⎿ failed: error[E0425]: cannot find value `x` (+1 more line)"
        );
        assert_eq!(line("", false), "  ⎿ no output");
    }

    #[test]
    fn a_tool_call_shows_its_command_or_path_or_fields_never_json() {
        let line = |name: &str, input: Value| {
            activity_line(&json!({"type": "tool_call", "name": name, "input": input})).unwrap()
        };
        assert_eq!(
            line("Bash", json!({"command": "make test", "timeout": 5})),
            "↳ Bash make test"
        );
        assert_eq!(
            line(
                "commandExecution",
                json!({"command": ["bash", "-lc", "ls"]})
            ),
            "↳ commandExecution bash -lc ls"
        );
        assert_eq!(
            line("Read", json!({"file_path": "src/lib.rs"})),
            "↳ Read src/lib.rs"
        );
        assert_eq!(
            line("Task", json!({"description": "look", "max": 3})),
            "↳ Task description look · max 3"
        );
        // Control sequences from the agent are shown, not sent to the terminal.
        assert_eq!(
            line("Bash", json!({"command": "ls \u{1b}]0;pwned\u{7}"})),
            "↳ Bash ls \\x1b]0;pwned\\x07"
        );
    }
}
