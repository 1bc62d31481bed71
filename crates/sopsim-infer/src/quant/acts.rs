//! Activations quantised for a product: int8 values with one scale per group, plus each
//! 32 values' integer sum, which the formats with a minimum need.
//!
//! The quantisation is written once and compiled twice (plain and with AVX-512), which
//! gives the same bytes: round-half-to-even and saturating conversions mean the same
//! thing in both.

/// How the inputs of a product with a given weight format are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActFormat {
    /// Plain floats (for float weights).
    Float,
    /// int8 with a scale per 32 values (llama.cpp's Q8_0 / Q8_1).
    Q8x32,
    /// int8 with a scale per 256 values (llama.cpp's Q8_K).
    Q8x256,
}

impl ActFormat {
    pub fn group(self) -> usize {
        match self {
            ActFormat::Float => 1,
            ActFormat::Q8x32 => 32,
            ActFormat::Q8x256 => 256,
        }
    }
}

/// `tokens` rows of `cols` activations in one `ActFormat`. Buffers are reused.
#[derive(Debug, Clone)]
pub struct Acts {
    format: ActFormat,
    tokens: usize,
    cols: usize,
    pub(super) floats: Vec<f32>,
    pub(super) qs: Vec<i8>,
    /// `qs + 128` as bytes, for kernels that multiply unsigned activations.
    pub(super) qs_offset: Vec<u8>,
    /// One per group.
    pub(super) scales: Vec<f32>,
    /// For [`ActFormat::Q8x32`]: per pair of blocks, 16 floats — the first block's
    /// scale eight times, then the second's (what a 512-bit kernel multiplies by).
    pub(super) scale_pairs: Vec<f32>,
    /// One per 32 values: their sum.
    pub(super) bsum: Vec<i32>,
}

impl Default for Acts {
    fn default() -> Self {
        Self {
            format: ActFormat::Float,
            tokens: 0,
            cols: 0,
            floats: Vec::new(),
            qs: Vec::new(),
            qs_offset: Vec::new(),
            scales: Vec::new(),
            scale_pairs: Vec::new(),
            bsum: Vec::new(),
        }
    }
}

impl Acts {
    pub fn format(&self) -> ActFormat {
        self.format
    }

    pub fn tokens(&self) -> usize {
        self.tokens
    }

    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Stores `x` (`tokens × cols`, row-major) in `format`. `cols` must be a multiple
    /// of 32 (and of 256 for `ActFormat::Q8x256`).
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
        let group = format.group();
        self.qs.resize(x.len(), 0);
        self.qs_offset.resize(x.len(), 0);
        self.scales.resize(x.len() / group, 0.0);
        self.bsum.resize(x.len() / 32, 0);
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
            .zip(self.qs_offset.chunks_mut(n))
            .zip(self.scales.chunks_mut(n / group))
            .zip(self.bsum.chunks_mut(n / 32))
            .map(|((((x, qs), qs_offset), scales), bsum)| {
                move || {
                    let out = Out {
                        qs,
                        qs_offset,
                        scales,
                        bsum,
                    };
                    #[cfg(target_arch = "x86_64")]
                    if is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bw") {
                        // SAFETY: the features were just checked.
                        return unsafe { quantize_avx512(out, x, group) };
                    }
                    quantize_groups(out, x, group)
                }
            })
            .collect::<Vec<_>>();
        crate::compute::run_all(tasks);
        self.pair_scales();
    }

    fn pair_scales(&mut self) {
        self.scale_pairs.clear();
        if self.format != ActFormat::Q8x32 {
            return;
        }
        let per_token = self.cols / 32;
        for t in 0..self.tokens {
            let s = &self.scales[t * per_token..(t + 1) * per_token];
            for pair in s.chunks(2) {
                let second = pair.get(1).copied().unwrap_or(0.0);
                self.scale_pairs.extend(std::iter::repeat_n(pair[0], 8));
                self.scale_pairs.extend(std::iter::repeat_n(second, 8));
            }
        }
    }

    /// Token `t`'s int8 values.
    pub(super) fn qs(&self, t: usize) -> &[i8] {
        &self.qs[t * self.cols..(t + 1) * self.cols]
    }

    pub(super) fn qs_offset(&self, t: usize) -> &[u8] {
        &self.qs_offset[t * self.cols..(t + 1) * self.cols]
    }

    pub(super) fn scales(&self, t: usize) -> &[f32] {
        let n = self.cols / self.format.group();
        &self.scales[t * n..(t + 1) * n]
    }

    /// Token `t`'s block-pair scales (see [`Acts::scale_pairs`]).
    pub(super) fn scale_pairs(&self, t: usize) -> &[f32] {
        let n = self.cols.div_ceil(64) * 16;
        &self.scale_pairs[t * n..(t + 1) * n]
    }

    pub(super) fn bsum(&self, t: usize) -> &[i32] {
        let n = self.cols / 32;
        &self.bsum[t * n..(t + 1) * n]
    }

    pub(super) fn floats(&self, t: usize) -> &[f32] {
        &self.floats[t * self.cols..(t + 1) * self.cols]
    }
}

/// Where one piece of the tokens is quantised to.
struct Out<'a> {
    qs: &'a mut [i8],
    qs_offset: &'a mut [u8],
    scales: &'a mut [f32],
    bsum: &'a mut [i32],
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma")]
unsafe fn quantize_avx512(out: Out<'_>, x: &[f32], group: usize) {
    quantize_groups(out, x, group)
}

#[inline(always)]
fn quantize_groups(acts: Out<'_>, x: &[f32], group: usize) {
    for (g, (values, q)) in x
        .chunks_exact(group)
        .zip(acts.qs.chunks_exact_mut(group))
        .enumerate()
    {
        let mut amax = 0f32;
        for v in values {
            amax = amax.max(v.abs());
        }
        let d = amax / 127.0;
        let id = if d > 0.0 { 1.0 / d } else { 0.0 };
        for (q, v) in q.iter_mut().zip(values) {
            *q = (v * id).round_ties_even().clamp(-127.0, 127.0) as i8;
        }
        acts.scales[g] = d;
    }
    for (o, q) in acts.qs_offset.iter_mut().zip(acts.qs.iter()) {
        *o = (*q as u8) ^ 0x80;
    }
    for (sum, q) in acts.bsum.iter_mut().zip(acts.qs.chunks_exact(32)) {
        *sum = q.iter().map(|&v| i32::from(v)).sum();
    }
}
