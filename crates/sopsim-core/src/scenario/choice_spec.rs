//! The `choice` component: a closed decision among listed values or a numeric range.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A closed decision: the model picks one option (with the probability of each, where
/// the backend can tell), so every turn has a valid decision whatever the model writes.
/// Stored on the turn's message as `decision: {value, probabilities}`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ChoiceSpec {
    /// The options (at least two, all different).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
    /// Numeric options instead: `[min, max, step]`, the step dividing the range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<[f64; 3]>,
    /// With a `range`: a formula over the world (`world.fish`, `me.wallet`, `round`);
    /// options above its value are not offered this turn (a catch of at most what is
    /// in the lake). At least the range's first option always is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_most: Option<String>,
    /// The question (default: "Make your choice.").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// `reply` (the default): the agent speaks freely, then chooses; `instead`: the
    /// choice is the whole turn.
    #[serde(default)]
    pub after: ChoiceTiming,
}

/// When a role's choice is made.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ChoiceTiming {
    /// The agent speaks freely, then makes the choice.
    #[default]
    Reply,
    /// The choice is the whole turn.
    Instead,
}

/// Numeric choices are at most this many options.
pub(super) const MAX_RANGE_OPTIONS: usize = 1000;

impl ChoiceSpec {
    /// The options, in order: `values`, or the numbers of `range` written as briefly as
    /// the step allows (`0`, `2.5`…). Empty when the spec is invalid (validation says
    /// why).
    pub fn options(&self) -> Vec<String> {
        if !self.values.is_empty() {
            return self.values.clone();
        }
        let Some([min, max, step]) = self.range else {
            return Vec::new();
        };
        match range_count(min, max, step) {
            Ok(n) => {
                let decimals = decimals(step).max(decimals(min));
                (0..n)
                    .map(|i| format_number(min + i as f64 * step, decimals))
                    .collect()
            }
            Err(_) => Vec::new(),
        }
    }
}

/// Why `[min, max, step]` is not a usable range of numbers.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RangeError {
    /// One of the three numbers is infinite or not a number.
    #[error("the range must be three finite numbers")]
    NotFinite,
    /// `min` is not below `max`.
    #[error("[{min}, {max}, {step}] is empty or inverted: min must be below max")]
    Empty {
        /// The range's first number.
        min: f64,
        /// The range's last number.
        max: f64,
        /// The step between options.
        step: f64,
    },
    /// The step is zero or negative.
    #[error("the step {0} must be positive")]
    Step(f64),
    /// The step does not divide the distance from `min` to `max` a whole number of times.
    #[error("the step {step} does not divide the range {min}..{max}")]
    Uneven {
        /// The range's first number.
        min: f64,
        /// The range's last number.
        max: f64,
        /// The step between options.
        step: f64,
    },
    /// The range would hold this many options, more than allowed.
    #[error("{0} options; at most {MAX_RANGE_OPTIONS}")]
    TooMany(f64),
}

/// How many numbers `[min, max, step]` holds.
pub fn range_count(min: f64, max: f64, step: f64) -> Result<usize, RangeError> {
    if !(min.is_finite() && max.is_finite() && step.is_finite()) {
        return Err(RangeError::NotFinite);
    }
    if min >= max {
        return Err(RangeError::Empty { min, max, step });
    }
    if step <= 0.0 {
        return Err(RangeError::Step(step));
    }
    let steps = (max - min) / step;
    if (steps - steps.round()).abs() > 1e-9 * steps.max(1.0) {
        return Err(RangeError::Uneven { min, max, step });
    }
    let n = steps.round() + 1.0;
    if n > MAX_RANGE_OPTIONS as f64 {
        return Err(RangeError::TooMany(n));
    }
    Ok(n as usize)
}

/// Decimal places needed to write `x` (at most 6).
fn decimals(x: f64) -> usize {
    (0..=6)
        .find(|d| {
            let scaled = x * 10f64.powi(*d as i32);
            (scaled - scaled.round()).abs() < 1e-9
        })
        .unwrap_or(6)
}

fn format_number(x: f64, decimals: usize) -> String {
    let s = format!("{x:.decimals$}");
    if s == "-0" {
        "0".into()
    } else {
        s
    }
}
