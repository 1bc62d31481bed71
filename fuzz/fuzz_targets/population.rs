//! A population section as a user might write it: measured before it is made, and
//! never made past that measure. Each member's rendered style stays within the bound
//! `footprint` gave, which is what lets loading refuse a file before expanding it.
#![no_main]

use indexmap::IndexMap;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use sopsim::scenario::{expand_population, footprint, PersonaSource, PopulationSpec};

fuzz_target!(|data: &[u8]| {
    let Ok(spec) = serde_json::from_slice::<PopulationSpec>(data) else {
        return;
    };
    // Expansion is linear in the count: a few thousand members say as much as more.
    if spec.count > 2_000 {
        return;
    }
    let rows: Vec<IndexMap<String, Value>> = match &spec.personas {
        Some(PersonaSource::Rows(rows)) => rows.clone(),
        _ => Vec::new(),
    };
    let Ok(measured) = footprint(&spec, &rows) else {
        return;
    };
    let members = expand_population("crowd", &spec, &rows).expect("measured, so it expands");
    for (_, agent) in &members {
        assert!(
            agent.style.len() <= measured.style_bytes,
            "a style of {} bytes past its bound of {}",
            agent.style.len(),
            measured.style_bytes
        );
    }
});
