//! What a model's decision reaches: reading a decision out of its text, the calculator
//! on any expression, and a json_lookup query (schema check, filters, search, sort,
//! the relaxation hint) with any arguments.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::{json, Map, Value};
use sopsim::tools::json_lookup::Table;
use sopsim::tools::{calculator, compile_schema, decision};

fn table() -> Table {
    let objects: Vec<Map<String, Value>> = [
        json!({"name": "Summit Boot", "price": 149.0, "category": "shoes", "tags": ["outdoor", "waterproof"]}),
        json!({"name": "Storm Shell", "price": 120, "category": "jackets", "rating": 4.5}),
        json!({"name": "Socks", "price": "24", "category": null, "tags": [1, "warm"]}),
    ]
    .into_iter()
    .filter_map(|v| v.as_object().cloned())
    .collect();
    Table {
        fields: vec!["name".into(), "price".into(), "category".into(), "tags".into(), "rating".into()],
        objects,
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = decision::read_decision(text);
    let _ = calculator::evaluate(text);
    if let Ok(Value::Object(args)) = serde_json::from_str::<Value>(text) {
        let t = table();
        if let Ok(validator) = compile_schema(&t.parameters()) {
            let _ = validator.is_valid(&Value::Object(args.clone()));
        }
        let _ = t.query(&args);
        let _ = t.relax(&args);
    }
});
