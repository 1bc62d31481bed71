//! f32 products with a matrix laid out once for AVX2 and FMA: the sentence encoder's
//! dense layers on CPUs with AVX2 but neither AVX-512 nor AMX.
//!
//! `gemm` lays its right-hand matrix out again on every call; for one message of
//! sixty tokens that copy of the weights is a fifth of the product's time. Here the
//! weights are laid out once, in panels of sixteen outputs, each panel input by input,
//! and the product streams them as they are: six token rows times sixteen outputs in
//! twelve registers, two loads and six broadcasts per twelve fused multiply-adds.

use crate::compute;

/// Outputs per panel: two eight-lane registers.
const PANEL: usize = 16;
/// Rows of the left-hand matrix per step: 6 × 2 accumulators, with room left for the
/// two panel loads and a broadcast in the sixteen registers.
const ROWS: usize = 6;
/// Products with fewer multiply-adds than this run on the calling thread.
const PARALLEL_MACS: usize = 1 << 22;

/// A matrix `[n, k]` in panels of [`PANEL`] rows, each stored input by input
/// (`data[(p · k + i) · PANEL + c] = w[p · PANEL + c][i]`, rows past `n` zero).
pub(crate) struct Panels {
    n: usize,
    k: usize,
    data: Vec<f32>,
}

impl Panels {
    /// The layout of `w`, `[n, k]` row by row; `None` where the CPU lacks AVX2 or FMA
    /// or the sizes do not match.
    pub(crate) fn new(w: &[f32], n: usize, k: usize) -> Option<Panels> {
        if !available() || n == 0 || k == 0 || w.len() != n * k {
            return None;
        }
        let panels = n.div_ceil(PANEL);
        let mut data = vec![0f32; panels * k * PANEL];
        for (r, row) in w.chunks_exact(k).enumerate() {
            let (p, c) = (r / PANEL, r % PANEL);
            for (i, v) in row.iter().enumerate() {
                data[(p * k + i) * PANEL + c] = *v;
            }
        }
        Some(Panels { n, k, data })
    }

    /// `out[t] += x[t] · wᵀ` for `rows` rows of `k` values (`out` is `rows × n`).
    pub(crate) fn product(&self, x: &[f32], rows: usize, out: &mut [f32]) {
        assert!(x.len() >= rows * self.k && out.len() >= rows * self.n);
        let panels = self.n.div_ceil(PANEL);
        let parts = if rows * self.n * self.k >= PARALLEL_MACS {
            compute::threads().min(panels)
        } else {
            1
        };
        // Each part owns a run of panels, so of columns of `out`: written through a
        // pointer, as the columns of one row belong to several parts.
        let out_at = SharedOut(out.as_mut_ptr());
        let run = |first: usize, last: usize| {
            for p in first..last {
                // SAFETY: `new` checked the CPU's features; panel `p` writes only its
                // own columns of each row, and the rows and panels are in bounds.
                unsafe { self.panel(p, x, rows, &out_at) }
            }
        };
        if parts <= 1 {
            return run(0, panels);
        }
        let per = panels.div_ceil(parts);
        let tasks: Vec<_> = (0..parts)
            .map(|t| {
                let run = &run;
                move || run(t * per, ((t + 1) * per).min(panels))
            })
            .collect();
        compute::run_all(tasks);
    }

    /// Panel `p`'s columns of every row of `out`, [`ROWS`] rows at a time.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn panel(&self, p: usize, x: &[f32], rows: usize, out: &SharedOut) {
        let mut r = 0;
        while r < rows {
            match rows - r {
                1 => self.block::<1>(p, x, r, out),
                2 => self.block::<2>(p, x, r, out),
                3 => self.block::<3>(p, x, r, out),
                4 => self.block::<4>(p, x, r, out),
                5 => self.block::<5>(p, x, r, out),
                _ => self.block::<ROWS>(p, x, r, out),
            }
            r += ROWS;
        }
    }

    #[cfg(not(target_arch = "x86_64"))]
    unsafe fn panel(&self, _: usize, _: &[f32], _: usize, _: &SharedOut) {
        unreachable!("panels are made only on x86-64")
    }

    /// Rows `first..first + R` times panel `p`, added into `out`.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn block<const R: usize>(&self, p: usize, x: &[f32], first: usize, out: &SharedOut) {
        use std::arch::x86_64::*;
        let k = self.k;
        let w = self.data.as_ptr().add(p * k * PANEL);
        let x = x.as_ptr().add(first * k);
        let mut acc = [[_mm256_setzero_ps(); 2]; R];
        for i in 0..k {
            let w0 = _mm256_loadu_ps(w.add(i * PANEL));
            let w1 = _mm256_loadu_ps(w.add(i * PANEL + 8));
            for (r, a) in acc.iter_mut().enumerate() {
                let v = _mm256_broadcast_ss(&*x.add(r * k + i));
                a[0] = _mm256_fmadd_ps(v, w0, a[0]);
                a[1] = _mm256_fmadd_ps(v, w1, a[1]);
            }
        }
        let columns = (self.n - p * PANEL).min(PANEL);
        for (r, a) in acc.iter().enumerate() {
            let dest = out.0.add((first + r) * self.n + p * PANEL);
            if columns == PANEL {
                _mm256_storeu_ps(dest, _mm256_add_ps(_mm256_loadu_ps(dest), a[0]));
                let high = dest.add(8);
                _mm256_storeu_ps(high, _mm256_add_ps(_mm256_loadu_ps(high), a[1]));
            } else {
                let mut lanes = [0f32; PANEL];
                _mm256_storeu_ps(lanes.as_mut_ptr(), a[0]);
                _mm256_storeu_ps(lanes.as_mut_ptr().add(8), a[1]);
                for (c, v) in lanes.iter().take(columns).enumerate() {
                    *dest.add(c) += v;
                }
            }
        }
    }
}

/// `out`'s start, shared by the parts of a product that write disjoint columns.
struct SharedOut(*mut f32);

// SAFETY: the parts of a product write disjoint columns of `out` (see `product`).
unsafe impl Sync for SharedOut {}

/// Whether the CPU runs the panel products: AVX2 and FMA without AVX-512 (whose CPUs
/// `gemm` serves with sixteen-lane kernels) on x86-64.
pub(crate) fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        crate::quant::Kernels::detect() == crate::quant::Kernels::Avx2
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panel_products_match_the_plain_sums() {
        if !available() {
            return;
        }
        // Sizes that leave partial panels and partial row blocks.
        for (rows, n, k) in [(1, 16, 8), (7, 40, 33), (13, 1152, 384), (65, 384, 1536)] {
            let w: Vec<f32> = (0..n * k)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) / 64.0)
                .collect();
            let x: Vec<f32> = (0..rows * k)
                .map(|i| ((i * 53 % 89) as f32 - 44.0) / 32.0)
                .collect();
            let bias: Vec<f32> = (0..n).map(|c| c as f32 / 8.0).collect();
            let mut out: Vec<f32> = (0..rows).flat_map(|_| bias.iter().copied()).collect();
            Panels::new(&w, n, k).unwrap().product(&x, rows, &mut out);
            for t in 0..rows {
                for c in 0..n {
                    let want: f64 = f64::from(bias[c])
                        + (0..k)
                            .map(|i| f64::from(x[t * k + i]) * f64::from(w[c * k + i]))
                            .sum::<f64>();
                    let got = f64::from(out[t * n + c]);
                    assert!(
                        (got - want).abs() <= 1e-4 * want.abs().max(1.0),
                        "{rows}×{n}×{k} at ({t}, {c}): {got} against {want}"
                    );
                }
            }
        }
    }
}
