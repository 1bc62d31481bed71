//! AVX2 kernels (with AVX-VNNI where the CPU has it) that reproduce
//! [`super::formats::dot_reference`] exactly.
//!
//! Each 32-value chunk becomes a register of int8 weights, signed weights as magnitude
//! plus sign (so every byte product fits `maddubs` without saturating), and its eight
//! integer lanes are the reference's lanes. A weight chunk is decoded once and used for
//! up to [`TILE`] tokens, so the weights are read once per tile of tokens.

use std::arch::x86_64::*;
use std::ops::Range;

use super::acts::Acts;
use super::formats::{scale_min_k4, WeightType};
use super::{Kernels, QView};

/// Tokens that share one decoding of a weight chunk.
const TILE: usize = 4;

pub fn has_avx2() -> bool {
    is_x86_feature_detected!("avx2")
        && is_x86_feature_detected!("fma")
        && is_x86_feature_detected!("f16c")
}

pub fn has_vnni() -> bool {
    is_x86_feature_detected!("avxvnni")
        || (is_x86_feature_detected!("avx512vnni") && is_x86_feature_detected!("avx512vl"))
}

pub fn matmul_rows(
    kernels: Kernels,
    w: QView<'_>,
    acts: &Acts,
    rows: Range<usize>,
    out: &mut [f32],
) {
    // SAFETY: `Kernels::detect` chose these kernels only after checking the CPU's
    // features, and `matmul_rows` checked the shapes.
    unsafe {
        match kernels {
            Kernels::AvxVnni | Kernels::Avx512 if is_x86_feature_detected!("avxvnni") => {
                run_avxvnni(w, acts, rows, out)
            }
            Kernels::AvxVnni | Kernels::Avx512 => run_avx512vnni(w, acts, rows, out),
            _ => run_avx2(w, acts, rows, out),
        }
    }
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn run_avx2(w: QView<'_>, acts: &Acts, rows: Range<usize>, out: &mut [f32]) {
    dispatch::<Avx2>(w, acts, rows, out)
}

#[target_feature(enable = "avx2,fma,f16c,avxvnni")]
unsafe fn run_avxvnni(w: QView<'_>, acts: &Acts, rows: Range<usize>, out: &mut [f32]) {
    dispatch::<AvxVnni>(w, acts, rows, out)
}

#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
unsafe fn run_avx512vnni(w: QView<'_>, acts: &Acts, rows: Range<usize>, out: &mut [f32]) {
    dispatch::<Avx512Vnni>(w, acts, rows, out)
}

/// The integer dot products, by instruction set.
trait Isa {
    /// `acc` plus, in lane j, Σ over bytes 4j..4j+4 of `u[i]·x[i]` (u unsigned).
    unsafe fn dot(acc: __m256i, u: __m256i, x: __m256i) -> __m256i;
    /// `acc` plus, in lane j, Σ over bytes 4j..4j+4 of `u[i]·x[i]·sc[i/2]` (the scale is
    /// one i16 per byte pair).
    unsafe fn dot_scaled(acc: __m256i, u: __m256i, x: __m256i, sc: __m256i) -> __m256i;
}

struct Avx2;
struct AvxVnni;
struct Avx512Vnni;

impl Isa for Avx2 {
    #[inline(always)]
    unsafe fn dot(acc: __m256i, u: __m256i, x: __m256i) -> __m256i {
        _mm256_add_epi32(
            acc,
            _mm256_madd_epi16(_mm256_maddubs_epi16(u, x), _mm256_set1_epi16(1)),
        )
    }
    #[inline(always)]
    unsafe fn dot_scaled(acc: __m256i, u: __m256i, x: __m256i, sc: __m256i) -> __m256i {
        _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, x), sc))
    }
}

impl Isa for AvxVnni {
    #[inline(always)]
    unsafe fn dot(acc: __m256i, u: __m256i, x: __m256i) -> __m256i {
        _mm256_dpbusd_avx_epi32(acc, u, x)
    }
    #[inline(always)]
    unsafe fn dot_scaled(acc: __m256i, u: __m256i, x: __m256i, sc: __m256i) -> __m256i {
        _mm256_dpwssd_avx_epi32(acc, _mm256_maddubs_epi16(u, x), sc)
    }
}

impl Isa for Avx512Vnni {
    #[inline(always)]
    unsafe fn dot(acc: __m256i, u: __m256i, x: __m256i) -> __m256i {
        _mm256_dpbusd_epi32(acc, u, x)
    }
    #[inline(always)]
    unsafe fn dot_scaled(acc: __m256i, u: __m256i, x: __m256i, sc: __m256i) -> __m256i {
        _mm256_dpwssd_epi32(acc, _mm256_maddubs_epi16(u, x), sc)
    }
}

#[inline(always)]
unsafe fn f16_at(p: *const u8) -> f32 {
    let bits = i32::from(u16::from_le_bytes([*p, *p.add(1)]));
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(bits)))
}

/// The lanes summed in the reference's order.
#[inline(always)]
unsafe fn sum_lanes(v: __m256) -> f32 {
    let h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let q = _mm_add_ps(h, _mm_movehl_ps(h, h));
    _mm_cvtss_f32(_mm_add_ss(q, _mm_shuffle_ps::<1>(q, q)))
}

/// 16 bytes of nibbles as 32 values: the low nibbles, then the high ones.
#[inline(always)]
unsafe fn nibbles16(p: *const u8) -> __m256i {
    let q = _mm_loadu_si128(p as *const __m128i);
    let m = _mm_set1_epi8(0x0F);
    let lo = _mm_and_si128(q, m);
    let hi = _mm_and_si128(_mm_srli_epi16::<4>(q), m);
    _mm256_set_m128i(hi, lo)
}

/// Bit i of the 32-bit word at `p` as byte i: 0x10 if set, else 0.
#[inline(always)]
unsafe fn high_bits(p: *const u8) -> __m256i {
    let bits = u32::from_le_bytes([*p, *p.add(1), *p.add(2), *p.add(3)]) as i32;
    let v = _mm256_set1_epi32(bits);
    let spread = _mm256_shuffle_epi8(
        v,
        _mm256_set_epi64x(
            0x0303030303030303,
            0x0202020202020202,
            0x0101010101010101,
            0,
        ),
    );
    let select = _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe_u64 as i64);
    let set = _mm256_cmpeq_epi8(_mm256_or_si256(spread, select), _mm256_set1_epi64x(-1));
    _mm256_and_si256(set, _mm256_set1_epi8(0x10))
}

#[inline(always)]
unsafe fn dispatch<I: Isa>(w: QView<'_>, acts: &Acts, rows: Range<usize>, out: &mut [f32]) {
    let t = acts.tokens();
    let len = rows.len();
    for (k, r) in rows.enumerate() {
        let row = w.row(r);
        let mut tok = 0;
        while tok < t {
            let n = (t - tok).min(TILE);
            let mut res = [0f32; TILE];
            match n {
                4 => row_tile::<I, 4>(w.ty, row, acts, tok, &mut res),
                3 => row_tile::<I, 3>(w.ty, row, acts, tok, &mut res),
                2 => row_tile::<I, 2>(w.ty, row, acts, tok, &mut res),
                _ => row_tile::<I, 1>(w.ty, row, acts, tok, &mut res),
            }
            for (i, v) in res[..n].iter().enumerate() {
                out[(tok + i) * len + k] = *v;
            }
            tok += n;
        }
    }
}

#[inline(always)]
unsafe fn row_tile<I: Isa, const N: usize>(
    ty: WeightType,
    row: &[u8],
    acts: &Acts,
    t0: usize,
    res: &mut [f32; TILE],
) {
    match ty {
        WeightType::Q4_0 => legacy::<I, N, Q4_0>(row, acts, t0, res),
        WeightType::Q5_0 => legacy::<I, N, Q5_0>(row, acts, t0, res),
        WeightType::Q8_0 => legacy::<I, N, Q8_0>(row, acts, t0, res),
        WeightType::Q4_1 => legacy::<I, N, Q4_1>(row, acts, t0, res),
        WeightType::Q5_1 => legacy::<I, N, Q5_1>(row, acts, t0, res),
        WeightType::Q4K => kquant::<I, N, false>(row, acts, t0, res),
        WeightType::Q5K => kquant::<I, N, true>(row, acts, t0, res),
        WeightType::Q6K => q6k::<I, N>(row, acts, t0, res),
        WeightType::F32 | WeightType::F16 | WeightType::BF16 => float::<N>(ty, row, acts, t0, res),
    }
}

/// A 32-value block format with one scale (and maybe a minimum) per block.
trait Legacy {
    const BYTES: usize;
    /// Offset of the minimum (an f16), for the formats that have one.
    const MIN_AT: Option<usize>;
    /// Whether the weights are signed (then `decode` gives the signed bytes).
    const SIGNED: bool;
    unsafe fn decode(block: *const u8) -> __m256i;
}

struct Q4_0;
struct Q5_0;
struct Q8_0;
struct Q4_1;
struct Q5_1;

impl Legacy for Q4_0 {
    const BYTES: usize = 18;
    const MIN_AT: Option<usize> = None;
    const SIGNED: bool = true;
    #[inline(always)]
    unsafe fn decode(b: *const u8) -> __m256i {
        _mm256_sub_epi8(nibbles16(b.add(2)), _mm256_set1_epi8(8))
    }
}

impl Legacy for Q5_0 {
    const BYTES: usize = 22;
    const MIN_AT: Option<usize> = None;
    const SIGNED: bool = true;
    #[inline(always)]
    unsafe fn decode(b: *const u8) -> __m256i {
        let u = _mm256_or_si256(nibbles16(b.add(6)), high_bits(b.add(2)));
        _mm256_sub_epi8(u, _mm256_set1_epi8(16))
    }
}

impl Legacy for Q8_0 {
    const BYTES: usize = 34;
    const MIN_AT: Option<usize> = None;
    const SIGNED: bool = true;
    #[inline(always)]
    unsafe fn decode(b: *const u8) -> __m256i {
        _mm256_loadu_si256(b.add(2) as *const __m256i)
    }
}

impl Legacy for Q4_1 {
    const BYTES: usize = 20;
    const MIN_AT: Option<usize> = Some(2);
    const SIGNED: bool = false;
    #[inline(always)]
    unsafe fn decode(b: *const u8) -> __m256i {
        nibbles16(b.add(4))
    }
}

impl Legacy for Q5_1 {
    const BYTES: usize = 24;
    const MIN_AT: Option<usize> = Some(2);
    const SIGNED: bool = false;
    #[inline(always)]
    unsafe fn decode(b: *const u8) -> __m256i {
        _mm256_or_si256(nibbles16(b.add(8)), high_bits(b.add(4)))
    }
}

#[inline(always)]
unsafe fn x_chunk(acts: &Acts, t: usize, c: usize) -> __m256i {
    _mm256_loadu_si256(acts.qs(t).as_ptr().add(c * 32) as *const __m256i)
}

#[inline(always)]
unsafe fn legacy<I: Isa, const N: usize, F: Legacy>(
    row: &[u8],
    acts: &Acts,
    t0: usize,
    res: &mut [f32; TILE],
) {
    let mut acc = [_mm256_setzero_ps(); N];
    let mut odd = [_mm256_setzero_ps(); N];
    let mut accm = [0f32; N];
    let blocks = row.len() / F::BYTES;
    let p = row.as_ptr();
    for b in 0..blocks {
        let block = p.add(b * F::BYTES);
        let w = F::decode(block);
        let mag = if F::SIGNED { _mm256_sign_epi8(w, w) } else { w };
        let d = f16_at(block);
        let m = F::MIN_AT.map(|at| f16_at(block.add(at)));
        for i in 0..N {
            let t = t0 + i;
            let x = x_chunk(acts, t, b);
            let x = if F::SIGNED { _mm256_sign_epi8(x, w) } else { x };
            let lanes = I::dot(_mm256_setzero_si256(), mag, x);
            let dx = *acts.scales(t).get_unchecked(b);
            let chain = if b % 2 == 0 { &mut acc[i] } else { &mut odd[i] };
            *chain = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lanes), _mm256_set1_ps(d * dx), *chain);
            if let Some(m) = m {
                let bsum = *acts.bsum(t).get_unchecked(b);
                accm[i] = (bsum as f32).mul_add(m * dx, accm[i]);
            }
        }
    }
    for i in 0..N {
        res[i] = (sum_lanes(acc[i]) + sum_lanes(odd[i])) + accm[i];
    }
}

/// Q4_K (`FIVE` false) and Q5_K (`FIVE` true).
#[inline(always)]
unsafe fn kquant<I: Isa, const N: usize, const FIVE: bool>(
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
    let m4 = _mm256_set1_epi8(0x0F);
    for g in 0..row.len() / bytes {
        let block = p.add(g * bytes);
        let scales = std::slice::from_raw_parts(block.add(4), 12);
        let qh = if FIVE {
            _mm256_loadu_si256(block.add(16) as *const __m256i)
        } else {
            _mm256_setzero_si256()
        };
        let mut total = [_mm256_setzero_si256(); N];
        let mut mins = [0i32; N];
        for pair in 0..4 {
            let q = _mm256_loadu_si256(block.add(qs_at + 32 * pair) as *const __m256i);
            for half in 0..2 {
                let c = 2 * pair + half;
                let mut u = if half == 0 {
                    _mm256_and_si256(q, m4)
                } else {
                    _mm256_and_si256(_mm256_srli_epi16::<4>(q), m4)
                };
                if FIVE {
                    let bit = _mm256_and_si256(
                        _mm256_srl_epi16(qh, _mm_cvtsi32_si128(c as i32)),
                        _mm256_set1_epi8(1),
                    );
                    u = _mm256_or_si256(u, _mm256_slli_epi16::<4>(bit));
                }
                let (sc, m) = scale_min_k4(c, scales);
                let sc16 = _mm256_set1_epi16(i16::from(sc));
                for i in 0..N {
                    let t = t0 + i;
                    total[i] = I::dot_scaled(total[i], u, x_chunk(acts, t, g * 8 + c), sc16);
                    mins[i] += i32::from(m) * *acts.bsum(t).get_unchecked(g * 8 + c);
                }
            }
        }
        let d = f16_at(block);
        let dmin = f16_at(block.add(2));
        for i in 0..N {
            let dx = *acts.scales(t0 + i).get_unchecked(g);
            acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(total[i]), _mm256_set1_ps(d * dx), acc[i]);
            accm[i] = (mins[i] as f32).mul_add(-(dmin * dx), accm[i]);
        }
    }
    for i in 0..N {
        res[i] = sum_lanes(acc[i]) + accm[i];
    }
}

#[inline(always)]
unsafe fn q6k<I: Isa, const N: usize>(row: &[u8], acts: &Acts, t0: usize, res: &mut [f32; TILE]) {
    let mut acc = [_mm256_setzero_ps(); N];
    let p = row.as_ptr();
    let m4 = _mm256_set1_epi8(0x0F);
    let m2 = _mm256_set1_epi8(0x03);
    let off = _mm256_set1_epi8(32);
    for g in 0..row.len() / 210 {
        let block = p.add(g * 210);
        let mut total = [_mm256_setzero_si256(); N];
        for n in 0..2 {
            let ql0 = _mm256_loadu_si256(block.add(64 * n) as *const __m256i);
            let ql1 = _mm256_loadu_si256(block.add(64 * n + 32) as *const __m256i);
            let qh = _mm256_loadu_si256(block.add(128 + 32 * n) as *const __m256i);
            for k in 0..4 {
                let c = 4 * n + k;
                let low = match k {
                    0 => _mm256_and_si256(ql0, m4),
                    1 => _mm256_and_si256(ql1, m4),
                    2 => _mm256_and_si256(_mm256_srli_epi16::<4>(ql0), m4),
                    _ => _mm256_and_si256(_mm256_srli_epi16::<4>(ql1), m4),
                };
                let high =
                    _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * k as i32)), m2);
                let w = _mm256_sub_epi8(_mm256_or_si256(low, _mm256_slli_epi16::<4>(high)), off);
                let mag = _mm256_sign_epi8(w, w);
                let sa = i16::from(*block.add(192 + 2 * c) as i8);
                let sb = i16::from(*block.add(193 + 2 * c) as i8);
                let sc16 = _mm256_set_m128i(_mm_set1_epi16(sb), _mm_set1_epi16(sa));
                for (i, t) in total.iter_mut().enumerate() {
                    let x = _mm256_sign_epi8(x_chunk(acts, t0 + i, g * 8 + c), w);
                    *t = I::dot_scaled(*t, mag, x, sc16);
                }
            }
        }
        let d = f16_at(block.add(208));
        for i in 0..N {
            let dx = *acts.scales(t0 + i).get_unchecked(g);
            acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(total[i]), _mm256_set1_ps(d * dx), acc[i]);
        }
    }
    for i in 0..N {
        res[i] = sum_lanes(acc[i]);
    }
}

#[inline(always)]
unsafe fn float<const N: usize>(
    ty: WeightType,
    row: &[u8],
    acts: &Acts,
    t0: usize,
    res: &mut [f32; TILE],
) {
    let mut acc = [_mm256_setzero_ps(); N];
    let p = row.as_ptr();
    let cols = acts.cols();
    for c in 0..cols / 8 {
        let w = match ty {
            WeightType::F32 => _mm256_loadu_ps(p.add(c * 32) as *const f32),
            WeightType::F16 => _mm256_cvtph_ps(_mm_loadu_si128(p.add(c * 16) as *const __m128i)),
            _ => {
                let h = _mm256_cvtepu16_epi32(_mm_loadu_si128(p.add(c * 16) as *const __m128i));
                _mm256_castsi256_ps(_mm256_slli_epi32::<16>(h))
            }
        };
        for (i, a) in acc.iter_mut().enumerate() {
            let x = _mm256_loadu_ps(acts.floats(t0 + i).as_ptr().add(c * 8));
            *a = _mm256_fmadd_ps(w, x, *a);
        }
    }
    for i in 0..N {
        res[i] = sum_lanes(acc[i]);
    }
}
