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
}
