//! How far raters (people, judge models) agree: Krippendorff's alpha over a matrix of
//! ratings with gaps, Spearman's and Pearson's correlation between two raters, and a
//! seeded percentile bootstrap of any statistic over items. Pure functions over plain
//! numbers.
//!
//! Alpha is computed as the reference Python package `krippendorff` (0.9.0) computes it,
//! and the correlations as `scipy.stats` does. The bootstrap resamples as [`crate::stats`]
//! does for its intervals (ChaCha8 seeded from a `u64`, `n` indices drawn with
//! replacement, the percentile taken at the nearest rank), so a mean's interval here,
//! from seed 0 with as many resamples, is the one the report gives.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The level of measurement of ratings, which sets how far apart two values are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Categories: two values agree or they do not.
    Nominal,
    /// Ranks: the distance between two values grows with how many ratings lie between
    /// them.
    Ordinal,
    /// Numbers: the squared difference.
    Interval,
}

/// Krippendorff's alpha of `data`, where `data[r][i]` is rater `r`'s value for item `i`
/// (`None` when the rater gave none): 1 for perfect agreement, 0 for agreement no
/// better than chance. Rows may differ in length; a row's missing tail is missing values.
///
/// Only items with at least two values count. `None` when alpha is undefined: no such
/// item, a single distinct value among them (no disagreement is possible), or a value
/// that is not finite.
pub fn krippendorff_alpha(data: &[Vec<Option<f64>>], level: Level) -> Option<f64> {
    if data.iter().flatten().flatten().any(|v| !v.is_finite()) {
        return None;
    }
    let items = data.iter().map(Vec::len).max().unwrap_or(0);
    let units: Vec<Vec<f64>> = (0..items)
        .map(|item| {
            data.iter()
                .filter_map(|row| row.get(item).copied().flatten())
                .collect::<Vec<f64>>()
        })
        .filter(|values| values.len() >= 2)
        .collect();
    if units.is_empty() {
        return None;
    }

    // The scale: the distinct values, sorted. Comparing with `<` and `==` rather than by
    // total order keeps 0 and −0 one value, as numpy does.
    let mut scale: Vec<f64> = units.iter().flatten().copied().collect();
    scale.sort_by(f64::total_cmp);
    scale.dedup_by(|a, b| *a == *b);
    let units: Vec<Vec<usize>> = units
        .iter()
        .map(|values| {
            values
                .iter()
                .map(|&v| scale.partition_point(|known| *known < v))
                .collect()
        })
        .collect();

    // The marginals of the coincidence matrix: how often each value was given within
    // the items that count.
    let mut counts = vec![0.0_f64; scale.len()];
    for &value in units.iter().flatten() {
        counts[value] += 1.0;
    }
    let total: f64 = counts.iter().sum();
    let mut cumulative = vec![0.0_f64; scale.len() + 1];
    for (value, count) in counts.iter().enumerate() {
        cumulative[value + 1] = cumulative[value] + count;
    }
    let distance = |c: usize, k: usize| -> f64 {
        match level {
            Level::Nominal => {
                if c == k {
                    0.0
                } else {
                    1.0
                }
            }
            Level::Ordinal => {
                let (low, high) = (c.min(k), c.max(k));
                let between = cumulative[high + 1] - cumulative[low];
                (between - (counts[low] + counts[high]) / 2.0).powi(2)
            }
            Level::Interval => (scale[c] - scale[k]).powi(2),
        }
    };

    // The observed and expected disagreements, each times the number of values, which
    // cancels in their ratio. Each item adds every ordered pair of its values, weighted
    // 1/(m − 1) for m values; a value is at distance 0 from itself, so pairing a rating
    // with itself adds nothing.
    let observed: f64 = units
        .iter()
        .map(|unit| {
            let pairs: f64 = unit
                .iter()
                .map(|&c| unit.iter().map(|&k| distance(c, k)).sum::<f64>())
                .sum();
            pairs / (unit.len() - 1) as f64
        })
        .sum();
    let expected: f64 = (0..scale.len())
        .map(|c| {
            (0..scale.len())
                .map(|k| counts[c] * counts[k] * distance(c, k))
                .sum::<f64>()
        })
        .sum::<f64>()
        / (total - 1.0);
    (expected > 0.0).then_some(1.0 - observed / expected)
}

/// Spearman's rank correlation of `x` and `y`: Pearson's correlation of their ranks,
/// tied values sharing the mean of the ranks they span (as `scipy.stats.spearmanr`).
/// `None` as for [`pearson`], or for a value that is not finite.
pub fn spearman(x: &[f64], y: &[f64]) -> Option<f64> {
    if x.iter().chain(y).any(|v| !v.is_finite()) {
        return None;
    }
    pearson(&average_ranks(x), &average_ranks(y))
}

/// Pearson's correlation of `x` and `y`; `None` for lengths that differ, fewer than two
/// points, a side whose values are all equal, or a value that is not finite.
pub fn pearson(x: &[f64], y: &[f64]) -> Option<f64> {
    if x.len() != y.len() || x.len() < 2 || x.iter().chain(y).any(|v| !v.is_finite()) {
        return None;
    }
    // Checked on the values, not the sums of squares, which rounding leaves just above
    // zero for some constant values.
    if x.iter().all(|v| *v == x[0]) || y.iter().all(|v| *v == y[0]) {
        return None;
    }
    let n = x.len() as f64;
    let mean_x = x.iter().sum::<f64>() / n;
    let mean_y = y.iter().sum::<f64>() / n;
    let (mut xy, mut xx, mut yy) = (0.0_f64, 0.0_f64, 0.0_f64);
    for (a, b) in x.iter().zip(y) {
        let (dx, dy) = (a - mean_x, b - mean_y);
        xy += dx * dy;
        xx += dx * dx;
        yy += dy * dy;
    }
    let r = xy / (xx.sqrt() * yy.sqrt());
    r.is_finite().then_some(r.clamp(-1.0, 1.0))
}

/// The ranks of `values` from 1, tied values sharing the mean of the ranks they span.
fn average_ranks(values: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| values[a].total_cmp(&values[b]));
    let mut ranks = vec![0.0; values.len()];
    let mut start = 0;
    while start < order.len() {
        let first = values[order[start]];
        let tied = 1 + order[start + 1..]
            .iter()
            .take_while(|&&i| values[i] == first)
            .count();
        // Sorted positions start .. start + tied hold ranks start + 1 ..= start + tied.
        let rank = start as f64 + (tied as f64 + 1.0) / 2.0;
        for &i in &order[start..start + tied] {
            ranks[i] = rank;
        }
        start += tied;
    }
    ranks
}

/// The percentile bootstrap interval at `confidence` (0.95 for 95%) of a statistic of
/// `n` items: `statistic` is given the indices of a resample, `n` drawn with replacement,
/// `resamples` times from a ChaCha8 generator seeded with `seed`, so the same seed gives
/// the same interval.
///
/// A resample whose statistic is `None` (or not finite) is skipped. `None` when fewer
/// than half the resamples give a value, for no items or no resamples, or for a
/// confidence outside (0, 1).
pub fn bootstrap_interval(
    n: usize,
    statistic: &dyn Fn(&[usize]) -> Option<f64>,
    resamples: usize,
    seed: u64,
    confidence: f64,
) -> Option<(f64, f64)> {
    if n == 0 || resamples == 0 || !(confidence > 0.0 && confidence < 1.0) {
        return None;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut drawn = vec![0_usize; n];
    let mut values = Vec::with_capacity(resamples);
    for _ in 0..resamples {
        for index in &mut drawn {
            *index = rng.random_range(0..n);
        }
        if let Some(value) = statistic(drawn.as_slice()).filter(|v| v.is_finite()) {
            values.push(value);
        }
    }
    if values.len() * 2 < resamples {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let last = values.len() - 1;
    let at = |q: f64| values[((q * last as f64).round() as usize).min(last)];
    let tail = (1.0 - confidence) / 2.0;
    Some((at(tail), at(1.0 - tail)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{summarize, Method};

    /// A missing rating in the matrices below.
    const NA: f64 = f64::NAN;

    fn ratings(rows: &[&[f64]]) -> Vec<Vec<Option<f64>>> {
        rows.iter()
            .map(|row| row.iter().map(|v| (!v.is_nan()).then_some(*v)).collect())
            .collect()
    }

    fn near(actual: Option<f64>, expected: f64, tolerance: f64) {
        let actual = actual.unwrap();
        assert!(
            (actual - expected).abs() < tolerance,
            "{actual} against {expected}"
        );
    }

    fn assert_alphas(data: &[Vec<Option<f64>>], expected: [(Level, f64); 3]) {
        for (level, alpha) in expected {
            near(krippendorff_alpha(data, level), alpha, 1e-9);
        }
    }

    // Reference values from the `krippendorff` package 0.9.0 (research/measuring/
    // krippendorff), each also checked there against an exact rational computation.
    #[test]
    fn alpha_matches_the_reference_package() {
        // Item 12 has a single rating, so it does not count.
        let m1 = ratings(&[
            &[7., 3., 9., 5., 2., 8., NA, 6., 10., 4., 1., 7.],
            &[8., 3., 9., 4., 2., 7., 5., 6., 9., NA, 0., NA],
            &[7., 4., 10., 5., 3., 8., 5., NA, 9., 4., 1., NA],
            &[NA, 2., 9., 6., 2., 9., 6., 7., NA, 5., NA, NA],
        ]);
        // Exactly 2621/2769, 1951009/2059752 and 165/646.
        assert_alphas(
            &m1,
            [
                (Level::Interval, 0.9465511014806789),
                (Level::Ordinal, 0.947205780113334),
                (Level::Nominal, 0.2554179566563468),
            ],
        );
        let m2 = ratings(&[
            &[-5., -2., 0., 3., 5., 1., -1., 2.],
            &[-4., -2., 1., 3., 4., NA, -1., 0.],
            &[-5., -3., 0., 2., 5., 2., NA, 1.],
        ]);
        // Exactly 3823/4012, 9038/9647 and 17/62.
        assert_alphas(
            &m2,
            [
                (Level::Interval, 0.9528913260219342),
                (Level::Ordinal, 0.9368715662900383),
                (Level::Nominal, 0.27419354838709664),
            ],
        );
    }

    #[test]
    fn alpha_matches_krippendorffs_published_example() {
        // Krippendorff (2011), "Computing Krippendorff's alpha-reliability", 4 coders ×
        // 12 units; the paper gives nominal 0.743 and ordinal 0.815.
        let data = ratings(&[
            &[1., 2., 3., 3., 2., 1., 4., 1., 2., NA, NA, NA],
            &[1., 2., 3., 3., 2., 2., 4., 1., 2., 5., NA, 3.],
            &[NA, 3., 3., 3., 2., 3., 4., 2., 2., 5., 1., NA],
            &[1., 2., 3., 3., 2., 4., 4., 1., 2., 5., 1., NA],
        ]);
        assert_alphas(
            &data,
            [
                (Level::Nominal, 0.743421052631579),
                (Level::Ordinal, 0.8153875037548814),
                (Level::Interval, 0.8491071428571428),
            ],
        );
    }

    #[test]
    fn perfect_agreement_is_one_and_undefined_alpha_is_none() {
        let agreeing = ratings(&[&[1., 2., 3., NA], &[1., 2., NA, 4.], &[1., NA, 3., 4.]]);
        for level in [Level::Nominal, Level::Ordinal, Level::Interval] {
            assert_eq!(krippendorff_alpha(&agreeing, level), Some(1.0));
        }
        // No item with two ratings; a single distinct value; nothing at all.
        let unpaired = ratings(&[&[1., NA], &[NA, 2.]]);
        assert_eq!(krippendorff_alpha(&unpaired, Level::Interval), None);
        let constant = ratings(&[&[3., 3.], &[3., 3.]]);
        assert_eq!(krippendorff_alpha(&constant, Level::Nominal), None);
        assert_eq!(krippendorff_alpha(&[], Level::Ordinal), None);
        let infinite = [
            vec![Some(1.0), Some(f64::INFINITY)],
            vec![Some(1.0), Some(2.0)],
        ];
        assert_eq!(krippendorff_alpha(&infinite, Level::Interval), None);
    }

    // Reference values from scipy.stats 1.17.1; both pairs have ties on both sides.
    #[test]
    fn correlations_match_scipy_with_ties() {
        let x = [1., 2., 2., 3., 4., 4., 4., 5., 6., 7.];
        let y = [2., 1., 3., 3., 5., 4., 6., 6., 8., 7.];
        // The no-ties shortcut 1 − 6Σd²/(n(n² − 1)) would give 0.9393939393939394.
        near(spearman(&x, &y), 0.93812095999547, 1e-12);
        near(pearson(&x, &y), 0.91305728641498, 1e-12);
        let judge = [8., 6., 6., 9., 3., 5., 7., 7., 2., 10., 4., 6.];
        let human = [7., 6., 5., 9., 4., 5., 8., 6., 2., 9., 3., 7.];
        near(spearman(&judge, &human), 0.9289535079995846, 1e-12);
        near(pearson(&judge, &human), 0.9350682287580275, 1e-12);
    }

    #[test]
    fn correlations_are_none_where_undefined() {
        assert_eq!(pearson(&[1., 2.], &[1., 2., 3.]), None);
        assert_eq!(spearman(&[1.], &[2.]), None);
        assert_eq!(pearson(&[0.1, 0.1, 0.1], &[1., 2., 3.]), None);
        assert_eq!(spearman(&[1., 2., 3.], &[5., 5., 5.]), None);
        assert_eq!(spearman(&[1., f64::NAN], &[1., 2.]), None);
    }

    #[test]
    fn the_bootstrap_is_seeded_and_resamples_as_the_report_does() {
        let values: Vec<f64> = (0..20).map(|i| f64::from(i * i % 7)).collect();
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        let statistic = |drawn: &[usize]| {
            Some(drawn.iter().map(|&i| values[i]).sum::<f64>() / drawn.len() as f64)
        };
        let (lo, hi) = bootstrap_interval(values.len(), &statistic, 2_000, 7, 0.95).unwrap();
        assert!(lo < mean && mean < hi, "{lo} {mean} {hi}");
        assert_eq!(
            bootstrap_interval(values.len(), &statistic, 2_000, 7, 0.95),
            Some((lo, hi)),
            "seeded: the same each time"
        );
        // The report's bootstrap of a mean over 20 runs: 10,000 resamples from seed 0.
        let report = summarize(&values, Method::Bootstrap).unwrap().ci95.unwrap();
        assert_eq!(
            bootstrap_interval(values.len(), &statistic, 10_000, 0, 0.95),
            Some((report[0], report[1]))
        );
    }

    #[test]
    fn resamples_without_a_statistic_are_skipped() {
        // Three items: a resample draws the same item three times with chance 1/9.
        let mixed = |drawn: &[usize]| drawn.iter().any(|&i| i != drawn[0]).then_some(1.0_f64);
        assert_eq!(
            bootstrap_interval(3, &mixed, 1_000, 1, 0.9),
            Some((1.0, 1.0))
        );
        let uniform = |drawn: &[usize]| drawn.iter().all(|&i| i == drawn[0]).then_some(1.0_f64);
        assert_eq!(bootstrap_interval(3, &uniform, 1_000, 1, 0.9), None);
        assert_eq!(bootstrap_interval(0, &mixed, 1_000, 1, 0.9), None);
        assert_eq!(bootstrap_interval(3, &mixed, 1_000, 1, 1.0), None);
    }
}
