//! Role prompts. They live in versioned files under `prompts/` (people who write
//! their own agents read them there); `{{name}}` placeholders are filled here.

use gaffer_protocol::contracts::Plan;

/// The planner's first message.
pub const PLANNER: &str = include_str!("../prompts/planner.md");
/// The owner's message for a subtask or a fix.
pub const OWNER: &str = include_str!("../prompts/owner.md");
/// The reviewer's message.
pub const REVIEWER: &str = include_str!("../prompts/reviewer.md");
/// The arbiter's message.
pub const ARBITER: &str = include_str!("../prompts/arbiter.md");
/// A turn made of people's messages (see `live`).
pub const MESSAGES: &str = include_str!("../prompts/messages.md");
/// The challenger's message for a plan revision.
pub const CHALLENGER: &str = include_str!("../prompts/challenger.md");
/// The planner's message to revise its plan after challenges.
pub const REVISE: &str = include_str!("../prompts/revise.md");
/// A member of the arbiter's panel, asked for its opinion before the ruling.
pub const PANELIST: &str = include_str!("../prompts/panelist.md");
/// The tester's message, once before review.
pub const TESTER: &str = include_str!("../prompts/tester.md");
/// Sent when an answer breaks its contract.
pub const RETRY: &str = include_str!("../prompts/retry.md");

/// Fill `{{name}}` placeholders; unknown ones become empty.
pub fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len() + 256);
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        match after.find("}}") {
            Some(end) => {
                let key = after[..end].trim();
                if let Some((_, v)) = values.iter().find(|(k, _)| *k == key) {
                    out.push_str(v);
                }
                rest = &after[end + 2..];
            }
            None => {
                out.push_str(&rest[start..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// The plan as numbered text.
pub fn plan_text(plan: &Plan) -> String {
    plan.subtasks
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let files = if s.files.is_empty() {
                String::new()
            } else {
                format!("\n   files: {}", s.files.join(", "))
            };
            format!(
                "{}. {}\n   {}{files}\n   done when: {}",
                i + 1,
                s.title,
                s.description,
                s.acceptance
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Cut `text` to its last `max` bytes (on a char boundary), marking the cut.
pub fn tail(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("…(cut)…\n{}", &text[start..])
}

/// Cut `text` to its first `max` bytes (on a char boundary), marking the cut.
pub fn head(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n…(cut: {} more bytes)…", &text[..end], text.len() - end)
}
