//! The statistics of a report: mean, standard deviation and a Student-t 95% interval
//! per figure, the paired difference between two modes over the same seeds, and the
//! Gini coefficient behind `equality`. Pure functions over plain numbers.

use serde::Serialize;
use statrs::distribution::{ContinuousCDF, StudentsT};

/// One figure over the runs of one scenario and mode.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Runs with a value for this figure.
    pub n: usize,
    pub mean: f64,
    /// Sample standard deviation (n − 1); `null` for a single run.
    pub sd: Option<f64>,
    /// Student-t 95% confidence interval of the mean; `null` for a single run.
    pub ci95: Option<[f64; 2]>,
    pub min: f64,
    pub max: f64,
}

/// The paired difference `b − a` over the seeds both modes have a value for.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Difference {
    pub n: usize,
    pub mean: f64,
    pub sd: Option<f64>,
    pub ci95: Option<[f64; 2]>,
    /// Two-sided p-value of the paired t-test; `null` when it is undefined (fewer than
    /// two pairs, or all differences equal).
    pub p: Option<f64>,
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

/// Mean, spread and 95% interval of `values`; `None` when there are none.
pub fn summarize(values: &[f64]) -> Option<Summary> {
    if values.is_empty() {
        return None;
    }
    let m = mean(values);
    let sd = sample_sd(values, m);
    Some(Summary {
        n: values.len(),
        mean: m,
        sd,
        ci95: interval(m, sd, values.len()),
        min: values.iter().copied().fold(f64::INFINITY, f64::min),
        max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    })
}

/// The paired difference `b − a` of values matched by key (the run's random seed); `None` without pairs.
pub fn paired<K: Ord>(a: &[(K, f64)], b: &[(K, f64)]) -> Option<Difference> {
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
    let n = values.len() as f64;
    let pair_sum: f64 = values
        .iter()
        .flat_map(|x| values.iter().map(move |y| (x - y).abs()))
        .sum();
    Some(pair_sum / (2.0 * n * total))
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
        let s = summarize(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).unwrap();
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
        let s = summarize(&[3.0]).unwrap();
        assert_eq!((s.n, s.mean, s.sd, s.ci95), (1, 3.0, None, None));
        assert_eq!(summarize(&[]), None);
    }

    #[test]
    fn paired_difference_matches_seeds_and_tests_against_zero() {
        let a = [(1, 10.0), (2, 12.0), (3, 9.0), (4, 11.0)];
        let b = [(4, 14.0), (3, 11.0), (2, 15.0), (1, 12.0), (9, 100.0)];
        // differences by seed: 2, 3, 2, 3 → mean 2.5, sd 0.57735, t = 8.660254
        let d = paired(&a, &b).unwrap();
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
        let same = paired(&a, &a).unwrap();
        assert_eq!((same.mean, same.p), (0.0, None));
    }

    #[test]
    fn tiny_p_values_keep_their_precision() {
        // Two runs: 1 degree of freedom (Cauchy), two-sided p = 2/π·atan(1/t).
        let a = [(1, 0.0), (2, 0.0)];
        let b = [(1, 1.0), (2, 1.0 + 1e-12)];
        let d = paired(&a, &b).unwrap();
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
    fn gini_of_known_distributions() {
        assert_eq!(gini(&[5.0, 5.0, 5.0]), Some(0.0));
        // one holds everything among four: (n − 1) / n
        assert!(close(gini(&[0.0, 0.0, 0.0, 8.0]).unwrap(), 0.75));
        // 1, 2, 3: Σ|xi − xj| = 8, 2·n²·mean = 36 → 2/9
        assert!(close(gini(&[1.0, 2.0, 3.0]).unwrap(), 2.0 / 9.0));
        assert_eq!(gini(&[0.0, 0.0]), Some(0.0));
        assert_eq!(gini(&[-1.0, 3.0]), None);
    }
}
