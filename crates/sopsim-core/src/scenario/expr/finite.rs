//! Arithmetic that must stay finite. A division by zero or an overflow gives
//! infinity, and a comparison, `min`, `max` or a test then turns it into an ordinary
//! answer: `world.fish / 0 > 5` is true. So every arithmetic step of a formula is
//! watched where it is taken: the formula is compiled with each step wrapped in the
//! `finite` check ([`FILTER`]), which stops the evaluation naming the step and the
//! value. A step in a branch not taken is never checked, so `x / n if n else 0`
//! stays fine when `n` is 0.

use minijinja::machinery::ast::{BinOpKind, CallArg, Expr, UnaryOpKind};
use minijinja::value::Value;
use minijinja::{Error, ErrorKind};

/// The filter that checks one step; the environment registers it, and a
/// scenario's own formulas cannot name it (it is not among [`super::bounds::FILTERS`]).
pub const FILTER: &str = "__finite";

/// How the check's error ends.
pub const NOT_FINITE: &str = "not a finite number";

/// `value` if it is not a non-finite number; `step` is the formula's text of the step.
pub fn check(value: Value, step: &str) -> Result<Value, Error> {
    match f64::try_from(value.clone()) {
        Ok(x) if !x.is_finite() && value.kind() == minijinja::value::ValueKind::Number => {
            Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("`{step}` gives {x}, {NOT_FINITE}"),
            ))
        }
        _ => Ok(value),
    }
}

/// `formula` with every arithmetic step wrapped in the check; `None` when it does not
/// parse (compiling it as written then says why).
pub fn watched(formula: &str) -> Option<String> {
    let expr = minijinja::machinery::parse_expr(formula).ok()?;
    let mut steps = Vec::new();
    collect(&expr, &mut steps);
    if steps.is_empty() {
        return Some(formula.to_string());
    }
    // Opening brackets at each step's start, checks at its end; at one offset, ends
    // come before starts, and the steps that end there close innermost (latest
    // starting) first. Brackets opening at one offset are all alike.
    let mut edits: Vec<(usize, u8, usize, String)> = Vec::new();
    for (start, end) in steps {
        let text = formula.get(start..end)?;
        edits.push((start, 1, 0, "(".into()));
        edits.push((end, 0, start, format!(")|{FILTER}({})", literal(text))));
    }
    edits.sort_by_key(|e| (e.0, e.1, std::cmp::Reverse(e.2)));
    let mut out = String::with_capacity(formula.len() * 2);
    let mut at = 0;
    for (offset, _, _, text) in edits {
        out.push_str(formula.get(at..offset)?);
        out.push_str(&text);
        at = offset;
    }
    out.push_str(formula.get(at..)?);
    Some(out)
}

/// A string literal of `text`.
fn literal(text: &str) -> String {
    let mut out = String::from('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The spans of the arithmetic steps in `expr`, as byte offsets.
fn collect(expr: &Expr, out: &mut Vec<(usize, usize)>) {
    let span = |e: &Expr| {
        let s = e.span();
        (s.start_offset as usize, s.end_offset as usize)
    };
    match expr {
        Expr::Var(_) | Expr::Const(_) => {}
        Expr::Slice(s) => {
            collect(&s.expr, out);
            for e in [&s.start, &s.stop, &s.step].into_iter().flatten() {
                collect(e, out);
            }
        }
        Expr::UnaryOp(u) => {
            collect(&u.expr, out);
            if matches!(u.op, UnaryOpKind::Neg) {
                out.push(span(expr));
            }
        }
        Expr::BinOp(b) => {
            collect(&b.left, out);
            collect(&b.right, out);
            if matches!(
                b.op,
                BinOpKind::Add
                    | BinOpKind::Sub
                    | BinOpKind::Mul
                    | BinOpKind::Div
                    | BinOpKind::FloorDiv
                    | BinOpKind::Rem
                    | BinOpKind::Pow
            ) {
                out.push(span(expr));
            }
        }
        Expr::Compare(c) => {
            collect(&c.expr, out);
            for op in &c.ops {
                collect(&op.expr, out);
            }
        }
        Expr::IfExpr(i) => {
            collect(&i.test_expr, out);
            collect(&i.true_expr, out);
            if let Some(e) = &i.false_expr {
                collect(e, out);
            }
        }
        Expr::Filter(f) => {
            if let Some(e) = &f.expr {
                collect(e, out);
            }
            // A filter's span is its own name, not what it filters: filters are not
            // wrapped (the numbers they give come from steps that are).
            args(&f.args, out);
        }
        Expr::Test(t) => {
            collect(&t.expr, out);
            args(&t.args, out);
        }
        Expr::GetAttr(g) => collect(&g.expr, out),
        Expr::GetItem(g) => {
            collect(&g.expr, out);
            collect(&g.subscript_expr, out);
        }
        Expr::Call(c) => {
            collect(&c.expr, out);
            args(&c.args, out);
        }
        Expr::List(l) => l.items.iter().for_each(|e| collect(e, out)),
        Expr::Map(m) => m.keys.iter().chain(&m.values).for_each(|e| collect(e, out)),
    }
}

fn args(args: &[CallArg], out: &mut Vec<(usize, usize)>) {
    for arg in args {
        match arg {
            CallArg::Pos(e)
            | CallArg::Kwarg(_, e)
            | CallArg::PosSplat(e)
            | CallArg::KwargSplat(e) => collect(e, out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(formula: &str) -> Result<Value, String> {
        let env = super::super::environment();
        let watched = watched(formula).unwrap();
        let expr = env
            .compile_expression(&watched)
            .map_err(|e| e.to_string())?;
        expr.eval(minijinja::context! { n => 0, x => 10, s => "ab" })
            .map_err(|e| crate::error_chain::chain(&e))
    }

    #[test]
    fn an_infinite_step_is_an_error_even_where_a_comparison_would_hide_it() {
        let e = eval("(x / n) > 5").unwrap_err();
        assert!(e.contains("`x / n` gives inf, not a finite number"), "{e}");
        assert!(eval("[x / n, 1] | min").is_err());
        assert!(eval("-(10.0 ** 400) < 0")
            .unwrap_err()
            .contains("10.0 ** 400"));
        assert!(eval("not (x * 1e308 * 10)").is_err());
        // A branch not taken is not checked; texts and lists pass as they are.
        assert_eq!(eval("x / n if n else 0").unwrap(), Value::from(0));
        assert_eq!(eval("s * 2 ~ 'c'").unwrap(), Value::from("ababc"));
        assert_eq!(eval("([1] + [2]) | length").unwrap(), Value::from(2));
        assert_eq!(eval("2 * (x - 3) / 7 + 1").unwrap(), Value::from(3.0));
        assert_eq!(eval("[x, 2] | sum / 4 / 3").unwrap(), Value::from(1.0));
        assert_eq!(eval("x * 2 + n * x").unwrap(), Value::from(20));
        // Quotes and backslashes in a step are kept in its name.
        let e = eval("(x / n if 'a\"b' else 1) * 1").unwrap_err();
        assert!(e.contains("x / n"), "{e}");
    }
}
