//! AVX-512 VNNI kernels: one weight row at a time, two 32-value chunks per register
//! (the low eight lanes take one chunk, the high eight the next), up to [`TILE`]
//! tokens per decoding of the weights. For the 32-value formats the two halves are
//! exactly the reference's even and odd chains; for the k-quants the halves' integers
//! are added before the group's one float step. The results are the same bits as
//! [`super::formats::dot_reference`].
//!
//! Activations enter as `x + 128` (unsigned) against signed weights, so `vpdpbusd`
//! needs no per-token sign fix-up; the `128·Σw` this adds is computed once per weight
//! chunk and taken off in advance.

use std::arch::x86_64::*;
use std::ops::Range;

use super::acts::Acts;
use super::formats::{scale_min_k4, WeightType};
use super::QView;

/// Tokens that share one decoding of a row's weights.
const TILE: usize = 8;

pub fn supported() -> bool {
    is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx512vl")
        && is_x86_feature_detected!("avx512dq")
        && is_x86_feature_detected!("avx512vnni")
        && is_x86_feature_detected!("fma")
        && is_x86_feature_detected!("f16c")
}

/// Whether these kernels handle `ty` (the float formats go to the AVX2 kernels).
pub fn handles(ty: WeightType) -> bool {
    !matches!(ty, WeightType::F32 | WeightType::F16 | WeightType::BF16)
}

/// # Safety
/// The CPU must support the features [`supported`] checks.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")]
pub unsafe fn matmul_rows(w: QView<'_>, acts: &Acts, rows: Range<usize>, out: &mut [f32]) {
    let t = acts.tokens();
    let len = rows.len();
    for (k, r) in rows.enumerate() {
        let row = w.row(r);
        let mut tok = 0;
        while tok < t {
            let n = (t - tok).min(TILE);
            let mut res = [0f32; TILE];
            match n {
                16 => row_tile::<16>(w.ty, row, acts, tok, &mut res),
                15 => row_tile::<15>(w.ty, row, acts, tok, &mut res),
                14 => row_tile::<14>(w.ty, row, acts, tok, &mut res),
                13 => row_tile::<13>(w.ty, row, acts, tok, &mut res),
                12 => row_tile::<12>(w.ty, row, acts, tok, &mut res),
                11 => row_tile::<11>(w.ty, row, acts, tok, &mut res),
                10 => row_tile::<10>(w.ty, row, acts, tok, &mut res),
                9 => row_tile::<9>(w.ty, row, acts, tok, &mut res),
                8 => row_tile::<8>(w.ty, row, acts, tok, &mut res),
                7 => row_tile::<7>(w.ty, row, acts, tok, &mut res),
                6 => row_tile::<6>(w.ty, row, acts, tok, &mut res),
                5 => row_tile::<5>(w.ty, row, acts, tok, &mut res),
                4 => row_tile::<4>(w.ty, row, acts, tok, &mut res),
                3 => row_tile::<3>(w.ty, row, acts, tok, &mut res),
                2 => row_tile::<2>(w.ty, row, acts, tok, &mut res),
                _ => row_tile::<1>(w.ty, row, acts, tok, &mut res),
            }
            for (i, v) in res[..n].iter().enumerate() {
                out[(tok + i) * len + k] = *v;
            }
            tok += n;
        }
    }
}

#[inline(always)]
unsafe fn row_tile<const N: usize>(
    ty: WeightType,
    row: &[u8],
    acts: &Acts,
    t0: usize,
    res: &mut [f32; TILE],
) {
    match ty {
        WeightType::Q4_0 => legacy::<N, Q4_0>(row, acts, t0, res),
        WeightType::Q5_0 => legacy::<N, Q5_0>(row, acts, t0, res),
        WeightType::Q8_0 => legacy::<N, Q8_0>(row, acts, t0, res),
        WeightType::Q4_1 => legacy::<N, Q4_1>(row, acts, t0, res),
        WeightType::Q5_1 => legacy::<N, Q5_1>(row, acts, t0, res),
        WeightType::Q4K => kquant::<N, false>(row, acts, t0, res),
        WeightType::Q5K => kquant::<N, true>(row, acts, t0, res),
        WeightType::Q6K => q6k::<N>(row, acts, t0, res),
        WeightType::F32 | WeightType::F16 | WeightType::BF16 => {}
    }
}

#[inline(always)]
unsafe fn f16_bits(p: *const u8) -> i32 {
    i32::from(u16::from_le_bytes([*p, *p.add(1)]))
}

/// `[a ×8 | b ×8]` from two f16 values.
#[inline(always)]
unsafe fn halves_f16(a: *const u8, b: *const u8) -> __m512 {
    let two = _mm_cvtph_ps(_mm_insert_epi16::<1>(
        _mm_cvtsi32_si128(f16_bits(a)),
        f16_bits(b),
    ));
    let idx = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(two))
}

#[inline(always)]
unsafe fn halves_epi16(a: i16, b: i16) -> __m512i {
    _mm512_inserti64x4::<1>(
        _mm512_castsi256_si512(_mm256_set1_epi16(a)),
        _mm256_set1_epi16(b),
    )
}

/// Two 32-byte pieces as one register.
#[inline(always)]
unsafe fn join(a: *const u8, b: *const u8) -> __m512i {
    _mm512_inserti64x4::<1>(
        _mm512_castsi256_si512(_mm256_loadu_si256(a as *const __m256i)),
        _mm256_loadu_si256(b as *const __m256i),
    )
}

/// 16 bytes of nibbles from each of two blocks as 32 values each (low nibbles, then
/// high ones).
#[inline(always)]
unsafe fn nibbles_pair(a: *const u8, b: *const u8) -> __m512i {
    let qa = _mm256_broadcastsi128_si256(_mm_loadu_si128(a as *const __m128i));
    let qb = _mm256_broadcastsi128_si256(_mm_loadu_si128(b as *const __m128i));
    let z = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(qa), qb);
    let shifts = _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0);
    _mm512_and_si512(_mm512_srlv_epi64(z, shifts), _mm512_set1_epi8(0x0F))
}

/// The 32-bit high-bit words of two blocks as one 64-bit mask.
#[inline(always)]
unsafe fn bits_pair(a: *const u8, b: *const u8) -> __mmask64 {
    let lo = u64::from((a as *const u32).read_unaligned());
    let hi = u64::from((b as *const u32).read_unaligned());
    u64::from_le(lo) | (u64::from_le(hi) << 32)
}

/// Token `t`'s activations `x + 128` for chunks `c` and `c + 1`.
#[inline(always)]
unsafe fn x_two(acts: &Acts, t: usize, c: usize) -> __m512i {
    _mm512_loadu_si512(acts.qs_offset(t).as_ptr().add(c * 32) as *const __m512i)
}

/// Token `t`'s activations `x + 128` for chunk `c`, in both halves.
#[inline(always)]
unsafe fn x_one(acts: &Acts, t: usize, c: usize) -> __m512i {
    _mm512_broadcast_i64x4(_mm256_loadu_si256(
        acts.qs_offset(t).as_ptr().add(c * 32) as *const __m256i
    ))
}

/// `-128·Σw` per lane: what `x + 128` adds to `Σ x·w`, taken off in advance.
#[inline(always)]
unsafe fn offset(w: __m512i) -> __m512i {
    _mm512_sub_epi32(
        _mm512_setzero_si512(),
        _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(-128), w),
    )
}

#[inline(always)]
unsafe fn sum8(h: __m256) -> f32 {
    let q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps::<1>(h));
    let p = _mm_add_ps(q, _mm_movehl_ps(q, q));
    _mm_cvtss_f32(_mm_add_ss(p, _mm_shuffle_ps::<1>(p, p)))
}

trait Legacy {
    const BYTES: usize;
    const MIN_AT: Option<usize>;
    /// Signed weights of blocks `a` (low half) and `b` (high half).
    unsafe fn decode(a: *const u8, b: *const u8) -> __m512i;
}

struct Q4_0;
struct Q5_0;
struct Q8_0;
struct Q4_1;
struct Q5_1;

impl Legacy for Q4_0 {
    const BYTES: usize = 18;
    const MIN_AT: Option<usize> = None;
    #[inline(always)]
    unsafe fn decode(a: *const u8, b: *const u8) -> __m512i {
        _mm512_sub_epi8(nibbles_pair(a.add(2), b.add(2)), _mm512_set1_epi8(8))
    }
}

impl Legacy for Q5_0 {
    const BYTES: usize = 22;
    const MIN_AT: Option<usize> = None;
    #[inline(always)]
    unsafe fn decode(a: *const u8, b: *const u8) -> __m512i {
        let nib = nibbles_pair(a.add(6), b.add(6));
        // (nibble | bit·16) − 16: subtract 16 where the bit is clear.
        let clear = !bits_pair(a.add(2), b.add(2));
        _mm512_mask_sub_epi8(nib, clear, nib, _mm512_set1_epi8(16))
    }
}

impl Legacy for Q8_0 {
    const BYTES: usize = 34;
    const MIN_AT: Option<usize> = None;
    #[inline(always)]
    unsafe fn decode(a: *const u8, b: *const u8) -> __m512i {
        join(a.add(2), b.add(2))
    }
}

impl Legacy for Q4_1 {
    const BYTES: usize = 20;
    const MIN_AT: Option<usize> = Some(2);
    #[inline(always)]
    unsafe fn decode(a: *const u8, b: *const u8) -> __m512i {
        nibbles_pair(a.add(4), b.add(4))
    }
}

impl Legacy for Q5_1 {
    const BYTES: usize = 24;
    const MIN_AT: Option<usize> = Some(2);
    #[inline(always)]
    unsafe fn decode(a: *const u8, b: *const u8) -> __m512i {
        let nib = nibbles_pair(a.add(8), b.add(8));
        _mm512_mask_add_epi8(
            nib,
            bits_pair(a.add(4), b.add(4)),
            nib,
            _mm512_set1_epi8(16),
        )
    }
}

/// The 32-value formats, two blocks per step: the low half is the even chain, the high
/// half the odd one. An odd last block joins the even chain alone.
#[inline(always)]
unsafe fn legacy<const N: usize, F: Legacy>(
    row: &[u8],
    acts: &Acts,
    t0: usize,
    res: &mut [f32; TILE],
) {
    let mut acc = [_mm512_setzero_ps(); N];
    let mut accm = [0f32; N];
    let p = row.as_ptr();
    let blocks = row.len() / F::BYTES;
    let mut blk = 0;
    while blk < blocks {
        let two = blk + 1 < blocks;
        let a = p.add(blk * F::BYTES);
        // A lone last block is paired with itself; its high half is masked off below.
        let b = if two { a.add(F::BYTES) } else { a };
        let w = F::decode(a, b);
        let start = offset(w);
        let d = halves_f16(a, b);
        let keep: __mmask16 = if two { 0xFFFF } else { 0x00FF };
        for i in 0..N {
            let t = t0 + i;
            let x = if two {
                x_two(acts, t, blk)
            } else {
                x_one(acts, t, blk)
            };
            let lanes = _mm512_dpbusd_epi32(start, x, w);
            let dx = acts.scales(t).as_ptr().add(blk);
            let dxv = _mm512_loadu_ps(acts.scale_pairs(t).as_ptr().add(blk / 2 * 16));
            let s = _mm512_mul_ps(d, dxv);
            acc[i] = _mm512_mask3_fmadd_ps(_mm512_cvtepi32_ps(lanes), s, acc[i], keep);
            if let Some(at) = F::MIN_AT {
                let bs = acts.bsum(t).as_ptr().add(blk);
                let m = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(f16_bits(a.add(at)))));
                accm[i] = (*bs as f32).mul_add(m * *dx, accm[i]);
                if two {
                    let m = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(f16_bits(b.add(at)))));
                    accm[i] = (*bs.add(1) as f32).mul_add(m * *dx.add(1), accm[i]);
                }
            }
        }
        blk += 2;
    }
    for i in 0..N {
        let even = sum8(_mm512_castps512_ps256(acc[i]));
        let odd = sum8(_mm512_extractf32x8_ps::<1>(acc[i]));
        res[i] = (even + odd) + accm[i];
    }
}

/// Adds the two halves' integers and takes the group's one float step.
#[inline(always)]
unsafe fn group_step(total: __m512i, starts: __m512i, d: f32, dx: f32, acc: __m256) -> __m256 {
    let t = _mm512_sub_epi32(total, starts);
    let both = _mm256_add_epi32(_mm512_castsi512_si256(t), _mm512_extracti64x4_epi64::<1>(t));
    _mm256_fmadd_ps(_mm256_cvtepi32_ps(both), _mm256_set1_ps(d * dx), acc)
}

/// Q4_K (`FIVE` false) and Q5_K (`FIVE` true): chunk pairs (2k, 2k+1) per register.
#[inline(always)]
unsafe fn kquant<const N: usize, const FIVE: bool>(
    row: &[u8],
    acts: &Acts,
    t0: usize,
    res: &mut [f32; TILE],
) {
    let bytes = if FIVE { 176 } else { 144 };
    let qs_at = if FIVE { 48 } else { 16 };
    let mut acc = [_mm256_setzero_ps(); N];
    let mut accm = [0f32; N];
    let p = row.as_ptr();
    let m4 = _mm512_set1_epi8(0x0F);
    for g in 0..row.len() / bytes {
        let blk = p.add(g * bytes);
        let scales = std::slice::from_raw_parts(blk.add(4), 12);
        let mut total = [_mm512_setzero_si512(); N];
        let mut starts = _mm512_setzero_si512();
        let mut mins = [0i32; N];
        for pair in 0..4 {
            // Chunk 2·pair is the low nibbles of these 32 bytes, 2·pair+1 the high ones.
            let q = _mm256_loadu_si256(blk.add(qs_at + 32 * pair) as *const __m256i);
            let q = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(q), q);
            let mut u = _mm512_and_si512(
                _mm512_srlv_epi64(q, _mm512_set_epi64(4, 4, 4, 4, 0, 0, 0, 0)),
                m4,
            );
            if FIVE {
                let qh = _mm256_loadu_si256(blk.add(16) as *const __m256i);
                let qh = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(qh), qh);
                let sel = _mm512_inserti64x4::<1>(
                    _mm512_set1_epi8(1 << (2 * pair)),
                    _mm256_set1_epi8(1 << (2 * pair + 1)),
                );
                let bit = _mm512_test_epi8_mask(qh, sel);
                u = _mm512_mask_add_epi8(u, bit, u, _mm512_set1_epi8(16));
            }
            let ((sc0, m0), (sc1, m1)) = (
                scale_min_k4(2 * pair, scales),
                scale_min_k4(2 * pair + 1, scales),
            );
            let sc = halves_epi16(i16::from(sc0), i16::from(sc1));
            starts =
                _mm512_dpwssd_epi32(starts, _mm512_maddubs_epi16(_mm512_set1_epi8(-128), u), sc);
            for i in 0..N {
                let t = t0 + i;
                let c = g * 8 + 2 * pair;
                let pr = _mm512_maddubs_epi16(x_two(acts, t, c), u);
                total[i] = _mm512_dpwssd_epi32(total[i], pr, sc);
                let bs = acts.bsum(t).as_ptr().add(c);
                mins[i] += i32::from(m0) * *bs + i32::from(m1) * *bs.add(1);
            }
        }
        let d = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(f16_bits(blk))));
        let dmin = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(f16_bits(blk.add(2)))));
        for i in 0..N {
            let dx = *acts.scales(t0 + i).get_unchecked(g);
            acc[i] = group_step(total[i], starts, d, dx, acc[i]);
            accm[i] = (mins[i] as f32).mul_add(-(dmin * dx), accm[i]);
        }
    }
    for i in 0..N {
        res[i] = sum8(acc[i]) + accm[i];
    }
}

/// Q6_K: chunks (4n+k, 4n+k+1) for k = 0, 2 per register.
#[inline(always)]
unsafe fn q6k<const N: usize>(row: &[u8], acts: &Acts, t0: usize, res: &mut [f32; TILE]) {
    let mut acc = [_mm256_setzero_ps(); N];
    let p = row.as_ptr();
    let m4 = _mm512_set1_epi8(0x0F);
    let m2 = _mm512_set1_epi8(0x03);
    let off = _mm512_set1_epi8(32);
    for g in 0..row.len() / 210 {
        let blk = p.add(g * 210);
        let mut total = [_mm512_setzero_si512(); N];
        let mut starts = _mm512_setzero_si512();
        for n in 0..2 {
            // Low half: ql[64n..64n+32] with qh bits (0,1) then ql[64n+32..] with bits
            // (2,3); chunk k uses the low nibbles for k < 2, the high ones for k ≥ 2.
            let ql = join(blk.add(64 * n), blk.add(64 * n + 32));
            let qh = _mm256_loadu_si256(blk.add(128 + 32 * n) as *const __m256i);
            let qh = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(qh), qh);
            for half in 0..2 {
                let c = 4 * n + 2 * half;
                let low = if half == 0 {
                    _mm512_and_si512(ql, m4)
                } else {
                    _mm512_and_si512(_mm512_srli_epi16::<4>(ql), m4)
                };
                // Chunk c takes qh bits 2·(c%4), chunk c+1 bits 2·(c%4)+2.
                let shifts = _mm512_inserti64x4::<1>(
                    _mm512_set1_epi64((4 * half) as i64),
                    _mm256_set1_epi64x((4 * half + 2) as i64),
                );
                let high = _mm512_and_si512(_mm512_srlv_epi64(qh, shifts), m2);
                let w = _mm512_sub_epi8(_mm512_or_si512(low, _mm512_slli_epi16::<4>(high)), off);
                let sc = |i: usize| i16::from(*blk.add(192 + 2 * c + i) as i8);
                // In each half, lanes 0–3 take the chunk's first 16 values' scale, 4–7 the second's.
                let scv = _mm512_inserti64x4::<1>(
                    _mm512_castsi256_si512(_mm256_set_m128i(
                        _mm_set1_epi16(sc(1)),
                        _mm_set1_epi16(sc(0)),
                    )),
                    _mm256_set_m128i(_mm_set1_epi16(sc(3)), _mm_set1_epi16(sc(2))),
                );
                starts = _mm512_dpwssd_epi32(
                    starts,
                    _mm512_maddubs_epi16(_mm512_set1_epi8(-128), w),
                    scv,
                );
                for (i, t) in total.iter_mut().enumerate() {
                    let pr = _mm512_maddubs_epi16(x_two(acts, t0 + i, g * 8 + c), w);
                    *t = _mm512_dpwssd_epi32(*t, pr, scv);
                }
            }
        }
        let d = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(f16_bits(blk.add(208)))));
        for i in 0..N {
            let dx = *acts.scales(t0 + i).get_unchecked(g);
            acc[i] = group_step(total[i], starts, d, dx, acc[i]);
        }
    }
    for i in 0..N {
        res[i] = sum8(acc[i]);
    }
}
