//! The after-pull-request loop in words, for `gaffer task show` and the live views
//! (`gaffer run`, `gaffer attach`): why a follow-up opened (review comments with
//! their file and line, a base that moved), what its own steps did (the update onto
//! the base, the owner's conflict resolution, the replies posted) and how following
//! ended. Everything from a forge or an agent is escaped by [`one_line`].

use crate::output::{one_line, utc};
use gaffer_protocol::api;
use serde_json::Value;

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn short(sha: &Value) -> String {
    let sha = sha.as_str().unwrap_or("?");
    one_line(&sha[..sha.len().min(8)], 8)
}

/// The paths of a JSON list, each on one line, joined with commas.
pub(crate) fn files(v: &Value) -> String {
    let names: Vec<String> = v
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|f| one_line(f, 80))
        .collect();
    names.join(", ")
}

/// Why follow-up `n` opened, on one line: `2 review comments on pull request #7`,
/// `the base main moved: the pull request no longer merges (a conflict) at 9b1d44e0`.
pub fn why(kind: &str, keys: &[String], detail: &Value) -> String {
    match kind {
        "review_comments" => {
            let n = detail["comments"].as_array().map_or(keys.len(), Vec::len);
            let on = detail["pull_request"]
                .as_u64()
                .map(|pr| format!(" on pull request #{pr}"))
                .unwrap_or_default();
            format!("{}{on}", plural(n, "review comment", "review comments"))
        }
        "merge_conflict" => {
            let base = one_line(detail["base"].as_str().unwrap_or("its base"), 60);
            let how = if detail["mergeable"] == "behind" {
                "must be up to date with it to merge"
            } else {
                "no longer merges (a conflict)"
            };
            format!(
                "the base {base} moved: the pull request {how} at {}",
                short(&detail["head_sha"])
            )
        }
        other => format!("a follow-up of kind `{}`", one_line(other, 40)),
    }
}

/// The comments a review follow-up answers, one line each: where, who, what.
fn comments(detail: &Value) -> Vec<String> {
    detail["comments"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let place = match (c["path"].as_str(), c["line"].as_u64()) {
                (Some(p), Some(l)) => format!("{}:{l}", one_line(p, 80)),
                (Some(p), None) => one_line(p, 80),
                _ => "(conversation)".into(),
            };
            format!(
                "{place}  {}: {}",
                one_line(c["author"].as_str().unwrap_or("?"), 40),
                one_line(c["body"].as_str().unwrap_or_default(), 200)
            )
        })
        .collect()
}

/// A follow-up as it opens, for the live view: a line, then its comments.
pub fn opened(n: usize, kind: &str, keys: &[String], detail: &Value) -> Vec<String> {
    let mut out = vec![format!("follow-up {n}: {}", why(kind, keys, detail))];
    out.extend(comments(detail).into_iter().map(|c| format!("  {c}")));
    out
}

/// What the task's live view says when it is done again after follow-up `n`.
pub fn done_again(n: usize) -> String {
    format!("done again (follow-up {n} answered); the pull request is still followed")
}

/// Following ended, for people.
pub fn ended(reason: &str) -> String {
    format!(
        "no longer following the pull request: {}",
        one_line(reason, 300)
    )
}

/// `gaffer task show`'s section: each follow-up, and how following ended.
pub fn section(t: &api::TaskDetail) -> Vec<String> {
    if t.follow_ups.is_empty() && t.following_ended.is_none() {
        return Vec::new();
    }
    let mut out = vec![String::new(), "follow-ups".into()];
    for f in &t.follow_ups {
        out.push(format!(
            "  {:>2}. {}  ({})",
            f.n,
            why(&f.kind, &f.keys, &f.detail),
            utc(f.opened_at)
        ));
        out.extend(
            comments(&f.detail)
                .into_iter()
                .map(|c| format!("      {c}")),
        );
    }
    if let Some(reason) = &t.following_ended {
        out.push(format!("  {}", ended(reason)));
    }
    out
}

/// What a follow-up step did, in words (`sync/k`, `resolve/r`, `reply/n`); `None`
/// for the other steps.
pub fn step_words(step_id: &str, receipt: &Value) -> Option<String> {
    let kind = step_id.split('/').next().unwrap_or_default();
    let base = one_line(receipt["base"].as_str().unwrap_or("the base"), 60);
    Some(match (kind, receipt["outcome"].as_str()) {
        ("sync", Some("updated")) => {
            let how = if receipt["strategy"] == "merge" {
                format!("merged {base}")
            } else {
                format!("rebased onto {base}")
            };
            format!(
                "{how} {} without conflicts; the branch is at {}",
                short(&receipt["base_sha"]),
                short(&receipt["head"])
            )
        }
        ("sync", Some("conflicted")) => format!(
            "{} {base} {} stopped on conflicts in {}",
            if receipt["strategy"] == "merge" {
                "merging"
            } else {
                "rebasing onto"
            },
            short(&receipt["base_sha"]),
            files(&receipt["files"])
        ),
        ("sync", Some("up_to_date")) => format!(
            "the branch already holds {base} {}: nothing to push",
            short(&receipt["base_sha"])
        ),
        ("resolve", Some("updated")) => format!(
            "conflicts resolved; the branch is at {}",
            short(&receipt["head"])
        ),
        ("resolve", Some("conflicted")) => format!(
            "resolved; the update stopped again on conflicts in {}",
            files(&receipt["files"])
        ),
        ("resolve", Some("unresolved")) => {
            format!("conflict markers left in {}", files(&receipt["files"]))
        }
        ("reply", _) => {
            let replies = receipt["replies"].as_array().map_or(0, Vec::len);
            format!(
                "replied to {}",
                plural(replies, "review comment", "review comments")
            )
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn review() -> Value {
        json!({"pull_request": 7, "url": "https://git.example.com/acme/demo/pulls/7", "comments": [
            {"key": "review-comment:41", "author": "bob", "body": "Return the error\ninstead of `unwrap()`", "path": "src/list.rs", "line": 3},
            {"key": "comment:42", "author": "carol", "body": "Mention it in the README \u{1b}]0;pwned\u{7}"}
        ]})
    }

    #[test]
    fn a_review_follow_up_says_how_many_comments_and_each_ones_place_escaped() {
        let keys = ["review-comment:41".to_owned(), "comment:42".to_owned()];
        assert_eq!(
            opened(1, "review_comments", &keys, &review()),
            vec![
                "follow-up 1: 2 review comments on pull request #7",
                "  src/list.rs:3  bob: Return the error instead of `unwrap()`",
                "  (conversation)  carol: Mention it in the README \\x1b]0;pwned\\x07",
            ]
        );
    }

    #[test]
    fn a_conflict_follow_up_names_the_base_and_the_head_that_no_longer_merges() {
        let keys = ["merge_conflict:9b1d44e0aa".to_owned()];
        let detail = json!({"head_sha": "9b1d44e0aa", "base": "main", "mergeable": "conflicted"});
        assert_eq!(
            why("merge_conflict", &keys, &detail),
            "the base main moved: the pull request no longer merges (a conflict) at 9b1d44e0"
        );
        let behind = json!({"head_sha": "9b1d44e0aa", "base": "main", "mergeable": "behind"});
        assert_eq!(
            why("merge_conflict", &keys, &behind),
            "the base main moved: the pull request must be up to date with it to merge at 9b1d44e0"
        );
    }

    #[test]
    fn the_follow_up_steps_say_what_they_did() {
        let sync = |r: Value| step_words("sync/1", &r).unwrap();
        assert_eq!(
            sync(
                json!({"outcome": "conflicted", "files": ["src/list.rs", "README.md"], "strategy": "rebase", "base": "main", "base_sha": "c0ffee1234"})
            ),
            "rebasing onto main c0ffee12 stopped on conflicts in src/list.rs, README.md"
        );
        assert_eq!(
            sync(
                json!({"outcome": "updated", "head": "77aa0b5c3d", "strategy": "merge", "base": "main", "base_sha": "c0ffee1234"})
            ),
            "merged main c0ffee12 without conflicts; the branch is at 77aa0b5c"
        );
        assert_eq!(
            sync(
                json!({"outcome": "up_to_date", "head": "77aa0b5c3d", "strategy": "rebase", "base": "main", "base_sha": "c0ffee1234"})
            ),
            "the branch already holds main c0ffee12: nothing to push"
        );
        assert_eq!(
            step_words(
                "resolve/2",
                &json!({"outcome": "unresolved", "files": ["src/list.rs"]})
            )
            .unwrap(),
            "conflict markers left in src/list.rs"
        );
        assert_eq!(
            step_words(
                "reply/1",
                &json!({"follow_up": 1, "replies": [{"to": "comment:42"}]})
            )
            .unwrap(),
            "replied to 1 review comment"
        );
        assert_eq!(step_words("push/2", &json!({"sha": "abc"})), None);
    }
}
