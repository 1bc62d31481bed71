//! Reading llama.cpp's reference files (`tests/reference/*.py`): token ids, and how far
//! a row of our logits is from llama.cpp's highest ones.

/// Token ids from a JSON array.
pub(crate) fn ids(value: &serde_json::Value) -> Vec<u32> {
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_u64().unwrap() as u32)
        .collect()
}

/// The largest |Δlogit| between `row` and llama.cpp's `top` (`[[id, logit], …]`).
pub(crate) fn gap(row: &[f32], top: &serde_json::Value) -> f32 {
    top.as_array()
        .unwrap()
        .iter()
        .map(|e| (row[e[0].as_u64().unwrap() as usize] - e[1].as_f64().unwrap() as f32).abs())
        .fold(0f32, f32::max)
}

/// The token `row` rates highest (the first, among equals).
pub(crate) fn argmax(row: &[f32]) -> u32 {
    (0..row.len()).fold(0, |b, i| if row[i] > row[b] { i } else { b }) as u32
}
