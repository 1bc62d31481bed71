//! The worked examples of seed 000, and the differences from Elysia that the module
//! documents.

use super::*;
use serde_json::json;

fn obj(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap()
}

fn objs(v: Value) -> Vec<Map<String, Value>> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|o| obj(o.clone()))
        .collect()
}

/// Elysia's starting environment: `query` and `aggregate` already called.
fn seed_store() -> Store {
    let mut s = Store::new();
    s.add_objects(
        "query",
        "message_result",
        objs(json!([
            {"message_id": 1, "message_content": "Hi this is an example message about frogs!"},
            {"message_id": 2, "message_content": "Hi this is also an example message about reindeer!"}
        ])),
        obj(json!({"collection_name": "example_email_messages_collection", "query_search_term": "animals"})),
        false,
    );
    s.add_objects(
        "aggregate",
        "pet_food_result",
        objs(json!([{"average_price": 45.99, "product_count": 150}])),
        obj(json!({"collection_name": "pet_food", "group_by": {"field": "animal", "value": "frog"}})),
        false,
    );
    s
}

#[test]
fn a_result_under_an_existing_key_appends_an_entry() {
    let mut s = seed_store();
    let mut reindeer = ResultObject::new(
        "pet_food_result",
        objs(json!([{"average_price": 12.52, "product_count": 33}])),
    );
    reindeer.metadata = obj(
        json!({"collection_name": "pet_food", "group_by": {"field": "animal", "value": "reindeer"}}),
    );
    s.add("aggregate", &reindeer, false);
    let entries = s.find("aggregate", "pet_food_result").unwrap();
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[1].metadata["group_by"]["value"], "reindeer");
    assert_eq!(
        entries[1].objects[0]["_REF_ID"],
        "aggregate_pet_food_result_1_0"
    );
    assert_eq!(
        s.to_json()["environment"].as_object().unwrap().len(),
        2,
        "no new tool key"
    );
}

#[test]
fn add_creates_keys_for_a_tool_never_seen() {
    let mut s = seed_store();
    let frog = ResultObject::new(
        "animal_description",
        objs(json!([{"animal": "frog", "description": "Green and slimy"}])),
    );
    s.add("descriptor", &frog, false);
    let e = s.find_entry("descriptor", "animal_description", 0).unwrap();
    assert_eq!(
        Value::Object(e.objects[0].clone()),
        json!({"_REF_ID": "descriptor_animal_description_0_0", "animal": "frog", "description": "Green and slimy"})
    );
    assert_eq!(e.metadata, Map::new());
}

#[test]
fn replace_swaps_the_whole_list_for_one_entry() {
    let mut s = seed_store();
    s.add(
        "descriptor",
        &ResultObject::new("animal_description", objs(json!([{"animal": "frog"}]))),
        false,
    );
    s.replace(
        "descriptor",
        "animal_description",
        objs(json!([{"animal": "reindeer", "description": "Has a red nose"}])),
        Map::new(),
        None,
    )
    .unwrap();
    let entries = s.find("descriptor", "animal_description").unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].objects[0]["animal"], "reindeer");
    assert!(
        s.get_by_ref("descriptor_animal_description_0_0").is_none(),
        "the replaced object's id is gone"
    );
    assert_eq!(
        s.get_by_ref("descriptor_animal_description_1_0").unwrap()["animal"],
        "reindeer"
    );
    s.replace("nope", "x", vec![], Map::new(), None).unwrap();
    assert!(
        s.find("nope", "x").is_none(),
        "replace on a missing key does nothing"
    );
}

#[test]
fn find_and_remove_by_index_like_python() {
    let mut s = seed_store();
    s.add_objects(
        "aggregate",
        "pet_food_result",
        objs(json!([{"average_price": 1}])),
        Map::new(),
        false,
    );
    assert_eq!(
        s.find_entry("aggregate", "pet_food_result", -1)
            .unwrap()
            .objects[0]["average_price"],
        1
    );
    assert!(s.find("aggregate", "missing").is_none());
    s.remove("aggregate", "pet_food_result", Some(-1)).unwrap();
    assert_eq!(s.find("aggregate", "pet_food_result").unwrap().len(), 1);
    assert_eq!(
        s.remove("aggregate", "pet_food_result", Some(5)),
        Err(StoreError::IndexOutOfRange {
            tool: "aggregate".into(),
            name: "pet_food_result".into(),
            index: 5,
            len: 1
        })
    );
    s.remove("aggregate", "pet_food_result", None).unwrap();
    assert_eq!(
        s.find("aggregate", "pet_food_result").unwrap().len(),
        0,
        "the key stays, empty"
    );
}

#[test]
fn is_empty_counts_emptied_lists_as_empty() {
    let mut s = Store::new();
    assert!(s.is_empty());
    s.add_objects("t", "n", vec![], Map::new(), false);
    assert!(s.is_empty(), "an empty add creates the key only");
    s.add_objects("t", "n", objs(json!([{"a": 1}])), Map::new(), false);
    assert!(!s.is_empty());
    s.remove("t", "n", None).unwrap();
    assert!(s.is_empty());
}

#[test]
fn duplicates_are_found_by_content_even_without_ref_ids() {
    let mut s = Store::new();
    for _ in 0..3 {
        s.add_objects(
            "t",
            "n",
            objs(json!([{"a": 1, "b": [1, 2]}])),
            Map::new(),
            false,
        );
    }
    let entries = s.find("t", "n").unwrap();
    assert_eq!(entries[0].objects[0]["_REF_ID"], "t_n_0_0");
    for e in &entries[1..] {
        assert_eq!(
            Value::Object(e.objects[0].clone()),
            json!({"object_info": "[repeat]", "_REF_ID": "t_n_0_0"})
        );
    }
    s.add_objects(
        "t",
        "n",
        objs(json!([{"b": [1, 2], "a": 1}])),
        Map::new(),
        false,
    );
    assert_eq!(
        s.find_entry("t", "n", -1).unwrap().objects[0]["object_info"],
        "[repeat]",
        "key order does not matter"
    );
    s.add_objects(
        "t",
        "n",
        objs(json!([{"a": 1, "b": [1, 2]}])),
        Map::new(),
        true,
    );
    assert_eq!(
        s.find_entry("t", "n", -1).unwrap().objects[0]["_REF_ID"],
        "t_n_4_0",
        "include_duplicates stores a copy"
    );
    let stored = s.get_by_ref("t_n_0_0").unwrap().clone();
    s.add_objects("t", "n", vec![stored], Map::new(), false);
    assert_eq!(
        s.find_entry("t", "n", -1).unwrap().objects[0]["object_info"],
        "[repeat]",
        "re-adding a stored object"
    );
    s.add_objects(
        "t",
        "other",
        objs(json!([{"a": 1, "b": [1, 2]}])),
        Map::new(),
        false,
    );
    assert_eq!(
        s.find_entry("t", "other", 0).unwrap().objects[0]["_REF_ID"],
        "t_other_0_0",
        "keys do not interact"
    );
}

#[test]
fn a_removed_original_is_no_longer_a_duplicate_target() {
    let mut s = Store::new();
    s.add_objects("t", "n", objs(json!([{"a": 1}])), Map::new(), false);
    s.remove("t", "n", Some(0)).unwrap();
    s.add_objects("t", "n", objs(json!([{"a": 1}])), Map::new(), false);
    assert_eq!(
        s.find_entry("t", "n", 0).unwrap().objects[0]["_REF_ID"],
        "t_n_1_0",
        "entry numbers are never reused"
    );
}

#[test]
fn ref_ids_resolve_and_hidden_data_stays_out_of_the_environment() {
    let mut s = seed_store();
    assert_eq!(
        s.get_by_ref("query_message_result_0_1").unwrap()["message_id"],
        2
    );
    s.hidden_mut()
        .insert("raw".into(), json!({"scores": [0.9]}));
    let j = s.to_json();
    assert_eq!(j["hidden_environment"]["raw"]["scores"][0], 0.9);
    assert!(j["environment"].get("raw").is_none());
    assert!(
        Store::new().hidden().is_empty(),
        "each store has its own hidden store"
    );
}
