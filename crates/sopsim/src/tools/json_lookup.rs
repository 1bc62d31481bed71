//! The `json_lookup` tool: the objects of a JSON array or JSONL file, filtered by field
//! equality, substring or numeric range, sorted and limited (Elysia's query tool on
//! local data). The argument schema names the file's fields, so a model constrained by
//! it can only ask for fields that exist.

use std::cmp::Ordering;
use std::path::Path;

use serde_json::{json, Map, Value};

use sopsim_core::scenario::tool_settings::JsonLookupSettings;

use super::kind::{Kind, Start};
use super::{
    ResultObject, RunsIn, Setup, SetupCause, Tool, ToolCallPlace, ToolFailure, ToolSetupError,
};
use crate::scenario::{read_objects, DataFile, DataFileError};

const MAX_FILTERS: usize = 8;
const DEFAULT_LIMIT: u64 = 10;
const MAX_LIMIT: u64 = 50;
/// A text field with at most this many distinct values lists them in the schema.
const MAX_LISTED_VALUES: usize = 40;
/// The fields the argument schema offers for filters and sorting, first seen first: a
/// file with thousands of distinct keys would make a schema no model reads whole.
pub const MAX_SCHEMA_FIELDS: usize = 64;

/// A data file's objects and their field names (in first-seen order).
#[derive(Debug)]
pub struct Table {
    /// The file's objects.
    pub objects: Vec<Map<String, Value>>,
    /// Every field name the objects use, first seen first.
    pub fields: Vec<String>,
}

/// A lookup in one data file, loaded when the tool is set up.
struct Lookup {
    table: Table,
    /// The file's name without its extension: what results are named by default.
    name: String,
}

impl Start for JsonLookupSettings {
    async fn start(self, setup: &mut Setup<'_>) -> Result<Box<dyn Kind>, ToolSetupError> {
        let path = Path::new(&self.file);
        let table = Table::load(path).map_err(|source| {
            let file = self.file.clone();
            setup.error(&["config", "file"], SetupCause::Data { file, source })
        })?;
        let name = path
            .file_stem()
            .map_or("results".into(), |n| n.to_string_lossy().into_owned());
        Ok(Box::new(Lookup { table, name }))
    }
}

impl Kind for Lookup {
    fn parameters(&self) -> Value {
        self.table.parameters()
    }

    fn runs_in(&self) -> RunsIn<'_> {
        RunsIn::Place
    }

    fn result_name(&self) -> Option<&str> {
        Some(&self.name)
    }

    fn payload_type(&self) -> &'static str {
        "table"
    }

    /// The objects matching every filter; when none do, those matching without the
    /// filters [`Table::relax`] leaves out, saying which.
    fn run_here(
        &self,
        tool: &Tool,
        args: &Map<String, Value>,
        _: &ToolCallPlace,
    ) -> Option<Result<ResultObject, ToolFailure>> {
        let table = &self.table;
        let (objects, total) = table.query(args);
        let relaxed = (total == 0).then(|| table.relax(args)).flatten();
        let Some(relaxed) = relaxed else {
            return Some(Ok(tool.result(objects, total)));
        };
        let mut left_out = relaxed.dropped.join(", ");
        if relaxed.without_search {
            if !left_out.is_empty() {
                left_out.push_str(" and ");
            }
            left_out.push_str("the search words");
        }
        let mut r = tool.result(relaxed.objects, relaxed.total);
        r.metadata.insert("left_out".into(), json!(left_out));
        r.llm_message = Some(
            "{name}: nothing matched every filter; without {left_out}, \
             {num_objects} shown of {total} matching."
                .into(),
        );
        Some(Ok(r))
    }
}

impl Table {
    /// The objects of the data file at `path`.
    pub fn load(path: &Path) -> Result<Table, DataFileError> {
        let DataFile { objects, fields } = read_objects(path)?;
        Ok(Table { objects, fields })
    }

    /// The argument schema. Each filter names a field of the file, with the operators
    /// and values that field can take: a text field whose few values group the objects
    /// lists them, so a model decoding under the schema can only ask for values that
    /// exist.
    pub fn parameters(&self) -> Value {
        let listed = &self.fields[..self.fields.len().min(MAX_SCHEMA_FIELDS)];
        let filters: Vec<Value> = listed.iter().flat_map(|f| self.filter_schema(f)).collect();
        json!({
            "type": "object",
            "properties": {
                "search": {"type": "string", "maxLength": 200, "description": "words to look for in any text field; the best matches come first"},
                "filters": {
                    "type": "array",
                    "maxItems": MAX_FILTERS,
                    "description": "all must hold: equals (same value), contains (text or list contains), min / max (numbers)",
                    "items": {"anyOf": filters},
                },
                "sort_by": {"enum": listed},
                "descending": {"type": "boolean"},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
            },
            "additionalProperties": false,
        })
    }

    /// The filters a field takes: numbers compare; a text field with few distinct
    /// values is matched exactly against one of them, or by any substring.
    fn filter_schema(&self, field: &str) -> Vec<Value> {
        let values = || self.objects.iter().filter_map(|o| o.get(field));
        let filter = |ops: Value, value: Value| {
            json!({
                "type": "object",
                "properties": {"field": {"const": field}, "op": {"enum": ops}, "value": value},
                "required": ["field", "op", "value"],
                "additionalProperties": false,
            })
        };
        let free_text = json!({"type": "string", "maxLength": 200});
        if values().all(|v| v.is_number()) {
            return vec![filter(
                json!(["equals", "min", "max"]),
                json!({"type": "number"}),
            )];
        }
        let mut texts: Vec<&str> = Vec::new();
        let mut all_text = true;
        for v in values() {
            match v {
                Value::String(s) => texts.push(s),
                Value::Array(items) => {
                    for i in items {
                        match i.as_str() {
                            Some(s) => texts.push(s),
                            None => all_text = false,
                        }
                    }
                }
                _ => all_text = false,
            }
        }
        texts.sort_unstable();
        texts.dedup();
        // A field whose every object has its own value (an id, a name) is listed as
        // free text: its values name objects rather than group them.
        let groups = texts.len() < self.objects.len();
        if all_text && groups && !texts.is_empty() && texts.len() <= MAX_LISTED_VALUES {
            vec![
                filter(json!(["equals"]), json!({"enum": texts})),
                filter(json!(["contains"]), free_text),
            ]
        } else {
            vec![filter(
                json!(["equals", "contains"]),
                json!({"type": ["string", "number", "boolean"], "maxLength": 200}),
            )]
        }
    }

    /// The matching objects, sorted and limited, and how many matched in all.
    pub fn query(&self, args: &Map<String, Value>) -> (Vec<Map<String, Value>>, usize) {
        let filters = args
            .get("filters")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let words: Vec<String> = args
            .get("search")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| w.chars().count() >= 3)
            .map(str::to_lowercase)
            .collect();
        let mut scored: Vec<(usize, &Map<String, Value>)> = self
            .objects
            .iter()
            .filter(|o| filters.iter().all(|f| holds(o, f)))
            .map(|o| (search_score(o, &words), o))
            .filter(|(score, _)| words.is_empty() || *score > 0)
            .collect();
        // Best matches first; the sort is stable, so ties keep the file's order.
        scored.sort_by_key(|(score, _)| std::cmp::Reverse(*score));
        let mut found: Vec<&Map<String, Value>> = scored.into_iter().map(|(_, o)| o).collect();
        let total = found.len();
        if let Some(field) = args.get("sort_by").and_then(Value::as_str) {
            let descending = args
                .get("descending")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            found.sort_by(|a, b| {
                let o = order(a.get(field), b.get(field));
                if descending {
                    o.reverse()
                } else {
                    o
                }
            });
        }
        let limit = args
            .get("limit")
            .and_then(Value::as_u64)
            .unwrap_or(DEFAULT_LIMIT)
            .min(MAX_LIMIT) as usize;
        (found.into_iter().take(limit).cloned().collect(), total)
    }
}

/// How many of the search words occur in the object's text (whole words of longer
/// text count, and a word's plural or singular too).
fn search_score(obj: &Map<String, Value>, words: &[String]) -> usize {
    if words.is_empty() {
        return 0;
    }
    let mut text = String::new();
    for v in obj.values() {
        collect_text(v, &mut text);
    }
    words
        .iter()
        .filter(|w| {
            let stem = w.strip_suffix('s').filter(|s| s.len() >= 3).unwrap_or(w);
            text.contains(stem)
        })
        .count()
}

fn collect_text(v: &Value, out: &mut String) {
    match v {
        Value::String(s) => {
            out.push_str(&s.to_lowercase());
            out.push(' ');
        }
        Value::Array(items) => items.iter().for_each(|i| collect_text(i, out)),
        _ => {}
    }
}

/// What a query that found nothing finds with the fewest of its filters dropped.
pub struct Relaxed {
    /// The filters left out, as `field op value`.
    pub dropped: Vec<String>,
    /// Whether the search words were left out too (when no subset of the filters
    /// finds anything with them).
    pub without_search: bool,
    /// The objects the relaxed query returns, up to its limit.
    pub objects: Vec<Map<String, Value>>,
    /// How many objects the relaxed query matched in all.
    pub total: usize,
}

impl Table {
    /// When a query finds nothing: the same query without the fewest of its filters
    /// that finds something (the most found among those, the earliest on a tie), and
    /// failing that without its search words too. Small models pile up filters that
    /// no product meets together; the result says what was left out.
    pub fn relax(&self, args: &Map<String, Value>) -> Option<Relaxed> {
        let filters = args
            .get("filters")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let n = filters.len();
        for without_search in [false, true] {
            if without_search && args.get("search").is_none() {
                break;
            }
            for drop in 0..=n {
                if drop == 0 && !without_search {
                    continue;
                }
                let mut best: Option<(usize, u32)> = None;
                for mask in 0u32..(1 << n) {
                    if mask.count_ones() as usize != drop {
                        continue;
                    }
                    let (_, total) =
                        self.query(&with_filters(args, &filters, mask, without_search));
                    if total > best.map_or(0, |(t, _)| t) {
                        best = Some((total, mask));
                    }
                }
                if let Some((total, mask)) = best {
                    let (objects, _) =
                        self.query(&with_filters(args, &filters, mask, without_search));
                    let dropped = (0..n)
                        .filter(|i| mask & (1 << i) != 0)
                        .map(|i| {
                            let f = &filters[i];
                            format!(
                                "{} {} {}",
                                f["field"].as_str().unwrap_or("?"),
                                f["op"].as_str().unwrap_or("?"),
                                f["value"]
                            )
                        })
                        .collect();
                    return Some(Relaxed {
                        dropped,
                        without_search,
                        objects,
                        total,
                    });
                }
            }
        }
        None
    }
}

/// `args` without the filters whose bits are set in `dropped`, and without its
/// search words if `without_search`.
fn with_filters(
    args: &Map<String, Value>,
    filters: &[Value],
    dropped: u32,
    without_search: bool,
) -> Map<String, Value> {
    let mut loose = args.clone();
    let kept: Vec<Value> = filters
        .iter()
        .enumerate()
        .filter(|(i, _)| dropped & (1 << i) == 0)
        .map(|(_, f)| f.clone())
        .collect();
    loose.insert("filters".into(), Value::Array(kept));
    if without_search {
        loose.remove("search");
    }
    loose
}

fn holds(obj: &Map<String, Value>, filter: &Value) -> bool {
    let field = filter["field"].as_str().unwrap_or_default();
    let wanted = &filter["value"];
    let Some(have) = obj.get(field) else {
        return false;
    };
    match filter["op"].as_str().unwrap_or_default() {
        "equals" => same(have, wanted),
        "contains" => contains(have, wanted),
        "min" => number(have)
            .zip(number(wanted))
            .is_some_and(|(h, w)| h >= w),
        "max" => number(have)
            .zip(number(wanted))
            .is_some_and(|(h, w)| h <= w),
        _ => false,
    }
}

fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// Equal values; text compared without case, numbers by value.
fn same(have: &Value, wanted: &Value) -> bool {
    match (have, wanted) {
        (Value::String(h), Value::String(w)) => h.trim().eq_ignore_ascii_case(w.trim()),
        (Value::Array(items), w) => items.iter().any(|i| same(i, w)),
        (h, w) => match (number(h), number(w)) {
            (Some(a), Some(b)) => a == b,
            _ => h == w,
        },
    }
}

fn contains(have: &Value, wanted: &Value) -> bool {
    let needle = match wanted {
        Value::String(s) => s.to_lowercase(),
        other => other.to_string(),
    };
    match have {
        Value::String(h) => h.to_lowercase().contains(&needle),
        Value::Array(items) => items.iter().any(|i| contains(i, wanted)),
        other => other.to_string().contains(&needle),
    }
}

/// Numbers before text, text before anything else; missing values last.
fn order(a: Option<&Value>, b: Option<&Value>) -> Ordering {
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, _) => Ordering::Greater,
        (_, None) => Ordering::Less,
        (Some(a), Some(b)) => match (number(a), number(b)) {
            (Some(x), Some(y)) => x.total_cmp(&y),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => a.as_str().unwrap_or("").cmp(b.as_str().unwrap_or("")),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Table {
        let objects: Vec<Map<String, Value>> = [
            json!({"name": "Trail shoe", "price": 89.0, "category": "shoes", "tags": ["outdoor"]}),
            json!({"name": "City shoe", "price": 59.5, "category": "Shoes"}),
            json!({"name": "Rain jacket", "price": 120, "category": "jackets"}),
            json!({"name": "Fleece", "price": 45, "category": "jackets"}),
        ]
        .into_iter()
        .map(|v| v.as_object().unwrap().clone())
        .collect();
        Table {
            fields: vec![
                "name".into(),
                "price".into(),
                "category".into(),
                "tags".into(),
            ],
            objects,
        }
    }

    fn names(found: &[Map<String, Value>]) -> Vec<&str> {
        found.iter().map(|o| o["name"].as_str().unwrap()).collect()
    }

    #[test]
    fn the_schema_lists_the_values_a_text_field_takes() {
        let p = table().parameters();
        let filters = p["properties"]["filters"]["items"]["anyOf"]
            .as_array()
            .unwrap();
        let category = filters
            .iter()
            .find(|f| f["properties"]["field"]["const"] == "category")
            .unwrap();
        assert_eq!(
            category["properties"]["value"]["enum"],
            json!(["Shoes", "jackets", "shoes"])
        );
        let price = filters
            .iter()
            .find(|f| f["properties"]["field"]["const"] == "price")
            .unwrap();
        assert_eq!(price["properties"]["value"]["type"], "number");
        let v = crate::tools::compile_schema(&p).unwrap();
        assert!(v.is_valid(
            &json!({"filters": [{"field": "category", "op": "equals", "value": "jackets"}]})
        ));
        assert!(!v.is_valid(
            &json!({"filters": [{"field": "category", "op": "equals", "value": "hats"}]})
        ));
    }

    #[test]
    fn filters_sort_and_limit() {
        let t = table();
        let args = json!({"filters": [{"field": "category", "op": "equals", "value": "shoes"}], "sort_by": "price"});
        let (found, total) = t.query(args.as_object().unwrap());
        assert_eq!((names(&found), total), (vec!["City shoe", "Trail shoe"], 2));
        let args = json!({"filters": [{"field": "price", "op": "min", "value": 60}, {"field": "price", "op": "max", "value": "100"}]});
        assert_eq!(
            names(&t.query(args.as_object().unwrap()).0),
            vec!["Trail shoe"]
        );
        let args = json!({"filters": [{"field": "name", "op": "contains", "value": "SHOE"}], "sort_by": "price", "descending": true, "limit": 1});
        let (found, total) = t.query(args.as_object().unwrap());
        assert_eq!((names(&found), total), (vec!["Trail shoe"], 2));
        let args = json!({"search": "waterproof jackets"});
        assert_eq!(
            names(&t.query(args.as_object().unwrap()).0),
            vec!["Rain jacket", "Fleece"]
        );
        let args = json!({"filters": [{"field": "tags", "op": "equals", "value": "outdoor"}]});
        assert_eq!(
            names(&t.query(args.as_object().unwrap()).0),
            vec!["Trail shoe"]
        );
    }

    #[test]
    fn a_query_that_finds_nothing_finds_what_the_fewest_dropped_filters_allow() {
        let t = table();
        let args = |v: Value| v.as_object().unwrap().clone();
        // Two filters no object meets together with the search; dropping the
        // category alone finds the rain jacket.
        let piled = args(json!({"search": "rain", "filters": [
            {"field": "category", "op": "equals", "value": "shoes"},
            {"field": "price", "op": "min", "value": 100},
        ]}));
        assert_eq!(t.query(&piled).1, 0);
        let r = t.relax(&piled).unwrap();
        assert_eq!(r.dropped, ["category equals \"shoes\""]);
        assert!(!r.without_search);
        assert_eq!(names(&r.objects), ["Rain jacket"]);
        // No subset of filters helps the search: the search words go too.
        let unknown = args(json!({"search": "kayak", "filters": [
            {"field": "price", "op": "max", "value": 50},
        ]}));
        let r = t.relax(&unknown).unwrap();
        assert!(r.dropped.is_empty() && r.without_search);
        assert_eq!(names(&r.objects), ["Fleece"]);
        // A query that finds something is not relaxed by run_here (total > 0).
        let found = args(json!({"search": "fleece"}));
        assert_eq!(t.query(&found).1, 1);
    }

    #[test]
    fn the_schema_offers_at_most_its_limit_of_fields() {
        let wide: Map<String, Value> = (0..MAX_SCHEMA_FIELDS + 10)
            .map(|i| (format!("k{i}"), json!(i)))
            .collect();
        let t = Table {
            fields: wide.keys().cloned().collect(),
            objects: vec![wide],
        };
        let p = t.parameters();
        let sortable = p["properties"]["sort_by"]["enum"].as_array().unwrap();
        assert_eq!(sortable.len(), MAX_SCHEMA_FIELDS);
        assert_eq!(sortable[0], "k0");
        let filters = p["properties"]["filters"]["items"]["anyOf"]
            .as_array()
            .unwrap();
        assert_eq!(filters.len(), MAX_SCHEMA_FIELDS);
    }
}
