//! What a run's tokens cost: a price table (built in, overridable with a file) applied
//! to the ledger's tokens by model. A model without a price makes the cost unknown
//! (`null`), never $0; local and scripted models cost nothing.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::Ledger;

/// US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Dollars per million prompt tokens.
    pub input: f64,
    /// Dollars per million generated tokens.
    pub output: f64,
}

/// Prices by model name; a dated snapshot (`gpt-4o-mini-2024-07-18`) takes the price of
/// the longest listed name it starts with.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PriceTable(BTreeMap<String, Price>);

/// The largest price file read.
const MAX_PRICE_FILE_BYTES: u64 = 1024 * 1024;

/// OpenAI's list prices for common models (USD per 1M tokens, standard tier); a price
/// file overrides or extends them.
const BUILT_IN: &[(&str, f64, f64)] = &[
    ("gpt-4o-mini", 0.15, 0.60),
    ("gpt-4o", 2.50, 10.00),
    ("gpt-4.1", 2.00, 8.00),
    ("gpt-4.1-mini", 0.40, 1.60),
    ("gpt-4.1-nano", 0.10, 0.40),
    ("gpt-3.5-turbo", 0.50, 1.50),
    ("o4-mini", 1.10, 4.40),
];

/// A price file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PriceError {
    /// The file cannot be read.
    #[error("cannot read it")]
    Read(#[source] std::io::Error),
    /// The file is not a JSON object of prices by model name.
    #[error("expected {{\"model\": {{\"input\": USD per 1M tokens, \"output\": …}}}}")]
    Json(#[source] serde_json::Error),
    /// A model's price (named here) is negative or not a number.
    #[error("{0}: prices must be zero or more")]
    Negative(String),
}

impl PriceTable {
    /// OpenAI's list prices for common models (USD per 1M tokens, standard tier).
    pub fn built_in() -> Self {
        Self(
            BUILT_IN
                .iter()
                .map(|(m, i, o)| {
                    (
                        m.to_string(),
                        Price {
                            input: *i,
                            output: *o,
                        },
                    )
                })
                .collect(),
        )
    }

    /// The built-in table with a JSON file's entries (`{"model": {"input": 0.1, "output": 0.4}}`) on top.
    pub fn with_file(path: &Path) -> Result<Self, PriceError> {
        let text = sopsim_core::files::read_text_bounded(path, MAX_PRICE_FILE_BYTES)
            .map_err(PriceError::Read)?;
        Self::with_json(&text)
    }

    /// [`PriceTable::with_file`] for the file's text.
    pub fn with_json(text: &str) -> Result<Self, PriceError> {
        let extra: BTreeMap<String, Price> = sopsim_core::user_json::parse(text)
            .and_then(serde_json::from_value)
            .map_err(PriceError::Json)?;
        if let Some((m, _)) = extra
            .iter()
            .find(|(_, p)| !(p.input >= 0.0 && p.output >= 0.0))
        {
            return Err(PriceError::Negative(m.clone()));
        }
        let mut table = Self::built_in();
        table.0.extend(extra);
        Ok(table)
    }

    /// The price of `model`, by the longest listed name it starts with (`None` if none
    /// fits); local and scripted models cost nothing.
    pub fn price(&self, model: &str) -> Option<Price> {
        if model == "scripted" || model.starts_with("local:") {
            return Some(Price {
                input: 0.0,
                output: 0.0,
            });
        }
        self.0
            .iter()
            .filter(|(name, _)| model.starts_with(name.as_str()))
            .max_by_key(|(name, _)| name.len())
            .map(|(_, p)| *p)
    }

    /// The ledger's cost; `None` if any model that was used has no price.
    pub fn cost(&self, ledger: &Ledger) -> Cost {
        let mut total = Some(0.0);
        let mut by_model = BTreeMap::new();
        for (model, usage) in &ledger.by_model {
            let usd = self.price(model).map(|p| {
                (usage.prompt_tokens as f64 * p.input + usage.completion_tokens as f64 * p.output)
                    / 1e6
            });
            total = total.zip(usd).map(|(a, b)| a + b);
            by_model.insert(model.clone(), usd);
        }
        Cost {
            usd: total,
            by_model,
        }
    }
}

/// A run's cost in US dollars.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cost {
    /// `null` when some model's price is unknown.
    pub usd: Option<f64>,
    /// The cost of each model used, `null` where its price is unknown.
    pub by_model: BTreeMap<String, Option<f64>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::KindUsage;

    #[test]
    fn costs_by_model_with_unknown_models_null() {
        let table = PriceTable::built_in();
        assert_eq!(
            table.price("gpt-4o-mini-2024-07-18"),
            Some(Price {
                input: 0.15,
                output: 0.60
            }),
            "snapshot names"
        );
        assert_eq!(
            table.price("gpt-4o-2024-08-06").unwrap().input,
            2.50,
            "the longest prefix wins"
        );
        assert_eq!(table.price("local:SmolLM2.gguf").unwrap().input, 0.0);
        let mut ledger = Ledger::default();
        ledger.by_model.insert(
            "gpt-4o-mini".into(),
            KindUsage {
                calls: 1,
                prompt_tokens: 1_000_000,
                completion_tokens: 500_000,
                ..KindUsage::default()
            },
        );
        assert!((table.cost(&ledger).usd.unwrap() - 0.45).abs() < 1e-12);
        ledger.by_model.insert(
            "my-finetune".into(),
            KindUsage {
                calls: 1,
                prompt_tokens: 10,
                completion_tokens: 10,
                ..KindUsage::default()
            },
        );
        let cost = table.cost(&ledger);
        assert_eq!(
            cost.usd, None,
            "an unknown model makes the total unknown, not $0"
        );
        assert_eq!(cost.by_model["my-finetune"], None);
    }
}
