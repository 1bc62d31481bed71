//! Attention of one query head over one sequence's cached keys and values.
//!
//! A row's result depends only on its own query and its own sequence's cache: the
//! keys are visited in order with fixed eight-lane sums, whatever else is in the
//! batch. The same code is compiled twice, with and without AVX2/FMA/F16C, and gives
//! the same bits either way (fused multiply-adds and exact f16 conversions in both).

use half::f16;

use crate::quant::sum_lanes;

/// Converts eight f16 bit patterns.
trait Half {
    fn load8(src: &[u16]) -> [f32; 8];
}

struct Soft;

impl Half for Soft {
    #[inline(always)]
    fn load8(src: &[u16]) -> [f32; 8] {
        std::array::from_fn(|i| f16::from_bits(src[i]).to_f32())
    }
}

#[cfg(target_arch = "x86_64")]
struct F16c;

#[cfg(target_arch = "x86_64")]
impl Half for F16c {
    #[inline(always)]
    fn load8(src: &[u16]) -> [f32; 8] {
        use std::arch::x86_64::*;
        assert!(src.len() >= 8);
        // SAFETY: eight u16s are readable (checked above), and this is only reached
        // from `attend_avx2`, which requires F16C and AVX.
        unsafe {
            let v = _mm256_cvtph_ps(_mm_loadu_si128(src.as_ptr() as *const __m128i));
            std::mem::transmute::<__m256, [f32; 8]>(v)
        }
    }
}

/// Where one head's keys and values are in a sequence's cache.
pub struct HeadCache<'a> {
    pub k: &'a [u16],
    pub v: &'a [u16],
    /// Floats per position.
    pub width: usize,
    /// This head's first float within a position.
    pub offset: usize,
    /// Positions attended to: `0..len`.
    pub len: usize,
}

/// `out` = softmax(q·K / √d) · V over the head's cached positions. `scores` is scratch.
pub fn attend(
    q: &[f32],
    cache: &HeadCache<'_>,
    scale: f32,
    scores: &mut Vec<f32>,
    out: &mut [f32],
) {
    #[cfg(target_arch = "x86_64")]
    if crate::quant::Kernels::detect() != crate::quant::Kernels::Scalar {
        // SAFETY: the kernels were chosen after checking for AVX2, FMA and F16C.
        return unsafe { attend_avx2(q, cache, scale, scores, out) };
    }
    attend_generic::<Soft>(q, cache, scale, scores, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn attend_avx2(
    q: &[f32],
    cache: &HeadCache<'_>,
    scale: f32,
    scores: &mut Vec<f32>,
    out: &mut [f32],
) {
    attend_generic::<F16c>(q, cache, scale, scores, out)
}

#[inline(always)]
fn attend_generic<H: Half>(
    q: &[f32],
    cache: &HeadCache<'_>,
    scale: f32,
    scores: &mut Vec<f32>,
    out: &mut [f32],
) {
    let hd = q.len();
    scores.clear();
    let mut max = f32::NEG_INFINITY;
    for j in 0..cache.len {
        let at = j * cache.width + cache.offset;
        let key = &cache.k[at..at + hd];
        let mut acc = [0f32; 8];
        for (qc, kc) in q.chunks_exact(8).zip(key.chunks_exact(8)) {
            let kv = H::load8(kc);
            for l in 0..8 {
                acc[l] = qc[l].mul_add(kv[l], acc[l]);
            }
        }
        let s = sum_lanes(&acc) * scale;
        max = max.max(s);
        scores.push(s);
    }
    let mut total = 0f32;
    for s in scores.iter_mut() {
        *s = (*s - max).exp();
        total += *s;
    }
    out.fill(0.0);
    for (j, p) in scores.iter().enumerate() {
        let at = j * cache.width + cache.offset;
        for (oc, vc) in out
            .chunks_exact_mut(8)
            .zip(cache.v[at..at + hd].chunks_exact(8))
        {
            let vv = H::load8(vc);
            for l in 0..8 {
                oc[l] = p.mul_add(vv[l], oc[l]);
            }
        }
    }
    let inv = 1.0 / total;
    for o in out.iter_mut() {
        *o *= inv;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attends_like_the_textbook_formula() {
        let hd = 16;
        let width = 32; // two heads per position
        let n = 5;
        let k: Vec<u16> = (0..n * width)
            .map(|i| f16::from_f32(((i * 7) % 11) as f32 / 10.0 - 0.5).to_bits())
            .collect();
        let v: Vec<u16> = (0..n * width)
            .map(|i| f16::from_f32(((i * 5) % 13) as f32 / 10.0 - 0.6).to_bits())
            .collect();
        let q: Vec<f32> = (0..hd).map(|i| (i as f32 - 8.0) / 8.0).collect();
        let cache = HeadCache {
            k: &k,
            v: &v,
            width,
            offset: 16,
            len: n,
        };
        let mut out = vec![0f32; hd];
        attend(&q, &cache, 0.25, &mut Vec::new(), &mut out);
        let f = |b: u16| f64::from(f16::from_bits(b).to_f32());
        let scores: Vec<f64> = (0..n)
            .map(|j| {
                (0..hd)
                    .map(|d| f64::from(q[d]) * f(k[j * width + 16 + d]))
                    .sum::<f64>()
                    * 0.25
            })
            .collect();
        let max = scores.iter().cloned().fold(f64::MIN, f64::max);
        let e: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
        let total: f64 = e.iter().sum();
        for d in 0..hd {
            let want: f64 = (0..n)
                .map(|j| e[j] / total * f(v[j * width + 16 + d]))
                .sum();
            assert!(
                (f64::from(out[d]) - want).abs() < 1e-5,
                "{d}: {} vs {want}",
                out[d]
            );
        }
        // The soft conversion gives the same bits as F16C.
        let mut soft = vec![0f32; hd];
        attend_generic::<Soft>(&q, &cache, 0.25, &mut Vec::new(), &mut soft);
        assert_eq!(
            out.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            soft.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
    }
}
