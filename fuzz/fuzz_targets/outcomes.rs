//! The outcomes section: its first line is a payoff formula evaluated directly; the
//! rest, as JSON, replaces the `outcomes` of the prisoner's dilemma, which is then
//! validated (patterns, tables, formulas, scores and the report list compiled).
#![no_main]

use std::path::Path;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use sopsim::fuzzing::from_document;
use sopsim::scenario::{evaluate_formula, FormulaInputs};

fn base() -> &'static Value {
    static BASE: OnceLock<Value> = OnceLock::new();
    BASE.get_or_init(|| {
        let text = include_str!("../../scenarios/prisoners_dilemma.json");
        serde_json::from_str(text).expect("the shipped scenario is JSON")
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let (formula, section) = text.split_once('\n').unwrap_or((text, ""));
    let numeric = FormulaInputs::numeric(2.0, &[2.0, 5.0, 0.5], 3);
    let _ = evaluate_formula(formula, &numeric);
    let values = ["COOPERATE".to_string(), "DEFECT".to_string()];
    let chosen = [values[0].clone(), values[1].clone()];
    let choices = FormulaInputs::choices(&values[0], &chosen, &values, 1);
    let _ = evaluate_formula(formula, &choices);
    let Ok(section) = sopsim::fuzzing::parse(section) else { return };
    let mut doc = base().clone();
    doc["outcomes"] = section;
    let _ = from_document(Path::new("fuzz.json"), doc);
});
