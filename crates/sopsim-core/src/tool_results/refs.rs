//! `_REF_ID`s beyond the store: on the objects of a result shown to the frontend, and
//! listed after a result's line in the transcript. A round's turn sees the ids its own
//! view of the store gave; the commit, which stores every turn in the order of the
//! roles, may give others, so both are renamed then.

use std::collections::HashMap;

use serde_json::Value;

use super::{Return, REF_ID};

/// A result's objects with the `_REF_ID`s the store gave them: as Elysia's tree tags a
/// result's objects before it shows them, the frontend gets each with its id.
pub fn tag_refs(ret: Return, refs: &[String]) -> Return {
    match ret {
        Return::Result(mut r) if refs.len() == r.objects.len() => {
            for (o, id) in r.objects.iter_mut().zip(refs) {
                o.shift_insert(0, REF_ID.into(), Value::String(id.clone()));
            }
            Return::Result(r)
        }
        other => other,
    }
}

/// A result's objects with the `_REF_ID`s in `renamed` (as seen → as committed)
/// replaced.
pub fn rename_refs(ret: Return, renamed: &HashMap<&str, &str>) -> Return {
    match ret {
        Return::Result(mut r) if !renamed.is_empty() => {
            for o in &mut r.objects {
                if let Some(Value::String(id)) = o.get_mut(REF_ID) {
                    if let Some(now) = renamed.get(id.as_str()) {
                        *id = now.to_string();
                    }
                }
            }
            Return::Result(r)
        }
        other => other,
    }
}

/// A stored result's line in the transcript: what the model was told, then the
/// `_REF_ID`s of its objects.
pub fn listed(line: &str, refs: &[String]) -> String {
    if refs.is_empty() {
        line.to_string()
    } else {
        format!("{line} [{}]", refs.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool_results::ResultObject;

    fn result(ids: &[&str]) -> Return {
        let mut r = ResultObject::new("things", Vec::new());
        for id in ids {
            let mut o = serde_json::Map::new();
            o.insert("name".into(), Value::String(id.to_string()));
            if !id.is_empty() {
                o.insert(REF_ID.into(), Value::String(id.to_string()));
            }
            r.objects.push(o);
        }
        Return::Result(r)
    }

    fn ids(ret: &Return) -> Vec<String> {
        let Return::Result(r) = ret else {
            return Vec::new();
        };
        r.objects
            .iter()
            .map(|o| o[REF_ID].as_str().unwrap_or_default().to_string())
            .collect()
    }

    #[test]
    fn objects_are_tagged_first_and_renamed_as_committed() {
        let tagged = tag_refs(
            result(&["", ""]),
            &["t_things_0_0".into(), "t_things_0_1".into()],
        );
        assert_eq!(ids(&tagged), ["t_things_0_0", "t_things_0_1"]);
        let Return::Result(r) = &tagged else { panic!() };
        assert_eq!(
            r.objects[0].keys().next().unwrap(),
            REF_ID,
            "the id comes first"
        );
        let renamed = rename_refs(tagged, &HashMap::from([("t_things_0_1", "t_things_1_1")]));
        assert_eq!(ids(&renamed), ["t_things_0_0", "t_things_1_1"]);
        // A count that does not match leaves the objects as they are.
        assert_eq!(ids(&tag_refs(result(&["a"]), &[])), ["a"]);
    }

    #[test]
    fn a_line_lists_its_ids_when_it_has_any() {
        assert_eq!(listed("calc: 2 + 2 = 4", &[]), "calc: 2 + 2 = 4");
        assert_eq!(
            listed("calc: 2 + 2 = 4", &["calc_calc_0_0".into()]),
            "calc: 2 + 2 = 4 [calc_calc_0_0]"
        );
    }
}
