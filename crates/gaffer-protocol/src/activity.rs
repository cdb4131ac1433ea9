//! What an agent does, as the journal's `agent_activity` events hold it (a
//! normalized `activity` object with a `type`: `tool_call`, `file_change`,
//! `assistant_text`, `rate_limited`, `usage`, …), read by every renderer.

use serde_json::Value;

/// A tool result in one line for a transcript read as it scrolls by (the terminal,
/// a chat thread): its first line that says something and how many more there are,
/// or that it gave nothing; `failed:` first when the tool reported an error.
pub fn tool_output_line(output: &str, is_error: bool) -> String {
    let lines: Vec<&str> = output.lines().filter(|l| !l.trim().is_empty()).collect();
    let what = match lines.split_first() {
        None => "no output".to_owned(),
        Some((first, [])) => first.trim().to_owned(),
        Some((first, rest)) => format!(
            "{} (+{} more line{})",
            first.trim(),
            rest.len(),
            if rest.len() == 1 { "" } else { "s" }
        ),
    };
    if is_error {
        format!("failed: {what}")
    } else {
        what
    }
}

/// A tool call's input in words: its command, path, pattern, URL or query when it
/// has one, else its fields as `key value` (never JSON braces).
pub fn tool_input(input: &Value) -> String {
    const MAIN: &[&str] = &[
        "command",
        "cmd",
        "file_path",
        "path",
        "pattern",
        "url",
        "query",
    ];
    fn plain(v: &Value) -> String {
        match v {
            Value::String(s) => s.clone(),
            Value::Array(items) => items.iter().map(plain).collect::<Vec<_>>().join(" "),
            other => other.to_string(),
        }
    }
    match input {
        Value::Object(fields) => match MAIN.iter().find_map(|k| fields.get(*k)) {
            Some(main) => plain(main),
            None => fields
                .iter()
                .map(|(k, v)| format!("{k} {}", plain(v)))
                .collect::<Vec<_>>()
                .join(" · "),
        },
        other => plain(other),
    }
}

#[cfg(test)]
mod tests {
    use super::tool_output_line;

    #[test]
    fn a_tool_result_reads_as_its_first_line_and_how_much_more() {
        assert_eq!(tool_output_line("", false), "no output");
        assert_eq!(tool_output_line("\n  \n", false), "no output");
        assert_eq!(tool_output_line("  ok  \n", false), "ok");
        assert_eq!(
            tool_output_line("\nsrc/a.rs:3: fn a\nsrc/b.rs:9: fn b\n", false),
            "src/a.rs:3: fn a (+1 more line)"
        );
        assert_eq!(
            tool_output_line("error: no such file\nhint\nmore\n", true),
            "failed: error: no such file (+2 more lines)"
        );
        assert_eq!(tool_output_line("", true), "failed: no output");
    }
}
