//! The world's formulas and templates: one minijinja environment (strict about
//! undefined names, with fuel so nothing runs for ever), the names a formula or a
//! template reads, and what a formula's value means as a number or a condition.
//! Validation checks with it; `crate::world` evaluates with it.

use std::collections::BTreeSet;

use minijinja::{Environment, Value};

use crate::scenario::FormulaError;

/// Evaluation steps one formula or one template may take.
const FUEL: u64 = 100_000;

/// The longest template rendered, in bytes (a prompt's text).
pub const MAX_TEMPLATE_BYTES: usize = 16 * 1024;

/// The environment every world formula and template is compiled in.
pub fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
    env.set_fuel(Some(FUEL));
    env
}

/// The names a formula reads, nested (`world.fish`, `me.wallet`, `own`).
pub fn formula_names(formula: &str) -> Result<BTreeSet<String>, FormulaError> {
    let env = environment();
    let expr = super::compile_formula(&env, formula)?;
    Ok(expr.undeclared_variables(true).into_iter().collect())
}

/// Whether `text` is a template: it shows values (`{{ … }}`) or has statements.
pub fn is_template(text: &str) -> bool {
    text.contains("{{") || text.contains("{%")
}

/// The names a template reads, nested; the error says why it does not parse.
pub fn template_names(text: &str) -> Result<BTreeSet<String>, String> {
    if text.len() > MAX_TEMPLATE_BYTES {
        return Err(format!(
            "the template is {} bytes, over the {MAX_TEMPLATE_BYTES}-byte limit",
            text.len()
        ));
    }
    let env = environment();
    let template = env.template_from_str(text).map_err(|e| e.to_string())?;
    Ok(template.undeclared_variables(true).into_iter().collect())
}

/// `text` rendered with `ctx`, or the error's words.
pub fn render(text: &str, ctx: Value) -> Result<String, String> {
    if text.len() > MAX_TEMPLATE_BYTES {
        return Err("the template is too long".into());
    }
    environment()
        .render_str(text, ctx)
        .map_err(|e| e.to_string())
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

/// A formula's value as a finite number over `ctx` (JSON), or why it has none.
pub fn evaluate(formula: &str, ctx: &serde_json::Value) -> Result<f64, String> {
    let env = environment();
    let expr = super::compile_formula(&env, formula).map_err(|e| crate::error_chain::chain(&e))?;
    let value = expr
        .eval(Value::from_serialize(ctx))
        .map_err(|e| format!("cannot evaluate: {e}"))?;
    number(&value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_read_nested_and_values_as_numbers_or_conditions() {
        let names = formula_names("min(world.cap, 2 * (world.fish - sum)) + me.wallet").unwrap();
        assert!(
            names.contains("world.fish") && names.contains("me.wallet"),
            "{names:?}"
        );
        assert!(names.contains("sum"));
        let names = template_names("Fish left: {{ world.fish }}. Yours: {{ me.catch }}").unwrap();
        assert_eq!(
            names,
            BTreeSet::from(["me.catch".to_string(), "world.fish".to_string()])
        );
        assert!(template_names("{{ world.fish ").is_err());
        assert_eq!(number(&Value::from(3.5)).unwrap(), 3.5);
        assert!(number(&Value::from(f64::INFINITY))
            .unwrap_err()
            .contains("inf"));
        assert!(number(&Value::from("x")).unwrap_err().contains("string"));
        assert!(condition(&Value::from(true)).unwrap());
        assert!(!condition(&Value::from(0)).unwrap());
        assert!(condition(&Value::from("yes")).is_err());
        assert!(formula_names("{{ x }}").is_err(), "delimiters are refused");
    }
}
