//! A request's sampling settings under the names OpenAI-compatible servers take.
//! `frequency_penalty` and `presence_penalty` are OpenAI's own and go everywhere. The
//! others are extra fields: llama.cpp's server takes `repeat_penalty`,
//! `repeat_last_n`, `min_p` and the `dry_*` fields; vLLM takes `repetition_penalty` and
//! `min_p`. They are never sent to OpenAI's own API, which refuses unknown fields, and a
//! server that answers them with HTTP 400 is asked again without them (the run warns
//! once).

use serde_json::{json, Map, Value};

use crate::Redraw;
use sopsim_core::scenario::{LlmSettings, TokenWindow};

/// A redraw asks for more variety: this much more frequency penalty per attempt.
const REDRAW_FREQUENCY_STEP: f32 = 0.5;

fn last_n(w: TokenWindow) -> i64 {
    match w {
        TokenWindow::Tokens(n) => i64::from(n),
        // llama.cpp's "the whole context".
        TokenWindow::All(_) => -1,
    }
}

/// The penalties OpenAI's API itself takes, a redraw's extra variety included.
pub(super) fn standard(s: &LlmSettings, redraw: Option<&Redraw>, body: &mut Map<String, Value>) {
    let extra = redraw.map_or(0.0, |r| REDRAW_FREQUENCY_STEP * r.attempt as f32);
    let frequency = s.frequency_penalty.unwrap_or(0.0) + extra;
    if s.frequency_penalty.is_some() || extra > 0.0 {
        body.insert("frequency_penalty".into(), json!(frequency.min(2.0)));
    }
    if let Some(p) = s.presence_penalty {
        body.insert("presence_penalty".into(), json!(p));
    }
}

/// The extra fields the settings ask for (none when they set none of them).
pub(super) fn extras(s: &LlmSettings) -> Map<String, Value> {
    let mut m = Map::new();
    if let Some(p) = s.repeat_penalty {
        m.insert("repeat_penalty".into(), json!(p));
        m.insert("repetition_penalty".into(), json!(p));
    }
    if let Some(w) = s.repeat_window {
        m.insert("repeat_last_n".into(), json!(last_n(w)));
    }
    if let Some(p) = s.min_p {
        m.insert("min_p".into(), json!(p));
    }
    if let Some(x) = s.dry_multiplier {
        m.insert("dry_multiplier".into(), json!(x));
    }
    if let Some(x) = s.dry_base {
        m.insert("dry_base".into(), json!(x));
    }
    if let Some(x) = s.dry_allowed_length {
        m.insert("dry_allowed_length".into(), json!(x));
    }
    if let Some(w) = s.dry_window {
        m.insert("dry_penalty_last_n".into(), json!(last_n(w)));
    }
    if let Some(b) = &s.dry_breakers {
        m.insert("dry_sequence_breakers".into(), json!(b));
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use sopsim_core::scenario::AllTokens;

    #[test]
    fn settings_go_under_the_servers_names() {
        let s = LlmSettings {
            frequency_penalty: Some(0.3),
            presence_penalty: Some(0.2),
            repeat_penalty: Some(1.2),
            repeat_window: Some(TokenWindow::All(AllTokens::All)),
            dry_multiplier: Some(0.8),
            dry_window: Some(TokenWindow::Tokens(512)),
            dry_breakers: Some(vec!["\n".into()]),
            min_p: Some(0.05),
            ..LlmSettings::default()
        };
        let mut body = Map::new();
        standard(&s, None, &mut body);
        assert_eq!(
            Value::Object(body),
            json!({"frequency_penalty": 0.3f32, "presence_penalty": 0.2f32})
        );
        assert_eq!(
            Value::Object(extras(&s)),
            json!({
                "repeat_penalty": 1.2f32, "repetition_penalty": 1.2f32, "repeat_last_n": -1,
                "min_p": 0.05f32, "dry_multiplier": 0.8f32, "dry_penalty_last_n": 512,
                "dry_sequence_breakers": ["\n"],
            })
        );
        assert!(extras(&LlmSettings::default()).is_empty());
        let mut body = Map::new();
        let redraw = Redraw {
            attempt: 2,
            cause: sopsim_core::quality::RedrawCause::Copy,
            avoid: Vec::new(),
        };
        standard(&LlmSettings::default(), Some(&redraw), &mut body);
        assert_eq!(Value::Object(body), json!({"frequency_penalty": 1.0}));
    }
}
