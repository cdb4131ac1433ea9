//! What the live view says about a finished step and an agent's action, in a few
//! words: never raw JSON.

use crate::output::one_line;
use gaffer_protocol::activity::tool_input;
use serde_json::Value;

/// What a finished step produced, in a few words.
pub(super) fn receipt_note(receipt: &Value) -> String {
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
