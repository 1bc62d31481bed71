//! Compiling the `payoff` rule: a table checked for every joint decision of the
//! players (within a limit on its rows), or a formula tried on every choice.

use indexmap::IndexMap;

use super::super::formula::{
    compile_formula, evaluate_formula, Bounded, FormulaInputs, FORMULA_NAMES,
};
use super::super::*;
use crate::scenario::path::FieldPath;

/// Joint choice tables grow as values^players; beyond this the file is unreadable anyway.
const MAX_TABLE_ROWS: usize = 4096;

/// The `payoff` rule compiled for `players`: its table checked for every joint
/// decision, or its formula tried on each; problems are reported with their field.
pub(super) fn compile_payoff(
    p: &Payoff,
    outcomes: &Outcomes,
    players: &[String],
    path: &FieldPath,
    problems: &mut Vec<(FieldPath, String)>,
) -> Option<CompiledPayoff> {
    let Some(decision) = &outcomes.decision else {
        problems.push((path.clone(), "a payoff needs a decision to pay for".into()));
        return None;
    };
    if p.pairwise && p.table.is_empty() {
        problems.push((
            path.key("pairwise"),
            "pairwise games need a two-player table".into(),
        ));
        return None;
    }
    let pair = ["player".to_string(), "neighbour".to_string()];
    let players = if p.pairwise { &pair[..] } else { players };
    match (p.table.is_empty(), &p.formula) {
        (false, Some(_)) | (true, None) => {
            problems.push((path.clone(), "give exactly one of table and formula".into()));
            None
        }
        (true, Some(formula)) => {
            // A trial evaluation catches unknown names and non-numbers before any run.
            let trial = if decision.values.is_empty() {
                FormulaInputs::numeric(1.0, &[1.0, 2.0], 1)
            } else {
                let values: Vec<String> = decision.values.iter().map(|v| choice_key(v)).collect();
                FormulaInputs::choices(&values[0], &values[..1], &values, 1)
            };
            let env = crate::scenario::expr::environment();
            let leaf = |name: &str| trial.leaf(name);
            let bounded = Bounded {
                leaf: &leaf,
                sizes: trial.sizes(),
            };
            if let Ok(expr) = compile_formula(&env, formula, bounded) {
                let mut unknown: Vec<String> = expr
                    .undeclared_variables(false)
                    .into_iter()
                    .filter(|v| !FORMULA_NAMES.contains(&v.as_str()))
                    .collect();
                if !unknown.is_empty() {
                    unknown.sort();
                    problems.push((
                        path.key("formula"),
                        format!(
                            "unknown name(s) {} (known: {})",
                            unknown.join(", "),
                            FORMULA_NAMES.join(", ")
                        ),
                    ));
                    return None;
                }
            }
            match evaluate_formula(formula, &trial) {
                Ok(_) => Some(CompiledPayoff::Formula(formula.clone())),
                Err(e) => {
                    problems.push((path.key("formula"), crate::error_chain::chain(&e)));
                    None
                }
            }
        }
        (false, None) => {
            if decision.values.is_empty() {
                problems.push((
                    path.key("table"),
                    "a table needs choice decisions (decision.values); use formula for numbers"
                        .into(),
                ));
                return None;
            }
            let values: Vec<String> = decision.values.iter().map(|v| choice_key(v)).collect();
            let rows = values
                .len()
                .checked_pow(players.len() as u32)
                .unwrap_or(usize::MAX);
            if rows > MAX_TABLE_ROWS {
                problems.push((
                    path.key("table"),
                    format!(
                        "{} values over {} players make {rows} combinations; use formula",
                        values.len(),
                        players.len()
                    ),
                ));
                return None;
            }
            let mut table = IndexMap::new();
            for (key, pay) in &p.table {
                let parts: Vec<String> = key.split(',').map(choice_key).collect();
                let kpath = path.key("table").key(key);
                if parts.len() != players.len() {
                    problems.push((
                        kpath,
                        format!(
                            "names {} decisions; there are {} players ({})",
                            parts.len(),
                            players.len(),
                            players.join(", ")
                        ),
                    ));
                    continue;
                }
                if let Some(bad) = parts.iter().find(|c| !values.contains(c)) {
                    problems.push((
                        kpath,
                        format!(
                            "{bad:?} is not one of decision.values ({})",
                            decision.values.join(", ")
                        ),
                    ));
                    continue;
                }
                if pay.len() != players.len() {
                    problems.push((
                        kpath,
                        format!("{} payoffs for {} players", pay.len(), players.len()),
                    ));
                    continue;
                }
                table.insert(parts.join(","), pay.clone());
            }
            let missing: Vec<String> = joint_keys(&values, players.len())
                .into_iter()
                .filter(|k| !table.contains_key(k))
                .collect();
            if !missing.is_empty() && problems.is_empty() {
                problems.push((
                    path.key("table"),
                    format!("missing combinations: {}", missing.join("; ")),
                ));
            }
            Some(CompiledPayoff::Table(table))
        }
    }
}

/// Every joint decision, as table keys.
fn joint_keys(values: &[String], players: usize) -> Vec<String> {
    let mut keys = vec![String::new()];
    for i in 0..players {
        keys = keys
            .iter()
            .flat_map(|k| {
                values.iter().map(move |v| {
                    if i == 0 {
                        v.clone()
                    } else {
                        format!("{k},{v}")
                    }
                })
            })
            .collect();
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joint_keys_cover_every_combination_in_player_order() {
        let v = ["C".to_string(), "D".to_string()];
        assert_eq!(joint_keys(&v, 2), ["C,C", "C,D", "D,C", "D,D"]);
        assert_eq!(joint_keys(&v, 1), ["C", "D"]);
    }
}
