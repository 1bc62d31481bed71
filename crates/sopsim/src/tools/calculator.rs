//! The `calculator` tool: an arithmetic expression evaluated by `evalexpr`, with every
//! number read as a float so that `7 / 2` is 3.5, as a person expects of a calculator.

use serde_json::{json, Map, Value};

use sopsim_core::scenario::tool_settings::CalculatorSettings;

use super::kind::{Computed, Kind, Start};
use super::{Setup, ToolFailure, ToolSetupError};

/// Longest expression accepted; deeper nesting than `MAX_DEPTH` is refused too, so a
/// hostile expression cannot exhaust the parser's stack.
const MAX_CHARS: usize = 500;
const MAX_DEPTH: usize = 64;

/// The JSON schema of the tool's arguments: one `expression`.
pub fn parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "expression": {
                "type": "string",
                "description": "Arithmetic, e.g. (19.99 * 3) * 0.9; + - * / % ^ and math::sqrt(x)",
                "maxLength": MAX_CHARS,
            }
        },
        "required": ["expression"],
        "additionalProperties": false,
    })
}

impl Start for CalculatorSettings {
    async fn start(self, _: &mut Setup<'_>) -> Result<Box<dyn Kind>, ToolSetupError> {
        Ok(Box::new(Computed {
            parameters,
            run: |args, _| run(args),
            message: "{expression} = {value}",
        }))
    }
}

/// The value of `expression`, as a result object `{expression, value}`.
pub fn run(args: &Map<String, Value>) -> Result<Map<String, Value>, ToolFailure> {
    let expression = args
        .get("expression")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let value = evaluate(expression)?;
    let mut obj = Map::new();
    obj.insert("expression".into(), expression.into());
    obj.insert("value".into(), json_number(value));
    Ok(obj)
}

/// The finite value of `expression`, every number read as a float; an empty, overlong
/// or too deeply nested expression is refused.
pub fn evaluate(expression: &str) -> Result<f64, ToolFailure> {
    if expression.trim().is_empty() {
        return Err(ToolFailure::avoidable("the expression is empty"));
    }
    if expression.chars().count() > MAX_CHARS {
        return Err(ToolFailure::avoidable(format!(
            "the expression is longer than {MAX_CHARS} characters"
        )));
    }
    let mut depth = 0usize;
    for c in expression.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ => {}
        }
        if depth > MAX_DEPTH {
            return Err(ToolFailure::avoidable(format!(
                "parentheses nest deeper than {MAX_DEPTH}"
            )));
        }
    }
    let context =
        evalexpr::EmptyContextWithBuiltinFunctions::<evalexpr::DefaultNumericTypes>::default();
    let value = evalexpr::eval_with_context(&floats(expression), &context)
        .map_err(|e| ToolFailure::avoidable(format!("{expression:?} is not arithmetic: {e}")))?;
    let n = value.as_number().map_err(|_| {
        ToolFailure::avoidable(format!("{expression:?} is not a number but {value}"))
    })?;
    if n.is_finite() {
        Ok(n)
    } else {
        Err(ToolFailure::avoidable(format!(
            "{expression:?} has no finite value ({n})"
        )))
    }
}

/// Integer literals written as floats (`7` → `7.0`), leaving identifiers alone.
fn floats(expression: &str) -> String {
    let chars: Vec<char> = expression.chars().collect();
    let mut out = String::with_capacity(expression.len() + 8);
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let after_ident = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        if c.is_ascii_digit() && !after_ident {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                i += 1;
            }
            let literal: String = chars[start..i].iter().collect();
            out.push_str(&literal);
            let exponent = i < chars.len() && matches!(chars[i], 'e' | 'E');
            if !literal.contains('.') && !exponent {
                out.push_str(".0");
            }
            continue;
        }
        out.push(c);
        i += 1;
    }
    out
}

/// A whole number as a JSON integer, anything else as a float.
pub fn json_number(n: f64) -> Value {
    if n.fract() == 0.0 && n.abs() < 9.0e15 {
        json!(n as i64)
    } else {
        json!(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_reads_numbers_as_a_calculator_does() {
        assert_eq!(evaluate("7 / 2").unwrap(), 3.5);
        assert_eq!(evaluate("(19.99 * 3) * 0.9").unwrap(), 53.973);
        assert_eq!(evaluate("2 ^ 10").unwrap(), 1024.0);
        assert_eq!(evaluate("math::sqrt(16)").unwrap(), 4.0);
        assert_eq!(evaluate("1e3 + 1").unwrap(), 1001.0);
    }

    #[test]
    fn bad_expressions_are_errors_the_model_can_fix() {
        for bad in ["", "2 +", "x + 1", "1 / 0", "\"a\"", &"(".repeat(100)] {
            let e = evaluate(bad).unwrap_err();
            assert!(e.avoidable, "{bad}: {e:?}");
        }
    }
}
