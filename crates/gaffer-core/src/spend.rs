//! What a task spent: the one definition of its tokens and cost, used by the CLI,
//! the API (and so the web page and Discord) and the ship summary.
//!
//! Every agent turn's usage is recorded once, in the `usage` object of the receipt
//! of the step that ran it (`{"input_tokens","output_tokens","cached_input_tokens",
//! "cost_usd"}`); a step that failed after its turns spent something records it
//! the same way (`step_failed`'s `usage`, kept as the failed step's receipt). A task's spend is the sum of those objects and of nothing else:
//! summaries that repeat a total (the `ship` receipt's `tokens` and `cost_usd`, the
//! task's outcome) are never added again. Money is summed in whole nanodollars, so
//! a total is exact and prints without float noise (`0.8733`, not
//! `0.8732999999999997`). A turn that spent tokens on a model with no known price
//! records no `cost_usd`: then the cost of every sum it is part of is unknown
//! (`None`, shown as "cost unknown"), never a smaller number or $0.

use serde::Serialize;
use serde_json::Value;

/// Tokens and money spent by a step, a role or a whole task.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Spend {
    /// Prompt tokens not served from a cache.
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
    /// Prompt tokens served from a cache.
    pub cached_input_tokens: u64,
    /// Cost in US nanodollars (10⁻⁹ USD) of the priced part.
    #[serde(skip)]
    nano_usd: u64,
    /// Whether some tokens were spent with no known price.
    #[serde(skip)]
    unpriced: bool,
}

impl Spend {
    /// The spend a step receipt records (its `usage` object); nothing for a receipt
    /// without one.
    pub fn of_receipt(receipt: &Value) -> Self {
        receipt.get("usage").map(Self::of_usage).unwrap_or_default()
    }

    /// The spend of one `usage` object (`{"input_tokens","output_tokens",
    /// "cached_input_tokens","cost_usd"}`), as a receipt or an agent's usage event holds.
    pub fn of_usage(u: &Value) -> Self {
        let count = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
        let usd = u.get("cost_usd").and_then(Value::as_f64);
        let mut spend = Self {
            input_tokens: count("input_tokens"),
            output_tokens: count("output_tokens"),
            cached_input_tokens: count("cached_input_tokens"),
            nano_usd: to_nano(usd.unwrap_or(0.0)),
            unpriced: false,
        };
        spend.unpriced = usd.is_none() && spend.tokens() > 0;
        spend
    }

    /// The sum over `receipts` (a task's step receipts, in any order).
    pub fn of_receipts<'a>(receipts: impl IntoIterator<Item = &'a Value>) -> Self {
        receipts.into_iter().map(Self::of_receipt).sum()
    }

    /// Every token: input, output and cached input.
    pub fn tokens(&self) -> u64 {
        self.input_tokens + self.output_tokens + self.cached_input_tokens
    }

    /// The cost in US dollars, exact to the nanodollar; `None` when some tokens
    /// were spent on a model with no known price.
    pub fn cost_usd(&self) -> Option<f64> {
        // An integer over a power of ten: the nearest double to the decimal, which
        // serializes as that decimal.
        (!self.unpriced).then(|| self.nano_usd as f64 / 1e9)
    }

    /// The cost as people read it: see [`format_cost`].
    pub fn cost_display(&self) -> String {
        format_cost(self.cost_usd())
    }
}

impl std::ops::Add for Spend {
    type Output = Self;
    fn add(self, o: Self) -> Self {
        Self {
            input_tokens: self.input_tokens + o.input_tokens,
            output_tokens: self.output_tokens + o.output_tokens,
            cached_input_tokens: self.cached_input_tokens + o.cached_input_tokens,
            nano_usd: self.nano_usd + o.nano_usd,
            unpriced: self.unpriced || o.unpriced,
        }
    }
}

impl std::ops::AddAssign for Spend {
    fn add_assign(&mut self, o: Self) {
        *self = *self + o;
    }
}

impl std::iter::Sum for Spend {
    fn sum<I: Iterator<Item = Self>>(iter: I) -> Self {
        iter.fold(Self::default(), |a, b| a + b)
    }
}

fn to_nano(usd: f64) -> u64 {
    if usd.is_finite() && usd > 0.0 {
        (usd * 1e9).round() as u64
    } else {
        0
    }
}

/// A cost for people: [`format_usd`], or `cost unknown` when there is none (tokens
/// spent on a model with no known price).
pub fn format_cost(usd: Option<f64>) -> String {
    usd.map_or_else(|| "cost unknown".to_owned(), format_usd)
}

/// Money for people, the same everywhere (CLI, web page, Discord; the page's
/// `money()` follows the same rule): cents from one dollar up (`$12.34`), four
/// decimals below (`$0.0369`) so a cheap task is not shown as free, and `$0.00`
/// for nothing at all.
pub fn format_usd(usd: f64) -> String {
    if usd == 0.0 {
        "$0.00".to_owned()
    } else if usd >= 0.999_95 {
        format!("${usd:.2}")
    } else {
        format!("${usd:.4}")
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn a_summary_that_repeats_the_total_is_not_counted_again() {
        let receipts = [
            json!({"plan": "…", "usage": {"input_tokens": 100, "output_tokens": 20, "cached_input_tokens": 5, "cost_usd": 0.0123}}),
            json!({"summary": "…", "usage": {"input_tokens": 200, "output_tokens": 40, "cost_usd": 0.0246}}),
            // The ship receipt: the total again, outside any `usage` object.
            json!({"tokens": {"input": 300, "output": 60, "cached_input": 5}, "cost_usd": 0.0369}),
        ];
        let s = Spend::of_receipts(&receipts);
        assert_eq!(
            (s.input_tokens, s.output_tokens, s.cached_input_tokens),
            (300, 60, 5)
        );
        assert_eq!(s.tokens(), 365);
        assert_eq!(s.cost_usd(), Some(0.0369));
    }

    #[test]
    fn sums_print_without_float_noise() {
        // 0.1 + 0.2 in f64 is 0.30000000000000004.
        let parts = [0.1, 0.2, 0.5733, 0.0000004];
        let s: Spend = parts
            .iter()
            .map(|c| Spend::of_receipt(&json!({"usage": {"cost_usd": c}})))
            .sum();
        assert_eq!(serde_json::to_string(&s.cost_usd()).unwrap(), "0.8733004");
        assert_eq!(s.cost_display(), "$0.8733");
    }

    #[test]
    fn missing_negative_or_nonsense_costs_count_as_nothing() {
        for usage in [
            json!({}),
            json!({"cost_usd": -1.0}),
            json!({"cost_usd": "a lot"}),
            json!({"input_tokens": "7"}),
        ] {
            assert_eq!(
                Spend::of_receipt(&json!({ "usage": usage })),
                Spend::default()
            );
        }
    }

    #[test]
    fn tokens_spent_without_a_price_make_the_cost_unknown_not_zero() {
        let priced = json!({"usage": {"input_tokens": 100, "output_tokens": 20, "cost_usd": 0.5}});
        let unpriced = json!({"usage": {"input_tokens": 300, "output_tokens": 60}});
        let nulled = json!({"usage": {"input_tokens": 1, "cost_usd": null}});
        let s = Spend::of_receipts([&priced, &unpriced]);
        assert_eq!(s.cost_usd(), None);
        assert_eq!(s.tokens(), 480, "the tokens still count");
        assert_eq!(s.cost_display(), "cost unknown");
        assert_eq!(Spend::of_receipt(&nulled).cost_usd(), None);
        assert_eq!(Spend::of_receipt(&unpriced).cost_usd(), None);
        // Nothing spent is nothing, priced or not.
        assert_eq!(Spend::default().cost_usd(), Some(0.0));
        let idle = json!({"usage": {"input_tokens": 0}});
        assert_eq!(Spend::of_receipts([&priced, &idle]).cost_usd(), Some(0.5));
        assert_eq!(format_cost(None), "cost unknown");
        assert_eq!(format_cost(Some(0.0369)), "$0.0369");
    }

    #[test]
    fn money_is_rounded_for_people() {
        assert_eq!(format_usd(0.0), "$0.00");
        assert_eq!(format_usd(0.000_04), "$0.0000");
        assert_eq!(format_usd(0.036_94), "$0.0369");
        assert_eq!(format_usd(0.999_9), "$0.9999");
        assert_eq!(format_usd(0.999_99), "$1.00");
        assert_eq!(format_usd(1.0), "$1.00");
        assert_eq!(format_usd(12.345_6), "$12.35");
    }
}
