//! Short ids, like git's abbreviated commits: lists show the shortest start of each
//! id that no other id shares (at least [`MIN_DIGITS`] digits after `t-` / `ap-`),
//! and every command that takes an id accepts any unique start of it, with or
//! without its prefix.

use crate::error::{CliError, Result};
use gaffer_store::{ApprovalFilter, Journal, TaskFilter};
use std::collections::HashMap;

/// Digits after the `t-` / `ap-` prefix a short id shows at least. Ids are UUIDv7,
/// whose first digits are the creation time: eight of them tell apart tasks
/// created more than about a minute apart; closer ones get more.
pub const MIN_DIGITS: usize = 8;

/// The shortest unique start of each of `ids` (every id that exists of its kind,
/// so that what is shown stays unambiguous), by id.
pub fn shorten<'a>(ids: impl IntoIterator<Item = &'a str>) -> HashMap<String, String> {
    let mut sorted: Vec<&str> = ids.into_iter().collect();
    sorted.sort_unstable();
    sorted.dedup();
    let common = |a: &str, b: &str| a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    let mut short = HashMap::with_capacity(sorted.len());
    for (i, id) in sorted.iter().enumerate() {
        let prefix = id.find('-').map_or(0, |p| p + 1);
        let before = i.checked_sub(1).map_or(0, |j| common(sorted[j], id));
        let after = sorted.get(i + 1).map_or(0, |next| common(next, id));
        let keep = (before.max(after) + 1)
            .max(prefix + MIN_DIGITS)
            .min(id.len());
        short.insert((*id).to_owned(), id[..keep].to_owned());
    }
    short
}

/// The one id among `ids` that `given` names: the id itself, or a unique start of
/// it (`t-019a2b3c`, or `019a2b3c` without the `prefix`). `what` names the kind
/// ("task", "approval") and `list` the command that lists them, for the errors.
pub fn resolve<'a>(
    given: &str,
    prefix: &str,
    ids: impl IntoIterator<Item = &'a str>,
    what: &str,
    list: &str,
) -> Result<String> {
    let wanted = given.trim().to_ascii_lowercase();
    let wanted = if wanted.starts_with(prefix) {
        wanted
    } else {
        format!("{prefix}{wanted}")
    };
    let mut found: Vec<&str> = ids
        .into_iter()
        .filter(|id| id.starts_with(&wanted))
        .collect();
    found.sort_unstable();
    found.dedup();
    if let Some(exact) = found.iter().find(|id| **id == wanted) {
        return Ok((*exact).to_owned());
    }
    match found.as_slice() {
        [one] => Ok((*one).to_owned()),
        [] => Err(CliError::failed(format!(
            "no {what} `{given}`; `{list}` shows them"
        ))),
        many => {
            let short = shorten(many.iter().copied());
            let mut names: Vec<&str> = many
                .iter()
                .filter_map(|id| short.get(*id).map(String::as_str))
                .take(5)
                .collect();
            if many.len() > names.len() {
                names.push("…");
            }
            Err(CliError::usage(format!(
                "`{given}` is the start of {} {what}s ({}); give more of the id",
                many.len(),
                names.join(", ")
            )))
        }
    }
}

/// Every task id in the journal.
pub async fn all_tasks(journal: &dyn Journal) -> Result<Vec<String>> {
    let rows = journal
        .tasks(&TaskFilter {
            limit: Some(i64::MAX),
            ..TaskFilter::default()
        })
        .await?;
    Ok(rows.into_iter().map(|t| t.id).collect())
}

/// Every approval id in the journal.
pub async fn all_approvals(journal: &dyn Journal) -> Result<Vec<String>> {
    let rows = journal.approvals(&ApprovalFilter::default()).await?;
    Ok(rows.into_iter().map(|a| a.id).collect())
}

/// The task `given` names (its id or a unique start of it).
pub async fn task(journal: &dyn Journal, given: &str) -> Result<String> {
    let ids = all_tasks(journal).await?;
    resolve(
        given,
        "t-",
        ids.iter().map(String::as_str),
        "task",
        "gaffer task list",
    )
}

/// The approval `given` names (its id or a unique start of it).
pub async fn approval(journal: &dyn Journal, given: &str) -> Result<String> {
    let ids = all_approvals(journal).await?;
    resolve(
        given,
        "ap-",
        ids.iter().map(String::as_str),
        "approval",
        "gaffer approvals --all",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    const IDS: [&str; 4] = [
        "t-019a2b3c4d5e7000aaaa",
        "t-019a2b3c4d5f7000bbbb",
        "t-019b00000000700000cc",
        "t-1",
    ];

    #[test]
    fn short_ids_are_unique_and_at_least_eight_digits() {
        let short = shorten(IDS);
        assert_eq!(short["t-019a2b3c4d5e7000aaaa"], "t-019a2b3c4d5e");
        assert_eq!(short["t-019a2b3c4d5f7000bbbb"], "t-019a2b3c4d5f");
        assert_eq!(short["t-019b00000000700000cc"], "t-019b0000");
        assert_eq!(short["t-1"], "t-1");
    }

    #[test]
    fn a_unique_start_names_its_id_with_or_without_prefix() {
        let r = |given| resolve(given, "t-", IDS, "task", "gaffer task list");
        assert_eq!(r("t-019b").unwrap(), "t-019b00000000700000cc");
        assert_eq!(r("019A2B3C4D5F").unwrap(), "t-019a2b3c4d5f7000bbbb");
        assert_eq!(r("t-1").unwrap(), "t-1");
        let ambiguous = r("t-019a").unwrap_err();
        assert_eq!(ambiguous.code(), crate::error::EXIT_USAGE);
        assert!(ambiguous
            .message()
            .contains("t-019a2b3c4d5e, t-019a2b3c4d5f"));
        let none = r("t-02").unwrap_err();
        assert_eq!(none.code(), crate::error::EXIT_FAILED);
        assert!(
            none.message().contains("gaffer task list"),
            "{}",
            none.message()
        );
    }
}
