//! A request's sampling settings as the local engine draws with them: the scenario's
//! `llm` settings, the engine's defaults for what they leave unset, DRY's breaker
//! strings as the tokens that hold them and its twin tokens, the tokens holding a
//! forbidden string, and a redraw's penalty on what the last draw copied.

use std::collections::HashMap;
use std::sync::Arc;

use tokenizers::Tokenizer;

use sopsim_infer::penalties::{Dry, Penalties, Window};
use sopsim_infer::sampling::SamplingParams;

use crate::Redraw;
use sopsim_core::scenario::{LlmSettings, TokenWindow};

/// The engine's defaults, for settings a scenario leaves unset.
pub(super) mod defaults {
    pub(crate) const TEMPERATURE: f32 = 0.7;
    /// llama.cpp's default: the long tail of a 150,000-token vocabulary is where a
    /// small model's garbled and foreign words come from.
    pub(crate) const MIN_P: f32 = 0.05;
    pub(crate) const REPEAT_PENALTY: f32 = 1.1;
    pub(crate) const REPEAT_WINDOW: usize = 64;
    pub(crate) const DRY_MULTIPLIER: f32 = 0.8;
    pub(crate) const DRY_BASE: f32 = 1.75;
    pub(crate) const DRY_ALLOWED_LENGTH: usize = 2;
    pub(crate) const DRY_BREAKERS: [&str; 4] = ["\n", ":", "\"", "*"];
    /// Subtracted from the logits of a redrawn reply's avoided tokens, per attempt.
    pub(crate) const REDRAW_PENALTY: f32 = 2.0;
}

fn window(w: Option<TokenWindow>, default: Window) -> Window {
    match w {
        None => default,
        Some(TokenWindow::Tokens(n)) => Window::Last(n as usize),
        Some(TokenWindow::All(_)) => Window::All,
    }
}

/// What the settings need of the vocabulary, found once: the text of every token, the
/// string lists already looked up (DRY's breakers, forbidden strings), and the word
/// tokens' twins.
#[derive(Default)]
pub(super) struct TokenTexts {
    texts: Option<Vec<String>>,
    found: HashMap<Vec<String>, Vec<u32>>,
    twins: Option<Arc<[(u32, u32)]>>,
}

impl TokenTexts {
    fn texts(&mut self, tokenizer: &Tokenizer) -> &[String] {
        self.texts.get_or_insert_with(|| {
            (0..tokenizer.get_vocab_size(true) as u32)
                .map(|id| tokenizer.decode(&[id], false).unwrap_or_default())
                .collect()
        })
    }

    /// Pairs of tokens (both orders, sorted) that hold the same word of letters, one
    /// with a leading space and one without.
    fn twins(&mut self, tokenizer: &Tokenizer) -> Arc<[(u32, u32)]> {
        if let Some(twins) = &self.twins {
            return twins.clone();
        }
        let texts = self.texts(tokenizer);
        let bare: HashMap<&str, u32> = texts
            .iter()
            .enumerate()
            .filter(|(_, t)| !t.is_empty() && t.chars().all(char::is_alphabetic))
            .map(|(id, t)| (t.as_str(), id as u32))
            .collect();
        let mut twins: Vec<(u32, u32)> = texts
            .iter()
            .enumerate()
            .filter_map(|(id, t)| {
                let word = t.strip_prefix(' ')?;
                let other = *bare.get(word)?;
                Some([(id as u32, other), (other, id as u32)])
            })
            .flatten()
            .collect();
        twins.sort_unstable();
        twins.dedup_by_key(|&mut (t, _)| t);
        let twins: Arc<[(u32, u32)]> = twins.into();
        self.twins = Some(twins.clone());
        twins
    }

    /// The tokens (sorted) whose text holds any of `strings`.
    fn holding(&mut self, tokenizer: &Tokenizer, strings: &[String]) -> Vec<u32> {
        if let Some(found) = self.found.get(strings) {
            return found.clone();
        }
        let tokens: Vec<u32> = self
            .texts(tokenizer)
            .iter()
            .enumerate()
            .filter(|(_, t)| strings.iter().any(|s| t.contains(s.as_str())))
            .map(|(id, _)| id as u32)
            .collect();
        self.found.insert(strings.to_vec(), tokens.clone());
        tokens
    }

    /// The tokens that `forbid`'s `strings` leave out: those holding one, special
    /// tokens (the end of a turn) aside.
    fn forbidden(&mut self, tokenizer: &Tokenizer, strings: &[String]) -> Vec<u32> {
        let special = tokenizer.get_added_tokens_decoder();
        let mut tokens = self.holding(tokenizer, strings);
        tokens.retain(|id| !special.get(id).is_some_and(|t| t.special));
        tokens
    }
}

/// What the sampler draws with for a request's `settings` (and its redraw, if it is
/// one). `free_text` is a reply or a summary, which `forbid` applies to; a decision's
/// JSON and an extract step's tags are written under their own rules.
pub(super) fn params(
    settings: &LlmSettings,
    redraw: Option<&Redraw>,
    free_text: bool,
    tokenizer: &Tokenizer,
    token_texts: &mut TokenTexts,
) -> SamplingParams {
    let multiplier = settings.dry_multiplier.unwrap_or(defaults::DRY_MULTIPLIER);
    let dry = (multiplier > 0.0).then(|| {
        let strings: Vec<String> = settings.dry_breakers.clone().unwrap_or_else(|| {
            defaults::DRY_BREAKERS
                .iter()
                .map(|s| s.to_string())
                .collect()
        });
        Dry {
            multiplier,
            base: settings.dry_base.unwrap_or(defaults::DRY_BASE),
            allowed_length: settings
                .dry_allowed_length
                .map_or(defaults::DRY_ALLOWED_LENGTH, |n| n as usize),
            window: window(settings.dry_window, Window::All),
            breakers: token_texts.holding(tokenizer, &strings),
            twins: token_texts.twins(tokenizer),
        }
    });
    let (avoid, avoid_penalty) = match redraw {
        Some(r) => {
            let mut tokens: Vec<u32> = r
                .avoid
                .iter()
                .filter_map(|text| super::encode(tokenizer, text).ok())
                .flatten()
                .collect();
            tokens.sort_unstable();
            tokens.dedup();
            (tokens, defaults::REDRAW_PENALTY * r.attempt as f32)
        }
        None => (Vec::new(), 0.0),
    };
    let forbidden = match &settings.forbid {
        Some(strings) if free_text && !strings.is_empty() => {
            token_texts.forbidden(tokenizer, strings)
        }
        _ => Vec::new(),
    };
    SamplingParams {
        temperature: settings.temperature.unwrap_or(defaults::TEMPERATURE),
        top_k: settings.top_k,
        top_p: settings.top_p,
        min_p: Some(settings.min_p.unwrap_or(defaults::MIN_P)),
        penalties: Penalties {
            repeat: settings.repeat_penalty.unwrap_or(defaults::REPEAT_PENALTY),
            frequency: settings.frequency_penalty.unwrap_or(0.0),
            presence: settings.presence_penalty.unwrap_or(0.0),
            window: window(
                settings.repeat_window,
                Window::Last(defaults::REPEAT_WINDOW),
            ),
            dry,
            avoid,
            avoid_penalty,
            forbidden,
        },
    }
}
