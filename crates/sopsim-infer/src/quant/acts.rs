//! Activations quantised for a product: int8 values with one scale per 32 values, and
//! the integer sums of every 16 values (which the formats with an offset or a minimum
//! need).
//!
//! The quantisation is written once and compiled twice (plain and with AVX-512), which
//! gives the same bytes: round-half-to-even and saturating conversions mean the same
//! thing in both.

/// How the inputs of a product with a given weight format are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActFormat {
    /// Plain floats (for float weights).
    Float,
    /// int8 with a scale per 32 values (llama.cpp's Q8_0).
    Q8,
}

/// Rows of int8 values are padded to a multiple of this many tokens (zeros), so that
/// a kernel may load whole tiles of tokens.
pub(super) const TOKEN_TILE: usize = 16;

/// `tokens` rows of `cols` activations in one `ActFormat`. Buffers are reused.
#[derive(Debug, Clone)]
pub struct Acts {
    format: ActFormat,
    tokens: usize,
    cols: usize,
    floats: Vec<f32>,
    /// `tokens` rows (padded to [`TOKEN_TILE`] with zero rows) of `cols` values.
    qs: Vec<i8>,
    /// One per 32 values.
    scales: Vec<f32>,
    /// One per 32 values: their sum.
    sums: Vec<i32>,
    /// One per 16 values: their sum.
    half_sums: Vec<i32>,
}

impl Default for Acts {
    fn default() -> Self {
        Self {
            format: ActFormat::Float,
            tokens: 0,
            cols: 0,
            floats: Vec::new(),
            qs: Vec::new(),
            scales: Vec::new(),
            sums: Vec::new(),
            half_sums: Vec::new(),
        }
    }
}

impl Acts {
    /// The format the activations are stored in.
    pub fn format(&self) -> ActFormat {
        self.format
    }

    /// Rows stored (one per token), padding excluded.
    pub fn tokens(&self) -> usize {
        self.tokens
    }

    /// Activations per row.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Stores `x` (`tokens × cols`, row-major) in `format`. `cols` must be a multiple
    /// of 32.
    pub fn quantize(&mut self, format: ActFormat, x: &[f32], cols: usize) {
        debug_assert!(cols > 0 && x.len().is_multiple_of(cols) && cols.is_multiple_of(32));
        self.format = format;
        self.tokens = x.len() / cols;
        self.cols = cols;
        if format == ActFormat::Float {
            self.floats.clear();
            self.floats.extend_from_slice(x);
            return;
        }
        // Padding rows are zero: values, scales and sums.
        let padded = self.tokens.div_ceil(TOKEN_TILE) * TOKEN_TILE * cols;
        for (buf, per) in [(&mut self.sums, 32), (&mut self.half_sums, 16)] {
            buf.clear();
            buf.resize(padded / per, 0);
        }
        self.qs.clear();
        self.qs.resize(padded, 0);
        self.scales.clear();
        self.scales.resize(padded / 32, 0.0);
        // Tokens are quantised independently: spread them over the compute threads.
        let tokens = self.tokens;
        let pieces = if x.len() >= 1 << 14 {
            crate::compute::threads()
        } else {
            1
        };
        let per = tokens.div_ceil(pieces).max(1);
        let n = per * cols;
        let tasks = x
            .chunks(n)
            .zip(self.qs.chunks_mut(n))
            .zip(self.scales.chunks_mut(n / 32))
            .zip(self.sums.chunks_mut(n / 32))
            .zip(self.half_sums.chunks_mut(n / 16))
            .map(|((((x, qs), scales), sums), half_sums)| {
                move || {
                    let out = Out {
                        qs,
                        scales,
                        sums,
                        half_sums,
                    };
                    #[cfg(target_arch = "x86_64")]
                    if is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bw") {
                        // SAFETY: the features were just checked.
                        return unsafe { quantize_avx512(out, x) };
                    }
                    #[cfg(target_arch = "x86_64")]
                    if is_x86_feature_detected!("avx2") {
                        // SAFETY: the feature was just checked.
                        return unsafe { quantize_blocks_avx2(out, x) };
                    }
                    quantize_blocks(out, x)
                }
            })
            .collect::<Vec<_>>();
        crate::compute::run_all(tasks);
    }

    /// Every token's int8 values, padded (see [`TOKEN_TILE`]).
    pub(super) fn all_qs(&self) -> &[i8] {
        &self.qs
    }

    /// Every token's scales, one per 32 values, padded (see [`TOKEN_TILE`]).
    pub(super) fn all_scales(&self) -> &[f32] {
        &self.scales
    }

    /// Token `t`'s int8 values.
    pub(super) fn qs(&self, t: usize) -> &[i8] {
        &self.qs[t * self.cols..(t + 1) * self.cols]
    }

    pub(super) fn scales(&self, t: usize) -> &[f32] {
        let n = self.cols / 32;
        &self.scales[t * n..(t + 1) * n]
    }

    pub(super) fn sums(&self, t: usize) -> &[i32] {
        let n = self.cols / 32;
        &self.sums[t * n..(t + 1) * n]
    }

    pub(super) fn half_sums(&self, t: usize) -> &[i32] {
        let n = self.cols / 16;
        &self.half_sums[t * n..(t + 1) * n]
    }

    pub(super) fn floats(&self, t: usize) -> &[f32] {
        &self.floats[t * self.cols..(t + 1) * self.cols]
    }
}

/// Where one piece of the tokens is quantised to.
struct Out<'a> {
    qs: &'a mut [i8],
    scales: &'a mut [f32],
    sums: &'a mut [i32],
    half_sums: &'a mut [i32],
}

/// [`quantize_blocks`] with AVX-512: the same bytes (the maximum ignores NaN as
/// `f32::max` does, rounding is to nearest even, NaN becomes 0 as `as i8` makes it).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma")]
unsafe fn quantize_avx512(acts: Out<'_>, x: &[f32]) {
    use std::arch::x86_64::*;
    let abs = _mm512_set1_epi32(0x7FFF_FFFF);
    let (lo, hi) = (_mm512_set1_ps(-127.0), _mm512_set1_ps(127.0));
    for (g, values) in x.chunks_exact(32).enumerate() {
        let a = _mm512_loadu_ps(values.as_ptr());
        let b = _mm512_loadu_ps(values.as_ptr().add(16));
        let abs_a = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), abs));
        let abs_b = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(b), abs));
        // `max(x, lanes)` keeps the lanes when x is NaN, as f32::max does.
        let lanes = _mm512_max_ps(abs_a, _mm512_setzero_ps());
        let lanes = _mm512_max_ps(abs_b, lanes);
        let amax = _mm512_reduce_max_ps(lanes);
        let d = amax / 127.0;
        let id = _mm512_set1_ps(if d > 0.0 { 1.0 / d } else { 0.0 });
        let mut sums = [0i32; 2];
        for (half, v) in [a, b].into_iter().enumerate() {
            let y = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
                _mm512_mul_ps(v, id),
            );
            let not_nan = _mm512_cmp_ps_mask::<_CMP_ORD_Q>(y, y);
            let y = _mm512_maskz_mov_ps(not_nan, _mm512_max_ps(_mm512_min_ps(y, hi), lo));
            let q = _mm512_cvtps_epi32(y);
            _mm_storeu_si128(
                acts.qs.as_mut_ptr().add(g * 32 + 16 * half) as *mut __m128i,
                _mm512_cvtepi32_epi8(q),
            );
            sums[half] = _mm512_reduce_add_epi32(q);
        }
        acts.scales[g] = d;
        acts.half_sums[2 * g] = sums[0];
        acts.half_sums[2 * g + 1] = sums[1];
        acts.sums[g] = sums[0] + sums[1];
    }
}

/// [`quantize_blocks`] compiled for AVX2, which rounds in registers: the baseline's
/// rounding is a call to `rintf` per value.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn quantize_blocks_avx2(acts: Out<'_>, x: &[f32]) {
    quantize_blocks(acts, x)
}

#[inline(always)]
fn quantize_blocks(acts: Out<'_>, x: &[f32]) {
    for (g, (values, q)) in x
        .chunks_exact(32)
        .zip(acts.qs.chunks_exact_mut(32))
        .enumerate()
    {
        // Sixteen lanes, so that the loop vectorises (the maximum is the same in any
        // order).
        let mut lanes = [0f32; 16];
        for c in values.chunks_exact(16) {
            for l in 0..16 {
                lanes[l] = lanes[l].max(c[l].abs());
            }
        }
        let amax = lanes.iter().fold(0f32, |a, b| a.max(*b));
        let d = amax / 127.0;
        let id = if d > 0.0 { 1.0 / d } else { 0.0 };
        for (q, v) in q.iter_mut().zip(values) {
            *q = (v * id).round_ties_even().clamp(-127.0, 127.0) as i8;
        }
        acts.scales[g] = d;
    }
    for (sum, q) in acts.half_sums.iter_mut().zip(acts.qs.chunks_exact(16)) {
        *sum = q.iter().map(|&v| i32::from(v)).sum();
    }
    for (sum, h) in acts.sums.iter_mut().zip(acts.half_sums.chunks_exact(2)) {
        *sum = h[0] + h[1];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Quantized = (Vec<i8>, Vec<u32>, Vec<i32>, Vec<i32>);

    /// `x` quantised by `kernel`: the values, the scales' bits and the sums.
    fn quantized(x: &[f32], kernel: impl Fn(Out<'_>, &[f32])) -> Quantized {
        let n = x.len();
        let (mut qs, mut scales, mut sums, mut half_sums) = (
            vec![0i8; n],
            vec![0f32; n / 32],
            vec![0i32; n / 32],
            vec![0i32; n / 16],
        );
        let out = Out {
            qs: &mut qs,
            scales: &mut scales,
            sums: &mut sums,
            half_sums: &mut half_sums,
        };
        kernel(out, x);
        let scales = scales.iter().map(|v| v.to_bits()).collect();
        (qs, scales, sums, half_sums)
    }

    #[test]
    fn the_simd_quantisations_give_the_same_bytes() {
        let mut x: Vec<f32> = (0..32 * 64)
            .map(|i| ((i * 7919) % 2003) as f32 / 100.0 - 10.0)
            .collect();
        // Ties, an all-zero block, and values that are not numbers.
        x[..32].fill(0.0);
        x[40] = f32::NAN;
        x[70] = f32::INFINITY;
        x[100] = -f32::INFINITY;
        x[130] = 1e-40;
        for (i, v) in x[160..192].iter_mut().enumerate() {
            *v = (i as f32 - 16.0) * 0.5;
        }
        let plain = quantized(&x, quantize_blocks);
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bw") {
                // SAFETY: the features were just checked.
                assert_eq!(
                    plain,
                    quantized(&x, |o, x| unsafe { quantize_avx512(o, x) })
                );
            }
            if is_x86_feature_detected!("avx2") {
                // SAFETY: the feature was just checked.
                assert_eq!(
                    plain,
                    quantized(&x, |o, x| unsafe { quantize_blocks_avx2(o, x) })
                );
            }
        }
    }
}
