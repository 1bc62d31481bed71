//! The figures every run has, from its `summary.json`: turns, calls, tokens, parse
//! failures, reply quality, and (never in the deterministic report) its timing.

use indexmap::IndexMap;
use serde::Deserialize;

use super::extract::Figures;

/// The parts of `summary.json` the report uses.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct SummaryFigures {
    pub turns: u64,
    /// The run's seed (its networks are drawn from it).
    #[serde(default)]
    pub seed: u64,
    pub ended_by: String,
    #[serde(default)]
    pub error: Option<String>,
    pub llm_calls: IndexMap<String, u64>,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    #[serde(default)]
    pub prompt_tokens_by_turn: Vec<u64>,
    pub parse_failures: ParseFailureFigures,
    pub wall_ms: u64,
    pub llm_latency_ms: LatencyFigures,
    /// Absent from runs of sopsim versions before it was counted.
    #[serde(default)]
    pub prompt_cache_share: Option<f64>,
    /// Each state's model calls; absent as `prompt_cache_share` is.
    #[serde(default)]
    pub tokens_by_state: IndexMap<String, StateTokens>,
    /// Absent from runs of sopsim versions before it was counted.
    #[serde(default)]
    pub reply_quality: Option<sopsim_core::quality::ReplyQuality>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct ParseFailureFigures {
    pub controller_answers: u64,
    pub judge_answers: u64,
}

/// A state's model calls, as far as the report uses them.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct StateTokens {
    #[serde(default)]
    pub prompt_cache_share: Option<f64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct LatencyFigures {
    pub p50: f64,
    pub p95: f64,
}

/// The generic figures every run has.
pub(crate) fn generic_figures(s: &SummaryFigures) -> Figures {
    let reached = s.ended_by == "end";
    let calls = |k: &str| Some(s.llm_calls.get(k).copied().unwrap_or(0) as f64);
    let mut f = Figures::new();
    f.insert("turns".into(), Some(s.turns as f64));
    f.insert("reached_end".into(), Some(if reached { 1.0 } else { 0.0 }));
    f.insert("turns_to_end".into(), reached.then_some(s.turns as f64));
    f.insert("llm_calls".into(), calls("total"));
    for kind in ["act", "route", "transit", "summary"] {
        f.insert(format!("llm_calls.{kind}"), calls(kind));
    }
    f.insert("prompt_tokens".into(), Some(s.prompt_tokens as f64));
    f.insert("completion_tokens".into(), Some(s.completion_tokens as f64));
    f.insert(
        "prompt_tokens_per_turn".into(),
        (s.turns > 0).then(|| s.prompt_tokens as f64 / s.turns as f64),
    );
    f.insert(
        "controller_failures".into(),
        Some(s.parse_failures.controller_answers as f64),
    );
    f.insert(
        "judge_failures".into(),
        Some(s.parse_failures.judge_answers as f64),
    );
    let q = s.reply_quality.as_ref();
    let rate = |pick: fn(&sopsim_core::quality::QualityRates) -> Option<f64>| {
        q.and_then(|q| pick(&q.rates))
    };
    f.insert("quality.copy".into(), rate(|r| r.copy));
    f.insert("quality.label".into(), rate(|r| r.label));
    f.insert("quality.narration".into(), rate(|r| r.narration));
    f.insert("quality.echo".into(), rate(|r| r.echo));
    f.insert("quality.empty".into(), rate(|r| r.empty));
    f.insert("quality.cut".into(), rate(|r| r.cut));
    f.insert("quality.stage".into(), rate(|r| r.stage));
    f.insert("quality.impersonation".into(), rate(|r| r.impersonation));
    f.insert("quality.foreign".into(), rate(|r| r.foreign));
    f.insert("quality.paraphrase".into(), rate(|r| r.paraphrase));
    f.insert("quality.off_stake".into(), rate(|r| r.off_stake));
    f.insert("quality.refusal".into(), rate(|r| r.refusal));
    f.insert("quality.distinct_2".into(), q.and_then(|q| q.distinct_2));
    f
}

/// Wall time, model latency, and the share of prompt tokens read from the cache (over
/// the run and by state): real, or dependent on what else shared the model's cache at
/// the time, so never part of the deterministic report.
pub(crate) fn timing_figures(s: &SummaryFigures) -> Figures {
    let mut f = IndexMap::from([
        ("wall_ms".to_string(), Some(s.wall_ms as f64)),
        ("latency_p50_ms".to_string(), Some(s.llm_latency_ms.p50)),
        ("latency_p95_ms".to_string(), Some(s.llm_latency_ms.p95)),
        ("prompt_cache_share".to_string(), s.prompt_cache_share),
    ]);
    for (state, tokens) in &s.tokens_by_state {
        f.insert(
            format!("{CACHE_SHARE_BY_STATE}{state}"),
            tokens.prompt_cache_share,
        );
    }
    f
}

/// The prefix of a state's `prompt_cache_share` among the timing figures.
const CACHE_SHARE_BY_STATE: &str = "prompt_cache_share.";

/// Whether a timing figure is a share (within 0 and 1), not a time.
pub(crate) fn is_share(figure: &str) -> bool {
    figure == "prompt_cache_share" || figure.starts_with(CACHE_SHARE_BY_STATE)
}
