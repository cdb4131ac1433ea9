//! Approval keys. An approval is unique by `(task, step, key)` in the store, and asking
//! again with a key returns the answer already recorded for it (that is how a question
//! asked again after a crash finds its answer). So two different questions must never
//! share a key: the answer to one would count for the other. Each kind of question of a
//! step attempt has its own range:
//!
//! | question | key |
//! |---|---|
//! | the step's own question about its session (`turn`) | `attempt × 1000` |
//! | a forge error of a ship step, round r (`ship`) | `attempt × 1000 + r` |
//! | the agent's tool requests, n-th ([`tool`]) | `attempt × 1000 + n`, 1 ≤ n < 500 |
//! | a switch to the next agent, n-th (`fallback`) | `attempt × 1000 + 500 + n` |
//! | a memory proposal (`memory`) | `attempt × 1000 + 999` |
//! | a stall, n-th (`stall`) | `1 000 000 000 + attempt × 1000 + n` |
//! | a spending cap, n-th (`budget`) | `2 000 000 000 + attempt × 1000 + n` |
//! | panel member m's tool requests, n-th ([`member_tool`]) | `3 000 000 000 + attempt × 100 000 + m × 1000 + n`, n < 1000, m < 100 |
//!
//! An agent that asks past its range is refused (the request is denied, nothing is
//! recorded), never given another question's key.

/// Tool requests one session of a step attempt may turn into approvals.
pub(crate) const TOOL_REQUESTS: u32 = 499;
/// Tool requests one panel member may turn into approvals.
pub(crate) const MEMBER_TOOL_REQUESTS: u32 = 999;
const MEMBER_KEYS: u32 = 3_000_000_000;

/// The key of the `n`-th (from 1) tool request of `attempt`, if within its range.
pub(crate) fn tool(attempt: u32, n: u32) -> Option<u32> {
    (1..=TOOL_REQUESTS)
        .contains(&n)
        .then(|| attempt.checked_mul(1000)?.checked_add(n))?
}

/// The key of panel member `member`'s (from 0) `n`-th (from 1) tool request in the
/// arbiter's `attempt`, if within its range.
pub(crate) fn member_tool(attempt: u32, member: usize, n: u32) -> Option<u32> {
    let member = u32::try_from(member).ok().filter(|m| *m < 100)?;
    if !(1..=MEMBER_TOOL_REQUESTS).contains(&n) {
        return None;
    }
    MEMBER_KEYS
        .checked_add(attempt.checked_mul(100_000)?)?
        .checked_add(member * 1000 + n)
}

/// Which request of an attempt a recorded key was, if it is a tool key of that
/// attempt: `(member, n)`, member `None` for the step's own session.
pub(crate) fn tool_request_of(attempt: u32, key: u32) -> Option<(Option<u32>, u32)> {
    let first = attempt.checked_mul(1000)?;
    if key > first && key - first <= TOOL_REQUESTS {
        return Some((None, key - first));
    }
    let base = MEMBER_KEYS.checked_add(attempt.checked_mul(100_000)?)?;
    let within = key.checked_sub(base).filter(|k| *k < 100_000)?;
    let (member, n) = (within / 1000, within % 1000);
    (n >= 1).then_some((Some(member), n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// Every key of every kind for a few attempts: none is used twice.
    #[test]
    fn no_two_questions_of_any_attempts_share_a_key() {
        let mut seen = HashSet::new();
        for attempt in [1u32, 2, 3, 999, 1000] {
            let mut keys = vec![attempt * 1000, attempt * 1000 + 999];
            keys.extend((1..=TOOL_REQUESTS).map(|n| tool(attempt, n).unwrap()));
            keys.extend((0..499).map(|n| attempt * 1000 + 500 + n));
            keys.extend((1..200).map(|n| 1_000_000_000 + attempt * 1000 + n));
            keys.extend((1..200).map(|n| 2_000_000_000 + attempt * 1000 + n));
            for member in 0..100 {
                keys.extend(
                    (1..=MEMBER_TOOL_REQUESTS).map(|n| member_tool(attempt, member, n).unwrap()),
                );
            }
            for key in keys {
                assert!(seen.insert(key), "key {key} used twice (attempt {attempt})");
            }
        }
    }

    #[test]
    fn past_its_range_a_request_gets_no_key() {
        assert_eq!(tool(1, 499), Some(1499));
        assert_eq!(tool(1, 500), None, "500 is the first switch key");
        assert_eq!(tool(1, 0), None);
        assert_eq!(member_tool(1, 0, 1000), None);
        assert_eq!(member_tool(1, 100, 1), None);
        assert_eq!(
            tool(u32::MAX, 1),
            None,
            "an overflowing attempt gets no key"
        );
    }

    #[test]
    fn a_key_reads_back_as_the_request_it_was() {
        assert_eq!(tool_request_of(2, tool(2, 7).unwrap()), Some((None, 7)));
        assert_eq!(
            tool_request_of(2, member_tool(2, 3, 9).unwrap()),
            Some((Some(3), 9))
        );
        assert_eq!(
            tool_request_of(2, 2500),
            None,
            "a switch key is no tool request"
        );
        assert_eq!(tool_request_of(2, 2000), None);
        assert_eq!(
            tool_request_of(3, tool(2, 7).unwrap()),
            None,
            "another attempt's"
        );
    }
}
