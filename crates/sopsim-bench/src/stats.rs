//! The statistics of a report: mean, standard deviation and a 95% interval per figure,
//! the paired difference between two modes over the same seeds, and the Gini
//! coefficient behind `equality`. Pure functions over plain numbers.
//!
//! Intervals: Student-t for unbounded figures (counts, tokens, payoffs); for bounded
//! ones (rates, shares, probabilities, indices in [0, 1]) a bootstrap percentile
//! interval over the runs, which stays inside the values' range, and a paired
//! sign-flip permutation test for the difference. Resampling is seeded, so a report is
//! the same every time it is made. Its cost is bounded: fewer resamples for larger
//! samples, and past [`RESAMPLED_AT_MOST`] runs the normal interval and test, which the
//! bootstrap's and the permutation test's then match, kept within the values' range.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use schemars::JsonSchema;
use serde::Serialize;
use statrs::distribution::{ContinuousCDF, StudentsT};

/// How an interval (and a difference's p) was computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// Student-t interval; paired t-test.
    StudentT,
    /// Bootstrap percentile interval (10,000 resamples up to 100 runs, then 1,000,000
    /// draws in all, at least 1,000 resamples); paired sign-flip permutation test
    /// (exact up to 16 pairs, else 20,000 random flips up to 50 pairs, then 1,000,000
    /// signs in all).
    Bootstrap,
    /// For a bounded figure over more than [`RESAMPLED_AT_MOST`] runs: the normal
    /// interval, kept within the values' range, and the normal test.
    Normal,
}

impl Method {
    /// The method for a figure whose values are `bounded` within a range.
    pub fn for_figure(bounded: bool) -> Self {
        if bounded {
            Method::Bootstrap
        } else {
            Method::StudentT
        }
    }

    /// The method used over `n` values: the bootstrap becomes the normal interval past
    /// [`RESAMPLED_AT_MOST`] values.
    fn for_size(self, n: usize) -> Self {
        match self {
            Method::Bootstrap if n > RESAMPLED_AT_MOST => Method::Normal,
            other => other,
        }
    }
}

const RESAMPLES: usize = 10_000;
const FLIPS: usize = 20_000;
/// The values drawn, or signs flipped, for one interval or test at most.
const DRAWS: usize = 1_000_000;
/// The most runs a bounded figure is resampled over; beyond, it is summed up by the
/// normal interval and test.
pub const RESAMPLED_AT_MOST: usize = 1_000;
/// Every pattern of signs is tried up to this many pairs.
const EXACT_FLIPS: usize = 16;

/// One figure over the runs of one scenario and mode.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Runs with a value for this figure.
    pub n: usize,
    /// The mean over those runs.
    pub mean: f64,
    /// Sample standard deviation (n − 1); `null` for a single run.
    pub sd: Option<f64>,
    /// 95% confidence interval of the mean (by `method`); `null` for a single run.
    pub ci95: Option<[f64; 2]>,
    /// The least value.
    pub min: f64,
    /// The greatest value.
    pub max: f64,
    /// How `ci95` was computed.
    pub method: Method,
}

/// A statistic and its 95% interval (a bootstrap's, where the statistic has no
/// formula for one).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize, JsonSchema)]
pub struct Estimate {
    /// The statistic.
    pub value: f64,
    /// Absent where there is too little to resample.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ci95: Option<[f64; 2]>,
}

/// The paired difference `b − a` over the seeds both modes have a value for.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Difference {
    /// Seeds with a value in both modes: the pairs.
    pub n: usize,
    /// The mean of the differences.
    pub mean: f64,
    /// Sample standard deviation of the differences (n − 1); `null` for a single pair.
    pub sd: Option<f64>,
    /// 95% confidence interval of the mean difference (by `method`); `null` for a single
    /// pair.
    pub ci95: Option<[f64; 2]>,
    /// Two-sided p-value of the paired test (by `method`); `null` when it is undefined
    /// (fewer than two pairs, or all differences equal).
    pub p: Option<f64>,
    /// How `ci95` and `p` were computed.
    pub method: Method,
}

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

fn sample_sd(values: &[f64], mean: f64) -> Option<f64> {
    (values.len() > 1).then(|| {
        let ss: f64 = values.iter().map(|v| (v - mean).powi(2)).sum();
        (ss / (values.len() - 1) as f64).sqrt()
    })
}

/// The two-sided 97.5% quantile of Student's t with `df` degrees of freedom.
fn t975(df: usize) -> f64 {
    StudentsT::new(0.0, 1.0, df as f64)
        .map(|t| t.inverse_cdf(0.975))
        .unwrap_or(f64::NAN)
}

fn interval(mean: f64, sd: Option<f64>, n: usize) -> Option<[f64; 2]> {
    let half = t975(n.checked_sub(1)?) * sd? / (n as f64).sqrt();
    half.is_finite().then_some([mean - half, mean + half])
}

/// The 2.5th and 97.5th percentiles of the means of `values` resampled with
/// replacement; `None` for fewer than two values.
fn bootstrap(values: &[f64]) -> Option<[f64; 2]> {
    let n = values.len();
    if n < 2 {
        return None;
    }
    let resamples = (DRAWS / n).clamp(1_000, RESAMPLES);
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let mut means: Vec<f64> = (0..resamples)
        .map(|_| (0..n).map(|_| values[rng.random_range(0..n)]).sum::<f64>() / n as f64)
        .collect();
    means.sort_by(f64::total_cmp);
    let at = |q: f64| means[((q * (resamples - 1) as f64).round() as usize).min(resamples - 1)];
    Some([at(0.025), at(0.975)])
}

/// The normal 95% interval of the mean, kept within the values' range.
fn normal_interval(values: &[f64], mean: f64, sd: Option<f64>) -> Option<[f64; 2]> {
    let half = 1.959_963_984_540_054 * sd? / (values.len() as f64).sqrt();
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    half.is_finite()
        .then_some([(mean - half).max(lo), (mean + half).min(hi)])
}

/// The two-sided p of the normal test that the mean of `diffs` is zero.
fn normal_p(mean: f64, sd: Option<f64>, n: usize) -> Option<f64> {
    let s = sd.filter(|s| *s > 0.0)?;
    let z = mean / (s / (n as f64).sqrt());
    let normal = statrs::distribution::Normal::new(0.0, 1.0).ok()?;
    Some((2.0 * normal.sf(z.abs())).clamp(0.0, 1.0))
}

/// Two-sided p of the paired sign-flip permutation test: how often flipping the signs
/// of the differences gives a mean at least as far from zero.
fn sign_flip_p(diffs: &[f64]) -> Option<f64> {
    let n = diffs.len();
    let observed = mean(diffs).abs();
    if n < 2 || diffs.iter().all(|d| *d == diffs[0]) && observed == 0.0 {
        return None;
    }
    // Ties in floating point count as "as far".
    let far = |sum: f64| (sum / n as f64).abs() >= observed - 1e-12 * observed.max(1.0);
    if n <= EXACT_FLIPS {
        let patterns = 1u64 << n;
        let hits = (0..patterns)
            .filter(|bits| {
                far(diffs
                    .iter()
                    .enumerate()
                    .map(|(i, d)| if bits >> i & 1 == 1 { -d } else { *d })
                    .sum())
            })
            .count();
        return Some(hits as f64 / patterns as f64);
    }
    let flips = (DRAWS / n).clamp(1_000, FLIPS);
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    // The observed pattern counts once, so p is never zero.
    let hits = (0..flips)
        .filter(|_| {
            far(diffs
                .iter()
                .map(|d| if rng.random_bool(0.5) { -d } else { *d })
                .sum())
        })
        .count();
    Some((hits + 1) as f64 / (flips + 1) as f64)
}

/// Mean, spread and 95% interval of `values` by `method`; `None` when there are none.
pub fn summarize(values: &[f64], method: Method) -> Option<Summary> {
    if values.is_empty() {
        return None;
    }
    let m = mean(values);
    let sd = sample_sd(values, m);
    let method = method.for_size(values.len());
    let ci95 = match method {
        Method::StudentT => interval(m, sd, values.len()),
        Method::Bootstrap => bootstrap(values),
        Method::Normal => normal_interval(values, m, sd),
    };
    Some(Summary {
        n: values.len(),
        mean: m,
        sd,
        ci95,
        min: values.iter().copied().fold(f64::INFINITY, f64::min),
        max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        method,
    })
}

/// The paired difference `b − a` of values matched by key (the run's random seed), by
/// `method`; `None` without pairs.
pub fn paired<K: Ord>(a: &[(K, f64)], b: &[(K, f64)], method: Method) -> Option<Difference> {
    let by_key: std::collections::BTreeMap<&K, f64> = a.iter().map(|(k, v)| (k, *v)).collect();
    let diffs: Vec<f64> = b
        .iter()
        .filter_map(|(k, vb)| by_key.get(k).map(|va| vb - va))
        .collect();
    if diffs.is_empty() {
        return None;
    }
    let n = diffs.len();
    let m = mean(&diffs);
    let sd = sample_sd(&diffs, m);
    let method = method.for_size(n);
    if method == Method::Normal {
        return Some(Difference {
            n,
            mean: m,
            sd,
            ci95: normal_interval(&diffs, m, sd),
            p: normal_p(m, sd, n),
            method,
        });
    }
    if method == Method::Bootstrap {
        return Some(Difference {
            n,
            mean: m,
            sd,
            ci95: bootstrap(&diffs),
            p: sign_flip_p(&diffs),
            method,
        });
    }
    let p = sd.filter(|s| *s > 0.0).and_then(|s| {
        let t = m / (s / (n as f64).sqrt());
        let dist = StudentsT::new(0.0, 1.0, (n - 1) as f64).ok()?;
        // The survival function keeps small p-values that 1 − cdf rounds to zero.
        Some((2.0 * dist.sf(t.abs())).clamp(0.0, 1.0))
    });
    Some(Difference {
        n,
        mean: m,
        sd,
        ci95: interval(m, sd, n),
        p,
        method,
    })
}

/// The Gini coefficient of non-negative values (0 = equal shares); `None` when a value
/// is negative, where the coefficient has no meaning.
pub fn gini(values: &[f64]) -> Option<f64> {
    if values.is_empty() || values.iter().any(|v| *v < 0.0 || !v.is_finite()) {
        return None;
    }
    let total: f64 = values.iter().sum();
    if total == 0.0 {
        return Some(0.0);
    }
    // Σ|xi − xj| over ordered pairs is 2·Σ (2i − n + 1)·x(i) over the sorted values.
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len() as f64;
    let weighted: f64 = sorted
        .iter()
        .enumerate()
        .map(|(i, x)| (2.0 * i as f64 - n + 1.0) * x)
        .sum();
    Some(weighted / (n * total))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn summary_matches_hand_computed_values() {
        // mean 5, sample variance 32/7, t(7, 0.975) = 2.364624251592785
        let s = summarize(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0], Method::StudentT).unwrap();
        assert_eq!(s.n, 8);
        assert!(close(s.mean, 5.0));
        let sd = (32.0f64 / 7.0).sqrt();
        assert!(close(s.sd.unwrap(), sd));
        let half = 2.364624251592785 * sd / 8f64.sqrt();
        let [lo, hi] = s.ci95.unwrap();
        assert!(close(lo, 5.0 - half) && close(hi, 5.0 + half), "{lo} {hi}");
        assert_eq!((s.min, s.max), (2.0, 9.0));
    }

    #[test]
    fn a_single_run_has_a_mean_but_no_spread() {
        let s = summarize(&[3.0], Method::StudentT).unwrap();
        assert_eq!((s.n, s.mean, s.sd, s.ci95), (1, 3.0, None, None));
        assert_eq!(summarize(&[], Method::Bootstrap), None);
    }

    #[test]
    fn paired_difference_matches_seeds_and_tests_against_zero() {
        let a = [(1, 10.0), (2, 12.0), (3, 9.0), (4, 11.0)];
        let b = [(4, 14.0), (3, 11.0), (2, 15.0), (1, 12.0), (9, 100.0)];
        // differences by seed: 2, 3, 2, 3 → mean 2.5, sd 0.57735, t = 8.660254
        let d = paired(&a, &b, Method::StudentT).unwrap();
        assert_eq!(d.n, 4);
        assert!(close(d.mean, 2.5));
        assert!(close(d.sd.unwrap(), (1.0f64 / 3.0).sqrt()));
        // two-sided p for t = 5·√3 with 3 df, from the closed form of the t CDF at
        // 3 df: 1 − 2/π·(5/26 + atan 5) = 0.0032390370765
        assert!(
            (d.p.unwrap() - 0.003_239_037_076_5).abs() < 1e-9,
            "{:?}",
            d.p
        );
        let same = paired(&a, &a, Method::StudentT).unwrap();
        assert_eq!((same.mean, same.p), (0.0, None));
    }

    #[test]
    fn tiny_p_values_keep_their_precision() {
        // Two runs: 1 degree of freedom (Cauchy), two-sided p = 2/π·atan(1/t).
        let a = [(1, 0.0), (2, 0.0)];
        let b = [(1, 1.0), (2, 1.0 + 1e-12)];
        let d = paired(&a, &b, Method::StudentT).unwrap();
        let t = d.mean / (d.sd.unwrap() / 2f64.sqrt());
        let exact = 2.0 / std::f64::consts::PI * (1.0 / t).atan();
        assert!(exact < 1e-11 && exact > 0.0);
        assert!(
            ((d.p.unwrap() - exact) / exact).abs() < 1e-6,
            "{:?} vs {exact}",
            d.p
        );
    }

    #[test]
    fn past_a_thousand_runs_a_rate_gets_the_normal_interval_the_bootstrap_would_give() {
        // 1,200 runs, a third of them 1: the normal interval, and the bootstrap's of the
        // same values (resampled as for fewer runs) agree to the third decimal.
        let rates: Vec<f64> = (0..1_200).map(|i| f64::from(i % 3 == 0)).collect();
        let s = summarize(&rates, Method::Bootstrap).unwrap();
        assert_eq!(s.method, Method::Normal);
        let [lo, hi] = s.ci95.unwrap();
        let [blo, bhi] = bootstrap(&rates).unwrap();
        assert!(
            (lo - blo).abs() < 2e-3 && (hi - bhi).abs() < 2e-3,
            "{lo} {hi} against {blo} {bhi}"
        );
        let a: Vec<(usize, f64)> = rates.iter().copied().enumerate().collect();
        let b: Vec<(usize, f64)> = a.iter().map(|(k, v)| (*k, v * 0.5)).collect();
        let d = paired(&a, &b, Method::Bootstrap).unwrap();
        assert_eq!(d.method, Method::Normal);
        assert!(d.p.unwrap() < 1e-6, "{:?}", d.p);
        assert_eq!(
            summarize(&rates[..1_000], Method::Bootstrap)
                .unwrap()
                .method,
            Method::Bootstrap
        );
    }

    #[test]
    fn gini_of_known_distributions() {
        assert_eq!(gini(&[5.0, 5.0, 5.0]), Some(0.0));
        // one holds everything among four: (n − 1) / n
        assert!(close(gini(&[0.0, 0.0, 0.0, 8.0]).unwrap(), 0.75));
        // 1, 2, 3: Σ|xi − xj| = 8, 2·n²·mean = 36 → 2/9
        assert!(close(gini(&[1.0, 2.0, 3.0]).unwrap(), 2.0 / 9.0));
        assert_eq!(gini(&[0.0, 0.0]), Some(0.0));
        assert_eq!(gini(&[-1.0, 3.0]), None);
    }

    #[test]
    fn bounded_figures_get_intervals_inside_their_range() {
        // The report's example: a rate near 1 whose Student-t interval passes 1.
        let rates = [1.0, 1.0, 0.75, 1.0, 1.0, 0.75, 1.0, 1.0];
        let t = summarize(&rates, Method::StudentT).unwrap().ci95.unwrap();
        assert!(t[1] > 1.0, "{t:?}");
        let b = summarize(&rates, Method::Bootstrap).unwrap();
        let [lo, hi] = b.ci95.unwrap();
        assert!(
            0.75 <= lo && lo < b.mean && b.mean < hi && hi <= 1.0,
            "{lo} {hi}"
        );
        assert_eq!(
            summarize(&rates, Method::Bootstrap),
            Some(b),
            "seeded: the same each time"
        );
    }

    #[test]
    fn the_sign_flip_test_is_exact_for_few_pairs() {
        // Four differences all positive: of the 16 sign patterns, only all-positive and
        // all-negative are as far from zero: p = 2/16.
        let a = [(1, 0.0), (2, 0.0), (3, 0.0), (4, 0.0)];
        let b = [(1, 0.5), (2, 0.5), (3, 0.5), (4, 0.5)];
        let d = paired(&a, &b, Method::Bootstrap).unwrap();
        assert_eq!(d.p, Some(0.125));
        assert_eq!(d.ci95, Some([0.5, 0.5]));
        assert_eq!(paired(&a, &a, Method::Bootstrap).unwrap().p, None);
        // Many pairs: sampled, never 0.
        let many_a: Vec<(u64, f64)> = (0..40).map(|i| (i, 0.0)).collect();
        let many_b: Vec<(u64, f64)> = (0..40).map(|i| (i, 0.1 + i as f64 * 1e-3)).collect();
        let p = paired(&many_a, &many_b, Method::Bootstrap)
            .unwrap()
            .p
            .unwrap();
        assert!(p > 0.0 && p < 0.001, "{p}");
    }
}
