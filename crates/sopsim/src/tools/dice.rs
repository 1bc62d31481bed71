//! The `dice` tool: dice rolled from the run's seed, the agent, the turn and the step,
//! so a run replays exactly and two seeds differ.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Map, Value};

use sopsim_core::scenario::tool_settings::DiceSettings;

use super::kind::{Computed, Kind, Start};
use super::{Setup, ToolCallPlace, ToolFailure, ToolSetupError};

impl Start for DiceSettings {
    async fn start(self, _: &mut Setup<'_>) -> Result<Box<dyn Kind>, ToolSetupError> {
        Ok(Box::new(Computed {
            parameters,
            run,
            message: "rolled {rolls} (total {total})",
        }))
    }
}

/// The JSON schema of the tool's arguments: `sides` and `count`, both optional.
pub fn parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "sides": {"type": "integer", "minimum": 2, "maximum": 1000, "description": "faces per die (default 6)"},
            "count": {"type": "integer", "minimum": 1, "maximum": 100, "description": "how many dice (default 1)"},
        },
        "additionalProperties": false,
    })
}

/// Rolls `count` dice of `sides` faces (default one six-sided die), seeded by the call's
/// place, as a result object `{sides, total, rolls}`.
pub fn run(
    args: &Map<String, Value>,
    place: &ToolCallPlace,
) -> Result<Map<String, Value>, ToolFailure> {
    let sides = args.get("sides").and_then(Value::as_u64).unwrap_or(6);
    let count = args.get("count").and_then(Value::as_u64).unwrap_or(1);
    let mut h = xxhash_rust::xxh3::Xxh3::with_seed(place.run_seed);
    h.update(place.agent.as_bytes());
    h.update(&place.turn.to_le_bytes());
    h.update(&place.step.to_le_bytes());
    let mut rng = ChaCha8Rng::seed_from_u64(h.digest());
    let rolls: Vec<u64> = (0..count).map(|_| rng.random_range(1..=sides)).collect();
    let mut obj = Map::new();
    obj.insert("sides".into(), json!(sides));
    obj.insert("total".into(), json!(rolls.iter().sum::<u64>()));
    obj.insert("rolls".into(), json!(rolls));
    Ok(obj)
}
