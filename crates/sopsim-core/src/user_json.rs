//! Parsing JSON documents that users write: like `serde_json::from_str::<Value>`, but a
//! key given twice in one object is an error naming where, rather than the last one
//! silently winning (a scenario with two `"agents"` would otherwise lose the first).

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Parses `text`, refusing duplicate keys; the error carries serde_json's position.
pub fn parse(text: &str) -> Result<Value, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value = Node {
        path: String::new(),
    }
    .deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// One value of the document and the path that leads to it (`roles.Ann.goal`, `x[2]`).
struct Node {
    path: String,
}

impl Node {
    fn child(&self, step: &str) -> Node {
        let path = if self.path.is_empty() {
            step.to_string()
        } else if step.starts_with('[') {
            format!("{}{step}", self.path)
        } else {
            format!("{}.{step}", self.path)
        };
        Node { path }
    }
}

impl<'de> DeserializeSeed<'de> for Node {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Node {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(self.child(&format!("[{}]", items.len())))? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                let place = if self.path.is_empty() {
                    "the top level".to_string()
                } else {
                    format!("`{}`", self.path)
                };
                return Err(de::Error::custom(format!(
                    "the key \"{key}\" appears twice in {place}"
                )));
            }
            let value = map.next_value_seed(self.child(&key))?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_keys_are_refused_with_their_place() {
        let e = parse(r#"{"roles": {"a": 1, "b": {"x": 1, "x": 2}}}"#).unwrap_err();
        assert!(
            e.to_string().contains("\"x\" appears twice in `roles.b`"),
            "{e}"
        );
        let e = parse(r#"{"a": [{"k": 1}, {"k": 1, "k": 1}]}"#).unwrap_err();
        assert!(e.to_string().contains("`a[1]`"), "{e}");
        let e = parse(r#"{"a": 1, "a": 1}"#).unwrap_err();
        assert!(e.to_string().contains("the top level"), "{e}");
    }

    #[test]
    fn documents_parse_as_serde_json_parses_them() {
        let text = r#"{"a": [1, -2, 3.5, "s", null, true, {"b": {}}], "c": 18446744073709551615}"#;
        assert_eq!(
            parse(text).unwrap(),
            serde_json::from_str::<Value>(text).unwrap()
        );
        assert!(parse("{} x").is_err());
        let deep = "[".repeat(200) + &"]".repeat(200);
        assert!(parse(&deep).is_err(), "the recursion limit still holds");
    }
}
