//! How large a value a formula or template can make, read off its syntax before it
//! runs. minijinja's fuel bounds the steps a formula takes, not the size of what one
//! step makes: `'x' * 100000000` is one step, and a few `~` of it exhaust the memory.
//!
//! The check walks the parsed syntax (before minijinja compiles it, since compiling
//! folds constant expressions and would make the value itself) and gives every
//! expression the most bytes its value can hold, from the sizes of the names it reads
//! ([`Leaf`], [`Sizes`]). A value made in memory (a joined, repeated or concatenated
//! text, a list) larger than the limit is refused, quoting the expression. A template
//! may show values, branch and loop, nothing else: `set`, macros, `call`, `filter`
//! blocks, `include`, `import` and inheritance are refused, so no value is built up
//! step by step and nothing renders into a buffer of its own. What loops write is
//! counted as it is written ([`super::render`]).

use minijinja::machinery::ast::{self, BinOpKind, CallArg, Expr, Stmt, UnaryOpKind};
use minijinja::machinery::{parse, parse_expr, WhitespaceConfig};
use minijinja::syntax::SyntaxConfig;
use minijinja::value::{Value, ValueKind};

/// What a name that a formula or template reads holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leaf {
    /// A number: `round`, `sum`, a decision in a state whose options are numbers.
    Number,
    /// A text: an agent's name, an option, a strategy's move.
    Text,
    /// A number or a text: a decision among options that are not all numbers.
    Decision,
    /// Numbers by name: `world`, `me`, `counts`.
    Numbers,
    /// Texts in a list: `others_last`, `options`.
    Texts,
    /// Lists of numbers by name: a measure's `history`.
    Series,
}

/// The sizes of what a scenario gives its formulas, and the most a made value may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizes {
    /// The longest text a name holds, in bytes (the longest option or agent name).
    pub text: u64,
    /// The most items a list or map a name holds has (the agents, the options).
    pub items: u64,
    /// The most bytes one made value may hold.
    pub limit: u64,
}

impl Default for Sizes {
    /// No texts or lists given, and the default limit.
    fn default() -> Self {
        Sizes {
            text: 0,
            items: 0,
            limit: super::DEFAULT_RENDER_BYTES,
        }
    }
}

/// Bytes a number holds, as a value or rendered.
const NUMBER_BYTES: u64 = 24;
/// What rendering a list's item may add to it: quotes, escapes (`\u0000` for one
/// byte) and the separator.
const REPR_FACTOR: u64 = 6;
const REPR_EXTRA: u64 = 4;
/// The most items minijinja's `range` gives.
const RANGE_ITEMS: u64 = 100_000;
/// The deepest a formula or template may nest its steps: deeper, its checks and its
/// compiling would recurse past a thread's stack.
pub const MAX_DEPTH: usize = 128;

/// The filters a formula or template may use.
pub const FILTERS: &[&str] = &[
    "abs",
    "bool",
    "capitalize",
    "count",
    "d",
    "default",
    "dictsort",
    "first",
    "float",
    "int",
    "items",
    "join",
    "last",
    "length",
    "list",
    "lower",
    "max",
    "min",
    "replace",
    "reverse",
    "round",
    "sort",
    "string",
    "sum",
    "title",
    "tojson",
    "trim",
    "unique",
    "upper",
];

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Number,
    Bool,
    Text,
    List,
    Map,
    /// A number or a text (a decision), or something not known before the run.
    Any,
}

/// An expression's value as far as the syntax and the names' sizes tell.
#[derive(Debug, Clone, Copy)]
struct Shape {
    kind: Kind,
    /// The most bytes the value holds, or writes when rendered.
    bytes: u64,
    /// The most items iterating it gives (a text's characters).
    items: u64,
    /// The most bytes one item holds.
    item: u64,
    /// Whether every item is a number.
    numbers: bool,
    /// Its value, where the syntax fixes it (a literal number).
    value: Option<f64>,
}

impl Shape {
    fn number(value: Option<f64>) -> Self {
        Shape {
            kind: Kind::Number,
            bytes: NUMBER_BYTES,
            items: 0,
            item: 0,
            numbers: false,
            value,
        }
    }

    fn boolean() -> Self {
        Shape {
            kind: Kind::Bool,
            bytes: 5,
            ..Shape::number(None)
        }
    }

    fn text(bytes: u64) -> Self {
        Shape {
            kind: Kind::Text,
            bytes,
            items: bytes,
            item: 4,
            numbers: false,
            value: None,
        }
    }

    fn any(bytes: u64) -> Self {
        Shape {
            kind: Kind::Any,
            bytes: bytes.max(NUMBER_BYTES),
            items: bytes,
            item: bytes.max(NUMBER_BYTES),
            numbers: false,
            value: None,
        }
    }

    fn list(items: u64, item: u64, numbers: bool) -> Self {
        let each = item.saturating_mul(REPR_FACTOR).saturating_add(REPR_EXTRA);
        Shape {
            kind: Kind::List,
            bytes: items.saturating_mul(each).saturating_add(2),
            items,
            item,
            numbers,
            value: None,
        }
    }

    fn map(items: u64, item: u64, numbers: bool) -> Self {
        Shape {
            kind: Kind::Map,
            ..Shape::list(items, item.saturating_mul(2), numbers)
        }
    }

    fn is_number(&self) -> bool {
        matches!(self.kind, Kind::Number | Kind::Bool)
    }

    /// What an item of it is: a number, a character, or an item of some size.
    fn member(&self) -> Shape {
        match self.kind {
            _ if self.numbers => Shape::number(None),
            Kind::Text => Shape::text(4),
            Kind::Number | Kind::Bool => Shape::any(0),
            _ => Shape::any(self.item),
        }
    }

    /// One of `self` and `other`, whichever the run gives.
    fn either(self, other: Shape) -> Shape {
        if self.is_number() && other.is_number() {
            return Shape::number(None);
        }
        Shape {
            kind: if self.kind == other.kind {
                self.kind
            } else {
                Kind::Any
            },
            bytes: self.bytes.max(other.bytes),
            items: self.items.max(other.items),
            item: self.item.max(other.item),
            numbers: self.numbers && other.numbers,
            value: None,
        }
    }

    /// The most bytes one item writes when a list is joined or a text shown.
    fn item_text(&self) -> u64 {
        if self.numbers {
            NUMBER_BYTES
        } else {
            self.item
        }
    }
}

/// What is wrong with a formula or template: it does not parse, uses what a
/// scenario may not, or can make a value over the limit.
pub type BoundError = String;

/// Checks a formula (an expression): that it parses and can make no value over
/// `sizes.limit`. `names` says what each name it reads holds (`None`: a name the
/// scenario does not give, which the names' own check reports).
pub fn check_formula(
    formula: &str,
    names: &dyn Fn(&str) -> Option<Leaf>,
    sizes: Sizes,
) -> Result<(), BoundError> {
    let expr = parse_expr(formula).map_err(|e| e.to_string())?;
    Check::new(formula, names, sizes).expr(&expr).map(|_| ())
}

/// Checks a template: that it parses, shows, branches and loops only, and can make
/// no value over `sizes.limit`.
pub fn check_template(
    text: &str,
    names: &dyn Fn(&str) -> Option<Leaf>,
    sizes: Sizes,
) -> Result<(), BoundError> {
    let stmt = parse(
        text,
        "<template>",
        SyntaxConfig,
        WhitespaceConfig::default(),
    )
    .map_err(|e| e.to_string())?;
    Check::new(text, names, sizes).stmt(&stmt)
}

struct Check<'a> {
    source: &'a str,
    names: &'a dyn Fn(&str) -> Option<Leaf>,
    sizes: Sizes,
    /// Loop variables in scope, innermost last.
    locals: Vec<(&'a str, Shape)>,
    /// The items of the loops around, innermost last (what `loop.previtem` is).
    loops: Vec<Shape>,
    /// How deep the step being checked is.
    depth: usize,
}

impl<'a> Check<'a> {
    fn new(source: &'a str, names: &'a dyn Fn(&str) -> Option<Leaf>, sizes: Sizes) -> Self {
        Check {
            source,
            names,
            sizes,
            locals: Vec::new(),
            loops: Vec::new(),
            depth: 0,
        }
    }

    /// One step deeper, refused past [`MAX_DEPTH`].
    fn deeper(&mut self) -> Result<(), BoundError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(format!(
                "nests its steps more than {MAX_DEPTH} deep: split it, or write it flatter"
            ));
        }
        Ok(())
    }

    /// The source of `span`, shortened for a message.
    fn quote(&self, span: minijinja::machinery::Span) -> String {
        let (start, end) = (span.start_offset as usize, span.end_offset as usize);
        let text = self.source.get(start..end).unwrap_or("the expression");
        let mut shown: String = text.chars().take(60).collect();
        if shown.len() < text.len() {
            shown.push('…');
        }
        format!("`{shown}`")
    }

    /// A value made in memory: refused over the limit.
    fn made(&self, shape: Shape, expr: &Expr) -> Result<Shape, BoundError> {
        if shape.bytes > self.sizes.limit {
            return Err(format!(
                "{} can make a value of {} bytes, over the limit of {} bytes a formula or template may make",
                self.quote(expr.span()),
                if shape.bytes == u64::MAX {
                    "unbounded".to_string()
                } else {
                    format!("up to {}", shape.bytes)
                },
                self.sizes.limit
            ));
        }
        Ok(shape)
    }

    fn stmts(&mut self, body: &'a [Stmt<'a>]) -> Result<(), BoundError> {
        body.iter().try_for_each(|s| self.stmt(s))
    }

    fn stmt(&mut self, stmt: &'a Stmt<'a>) -> Result<(), BoundError> {
        self.deeper()?;
        let checked = self.stmt_in(stmt);
        self.depth -= 1;
        checked
    }

    fn stmt_in(&mut self, stmt: &'a Stmt<'a>) -> Result<(), BoundError> {
        match stmt {
            Stmt::Template(t) => self.stmts(&t.children),
            Stmt::EmitExpr(e) => self.expr(&e.expr).map(|_| ()),
            Stmt::EmitRaw(_) | Stmt::Continue(_) | Stmt::Break(_) => Ok(()),
            Stmt::IfCond(i) => {
                self.expr(&i.expr)?;
                self.stmts(&i.true_body)?;
                self.stmts(&i.false_body)
            }
            Stmt::ForLoop(f) => {
                if f.recursive {
                    return Err(
                        "a recursive loop renders into a buffer of its own: loop without `recursive`"
                            .into(),
                    );
                }
                let item = self.expr(&f.iter)?.member();
                let scope = self.locals.len();
                self.bind(&f.target, item)?;
                self.loops.push(item);
                if let Some(filter) = &f.filter_expr {
                    self.expr(filter)?;
                }
                self.stmts(&f.body)?;
                self.loops.pop();
                self.locals.truncate(scope);
                self.stmts(&f.else_body)
            }
            other => Err(format!(
                "{} is not allowed: a scenario's template shows values (`{{{{ … }}}}`), \
                 branches (`{{% if %}}`) and loops (`{{% for %}}`), nothing else",
                statement(other)
            )),
        }
    }

    /// A loop's target: a name, or names unpacking each item.
    fn bind(&mut self, target: &'a Expr<'a>, item: Shape) -> Result<(), BoundError> {
        match target {
            Expr::Var(v) => {
                self.locals.push((v.id, item));
                Ok(())
            }
            Expr::List(l) => l
                .items
                .iter()
                .try_for_each(|t| self.bind(t, item.member().either(item))),
            other => Err(format!(
                "{} cannot take a loop's items",
                self.quote(other.span())
            )),
        }
    }

    fn var(&self, name: &str) -> Shape {
        if let Some((_, shape)) = self.locals.iter().rev().find(|(n, _)| *n == name) {
            return *shape;
        }
        let Sizes { text, items, .. } = self.sizes;
        match (self.names)(name) {
            Some(Leaf::Number) => Shape::number(None),
            Some(Leaf::Text) => Shape::text(text),
            Some(Leaf::Decision) => Shape::any(text),
            // A name the scenario does not give fails when it is read (its own check
            // reports it): it holds nothing.
            None => Shape::number(None),
            Some(Leaf::Numbers) => Shape::map(items, NUMBER_BYTES, true),
            Some(Leaf::Texts) => Shape::list(items, text, false),
            Some(Leaf::Series) => {
                Shape::map(items, Shape::list(items, NUMBER_BYTES, true).bytes, false)
            }
        }
    }

    fn expr(&mut self, expr: &'a Expr<'a>) -> Result<Shape, BoundError> {
        self.deeper()?;
        let shape = self.expr_in(expr);
        self.depth -= 1;
        shape
    }

    fn expr_in(&mut self, expr: &'a Expr<'a>) -> Result<Shape, BoundError> {
        match expr {
            Expr::Var(v) => Ok(self.var(v.id)),
            Expr::Const(c) => Ok(constant(&c.value)),
            Expr::Slice(s) => {
                let x = self.expr(&s.expr)?;
                for part in [&s.start, &s.stop, &s.step].into_iter().flatten() {
                    self.expr(part)?;
                }
                // A slice of a lazy list is made in memory.
                let made = match x.kind {
                    Kind::List => Shape::list(x.items, x.item, x.numbers),
                    _ => x,
                };
                self.made(made, expr)
            }
            Expr::UnaryOp(u) => {
                let x = self.expr(&u.expr)?;
                Ok(match u.op {
                    UnaryOpKind::Not => Shape::boolean(),
                    UnaryOpKind::Neg => Shape::number(x.value.map(|v| -v)),
                })
            }
            Expr::BinOp(b) => self.binop(b, expr),
            Expr::Compare(c) => {
                self.expr(&c.expr)?;
                for op in &c.ops {
                    self.expr(&op.expr)?;
                }
                Ok(Shape::boolean())
            }
            Expr::IfExpr(i) => {
                self.expr(&i.test_expr)?;
                let yes = self.expr(&i.true_expr)?;
                let no = match &i.false_expr {
                    Some(e) => self.expr(e)?,
                    None => Shape::text(0),
                };
                Ok(yes.either(no))
            }
            Expr::Filter(f) => self.filter(f, expr),
            Expr::Test(t) => {
                self.expr(&t.expr)?;
                self.args(&t.args)?;
                Ok(Shape::boolean())
            }
            Expr::GetAttr(g) => {
                if let Expr::Var(v) = &g.expr {
                    if v.id == "loop" && !self.loops.is_empty() {
                        return Ok(self.loop_attr(g.name));
                    }
                }
                Ok(self.expr(&g.expr)?.member())
            }
            Expr::GetItem(g) => {
                let x = self.expr(&g.expr)?;
                self.expr(&g.subscript_expr)?;
                Ok(x.member())
            }
            Expr::Call(c) => self.call(c),
            Expr::List(l) => {
                let mut items = Vec::with_capacity(l.items.len());
                for item in &l.items {
                    items.push(self.expr(item)?);
                }
                let item = items.iter().map(|s| s.bytes).max().unwrap_or(0);
                let numbers = items.iter().all(Shape::is_number);
                self.made(Shape::list(items.len() as u64, item, numbers), expr)
            }
            Expr::Map(m) => {
                let mut item = 0u64;
                let mut numbers = true;
                for (k, v) in m.keys.iter().zip(&m.values) {
                    let (k, v) = (self.expr(k)?, self.expr(v)?);
                    item = item.max(k.bytes).max(v.bytes);
                    numbers &= v.is_number();
                }
                self.made(Shape::map(m.keys.len() as u64, item, numbers), expr)
            }
        }
    }

    fn loop_attr(&self, name: &str) -> Shape {
        match name {
            "first" | "last" => Shape::boolean(),
            "previtem" | "nextitem" => self.loops.last().copied().unwrap_or(Shape::any(0)),
            _ => Shape::number(None),
        }
    }

    fn args(&mut self, args: &'a [CallArg<'a>]) -> Result<Vec<Shape>, BoundError> {
        let mut shapes = Vec::new();
        for arg in args {
            match arg {
                CallArg::Pos(e) => shapes.push(self.expr(e)?),
                CallArg::Kwarg(_, e) => {
                    self.expr(e)?;
                }
                CallArg::PosSplat(e) | CallArg::KwargSplat(e) => {
                    return Err(format!(
                        "{}: arguments spread from a list or map (`*`, `**`) are not allowed",
                        self.quote(e.span())
                    ))
                }
            }
        }
        Ok(shapes)
    }

    fn binop(&mut self, b: &'a ast::BinOp<'a>, expr: &'a Expr<'a>) -> Result<Shape, BoundError> {
        let (l, r) = (self.expr(&b.left)?, self.expr(&b.right)?);
        let known = |f: fn(f64, f64) -> f64| match (l.value, r.value) {
            (Some(a), Some(b)) => Some(f(a, b)),
            _ => None,
        };
        Ok(match b.op {
            BinOpKind::Eq
            | BinOpKind::Ne
            | BinOpKind::Lt
            | BinOpKind::Lte
            | BinOpKind::Gt
            | BinOpKind::Gte
            | BinOpKind::In => Shape::boolean(),
            BinOpKind::ScAnd | BinOpKind::ScOr => l.either(r),
            BinOpKind::Sub => Shape::number(known(|a, b| a - b)),
            BinOpKind::Div | BinOpKind::FloorDiv | BinOpKind::Rem | BinOpKind::Pow => {
                Shape::number(None)
            }
            BinOpKind::Add if l.is_number() && r.is_number() => Shape::number(known(|a, b| a + b)),
            // Lists are joined lazily; what is made of them is checked where it is.
            BinOpKind::Add => Shape {
                kind: Kind::List,
                bytes: l.bytes.saturating_add(r.bytes),
                items: l.items.saturating_add(r.items),
                item: l.item.max(r.item),
                numbers: l.numbers && r.numbers,
                value: None,
            },
            BinOpKind::Concat => self.made(Shape::text(l.bytes.saturating_add(r.bytes)), expr)?,
            BinOpKind::Mul => self.repeat(l, r, expr)?,
        })
    }

    /// `*`: numbers multiplied, or a text or list repeated a number of times.
    fn repeat(&self, l: Shape, r: Shape, expr: &'a Expr<'a>) -> Result<Shape, BoundError> {
        if l.is_number() && r.is_number() {
            return Ok(Shape::number(l.value.zip(r.value).map(|(a, b)| a * b)));
        }
        let (repeated, times) = match (l.is_number(), r.is_number()) {
            (true, false) => (r, l),
            (false, true) => (l, r),
            _ => {
                return Err(format!(
                    "{} multiplies values that may be texts or lists: multiply numbers, \
                     or repeat a text a fixed number of times (`'-' * 20`)",
                    self.quote(expr.span())
                ))
            }
        };
        let Some(n) = times.value else {
            return Err(format!(
                "{} may repeat a text or list a number of times known only when the run plays: \
                 repeat it a fixed number of times (`'-' * 20`)",
                self.quote(expr.span())
            ));
        };
        let n = if n.is_finite() && n > 0.0 {
            n.min(u64::MAX as f64) as u64
        } else {
            0
        };
        let shape = Shape {
            bytes: repeated.bytes.saturating_mul(n),
            items: repeated.items.saturating_mul(n),
            ..repeated
        };
        // A repeated list stays lazy; a repeated text is made.
        match repeated.kind {
            Kind::List => Ok(shape),
            _ => self.made(shape, expr),
        }
    }

    fn filter(&mut self, f: &'a ast::Filter<'a>, expr: &'a Expr<'a>) -> Result<Shape, BoundError> {
        let Some(input) = &f.expr else {
            return Err("a filter block is not allowed".into());
        };
        let x = self.expr(input)?;
        let args = self.args(&f.args)?;
        let arg = |i: usize| args.get(i).copied().unwrap_or(Shape::text(0));
        let shape = match f.name {
            "abs" | "int" | "float" | "round" | "length" | "count" | "sum" => {
                return Ok(Shape::number(None))
            }
            "bool" => return Ok(Shape::boolean()),
            "default" | "d" => return Ok(x.either(arg(0))),
            "first" | "last" | "min" | "max" => return Ok(x.member()),
            // Case mapping may take a character to three ("ß" to "SS", and wider ones).
            "upper" | "lower" | "title" | "capitalize" => Shape::text(x.bytes.saturating_mul(3)),
            "trim" => Shape::text(x.bytes),
            "join" => {
                let each = x.item_text().saturating_add(arg(0).bytes);
                Shape::text(x.items.saturating_mul(each))
            }
            "list" | "sort" | "reverse" | "unique" => Shape::list(x.items, x.item, x.numbers),
            "items" | "dictsort" => Shape::list(x.items, x.item.saturating_mul(2), false),
            "string" | "tojson" => Shape::text(
                x.bytes
                    .saturating_mul(REPR_FACTOR)
                    .saturating_add(REPR_EXTRA),
            ),
            // Each position of the text is replaced at most once.
            "replace" => Shape::text(
                x.bytes
                    .saturating_add(x.bytes.saturating_add(1).saturating_mul(arg(1).bytes)),
            ),
            other => {
                return Err(format!(
                    "the filter `{other}` is not one a scenario may use (these are: {})",
                    FILTERS.join(", ")
                ))
            }
        };
        self.made(shape, expr)
    }

    fn call(&mut self, c: &'a ast::Call<'a>) -> Result<Shape, BoundError> {
        let args = self.args(&c.args)?;
        match &c.expr {
            Expr::Var(v) if v.id == "range" => {
                let known: Option<Vec<f64>> = args.iter().map(|a| a.value).collect();
                let items = match known.as_deref() {
                    Some([stop]) => span_of(0.0, *stop, 1.0),
                    Some([start, stop]) => span_of(*start, *stop, 1.0),
                    Some([start, stop, step]) => span_of(*start, *stop, *step),
                    _ => RANGE_ITEMS,
                };
                // A range is lazy: what is made of it is checked where it is.
                Ok(Shape::list(items.min(RANGE_ITEMS), NUMBER_BYTES, true))
            }
            Expr::GetAttr(g)
                if matches!(&g.expr, Expr::Var(v) if v.id == "loop") && g.name == "cycle" =>
            {
                Ok(args
                    .into_iter()
                    .reduce(Shape::either)
                    .unwrap_or(Shape::text(0)))
            }
            Expr::GetAttr(g)
                if matches!(&g.expr, Expr::Var(v) if v.id == "loop") && g.name == "changed" =>
            {
                Ok(Shape::boolean())
            }
            other => Err(format!(
                "{}: a formula or template may call `range` (and `loop.cycle` in a loop), nothing else",
                self.quote(other.span())
            )),
        }
    }
}

/// How many items `range(start, stop, step)` gives.
fn span_of(start: f64, stop: f64, step: f64) -> u64 {
    if step == 0.0 || !(start.is_finite() && stop.is_finite() && step.is_finite()) {
        return RANGE_ITEMS;
    }
    ((stop - start) / step)
        .ceil()
        .max(0.0)
        .min(RANGE_ITEMS as f64) as u64
}

/// A literal's shape, its value kept when it is a number.
fn constant(value: &Value) -> Shape {
    match value.kind() {
        ValueKind::Number => Shape::number(f64::try_from(value.clone()).ok()),
        ValueKind::Bool => Shape::boolean(),
        ValueKind::String => Shape::text(value.as_str().map_or(0, str::len) as u64),
        ValueKind::None | ValueKind::Undefined => Shape::text(0),
        _ => Shape::any(value.to_string().len() as u64),
    }
}

/// How a statement is written, for the message that refuses it.
fn statement(stmt: &Stmt) -> &'static str {
    match stmt {
        Stmt::Template(_) => "a template",
        Stmt::EmitExpr(_) => "`{{ … }}`",
        Stmt::EmitRaw(_) => "text",
        Stmt::ForLoop(_) => "`{% for %}`",
        Stmt::IfCond(_) => "`{% if %}`",
        Stmt::WithBlock(_) => "`{% with %}`",
        Stmt::Set(_) => "`{% set %}`",
        Stmt::SetBlock(_) => "`{% set %}…{% endset %}`",
        Stmt::AutoEscape(_) => "`{% autoescape %}`",
        Stmt::FilterBlock(_) => "`{% filter %}`",
        Stmt::Block(_) => "`{% block %}`",
        Stmt::Import(_) => "`{% import %}`",
        Stmt::FromImport(_) => "`{% from … import %}`",
        Stmt::Extends(_) => "`{% extends %}`",
        Stmt::Include(_) => "`{% include %}`",
        Stmt::Macro(_) => "`{% macro %}`",
        Stmt::CallBlock(_) => "`{% call %}`",
        Stmt::Continue(_) => "`{% continue %}`",
        Stmt::Break(_) => "`{% break %}`",
        Stmt::Do(_) => "`{% do %}`",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIZES: Sizes = Sizes {
        text: 40,
        items: 10,
        limit: 1 << 20,
    };

    fn names(name: &str) -> Option<Leaf> {
        Some(match name {
            "world" | "me" | "counts" => Leaf::Numbers,
            "round" | "rounds" | "sum" | "n" => Leaf::Number,
            "own" => Leaf::Decision,
            "choice" | "name" => Leaf::Text,
            "others_last" => Leaf::Texts,
            _ => return None,
        })
    }

    fn template(text: &str) -> Result<(), String> {
        check_template(text, &names, SIZES)
    }

    fn formula(text: &str) -> Result<(), String> {
        check_formula(text, &names, SIZES)
    }

    #[test]
    fn what_scenarios_write_passes() {
        for t in [
            "Fish left: {{ world.fish }}. Yours: {{ me.catch }}",
            "{{ (me.wallet - me.fines) | round(1) }} after round {{ round }} of {{ rounds }}",
            "{% if round > 1 %}Last time: {{ choice }}{% else %}First round.{% endif %}",
            "{% for i in range(world.fish) %}{{ i }}, {% endfor %}",
            "{% for k, v in counts | items %}{{ k }}: {{ v }}{% if not loop.last %}, {% endif %}{% endfor %}",
            "{{ '-' * 20 }} {{ others_last | join(', ') }} {{ name | upper }}",
        ] {
            assert_eq!(template(t), Ok(()), "{t}");
        }
        for f in [
            "me.wallet + 20 - own + 1.6 * sum / n",
            "counts[name] if name in counts else 0",
            "[100, 2 * ([0, world.fish - sum] | max)] | min",
            "me.points + ((8 if counts['Option J'] == 2 else 0) if own == 'Option J' else 5)",
            "2 * own",
            "(own * 3) | length",
        ] {
            assert_eq!(formula(f), Ok(()), "{f}");
        }
    }

    #[test]
    fn a_value_too_large_to_make_is_refused_with_the_expression() {
        let e = template("{{ 'x' * 100000000 }}").unwrap_err();
        assert!(
            e.contains("`'x' * 100000000`") && e.contains("up to 100000000 bytes"),
            "{e}"
        );
        // Each repetition under the limit, their concatenation over it.
        let e = template("{{ ('x' * 1000000) ~ ('x' * 1000000) }}").unwrap_err();
        assert!(e.contains("up to 2000000"), "{e}");
        assert!(formula("'x' * 100000000 ~ 'y'").is_err());
        assert!(template("{{ range(100000) | join('x' * 100) }}").is_err());
        assert!(template("{{ range(100000) | join(range(100000) | join('x')) }}").is_err());
        assert!(template("{{ ('ab' * 1000) | replace('', 'x' * 1000) }}").is_err());
        // Repeated by what only the run knows.
        let e = template("{{ choice * world.fish }}").unwrap_err();
        assert!(e.contains("known only when the run plays"), "{e}");
        assert!(formula("own * own").is_err());
        // A list repeated stays lazy; joining it is what makes the value.
        assert_eq!(formula("([own] * 1000000000) | length"), Ok(()));
        assert!(formula("([own] * 1000000000) | join").is_err());
    }

    #[test]
    fn statements_that_build_values_or_buffers_are_refused() {
        for (t, named) in [
            ("{% set a = 'x' * 100 %}{{ a ~ a }}", "`{% set %}`"),
            (
                "{% macro f(n) %}{{ f(n - 1) }}{% endmacro %}{{ f(9) }}",
                "`{% macro %}`",
            ),
            ("{% include 'other' %}", "`{% include %}`"),
            ("{% filter upper %}x{% endfilter %}", "`{% filter %}`"),
            ("{% with a = 1 %}{{ a }}{% endwith %}", "`{% with %}`"),
            ("{% extends 'base' %}", "`{% extends %}`"),
        ] {
            let e = template(t).unwrap_err();
            assert!(e.contains(named), "{t}: {e}");
        }
        let e = template("{% for x in [1] recursive %}{{ loop([]) }}{% endfor %}").unwrap_err();
        assert!(e.contains("recursive"), "{e}");
        let e = template("{{ namespace() }}").unwrap_err();
        assert!(e.contains("may call `range`"), "{e}");
        let e = template("{{ world | pprint }}").unwrap_err();
        assert!(e.contains("`pprint`"), "{e}");
        assert!(template("{{ world.fish ").is_err());
        let deep = format!("{}1{}", "(".repeat(40), ")".repeat(40));
        assert_eq!(formula(&deep), Ok(()));
        let e = formula(&("1".to_string() + &"+1".repeat(200))).unwrap_err();
        assert!(e.contains("more than 128 deep"), "{e}");
    }

    #[test]
    fn the_limit_and_the_names_sizes_decide() {
        let small = Sizes {
            limit: 100,
            ..SIZES
        };
        assert!(check_template("{{ 'x' * 50 }}", &names, small).is_ok());
        assert!(check_template("{{ 'x' * 101 }}", &names, small).is_err());
        // Forty-byte names, ten of them, joined: within 1 MiB, not within 100 bytes.
        assert!(check_template("{{ others_last | join(', ') }}", &names, small).is_err());
        assert!(template("{{ others_last | join(', ') }}").is_ok());
    }
}
