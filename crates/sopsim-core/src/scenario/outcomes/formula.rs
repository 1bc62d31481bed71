//! Payoff formulas: a minijinja expression over one player's decision and everyone's,
//! evaluated with a fuel limit so no formula can run for ever.

use indexmap::IndexMap;
use serde::Serialize;
use thiserror::Error;

use crate::scenario::expr::{bounds, finite, Leaf, Sizes, DEFAULT_RENDER_BYTES};

/// The names a payoff formula may use.
pub(super) const FORMULA_NAMES: &[&str] = &[
    "own",
    "sum",
    "mean",
    "min",
    "max",
    "n",
    "others_sum",
    "others_mean",
    "counts",
    "round",
];

/// The variables a payoff formula sees for one player in one round.
#[derive(Debug, Clone, Serialize)]
pub struct FormulaInputs {
    own: serde_json::Value,
    n: usize,
    round: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    sum: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mean: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    min: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    others_sum: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    others_mean: Option<f64>,
    counts: IndexMap<String, usize>,
}

impl FormulaInputs {
    /// `own` among the numeric decisions `all` (which include it once).
    pub fn numeric(own: f64, all: &[f64], round: usize) -> Self {
        let n = all.len();
        let sum: f64 = all.iter().sum();
        let others = n.saturating_sub(1);
        Self {
            own: own.into(),
            n,
            round,
            sum: Some(sum),
            mean: Some(sum / n as f64),
            min: all.iter().copied().reduce(f64::min),
            max: all.iter().copied().reduce(f64::max),
            others_sum: Some(sum - own),
            others_mean: (others > 0).then(|| (sum - own) / others as f64),
            counts: IndexMap::new(),
        }
    }

    /// `own` among the choices `all`; `counts` has every one of `values`, chosen or not.
    pub fn choices(own: &str, all: &[String], values: &[String], round: usize) -> Self {
        let mut counts: IndexMap<String, usize> = values.iter().map(|v| (v.clone(), 0)).collect();
        for c in all {
            *counts.entry(c.clone()).or_insert(0) += 1;
        }
        Self {
            own: own.into(),
            n: all.len(),
            round,
            sum: None,
            mean: None,
            min: None,
            max: None,
            others_sum: None,
            others_mean: None,
            counts,
        }
    }
}

impl FormulaInputs {
    /// What each name holds: `own` a number for numeric decisions, else a text.
    pub fn leaf(&self, name: &str) -> Option<Leaf> {
        Some(match name {
            "own" if self.own.is_number() => Leaf::Number,
            "own" => Leaf::Text,
            "counts" => Leaf::Numbers,
            n if FORMULA_NAMES.contains(&n) => Leaf::Number,
            _ => return None,
        })
    }

    /// The sizes of its texts and lists.
    pub fn sizes(&self) -> Sizes {
        let own = self.own.as_str().map_or(0, str::len);
        let keys = self.counts.keys().map(String::len).max().unwrap_or(0);
        Sizes {
            text: own.max(keys) as u64,
            items: self.counts.len().max(self.n) as u64,
            limit: DEFAULT_RENDER_BYTES,
        }
    }
}

/// Longest formula accepted, in bytes.
pub(super) const MAX_FORMULA_BYTES: usize = 4096;

/// What is wrong with a payoff formula.
#[derive(Debug, Error)]
pub enum FormulaError {
    /// The formula is longer than allowed; its length in bytes.
    #[error("the formula is {0} bytes, over the {MAX_FORMULA_BYTES}-byte limit")]
    TooLong(usize),
    /// The formula holds template delimiters.
    #[error("template delimiters ({{{{ }}}} {{% %}} {{# #}}) have no place in a formula")]
    Delimiter,
    /// The formula is not a valid expression.
    #[error("not a valid expression")]
    Syntax(#[source] minijinja::Error),
    /// It uses what a formula may not, or can make a value past the limit.
    #[error("{0}")]
    Bounds(String),
    /// The formula fails when evaluated.
    #[error("cannot evaluate")]
    Eval(#[source] minijinja::Error),
    /// The formula's value is not a finite number; that value, or its kind.
    #[error("gives {0}, not a finite number")]
    NotANumber(String),
}

/// What a formula's names hold and the most a value it makes may hold: it is checked
/// against them ([`crate::scenario::expr::bounds`]) before minijinja compiles it.
#[derive(Clone, Copy)]
pub struct Bounded<'a> {
    /// What each name the formula reads holds (`None`: an unknown name).
    pub leaf: &'a dyn Fn(&str) -> Option<Leaf>,
    /// The sizes of what the names hold, and the most a made value may hold.
    pub sizes: Sizes,
}

/// Compiles a formula in `env` (one made by [`crate::scenario::expr::environment`],
/// which checks that each arithmetic step is finite), refusing what is too long to
/// parse safely, the template delimiters that make minijinja 2.24's expression lexer
/// panic ("empty lexer stack", found by fuzzing), and what can make a value past
/// `bounded`'s limit.
pub fn compile_formula<'e>(
    env: &'e minijinja::Environment<'e>,
    formula: &'e str,
    bounded: Bounded,
) -> Result<minijinja::Expression<'e, 'e>, FormulaError> {
    if formula.len() > MAX_FORMULA_BYTES {
        return Err(FormulaError::TooLong(formula.len()));
    }
    if ["{{", "}}", "{%", "%}", "{#", "#}"]
        .iter()
        .any(|d| formula.contains(d))
    {
        return Err(FormulaError::Delimiter);
    }
    minijinja::machinery::parse_expr(formula).map_err(FormulaError::Syntax)?;
    bounds::check_formula(formula, bounded.leaf, bounded.sizes).map_err(FormulaError::Bounds)?;
    match finite::watched(formula) {
        Some(watched) => env.compile_expression_owned(watched),
        None => env.compile_expression(formula),
    }
    .map_err(FormulaError::Syntax)
}

/// One player's payoff from a formula.
pub fn evaluate_formula(formula: &str, inputs: &FormulaInputs) -> Result<f64, FormulaError> {
    let env = crate::scenario::expr::environment();
    let leaf = |name: &str| inputs.leaf(name);
    let bounded = Bounded {
        leaf: &leaf,
        sizes: inputs.sizes(),
    };
    let expr = compile_formula(&env, formula, bounded)?;
    let value = expr
        .eval(minijinja::Value::from_serialize(inputs))
        .map_err(FormulaError::Eval)?;
    match f64::try_from(value.clone()) {
        Ok(v) if v.is_finite() => Ok(v),
        Ok(v) => Err(FormulaError::NotANumber(v.to_string())),
        // Named by kind: rendering a billion-item list would take as long as building it.
        Err(_) => Err(FormulaError::NotANumber(format!(
            "a value of type {}",
            value.kind()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deep_or_endless_formulas_fail_cleanly() {
        let inputs = FormulaInputs::numeric(1.0, &[1.0, 2.0], 1);
        assert_eq!(evaluate_formula("own * 2 + sum", &inputs).unwrap(), 5.0);
        let deep = format!("{}1{}", "(".repeat(3000), ")".repeat(3000));
        assert!(matches!(
            evaluate_formula(&deep, &inputs),
            Err(FormulaError::TooLong(_))
        ));
        let nested = format!("{}1{}", "(".repeat(1000), ")".repeat(1000));
        assert!(evaluate_formula(&nested, &inputs).is_err());
        // Chains as long as the size limit allows fail or finish, never overflow the stack.
        let minus = "-".repeat(MAX_FORMULA_BYTES - 3) + "own";
        let _ = evaluate_formula(&minus, &inputs);
        let nots = "not ".repeat(MAX_FORMULA_BYTES / 4 - 1) + "own";
        let _ = evaluate_formula(&nots, &inputs);
        let filters = "own".to_string() + &"|abs".repeat(MAX_FORMULA_BYTES / 4 - 1);
        assert!(matches!(
            evaluate_formula(&filters, &inputs),
            Err(FormulaError::Bounds(_))
        ));
        let terms = "own".to_string() + &"+own".repeat(MAX_FORMULA_BYTES / 4 - 1);
        let _ = evaluate_formula(&terms, &inputs);
        // Huge strings and ranges are refused rather than allocated; a repeated list is
        // lazy, and is reported by kind rather than rendered.
        assert!(matches!(
            evaluate_formula("('x' * 1000000000) | length", &inputs),
            Err(FormulaError::Bounds(_))
        ));
        assert!(matches!(
            evaluate_formula("range(1000000000) | length", &inputs),
            Err(FormulaError::Eval(_))
        ));
        assert_eq!(
            evaluate_formula("([own] * 1000000000) | length", &inputs).unwrap(),
            1e9
        );
        let e = evaluate_formula("[own] * 1000000000", &inputs).unwrap_err();
        assert_eq!(
            e.to_string(),
            "gives a value of type iterator, not a finite number"
        );
        // Found by fuzzing: a closing delimiter panicked minijinja's lexer.
        for delimited in [
            "10 - own + 1.6 }}* sum / n",
            "own %} 1",
            "{{ own }}",
            "own #}",
        ] {
            assert!(
                matches!(
                    evaluate_formula(delimited, &inputs),
                    Err(FormulaError::Delimiter)
                ),
                "{delimited}"
            );
        }
        assert!(matches!(
            evaluate_formula("'x'", &inputs),
            Err(FormulaError::NotANumber(_))
        ));
    }
}
