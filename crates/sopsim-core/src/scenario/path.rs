//! Field paths in error messages: `sop.states.debate.next[0]`, `agents["Harry Potter"].roles`.

use std::fmt;

/// A path into a scenario file, built segment by segment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldPath(String);

impl FieldPath {
    /// The empty path: the file's top level.
    pub fn root() -> Self {
        Self(String::new())
    }

    /// `self.key`, quoting keys that are not plain identifiers.
    pub fn key(&self, key: &str) -> Self {
        let plain = !key.is_empty()
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        let mut s = self.0.clone();
        if plain {
            if !s.is_empty() {
                s.push('.');
            }
            s.push_str(key);
        } else {
            s.push('[');
            s.push_str(&serde_json::to_string(key).unwrap_or_default());
            s.push(']');
        }
        Self(s)
    }

    /// A path already rendered elsewhere (serde's own path display).
    pub fn raw(rendered: String) -> Self {
        Self(rendered)
    }

    /// `self[i]`: the `i`th item of an array.
    pub fn index(&self, i: usize) -> Self {
        Self(format!("{}[{i}]", self.0))
    }

    /// Converts a JSON pointer (`/sop/states/a b/next/0`) into a field path, walking
    /// `doc` to tell array indices from object keys that happen to be digits.
    pub fn from_pointer(pointer: &str, doc: &serde_json::Value) -> Self {
        let mut path = Self::root();
        let mut node = Some(doc);
        for raw in pointer.split('/').skip(1) {
            let seg = raw.replace("~1", "/").replace("~0", "~");
            match (node, seg.parse::<usize>()) {
                (Some(serde_json::Value::Array(items)), Ok(i)) => {
                    path = path.index(i);
                    node = items.get(i);
                }
                (n, _) => {
                    path = path.key(&seg);
                    node = n.and_then(|v| v.get(&seg));
                }
            }
        }
        path
    }

    /// The path as written, empty at the top level.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            f.write_str("(top level)")
        } else {
            f.write_str(&self.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_keys_and_indices() {
        let p = FieldPath::root()
            .key("agents")
            .key("Harry Potter")
            .key("roles");
        assert_eq!(p.to_string(), r#"agents["Harry Potter"].roles"#);
        assert_eq!(
            FieldPath::root()
                .key("sop")
                .key("next")
                .index(2)
                .to_string(),
            "sop.next[2]"
        );
        assert_eq!(FieldPath::root().to_string(), "(top level)");
    }
}
