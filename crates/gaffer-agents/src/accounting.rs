//! Token and cost accounting: usage per turn, rolled up per step, task, role and provider.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::types::Usage;

/// Prices in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Pricing {
    /// Uncached input.
    pub input_per_mtok: f64,
    /// Output.
    pub output_per_mtok: f64,
    /// Cached input.
    pub cached_input_per_mtok: f64,
}

impl Pricing {
    /// Cost of a usage.
    pub fn cost(&self, u: &Usage) -> f64 {
        (u.input_tokens as f64 * self.input_per_mtok
            + u.output_tokens as f64 * self.output_per_mtok
            + u.cached_input_tokens as f64 * self.cached_input_per_mtok)
            / 1_000_000.0
    }
}

/// What a model's tokens cost: prices per model name, for the agents that report
/// tokens but no money (Codex, Gemini CLI and other ACP agents). A model that is not
/// in the table has no price: its turns' cost is unknown (`None`), never 0.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PriceTable(BTreeMap<String, Pricing>);

/// List prices (US dollars per million tokens: input, cached input, output) of the
/// models the agent CLIs use by default, as published by OpenAI, Google and Anthropic
/// in late 2025 (Gemini: prompts up to 200k tokens). `[prices."<model>"]` in gaffer's
/// config overrides one or adds a model.
const LIST_PRICES: &[(&str, f64, f64, f64)] = &[
    ("gpt-5", 1.25, 0.125, 10.0),
    ("gpt-5-codex", 1.25, 0.125, 10.0),
    ("gpt-5-mini", 0.25, 0.025, 2.0),
    ("gpt-5-nano", 0.05, 0.005, 0.4),
    ("gpt-5.1", 1.25, 0.125, 10.0),
    ("gpt-5.1-codex", 1.25, 0.125, 10.0),
    ("gpt-5.1-codex-mini", 0.25, 0.025, 2.0),
    ("gpt-5.1-codex-max", 1.25, 0.125, 10.0),
    ("gpt-4.1", 2.0, 0.5, 8.0),
    ("o3", 2.0, 0.5, 8.0),
    ("o4-mini", 1.1, 0.275, 4.4),
    ("codex-mini-latest", 1.5, 0.375, 6.0),
    ("gemini-2.5-pro", 1.25, 0.125, 10.0),
    ("gemini-2.5-flash", 0.3, 0.03, 2.5),
    ("gemini-2.5-flash-lite", 0.1, 0.01, 0.4),
    ("gemini-3-pro-preview", 2.0, 0.2, 12.0),
    ("claude-sonnet-4-5", 3.0, 0.3, 15.0),
    ("claude-sonnet-4", 3.0, 0.3, 15.0),
    ("claude-opus-4-5", 5.0, 0.5, 25.0),
    ("claude-opus-4-1", 15.0, 1.5, 75.0),
    ("claude-haiku-4-5", 1.0, 0.1, 5.0),
];

impl PriceTable {
    /// The list prices of the models the agent CLIs use by default.
    pub fn list_prices() -> Self {
        Self(
            LIST_PRICES
                .iter()
                .map(|&(model, input, cached, output)| {
                    (
                        model.to_owned(),
                        Pricing {
                            input_per_mtok: input,
                            output_per_mtok: output,
                            cached_input_per_mtok: cached,
                        },
                    )
                })
                .collect(),
        )
    }

    /// This table with `prices` added, replacing the entries of the same models.
    pub fn with(mut self, prices: impl IntoIterator<Item = (String, Pricing)>) -> Self {
        self.0.extend(prices);
        self
    }

    /// The price of `model`: its own entry, else that of the model it is a dated
    /// snapshot of (`gpt-5-2025-08-07` is `gpt-5`); `None` when unknown.
    pub fn price(&self, model: &str) -> Option<&Pricing> {
        self.0.get(model).or_else(|| self.0.get(undated(model)?))
    }

    /// What `usage` cost on `model`, or `None` when the model has no price.
    pub fn cost(&self, model: &str, usage: &Usage) -> Option<f64> {
        self.price(model).map(|p| p.cost(usage))
    }
}

/// `model` without a trailing date (`-2025-08-07` or `-20250807`).
fn undated(model: &str) -> Option<&str> {
    let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
    let (head, day) = model.rsplit_once('-')?;
    if digits(day, 8) {
        return Some(head);
    }
    let (head, month) = head.rsplit_once('-')?;
    let (head, year) = head.rsplit_once('-')?;
    (digits(year, 4) && digits(month, 2) && digits(day, 2)).then_some(head)
}

/// Where a usage belongs.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct UsageKey {
    /// Step id.
    pub step: String,
    /// Task id.
    pub task: String,
    /// Role.
    pub role: String,
    /// Provider / agent (`anthropic`, `openai`, `claude_code`, ...).
    pub provider: String,
}

/// A roll-up dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dimension {
    /// Per step.
    Step,
    /// Per task.
    Task,
    /// Per role.
    Role,
    /// Per provider.
    Provider,
}

/// Usage per turn, with roll-ups.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Ledger {
    entries: Vec<(UsageKey, Usage)>,
}

impl Ledger {
    /// Record one turn's usage.
    pub fn record(&mut self, key: UsageKey, usage: Usage) {
        self.entries.push((key, usage));
    }
    /// Every recorded turn.
    pub fn entries(&self) -> &[(UsageKey, Usage)] {
        &self.entries
    }
    /// Sum of everything.
    pub fn total(&self) -> Usage {
        let mut t = Usage::default();
        for (_, u) in &self.entries {
            t += *u;
        }
        t
    }
    /// Sums per value of a dimension.
    pub fn rollup(&self, dim: Dimension) -> BTreeMap<String, Usage> {
        let mut m: BTreeMap<String, Usage> = BTreeMap::new();
        for (k, u) in &self.entries {
            let name = match dim {
                Dimension::Step => &k.step,
                Dimension::Task => &k.task,
                Dimension::Role => &k.role,
                Dimension::Provider => &k.provider,
            };
            *m.entry(name.clone()).or_default() += *u;
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(step: &str, role: &str, provider: &str) -> UsageKey {
        UsageKey {
            step: step.into(),
            task: "t1".into(),
            role: role.into(),
            provider: provider.into(),
        }
    }

    #[test]
    fn rollups() {
        let mut l = Ledger::default();
        let u = |i, o, c: f64| Usage {
            input_tokens: i,
            output_tokens: o,
            cached_input_tokens: 0,
            cost_usd: Some(c),
        };
        l.record(k("s1", "owner", "anthropic"), u(10, 1, 0.5));
        l.record(k("s1", "owner", "anthropic"), u(20, 2, 0.25));
        l.record(k("s2", "reviewer", "openai"), u(5, 5, 1.0));
        assert_eq!(l.total().input_tokens, 35);
        assert_eq!(l.total().cost_usd, Some(1.75));
        let by_step = l.rollup(Dimension::Step);
        assert_eq!(by_step["s1"].input_tokens, 30);
        assert_eq!(by_step["s1"].output_tokens, 3);
        assert_eq!(l.rollup(Dimension::Role)["reviewer"].output_tokens, 5);
        assert_eq!(l.rollup(Dimension::Provider).len(), 2);
        assert_eq!(l.rollup(Dimension::Task)["t1"].input_tokens, 35);
        let p = Pricing {
            input_per_mtok: 3.0,
            output_per_mtok: 15.0,
            cached_input_per_mtok: 0.3,
        };
        let c = p.cost(&Usage {
            input_tokens: 1_000_000,
            output_tokens: 1_000_000,
            cached_input_tokens: 1_000_000,
            cost_usd: None,
        });
        assert!((c - 18.3).abs() < 1e-9);
    }

    #[test]
    fn a_known_model_is_priced_an_unknown_one_is_not() {
        let u = Usage {
            input_tokens: 2_000_000,
            output_tokens: 1_000_000,
            cached_input_tokens: 1_000_000,
            cost_usd: None,
        };
        let t = PriceTable::list_prices();
        // 2 × 1.25 + 1 × 0.125 + 1 × 10
        assert_eq!(t.cost("gpt-5-codex", &u), Some(12.625));
        assert_eq!(t.cost("gpt-5-2025-08-07", &u), t.cost("gpt-5", &u));
        assert_eq!(
            t.cost("gpt-5-codex-20250915", &u),
            t.cost("gpt-5-codex", &u)
        );
        assert_eq!(t.cost("gemini-2.5-pro", &u), Some(12.625));
        assert_eq!(t.cost("my-local-model", &u), None);
        assert_eq!(t.cost("gpt-5-pro", &u), None, "not priced as gpt-5");
        assert_eq!(t.cost("2025-08-07", &u), None);
        let mine = Pricing {
            input_per_mtok: 1.0,
            output_per_mtok: 1.0,
            cached_input_per_mtok: 1.0,
        };
        let t = t.with([
            ("gpt-5-codex".to_owned(), mine),
            ("my-local-model".to_owned(), mine),
        ]);
        assert_eq!(t.cost("gpt-5-codex", &u), Some(4.0));
        assert_eq!(t.cost("my-local-model", &u), Some(4.0));
        assert_eq!(t.cost("gpt-5", &u), Some(12.625));
    }

    #[test]
    fn a_sum_with_an_unpriced_turn_has_no_cost() {
        let u = |tokens, cost| Usage {
            input_tokens: tokens,
            output_tokens: 0,
            cached_input_tokens: 0,
            cost_usd: cost,
        };
        let mut t = u(10, Some(0.5));
        t += u(10, None);
        assert_eq!(t.cost_usd, None, "an unpriced turn makes the total unknown");
        t += u(10, Some(0.5));
        assert_eq!(t.cost_usd, None, "and it stays unknown");
        let mut t = u(10, Some(0.5));
        t += u(0, None);
        assert_eq!(
            t.cost_usd,
            Some(0.5),
            "a turn that spent nothing costs nothing"
        );
        let mut t = u(0, None);
        t += u(10, Some(0.25));
        assert_eq!(t.cost_usd, Some(0.25));
        assert_eq!(t.input_tokens, 10);
    }
}
