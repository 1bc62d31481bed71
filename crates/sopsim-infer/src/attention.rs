//! Attention over one sequence's cached keys and values, a KV head at a time: every
//! query head that shares the KV head (grouped-query attention), for every row of the
//! sequence in the step. The AVX-512 code reads the f16 cache as it is (converting
//! sixteen values per instruction); the other paths convert the head's keys and values
//! once per call, and the AVX2 path sums the weighted values with intrinsics (the
//! compiler left that loop's accumulators in memory).
//!
//! A row's result depends only on its own query and its own sequence's cache, through
//! one fixed sequence of float operations:
//! - score `j` = (a fused multiply-add chain over the head's dimensions in order) × scale;
//! - weights `e_j = exp(score_j − max)` with [`crate::math::exp`] (sopsim's own, so
//!   that every build gives the same bits), summed in sixteen lanes by `j mod 16` and
//!   then in the fixed order of [`crate::math::sum16`];
//! - output = (a fused multiply-add chain over the keys in order of `e_j · v_j`) × 1/sum.
//!
//! Keys sit sixteen to a register (scores) and dimensions sixteen to a register
//! (outputs), which is how the loops vectorise. The code is written once over arrays
//! and compiled three times (portable, AVX2+FMA, AVX-512) with the same results, since
//! each lane does the same IEEE operations in all three.

use half::f16;
use half::slice::{HalfBitsSliceExt, HalfFloatSliceExt};

use crate::kv::{key_at, KEY_BLOCK};
use crate::math::{softmax_weights_from, L};

const _: () = assert!(KEY_BLOCK == L, "a key block fills one register");

/// Where one KV head's keys and values are in a sequence's cache.
pub(crate) struct HeadCache<'a> {
    /// Keys laid out by [`crate::kv::key_at`], room for every position up to the
    /// longest query's length rounded up to 64.
    pub k: &'a [u16],
    pub v: &'a [u16],
    /// Floats per position.
    pub width: usize,
    /// This head's first float within a position.
    pub offset: usize,
}

/// One row's query heads of the group (`heads × head size`, one after another), the
/// positions it attends to (`from..len`: `from` is 0 but in a sliding-window layer),
/// and where its outputs go (same shape).
pub(crate) struct Query<'a> {
    pub q: &'a [f32],
    pub from: usize,
    pub len: usize,
    pub out: &'a mut [f32],
}

/// Buffers reused from call to call.
#[derive(Default)]
pub(crate) struct Scratch {
    /// Keys as floats, transposed: `[dimension][position]` (portable path).
    keys: Vec<f32>,
    /// Values as floats: `[position][dimension]`.
    values: Vec<f32>,
    scores: Vec<f32>,
}

/// Attention of every query over `cache` (head size `hd`, a multiple of 16).
pub(crate) fn attend(
    cache: &HeadCache<'_>,
    hd: usize,
    scale: f32,
    queries: &mut [Query<'_>],
    s: &mut Scratch,
) {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::quant::Kernels;
        let k = crate::quant::Kernels::detect();
        if k >= Kernels::Avx512 {
            // SAFETY: AVX-512 kernels are chosen only when the CPU has AVX-512F.
            return unsafe { attend_avx512(cache, hd, scale, queries, s) };
        }
        if k >= Kernels::Avx2 {
            // SAFETY: AVX2 kernels are chosen only when the CPU has AVX2 and FMA.
            return unsafe { attend_avx2(cache, hd, scale, queries, s) };
        }
    }
    attend_generic(cache, hd, scale, queries, s)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")]
unsafe fn attend_avx512(
    cache: &HeadCache<'_>,
    hd: usize,
    scale: f32,
    queries: &mut [Query<'_>],
    s: &mut Scratch,
) {
    attend_generic(cache, hd, scale, queries, s)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn attend_avx2(
    cache: &HeadCache<'_>,
    hd: usize,
    scale: f32,
    queries: &mut [Query<'_>],
    s: &mut Scratch,
) {
    attend_generic(cache, hd, scale, queries, s)
}

#[inline(always)]
fn attend_generic(
    cache: &HeadCache<'_>,
    hd: usize,
    scale: f32,
    queries: &mut [Query<'_>],
    s: &mut Scratch,
) {
    #[cfg(target_arch = "x86_64")]
    let simd = crate::quant::Kernels::detect() >= crate::quant::Kernels::Avx512;
    #[cfg(not(target_arch = "x86_64"))]
    let simd = false;
    attend_with(cache, hd, scale, queries, s, simd)
}

/// `simd`: one head at a time with AVX-512 intrinsics (the CPU must have AVX-512F).
#[inline(always)]
fn attend_with(
    cache: &HeadCache<'_>,
    hd: usize,
    scale: f32,
    queries: &mut [Query<'_>],
    s: &mut Scratch,
    simd: bool,
) {
    let n = queries.iter().map(|q| q.len).max().unwrap_or(0);
    if n == 0 {
        return;
    }
    let (width, offset) = (cache.width, cache.offset);
    // Bounds of every read below (and of the SIMD code's unchecked ones).
    let padded = n.div_ceil(4 * L) * 4 * L;
    assert!(offset + hd <= width);
    assert!(cache.k.len() >= padded * width && cache.v.len() >= n * width);
    #[cfg(target_arch = "x86_64")]
    if simd && hd.is_multiple_of(L) {
        for query in queries.iter_mut() {
            for (q, out) in query.q.chunks_exact(hd).zip(query.out.chunks_exact_mut(hd)) {
                // SAFETY: AVX-512 kernels are chosen only on CPUs with AVX-512F, and
                // the cache holds the positions asserted above.
                unsafe { x86::head(q, query.from, query.len, scale, cache, &mut s.scores, out) };
            }
        }
        return;
    }
    let _ = simd;
    #[cfg(target_arch = "x86_64")]
    let avx2 = crate::quant::Kernels::detect() >= crate::quant::Kernels::Avx2;
    #[cfg(not(target_arch = "x86_64"))]
    let avx2 = false;
    // Keys transposed (`[dimension][position]`, positions padded to whole groups of
    // four blocks, the score loop's unit); exact conversions (F16C where the CPU has
    // it).
    s.keys.clear();
    s.keys.resize(hd * padded, 0.0);
    for b in 0..n.div_ceil(L) {
        for d in 0..hd {
            let at = key_at(b * L, width, offset + d);
            widen(
                &cache.k[at..at + L],
                &mut s.keys[d * padded + b * L..][..L],
                avx2,
            );
        }
    }
    s.values.clear();
    s.values.resize(n * hd, 0.0);
    for j in 0..n {
        let at = j * width + offset;
        widen(
            &cache.v[at..at + hd],
            &mut s.values[j * hd..(j + 1) * hd],
            avx2,
        );
    }
    for query in queries.iter_mut() {
        let len = query.len;
        for (q, out) in query.q.chunks_exact(hd).zip(query.out.chunks_exact_mut(hd)) {
            scores(q, len, padded, scale, &s.keys, &mut s.scores);
            let inv = 1.0 / softmax_weights_from(query.from, len, &mut s.scores);
            match hd {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: `avx2` says the CPU has AVX2 and FMA.
                32 | 64 | 128 if avx2 => unsafe { avx2::weighted(len, &s.scores, &s.values, out) },
                32 => weighted::<2>(len, &s.scores, &s.values, out),
                64 => weighted::<4>(len, &s.scores, &s.values, out),
                128 => weighted::<8>(len, &s.scores, &s.values, out),
                _ => weighted_any(len, hd, &s.scores, &s.values, out),
            }
            for o in out.iter_mut() {
                *o *= inv;
            }
        }
    }
}

/// [`weighted`] in AVX2 registers: the compiler leaves the portable loop's
/// accumulators in memory, one scalar multiply-add at a time.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    /// `out = Σ_j e_j · v_j` over the first `len` positions, for a head of
    /// `out.len()` (32, 64 or 128) dimensions: lane for lane the portable function's
    /// fused multiply-adds.
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn weighted(len: usize, e: &[f32], values: &[f32], out: &mut [f32]) {
        match out.len() {
            32 => head::<4>(len, e, values, out),
            64 => head::<8>(len, e, values, out),
            _ => head::<16>(len, e, values, out),
        }
    }

    /// [`weighted`] over `R` registers of eight dimensions.
    #[inline(always)]
    unsafe fn head<const R: usize>(len: usize, e: &[f32], values: &[f32], out: &mut [f32]) {
        assert!(e.len() >= len && values.len() >= len * R * 8 && out.len() == R * 8);
        let mut acc = [_mm256_setzero_ps(); R];
        for (j, e) in e[..len].iter().enumerate() {
            let w = _mm256_set1_ps(*e);
            let v = values.as_ptr().add(j * R * 8);
            for (r, acc) in acc.iter_mut().enumerate() {
                *acc = _mm256_fmadd_ps(w, _mm256_loadu_ps(v.add(8 * r)), *acc);
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            _mm256_storeu_ps(out.as_mut_ptr().add(8 * r), *acc);
        }
    }
}

/// One head's attention with AVX-512 intrinsics: the portable functions' operations,
/// lane for lane.
#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::HeadCache;
    use crate::kv::key_at;
    use crate::math::{sum16, EXP_POLY, L, LN2_HI, LN2_LO};

    /// Which of block `b`'s sixteen positions lie in `from..len`.
    #[inline(always)]
    fn window_mask(b: usize, from: usize, len: usize) -> __mmask16 {
        let valid = len.saturating_sub(b * L).min(L);
        let upto: u32 = if valid == L {
            0xFFFF
        } else {
            (1u32 << valid) - 1
        };
        let skipped = from.saturating_sub(b * L).min(L);
        let before: u32 = if skipped == L {
            0xFFFF
        } else {
            (1u32 << skipped) - 1
        };
        (upto & !before) as __mmask16
    }

    /// # Safety
    /// The CPU must have AVX-512F, and `cache` must hold `len` rounded up to 64
    /// positions of keys and `len` of values (`attend_with` asserts both).
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,fma")]
    pub(super) unsafe fn head(
        q: &[f32],
        from: usize,
        len: usize,
        scale: f32,
        cache: &HeadCache<'_>,
        scores: &mut Vec<f32>,
        out: &mut [f32],
    ) {
        let hd = q.len();
        let groups = len.div_ceil(4 * L);
        scores.clear();
        scores.resize(groups * 4 * L, 0.0);
        let sc = _mm512_set1_ps(scale);
        let (width, offset) = (cache.width, cache.offset);
        let kp = cache.k.as_ptr();
        let key = |block: usize, d: usize| {
            let at = key_at(block * L, width, offset + d);
            _mm512_cvtph_ps(_mm256_loadu_si256(kp.add(at) as *const __m256i))
        };
        for g in 0..groups {
            let mut acc = [_mm512_setzero_ps(); 4];
            for (d, qd) in q.iter().enumerate() {
                let qd = _mm512_set1_ps(*qd);
                for (b, a) in acc.iter_mut().enumerate() {
                    *a = _mm512_fmadd_ps(qd, key(4 * g + b, d), *a);
                }
            }
            for (b, a) in acc.iter().enumerate() {
                _mm512_storeu_ps(
                    scores.as_mut_ptr().add(g * 4 * L + b * L),
                    _mm512_mul_ps(*a, sc),
                );
            }
        }
        // The maximum over the first `len` scores (NaN ignored, as f32::max does).
        let mut lanes = _mm512_set1_ps(f32::NEG_INFINITY);
        for (b, block) in scores.chunks_exact(L).enumerate() {
            let mask = window_mask(b, from, len);
            let v = _mm512_loadu_ps(block.as_ptr());
            lanes = _mm512_mask_max_ps(lanes, mask, v, lanes);
        }
        let max = _mm512_set1_ps(_mm512_reduce_max_ps(lanes));
        let mut total = _mm512_setzero_ps();
        for (b, block) in scores.chunks_exact_mut(L).enumerate() {
            let mask = window_mask(b, from, len);
            let x = _mm512_sub_ps(_mm512_loadu_ps(block.as_ptr()), max);
            let e = _mm512_maskz_mov_ps(mask, exp(x));
            _mm512_storeu_ps(block.as_mut_ptr(), e);
            total = _mm512_add_ps(total, e);
        }
        let mut t = [0f32; L];
        _mm512_storeu_ps(t.as_mut_ptr(), total);
        let inv = _mm512_set1_ps(1.0 / sum16(&t));
        let values = cache.v.as_ptr().add(offset);
        match hd / L {
            2 => weighted::<2>(len, scores, values, width, out, inv),
            4 => weighted::<4>(len, scores, values, width, out, inv),
            8 => weighted::<8>(len, scores, values, width, out, inv),
            c => {
                for chunk in 0..c {
                    let mut acc = _mm512_setzero_ps();
                    for (j, e) in scores[..len].iter().enumerate() {
                        let v = value(values.add(j * width + chunk * L));
                        acc = _mm512_fmadd_ps(_mm512_set1_ps(*e), v, acc);
                    }
                    _mm512_storeu_ps(out.as_mut_ptr().add(chunk * L), _mm512_mul_ps(acc, inv));
                }
            }
        }
    }

    /// Sixteen f16 values from `at`, as floats.
    #[inline(always)]
    unsafe fn value(at: *const u16) -> __m512 {
        _mm512_cvtph_ps(_mm256_loadu_si256(at as *const __m256i))
    }

    /// `out = inv · Σ_j e_j · v_j`, position `j`'s values at `values + j · width`.
    #[inline(always)]
    unsafe fn weighted<const C: usize>(
        len: usize,
        e: &[f32],
        values: *const u16,
        width: usize,
        out: &mut [f32],
        inv: __m512,
    ) {
        let mut acc = [_mm512_setzero_ps(); C];
        for (j, e) in e[..len].iter().enumerate() {
            let e = _mm512_set1_ps(*e);
            let row = values.add(j * width);
            for (c, a) in acc.iter_mut().enumerate() {
                *a = _mm512_fmadd_ps(e, value(row.add(c * L)), *a);
            }
        }
        for (c, a) in acc.iter().enumerate() {
            _mm512_storeu_ps(out.as_mut_ptr().add(c * L), _mm512_mul_ps(*a, inv));
        }
    }

    /// [`crate::math::exp`], lane for lane.
    #[inline(always)]
    unsafe fn exp(x: __m512) -> __m512 {
        let x = _mm512_min_ps(
            _mm512_max_ps(x, _mm512_set1_ps(-87.0)),
            _mm512_set1_ps(88.0),
        );
        let n = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
            _mm512_mul_ps(x, _mm512_set1_ps(std::f32::consts::LOG2_E)),
        );
        let r = _mm512_fmadd_ps(n, _mm512_set1_ps(-LN2_HI), x);
        let r = _mm512_fmadd_ps(n, _mm512_set1_ps(-LN2_LO), r);
        let mut p = _mm512_set1_ps(EXP_POLY[0]);
        for c in &EXP_POLY[1..] {
            p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(*c));
        }
        let p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0));
        let two_n = _mm512_castsi512_ps(_mm512_slli_epi32::<23>(_mm512_add_epi32(
            _mm512_cvtps_epi32(n),
            _mm512_set1_epi32(127),
        )));
        _mm512_mul_ps(p, two_n)
    }
}

/// `dst` = `src`'s f16 values as f32 (an exact conversion). `avx2`: the CPU has AVX2
/// and F16C, so eight values go per instruction (inlined into the AVX2 and AVX-512 callers;
/// `half`'s slice conversion checks the CPU on every call, which costs more than
/// converting a key block).
#[inline(always)]
fn widen(src: &[u16], dst: &mut [f32], avx2: bool) {
    assert_eq!(src.len(), dst.len());
    #[cfg(target_arch = "x86_64")]
    if avx2 {
        use std::arch::x86_64::*;
        let whole = src.len() / 8 * 8;
        for i in (0..whole).step_by(8) {
            // SAFETY: `avx2` says the CPU has F16C and AVX, and both slices hold
            // `i + 8` values.
            unsafe {
                let h = _mm_loadu_si128(src.as_ptr().add(i) as *const __m128i);
                _mm256_storeu_ps(dst.as_mut_ptr().add(i), _mm256_cvtph_ps(h));
            }
        }
        src[whole..]
            .reinterpret_cast::<f16>()
            .convert_to_f32_slice(&mut dst[whole..]);
        return;
    }
    let _ = avx2;
    src.reinterpret_cast::<f16>().convert_to_f32_slice(dst);
}

/// Every position's score, four blocks of sixteen at a time (independent chains).
#[inline(always)]
fn scores(q: &[f32], len: usize, padded: usize, scale: f32, keys: &[f32], out: &mut Vec<f32>) {
    let groups = len.div_ceil(4 * L);
    out.clear();
    out.resize(groups * 4 * L, 0.0);
    for (g, block) in out.chunks_exact_mut(4 * L).enumerate() {
        let mut acc = [[0f32; L]; 4];
        for (d, qd) in q.iter().enumerate() {
            let k = &keys[d * padded + g * 4 * L..][..4 * L];
            for (b, acc) in acc.iter_mut().enumerate() {
                for l in 0..L {
                    acc[l] = qd.mul_add(k[b * L + l], acc[l]);
                }
            }
        }
        for (b, acc) in acc.iter().enumerate() {
            for l in 0..L {
                block[b * L + l] = acc[l] * scale;
            }
        }
    }
}

/// `out = Σ_j e_j · v_j` over the first `len` positions, for a head of `C` × 16
/// dimensions kept in registers.
#[inline(always)]
fn weighted<const C: usize>(len: usize, e: &[f32], values: &[f32], out: &mut [f32]) {
    let mut acc = [[0f32; L]; C];
    for (j, e) in e[..len].iter().enumerate() {
        let v = &values[j * C * L..(j + 1) * C * L];
        for (c, acc) in acc.iter_mut().enumerate() {
            for l in 0..L {
                acc[l] = e.mul_add(v[c * L + l], acc[l]);
            }
        }
    }
    for (o, a) in out.chunks_exact_mut(L).zip(&acc) {
        o.copy_from_slice(a);
    }
}

/// [`weighted`] for any head size (the same operations, accumulated in memory).
#[inline(always)]
fn weighted_any(len: usize, hd: usize, e: &[f32], values: &[f32], out: &mut [f32]) {
    out.fill(0.0);
    for (j, e) in e[..len].iter().enumerate() {
        for (o, x) in out.iter_mut().zip(&values[j * hd..(j + 1) * hd]) {
            *o = e.mul_add(*x, *o);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys a position after another, the same keys in the cache's layout, and values;
    /// room for `n` rounded up to 64 positions, as the cache keeps.
    fn cache_data(n: usize, width: usize) -> (Vec<u16>, Vec<u16>, Vec<u16>) {
        let k: Vec<u16> = (0..n * width)
            .map(|i| f16::from_f32(((i * 7) % 11) as f32 / 10.0 - 0.5).to_bits())
            .collect();
        let room = n.div_ceil(64) * 64 * width;
        let mut blocked = vec![0; room];
        for (i, x) in k.iter().enumerate() {
            blocked[key_at(i / width, width, i % width)] = *x;
        }
        let mut v: Vec<u16> = (0..n * width)
            .map(|i| f16::from_f32(((i * 5) % 13) as f32 / 10.0 - 0.6).to_bits())
            .collect();
        v.resize(room, 0);
        (k, blocked, v)
    }

    #[test]
    fn attends_like_the_textbook_formula() {
        let (hd, width, n) = (16, 32, 21); // two heads per position
        let (k, blocked, v) = cache_data(n, width);
        let q: Vec<f32> = (0..hd).map(|i| (i as f32 - 8.0) / 8.0).collect();
        let cache = HeadCache {
            k: &blocked,
            v: &v,
            width,
            offset: 16,
        };
        let mut out = vec![0f32; hd];
        attend(
            &cache,
            hd,
            0.25,
            &mut [Query {
                from: 0,
                q: &q,
                len: n,
                out: &mut out,
            }],
            &mut Scratch::default(),
        );
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
        // The portable code gives the same bits.
        let mut portable = vec![0f32; hd];
        attend_with(
            &cache,
            hd,
            0.25,
            &mut [Query {
                from: 0,
                q: &q,
                len: n,
                out: &mut portable,
            }],
            &mut Scratch::default(),
            false,
        );
        assert_eq!(
            out.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            portable.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_row_attends_the_same_alone_and_with_longer_rows() {
        let (hd, width, n) = (32, 64, 40);
        let (_, k, v) = cache_data(n, width);
        let cache = HeadCache {
            k: &k,
            v: &v,
            width,
            offset: 0,
        };
        let q: Vec<f32> = (0..2 * hd)
            .map(|i| ((i * 3) % 7) as f32 / 7.0 - 0.4)
            .collect();
        let mut alone = vec![0f32; 2 * hd];
        attend(
            &cache,
            hd,
            0.2,
            &mut [Query {
                from: 0,
                q: &q,
                len: 17,
                out: &mut alone,
            }],
            &mut Scratch::default(),
        );
        let (mut a, mut b) = (vec![0f32; 2 * hd], vec![0f32; 2 * hd]);
        attend(
            &cache,
            hd,
            0.2,
            &mut [
                Query {
                    from: 0,
                    q: &q,
                    len: 40,
                    out: &mut b,
                },
                Query {
                    from: 0,
                    q: &q,
                    len: 17,
                    out: &mut a,
                },
            ],
            &mut Scratch::default(),
        );
        assert_eq!(
            alone.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            a.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_windowed_row_attends_only_to_its_window() {
        for (hd, n, from) in [(32, 40, 13), (32, 40, 16), (256, 70, 33), (32, 40, 39)] {
            let width = hd;
            let (k, blocked, v) = cache_data(n, width);
            let cache = HeadCache {
                k: &blocked,
                v: &v,
                width,
                offset: 0,
            };
            let q: Vec<f32> = (0..hd).map(|i| ((i * 3) % 7) as f32 / 7.0 - 0.4).collect();
            let run = |simd: bool| {
                let mut out = vec![0f32; hd];
                attend_with(
                    &cache,
                    hd,
                    0.2,
                    &mut [Query {
                        from,
                        q: &q,
                        len: n,
                        out: &mut out,
                    }],
                    &mut Scratch::default(),
                    simd,
                );
                out
            };
            let out = run(false);
            // The textbook formula over positions `from..n` only.
            let f = |b: u16| f64::from(f16::from_bits(b).to_f32());
            let scores: Vec<f64> = (from..n)
                .map(|j| {
                    (0..hd)
                        .map(|d| f64::from(q[d]) * f(k[j * width + d]))
                        .sum::<f64>()
                        * 0.2
                })
                .collect();
            let max = scores.iter().cloned().fold(f64::MIN, f64::max);
            let e: Vec<f64> = scores.iter().map(|x| (x - max).exp()).collect();
            let total: f64 = e.iter().sum();
            for d in 0..hd {
                let want: f64 = (from..n)
                    .map(|j| e[j - from] / total * f(v[j * width + d]))
                    .sum();
                assert!(
                    (f64::from(out[d]) - want).abs() < 1e-5,
                    "head {hd}, from {from}, dimension {d}: {} against {want}",
                    out[d]
                );
            }
            #[cfg(target_arch = "x86_64")]
            if crate::quant::Kernels::detect() >= crate::quant::Kernels::Avx512 {
                let bits = |o: Vec<f32>| o.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(run(true)), bits(out.clone()), "head {hd}, from {from}");
            }
        }
    }

    #[test]
    fn simd_and_portable_heads_agree_bit_for_bit() {
        for (hd, n, len) in [
            (64, 70, 70),
            (64, 70, 33),
            (128, 20, 19),
            (32, 5, 5),
            (48, 9, 9),
        ] {
            let width = 2 * hd;
            let (_, k, v) = cache_data(n, width);
            let cache = HeadCache {
                k: &k,
                v: &v,
                width,
                offset: hd,
            };
            let q: Vec<f32> = (0..3 * hd)
                .map(|i| ((i * 5) % 11) as f32 / 5.0 - 1.0)
                .collect();
            let run = |simd: bool| {
                let mut out = vec![0f32; 3 * hd];
                attend_with(
                    &cache,
                    hd,
                    0.125,
                    &mut [Query {
                        from: 0,
                        q: &q,
                        len,
                        out: &mut out,
                    }],
                    &mut Scratch::default(),
                    simd,
                );
                out.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
            };
            #[cfg(target_arch = "x86_64")]
            if crate::quant::Kernels::detect() >= crate::quant::Kernels::Avx512 {
                assert_eq!(run(true), run(false), "head size {hd}, {len} positions");
            }
            let _ = run;
        }
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn avx2_weighted_sums_match_the_portable_ones_bit_for_bit() {
        if crate::quant::Kernels::detect() < crate::quant::Kernels::Avx2 {
            return;
        }
        let len = 41;
        let e: Vec<f32> = (0..len).map(|j| (j as f32 * 0.37).sin().abs()).collect();
        for hd in [32, 64, 128] {
            let values: Vec<f32> = (0..len * hd)
                .map(|i| ((i * 13) % 17) as f32 / 8.0 - 1.0 + i as f32 * 1e-4)
                .collect();
            let (mut simd, mut portable) = (vec![0f32; hd], vec![0f32; hd]);
            // SAFETY: the CPU has AVX2 and FMA (checked above).
            unsafe { avx2::weighted(len, &e, &values, &mut simd) };
            weighted_any(len, hd, &e, &values, &mut portable);
            assert_eq!(
                simd.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                portable.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                "head size {hd}"
            );
        }
    }

    #[test]
    fn every_head_size_accumulates_the_same_way() {
        let (len, hd) = (37, 64);
        let e: Vec<f32> = (0..len).map(|j| (j as f32 * 0.37).sin().abs()).collect();
        let values: Vec<f32> = (0..len * hd)
            .map(|i| ((i * 13) % 17) as f32 / 8.0 - 1.0)
            .collect();
        let (mut a, mut b) = (vec![0f32; hd], vec![0f32; hd]);
        weighted::<4>(len, &e, &values, &mut a);
        weighted_any(len, hd, &e, &values, &mut b);
        assert_eq!(
            a.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            b.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
    }
}
