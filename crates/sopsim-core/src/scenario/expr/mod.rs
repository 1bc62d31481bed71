//! The world's formulas and templates: one minijinja environment (strict about
//! undefined names, with fuel so nothing runs for ever), the names a formula or a
//! template reads, what a formula's value means as a number or a condition, and
//! rendering that counts what it writes. Every formula and template is checked by
//! [`bounds`] before minijinja compiles it, so none can make a value or write a text
//! past its limit. Validation checks with it; `crate::world` evaluates with it.

pub mod bounds;
pub mod finite;

use std::collections::BTreeSet;

use minijinja::{Environment, Value};

pub use bounds::{Leaf, Sizes};

use crate::scenario::FormulaError;

/// Evaluation steps one formula or one template may take.
const FUEL: u64 = 100_000;

/// The longest template accepted, in bytes (a prompt's text).
pub const MAX_TEMPLATE_BYTES: usize = 16 * 1024;

/// The most bytes a render writes, and a formula or template makes, unless the
/// world's `max_render_bytes` says otherwise.
pub const DEFAULT_RENDER_BYTES: u64 = 1 << 20;

/// The most `max_render_bytes` may allow.
pub const MAX_RENDER_BYTES: u64 = 64 << 20;

/// The environment every world formula and template is compiled in.
pub fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
    env.set_fuel(Some(FUEL));
    env.add_filter(finite::FILTER, |value: Value, step: &str| {
        finite::check(value, step)
    });
    env
}

/// What a name of a world formula or template holds: `world`, `me` and the counts
/// numbers by name; the moves, names and a strategy's `choice` texts; `own` a number
/// where `numeric_decisions` says the round's decisions are, else a number or a text;
/// everything else (`round`, `sum`, …) a number.
pub fn leaf(name: &str, numeric_decisions: bool) -> Leaf {
    match name {
        "world" | "me" | "counts" | "others_counts" => Leaf::Numbers,
        "own" if numeric_decisions => Leaf::Number,
        "own" => Leaf::Decision,
        "name" | "own_last" | "opponent_last" | "cooperate" | "defect" | "choice" => Leaf::Text,
        "others_last" | "options" => Leaf::Texts,
        _ => Leaf::Number,
    }
}

/// [`leaf`] for a template that shows the world (it reads no decision).
pub fn template_leaf(name: &str) -> Option<Leaf> {
    Some(leaf(name, false))
}

/// The sizes of what `scenario` gives its formulas and templates: its longest agent
/// name or option, its agents or options, and its render limit.
pub fn sizes_of(scenario: &crate::scenario::Scenario) -> Sizes {
    let options = scenario
        .sop
        .states
        .values()
        .flat_map(|s| s.components.values())
        .filter_map(|c| c.choice.as_ref());
    let mut text = scenario.agents.keys().map(String::len).max().unwrap_or(0);
    let mut items = scenario.agents.len();
    for choice in options {
        text = text.max(choice.values.iter().map(String::len).max().unwrap_or(0));
        items = items.max(choice.values.len());
    }
    Sizes {
        text: text as u64,
        items: items as u64,
        limit: render_limit(scenario),
    }
}

/// The most bytes a render of `scenario` writes.
pub fn render_limit(scenario: &crate::scenario::Scenario) -> u64 {
    scenario
        .world
        .as_ref()
        .and_then(|w| w.max_render_bytes)
        .unwrap_or(DEFAULT_RENDER_BYTES)
        .min(MAX_RENDER_BYTES)
}

/// The names a formula reads, nested (`world.fish`, `me.wallet`, `own`), once it is
/// checked against `bounded`.
pub fn formula_names(
    formula: &str,
    bounded: crate::scenario::Bounded,
) -> Result<BTreeSet<String>, FormulaError> {
    let env = environment();
    let expr = super::compile_formula(&env, formula, bounded)?;
    Ok(expr.undeclared_variables(true).into_iter().collect())
}

/// Whether `text` is a template: it shows values (`{{ … }}`) or has statements.
pub fn is_template(text: &str) -> bool {
    text.contains("{{") || text.contains("{%")
}

/// The names a template reads, nested, once it is checked against `sizes`; the error
/// says why it does not parse or what it may not do.
pub fn template_names(text: &str, sizes: Sizes) -> Result<BTreeSet<String>, String> {
    if text.len() > MAX_TEMPLATE_BYTES {
        return Err(format!(
            "the template is {} bytes, over the {MAX_TEMPLATE_BYTES}-byte limit",
            text.len()
        ));
    }
    bounds::check_template(text, &template_leaf, sizes)?;
    let env = environment();
    let template = env.template_from_str(text).map_err(|e| e.to_string())?;
    Ok(template.undeclared_variables(true).into_iter().collect())
}

/// `text` rendered with `ctx`, checked first ([`bounds::check_template`] with
/// `sizes`), writing at most `sizes.limit` bytes; the error says why it stopped.
pub fn render(text: &str, ctx: Value, sizes: Sizes) -> Result<String, String> {
    if text.len() > MAX_TEMPLATE_BYTES {
        return Err(format!(
            "the template is {} bytes, over the {MAX_TEMPLATE_BYTES}-byte limit",
            text.len()
        ));
    }
    bounds::check_template(text, &template_leaf, sizes)?;
    let env = environment();
    let template = env.template_from_str(text).map_err(|e| e.to_string())?;
    let mut out = Written {
        text: Vec::new(),
        limit: sizes.limit,
        over: false,
    };
    let rendered = template.render_captured_to(ctx, &mut out).map(|_| ());
    match rendered {
        Ok(()) => String::from_utf8(out.text).map_err(|_| "rendered text that is not UTF-8".into()),
        Err(_) if out.over => Err(format!(
            "renders more than {} bytes, the limit (`world.max_render_bytes`)",
            sizes.limit
        )),
        Err(e) => Err(crate::error_chain::chain(&e)),
    }
}

/// A render's text, refusing to grow past its limit.
struct Written {
    text: Vec<u8>,
    limit: u64,
    over: bool,
}

impl std::io::Write for Written {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if (self.text.len() + buf.len()) as u64 > self.limit {
            self.over = true;
            return Err(std::io::Error::other("the render limit"));
        }
        self.text.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Why a formula could not be evaluated: a step that is not finite is named by the
/// check that stopped it ([`finite`]), anything else as minijinja says it.
pub fn evaluation_error(e: &minijinja::Error) -> String {
    match e.detail() {
        Some(detail) if detail.ends_with(finite::NOT_FINITE) => detail.to_string(),
        _ => format!("cannot evaluate: {e}"),
    }
}

/// A formula's value as a finite number.
pub fn number(value: &Value) -> Result<f64, String> {
    match f64::try_from(value.clone()) {
        Ok(v) if v.is_finite() => Ok(v),
        Ok(v) => Err(format!("gives {v}, not a finite number")),
        Err(_) => Err(format!(
            "gives a value of type {}, not a number",
            value.kind()
        )),
    }
}

/// A formula's value as a condition: a boolean, or a number (0 is false).
pub fn condition(value: &Value) -> Result<bool, String> {
    match value.kind() {
        minijinja::value::ValueKind::Bool => Ok(value.is_true()),
        minijinja::value::ValueKind::Number => Ok(number(value)? != 0.0),
        other => Err(format!("gives a value of type {other}, not true or false")),
    }
}

/// What a name of an outcome's measure holds: the world's `final` and `initial`
/// values by name, each variable's `history`, `rounds` and `ended_early`.
pub fn measure_leaf(name: &str) -> Option<Leaf> {
    Some(match name {
        "final" | "initial" => Leaf::Numbers,
        "history" => Leaf::Series,
        "rounds" | "ended_early" => Leaf::Number,
        _ => return None,
    })
}

/// The sizes a measure over `rounds` rounds reads.
pub fn measure_sizes(rounds: u64) -> Sizes {
    Sizes {
        text: 0,
        items: rounds.max(1),
        limit: DEFAULT_RENDER_BYTES,
    }
}

/// A measure's value over `ctx` (JSON: the names of [`measure_leaf`]) as a finite
/// number, or why it has none.
pub fn evaluate_measure(
    formula: &str,
    ctx: &serde_json::Value,
    rounds: u64,
) -> Result<f64, String> {
    let env = environment();
    let bounded = crate::scenario::Bounded {
        leaf: &measure_leaf,
        sizes: measure_sizes(rounds),
    };
    let expr = super::compile_formula(&env, formula, bounded)
        .map_err(|e| crate::error_chain::chain(&e))?;
    let value = expr
        .eval(Value::from_serialize(ctx))
        .map_err(|e| evaluation_error(&e))?;
    number(&value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_read_nested_and_values_as_numbers_or_conditions() {
        let numbers = |_: &str| Some(Leaf::Number);
        let bounded = crate::scenario::Bounded {
            leaf: &numbers,
            sizes: Sizes::default(),
        };
        let names = formula_names(
            "[world.cap, 2 * (world.fish - sum)] | min + me.wallet",
            bounded,
        )
        .unwrap();
        assert!(
            names.contains("world.fish") && names.contains("me.wallet"),
            "{names:?}"
        );
        assert!(names.contains("sum"));
        let names = template_names(
            "Fish left: {{ world.fish }}. Yours: {{ me.catch }}",
            Sizes::default(),
        )
        .unwrap();
        assert_eq!(
            names,
            BTreeSet::from(["me.catch".to_string(), "world.fish".to_string()])
        );
        assert!(template_names("{{ world.fish ", Sizes::default()).is_err());
        assert_eq!(number(&Value::from(3.5)).unwrap(), 3.5);
        assert!(number(&Value::from(f64::INFINITY))
            .unwrap_err()
            .contains("inf"));
        assert!(number(&Value::from("x")).unwrap_err().contains("string"));
        assert!(condition(&Value::from(true)).unwrap());
        assert!(!condition(&Value::from(0)).unwrap());
        assert!(condition(&Value::from("yes")).is_err());
        assert!(
            formula_names("{{ x }}", bounded).is_err(),
            "delimiters are refused"
        );
    }
}
